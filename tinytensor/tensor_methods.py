"""Tensor methods and operators, each a thin call into an op (names follow PyTorch)."""
from . import creation
from .tensor import Tensor
from .ops import (sorting, elementwise as ew, indexing as ix, inplace as ip, linalg, movement as mv, nn,
                  reduce as rd)


def _r(fn):
    """The reflected form of a binary op: `2 - x` calls fn(2, x)."""
    return lambda self, other: fn(other, self)


_METHODS = {
    # arithmetic and operators
    "add": ew.add, "sub": ew.sub, "mul": ew.mul, "div": ew.div, "pow": ew.pow, "neg": ew.neg,
    "__add__": ew.add, "__radd__": _r(ew.add), "__sub__": ew.sub, "__rsub__": _r(ew.sub),
    "__mul__": ew.mul, "__rmul__": _r(ew.mul), "__truediv__": ew.div, "__rtruediv__": _r(ew.div),
    "__pow__": ew.pow, "__rpow__": _r(ew.pow), "__neg__": ew.neg, "__matmul__": linalg.matmul,
    "__rmatmul__": _r(linalg.matmul), "__abs__": ew.abs_,
    "__floordiv__": lambda a, b: ew.div(a, b, rounding_mode="floor"),
    "__rfloordiv__": lambda a, b: ew.div(b, a, rounding_mode="floor"),
    "__rand__": _r(ew.bitwise_and), "__ror__": _r(ew.bitwise_or), "__rxor__": _r(ew.bitwise_xor),
    "__eq__": ew.eq, "__ne__": ew.ne, "__lt__": ew.lt, "__le__": ew.le, "__gt__": ew.gt,
    "__ge__": ew.ge, "__and__": ew.bitwise_and, "__or__": ew.bitwise_or,
    "__xor__": ew.bitwise_xor, "__invert__": ew.bitwise_not,  # logical on bool, as in torch
    "__mod__": ew.remainder, "__rmod__": _r(ew.remainder), "remainder": ew.remainder,
    "__getitem__": ix.getitem, "__setitem__": ix.setitem,
    # math
    "exp": ew.exp, "log": ew.log, "log1p": ew.log1p, "sqrt": ew.sqrt, "rsqrt": ew.rsqrt,
    "abs": ew.abs_, "sign": ew.sign, "sin": ew.sin, "cos": ew.cos, "tanh": ew.tanh,
    "sigmoid": ew.sigmoid, "relu": ew.relu, "erf": ew.erf, "square": ew.square,
    "reciprocal": ew.reciprocal, "maximum": ew.maximum, "minimum": ew.minimum,
    "clamp": ew.clamp, "clip": ew.clamp, "where": lambda self, cond, other: ew.where(cond, self, other),
    "eq": ew.eq, "ne": ew.ne, "lt": ew.lt, "le": ew.le, "gt": ew.gt, "ge": ew.ge,
    "logical_and": ew.logical_and, "logical_or": ew.logical_or, "logical_not": ew.logical_not,
    "logical_xor": ew.logical_xor, "isfinite": ew.isfinite, "isnan": ew.isnan, "isinf": ew.isinf,
    # reductions
    "sum": rd.sum, "mean": rd.mean, "prod": rd.prod, "max": rd.max, "min": rd.min,
    "amax": rd.amax, "amin": rd.amin, "argmax": rd.argmax, "argmin": rd.argmin, "var": rd.var,
    "std": rd.std, "logsumexp": rd.logsumexp, "norm": rd.norm, "all": rd.all, "any": rd.any,
    "cumsum": rd.cumsum,
    # movement
    "reshape": mv.reshape, "view": mv.view, "flatten": mv.flatten, "unflatten": mv.unflatten,
    "squeeze": mv.squeeze, "unsqueeze": mv.unsqueeze, "permute": mv.permute,
    "transpose": mv.transpose, "movedim": mv.movedim, "expand": mv.expand,
    "expand_as": lambda self, other: mv.expand(self, *other.shape),
    "broadcast_to": mv.broadcast_to, "repeat": mv.repeat, "tile": mv.tile,
    "repeat_interleave": mv.repeat_interleave, "split": mv.split, "chunk": mv.chunk,
    "unbind": mv.unbind, "flip": mv.flip, "roll": mv.roll, "tril": mv.tril, "triu": mv.triu,
    "contiguous": mv.contiguous,
    "view_as": lambda self, other: mv.reshape(self, other.shape),
    "reshape_as": lambda self, other: mv.reshape(self, other.shape),
    # indexing
    "gather": ix.gather, "scatter_add": ix.scatter_add, "masked_fill": ix.masked_fill,
    "index_select": ix.index_select,
    # linear algebra and nn
    "matmul": linalg.matmul, "softmax": nn.softmax, "log_softmax": nn.log_softmax,
    # rounding, sorting, matrix helpers, new_* creation
    "floor": ew.floor, "ceil": ew.ceil, "trunc": ew.trunc, "round": ew.round_,
    "multinomial": creation.multinomial, "sort": sorting.sort, "argsort": sorting.argsort, "topk": sorting.topk,
    "t": mv.t, "narrow": mv.narrow, "select": mv.select, "mm": linalg.mm, "bmm": linalg.bmm,
    "new_zeros": lambda self, *size, dtype=None, device=None, requires_grad=False: creation.zeros(
        *size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad),
    "new_ones": lambda self, *size, dtype=None, device=None, requires_grad=False: creation.ones(
        *size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad),
    "new_full": lambda self, size, fill_value, dtype=None, device=None, requires_grad=False: creation.full(
        size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
        requires_grad=requires_grad),
    "new_tensor": lambda self, data, dtype=None, device=None, requires_grad=False: creation.tensor(
        data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad),
    # in place
    "add_": ip.add_, "sub_": ip.sub_, "mul_": ip.mul_, "div_": ip.div_, "zero_": ip.zero_,
    "fill_": ip.fill_, "copy_": ip.copy_, "clamp_": ip.clamp_, "masked_fill_": ip.masked_fill_,
}

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)



Tensor.__iadd__ = lambda self, other: ip.add_(self, other)
Tensor.__isub__ = lambda self, other: ip.sub_(self, other)
Tensor.__imul__ = lambda self, other: ip.mul_(self, other)
Tensor.__itruediv__ = lambda self, other: ip.div_(self, other)
Tensor.__hash__ = lambda self: id(self)  # __eq__ is elementwise, so hash by identity
