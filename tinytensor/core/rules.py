"""What the compiler knows of one op, written beside the op's `Function` as its
`compile_rule` (issue 28: one record per op, no parallel tables in the passes).

Fusion (compiler/passes/fuse.py), rematerialization (passes/remat.py), code generation
(compiler/codegen) and the graph's FLOP counts (viz/annotate.py) all read this record;
none of them keeps a list of op classes of its own. An op without a `compile_rule` gets
`NONE`: never in a kernel, never recomputed, one FLOP per output element.

An op whose compiled form is several simpler ops (softmax, layer norm, the tanh GELU)
says so with a `decompose(x, **attrs)` staticmethod beside its `forward`, written in
tinytensor ops: the compiler records it (compiler/passes/lower.py) and fuses its steps.
"""
import dataclasses
import math

# dtype names a kernel computes an op for
FLOAT = ("float32", "float64")
BOOL = ("bool",)
FLOAT_OR_BOOL = FLOAT + BOOL
# integers are only compared, selected and broadcast in a kernel: exact in C as in NumPy
# (their arithmetic stays NumPy's: C and NumPy differ on overflow and division)
INT = ("int64", "int32")
ANY = FLOAT_OR_BOOL + INT


@dataclasses.dataclass(frozen=True)
class Rule:
    """One op's compiler facts.

    fuses: the dtypes (of inputs and output) a fused kernel computes it for; () never.
    fuses_if: fuses only where fuses_if(attrs) is true (x ** p for the powers NumPy
        computes exactly; a GELU of a known kind).
    alone: several NumPy passes on its own: worth a kernel even when nothing fuses with it.
    cheap: one read of each input and one write: remat may recompute it in the backward.
    transcendental: evaluates exp, log, erf, tanh... per element (remat's cost model: such
        a value is recomputed only where the backward evaluates the same function anyway);
        or a callable (attrs) -> bool.
    evaluates: names of the transcendental functions of its (first) input it evaluates, or a
        callable (attrs) -> names: two ops naming one function of one input evaluate it once
        in a shared kernel (gelu(x) and its slope: one erfc; silu and sigmoid: one sigmoid);
        None: the op itself is the function (remat's cost model, passes/remat.py).
    commutes: a op b == b op a bit for bit (IEEE + and *): a kernel computes the two once.
    reduce: "sum" or "max" for a reduction a row kernel computes (over trailing dims).
    lower: the compiler writes the op as its `decompose` steps before fusing (softmax, the
        norms: their steps make one row kernel with the ops around them), where every
        reduction among the steps is one a row kernel computes.
    in_kernel: inside a kernel the op is written as its `decompose` steps (the tanh GELU:
        its backward's tanh is then the same op on the same value, computed once).
    c: the C expression of one element, rounding as the NumPy forward rounds: a format
        string ({0}, {1}, {2}: the inputs; {f}: "f" for float, "" for double; {one},
        {zero}: the literals of the output type), or a callable (args, instr, ctype, C)
        -> str, C being the code generator's helpers (compiler/codegen: lit, arith, neg,
        sigmoid). None: the op never reaches code generation as itself.
    flops: FLOPs per output element, or a callable (attrs, in_meta, out_meta) -> FLOPs.
    """
    fuses: tuple = ()
    fuses_if: object = None
    alone: bool = False
    cheap: bool = False
    transcendental: object = False
    evaluates: object = None
    commutes: bool = False
    reduce: str = None
    lower: bool = False
    in_kernel: bool = False
    c: object = None
    flops: object = 1


NONE = Rule()


def rule_of(fn):
    """The `compile_rule` of Function class `fn` (inherited like any class attribute), or
    NONE."""
    return getattr(fn, "compile_rule", None) or NONE


def per_input(attrs, in_meta, out_meta):
    """FLOPs of a reduction: one per element of its input."""
    return math.prod(in_meta[0][0]) if in_meta else math.prod(out_meta[0][0])
