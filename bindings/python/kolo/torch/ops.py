"""kolo.torch's collectives on CPU tensors, with Horovod's names, arguments and semantics: the
asynchronous forms (integer handles for poll() and synchronize()), the in-place forms, join and
barrier. The autograd-aware out-of-place forms (allreduce, allgather, ...) are in autograd_ops.py.

A contiguous tensor goes to the engine by address, without a copy; a non-contiguous one through a
contiguous copy, which the in-place forms copy back. _handle_map holds every submitted tensor
until synchronize(), so the memory the engine writes outlives the op.
"""
import itertools
import warnings

import torch

from kolo import _core
from kolo.torch import basics
from kolo.torch.arguments import rank_arg, scale_arg, splits_arg, tensor_arg, tensor_list
from kolo.torch.process_sets import _id_of, _registered, global_process_set

# Reduction ops, with Horovod's values.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
_OPS = {Average: _core.ReduceOp.AVERAGE, Sum: _core.ReduceOp.SUM, Min: _core.ReduceOp.MIN,
        Max: _core.ReduceOp.MAX, Product: _core.ReduceOp.PRODUCT}

_DTYPES = {torch.float32: _core.DType.FLOAT32, torch.float64: _core.DType.FLOAT64,
           torch.float16: _core.DType.FLOAT16, torch.bfloat16: _core.DType.BFLOAT16,
           torch.int32: _core.DType.INT32, torch.int64: _core.DType.INT64,
           torch.uint8: _core.DType.UINT8, torch.int8: _core.DType.INT8,
           torch.int16: _core.DType.INT16}


class _Op:
    """A submitted op: the engine's handles, the tensors to keep alive, and what synchronize()
    returns once every handle succeeded."""
    __slots__ = ("handles", "keep", "finish")

    def __init__(self, handles, keep, finish):
        self.handles, self.keep, self.finish = handles, keep, finish


_handle_map = {}             # int handle -> _Op
_handle_ids = itertools.count()
_name_counters = {}          # (process set id, op kind) -> ops named so far
_joins = 0                   # join()s completed since init()


def _reset():
    """init(): a fresh engine starts with no handles and fresh auto-names on every rank."""
    global _joins
    _handle_map.clear()
    _name_counters.clear()
    _joins = 0


def _text(name):
    """`name` as the engine's text: str(name), which must encode as UTF-8 (a lone surrogate such
    as '\\ud800' does not)."""
    text = str(name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("name %r is not valid text: %s" % (text, e.reason)) from None
    return text


def _name(name, kind, set_id):
    """`name`, or "<kind>.noname.<n>": the n-th unnamed op of this kind in this process set,
    the same on every member that submits the same sequence of ops (Horovod's rule). Ranks
    that joined did fewer ops: after each join() the count restarts, as "<kind>.noname.j<k>.<n>"
    for the k-th join, so that names agree again."""
    if name is not None:
        return _text(name)
    n = _name_counters.get((set_id, kind), 0)
    _name_counters[(set_id, kind)] = n + 1
    return "%s.noname.%s%d" % (kind, "j%d." % _joins if _joins else "", n)


def _names(name, kind, set_id, count):
    base = _name(name, kind, set_id)
    return ["%s.%d" % (base, i) for i in range(count)]


def _dtype_of(tensor):
    tensor_arg(tensor)
    if tensor.device.type != "cpu":
        raise ValueError("kolo.torch handles CPU tensors only; this tensor is on %s" %
                         tensor.device)
    if tensor.layout != torch.strided:
        raise ValueError("kolo.torch collectives take dense tensors, not %s" % tensor.layout)
    try:
        return _DTYPES[tensor.dtype]
    except KeyError:
        raise TypeError("kolo does not support %s tensors yet (supported: %s)" % (
            tensor.dtype, ", ".join(str(d) for d in _DTYPES))) from None


def _scales(prescale_factor, postscale_factor):
    return (scale_arg(prescale_factor, "prescale_factor"),
            scale_arg(postscale_factor, "postscale_factor"))


def _core_op(op):
    if op == Adasum:
        raise NotImplementedError("kolo does not implement Adasum; use op=Average or op=Sum")
    try:
        return _OPS[op]
    except (KeyError, TypeError):
        raise ValueError("op %r is not one of Average, Sum, Min, Max, Product" % (op,)) from None


def handle_average_backwards_compatibility(op, average):
    """Horovod's deprecated `average` argument: op wins; average=True/False means Average/Sum."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of "
                             "them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op`", DeprecationWarning)
        return Average if average else Sum
    return Average


def _rows(tensors, what, names):
    """Refuses 0-d tensors where the op works on rows (the first dimension), as Horovod does:
    gathering or scattering a scalar has no dimension to concatenate or split."""
    for t, name in zip(tensors, names):
        if isinstance(t, torch.Tensor) and t.dim() == 0:
            raise ValueError("%s of '%s': the tensor is 0-d (a scalar); %s works on the first "
                             "dimension, so pass tensor.reshape(1)" % (what, name, what))


def _contiguous(tensor):
    """The tensor itself, or a contiguous copy of it (detached: the engine writes raw memory)."""
    t = tensor.detach()
    return t if t.is_contiguous() else t.contiguous()


def _copy_back(tensor, buffer):
    """finish() of an in-place op: the result into `tensor` if it went through a copy."""
    def finish():
        if buffer.data_ptr() != tensor.data_ptr() or buffer.stride() != tensor.stride():
            with torch.no_grad():
                tensor.copy_(buffer)
        return tensor
    return finish


def _result(handle, dtype):
    """A tensor sized by the engine (allgather, alltoall, reduce_scatter)."""
    out = torch.empty(handle.output_shape(), dtype=dtype)
    handle.copy_output(out.data_ptr(), handle.output_nbytes())
    return out


def _register(handles, keep, finish):
    handle = next(_handle_ids)
    _handle_map[handle] = _Op(handles, keep, finish)
    return handle


def poll(handle):
    """True once the op is done; synchronize() will not block then."""
    if callable(handle):
        return True
    op = _handle_map.get(handle)
    if op is None:
        raise ValueError("handle %r is not a pending kolo op" % (handle,))
    return all(h.done() for h in op.handles)


def synchronize(handle):
    """Waits for the op and returns its result; raises its error (a KoloError: MismatchError,
    PeerLostError, TimeoutError ... are HorovodInternalErrors too)."""
    if callable(handle):
        return handle()
    op = _handle_map.get(handle)
    if op is None:
        return None
    for h in op.handles:
        h.wait()  # KeyboardInterrupt leaves the op registered: its tensors stay alive
    if _handle_map.pop(handle, None) is None:
        raise ValueError("handle %r was synchronized by another thread at the same time; its "
                         "result went there" % (handle,))
    for h in op.handles:
        h.check()
    return op.finish()


# ------------------------------------------------------------------------------- allreduce
def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set):
    engine, set_id, core_op = basics._engine(), _id_of(process_set), _core_op(op)
    dtype = _dtype_of(tensor)
    src = _contiguous(tensor)
    dst = src if output is tensor else output
    pre, post = _scales(prescale_factor, postscale_factor)
    h = engine.allreduce(_name(name, "allreduce", set_id), src.data_ptr(), dst.data_ptr(), dtype,
                         list(src.shape), core_op, pre, post, _core.Compression.NONE, set_id)
    finish = _copy_back(tensor, src) if output is tensor else (lambda: output)
    return _register([h], (tensor, src, dst), finish)


class _PreparedAllreduce:
    """An in-place allreduce of one contiguous tensor that is submitted again and again (an
    optimizer's gradient): the checks and argument conversions of allreduce_async_ run once, and
    submit() runs only while matches() confirms that the tensor, its memory, the engine, the op,
    the scale factors and the process set are still the ones checked. In a backward pass this
    saves about 15 us per gradient."""
    __slots__ = ("tensor", "ptr", "engine", "settings", "args", "finish")

    def __init__(self, tensor, name, op, prescale_factor, postscale_factor, process_set):
        self.engine, set_id, core_op = basics._engine(), _id_of(process_set), _core_op(op)
        dtype = _dtype_of(tensor)
        if not tensor.is_contiguous():
            raise ValueError("a prepared allreduce needs a contiguous tensor")
        self.tensor, self.ptr = tensor, tensor.data_ptr()
        self.settings = (op, prescale_factor, postscale_factor, process_set)
        self.args = (_text(name), self.ptr, self.ptr, dtype, list(tensor.shape), core_op,
                     *_scales(prescale_factor, postscale_factor), _core.Compression.NONE, set_id)
        self.finish = lambda: tensor

    def matches(self, tensor, settings):
        """settings: (op, prescale_factor, postscale_factor, process_set) as the caller has them
        now."""
        return (tensor is self.tensor and tensor.data_ptr() == self.ptr and
                settings == self.settings and basics._state.engine is self.engine and
                _registered.get(self.args[-1]) is settings[-1])

    def submit(self):
        return _register([self.engine.allreduce(*self.args)], self.tensor, self.finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing `tensor` over the ranks into a new tensor (op defaults to Average)."""
    op = handle_average_backwards_compatibility(op, average)
    _dtype_of(tensor)  # a clear TypeError for a non-tensor before its shape is read
    output = torch.empty(tensor.shape, dtype=tensor.dtype)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing `tensor` in place."""
    op = handle_average_backwards_compatibility(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_allreduce_async(tensors, names, op, prescale_factor, postscale_factor,
                             process_set):
    """In place: every tensor of `tensors` is reduced, as one unit per dtype (the engine's groups
    share a dtype)."""
    engine, set_id, core_op = basics._engine(), _id_of(process_set), _core_op(op)
    tensors = tensor_list(tensors, "grouped_allreduce")
    dtypes = [_dtype_of(t) for t in tensors]
    buffers = [_contiguous(t) for t in tensors]
    by_dtype = {}
    for i, dtype in enumerate(dtypes):
        by_dtype.setdefault(dtype, []).append(i)
    handles = []
    for dtype, members in by_dtype.items():
        handles += engine.grouped_allreduce(
            [names[i] for i in members], [buffers[i].data_ptr() for i in members], dtype,
            [list(buffers[i].shape) for i in members], core_op,
            *_scales(prescale_factor, postscale_factor), _core.Compression.NONE, set_id)
    copies = [_copy_back(t, b) for t, b in zip(tensors, buffers)]
    return _register(handles, (tensors, buffers), lambda: [c() for c in copies])


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors in place, negotiated and completed together."""
    op = handle_average_backwards_compatibility(op, average)
    set_id = _id_of(process_set)
    tensors = tensor_list(tensors, "grouped_allreduce")
    return _grouped_allreduce_async(tensors, _names(name, "grouped_allreduce", set_id,
                                                    len(tensors)),
                                    op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors into new tensors."""
    outputs = [_contiguous(t).clone() for t in tensor_list(tensors, "grouped_allreduce")]
    return grouped_allreduce_async_(outputs, average, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse tensor reduced as Horovod does: allgather of its indices and values; returns a
    callable handle for synchronize()."""
    t = tensor.coalesce() if not tensor.is_coalesced() else tensor
    indices = allgather_async(t._indices().transpose(0, 1).contiguous(),
                              name="%s.indices" % name, process_set=process_set)
    values = allgather_async(t._values(), name="%s.values" % name, process_set=process_set)

    def handle():
        v = synchronize(values)
        i = synchronize(indices)
        if op == Average:
            v = v / process_set.size()
        return torch.sparse_coo_tensor(i.transpose(0, 1), v, t.size())
    return handle


# --------------------------------------------------------------- allgather, broadcast, ...
def _allgather_async(tensors, names, process_set):
    _rows(tensors, "allgather", names)
    engine, set_id = basics._engine(), _id_of(process_set)
    dtypes = [_dtype_of(t) for t in tensors]
    buffers = [_contiguous(t) for t in tensors]
    handles = [engine.allgather(n, b.data_ptr(), d, list(b.shape), set_id)
               for n, b, d in zip(names, buffers, dtypes)]
    return handles, buffers


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's tensor along the first dimension (which may differ)."""
    names = [_name(name, "allgather", _id_of(process_set))]
    (h,), buffers = _allgather_async([tensor], names, process_set)
    return _register([h], (tensor, buffers), lambda: _result(h, tensor.dtype))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    tensors = tensor_list(tensors, "grouped_allgather")
    names = _names(name, "grouped_allgather", _id_of(process_set), len(tensors))
    handles, buffers = _allgather_async(tensors, names, process_set)
    return _register(handles, (tensors, buffers),
                     lambda: [_result(h, t.dtype) for h, t in zip(handles, tensors)])


def _broadcast_async(tensor, buffer, root_rank, name, process_set, finish):
    engine, set_id = basics._engine(), _id_of(process_set)
    dtype = _dtype_of(tensor)
    root_rank = rank_arg(root_rank, "root_rank", basics.size())
    root = root_rank if set_id == 0 else process_set._root_index(root_rank)
    h = engine.broadcast(_name(name, "broadcast", set_id), buffer.data_ptr(), dtype,
                         list(buffer.shape), root, set_id)
    return _register([h], (tensor, buffer), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts sending root_rank's tensor (a job rank, also in a process set) to a new tensor on
    every rank; `tensor` is not modified."""
    buffer = _contiguous(tensor).clone()
    return _broadcast_async(tensor, buffer, root_rank, name, process_set, lambda: buffer)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts overwriting `tensor` with root_rank's."""
    buffer = _contiguous(tensor)
    return _broadcast_async(tensor, buffer, root_rank, name, process_set,
                            _copy_back(tensor, buffer))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending splits[p] first-dimension rows of `tensor` to rank p of the set (equal
    parts when splits is None). synchronize() returns (output, received_splits)."""
    engine, set_id = basics._engine(), _id_of(process_set)
    n = process_set.size()
    if set_id != 0 and n != basics.size():
        raise NotImplementedError("alltoall in a process set smaller than the job is not "
                                  "supported by kolo's engine yet")
    dtype = _dtype_of(tensor)
    src = _contiguous(tensor)
    send = splits_arg(splits)
    base = _name(name, "alltoall", set_id)
    h = engine.alltoall(base, src.data_ptr(), dtype, list(src.shape), send, set_id)
    # The engine keeps the received row counts to itself: they travel in an alltoall of their
    # own, one count to each rank.
    rows = src.shape[0] if src.dim() else 1
    counts = torch.tensor(send or [rows // n] * n, dtype=torch.int32)
    hc = engine.alltoall(base + ".splits", counts.data_ptr(), _core.DType.INT32, [n], [1] * n,
                         set_id)
    return _register([h, hc], (tensor, src, counts),
                     lambda: (_result(h, tensor.dtype), _result(hc, torch.int32)))


def _reducescatter_async(tensors, names, op, process_set, prescale_factor, postscale_factor):
    _rows(tensors, "reducescatter", names)
    engine, set_id, core_op = basics._engine(), _id_of(process_set), _core_op(op)
    dtypes = [_dtype_of(t) for t in tensors]
    buffers = [_contiguous(t) for t in tensors]
    handles = [engine.reduce_scatter(n, b.data_ptr(), d, list(b.shape), core_op,
                                     *_scales(prescale_factor, postscale_factor), set_id)
               for n, b, d in zip(names, buffers, dtypes)]
    return handles, buffers


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing `tensor` over the ranks and scattering the first dimension: rank r of
    the set gets its rows, the first rows % size ranks one more than the others."""
    names = [_name(name, "reducescatter", _id_of(process_set))]
    (h,), buffers = _reducescatter_async([tensor], names, op, process_set, prescale_factor,
                                         postscale_factor)
    return _register([h], (tensor, buffers), lambda: _result(h, tensor.dtype))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    tensors = tensor_list(tensors, "grouped_reducescatter")
    names = _names(name, "grouped_reducescatter", _id_of(process_set), len(tensors))
    handles, buffers = _reducescatter_async(tensors, names, op, process_set, prescale_factor,
                                            postscale_factor)
    return _register(handles, (tensors, buffers),
                     lambda: [_result(h, t.dtype) for h, t in zip(handles, tensors)])


# ------------------------------------------------------------------------------ join, barrier
def _wait(handle):
    handle.wait()
    handle.check()
    return handle


def join(device=-1):
    """This rank has no more data: it joins the other ranks' allreduces with zeros (the op's
    identity: +inf for Min, 1 for Product, ...) until every rank has joined. Returns the last
    rank to join. `device` is accepted for Horovod's signature (kolo works on the CPU)."""
    global _joins
    del device
    last = _wait(basics._engine().join(0)).output_value()
    _name_counters.clear()  # every rank is here: unnamed ops restart their count together
    _joins += 1
    return last


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called barrier()."""
    _wait(basics._engine().barrier(_id_of(process_set)))
