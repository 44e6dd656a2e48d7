"""kolo's core bindings (kolo._core) where Python can break them: enum values outside kolo's
tables, a buffer resized while a collective writes it, Ctrl-C in a blocking collective, objects
made with __new__ and never initialised, arguments that must be named when refused, the
engine's refusal of overlapping buffers and the timeline's per-rank path. Runs
under kolorun at 2 and 3 ranks with the other files here (conftest.py)."""
import json
import os
import threading
import time

import numpy as np
import pytest

import kolo
import kolo.torch as hvd
from conftest import run_two_rank_job

r = n = None  # this rank and the rank count, set before each test


@pytest.fixture(autouse=True)
def topology():
    global r, n
    r, n = hvd.rank(), hvd.size()


@pytest.fixture(scope="module")
def comm():
    # Every rank makes the same calls, so each one joins the same new communicator.
    return kolo.Communicator.init()


def test_enum_values_outside_kolo_are_refused():
    # py::enum_ builds any uint8 value; DType(12) once read past the name table ('sum').
    for value in (9, 12, 15, 100, 255):
        with pytest.raises(kolo.InvalidArgumentError, match="dtype %d is not a kolo dtype" % value):
            kolo.dtype_name(kolo.DType(value))
        with pytest.raises(kolo.InvalidArgumentError, match="dtype %d" % value):
            kolo.dtype_size(kolo.DType(value))
    assert [kolo.dtype_name(d) for d in (kolo.DType.FLOAT32, kolo.DType.INT16)] == [
        "float32", "int16"]


def test_buffer_cannot_be_resized_while_a_collective_uses_it(comm):
    # Rank 0 comes late, so the others' allreduce is still waiting (and would later write the
    # memory) while their main thread tries to resize or release the buffers.
    size = 64 << 20
    send, recv = bytearray(b"\x01" * size), memoryview(bytearray(size))
    errors = []

    def run():
        try:
            comm.allreduce(send, recv)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    if r == 0:
        time.sleep(1.0)
    worker = threading.Thread(target=run)
    worker.start()
    if r != 0:
        time.sleep(0.3)
        assert worker.is_alive(), "the allreduce did not wait for rank 0"
        with pytest.raises(BufferError):
            send.extend(b"\x01" * 4096)
        with pytest.raises(BufferError):
            recv.release()
    worker.join()
    assert not errors, errors
    assert len(send) == size and recv[0] == n and recv[size - 1] == n


# Rank 0 sends itself SIGINT 1 s into an allreduce that rank 1 joins only once rank 0's call has
# ended; the deadline is 30 s. Each rank prints one RESULT line; rank 0 stays until rank 1 is
# done, so that rank 1 can read its abort reason from the store rank 0 hosts.
SIGINT_SCRIPT = r"""
import json, os, signal, sys, threading, time
os.environ["KOLO_TIMEOUT_SECONDS"] = "30"
os.environ["KOLO_TRANSPORT"] = TRANSPORT
import numpy as np, kolo
c = kolo.Communicator.init()
x = np.ones(1 << 20, np.float32)
folder = os.path.dirname(os.path.abspath(__file__))
def wait_for(name):
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(folder, name)) and time.time() < deadline:
        time.sleep(0.05)
def mark(name):
    open(os.path.join(folder, name), "w").close()
result = {}
if c.rank == 1:
    wait_for("rank0.done")
    try:
        c.allreduce(x, x)
        c.barrier()  # a rank whose part of a call was complete may finish it: then this fails
        result["error"] = None
    except kolo.KoloError as e:
        result["error"], result["message"] = type(e).__name__, str(e)
    mark("rank1.done")
else:
    if SIGNAL == signal.SIGUSR1:  # a handler that calls the communicator the wait holds
        signal.signal(signal.SIGUSR1, lambda number, frame: c.barrier())
    threading.Timer(1.0, lambda: os.kill(os.getpid(), SIGNAL)).start()
    start = time.time()
    try:
        c.allreduce(x, x)
        result["error"] = None
    except KeyboardInterrupt:
        result["error"] = "KeyboardInterrupt"
    except BaseException as e:
        result["error"], result["message"] = type(e).__name__, str(e)
    result["seconds"] = time.time() - start
    mark("rank0.done")
    try:
        c.barrier()
    except kolo.KoloError as e:
        result["next"] = str(e)
    wait_for("rank1.done")
print("RESULT " + json.dumps(result), flush=True)
"""


def job_results(done):
    found = {}
    for line in done.stdout.splitlines():
        if "RESULT " in line:
            found[int(line[line.index("[") + 1:line.index("]")])] = json.loads(
                line.split("RESULT ", 1)[1])
    assert sorted(found) == [0, 1], done.stdout + done.stderr
    return found


@pytest.mark.parametrize("transport,signal_name,error", [
    ("shm", "SIGINT", "KeyboardInterrupt"), ("tcp", "SIGINT", "KeyboardInterrupt"),
    # A handler calling the Communicator whose lock the waiting call holds deadlocked.
    ("shm", "SIGUSR1", "InvalidArgumentError")])
def test_ctrl_c_interrupts_a_blocking_collective(transport, signal_name, error):
    # Before, the signal waited for the deadline (here 30 s), and its KeyboardInterrupt was then
    # lost: a RuntimeError (the timeout) came out instead.
    script = SIGINT_SCRIPT.replace("TRANSPORT", repr(transport)).replace(
        "SIGNAL", "signal." + signal_name)
    done = run_two_rank_job(script, here=r == 0)
    if done:
        results = job_results(done)
        first, late = results[0], results[1]
        assert first["error"] == error, first
        assert first["seconds"] < 5.0, first  # SIGINT at 1 s, checked every 0.1 s
        assert "already failed" in first["next"], first
        assert late["error"] == "PeerLostError", late
        assert "lost rank 0" in late["message"], late
        assert "interrupted by a signal" in late["message"], late
    hvd.barrier()


def test_objects_never_initialised_are_refused():
    # Made with __new__, their C++ objects were uninitialised memory (garbage, then a crash).
    for cls in (kolo.Communicator, kolo.Handle):
        with pytest.raises(TypeError, match="cannot be made directly"):
            cls.__new__(cls)
        with pytest.raises(TypeError, match="cannot be made directly"):
            cls()
    engine = kolo.Engine.__new__(kolo.Engine)
    for use in (engine.stats, engine.close, lambda: engine.communicator,
                lambda: engine.barrier()):
        with pytest.raises(TypeError, match="kolo.Engine was made with __new__ and never"):
            use()
    buf = kolo.SharedBuffer.__new__(kolo.SharedBuffer)
    with pytest.raises(TypeError, match="kolo.SharedBuffer was made with __new__ and never"):
        buf.nbytes  # noqa: B018
    view = memoryview(buf)  # Python's buffer slot cannot raise here: it shows no memory
    assert (view.nbytes, view.readonly) == (0, True)


def test_bad_arguments_are_named(comm):
    x = np.zeros(4 * n, np.float32)
    cases = [
        (kolo.InvalidArgumentError, "broadcast: root 9223372036854775808 is not in",
         lambda: comm.broadcast(x, 2**63)),
        (kolo.InvalidArgumentError, "broadcast: root -18446744073709551616 is not in",
         lambda: comm.broadcast(x, -2**64)),
        (TypeError, "broadcast: root must be an int, got float 1.5",
         lambda: comm.broadcast(x, 1.5)),
        (kolo.InvalidArgumentError, "split: color 9223372036854775808 is not -1",
         lambda: comm.split(2**63, 0)),
        (kolo.InvalidArgumentError, "split: key 9223372036854775808 does not fit",
         lambda: comm.split(0, 2**63)),
        (kolo.InvalidArgumentError, r"SharedBuffer: nbytes 9223372036854775808 is not in \[1",
         lambda: kolo.SharedBuffer(2**63)),
        (kolo.InvalidArgumentError, r"SharedBuffer: nbytes 0 is not in \[1",
         lambda: kolo.SharedBuffer(0)),
        (TypeError, "allreduce: op must be a kolo.ReduceOp, got str 'sum'",
         lambda: comm.allreduce(x, x, "sum")),
        (TypeError, "allreduce: op must be a kolo.ReduceOp, got int 99",
         lambda: comm.allreduce(x, x, 99)),
        (TypeError, "allreduce: send must support the buffer protocol .* got NoneType",
         lambda: comm.allreduce(None, x)),
        (TypeError, "reduce_scatter: recv must support the buffer protocol .* got list",
         lambda: comm.reduce_scatter(x, [0.0])),
        (TypeError, "broadcast: data must support the buffer protocol",
         lambda: comm.broadcast(None)),
        # Communicator::alltoall's checks said "alltoallv".
        (kolo.InvalidArgumentError, "^kolo invalid argument error: alltoall: the send and "
         "receive buffers overlap", lambda: comm.alltoall(x[:2 * n], x[1:2 * n + 1])),
    ]
    for cls, pattern, call in cases:
        with pytest.raises(cls, match=pattern):
            call()
    comm.broadcast(x, n - 1)  # nothing was left half-done: the communicator still works
    assert kolo.SharedBuffer(3).nbytes == 3


def test_engine_refuses_partly_overlapping_buffers_and_goes_on():
    # Accepted before, it failed inside the engine and stopped it on this rank ("engine stopped"
    # for every later op) while the other ranks waited out their deadline.
    from kolo.torch.basics import _engine
    engine = _engine()
    x = np.ones(100001, np.float32)
    address = x.__array_interface__["data"][0]
    with pytest.raises(kolo.InvalidArgumentError,
                       match="allreduce of 'core.ovl': the send and receive buffers overlap"):
        engine.allreduce("core.ovl", address, address + 4, kolo.DType.FLOAT32, [100000])
    handle = engine.allreduce("core.ovl", address, address, kolo.DType.FLOAT32, [100000])
    handle.wait()
    handle.check()
    assert x[0] == n and x[99999] == n and x[100000] == 1


def test_start_timeline_applies_the_rank_once(tmp_path):
    # The binding and the engine each made the path per rank: rank 1 of "t%r.json" wrote
    # "t1.json.rank1". One place does it now, for the C API too.
    hvd.start_timeline(str(tmp_path / "t%r.json"))
    import torch
    hvd.allreduce(torch.ones(4), name="core.tl")
    hvd.stop_timeline()
    assert sorted(os.listdir(tmp_path)) == ["t%d.json" % r]
    with open(tmp_path / ("t%d.json" % r)) as f:
        assert "core.tl" in json.dumps(json.load(f))
