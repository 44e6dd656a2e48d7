"""kolo.torch's training helpers against one-process computations: DistributedOptimizer on a
rank's slice of the batch matches plain SGD on the whole batch (with groups, gradient
accumulation, predivision, Sum, compression, explicit synchronize), broadcast_parameters and
broadcast_optimizer_state make ranks equal, and SyncBatchNorm matches BatchNorm on the whole
batch. Everything in float64, so that the comparisons are tight."""
import pytest
import torch
import torch.nn.functional as F

import kolo.torch as hvd

ROWS = 4  # rows of the batch per rank


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, 2)).double()


def global_batch(step):
    """The same on every rank; rank r trains on rows [ROWS r, ROWS (r + 1))."""
    g = torch.Generator().manual_seed(100 + step)
    n = hvd.size()
    x = torch.randn(ROWS * n, 6, generator=g, dtype=torch.float64)
    return x, torch.randn(ROWS * n, 2, generator=g, dtype=torch.float64)


def reference(steps, lr=0.1):
    model = make_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        x, y = global_batch(step)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return model


def train(steps=3, lr=0.1, passes=1, explicit_sync=False, groups_of=None, **options):
    r = hvd.rank()
    model = make_model(seed=r)  # different on every rank until the broadcast
    if groups_of is not None:
        options["groups"] = groups_of(model)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **options)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for step in range(steps):
        x, y = global_batch(step)
        xs, ys = x[ROWS * r:ROWS * (r + 1)], y[ROWS * r:ROWS * (r + 1)]
        opt.zero_grad()
        for part in range(passes):  # equal parts: their mean losses average to the slice's
            rows = slice(part * ROWS // passes, (part + 1) * ROWS // passes)
            (F.mse_loss(model(xs[rows]), ys[rows]) / passes).backward()
        if explicit_sync:
            opt.synchronize()
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
    return model


CASES = {
    "average": {},
    "num_groups": {"num_groups": 2},
    "groups_count": {"groups": 2},  # Horovod's groups may be a count too
    "groups": {"groups_of": lambda model: [list(model[0].parameters())]},
    "accumulate": {"passes": 2},
    "predivide": {"gradient_predivide_factor": 2.0},
    "sum": {"op": hvd.Sum, "lr_scale": True},
    "explicit_synchronize": {"explicit_sync": True},
    "fp16": {"compression": hvd.Compression.fp16, "tolerance": 2e-3},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_distributed_optimizer_matches_whole_batch(case):
    options = dict(CASES[case])
    tolerance = options.pop("tolerance", 1e-10)
    lr = 0.1 / hvd.size() if options.pop("lr_scale", False) else 0.1
    model = train(lr=lr, **options)
    want = reference(steps=3)
    for (name, got), expected in zip(model.named_parameters(), want.parameters()):
        assert torch.allclose(got, expected, atol=tolerance, rtol=0), (case, name)


def test_explicit_groups_and_unused_parameters():
    r, n = hvd.rank(), hvd.size()
    shared = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    only_rank0 = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    last = torch.nn.Parameter(torch.ones(1, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD([shared, only_rank0, last], lr=1.0),
        named_parameters=[("shared", shared), ("only_rank0", only_rank0), ("last", last)],
        groups=[[shared, only_rank0]])
    loss = (shared * (r + 1)).sum() + last.sum() * 2
    if r == 0:
        loss = loss + (only_rank0 * 3).sum()
    loss.backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    assert torch.allclose(shared.grad, torch.full((3,), (n + 1) / 2, dtype=torch.float64))
    assert torch.allclose(only_rank0.grad, torch.full((2,), 3.0 / n, dtype=torch.float64))
    assert torch.allclose(last.grad, torch.full((1,), 2.0, dtype=torch.float64))
    with opt.skip_synchronize():
        opt.step()
    assert torch.allclose(shared, torch.full((3,), 1 - (n + 1) / 2, dtype=torch.float64))


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients(sparse_as_dense):
    r, n = hvd.rank(), hvd.size()
    embedding = torch.nn.Embedding(8, 3, sparse=True).double()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0),
                                   named_parameters=embedding.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    embedding(torch.tensor([r, 7])).sum().backward()
    opt.synchronize()
    want = torch.zeros(8, 3, dtype=torch.float64)
    want[:n] = 1.0 / n  # row q: rank q's lookup, averaged
    want[7] = 1.0       # every rank's
    assert embedding.weight.grad.is_sparse != sparse_as_dense
    assert torch.allclose(embedding.weight.grad.to_dense(), want)


def test_distributed_optimizer_refuses_what_horovod_refuses():
    p, q = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD([p, q], lr=1),
                                 named_parameters=[("a", p), ("a", q)])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(torch.optim.SGD([p], lr=1), named_parameters=[])
    with pytest.raises(ValueError, match="predivide"):
        hvd.DistributedOptimizer(torch.optim.SGD([p], lr=1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD([p], lr=1), op=hvd.Adasum)
    # In groups, a parameter twice (accepted, it was submitted twice under one name at the
    # first step, leaving the name pending for later optimizers) and a non-tensor.
    for groups in ([[p], [p, q]], [[p, p], [q]]):
        with pytest.raises(ValueError, match="A parameter can only appear once in groups"):
            hvd.DistributedOptimizer(torch.optim.SGD([p, q], lr=1), groups=groups)
    with pytest.raises(ValueError, match="groups must consist of torch.Tensor"):
        hvd.DistributedOptimizer(torch.optim.SGD([p, q], lr=1), groups=[[1, 2]])


def in_kolo_shared_memory(tensor):
    """Whether the tensor's memory is a mapping of kolo.SharedBuffer's memfd (/proc/self/maps)."""
    address = tensor.data_ptr()
    with open("/proc/self/maps") as maps:
        for line in maps:
            start, end = (int(a, 16) for a in line.split()[0].split("-"))
            if start <= address < end:
                return "memfd:kolo-shared" in line
    return False


def train_large(distributed, set_to_none, steps=3, swap=None):
    """A 128 x 160 float64 weight (160 KiB: a gradient reduced on its own) trained on the rows
    of a batch, one row per rank, or the whole batch in one process. Returns the weight and
    each step's gradient address. swap="new" gives the gradient a new tensor before each step
    after the first, swap="set_" new memory under the same tensor."""
    r, n = hvd.rank(), hvd.size()
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(128, 160, dtype=torch.float64))
    opt = torch.optim.SGD([w], lr=0.1)
    if distributed:
        opt = hvd.DistributedOptimizer(opt, named_parameters=[("w", w)])
    addresses = []
    for step in range(steps):
        x = torch.randn(n, 128, generator=torch.Generator().manual_seed(step),
                        dtype=torch.float64)
        rows = x[r:r + 1] if distributed else x
        opt.zero_grad(set_to_none=set_to_none)
        if step > 0 and swap == "new":
            w.grad = torch.zeros_like(w)
        elif step > 0 and swap == "set_":
            w.grad.set_(torch.zeros_like(w))
        ((rows @ w) ** 2).sum().div(1 if distributed else n).backward()
        opt.step()
        addresses.append((w.grad.data_ptr(), in_kolo_shared_memory(w.grad)))
    return w, addresses


@pytest.mark.parametrize("set_to_none", [False, True])
def test_large_gradients_move_into_shared_memory_once(set_to_none):
    if hvd.size() == 1:
        pytest.skip("one rank reduces nothing: the optimizer hooks no gradient")
    w, addresses = train_large(True, set_to_none)
    assert torch.allclose(w, train_large(False, set_to_none)[0], atol=1e-12, rtol=0)
    if set_to_none:  # autograd allocates a new gradient every step: it is not moved again
        assert [shared for _, shared in addresses] == [True, False, False]
    else:  # zero_grad() keeps it: autograd accumulates into the shared memory
        assert len({a for a in addresses}) == 1 and addresses[0][1]


@pytest.mark.parametrize("swap", ["new", "set_"])
def test_a_gradient_given_new_memory_is_reduced_there(swap):
    """The optimizer prepares each gradient's allreduce once; a new tensor or new memory under
    the same one is what autograd fills, and what must be reduced."""
    if hvd.size() == 1:
        pytest.skip("one rank reduces nothing: the optimizer hooks no gradient")
    w, addresses = train_large(True, set_to_none=False, swap=swap)
    assert len({a for a, _ in addresses}) == 3
    assert torch.allclose(w, train_large(False, set_to_none=False)[0], atol=1e-12, rtol=0)


def rank_weighted():
    """A 3-element weight whose gradient is rank + 1 on each rank, its DistributedOptimizer, and
    a function that runs the backward pass."""
    if hvd.size() == 1:
        pytest.skip("one rank reduces nothing: the optimizer hooks no gradient")
    w = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0), named_parameters=[("w", w)])
    return w, opt, lambda: (w * (hvd.rank() + 1)).sum().backward()


def test_op_changed_between_steps_takes_effect():
    """opt.op is read at every step, as Horovod's optimizer reads it."""
    n = hvd.size()
    w, opt, backward = rank_weighted()
    reduced = []
    for op in (hvd.Average, hvd.Average, hvd.Sum, hvd.Average):
        opt.op = op
        opt.zero_grad()
        backward()
        opt.step()
        reduced.append(w.grad[0].item())
    mean, total = (n + 1) / 2, n * (n + 1) / 2
    assert reduced == [mean, mean, total, mean]


def test_a_backward_pass_with_a_bad_op_raises_and_the_next_one_works():
    """A gradient the hook could not submit is not counted: fixing the setting is enough."""
    n = hvd.size()
    w, opt, backward = rank_weighted()
    opt.op = 42
    with pytest.raises(ValueError, match="op 42 is not one of Average, Sum"):
        backward()
    opt.op = hvd.Sum
    opt.zero_grad()
    backward()
    opt.step()
    assert w.grad.tolist() == [n * (n + 1) / 2] * 3


@pytest.mark.parametrize("num_groups", [0, 1])
def test_set_backward_passes_per_step(num_groups):
    """Horovod's set_backward_passes_per_step(k): the next k backward passes are added up before
    the average, and a new call starts every parameter's count again. Each pass gives w and v
    the gradient rank + 1, so the averaged gradient after k passes is k (n + 1) / 2."""
    n = hvd.size()
    if n == 1:
        pytest.skip("one rank reduces nothing: the optimizer hooks no gradient")
    w, v = (torch.nn.Parameter(torch.zeros(3, dtype=torch.float64)) for _ in range(2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w, v], lr=1.0),
                                   named_parameters=[("w", w), ("v", v)], num_groups=num_groups)

    def backward():
        ((w + v) * (hvd.rank() + 1)).sum().backward()

    def step(backward_passes):
        for _ in range(backward_passes):
            backward()
        opt.step()
        return w.grad.tolist(), v.grad.tolist()

    mean = (n + 1) / 2
    assert step(1) == ([mean] * 3, [mean] * 3)  # the constructor's 1
    opt.zero_grad()
    opt.set_backward_passes_per_step(2)
    assert step(2) == ([2 * mean] * 3, [2 * mean] * 3)
    assert opt.backward_passes_per_step == 2
    opt.zero_grad()
    backward()  # one of two passes; the next call starts the count again, so three are added
    opt.set_backward_passes_per_step(2)
    assert step(2) == ([3 * mean] * 3, [3 * mean] * 3)
    assert w.tolist() == v.tolist() == [-6 * mean] * 3  # SGD, lr 1: minus (1 + 2 + 3) means

    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="set_backward_passes_per_step: passes must be an "
                                             "integer >= 1, got %r" % (bad,)):
            opt.set_backward_passes_per_step(bad)
    assert opt.backward_passes_per_step == 2
    opt.set_backward_passes_per_step(1)
    opt.zero_grad()
    backward()  # submitted: changing the count now would lose the reduction in flight
    with pytest.raises(AssertionError, match="set_backward_passes_per_step"):
        opt.set_backward_passes_per_step(2)
    opt.step()
    assert w.grad.tolist() == [mean] * 3


def test_shared_gradients_can_be_turned_off(monkeypatch):
    if hvd.size() == 1:
        pytest.skip("one rank reduces nothing: the optimizer hooks no gradient")
    monkeypatch.setenv("KOLO_SHARED_GRADS", "0")
    w, addresses = train_large(True, set_to_none=False, steps=1)
    assert addresses == [(w.grad.data_ptr(), False)]
    monkeypatch.setenv("KOLO_SHARED_GRADS", "yes")
    with pytest.raises(ValueError, match="KOLO_SHARED_GRADS must be 0 or 1, got 'yes'"):
        hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1), named_parameters=[("w", w)])
    monkeypatch.setenv("KOLO_SHARED_GRADS", "")  # empty: unset, the default (it was refused)
    w, addresses = train_large(True, set_to_none=False, steps=1)
    assert addresses == [(w.grad.data_ptr(), True)]


def adam_after_one_step(r):
    """Rank r's model and Adam after one step with gradients r + 1."""
    model = make_model(seed=10 + r)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1), betas=(0.9, 0.99 - 0.01 * r))
    for p in model.parameters():
        p.grad = torch.full_like(p, float(r + 1))
    opt.step()
    return model, opt


def test_ranks_outside_the_optimizers_process_set_train_alone():
    # Hooks went on every rank: backward() on a rank outside the set raised "not a member".
    r = hvd.rank()
    only0 = hvd.add_process_set([0])
    w = torch.nn.Parameter(torch.full((2,), float(r + 1)))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0), named_parameters=[("w", w)],
                                   process_set=only0)
    (w * (r + 1)).sum().backward()
    opt.step()
    assert w.tolist() == [float(r + 1) - (r + 1)] * 2  # its own gradient, alone
    with pytest.raises(ValueError, match="not registered"):
        hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0), named_parameters=[("w", w)],
                                 process_set=hvd.ProcessSet([0]))
    hvd.barrier()
    assert hvd.remove_process_set(only0)


def test_broadcast_parameters_and_optimizer_state():
    model, opt = adam_after_one_step(hvd.rank())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    root, _ = adam_after_one_step(0)
    for got, want in zip(model.state_dict().values(), root.state_dict().values()):
        assert torch.equal(got, want)
    assert opt.param_groups[0]["lr"] == 0.01 and opt.param_groups[0]["betas"] == (0.9, 0.99)
    for p in model.parameters():
        state = opt.state[p]
        assert torch.allclose(state["exp_avg"], torch.full_like(p, 0.1))  # (1 - 0.9) * 1
        gathered = hvd.allgather(state["exp_avg_sq"].unsqueeze(0))
        assert all(torch.equal(g, gathered[0]) for g in gathered)


def test_broadcast_optimizer_state_initializes_fresh_state():
    model = make_model(seed=3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(
        torch.optim.Adam(model.parameters(), lr=0.001 * (1 + hvd.rank())),
        named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.001
    assert all("exp_avg" in opt.state[p] for p in model.parameters())


def test_broadcast_optimizer_state_of_a_fresh_optimizer_leaves_the_parameters():
    # Gradients from a warm-up pass, different on each rank: the step that makes the fresh state
    # takes zeros (it stepped with them, moving the parameters apart after
    # broadcast_parameters); SparseAdam gets sparse zeros (dense ones raised).
    model = make_model(seed=3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    before = [p.detach().clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = torch.full_like(p, float(hvd.rank() + 1))
    hvd.broadcast_optimizer_state(torch.optim.SGD(model.parameters(), lr=0.1), root_rank=0)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))
    assert all(torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    sparse = torch.optim.SparseAdam(embedding.parameters(), lr=0.1)
    hvd.broadcast_optimizer_state(sparse, root_rank=0)
    assert "exp_avg" in sparse.state[embedding.weight]


def test_sync_batch_norm_matches_batch_norm_on_the_whole_batch():
    r, n = hvd.rank(), hvd.size()
    g = torch.Generator().manual_seed(7)
    rows = [q + 2 for q in range(n)]  # uneven batches
    x_all = torch.randn(sum(rows), 3, 4, generator=g, dtype=torch.float64)
    grad_all = torch.randn(sum(rows), 3, 4, generator=g, dtype=torch.float64)
    first = sum(rows[:r])
    mine = slice(first, first + rows[r])

    ref = torch.nn.BatchNorm1d(3).double()
    sync = hvd.SyncBatchNorm(3).double()
    with torch.no_grad():
        for bn in (ref, sync):
            bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
            bn.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    x_ref = x_all.clone().requires_grad_()
    out_ref = ref(x_ref)
    (out_ref * grad_all).sum().backward()
    x = x_all[mine].clone().requires_grad_()
    out = sync(x)
    (out * grad_all[mine]).sum().backward()

    assert torch.allclose(out, out_ref.detach()[mine], atol=1e-10)
    assert torch.allclose(x.grad, x_ref.grad[mine], atol=1e-10)
    weight_grad = hvd.allreduce(sync.weight.grad, op=hvd.Sum)
    assert torch.allclose(weight_grad, ref.weight.grad, atol=1e-10)
    assert torch.allclose(sync.running_mean, ref.running_mean, atol=1e-12)
    assert torch.allclose(sync.running_var, ref.running_var, atol=1e-12)
    sync.eval()
    ref.eval()
    assert torch.allclose(sync(x_all[mine]), ref(x_all[mine]), atol=1e-12)
