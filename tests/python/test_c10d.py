"""torch.distributed's "kolo" backend (kolo._c10d, kolo.torch.distributed) against closed-form
results: rank r contributes values built from r. Every collective of the backend in its list
and tensor forms, asynchronous Work and futures, DistributedDataParallel against one process on
the whole batch, and the errors (bad arguments, ranks that disagree, a rank that does not come,
a lost rank) raised instead of hanging. Runs under kolorun at 2 and 3 ranks (conftest.py)."""
import datetime
import functools
import importlib.util
import operator
import os
import re
import threading

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import kolo
from conftest import DTYPES, run_two_rank_job

if importlib.util.find_spec("kolo._c10d") is None:
    pytest.skip("kolo was built without libtorch (KOLO_WITH_TORCH)", allow_module_level=True)

import kolo.torch.distributed as kd  # noqa: E402 (after the skip)

r = n = None  # this rank and the rank count
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX,
       dist.ReduceOp.AVG]
MOVED_ONLY = [torch.bool]  # moved as bytes, not reduced
SHAPES = [(), (5,), (3, 4)]


@pytest.fixture(scope="module", autouse=True)
def process_group():
    global r, n
    kd.init_process_group(timeout=datetime.timedelta(seconds=60))
    r, n = dist.get_rank(), dist.get_world_size()
    yield
    dist.barrier()
    dist.destroy_process_group()


def contribution(shape, dtype, rank):
    """Rank `rank`'s tensor: rank + 1 + (flat index % 3)."""
    count = torch.Size(shape).numel()
    return (torch.arange(count, dtype=torch.float64).reshape(shape) % 3 + rank + 1).to(dtype)


def reduced(shape, dtype, op, ranks):
    """op over the contributions of `ranks`, computed in float64."""
    parts = torch.stack([contribution(shape, torch.float64, q) for q in ranks])
    value = {dist.ReduceOp.SUM: parts.sum(0), dist.ReduceOp.PRODUCT: parts.prod(0),
             dist.ReduceOp.MIN: parts.min(0).values, dist.ReduceOp.MAX: parts.max(0).values,
             dist.ReduceOp.AVG: parts.mean(0)}[op]
    if dtype.is_floating_point:
        return value.to(dtype)
    # Integer averages truncate and sums and products wrap (int8 products at 3 ranks), as
    # kolo's core does: exact in int64, then narrowed modulo 2^bits.
    return value.to(torch.int64).to(dtype)


def expected(shape, dtype, op):
    return reduced(shape, dtype, op, range(n))


def filled(rows, tail, dtype, value):
    return torch.full((rows,) + tail, value, dtype=torch.float64).to(dtype)


def test_group():
    assert dist.get_backend() == "kolo" and dist.is_initialized()
    if "KOLO_SIZE" in os.environ:
        assert (n, r) == (int(os.environ["KOLO_SIZE"]), int(os.environ["KOLO_RANK"]))
    pg = dist.distributed_c10d._get_default_group()
    assert isinstance(pg, kd.ProcessGroupKolo) and isinstance(pg, dist.ProcessGroup)
    assert pg.transport == os.environ.get("KOLO_TRANSPORT", "shm")


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce(dtype):
    for shape in SHAPES:
        for op in OPS:
            x = contribution(shape, dtype, r)
            dist.all_reduce(x, op=op)
            assert torch.equal(x, expected(shape, dtype, op)), (shape, op)
    x = contribution((4, 3), dtype, r).t()  # not contiguous: reduced in a copy, copied back
    dist.all_reduce(x)
    assert torch.equal(x, expected((4, 3), dtype, dist.ReduceOp.SUM).t())
    x = torch.zeros(0, 2, dtype=dtype)
    dist.all_reduce(x)
    assert x.shape == (0, 2)


def test_allreduce_coalesced():
    xs = [contribution((2,), torch.float32, r), contribution((3, 2), torch.float32, r)]
    with pytest.warns(UserWarning, match="will be deprecated"):  # torch's warning
        dist.all_reduce_coalesced(xs, op=dist.ReduceOp.MAX)
    assert torch.equal(xs[0], expected((2,), torch.float32, dist.ReduceOp.MAX))
    assert torch.equal(xs[1], expected((3, 2), torch.float32, dist.ReduceOp.MAX))


@pytest.mark.parametrize("dtype", DTYPES + MOVED_ONLY)
def test_broadcast(dtype):
    for root in range(n):
        x = filled(3, (2,), dtype, r + 1)
        dist.broadcast(x, src=root)
        assert torch.equal(x, filled(3, (2,), dtype, root + 1)), root
    x = filled(2, (3,), dtype, r + 1).t()
    dist.broadcast(x, src=n - 1)
    assert torch.equal(x, filled(2, (3,), dtype, n).t())
    objects = [{"rank": r}, "from %d" % r]
    dist.broadcast_object_list(objects, src=n - 1)
    assert objects == [{"rank": n - 1}, "from %d" % (n - 1)]


@pytest.mark.parametrize("dtype", DTYPES + MOVED_ONLY)
def test_allgather(dtype):
    for tail in [(), (3,)]:
        out = [torch.zeros((2,) + tail, dtype=dtype) for _ in range(n)]
        dist.all_gather(out, filled(2, tail, dtype, r + 1))
        assert all(torch.equal(o, filled(2, tail, dtype, q + 1)) for q, o in enumerate(out))
        # Rank q contributes q + 1 rows: sizes differ per rank (allgatherv).
        out = [torch.zeros((q + 1,) + tail, dtype=dtype) for q in range(n)]
        dist.all_gather(out, filled(r + 1, tail, dtype, r + 1))
        assert all(torch.equal(o, filled(q + 1, tail, dtype, q + 1)) for q, o in enumerate(out))
        flat = torch.zeros((2 * n,) + tail, dtype=dtype)
        dist.all_gather_into_tensor(flat, filled(2, tail, dtype, r + 1))
        assert torch.equal(flat, torch.cat([filled(2, tail, dtype, q + 1) for q in range(n)]))
    got = [None] * n
    dist.all_gather_object(got, {"rank": r, "tail": "x" * r})
    assert got == [{"rank": q, "tail": "x" * q} for q in range(n)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter(dtype):
    for op in OPS:
        # Block q of rank p is contribution(q + p): rank r receives op over the ranks p of
        # contribution(r + p).
        blocks = [contribution((2, 3), dtype, q + r) for q in range(n)]
        want = reduced((2, 3), dtype, op, [r + p for p in range(n)])
        out = torch.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter(out, blocks, op=op)
        assert torch.equal(out, want), op
        out = torch.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat(blocks), op=op)
        assert torch.equal(out, want), op


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_alltoall(dtype):
    # Equal parts: block p of rank r's input holds 10 r + p, and goes to rank p.
    x = torch.cat([filled(2, (3,), dtype, 10 * r + p) for p in range(n)])
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    assert torch.equal(out, torch.cat([filled(2, (3,), dtype, 10 * q + r) for q in range(n)]))
    # Splits: rank r sends p + r + 1 rows to rank p, so it receives r + q + 1 rows from rank q.
    send = [p + r + 1 for p in range(n)]
    recv = [r + q + 1 for q in range(n)]
    x = torch.cat([filled(s, (2,), dtype, 10 * r + p) for p, s in enumerate(send)])
    out = torch.empty((sum(recv), 2), dtype=dtype)
    dist.all_to_all_single(out, x, output_split_sizes=recv, input_split_sizes=send)
    assert torch.equal(out, torch.cat([filled(s, (2,), dtype, 10 * q + r)
                                       for q, s in enumerate(recv)]))
    # Lists, one tensor per rank, sizes differing per pair.
    inputs = [filled(s, (), dtype, 10 * r + p) for p, s in enumerate(send)]
    outputs = [torch.empty(s, dtype=dtype) for s in recv]
    dist.all_to_all(outputs, inputs)
    assert all(torch.equal(o, filled(s, (), dtype, 10 * q + r))
               for q, (o, s) in enumerate(zip(outputs, recv)))


@pytest.mark.parametrize("dtype", DTYPES + MOVED_ONLY)
def test_reduce_gather_scatter(dtype):
    for root in range(n):
        if dtype not in MOVED_ONLY:
            for op in OPS:
                x = contribution((2, 3), dtype, r)
                dist.reduce(x, dst=root, op=op)
                want = expected((2, 3), dtype, op) if r == root else contribution((2, 3), dtype, r)
                assert torch.equal(x, want), (root, op)  # non-roots keep their values
        # gather: rank q's (transposed, not contiguous) tensor lands in the root's list at q.
        gathered = [torch.zeros(3, 2, dtype=dtype) for _ in range(n)] if r == root else None
        dist.gather(filled(2, (3,), dtype, r + 1).t(), gathered, dst=root)
        if r == root:
            assert all(torch.equal(g, filled(2, (3,), dtype, q + 1).t())
                       for q, g in enumerate(gathered))
        # scatter: the root's tensor p goes to rank p.
        out = torch.zeros(4, dtype=dtype)
        parts = [filled(4, (), dtype, 10 * root + p) for p in range(n)] if r == root else None
        dist.scatter(out, parts, src=root)
        assert torch.equal(out, filled(4, (), dtype, 10 * root + r)), root


def test_async_work_and_futures():
    xs = [torch.full((1000,), float(r + k)) for k in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]  # several in flight, run in order
    barrier = dist.barrier(async_op=True)
    barrier.wait()
    assert all(w.is_completed() and w.is_success() for w in works)
    for k, (x, w) in enumerate(zip(xs, works)):
        assert w.wait()
        assert torch.equal(x, torch.full((1000,), float(n * k + n * (n - 1) // 2)))
    y = torch.ones(4)
    future = dist.all_reduce(y, async_op=True).get_future()
    assert torch.equal(future.wait()[0], torch.full((4,), float(n)))
    chained = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((2,), 2.0 * n))


def test_future_callbacks_that_run_collectives():
    """A future's callback that starts a collective and waits for it (as DDP's PowerSGD hook
    does), or waits for one queued earlier, runs on the group's worker thread whenever the op is
    still queued when .then() is called; the worker runs those collectives itself instead of
    waiting for them forever."""
    main = threading.get_ident()
    on_worker = []

    def again(f):
        on_worker.append(threading.get_ident() != main)
        x = f.value()[0]
        return dist.all_reduce(x, async_op=True).get_future().wait()[0]

    for _ in range(3):  # large ops queued ahead keep the worker busy while .then() is called
        ahead = [dist.all_reduce(torch.ones(1 << 20), async_op=True) for _ in range(4)]
        got = dist.all_reduce(torch.ones(3), async_op=True).get_future().then(again).wait()
        assert torch.equal(got, torch.full((3,), float(n * n)))
        later = torch.full((2,), float(r))
        first = dist.all_reduce(torch.ones(1 << 20), async_op=True)
        queued = dist.all_reduce(later, async_op=True)
        done = first.get_future().then(lambda f: queued.wait() and later.clone()).wait()
        assert torch.equal(done, torch.full((2,), float(n * (n - 1) // 2)))
        first = dist.all_reduce(torch.ones(1 << 20), async_op=True)
        queued = dist.all_reduce(torch.ones(2), async_op=True)
        done = first.get_future().then(lambda f: queued.get_future().wait()[0]).wait()
        assert torch.equal(done, torch.full((2,), float(n)))
        assert all(w.is_completed() for w in ahead)
    assert any(on_worker), "no callback ran on the worker thread: the test proved nothing"


def test_new_group_of_some_ranks():
    low = dist.new_group(ranks=[0, 1], backend="kolo")  # every rank calls new_group
    if r < 2:
        x = torch.tensor([r + 1.0])
        dist.all_reduce(x, group=low)
        assert x.item() == 3.0 and dist.get_world_size(low) == 2
    dist.destroy_process_group(low)
    dist.barrier()


# DistributedDataParallel: each rank trains on its slice of the batch; the averaged gradients
# make every step that of one process on the whole batch. In float64, for tight comparisons.
ROWS = 4


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4),
                               torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()


def global_batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return (torch.randn(ROWS * n, 6, generator=g, dtype=torch.float64),
            torch.randn(ROWS * n, 2, generator=g, dtype=torch.float64))


def sgd_steps(model, steps, rows, opt=None):
    """`steps` steps on rows `rows` of the global batches, with SGD unless `opt` is given."""
    if opt is None:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        x, y = global_batch(step)
        opt.zero_grad()
        F.mse_loss(model(x[rows]), y[rows]).backward()
        opt.step()
    return model


@pytest.mark.parametrize("options", [{}, {"bucket_cap_mb": 1e-4},
                                     {"gradient_as_bucket_view": True}])
def test_ddp_matches_one_process(options):
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(seed=r), **options)  # rank 0's
    sgd_steps(ddp, steps=3, rows=slice(ROWS * r, ROWS * (r + 1)))
    want = sgd_steps(make_model(seed=0), steps=3, rows=slice(None))
    for got, ref in zip(ddp.module.parameters(), want.parameters()):
        assert torch.allclose(got, ref, rtol=0, atol=1e-12), (got - ref).abs().max()


@pytest.fixture(scope="module")
def gloo(process_group):  # torn down before the default group
    """A group of every rank on torch's gloo backend, for comparisons. It lives as long as the
    module: gloo's worker threads run future callbacks, and a group whose last reference goes
    with a callback on its own worker thread aborts the process (it joins that thread)."""
    group = dist.new_group(backend="gloo")
    yield group
    dist.barrier(group=group)
    dist.destroy_process_group(group)


def test_ddp_powersgd_hook_matches_gloo(gloo):
    """DDP's PowerSGD communication hook (its future callbacks run further collectives) over
    several buckets trains as it does on torch's gloo backend in the same run."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    trained = []
    for group in (None, gloo):
        ddp = torch.nn.parallel.DistributedDataParallel(make_model(seed=0), process_group=group,
                                                        bucket_cap_mb=1e-4)
        state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                       start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
        sgd_steps(ddp, steps=5, rows=slice(ROWS * r, ROWS * (r + 1)))
        trained.append(list(ddp.module.parameters()))
    for got, ref in zip(*trained):
        assert torch.allclose(got, ref, rtol=0, atol=1e-10), (got - ref).abs().max()


def ddp_uneven_join(group):
    """DDP's join() context: rank r trains 2 + r steps, the ranks that finish early shadow the
    others' collectives."""
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(seed=0), process_group=group)
    with ddp.join():
        sgd_steps(ddp, steps=2 + r, rows=slice(ROWS * r, ROWS * (r + 1)))
    return ddp.module


def ddp_unused_parameters(group):
    """find_unused_parameters: a layer the forward skips (an allreduce of the used-map too)."""
    model = torch.nn.ModuleDict({"used": make_model(seed=0), "unused": torch.nn.Linear(6, 2)})
    model.forward = lambda x: model["used"](x)
    ddp = torch.nn.parallel.DistributedDataParallel(model.double(), process_group=group,
                                                    find_unused_parameters=True)
    return sgd_steps(ddp, steps=3, rows=slice(ROWS * r, ROWS * (r + 1))).module["used"]


def ddp_zero_redundancy(group):
    """torch's ZeroRedundancyOptimizer (broadcasts from every rank), state consolidated on 0."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(seed=0), process_group=group)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01,
                                  process_group=group)
    sgd_steps(ddp, steps=3, rows=slice(ROWS * r, ROWS * (r + 1)), opt=opt)
    opt.consolidate_state_dict(to=0)
    if r == 0:
        assert len(opt.state_dict()["state"]) == 6
    return ddp.module


@pytest.mark.parametrize("train", [ddp_uneven_join, ddp_unused_parameters, ddp_zero_redundancy])
def test_ddp_features_match_gloo(train, gloo):
    kolo_model, gloo_model = train(None), train(gloo)
    for got, ref in zip(kolo_model.parameters(), gloo_model.parameters()):
        assert torch.allclose(got, ref, rtol=0, atol=1e-12), (got - ref).abs().max()


BITWISE = {dist.ReduceOp.BAND: operator.and_, dist.ReduceOp.BOR: operator.or_,
           dist.ReduceOp.BXOR: operator.xor}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8,
                                   torch.int16, torch.bool])
@pytest.mark.parametrize("op", list(BITWISE), ids=["band", "bor", "bxor"])
def test_bitwise_reductions(dtype, op):
    def bits(rank):  # element i: rank-dependent bit patterns, some negative
        values = [(rank * 37 + i * 11) % 120 - (rank + i) % 3 * 40 for i in range(70)]
        if dtype == torch.bool:
            values = [v % 3 == 0 for v in values]
        return torch.tensor(values).to(dtype)
    want = functools.reduce(BITWISE[op], [bits(q) for q in range(n)])
    x = bits(r)
    dist.all_reduce(x, op=op)
    assert torch.equal(x, want)
    out = torch.empty(7, dtype=dtype)  # reduce_scatter: rank r's block of 7 of the 7 * n
    dist.reduce_scatter_tensor(out, torch.cat([bits(r)[:7]] * n), op=op)
    assert torch.equal(out, want[:7])
    y = bits(r)
    dist.reduce(y, dst=n - 1, op=op)
    assert torch.equal(y, want if r == n - 1 else bits(r))


def test_send_and_recv():
    nxt, prv = (r + 1) % n, (r - 1) % n
    # A ring exchange posted in either order: channels do not wait for each other.
    got = torch.empty(1000)
    mine = torch.full((1000,), float(r))
    works = [dist.irecv(got, prv), dist.isend(mine, nxt)]
    for w in (works if r % 2 else works[::-1]):
        w.wait()
    assert torch.equal(got, torch.full((1000,), float(prv)))
    assert works[0]._source_rank() == prv
    ops = [dist.P2POp(dist.isend, torch.full((5,), r + 0.5), nxt),
           dist.P2POp(dist.irecv, got[:5], prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got[:5], torch.full((5,), prv + 0.5))
    if r == 0:
        # Messages on one pair and tag arrive in order; tags are matched apart.
        dist.send(torch.tensor([1, 2, 3]), 1)
        dist.send(torch.tensor([4, 5, 6]), 1)
        late = dist.isend(torch.ones(2), 1, tag=1)
        early = dist.isend(torch.full((2,), 2.0), 1, tag=2)
        late.wait()
        early.wait()
        dist.send(torch.arange(16, dtype=torch.bfloat16).reshape(4, 4), 1)
        dist.send(torch.tensor([True, False, True]), 1)
    elif r == 1:
        x = torch.empty(3, dtype=torch.int64)
        assert dist.recv(x, 0) == 0 and x.tolist() == [1, 2, 3]
        dist.recv(x, 0)
        assert x.tolist() == [4, 5, 6]
        second, first = torch.empty(2), torch.empty(2)
        dist.recv(second, 0, tag=2)
        dist.recv(first, 0, tag=1)
        assert first.tolist() == [1.0, 1.0] and second.tolist() == [2.0, 2.0]
        transposed = torch.zeros(4, 4, dtype=torch.bfloat16).t()  # not contiguous
        dist.recv(transposed, 0)
        assert torch.equal(transposed, torch.arange(16, dtype=torch.bfloat16).reshape(4, 4))
        flags = torch.zeros(3, dtype=torch.bool)
        dist.recv(flags, 0)
        assert flags.tolist() == [True, False, True]
    dist.barrier()


def test_send_and_recv_errors():
    with pytest.raises(ValueError, match="is this rank"):
        dist.send(torch.ones(1), r)
    with pytest.raises(ValueError, match="is not in the group"):
        dist.send(torch.ones(1), n)
    with pytest.raises(ValueError, match="receives from a named rank only"):
        dist.recv(torch.ones(1))
    group = dist.new_group(backend="kolo", timeout=datetime.timedelta(seconds=2))
    if r == 0:
        # Sizes that differ: the receiver fails; over message transports the sender may have
        # finished (it fails at its next message on that channel).
        try:
            dist.send(torch.ones(8), 1, group=group, tag=7)
        except kolo.MismatchError as e:
            assert "send to rank 1 (tag 7): the send and the recv differ in size" in str(e), e
        # A send nobody receives fails after the group's timeout, naming what is missing.
        with pytest.raises(kolo.TimeoutError, match="send to rank 1 .tag 8.: the peer posted no "
                                                    "matching recv"):
            dist.send(torch.ones(2), 1, group=group, tag=8)
    elif r == 1:
        with pytest.raises(kolo.MismatchError, match="recv from rank 0 .tag 7.: the send and the "
                                                     "recv differ in size"):
            dist.recv(torch.ones(4), 0, group=group, tag=7)
    dist.barrier()
    dist.destroy_process_group(group)


def test_bad_arguments_fail_at_once():
    x = torch.ones(3)
    with pytest.raises(kolo.InvalidArgumentError, match="band works on the bits of integer"):
        dist.all_reduce(x, op=dist.ReduceOp.BAND)
    with pytest.raises(ValueError, match="which kolo does not reduce"):
        dist.all_reduce(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="not a rank of the group"):
        dist.broadcast(x, src=n)
    with pytest.raises(ValueError, match="expected one per rank"):
        dist.all_gather([torch.ones(3)], x)
    with pytest.raises(ValueError, match="splits add up to"):
        dist.all_to_all_single(torch.ones(n), torch.ones(n), [1] * n, [2] * n)
    # Splits whose sum wraps a 64-bit integer back to the row count (once accepted).
    wrapping = [2**63 - 1] + [1] * (n - 2) + [2]
    with pytest.raises(ValueError, match="is more than the tensor's rows"):
        dist.all_to_all_single(torch.ones(n), torch.ones(n), wrapping, wrapping)
    with pytest.raises(ValueError, match="expected the group's size times"):
        dist.reduce_scatter_tensor(torch.ones(2), torch.ones(2 * n + 1))
    with pytest.raises(ValueError, match="dtypes differ"):
        dist.all_gather_into_tensor(torch.ones(n, dtype=torch.float64), torch.ones(1))
    with pytest.raises(ValueError, match="reduce: root .* is not a rank of the group"):
        dist.reduce(x, dst=n)
    with pytest.raises(ValueError, match="scatter: root .* is not a rank of the group"):
        dist.scatter(x, None, src=n)
    dist.all_reduce(x)  # nothing was queued: the group still works
    assert torch.equal(x, torch.full((3,), float(n)))


def test_init_arguments_are_checked_on_every_rank_before_the_store():
    # Before, these failed inside torch's store on rank 0 ("timed out after -5s", "initialize
    # the default process group twice") while the other ranks lost the store.
    with pytest.raises(ValueError, match=r"timeout of -5.0 s is outside \[0.001, 604800\] s"):
        kd.init_process_group(timeout=datetime.timedelta(seconds=-5))
    with pytest.raises(RuntimeError, match="initialized already"):
        kd.init_process_group()
    # Only the last rank passes a world_size of its own: every rank fails, naming it (the check
    # that init_process_group runs before its store, on kolo's job communicator).
    from kolo.torch.basics import _world
    mine = r"init_process_group\(world_size=%d\) on rank %d" % (n + 1, r)
    theirs = r"rank %d passed a rank= or world_size=" % (n - 1)
    with pytest.raises(ValueError, match=mine if r == n - 1 else theirs):
        kd._check_launch_arguments(_world(), {"world_size": n + 1 if r == n - 1 else n})
    x = torch.ones(2)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((2,), float(n)))


def test_ranks_that_disagree_fail_with_mismatch():
    group = dist.new_group(backend="kolo")  # this group fails: the default one carries on
    with pytest.raises(kolo.MismatchError, match="different"):
        dist.all_reduce(torch.ones(4 + (r == 0)), group=group)
    dist.destroy_process_group(group)
    # A gather whose ranks pass different sizes: only the exchange can tell, and says whose.
    # Over shm every rank sees every rank's sizes. Over tcp (and mpi) the root, which receives
    # the odd block, fails in the gather; a rank that only sends can finish it and fails at its
    # next call on the group, with the root's reason (docs/errors.md).
    group = dist.new_group(backend="kolo")
    gathered = [torch.zeros(2) for _ in range(n)] if r == 0 else None
    try:
        dist.gather(torch.ones(2 + (r == n - 1)), gathered, dst=0, group=group)
    except kolo.MismatchError as e:
        assert re.search("gather to rank 0: .*different counts", str(e)), e
    else:
        assert r != 0 and group.transport != "shm", "the gather did not fail on rank %d" % r
        with pytest.raises(kolo.KoloError, match="different counts"):
            dist.barrier(group=group)
    dist.destroy_process_group(group)
    dist.barrier()


def test_ranks_naming_different_roots_of_a_reduce_fail_with_mismatch():
    # reduce runs as an allreduce, which alone would not notice (once: every rank its own root).
    group = dist.new_group(backend="kolo")
    with pytest.raises(kolo.MismatchError, match="reduce: the ranks name different roots"):
        dist.reduce(torch.ones(3), dst=r, group=group)
    x = torch.ones(3)
    dist.reduce(x, dst=n - 1, group=group)  # the group carries on
    assert x.tolist() == ([float(n)] * 3 if r == n - 1 else [1.0] * 3)
    dist.destroy_process_group(group)


def test_a_rank_that_does_not_come_fails_with_timeout():
    group = dist.new_group(backend="kolo", timeout=datetime.timedelta(seconds=2))
    if r == 0:  # alone in this call
        with pytest.raises(kolo.TimeoutError, match="torch.distributed's timeout="):
            dist.all_reduce(torch.ones(3), group=group)
    dist.barrier()
    dist.destroy_process_group(group)


LOST_RANK_SCRIPT = """
import datetime, os, torch, torch.distributed as dist, kolo.torch.distributed as kd
kd.init_process_group(timeout=datetime.timedelta(seconds=30))
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
for _ in range(2):  # past DDP's bucket rebuild: the next step only allreduces gradients
    model(torch.ones(3, 4)).sum().backward()
dist.barrier()
if dist.get_rank() == 1:
    os._exit(0)  # vanishes without a word
try:
    model(torch.ones(3, 4)).sum().backward()
except RuntimeError as e:
    print("caught", type(e).__name__, e)
"""


LOST_SENDER_SCRIPT = """
import datetime, os, time, torch, torch.distributed as dist, kolo.torch.distributed as kd
kd.init_process_group(timeout=datetime.timedelta(seconds=60))
dist.barrier()
if dist.get_rank() == 1:
    os._exit(0)  # never sends
start = time.time()
try:
    dist.recv(torch.ones(4), 1)
except RuntimeError as e:
    print("caught", type(e).__name__, e)
print("after %.1f s" % (time.time() - start))
"""


def test_recv_from_a_rank_that_exited_fails_soon():
    # The channel is made by the first message: a recv from a rank that had exited waited out
    # the group's timeout (30 minutes by default) and then reported a timeout.
    done = run_two_rank_job(LOST_SENDER_SCRIPT, here=r == 0)
    if done:
        assert "PeerLostError" in done.stdout, done.stdout + done.stderr
        assert "rank 1's process" in done.stdout, done.stdout + done.stderr
        assert float(done.stdout.split("after ")[1].split(" s")[0]) < 10, done.stdout
    dist.barrier()


def test_lost_rank_fails_ddp_backward():
    done = run_two_rank_job(LOST_RANK_SCRIPT, here=r == 0)  # a job of its own, from rank 0
    if done:
        assert "caught" in done.stdout and "allreduce" in done.stdout, done.stdout + done.stderr
        assert "lost rank 1" in done.stdout, done.stdout + done.stderr
    dist.barrier()
