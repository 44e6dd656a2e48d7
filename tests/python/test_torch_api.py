"""kolo.torch's collectives against closed-form results: rank r contributes values built from
r, so every expected result is a formula in the rank count n. Every supported dtype, the
out-of-place, in-place and asynchronous forms, process sets, join, gradients, objects, the
timeline, handles, the engine's lifecycle, Horovod's mpi_ops module path and the elastic API's
refusal (the errors: test_torch_errors.py). Runs under kolorun at 2 and 3 ranks (conftest.py)."""
import json
import os
import tempfile
import time

import pytest
import torch

import kolo
import kolo.torch as hvd
from conftest import DTYPES

r = n = None  # this rank and the rank count, set before each test


@pytest.fixture(autouse=True)
def topology():
    global r, n
    r, n = hvd.rank(), hvd.size()


SHAPES = [(), (5,), (3, 4)]
OPS = [hvd.Sum, hvd.Min, hvd.Max, hvd.Product, hvd.Average]


def contribution(shape, dtype, rank):
    """Rank `rank`'s tensor: rank + 1 + (flat index % 3)."""
    j = torch.arange(max(1, torch.Size(shape).numel()), dtype=torch.float64)[
        :torch.Size(shape).numel()].reshape(shape) % 3
    return (j + rank + 1).to(dtype)


def expected(shape, dtype, op):
    parts = torch.stack([contribution(shape, torch.float64, q) for q in range(n)])
    value = {hvd.Sum: parts.sum(0), hvd.Min: parts.min(0).values, hvd.Max: parts.max(0).values,
             hvd.Product: parts.prod(0), hvd.Average: parts.mean(0)}[op]
    return value.to(dtype)  # integer averages truncate, as kolo's core does


def test_topology():
    assert hvd.is_initialized()
    if "KOLO_SIZE" in os.environ:  # started by kolorun
        assert (n, r) == (int(os.environ["KOLO_SIZE"]), int(os.environ["KOLO_RANK"]))
    assert hvd.allgather(torch.tensor([r])).tolist() == list(range(n))
    assert (hvd.local_size(), hvd.local_rank()) == (n, r)  # one host
    assert (hvd.cross_size(), hvd.cross_rank()) == (1, 0)
    assert hvd.is_homogeneous()
    assert hvd.mpi_built() == kolo.build_info["mpi"]
    on_mpi = os.environ.get("KOLO_TRANSPORT") == "mpi"
    assert hvd.mpi_enabled() == on_mpi and hvd.mpi_threads_supported() == on_mpi
    assert not hvd.gloo_built() and not hvd.gloo_enabled() and not hvd.nccl_built()
    assert hvd.global_process_set.ranks == list(range(n))
    assert (hvd.global_process_set.size(), hvd.global_process_set.rank()) == (n, r)


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_every_op_and_form(dtype):
    for shape in SHAPES:
        for op in OPS:
            want = expected(shape, dtype, op)
            x = contribution(shape, dtype, r)
            assert torch.equal(hvd.allreduce(x, op=op), want), (shape, op)
            assert torch.equal(x, contribution(shape, dtype, r))  # input untouched
            assert torch.equal(hvd.synchronize(hvd.allreduce_async(x, op=op)), want)
            assert hvd.allreduce_(x, op=op) is x and torch.equal(x, want)
            y = contribution(shape, dtype, r)
            handle = hvd.allreduce_async_(y, op=op, name="inplace.%s.%s" % (shape, op))
            while not hvd.poll(handle):
                time.sleep(0.001)
            assert hvd.synchronize(handle) is y and torch.equal(y, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.bfloat16])
def test_allreduce_scale_factors(dtype):
    x = contribution((4,), dtype, r)
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=1.5)
    assert torch.equal(got, (expected((4,), torch.float64, hvd.Sum) * 3).to(dtype))
    got = hvd.allreduce(x * 2, op=hvd.Average, postscale_factor=float(n))
    assert torch.equal(got, expected((4,), torch.float64, hvd.Sum).to(dtype) * 2)


def test_allreduce_empty_and_average_argument():
    assert hvd.allreduce(torch.zeros(0, 3), op=hvd.Sum).shape == (0, 3)
    x = torch.ones(3)
    with pytest.warns(DeprecationWarning):
        assert torch.equal(hvd.allreduce(x, average=False), torch.full((3,), float(n)))
    with pytest.warns(DeprecationWarning):
        assert torch.equal(hvd.allreduce(x, average=True), x)
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(x, average=True, op=hvd.Sum)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(x, op=hvd.Adasum)
    with pytest.raises(ValueError, match="not one of"):
        hvd.allreduce(x, op=17)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_allreduce(dtype):
    shapes = [(2,), (3, 2), ()]
    want = [expected(s, dtype, hvd.Sum) for s in shapes]
    xs = [contribution(s, dtype, r) for s in shapes]
    assert all(map(torch.equal, hvd.grouped_allreduce(xs, op=hvd.Sum), want))
    assert all(map(torch.equal, hvd.synchronize(hvd.grouped_allreduce_async(xs, op=hvd.Sum)),
                   want))
    out = hvd.grouped_allreduce_(xs, op=hvd.Sum, name="grouped.inplace")
    assert all(a is b for a, b in zip(out, xs)) and all(map(torch.equal, xs, want))
    ys = [contribution(s, dtype, r) for s in shapes]
    hvd.synchronize(hvd.grouped_allreduce_async_(ys, op=hvd.Max))
    assert all(torch.equal(y, expected(s, dtype, hvd.Max)) for y, s in zip(ys, shapes))


def test_grouped_allreduce_mixed_dtypes():
    xs = [contribution((3,), torch.float32, r), contribution((2,), torch.int64, r)]
    got = hvd.grouped_allreduce(xs, op=hvd.Sum)
    assert torch.equal(got[0], expected((3,), torch.float32, hvd.Sum))
    assert torch.equal(got[1], expected((2,), torch.int64, hvd.Sum))


@pytest.mark.parametrize("compression", [hvd.Compression.fp16, hvd.Compression.bf16])
def test_compression(compression):
    x = contribution((6,), torch.float32, r)
    got = hvd.allreduce(x, op=hvd.Sum, compression=compression)
    assert got.dtype == torch.float32 and torch.equal(got, expected((6,), torch.float32, hvd.Sum))
    ints = hvd.allreduce(contribution((2,), torch.int32, r), op=hvd.Sum, compression=compression)
    assert torch.equal(ints, expected((2,), torch.int32, hvd.Sum))  # not cast: not floating


def gathered(shape_tail, dtype, rows_of):
    return torch.cat([torch.full((rows_of(q),) + shape_tail, q, dtype=dtype) for q in range(n)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather(dtype):
    for tail in [(), (3,), (2, 2)]:
        x = torch.full((r + 1,) + tail, r, dtype=dtype)
        want = gathered(tail, dtype, lambda q: q + 1)
        assert torch.equal(hvd.allgather(x), want)
        assert torch.equal(hvd.synchronize(hvd.allgather_async(x)), want)
    xs = [torch.full((r + 1, 2), r, dtype=dtype), torch.full((1,), r, dtype=dtype)]
    got = hvd.grouped_allgather(xs)
    assert torch.equal(got[0], gathered((2,), dtype, lambda q: q + 1))
    assert torch.equal(got[1], gathered((), dtype, lambda q: 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast(dtype):
    for root in range(n):
        for shape in SHAPES:
            x = contribution(shape, dtype, r)
            want = contribution(shape, dtype, root)
            assert torch.equal(hvd.broadcast(x, root), want)
            assert torch.equal(x, contribution(shape, dtype, r))
            assert torch.equal(hvd.synchronize(hvd.broadcast_async(x, root)), want)
            assert hvd.broadcast_(x, root) is x and torch.equal(x, want)
            y = contribution(shape, dtype, r)
            hvd.synchronize(hvd.broadcast_async_(y, root_rank=root))
            assert torch.equal(y, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_alltoall(dtype):
    # Equal parts: 2 rows to each rank, row k of rank q's tensor holds 10 q + k.
    x = (torch.arange(2 * n, dtype=torch.float64) + 10 * r).to(dtype)
    want = torch.cat([(torch.arange(2 * r, 2 * r + 2, dtype=torch.float64) + 10 * q)
                      for q in range(n)]).to(dtype)
    assert torch.equal(hvd.alltoall(x), want)
    out, received = hvd.synchronize(hvd.alltoall_async(x))
    assert torch.equal(out, want) and received.tolist() == [2] * n
    # Uneven: rank q sends p + 1 rows to rank p (a tensor of splits, and a list).
    rows = n * (n + 1) // 2
    x = (torch.arange(rows, dtype=torch.float64).unsqueeze(1).repeat(1, 2) + 10 * r).to(dtype)
    first = r * (r + 1) // 2
    want = torch.cat([(torch.arange(first, first + r + 1, dtype=torch.float64).unsqueeze(1)
                       .repeat(1, 2) + 10 * q) for q in range(n)]).to(dtype)
    for splits in (torch.arange(1, n + 1, dtype=torch.int32), list(range(1, n + 1))):
        out, received = hvd.alltoall(x, splits=splits)
        assert torch.equal(out, want) and received.tolist() == [r + 1] * n


@pytest.mark.parametrize("dtype", DTYPES)
def test_reducescatter(dtype):
    rows = 2 * n + 1  # uneven: rank 0 gets one row more
    x = (torch.arange(rows, dtype=torch.float64).unsqueeze(1).repeat(1, 3) % 3 + r + 1)
    full = sum((torch.arange(rows, dtype=torch.float64).unsqueeze(1).repeat(1, 3) % 3 + q + 1)
               for q in range(n))
    first = 2 * r + min(r, 1)
    mine = full[first:first + 2 + (1 if r == 0 else 0)]
    assert torch.equal(hvd.reducescatter(x.to(dtype), op=hvd.Sum), mine.to(dtype))
    assert torch.equal(hvd.synchronize(hvd.reducescatter_async(x.to(dtype), op=hvd.Average)),
                       (mine / n).to(dtype))
    got = hvd.grouped_reducescatter([x.to(dtype), x[:n].to(dtype)], op=hvd.Sum)
    assert torch.equal(got[0], mine.to(dtype))
    assert torch.equal(got[1], full[r:r + 1].to(dtype))


def test_join_with_uneven_batches():
    # Rank q has q + 1 batches; the i-th allreduce sums the ones of the ranks still going.
    for i in range(r + 1):
        assert hvd.allreduce(torch.ones(4), op=hvd.Sum).tolist() == [float(n - i)] * 4
    assert hvd.join() == n - 1
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(n)] * 2  # all back


def test_barrier():
    hvd.barrier()
    hvd.barrier(process_set=hvd.global_process_set)


def test_process_sets():
    evens = hvd.add_process_set([q for q in range(n) if q % 2 == 0])
    odds = hvd.add_process_set(hvd.ProcessSet([q for q in range(n) if q % 2 == 1]))
    mine, other = (evens, odds) if r % 2 == 0 else (odds, evens)
    assert mine.included() and not other.included() and other.rank() == -1
    assert mine.rank() == mine.ranks.index(r) and mine.size() == len(mine.ranks)
    x = torch.full((3,), float(r))
    assert hvd.allreduce(x, op=hvd.Sum, process_set=mine).tolist() == [float(sum(mine.ranks))] * 3
    assert hvd.allgather(x[:1], process_set=mine).tolist() == [float(q) for q in mine.ranks]
    root = mine.ranks[-1]
    assert hvd.broadcast(x, root, process_set=mine).tolist() == [float(root)] * 3
    got = hvd.grouped_allreduce([x, x[:1]], op=hvd.Max, process_set=mine)
    assert got[1].tolist() == [float(max(mine.ranks))]
    hvd.barrier(process_set=mine)
    with pytest.raises(ValueError, match="rank %d is not a member of process set %d" %
                       (r, other.process_set_id)):
        hvd.allreduce(x, process_set=other)
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(x, other.ranks[0], process_set=mine)
    if mine.size() != n:
        with pytest.raises(NotImplementedError, match="alltoall"):
            hvd.alltoall(x, process_set=mine)
    with pytest.raises(ValueError, match="exists already"):
        hvd.add_process_set(list(mine.ranks))
    with pytest.raises(ValueError, match="global"):
        hvd.remove_process_set(hvd.global_process_set)
    evens_ranks = list(evens.ranks)
    assert hvd.remove_process_set(evens) and hvd.remove_process_set(odds)
    # The engine freed both sets; their ranks may form new ones.
    again = hvd.add_process_set(evens_ranks)
    if again.included():
        got = hvd.allreduce(x, op=hvd.Sum, process_set=again).tolist()
        assert got == [float(sum(evens_ranks))] * 3
    assert hvd.remove_process_set(again)
    # Each rank registering a set of its own: refused on every rank, nothing registered
    # (the sets of one rank were removed just now).
    with pytest.raises(hvd.HorovodInternalError, match="differs between ranks: rank 0 uses "
                       r"\[0\], rank 1 uses \[1\]") as caught:
        hvd.add_process_set([r])
    assert isinstance(caught.value, kolo.MismatchError)
    assert mine.process_set_id is None and mine.size() is None
    with pytest.raises(ValueError, match="removed"):
        hvd.allreduce(x, process_set=mine)
    assert hvd.allreduce(x, op=hvd.Sum).tolist() == [float(n * (n - 1) // 2)] * 3


def test_gradients_flow_through_collectives():
    x = torch.ones(2, 3, requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum).sum().backward()
    assert torch.equal(x.grad, torch.full((2, 3), float(n)))
    x = torch.ones(r + 1, 2, requires_grad=True)
    hvd.allgather(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(r + 1, 2))
    x = torch.ones(3, requires_grad=True)
    hvd.broadcast(x, 0).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 1.0 if r == 0 else 0.0))
    x = torch.ones(2 * n, requires_grad=True)
    (hvd.alltoall(x) * 2).sum().backward()
    assert torch.equal(x.grad, torch.full((2 * n,), 2.0))
    x = torch.ones(n, 2, requires_grad=True)
    hvd.reducescatter(x, op=hvd.Sum).sum().backward()
    assert torch.equal(x.grad, torch.ones(n, 2))
    xs = [torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)]
    sum(t.sum() for t in hvd.grouped_allreduce(xs, op=hvd.Sum)).backward()
    assert all(torch.equal(t.grad, torch.full_like(t, float(n))) for t in xs)


def test_non_contiguous_tensors():
    base = contribution((4, 3), torch.float32, r)
    x = base.t()  # a view with swapped strides
    want = expected((4, 3), torch.float32, hvd.Sum).t()
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum), want)
    assert hvd.allreduce_(x, op=hvd.Sum) is x and torch.equal(base.t(), want)
    y = torch.zeros(4, 6)[:, ::2]
    y.fill_(float(r))
    hvd.broadcast_(y, n - 1)
    assert torch.equal(y, torch.full((4, 3), float(n - 1)))
    assert hvd.allgather(torch.full((3, 2), float(r)).t()).shape == (2 * n, 3)


def test_timeline():
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        hvd.start_timeline(path)
        hvd.allreduce(torch.ones(4), name="traced")
        hvd.stop_timeline()
        written = path if r == 0 else path + ".rank%d" % r
        with open(written) as f:
            events = json.load(f)
        assert any(e.get("name") == "ALLREDUCE" for e in events), events[:5]


def test_objects():
    obj = {"hello": 123, 0: [1, 2]} if r == 0 else None
    assert hvd.broadcast_object(obj, root_rank=0) == {"hello": 123, 0: [1, 2]}
    assert hvd.allgather_object({"rank": r, "pad": "x" * r}) == [
        {"rank": q, "pad": "x" * q} for q in range(n)]


def test_mpi_ops_is_horovods_module_path():
    from kolo.torch.mpi_ops import Average, allreduce_async_, synchronize
    x = torch.full((3,), float(r + 1))
    synchronize(allreduce_async_(x, name="mpi_ops.path", op=Average))
    assert x.tolist() == [(n + 1) / 2] * 3
    assert all(getattr(hvd.mpi_ops, name) is getattr(hvd, name) for name in hvd.mpi_ops.__all__)


def test_elastic_api_imports_and_refuses_use():
    """Horovod's elastic API: a script's definitions load, using them raises (docs/python.md)."""
    @hvd.elastic.run
    def train(state):
        return state

    class MyState(hvd.elastic.State):
        pass

    assert train.__name__ == "train"
    refusals = [(lambda: train(None), "run"),
                (lambda: hvd.elastic.TorchState(None, None, epoch=0), "TorchState"),
                (lambda: hvd.elastic.ElasticSampler(range(4)), "ElasticSampler"),
                (MyState, r"State \(subclassed by .*MyState\)")]
    for use, what in refusals:
        with pytest.raises(NotImplementedError, match=r"^kolo\.torch\.elastic\.%s: elastic "
                           r"training \(horovodrun --min-np/--max-np\) is not supported by kolo; "
                           r"run with a fixed world size" % what):
            use()
    with pytest.raises(hvd.HostsUpdatedInterrupt):  # a class an except clause can name
        raise hvd.HostsUpdatedInterrupt(skip_sync=True)
    assert not issubclass(hvd.HostsUpdatedInterrupt, hvd.HorovodInternalError)


def test_own_communicator_next_to_hvd():
    # A script that calls kolo.Communicator.init() itself while hvd's lives: rank 0 already
    # hosts the launcher's store, so this one joins it under a tag of its own.
    comm = kolo.Communicator.init()
    assert (comm.rank, comm.size) == (r, n)
    x = torch.full((4,), float(r + 1))
    comm.allreduce(x.numpy(), x.numpy(), kolo.ReduceOp.SUM)
    assert x.tolist() == [n * (n + 1) / 2] * 4
    flags = torch.tensor([1 << r, ~(1 << r)], dtype=torch.int64)
    comm.allreduce(flags.numpy(), flags.numpy(), kolo.ReduceOp.BOR)
    assert flags.tolist() == [(1 << n) - 1, -1]
    with pytest.raises(kolo.InvalidArgumentError, match="bits of integers"):
        comm.allreduce(x.numpy(), x.numpy(), kolo.ReduceOp.BXOR)
    # Any Python int is named in the message (once: pybind11's list of signatures).
    with pytest.raises(kolo.InvalidArgumentError, match="root 1099511627776 is not in"):
        comm.broadcast(x.numpy(), 2**40)
    with pytest.raises(kolo.InvalidArgumentError, match="color 1099511627776 is not -1"):
        comm.split(2**40, 0)
    read_only = x.numpy().copy()
    read_only.flags.writeable = False
    with pytest.raises(kolo.InvalidArgumentError, match="recv: .*read-only"):
        comm.allreduce(x.numpy(), read_only)
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(n)] * 2
    # A timeout outside KOLO_TIMEOUT_SECONDS's range is refused naming the argument (10^10 s
    # overflowed into a deadline already past, which blamed the peer).
    for bad in (1e10, float("inf"), float("nan"), 0.0005, 0.0):
        with pytest.raises(kolo.InvalidArgumentError, match="timeout_seconds=.* is outside"):
            kolo.Communicator.init(timeout_seconds=bad)


def test_handle_wait_timeout_returns_on_time():
    # Only rank 0 submits: its handle cannot complete. wait(0.3) ran the engine's cycles in its
    # own thread and never looked at its deadline while they ran.
    eng = kolo.Engine(kolo.Communicator.init())
    try:
        if r == 0:
            x = torch.ones(4)
            h = eng.allreduce("wait.only.on.0", x.data_ptr(), x.data_ptr(), kolo.DType.FLOAT32, [4])
            start = time.time()
            assert not h.wait(0.3)
            assert 0.3 <= time.time() - start < 2.0
            with pytest.raises(kolo.InvalidArgumentError, match="timeout=-1"):
                h.wait(-1)
        else:
            time.sleep(1.0)  # the engine stays up meanwhile (closing it would fail rank 0's op)
    finally:
        eng.close()


def test_shutdown_and_init_again():
    hvd.barrier()
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()
    last = hvd.ProcessSet([n - 1])
    hvd.init(comm=list(range(n)), process_sets=[last])
    assert (hvd.rank(), hvd.size()) == (r, n)
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == n
    assert last.process_set_id is not None and last.included() == (r == n - 1)
    if r == n - 1:
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=last).item() == 1
    hvd.barrier()  # a shutdown stops every rank's engine: wait for the set's op
    hvd.shutdown()
    assert last.process_set_id is None  # registrations end with the engine
    hvd.init()
    if n > 2:  # a job of the first two ranks: the others are refused
        hvd.shutdown()
        if r < 2:
            hvd.init(comm=[0, 1])
            assert hvd.size() == 2 and hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == 2
            hvd.shutdown()
        else:
            with pytest.raises(ValueError, match="not in init"):
                hvd.init(comm=[0, 1])
        hvd.init()
    hvd.barrier()
