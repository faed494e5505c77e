"""Modules that reshape, pad or resize: Flatten/Unflatten, Fold/Unfold, the *Pad1d/2d/3d
family and Upsample*, each a thin wrapper over its tensor op or F.* function, with
torch.nn's constructor arguments, defaults and printed form."""
import tinytensor as tt
import tinytensor.functional as F

from ._one_call import _OneCall
from .module import Module


class Flatten(_OneCall):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(tt.flatten, start_dim=start_dim, end_dim=end_dim)


class Unflatten(_OneCall):
    def __init__(self, dim, unflattened_size):
        if not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int (named dimensions are not supported), "
                            f"got {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)) or \
                not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, got "
                            f"{unflattened_size!r}")
        super().__init__(tt.unflatten, dim=dim, unflattened_size=unflattened_size)


class Fold(_OneCall):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(F.fold, output_size=output_size, kernel_size=kernel_size,
                         dilation=dilation, padding=padding, stride=stride)


class Unfold(_OneCall):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(F.unfold, kernel_size=kernel_size, dilation=dilation, padding=padding,
                         stride=stride)


# ---------------------------------------------------------------------- padding
def _pads(padding, n, name):
    """torch's spelling: an int pads every side of the last n dims alike, else a 2n-tuple
    (left, right, top, bottom, front, back)."""
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    padding = tuple(padding)
    if len(padding) != 2 * n or not all(isinstance(p, int) for p in padding):
        raise ValueError(f"{name}: padding must be an int or a tuple of {2 * n} ints, got "
                         f"{padding!r}")
    return padding


class _Pad(Module):
    mode, dims = "constant", 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _pads(padding, self.dims, type(self).__name__)

    def forward(self, x):
        if x.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"{type(self).__name__}: expects a {self.dims + 1}-D (unbatched) or "
                             f"{self.dims + 2}-D (batched) input, got shape {tuple(x.shape)}")
        return F.pad(x, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, x):
        return F.pad(x, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad(_ConstantPad):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _pad_class(base, name, mode, dims):
    return type(name, (base,), {"mode": mode, "dims": dims, "__module__": __name__,
                                "__qualname__": name,
                                "__doc__": f"torch.nn.{name}: F.pad(x, padding, '{mode}') over "
                                           f"the last {dims} dimension(s)."})


ConstantPad1d = _pad_class(_ConstantPad, "ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_class(_ConstantPad, "ConstantPad2d", "constant", 2)
ConstantPad3d = _pad_class(_ConstantPad, "ConstantPad3d", "constant", 3)
ZeroPad1d = _pad_class(_ZeroPad, "ZeroPad1d", "constant", 1)
ZeroPad2d = _pad_class(_ZeroPad, "ZeroPad2d", "constant", 2)
ZeroPad3d = _pad_class(_ZeroPad, "ZeroPad3d", "constant", 3)
ReflectionPad1d = _pad_class(_Pad, "ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_class(_Pad, "ReflectionPad2d", "reflect", 2)
ReflectionPad3d = _pad_class(_Pad, "ReflectionPad3d", "reflect", 3)
ReplicationPad1d = _pad_class(_Pad, "ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_class(_Pad, "ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _pad_class(_Pad, "ReplicationPad3d", "replicate", 3)
CircularPad1d = _pad_class(_Pad, "CircularPad1d", "circular", 1)
CircularPad2d = _pad_class(_Pad, "CircularPad2d", "circular", 2)
CircularPad3d = _pad_class(_Pad, "CircularPad3d", "circular", 3)


# ---------------------------------------------------------------------- resizing
class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            scale_factor = tuple(float(f) for f in scale_factor)
        elif scale_factor:
            scale_factor = float(scale_factor)
        else:
            scale_factor = None
        self.scale_factor, self.mode = scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
