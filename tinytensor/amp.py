"""Autocast: mixed precision by casting an op's floating inputs at its entry point.

`tt.autocast(device_type, dtype)` sets STATE.autocast; each op on the lists below calls
`cast_inputs(op, ...)` first, so its inputs are cast by the ordinary cast op, whose backward
casts the gradient back: parameters and their .grad stay float32.

The lists are torch's (aten/src/ATen/autocast_mode.cpp, torch 2.13), per device, restricted to
the ops tinytensor has. They were checked on CPU against torch.autocast("cpu") with bfloat16
and float16 (tests/tinytensor/test_autocast.py). On the CPU torch casts only the
matrix products to the low precision and only the losses (and prod) to float32: softmax,
layer_norm, sum and mean follow their input, so they run in the low precision too. On CUDA
softmax, log_softmax, layer_norm and the norms also run in float32.

As in torch: float64 tensors and tensors on another device type are never cast, and backward
belongs outside the autocast region (it then runs each op in the dtype its forward ran in).
"""
from . import dtypes
from .core.grad_mode import STATE, _GradMode

# torch's "lower_precision_fp" ops; einsum is not on torch's CPU list, but torch's CPU einsum
# lowers to bmm, which is, so its result is low precision there too
_LOW = frozenset(("matmul", "linear", "conv", "conv_transpose", "einsum"))
# torch's "fp32" ops (and "fp32_set_opt_dtype" ones on CUDA, which for a low-precision input
# amount to the same thing)
_FP32_CPU = frozenset(("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
                       "huber_loss", "kl_div", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits"))
_FP32_CUDA = _FP32_CPU | {"softmax", "log_softmax", "layer_norm", "rms_norm", "cosine_similarity"}
LISTS = {"cpu": (_LOW, _FP32_CPU), "cuda": (_LOW, _FP32_CUDA)}


def _low_dtypes():
    # bfloat16 is looked up here, not at import, so autocast follows dtypes.py as it grows
    return tuple(d for d in (dtypes.float16, getattr(dtypes, "bfloat16", None)) if d is not None)


class _Policy:
    __slots__ = ("device_type", "dtype", "low", "fp32")

    def __init__(self, device_type, dtype):
        self.device_type, self.dtype = device_type, dtype
        self.low, self.fp32 = LISTS[device_type]


class autocast(_GradMode):
    """Context manager and decorator: inside, the ops of torch's lower-precision list run in
    `dtype` (float16 or bfloat16) and those of its float32 list in float32.

    `dtype` defaults to bfloat16 on "cpu" and float16 on "cuda", as in torch."""

    field = "autocast"

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        # cache_enabled is accepted for torch code; casts are not cached (each use casts again)
        if device_type not in LISTS:
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        if dtype is None:
            dtype = dtypes.float16 if device_type == "cuda" else getattr(dtypes, "bfloat16", None)
            if dtype is None:
                raise ValueError("autocast: device_type='cpu' defaults to bfloat16, which this "
                                 "tinytensor lacks; pass dtype=tt.float16")
        dtype = dtypes.from_any(dtype)
        low = _low_dtypes()
        if dtype not in low:
            # torch warns and disables itself here; a silent float32 run is worse than an error
            raise ValueError(f"autocast: dtype must be one of "
                             f"{', '.join('tt.' + d.name for d in low)}, got tt.{dtype.name}")
        self.args = (device_type, dtype, enabled)
        self.mode = _Policy(device_type, dtype) if enabled else None

    def _again(self):
        return autocast(*self.args)


def is_autocast_enabled(device_type=None):
    ac = STATE.autocast
    return ac is not None and (device_type is None or ac.device_type == device_type)


def get_autocast_dtype(device_type):
    ac = STATE.autocast
    if ac is not None and ac.device_type == device_type:
        return ac.dtype
    return dtypes.float16 if device_type == "cuda" else getattr(dtypes, "bfloat16", dtypes.float16)


def cast_inputs(op, *args):
    """`args` with each floating tensor cast as autocast wants for `op` (unchanged when autocast
    is off, `op` is on neither list, or the tensor is float64 or on another device type)."""
    ac = STATE.autocast
    if ac is None:
        return args
    if op in ac.low:
        target = ac.dtype
    elif op in ac.fp32:
        target = dtypes.float32
    else:
        return args
    return tuple(_cast(a, target, ac.device_type) for a in args)


def _cast(a, target, device_type):
    dt = getattr(a, "dtype", None)
    if (not isinstance(dt, dtypes.DType) or not dt.is_floating_point or dt is target
            or dt is dtypes.float64 or a.device.type != device_type):
        return a
    return a.to(target)
