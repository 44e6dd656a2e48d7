"""Whole-model helpers as Horovod has them: broadcast_parameters, broadcast_optimizer_state,
broadcast_object and allgather_object (Python objects travel pickled, as uint8 tensors)."""
import io
import pickle

import torch

from kolo.torch import basics
from kolo.torch.ops import (_id_of, _name, allgather_async, broadcast_async_, synchronize)
from kolo.torch.process_sets import global_process_set

try:  # Horovod pickles with cloudpickle, which also handles lambdas and local classes
    import cloudpickle as _pickle
except ImportError:
    _pickle = pickle


def broadcast_parameters(params, root_rank, prefix=None):
    """Overwrites every tensor of `params` with root_rank's: a dict such as model.state_dict(),
    or a list of parameters or (name, parameter) pairs such as model.named_parameters()."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in params:
        if p is None or not torch.is_tensor(p):
            continue
        full = None if name is None else (prefix or "") + str(name)
        handles.append(broadcast_async_(p, root_rank, name=full))
    for handle in handles:
        synchronize(handle)


def _initialize_state(optimizer):
    """Runs one step with zero gradients when the optimizer has no state yet, so that every rank
    holds the state tensors root's are broadcast into (Horovod does the same). Every trainable
    parameter's gradient is replaced by zeros (sparse for SparseAdam), also where a backward
    pass left one: that step would otherwise move the parameters, differently on each rank."""
    if len(optimizer.state_dict()["state"]) != 0:
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam):
                    p.grad = p.grad.to_sparse()
    # A DistributedOptimizer would allreduce those zeros: step the wrapped class.
    step = optimizer.step
    if getattr(optimizer, "_kolo_distributed", False):
        step = super(optimizer.__class__, optimizer).step
    step()


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Overwrites the optimizer's state and hyperparameters with root_rank's: state tensors are
    broadcast in place, everything else (lr, betas, scalar state) as one pickled object."""
    del model
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    _initialize_state(optimizer)
    handles, others = [], {}
    for g, group in enumerate(optimizer.param_groups):
        others[("group", g)] = {k: v for k, v in group.items() if k != "params"}
        for i, p in enumerate(group["params"]):
            for key, value in sorted(optimizer.state.get(p, {}).items()):
                if torch.is_tensor(value):
                    handles.append(broadcast_async_(value, root_rank,
                                                    name="optimizer_state.%d.%d.%s" % (g, i, key)))
                else:
                    others[("state", g, i, key)] = value
    for handle in handles:
        synchronize(handle)
    others = broadcast_object(others, root_rank, name="optimizer_state.scalars")
    for g, group in enumerate(optimizer.param_groups):
        group.update(others[("group", g)])
        for i, p in enumerate(group["params"]):
            for key in list(optimizer.state.get(p, {})):
                if ("state", g, i, key) in others:
                    optimizer.state[p][key] = others[("state", g, i, key)]


def _to_bytes(obj):
    buffer = io.BytesIO()
    _pickle.dump(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _pickled(obj, pickling):
    """(bytes, None), or (None, the error) when `obj` cannot be pickled: the caller sends size
    -1 so that the other ranks fail with it instead of waiting for bytes never sent."""
    if not pickling:
        return None, None
    try:
        return _to_bytes(obj), None
    except Exception as e:  # any error of pickle or of the object's __reduce__
        return None, e


def _pickle_failed(op, ranks, failure):
    if failure is not None:
        raise failure
    raise ValueError("%s: rank %s could not pickle its object (its own error says why)" %
                     (op, ", ".join(str(r) for r in ranks)))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (any picklable object) on every rank of the set. Unnamed calls are
    named by their order, as other ops are (Horovod names them by the object's type)."""
    name = _name(name, "broadcast_object", _id_of(process_set))
    mine = basics.rank() == root_rank
    data, failure = _pickled(obj, mine)
    size = torch.tensor([data.numel() if data is not None else -1 if mine else 0],
                        dtype=torch.int64)
    synchronize(broadcast_async_(size, root_rank, name + ".sz", process_set))
    if size.item() < 0:
        _pickle_failed("broadcast_object", [root_rank], failure)
    if not mine:
        data = torch.empty(int(size.item()), dtype=torch.uint8)
    synchronize(broadcast_async_(data, root_rank, name + ".t", process_set))
    return obj if mine else _pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj`, in rank order of the set."""
    name = _name(name, "allgather_object", _id_of(process_set))
    data, failure = _pickled(obj, True)
    sizes = synchronize(allgather_async(
        torch.tensor([data.numel() if data is not None else -1], dtype=torch.int64),
        name + ".sz", process_set))
    if (sizes < 0).any():
        _pickle_failed("allgather_object", [process_set.ranks[i] for i in
                                            (sizes < 0).nonzero().flatten().tolist()], failure)
    gathered = synchronize(allgather_async(data, name + ".t", process_set)).numpy().tobytes()
    out, at = [], 0
    for n in sizes.tolist():
        out.append(_pickle.loads(gathered[at:at + n]))
        at += n
    return out
