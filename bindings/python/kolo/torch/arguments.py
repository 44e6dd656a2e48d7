"""Checks of the arguments kolo.torch's collectives take from the user, where they enter: each
refusal names the argument and what it accepts (TypeError for a wrong kind of value, ValueError
for a value out of range), before anything is submitted, instead of an AttributeError from deep
inside or a pybind11 signature dump."""
import numbers

import torch


def tensor_arg(tensor, what="tensor"):
    """`tensor` itself, when it is a torch.Tensor (dtype and device are checked by the op)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, got %s" % (what, type(tensor).__name__))
    return tensor


def tensor_list(tensors, op):
    """The tensors of a grouped op as a list: a list, tuple or other iterable of at least one
    torch.Tensor."""
    if isinstance(tensors, (torch.Tensor, str, bytes)) or not hasattr(tensors, "__iter__"):
        raise TypeError("%s takes a list of tensors, got %s" % (op, type(tensors).__name__))
    tensors = list(tensors)
    if not tensors:
        raise ValueError("%s needs at least one tensor" % op)
    for i, t in enumerate(tensors):
        tensor_arg(t, "%s: tensors[%d]" % (op, i))
    return tensors


def scale_arg(value, what):
    """A scale factor (prescale_factor, postscale_factor) as a float; the engine refuses one
    that is not finite."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a real number, got %r" % (what, value))
    return float(value)


def rank_arg(value, what, size):
    """A job rank (root_rank): an integer in [0, size)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an integer rank, got %r" % (what, value))
    if not 0 <= int(value) < size:
        raise ValueError("%s %d is not a rank of this job of %d" % (what, int(value), size))
    return int(value)


def ranks_arg(ranks, what):
    """A list of job ranks (a process set's, init(comm=...)'s) as sorted ints: a list, tuple or
    range of integers (never truncated: 0.7 or "1" is refused, not taken as rank 0 or 1)."""
    if not isinstance(ranks, (list, tuple, range)):
        raise TypeError("%s takes a list of ranks, not %s (mpi4py communicators are not "
                        "supported)" % (what, type(ranks).__name__))
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, numbers.Integral):
            raise TypeError("%s: ranks must be integers, got %r" % (what, r))
    return sorted(int(r) for r in ranks)


def splits_arg(splits):
    """alltoall's splits as a list of ints (None: even parts): a list, tuple or 1-d integer
    tensor of row counts. Negative counts and a wrong sum are refused by the engine."""
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dim() != 1 or splits.is_floating_point() or splits.is_complex():
            raise TypeError("splits must be a 1-d integer tensor, got %s of shape %s" %
                            (splits.dtype, list(splits.shape)))
        splits = splits.tolist()
    if isinstance(splits, (str, bytes)) or not hasattr(splits, "__iter__"):
        raise TypeError("splits must be a list of row counts, got %s" % type(splits).__name__)
    out = []
    for s in splits:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError("splits must hold integer row counts, got %r" % (s,))
        if not -2**63 <= int(s) < 2**63:
            raise ValueError("splits: %d rows cannot be a row count" % int(s))
        out.append(int(s))
    return out


def compression_arg(compression):
    """A compressor (Compression.none, Compression.fp16, Compression.bf16 or any object with
    compress() and decompress())."""
    if not (callable(getattr(compression, "compress", None)) and
            callable(getattr(compression, "decompress", None))):
        raise TypeError("compression must be Compression.none, Compression.fp16 or "
                        "Compression.bf16 (an object with compress and decompress), got %r" %
                        (compression,))
    return compression
