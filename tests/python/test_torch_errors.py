"""kolo.torch's errors as a Horovod user meets them: mismatched calls and a name pending on one
rank (HorovodInternalError on every rank), a lost rank, HOROVOD_* settings honoured or named,
unsupported inputs and bad arguments refused naming them. Runs under kolorun at 2 and 3 ranks
(conftest.py), with test_torch_api.py."""
import json
import os
import tempfile
import threading
import time
import warnings

import pytest
import torch

import kolo
import kolo.torch as hvd
from conftest import DTYPES, UNSUPPORTED, run_two_rank_job

r = n = None  # this rank and the rank count, set before each test


@pytest.fixture(autouse=True)
def topology():
    global r, n
    r, n = hvd.rank(), hvd.size()


def test_mismatches_raise_horovod_internal_error():
    cases = [
        ("shape", lambda: hvd.allreduce(torch.zeros(r + 1), name="mm.shape")),
        ("dtype", lambda: hvd.allreduce(torch.zeros(2, dtype=DTYPES[r % 2]), name="mm.dtype")),
        ("reduce op", lambda: hvd.allreduce(torch.zeros(2), name="mm.op",
                                            op=hvd.Sum if r == 0 else hvd.Max)),
        ("root", lambda: hvd.broadcast(torch.zeros(2), r, name="mm.root")),
        ("shape", lambda: hvd.allgather(torch.zeros(1, r + 1), name="mm.gather")),
        # Each rank groups its own number of members: all of them fail on every rank, none
        # stays pending (the next case reuses the name and must get the closed form).
        ("group", lambda: hvd.grouped_allreduce([torch.ones(3)] * (1 + r), name="mm.group")),
    ]
    for field, call in cases:
        with pytest.raises(hvd.HorovodInternalError, match=field + " mismatch") as caught:
            call()
        assert isinstance(caught.value, kolo.MismatchError)
        assert isinstance(caught.value, kolo.KoloError)
    # A member whose dtype differs on one rank is named with both dtypes (groups hold one dtype,
    # so the ranks' groups differ in size, which alone read as a group mismatch).
    mixed = [torch.ones(3), torch.ones(2, dtype=torch.float64 if r == 0 else torch.float32)]
    with pytest.raises(kolo.MismatchError,
                       match="member 'mm.mixed.1' is float64 on rank 0 and float32 on rank 1"):
        hvd.grouped_allreduce(mixed, name="mm.mixed")
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n  # later ops are unaffected
    out = hvd.grouped_allreduce([torch.full((3,), r + 1.0), torch.full((3,), 10.0 * (r + 1))],
                                name="mm.group", op=hvd.Sum)
    assert [t.tolist() for t in out] == [[n * (n + 1) / 2] * 3, [5.0 * n * (n + 1)] * 3]


@pytest.mark.parametrize("names", [("KOLO_STALL_SHUTDOWN_SECONDS", "KOLO_STALL_CHECK_SECONDS"),
                                   ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
                                    "HOROVOD_STALL_CHECK_TIME_SECONDS")], ids=["kolo", "horovod"])
def test_name_pending_on_one_rank_fails_after_stall_timeout(monkeypatch, names):
    hvd.shutdown()
    monkeypatch.setenv(names[0], "2")
    monkeypatch.setenv(names[1], "1")
    hvd.init()
    try:
        if r == 0:
            start = time.time()
            with pytest.raises(hvd.HorovodInternalError, match="stall"):
                hvd.allreduce(torch.ones(2), name="only.on.rank.0")
            assert time.time() - start < 30
        # The engine's other ops would stall too while rank 0 waits: meet outside it.
        hvd.basics._state.world.barrier()
    finally:
        hvd.shutdown()
        monkeypatch.undo()
        hvd.init()


def _reinit(monkeypatch, **env):
    """Restarts the engine with `env` set (undone, and the engine restarted, by the caller)."""
    hvd.shutdown()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    hvd.init()


def _fused_tensors(names):
    """Reduces one small tensor per name, submitted together; the tensors the engine fused."""
    before = hvd.basics._engine().stats()["fused_tensors"]
    handles = [hvd.allreduce_async(torch.ones(100), name=name) for name in names]
    for handle in handles:
        assert hvd.synchronize(handle).tolist() == [1.0] * 100
    return hvd.basics._engine().stats()["fused_tensors"] - before


def test_horovod_settings_are_honoured(monkeypatch):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "hvd_trace.json")
        try:
            _reinit(monkeypatch, HOROVOD_FUSION_THRESHOLD="0", HOROVOD_TIMELINE=path)
            assert _fused_tensors(["hvd.env.%d" % i for i in range(6)]) == 0
            hvd.shutdown()  # the timeline is complete
            with open(path if r == 0 else path + ".rank%d" % r) as f:
                assert any(e.get("name") == "ALLREDUCE" for e in json.load(f))
            # The settings went with the Horovod variables: the default fuses again.
            monkeypatch.undo()
            hvd.init()
            assert "KOLO_FUSION_THRESHOLD" not in os.environ
            assert _fused_tensors(["hvd.env.fused.%d" % i for i in range(6)]) > 0
        finally:
            hvd.shutdown()
            monkeypatch.undo()
            hvd.init()


def test_horovod_settings_kolo_wins_and_unknown_ones_are_named(monkeypatch):
    try:
        with pytest.warns(UserWarning) as caught:
            _reinit(monkeypatch, HOROVOD_FUSION_THRESHOLD="0", KOLO_FUSION_THRESHOLD="1048576",
                    HOROVOD_AUTOTUNE="1")
        text = " | ".join(str(w.message) for w in caught)
        assert "HOROVOD_FUSION_THRESHOLD='0' is ignored: KOLO_FUSION_THRESHOLD" in text, text
        assert "ignores these Horovod settings: HOROVOD_AUTOTUNE" in text, text
        assert _fused_tensors(["hvd.wins.%d" % i for i in range(6)]) > 0
    finally:
        hvd.shutdown()
        monkeypatch.undo()
        hvd.init()


def test_an_empty_kolo_variable_counts_as_unset(monkeypatch):
    # As in kolo's C++ (env::get): the Horovod setting applies, with no "kolo's wins" warning
    # (before: warned that KOLO_FUSION_THRESHOLD='' won, and the default applied instead).
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _reinit(monkeypatch, HOROVOD_FUSION_THRESHOLD="0", KOLO_FUSION_THRESHOLD="")
        assert not [str(w.message) for w in caught if "is ignored" in str(w.message)]
        assert os.environ["KOLO_FUSION_THRESHOLD"] == "0"
        assert _fused_tensors(["hvd.empty.%d" % i for i in range(6)]) == 0
    finally:
        hvd.shutdown()
        monkeypatch.undo()
        hvd.init()


def test_a_timeline_file_that_cannot_open_names_horovod_timeline(monkeypatch):
    # Before: "timeline: cannot open '...'" named neither HOROVOD_TIMELINE nor KOLO_TIMELINE.
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "missing", "hvd_trace.json")
        try:
            with pytest.raises(kolo.IoError,
                               match=r"HOROVOD_TIMELINE='.*' \(kolo's KOLO_TIMELINE\): .*"
                                     r"timeline: cannot open"):
                _reinit(monkeypatch, HOROVOD_TIMELINE=path)
            assert not hvd.is_initialized()
        finally:
            monkeypatch.undo()
            hvd.init()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n


@pytest.mark.parametrize("name,value", [("HOROVOD_FUSION_THRESHOLD", "64MB"),
                                        ("HOROVOD_CYCLE_TIME", "-1"),
                                        ("HOROVOD_LOG_LEVEL", "loud"),
                                        ("HOROVOD_STALL_CHECK_DISABLE", "maybe")])
def test_bad_horovod_setting_is_named(monkeypatch, name, value):
    try:
        with pytest.raises(kolo.InvalidArgumentError, match=name):
            _reinit(monkeypatch, **{name: value})
        assert not hvd.is_initialized()
    finally:
        monkeypatch.undo()
        hvd.init()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n


LOST_RANK_SCRIPT = """
import os, kolo.torch as hvd, torch
hvd.init()
hvd.barrier()
if hvd.rank() == 1:
    os._exit(0)  # vanishes without shutting down
try:
    hvd.allreduce(torch.ones(3), name="after.loss")
except hvd.HorovodInternalError as e:
    print("caught", type(e).__name__, e)
"""


def test_lost_rank_raises_horovod_internal_error():
    done = run_two_rank_job(LOST_RANK_SCRIPT, here=r == 0)  # a job of its own, from rank 0
    if done:
        assert "caught PeerLostError" in done.stdout, done.stdout + done.stderr
    hvd.barrier()


def test_unsupported_inputs_are_refused_clearly():
    for dtype in UNSUPPORTED:
        with pytest.raises(TypeError, match=str(dtype)):
            hvd.allreduce(torch.zeros(2, dtype=dtype))
    with pytest.raises(ValueError, match="dense"):
        hvd.allreduce(torch.zeros(3).to_sparse())
    with pytest.raises(TypeError, match="tensor must be a torch.Tensor, got list"):
        hvd.allreduce([1.0, 2.0])
    # Gathering or scattering a scalar has no first dimension to work on (Horovod refuses it).
    with pytest.raises(ValueError, match="allgather of 'scalar.g': the tensor is 0-d"):
        hvd.allgather(torch.tensor(1.0), name="scalar.g")
    with pytest.raises(ValueError, match="reducescatter of .*0-d"):
        hvd.grouped_reducescatter([torch.ones(n), torch.tensor(1.0)])
    handle = hvd.allreduce_async(torch.ones(2), name="dup")
    with pytest.raises(ValueError, match="already pending"):
        hvd.allreduce_async(torch.ones(2), name="dup")
    assert hvd.synchronize(handle).tolist() == [1.0, 1.0]


def test_bad_arguments_are_refused_naming_them():
    # Each refused before anything is submitted (the next good op shows nothing is left
    # pending): once an AttributeError from deep inside, a pybind11 signature dump, or a value
    # silently truncated ("22" as splits [2, 2], root_rank 1.7 as 1).
    t = torch.ones(n)
    cases = [
        (ValueError, "grouped_allreduce needs at least one tensor",
         lambda: hvd.grouped_allreduce([])),
        (TypeError, r"grouped_allreduce: tensors\[1\] must be a torch.Tensor, got NoneType",
         lambda: hvd.grouped_allreduce([t, None])),
        (TypeError, "grouped_allreduce takes a list of tensors, got Tensor",
         lambda: hvd.grouped_allreduce_(t)),
        (TypeError, "grouped_allgather: tensors", lambda: hvd.grouped_allgather([None])),
        (TypeError, "tensor must be a torch.Tensor, got NoneType", lambda: hvd.allgather(None)),
        (TypeError, "prescale_factor must be a real number, got 'abc'",
         lambda: hvd.allreduce(t, prescale_factor="abc")),
        (TypeError, "postscale_factor must be a real number, got 1j",
         lambda: hvd.allreduce(t, postscale_factor=1j)),
        (TypeError, "root_rank must be an integer rank, got 1.7", lambda: hvd.broadcast(t, 1.7)),
        (ValueError, "root_rank 1099511627776 is not a rank of this job",
         lambda: hvd.broadcast(t, 2**40)),
        (TypeError, "compression must be Compression.none",
         lambda: hvd.allreduce(t, compression="fp16")),
        (ValueError, r"name 'a\\ud800b' is not valid text: surrogates not allowed",
         lambda: hvd.allreduce(t, name="a\ud800b")),
        (TypeError, "splits must be a list of row counts, got str",
         lambda: hvd.alltoall(t, splits="1" * n)),
        (TypeError, "splits must hold integer row counts, got 0.5",
         lambda: hvd.alltoall(t, splits=[0.5] * n)),
        (ValueError, "backward_passes_per_step must be an integer >= 1, got 0",
         lambda: hvd.DistributedOptimizer(torch.optim.SGD(torch.nn.Linear(2, 2).parameters(),
                                                          lr=0.1), backward_passes_per_step=0)),
        (ValueError, "num_groups must be an integer >= 0, got -1",
         lambda: hvd.DistributedOptimizer(torch.optim.SGD(torch.nn.Linear(2, 2).parameters(),
                                                          lr=0.1), num_groups=-1)),
    ]
    for kind, message, call in cases:
        with pytest.raises(kind, match=message):
            call()
    doubled = hvd.allreduce(t, op=hvd.Sum, prescale_factor=torch.tensor(2.0))
    assert doubled.tolist() == [2.0 * n] * n
    assert hvd.alltoall(t, splits=torch.ones(n, dtype=torch.int64))[0].tolist() == [1.0] * n


def test_an_object_one_rank_cannot_pickle_fails_everywhere():
    # Before: the other ranks waited in the collective for bytes never sent.
    unpicklable = lambda x: x  # noqa: E731 (a local lambda is what pickle refuses)
    if r == 0:
        with pytest.raises(AttributeError, match="pickle"):
            hvd.broadcast_object(unpicklable, root_rank=0)
    else:
        with pytest.raises(ValueError, match="broadcast_object: rank 0 could not pickle"):
            hvd.broadcast_object(None, root_rank=0)
    if r == n - 1:
        with pytest.raises(AttributeError, match="pickle"):
            hvd.allgather_object(unpicklable)
    else:
        with pytest.raises(ValueError, match="allgather_object: rank %d could not pickle" % (n - 1)):
            hvd.allgather_object(r)
    assert hvd.allgather_object(r) == list(range(n))


def test_alltoall_counts_that_differ_fail_on_every_rank():
    # Rank 0 passes twice the others' count: MismatchError on every rank, on every transport
    # (mpi at 3 ranks, where it corrupted the heap: mismatched_alltoall.py). A communicator of
    # its own: a failed one stays failed.
    comm = kolo.Communicator.init()
    count = (2 if r == 0 else 1) * 1024 * n
    x, y = torch.ones(count), torch.zeros(count)
    with pytest.raises(kolo.MismatchError):
        comm.alltoall(x.numpy(), y.numpy())


def test_a_process_set_refused_on_one_rank_is_refused_on_every_rank():
    # kolo.torch checked the list before the engine's collective: only the refusing rank raised,
    # the others waited out KOLO_TIMEOUT_SECONDS, and the job's communicator was lost for good.
    bad = r == n - 1
    with pytest.raises(ValueError, match="not ranks of a job" if bad else
                       "rank %d refused its call" % (n - 1)):
        hvd.add_process_set([0, n + 5] if bad else [0])
    first = hvd.add_process_set([0])  # nothing was added, and the job goes on
    assert first.ranks == [0] and hvd.remove_process_set(first)
    # Ranks are integers, never truncated ([0.7] was taken as rank 0).
    for ranks in ([0.7], ["0"], [False]):
        with pytest.raises(TypeError, match="ranks must be integers"):
            hvd.ProcessSet(ranks)
        with pytest.raises(TypeError, match="ranks must be integers"):
            hvd.add_process_set(ranks)
    with pytest.raises(TypeError, match="process_set must be a ProcessSet"):
        hvd.allreduce(torch.ones(1), process_set=[0])


def test_a_refused_init_of_process_sets_leaves_nothing_started():
    hvd.barrier()
    hvd.shutdown()
    with pytest.raises(TypeError, match="process_sets"):
        hvd.init(process_sets=hvd.ProcessSet([0]))
    assert not hvd.is_initialized()
    good = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match="not ranks of a job"):
        hvd.init(process_sets=[good, hvd.ProcessSet([0, n + 3])])
    assert not hvd.is_initialized() and good.process_set_id is None
    hvd.init(process_sets=[good])  # a corrected retry registers its sets
    assert good.process_set_id is not None and good.included() == (r == 0)
    hvd.barrier()
    assert hvd.remove_process_set(good)


def test_barriers_agree_again_after_a_barrier_refused_during_a_join():
    # The refused barrier was counted on the ranks that called it only: once every rank had
    # joined, their barriers had other names than the joined rank's and waited forever.
    if r == 0:
        hvd.join()
    else:
        with pytest.raises(hvd.HorovodInternalError, match="joined"):
            hvd.barrier()
        hvd.join()
    hvd.barrier()
    hvd.barrier()


def test_one_handle_synchronized_by_two_threads():
    # The second thread got a bare KeyError.
    if r == 0:
        time.sleep(0.5)  # both threads of the other ranks wait before the op can complete
    h = hvd.allreduce_async(torch.ones(3), name="two.threads", op=hvd.Sum)
    results = []

    def wait():
        try:
            results.append(hvd.synchronize(h).tolist())
        except ValueError as error:
            results.append(str(error))
    threads = [threading.Thread(target=wait) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [float(n)] * 3 in results
    if r != 0:
        assert any("synchronized by another thread" in str(x) for x in results), results
    hvd.barrier()


def test_a_root_mismatch_in_a_process_set_names_job_ranks():
    # The roots were the set's own indices (0 and 1) next to job ranks 1 and 2.
    if n < 3:
        pytest.skip("needs a process set of two ranks that is not the job")
    tail = hvd.add_process_set([1, 2])
    if tail.included():
        with pytest.raises(hvd.HorovodInternalError,
                           match="root mismatch: rank 1 has 1, rank 2 has 2"):
            hvd.broadcast(torch.zeros(2), r, name="mm.setroot", process_set=tail)
    hvd.barrier()
    assert hvd.remove_process_set(tail)


def test_a_process_set_whose_member_fails_setup_is_refused_on_every_rank(monkeypatch):
    # Rank 0 could not make the set's communicator (a bad KOLO_TRANSPORT, read then): the ranks
    # outside the set added it all the same, the registries differed, and the set could never be
    # added again.
    if r == 0:
        monkeypatch.setenv("KOLO_TRANSPORT", "bogus")
    with pytest.raises(kolo.InvalidArgumentError if r == 0 else kolo.PeerLostError,
                       match="KOLO_TRANSPORT='bogus'" if r == 0 else "rank 0 could not make the"):
        hvd.add_process_set([0])
    monkeypatch.delenv("KOLO_TRANSPORT", raising=False)
    again = hvd.add_process_set([0])
    assert again.included() == (r == 0)
    hvd.barrier()
    assert hvd.remove_process_set(again)
