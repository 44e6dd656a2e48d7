"""pytest setup of kolo.torch's tests: every rank of a kolorun job runs the same tests in the same
order (their collectives meet), with one engine for the whole session.

Run: build/tools/kolorun -np 2 /usr/bin/python3 -m pytest -x -q tests/python
     (PYTHONPATH=build/python; ctest runs it as python_torch_np2 and python_torch_np3).
"""
import faulthandler
import os
import sys
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
