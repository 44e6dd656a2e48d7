"""The out-of-place collectives as autograd functions, as Horovod's mpi_ops has them: each
returns a new tensor and, when its input requires grad, carries the gradient back through the
adjoint collective (allreduce <-> allreduce, allgather -> averaged allreduce and this rank's
slice, broadcast -> averaged allreduce kept on the root, alltoall -> alltoall with the received
splits, reducescatter -> allgather).
"""
import torch

from kolo.torch import basics
from kolo.torch.arguments import compression_arg, tensor_arg, tensor_list
from kolo.torch.compression import Compression
from kolo.torch.ops import (Average, Sum, allgather_async, allreduce_async, alltoall_async,
                            broadcast_async, grouped_allgather_async, grouped_allreduce_async,
                            reducescatter_async, grouped_reducescatter_async, synchronize)
from kolo.torch.process_sets import global_process_set


class HorovodAllreduce(torch.autograd.Function):
    """allreduce; the gradient is reduced the same way."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, pre, post, process_set = ctx.args
        grad = allreduce(grad_output, average=average, op=op, prescale_factor=pre,
                         postscale_factor=post, process_set=process_set)
        return (grad,) + (None,) * 6


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """A new tensor: `tensor` reduced over the ranks (op defaults to Average)."""
    compressed, ctx = compression_arg(compression).compress(tensor_arg(tensor))
    reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                     postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


class HorovodGroupedAllreduce(torch.autograd.Function):

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), average, name, op,
                                                         prescale_factor, postscale_factor,
                                                         process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        average, op, pre, post, process_set = ctx.args
        grads = grouped_allreduce(list(grad_output), average=average, op=op, prescale_factor=pre,
                                  postscale_factor=post, process_set=process_set)
        return (None,) * 6 + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """New tensors: each of `tensors` reduced, negotiated and completed as one unit."""
    compression = compression_arg(compression)
    compressed, ctxs = zip(*[compression.compress(t)
                             for t in tensor_list(tensors, "grouped_allreduce")])
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                            process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


def _allgather_grad(grad_output, rows, process_set):
    """Horovod's allgather gradient: the average over the ranks, this rank's rows of it."""
    grad = allreduce(grad_output, op=Average, process_set=process_set)
    counts = allgather(torch.tensor([rows], dtype=torch.int64), process_set=process_set)
    offset = int(counts[:process_set.rank()].sum())
    return grad.narrow(0, offset, rows)


def _rows(tensor):
    return tensor.shape[0] if tensor.dim() else 1


class HorovodAllgather(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows, ctx.process_set = _rows(tensor), process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        return _allgather_grad(grad_output, ctx.rows, ctx.process_set), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's `tensor` concatenated along the first dimension (which may differ)."""
    return HorovodAllgather.apply(tensor_arg(tensor), name, process_set)


class HorovodGroupedAllgather(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows, ctx.process_set = [_rows(t) for t in tensors], process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        return (None, None) + tuple(_allgather_grad(g, r, ctx.process_set)
                                    for g, r in zip(grad_output, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return list(HorovodGroupedAllgather.apply(name, process_set,
                                              *tensor_list(tensors, "grouped_allgather")))


class HorovodBroadcast(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if basics.rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding root_rank's `tensor` (root_rank is a job rank)."""
    return HorovodBroadcast.apply(tensor_arg(tensor), root_rank, name, process_set)


class HorovodAlltoall(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.process_set = received, process_set
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows splits[p] of `tensor` go to rank p (equal parts when splits is None). Returns the
    rows received, in rank order, and with splits given also the count received from each."""
    return HorovodAlltoall.apply(tensor_arg(tensor), splits, name, process_set)


def _reducescatter_grad(grad_output, op, process_set, scale):
    if op not in (Average, Sum):
        raise NotImplementedError("reducescatter has a gradient for Average and Sum only")
    grad = allgather(grad_output, process_set=process_set) * scale
    return grad / process_set.size() if op == Average else grad


class HorovodReducescatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.args = (op, process_set, prescale_factor * postscale_factor)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        return (_reducescatter_grad(grad_output, *ctx.args),) + (None,) * 5


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's rows of `tensor` reduced over the ranks (the first rows % size ranks get one
    row more than the others)."""
    compressed, ctx = compression_arg(compression).compress(tensor_arg(tensor))
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, ctx)


class HorovodGroupedReducescatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.args = (op, process_set, prescale_factor * postscale_factor)
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        return (None,) * 5 + tuple(_reducescatter_grad(g, *ctx.args) for g in grad_output)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    compression = compression_arg(compression)
    compressed, ctxs = zip(*[compression.compress(t)
                             for t in tensor_list(tensors, "grouped_reducescatter")])
    reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]
