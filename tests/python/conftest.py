"""pytest setup of kolo.torch's tests: every rank of a kolorun job runs the same tests in the same
order (their collectives meet), with one engine for the whole session.

Run: build/tools/kolorun -np 2 /usr/bin/python3 -m pytest -x -q tests/python
     (PYTHONPATH=build/python; ctest runs it as python_torch_np2 and python_torch_np3).
"""
import faulthandler
import os
import subprocess
import sys
import tempfile
import threading

import pytest
import torch

import kolo.torch as hvd

# The dtypes kolo's core reduces, and the ones it refuses for now.
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8, torch.int16]
UNSUPPORTED = [torch.bool, torch.complex64]


# A test that runs longer than this dumps every thread's Python stack and ends its rank (kolorun
# then stops the others), so a hang shows where it is instead of running into ctest's limit.
WATCHDOG_S = float(os.environ.get("KOLO_TEST_WATCHDOG_S", "300"))


@pytest.fixture(autouse=True)
def watchdog(request):
    def fire():
        # Output capture off (the plugin API pytest-timeout uses), or the stacks would be lost.
        request.config.pluginmanager.getplugin("capturemanager").suspend_global_capture(in_=True)
        print("watchdog: %s ran over %g s (KOLO_TEST_WATCHDOG_S) on rank %d; every thread:" % (
            request.node.nodeid, WATCHDOG_S, hvd.rank()), file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(WATCHDOG_S, fire)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()


@pytest.fixture(scope="session", autouse=True)
def kolo_job():
    hvd.init()
    yield
    hvd.barrier()  # nobody shuts down while a peer still runs a collective
    hvd.shutdown()


def run_two_rank_job(script_text, here):
    """Runs `script_text` as a 2-rank kolorun job of its own (without this job's KOLO_ settings)
    where `here` is true (one rank of this job), returning the finished process, else None.
    Every rank calls it: where KOLO_TEST_KOLORUN (the kolorun binary, set by ctest) is not
    given, every rank skips the test."""
    kolorun = os.environ.get("KOLO_TEST_KOLORUN")
    if not kolorun:
        pytest.skip("KOLO_TEST_KOLORUN (the kolorun binary) is not set")
    if not here:
        return None
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "job.py")
        with open(script, "w") as f:
            f.write(script_text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KOLO_")}
        return subprocess.run([kolorun, "-np", "2", sys.executable, script], env=env,
                              capture_output=True, text=True, timeout=120)
