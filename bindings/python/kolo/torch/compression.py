"""Gradient compression as Horovod defines it: a compressor turns a tensor into what is sent
(compress) and back (decompress). Compression.fp16 (and kolo's bf16) halve float traffic."""
import torch


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(tensor, context) -> tensor."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends the tensor as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _CastCompressor(Compressor):
    """Sends floating-point tensors cast to `wire`, and casts the result back."""
    wire = None

    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(cls.wire), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.type(ctx) if ctx.is_floating_point else tensor


class FP16Compressor(_CastCompressor):
    wire = torch.float16


class BF16Compressor(_CastCompressor):
    wire = torch.bfloat16


class Compression:
    """Horovod's choices, plus bf16 (kolo's core reduces bfloat16 natively)."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
