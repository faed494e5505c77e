"""batch_norm, group_norm, instance_norm, local_response_norm: torch.nn.functional's
normalizations over channels, as compositions of recorded ops.

Each is written in tinytensor ops (mean, subtraction, rsqrt, pooling), so the gradient,
the double backward and tt.compile's capture come from those ops; no value is read into
Python. Training-mode batch_norm is instead one op with C kernels (ops/batch_norm.py)
where those kernels take the call; the composition stays its reference and fallback. Running statistics (batch_norm and instance_norm in training) are updated in
place as torch updates them: the new value is computed in ops under no_grad and written
into the buffer's own array (`buffers.write`), which under tt.compile is a recorded
assignment the replay repeats, never a value frozen at the first call.
"""
import numbers

from ..core.grad_mode import no_grad
from ..kernels import fusion as _fusion
from ..messages import plain
from . import batch_norm as _bn
from .buffers import read as _read_buffer, write as _write_buffer
from .elementwise import rsqrt
from .movement import _where
from .reduce import mean

__all__ = ["batch_norm", "group_norm", "instance_norm", "local_response_norm"]


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _channel_params(op, x, weight, bias, running_mean, running_var):
    """(C, the shape that broadcasts a channel vector against x), each given parameter checked
    to be a vector of C."""
    c = x.shape[1]
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        _check_vector(op, what, t, c, x)
    return c, _channel_shape(x)


def _need_running(op, running_mean, running_var, when):
    if running_mean is None or running_var is None:
        raise ValueError(f"{op}: running_mean and running_var are needed when {when}{_where()}")


def _check_vector(op, what, t, c, x):
    if t is not None and (t.ndim != 1 or t.shape[0] != c):
        raise ValueError(f"{op}: {what} of shape {tuple(t.shape)} must have {c} entries, one per "
                         f"channel of the input of shape {tuple(x.shape)}{_where()}")


def _affine(y, weight, bias, shape):
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def _normalize(x, dims, eps):
    """(x - mean) / sqrt(var + eps) over `dims` (biased var), and the mean and var."""
    mu = mean(x, dim=dims, keepdim=True)
    xc = x - mu
    var = mean(xc * xc, dim=dims, keepdim=True)
    return xc * rsqrt(var + eps), mu, var


def _update_running(op, running, stat, n, factor, unbiased, name):
    """running <- (1 - factor) * running + factor * stat (stat's var made unbiased), in place."""
    if running is None:
        return
    with no_grad():
        old = _read_buffer(op, running, name, update=True)
        s = stat.detach().reshape(tuple(running.shape)).to(running.dtype)
        if unbiased and not isinstance(n, numbers.Number):   # a count over ranks, as a tensor
            s = s * (n / (n - 1)).to(s.dtype)
        elif unbiased and n > 1:   # torch: n == 1 leaves the biased var
            s = s * (n / (n - 1))
        if not isinstance(factor, numbers.Number):   # a 0-d tensor (momentum=None's 1/n)
            factor = factor.to(running.dtype)
        new = old * (1.0 - factor) + s * factor
        _write_buffer(op, running, new, old)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm: normalize each channel (dim 1) over the batch and
    spatial dims. training: batch statistics, and running_mean/running_var (when given)
    updated in place with `momentum` (a float, or a 0-d tensor: nn.BatchNorm's 1/n for
    momentum=None); eval: the running statistics."""
    x = input
    if momentum is None or isinstance(momentum, bool):   # torch: a float (None is nn.BatchNorm's)
        raise TypeError(f"batch_norm: momentum must be a float or a 0-d tensor, got {momentum!r}"
                        f" (momentum=None, the cumulative average, is nn.BatchNorm's){_where()}")
    if x.numel() == 0:   # torch: an empty batch gives an empty result, the stats untouched
        return _affine(x * 1.0, weight, bias, _channel_shape(x)) if x.ndim >= 2 else x * 1.0
    if x.ndim < 2:
        raise ValueError(f"batch_norm: the input needs a batch and a channel dim, got shape "
                         f"{tuple(x.shape)}{_where()}")
    c, shape = _channel_params("batch_norm", x, weight, bias, running_mean, running_var)
    dims = (0,) + tuple(range(2, x.ndim))
    # the weight joins the per-channel scale (and, in eval, the mean the shift) before they
    # meet the input: two full-size passes forward and backward fewer than scaling after
    w = weight.reshape(shape) if weight is not None else None
    if training:
        n = x.numel() // c if c else 0
        if n <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, "
                             f"got input of shape {tuple(x.shape)}{_where()}")
        why = _fusion.choose("batch_norm", _bn.why_not_fused, x, weight, bias)
        if why is None:   # one op, C kernels forward and backward (ops/batch_norm.py)
            params = [p for p in (weight, bias) if p is not None]
            y, mu, var, _ = _bn.BatchNormTrain.apply(x, *params, eps=float(eps), has_weight=weight is not None,
                                                  has_bias=bias is not None)
            bias = None   # in y already
        else:
            y, mu, var = _bn.reference(x, w, dims, eps)
        _update_running("batch_norm", running_mean, mu, n, momentum, False, "running_mean")
        _update_running("batch_norm", running_var, var, n, momentum, True, "running_var")
    else:
        _need_running("batch_norm", running_mean, running_var, "training=False")
        rm = _read_buffer("batch_norm", running_mean, "running_mean").reshape(shape)
        rv = _read_buffer("batch_norm", running_var, "running_var").reshape(shape)
        scale = rsqrt(rv + eps)
        scale = scale if w is None else scale * w
        shift = rm * scale if bias is None else rm * scale - bias.reshape(shape)
        return x * scale - shift     # per-channel terms first: two full-size passes
    return y if bias is None else y + bias.reshape(shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """torch.nn.functional.instance_norm: each channel of each sample normalized over its
    spatial dims; with use_input_stats the running statistics (when given) take the mean
    over the batch of the per-instance statistics, else they normalize."""
    x = input
    if x.ndim < 3:
        raise ValueError(f"instance_norm: the input needs (N, C, spatial...) dims, got shape "
                         f"{tuple(x.shape)}{_where()}")
    c, shape = _channel_params("instance_norm", x, weight, bias, running_mean, running_var)
    if not use_input_stats:
        _need_running("instance_norm", running_mean, running_var, "use_input_stats=False")
        rm = _read_buffer("instance_norm", running_mean, "running_mean").reshape(shape)
        rv = _read_buffer("instance_norm", running_var, "running_var").reshape(shape)
        return _affine((x - rm) * rsqrt(rv + eps), weight, bias, shape)
    dims = tuple(range(2, x.ndim))
    n = 1
    for d in dims:
        n *= x.shape[d]
    if n <= 1:
        raise ValueError(f"instance_norm: expected more than 1 spatial element when training, "
                         f"got input of shape {tuple(x.shape)}{_where()}")
    y, mu, var = _normalize(x, dims, eps)
    if running_mean is not None or running_var is not None:
        # torch: batch norm of the (1, N*C, ...) reshape, its running stats averaged over N
        _update_running("instance_norm", running_mean, mean(mu.reshape(x.shape[0], c), dim=0),
                        n, momentum, False, "running_mean")
        _update_running("instance_norm", running_var, mean(var.reshape(x.shape[0], c), dim=0),
                        n, momentum, True, "running_var")
    return _affine(y, weight, bias, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm: channels split into num_groups groups, each group of
    each sample normalized over its channels and spatial dims; per-channel affine."""
    x = input
    if x.ndim < 2:
        raise ValueError(f"group_norm: the input needs (N, C, ...) dims, got shape "
                         f"{tuple(x.shape)}{_where()}")
    c = x.shape[1]
    if not isinstance(num_groups, numbers.Integral) or num_groups <= 0 or c % num_groups:
        raise ValueError(f"group_norm: {c} channels of the input of shape {tuple(x.shape)} do not "
                         f"split into num_groups={plain(num_groups)} groups{_where()}")
    _check_vector("group_norm", "weight", weight, c, x)
    _check_vector("group_norm", "bias", bias, c, x)
    g = x.reshape(x.shape[0], num_groups, x.numel() // max(x.shape[0] * num_groups, 1))
    y, _, _ = _normalize(g, (2,), eps)
    return _affine(y.reshape(tuple(x.shape)), weight, bias, _channel_shape(x))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """torch.nn.functional.local_response_norm: x / (k + alpha * mean of x^2 over `size`
    neighbouring channels (zero-padded: size // 2 before, (size - 1) // 2 after))^beta."""
    from .pooling import avg_pool2d, avg_pool3d
    from .movement import pad

    x = input
    if x.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3 or more dims (N, C, ...), got shape "
                         f"{tuple(x.shape)}{_where()}")
    if not isinstance(size, numbers.Integral) or size <= 0:
        raise ValueError(f"local_response_norm: size must be a positive int, got {plain(size)}{_where()}")
    if x.numel() == 0:
        return x * 1.0
    sq = (x * x).unsqueeze(1)   # (N, 1, C, ...): channels become a dim a pooling window slides on
    if x.ndim == 3:
        sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(sq, (size, 1), stride=1).squeeze(1)
    else:
        n, c = x.shape[0], x.shape[1]
        sq = sq.reshape(n, 1, c, x.shape[2], -1)
        sq = pad(sq, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(sq, (size, 1, 1), stride=1).squeeze(1).reshape(tuple(x.shape))
    return x / (div * alpha + k) ** beta
