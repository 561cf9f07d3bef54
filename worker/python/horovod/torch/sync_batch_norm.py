"""SyncBatchNorm: batch normalization over the batch of every rank."""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from horovod.torch import mpi_ops
from horovod.torch.mpi_ops import Sum, global_process_set


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose statistics are those of every rank's batch
    together, as if one process saw the combined batch; a drop-in for
    torch.nn.BatchNorm1d/2d/3d.

    In training mode each forward sums every channel's count, sum and sum
    of squares over the ranks (one allreduce) and each backward the two
    sums its input gradient needs (one more); the weight and bias
    gradients stay local, for DistributedOptimizer to average. In
    evaluation mode, or in a job of one, it is plain batch normalization.
    Works on CPU and CUDA tensors.

    Arguments are torch.nn.BatchNorm2d's, and process_set (the ranks
    whose batches are normalized together).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine,
                         track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)"
                             .format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or mpi_ops.size() == 1:
            return super().forward(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        return _SyncBatchNorm.apply(
            input, self.weight, self.bias,
            self.running_mean if self.track_running_stats else None,
            self.running_var if self.track_running_stats else None,
            self.eps, momentum, self.process_set)


def _per_channel(t):
    """Sums over every dimension but the channel's (1)."""
    return t.transpose(0, 1).reshape(t.shape[1], -1).sum(1)


def _view(t, like):
    return t.view([1, -1] + [1] * (like.dim() - 2))


class _SyncBatchNorm(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps,
                momentum, process_set):
        x = input.contiguous()
        c = x.shape[1]
        count = torch.full((1,), x.numel() // c, dtype=torch.float64,
                           device=x.device)
        xd = x.double()
        stats = torch.cat([_per_channel(xd), _per_channel(xd * xd), count])
        stats = mpi_ops.allreduce(stats, op=Sum, name=None,
                                  process_set=process_set)
        ctx.process_set = process_set
        total = stats[-1]
        mean = stats[:c] / total
        var = (stats[c:2 * c] / total - mean * mean).clamp_(min=0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * total / torch.clamp(total - 1, min=1)
                running_mean.mul_(1 - momentum).add_(
                    mean.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_(
                    unbiased.to(running_var.dtype), alpha=momentum)
        mean, invstd = mean.to(x.dtype), invstd.to(x.dtype)
        y = (x - _view(mean, x)) * _view(invstd, x)
        if weight is not None:
            y = y * _view(weight, x) + _view(bias, x)
        ctx.save_for_backward(x, weight, mean, invstd, total)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, mean, invstd, total = ctx.saved_tensors
        dy = grad_output.contiguous()
        c = x.shape[1]
        xmu = x - _view(mean, x)
        sum_dy = _per_channel(dy)
        sum_dy_xmu = _per_channel(dy * xmu)
        grad_weight = grad_bias = None
        if weight is not None:
            # Local: DistributedOptimizer averages them over the ranks.
            grad_weight = sum_dy_xmu * invstd if ctx.needs_input_grad[1] \
                else None
            grad_bias = sum_dy if ctx.needs_input_grad[2] else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            sums = mpi_ops.allreduce(torch.cat([sum_dy, sum_dy_xmu]).double(),
                                     op=Sum, name=None,
                                     process_set=ctx.process_set)
            mean_dy = (sums[:c] / total).to(x.dtype)
            mean_dy_xmu = (sums[c:] / total).to(x.dtype)
            scale = invstd if weight is None else invstd * weight
            grad_input = _view(scale, x) * (
                dy - _view(mean_dy, x)
                - xmu * _view(invstd * invstd * mean_dy_xmu, x))
        return (grad_input, grad_weight, grad_bias, None, None, None, None,
                None)
