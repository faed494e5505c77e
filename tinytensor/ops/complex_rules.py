"""Which existing ops take complex tensors (issue 23), each fact in one list.

Function.apply refuses a complex input of any built-in op not named here, by name, so an
op nobody has checked for complex (or that torch refuses: ordering, max/min, clamp, floor)
can never return a silently wrong value or gradient.

HOLOMORPHIC: the op is complex-differentiable in its (promoted, same-dtype) inputs and its
backward, written for reals, is a formula in ops listed here (g * b for a * b, g @ b.mT
for a @ b, scatter-adds for indexing). The engine turns that real formula into torch's
convention, conj(backward(conj(g))) = g * conj(f'(z)) (core/engine.py,
_conjugated_backward). Linear ops (reshape, indexing, sum) are holomorphic too.

OWN: the op takes complex values as they are, with no gradient or its own complex
backward (Cast, equality and the finiteness predicates; complex.py's ops set theirs).
Each entry is checked against torch, values and gradients, in
tests/tinytensor/test_complex.py.
"""
from ..core.primitives import Cast, Expand, SumTo
from . import elementwise as ew
from .indexing import _GatherOp, GetItem, GetItemCopy, IndexAdd, IndexPut, ScatterAdd
from .linalg import Einsum, MatMul
from .movement import Cat, Flip, Permute, Repeat, Reshape, Roll, Tril, Triu
from .math_functions import Cosh, Expm1, Sinh, Tan
from .memory_format import ChannelsLast
from .reduce import Cumsum, Sum

HOLOMORPHIC = (
    ew.Add, ew.Sub, ew.Mul, ew.Div, ew.Neg, ew.Clone, ew.ToDevice, ew.Exp, ew.Log, ew.Sqrt,
    ew.Sin, ew.Cos, ew.Tanh, ew.PowScalar, ew.Where, ew.Log1p, ew.Rsqrt, Tan, Sinh, Cosh, Expm1,
    Sum, Cumsum, MatMul, Einsum, SumTo, Expand,
    Reshape, Permute, Cat, Flip, Roll, Repeat, Tril, Triu, ChannelsLast,
    GetItem, GetItemCopy, IndexAdd, IndexPut, _GatherOp, ScatterAdd,
)
OWN = (Cast, ew.Eq, ew.Ne, ew.Isfinite, ew.Isnan, ew.Isinf)

for _op in HOLOMORPHIC:
    _op.complex_rule = "holomorphic"
for _op in OWN:
    _op.complex_rule = "own"
