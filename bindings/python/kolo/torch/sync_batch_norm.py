"""SyncBatchNorm: batch normalization whose batch statistics are taken over every rank's batch
(Horovod's hvd.SyncBatchNorm), on CPU tensors.

Forward: one allreduce of [sum, sum of squares, count] per channel gives the global mean and
variance (ranks' batches may differ in size). Backward: one allreduce of [sum dy, sum dy*(x-mean)]
per channel gives the input gradient; the weight and bias gradients stay local, since the
optimizer averages them like any other gradient.
"""
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.torch.autograd_ops import allreduce
from kolo.torch.ops import Sum
from kolo.torch.process_sets import global_process_set


def _per_channel(x):
    """x as (C, everything else): channel statistics are sums over dim 1."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


class _SyncBatchNormFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        flat = _per_channel(x)
        count = torch.full((1,), float(flat.shape[1]), dtype=torch.float64)
        stats = torch.cat([flat.sum(1).double(), (flat.double() ** 2).sum(1), count])
        stats = allreduce(stats, op=Sum, name=None, process_set=process_set)
        c = x.shape[1]
        total = stats[-1]
        mean = stats[:c] / total
        var = (stats[c:2 * c] / total - mean ** 2).clamp_(min=0)
        if running_mean is not None:
            unbiased = var * total / max(float(total) - 1, 1.0)
            running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        shape = [1, c] + [1] * (x.dim() - 2)
        invstd = (var + eps).rsqrt().to(x.dtype)
        mean = mean.to(x.dtype)
        xhat = (x - mean.view(shape)) * invstd.view(shape)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.total, ctx.process_set = total, process_set
        out = xhat
        if weight is not None:
            out = out * weight.view(shape) + bias.view(shape)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        xhat, weight, invstd = ctx.saved_tensors
        c = grad_out.shape[1]
        shape = [1, c] + [1] * (grad_out.dim() - 2)
        sum_dy = _per_channel(grad_out).sum(1)
        sum_dy_xhat = _per_channel(grad_out * xhat).sum(1)
        grad_weight = sum_dy_xhat if weight is not None else None
        grad_bias = sum_dy if weight is not None else None
        sums = allreduce(torch.cat([sum_dy, sum_dy_xhat]).double(), op=Sum,
                         process_set=ctx.process_set)
        mean_dy = (sums[:c] / ctx.total).to(grad_out.dtype).view(shape)
        mean_dy_xhat = (sums[c:] / ctx.total).to(grad_out.dtype).view(shape)
        scale = invstd.view(shape)
        if weight is not None:
            scale = scale * weight.view(shape)
        grad_x = (grad_out - mean_dy - xhat * mean_dy_xhat) * scale
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over (N, C, ...) inputs with statistics of the whole job's batch in training;
    evaluation uses the running statistics, as BatchNorm does."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training and self.track_running_stats:
            return torch.nn.functional.batch_norm(input, self.running_mean, self.running_var,
                                                  self.weight, self.bias, False, 0.0, self.eps)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        running = self.training and self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias, self.running_mean if running else None,
            self.running_var if running else None, self.eps, momentum, self.process_set)
