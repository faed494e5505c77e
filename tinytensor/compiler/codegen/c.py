"""C backend: each fused kernel becomes one C function, the program one shared object.

`build(program)` returns a runner (codegen/runner.py): `runner(list of input arrays) -> list
of outputs`. Fused instructions run their generated C function; every other instruction
runs its Function's NumPy forward, exactly as eager does. `build` first compiles sums over
leading dims into column kernels (passes/fuse.py `columns`; the C backend's alone).

A kernel is one loop nest over its output shape (static: the source is specialized on
it). Dimensions along which every operand is contiguous or broadcast alike are collapsed,
so the innermost loop is usually the whole array, with each input read either at the
loop index or at a fixed offset (broadcast): loops the C compiler vectorizes. The math
functions come from tt_math.h, written to vectorize (libm calls would not): exp, log,
tanh, and erf with the exact GELU and its slope, which are not exactly rounded (within an
ulp or two of the exact value, as eager's are), so kernels using them are not bitwise
eager's.

Flags: -O3 (vectorization on) -ffp-contract=off (no fused multiply-add: a*b+c rounds
twice, as in NumPy), no -ffast-math (IEEE semantics: no reassociation, signed zeros,
inf and nan kept), -fno-math-errno (sqrt becomes the instruction; errno is the only
thing it changes), -fno-trapping-math (lets both sides of a select be computed; values
are unaffected), no -march=native (a cached object must run on any x86-64/arm64 machine
that shares the cache directory). On x86-64 Linux each kernel is instead cloned for
AVX-512 and AVX2 with `target_clones`, the clone picked at load time by the CPU: the same
IEEE operations on wider vectors (and no FMA, contraction being off), so every clone gives
the same bits. Measured on the dev machine: GELU at 1M elements 1.6 ms with SSE2 only,
1.0 ms with the AVX-512 clone.
"""
import functools
import math
import os
import platform

import numpy as np

from ...core import primitives as P
from ...ops import elementwise as E
from ...ops.reduce import Amax, Sum
from ..passes import fuse
from ..passes.gelu import GeluCdf, GeluErfSlope, GeluFromCdf, GeluSlopeFromCdf
from ... import symbolic
from .. import cache_disk, instantiate
from . import runner as _runner, threads as _threads_mod
from .runner import Runner

FLAGS = ["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math",
         "-fPIC", "-shared"]
HEADER = os.path.join(os.path.dirname(__file__), "tt_math.h")
# by absolute path: a quoted name is looked up next to the source first (cache_disk.py)
INCLUDE = '#include "%s"' % HEADER.replace("\\", "\\\\").replace('"', '\\"')
CTYPE = {"float32": "float", "float64": "double", "bool": "unsigned char",
         "int64": "long long", "int32": "int"}   # ints: compared and selected only (fuse.INT)
_INT = {"long long": ("LL", 64), "int": ("", 32)}
_CLONES = ('__attribute__((target_clones("avx512f", "avx2", "default")))\n'
           if platform.machine() in ("x86_64", "AMD64") and platform.system() == "Linux" else "")


# ---------------------------------------------------------------- op emitters
# Each takes the C expressions of the inputs, the instruction and the C type of its
# output, and returns a C expression written to round exactly as the NumPy forward does
# (same operations in the same order, constants rounded to the dtype first).
def _lit(x, ctype):
    if ctype == "unsigned char":
        return "1" if x else "0"
    if ctype in _INT:
        suffix, bits = _INT[ctype]
        x = int(x)
        if x == -2 ** (bits - 1):   # its magnitude is no literal of the type: write it as an expression
            return f"({x + 1}{suffix} - 1)"
        return f"({x}{suffix})"
    x = float(x)
    if math.isnan(x):   # by its bits: NAN has neither its sign nor its payload
        if ctype == "float":
            return f"tt_f32((int){hex(int(np.float32(x).view(np.uint32)))}u)"
        return f"tt_f64({hex(int(np.float64(x).view(np.uint64)))}ull)"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    if ctype == "float":   # in parentheses, so that no operator before it makes `--`
        return f"({float(np.float32(x)).hex()}f)"
    return f"({x.hex()})"


def _math(fname):
    return lambda a, ins, t: f"tt_{fname}{'f' if t == 'float' else ''}({a[0]})"


def _sigmoid(x, t):
    one = _lit(1.0, t)
    e = f"tt_exp{'f' if t == 'float' else ''}(-{'fabsf' if t == 'float' else 'fabs'}({x}))"
    return f"({x} >= 0 ? {one} / ({one} + {e}) : {e} / ({one} + {e}))"


def _gelu(a, ins, t):
    if ins.attrs.get("approximate") == "none":
        # x erfc(-x / sqrt 2) / 2 (tt_math.h): float computed in double, rounded once
        return f"tt_gelu_erf{'f' if t == 'float' else ''}({a[0]})"
    x = a[0]
    c = lambda v: _lit(v, t)
    inner = f"({c(E._SQRT_2_OVER_PI)} * ({x} + {c(0.044715)} * {x} * {x} * {x}))"
    return f"({c(0.5)} * {x} * ({c(1.0)} + tt_tanh{'f' if t == 'float' else ''}({inner})))"


def _pow(a, ins, t):
    p, x = ins.attrs["exponent"], a[0]
    return {1: x, 2: f"({x} * {x})", 0.5: f"{'sqrtf' if t == 'float' else 'sqrt'}({x})",
            -1: f"({_lit(1.0, t)} / {x})"}[p]


def _neg(x, t):
    return f"tt_neg{'f' if t == 'float' else ''}({x})"


def _arith(sign):
    """The emitter of a + b (- * /) as NumPy computes it, where GCC would fold it into an
    expression with the same numbers but another nan: x * -1 and x / -1 into -x (a nan
    comes out of NumPy as it went in: quieted, x + x), x + c for a nan constant c into
    x - (-c) (NumPy: x if x is a nan, else c; c - x: c)."""
    def emit(a, ins, t):
        if t not in ("float", "double"):
            return f"({a[0]} {sign} {a[1]})"
        if _is_nan_lit(a[0]):
            return a[0]
        if _is_nan_lit(a[1]):
            return f"(({a[0]} != {a[0]}) ? ({a[0]} + {a[0]}) : {a[1]})"
        m1 = _lit(-1.0, t)
        if sign in "*/" and (a[1] == m1 or (sign == "*" and a[0] == m1)):
            x = a[0] if a[1] == m1 else a[1]
            return f"(({x} != {x}) ? ({x} + {x}) : {_neg(x, t)})"
        return f"({a[0]} {sign} {a[1]})"
    return emit


def _is_nan_lit(x):
    return x.startswith(("tt_f32(", "tt_f64("))   # `_lit` writes nans so, nothing else


def _cast(a, ins, t):
    if t == "unsigned char":
        return f"({a[0]} != 0)"
    return f"(({t}){a[0]})"


EMIT = {
    E.Add: _arith("+"),
    E.Sub: _arith("-"),
    E.Mul: _arith("*"),
    E.Div: _arith("/"),
    # NumPy's negative flips the sign bit, a nan's too; tt_neg does it on the bits, where
    # GCC cannot fold it into a neighbour (-(x / c) into x / -c): same numbers, other nans
    E.Neg: lambda a, ins, t: _neg(a[0], t),
    # np.maximum / np.minimum: nan in either propagates; on a tie (0 and -0) the second wins
    E.Maximum: lambda a, ins, t: f"(({a[0]} > {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})",
    E.Minimum: lambda a, ins, t: f"(({a[0]} < {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})",
    E.Relu: lambda a, ins, t: f"(({a[0]} > 0 || {a[0]} != {a[0]}) ? {a[0]} : {_lit(0.0, t)})",
    E.Abs: lambda a, ins, t: f"{'fabsf' if t == 'float' else 'fabs'}({a[0]})",
    E.Sqrt: lambda a, ins, t: f"{'sqrtf' if t == 'float' else 'sqrt'}({a[0]})",
    E.Rsqrt: lambda a, ins, t: f"({_lit(1.0, t)} / {'sqrtf' if t == 'float' else 'sqrt'}({a[0]}))",
    E.Exp: _math("exp"),
    E.Log: _math("log"),
    E.Tanh: _math("tanh"),
    E.Sigmoid: lambda a, ins, t: _sigmoid(a[0], t),
    E.Silu: lambda a, ins, t: f"({a[0]} * {_sigmoid(a[0], t)})",
    E.Gelu: _gelu,
    E.Erf: _math("erf"),
    GeluErfSlope: lambda a, ins, t: f"tt_gelu_erf_slope{'f' if t == 'float' else ''}({a[0]})",
    # inside kernels, fuse._gelu_steps writes both as x and a float64 cdf(x) computed once
    GeluCdf: lambda a, ins, t: f"tt_gelu_cdf{'32' if ins.inputs[0].dtype.name == 'float32' else ''}({a[0]})",
    GeluFromCdf: lambda a, ins, t: f"tt_gelu_erf_cdf{'f' if t == 'float' else ''}({a[0]}, {a[1]})",
    GeluSlopeFromCdf: lambda a, ins, t: f"tt_gelu_erf_slope_cdf{'f' if t == 'float' else ''}({a[0]}, {a[1]})",
    E.PowScalar: _pow,
    E.Clone: lambda a, ins, t: a[0],
    P.Expand: lambda a, ins, t: a[0],          # the load already broadcasts
    P.Cast: _cast,
    E.Where: lambda a, ins, t: f"({a[0]} ? {a[1]} : {a[2]})",
    E.LogicalAnd: lambda a, ins, t: f"(({a[0]} != 0) & ({a[1]} != 0))",
    E.LogicalOr: lambda a, ins, t: f"(({a[0]} != 0) | ({a[1]} != 0))",
    E.LogicalXor: lambda a, ins, t: f"(({a[0]} != 0) ^ ({a[1]} != 0))",
    E.LogicalNot: lambda a, ins, t: f"({a[0]} == 0)",
    E.BitwiseAnd: lambda a, ins, t: f"({a[0]} & {a[1]})",     # on bool (0/1) only
    E.BitwiseOr: lambda a, ins, t: f"({a[0]} | {a[1]})",
    E.BitwiseXor: lambda a, ins, t: f"({a[0]} ^ {a[1]})",
    E.BitwiseNot: lambda a, ins, t: f"({a[0]} ^ 1)",
    E.Eq: lambda a, ins, t: f"({a[0]} == {a[1]})",
    E.Ne: lambda a, ins, t: f"({a[0]} != {a[1]})",
    E.Lt: lambda a, ins, t: f"({a[0]} < {a[1]})",
    E.Le: lambda a, ins, t: f"({a[0]} <= {a[1]})",
    E.Gt: lambda a, ins, t: f"({a[0]} > {a[1]})",
    E.Ge: lambda a, ins, t: f"({a[0]} >= {a[1]})",
}


# ---------------------------------------------------------------- kernel source
def _broadcast_strides(shape, loop):
    """Element strides of a contiguous array of `shape` read broadcast over `loop`."""
    shape = (1,) * (len(loop) - len(shape)) + tuple(shape)
    strides, acc = [], 1
    for s, n in zip(reversed(shape), reversed(loop)):
        strides.append(acc if s != 1 or n == 1 else 0)
        acc *= s
    return strides[::-1]


def _collapse(loop, operand_strides):
    """Merge adjacent dims wherever every operand steps through both the same way."""
    dims = [loop[0]] if loop else [1]
    strides = [[s[0]] if loop else [0] for s in operand_strides]
    for d in range(1, len(loop)):
        if all(s[d - 1] == s[d] * loop[d] for s in operand_strides):
            dims[-1] *= loop[d]
            for acc, s in zip(strides, operand_strides):
                acc[-1] = s[d]
        else:
            dims.append(loop[d])
            for acc, s in zip(strides, operand_strides):
                acc.append(s[d])
    return dims, strides


def _function(cname, operands, n_out, same, body, symbols=(), split=None):
    """The C of a kernel whose loop nest is `body` (lines, indented one level): a static
    body function taking every operand as a `restrict` parameter (p0, p1, ...: outputs,
    then const inputs), the entry `void cname_part(void *const *b, const int64_t *n,
    int64_t part, int64_t parts)` that unpacks them, and `void cname(void *const *b)` (with
    `const int64_t *n` too where the kernel has dynamic sizes), the whole kernel in one call:
    the runner's call of one thread, whose arguments ctypes converts fastest.
    GCC honours restrict on parameters, not on locals loaded from b[]: without it a kernel
    of many operands needs more run-time overlap checks than GCC versions a loop for, and
    stays scalar (the AdamW update: 12 µs per 1K elements scalar, 1.1 vectorized).
    `same` ({input operand: output operand}) names inputs that are the very memory of an
    output (an optimizer update computed in place, codegen/runner.py): such an input gets
    no parameter of its own and reads through a pointer based on the output's, which
    restrict allows, so the loop still needs no overlap check.

    `symbols` (names s0, s1, ...) are the dynamic sizes the loops read (tt.compile with
    dynamic=True): the entries take them as `n`, n[k] the size of s<k> (`cname_part` always
    has `n`, NULL for fixed sizes: one signature for the thread pool), and hand the body
    each one it uses as a parameter of that name, so `s0*s1` in a loop bound is plain C.

    `cname_part` computes part `part` of `parts` (codegen/threads.py splits big kernels
    over threads); `cname` is part 0 of 1.
    `split` = (the length of the loop that is split, as C, and its grain): the body's loop
    over it runs from `tt_lo` to `tt_hi`, this part's share, cut at multiples of the grain
    (whole cache lines of output per thread). A kernel without one (a sum over everything)
    runs whole as part 0 and does nothing as any other part."""
    same = same or {}
    params, args, lines = [], [], []
    sizes = [(f"const int64_t {name}", f"n[{int(name[1:])}]") for name in symbols]
    for k, v in enumerate(operands):
        t = CTYPE[v.dtype.name]
        const = "const " if k >= n_out else ""
        if k in same:
            lines.append(f"    const {t} *p{k} = p{same[k]};  /* the same memory, read before written */")
            continue
        params.append(f"{const}{t} *restrict p{k}")
        args.append(f"({const}{t} *)b[{k}]")
    params += [p for p, _ in sizes] + ["const int64_t part", "const int64_t parts"]
    args += [a for _, a in sizes] + ["part", "parts"]
    head = [f"static inline __attribute__((always_inline)) void {cname}_body({', '.join(params)}) {{"]
    if split is None:
        lines.insert(0, "    if (part != 0) return;   /* not split: part 0 does it all */")
    else:
        d, grain = split
        lines.insert(0, f"    const int64_t tt_lo = tt_part_start({d}, part, parts, {grain}), "
                        f"tt_hi = tt_part_start({d}, part + 1, parts, {grain});")
    entry = [f"{_CLONES}void {cname}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{",
             f"    {cname}_body({', '.join(args)});", "}",
             f"void {cname}(void *const *b{', const int64_t *n' if sizes else ''}) {{",
             f"    {cname}_part(b, {'n' if sizes else '0'}, 0, 1);", "}"]
    return "\n".join(head + lines + body + ["}"] + entry)


def kernel_source(instr, cname, same=None):
    """C source of the kernel `void cname(void *const *b)`; b = outputs, then inputs.
    same: {input operand index: output operand index} of inputs that share an output's memory."""
    body = instr.attrs["body"]
    if is_column_kernel(body):
        return _column_kernel_source(body, cname, same)
    if is_row_kernel(body):
        return _row_kernel_source(body, cname, same)
    loop = tuple(body.outputs[0].shape)
    operands = list(body.outputs) + list(body.inputs)
    dims, strides = _collapse(loop, [_broadcast_strides(v.shape, loop) for v in operands])
    nd = len(dims)
    lines = []
    idx = [f"i{d}" for d in range(nd - 1)] + ["j"]
    indent = "    "
    cut = _split_at(dims)
    for d in range(nd):
        lo, hi = ("tt_lo", "tt_hi") if d == cut else ("0", dims[d])
        lines.append(f"{indent}for (int64_t {idx[d]} = {lo}; {idx[d]} < {hi}; {idx[d]}++) {{")
        indent += "    "

    def offset(st):
        terms = [f"{i}" if s == 1 else f"{i} * {s}" for i, s in zip(idx, st) if s]
        return " + ".join(terms) or "0"

    names = {v.id: _lit(np.asarray(a).reshape(()).item(), CTYPE[v.dtype.name])
             for v, a in body.consts.items()}
    for k, v in enumerate(body.inputs, start=len(body.outputs)):
        names[v.id] = f"x{k}"
        lines.append(f"{indent}const {CTYPE[v.dtype.name]} x{k} = p{k}[{offset(strides[k])}];")
    for n, ins in enumerate(body.instrs):
        out = ins.outputs[0]
        t = CTYPE[out.dtype.name]
        names[out.id] = f"v{n}"
        lines.append(f"{indent}const {t} v{n} = {EMIT[ins.fn]([names[v.id] for v in ins.inputs], ins, t)};"
                     f"  /* {ins.op} */")
    for k, v in enumerate(body.outputs):
        lines.append(f"{indent}p{k}[{offset(strides[k])}] = {names[v.id]};")
    for d in range(nd):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return _function(cname, operands, len(body.outputs), same, lines, symbolic.program_symbols(body),
                     split=None if cut is None else (dims[cut], GRAIN if cut == nd - 1 else 1))


# ---------------------------------------------------------------- row kernels
# A fused body with sums or maxima over the trailing dims F[r:] of its shape F (see
# passes/fuse.py) is one loop over the rows F[:r]; per row, one loop over the row's n
# elements per reduction, then one that writes the elements of the outputs of shape F.
# Ops of shape F are computed inside those loops, again in each loop that needs them (no
# row-sized temporary: a row of any length, and the same bits every time); ops on per-row
# values once per row, between the loops.
#
# Sums reproduce NumPy's order, so that a sum over a contiguous row is bitwise NumPy's:
# np.add.reduce starts from 0 and adds numpy's pairwise_sum of the row
# (numpy/_core/src/umath/loops_utils.h.src): blocks of at most 128 elements summed with 8
# accumulators, combined by splitting n in halves rounded down to multiples of 8. The
# generated loop computes the row's elements a block (a leaf of that recursion) at a time
# into a 128-element buffer, sums it with `tt_pairwise_block`, and `tt_pairwise_tree`
# replays the recursion over the block sums. A max starts from -inf and keeps the first
# nan (np.maximum.reduce propagates nan).
REDUCE = (Sum, Amax)
PW_BLOCK = 128

# the leaves of NumPy's pairwise recursion over n elements (pairwise_leaves, in C) for a
# row whose length is a dynamic size: their starts and lengths, in order; returns k + count
LEAVES = """static int64_t tt_pairwise_leaves(int64_t start, int64_t n, int64_t *lo, int64_t *len, int64_t k) {
    if (n <= 128) { lo[k] = start; len[k] = n; return k + 1; }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    k = tt_pairwise_leaves(start, n2, lo, len, k);
    return tt_pairwise_leaves(start + n2, n - n2, lo, len, k);
}"""

PAIRWISE = LEAVES + "\n" + "\n".join(
    f"""static inline {t} tt_pairwise_block{sfx}(const {t} *a, int64_t n) {{   /* n <= 128 */
    if (n < 8) {{
        {t} res = 0;
        for (int64_t i = 0; i < n; i++) res += a[i];
        return res;
    }}
    {t} r0 = a[0], r1 = a[1], r2 = a[2], r3 = a[3], r4 = a[4], r5 = a[5], r6 = a[6], r7 = a[7];
    int64_t i;
    for (i = 8; i < n - (n % 8); i += 8) {{
        r0 += a[i + 0]; r1 += a[i + 1]; r2 += a[i + 2]; r3 += a[i + 3];
        r4 += a[i + 4]; r5 += a[i + 5]; r6 += a[i + 6]; r7 += a[i + 7];
    }}
    {t} res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
    for (; i < n; i++) res += a[i];
    return res;
}}
/* the sum of n elements whose blocks (leaves of the recursion, in order) sum to *leaf */
static {t} tt_pairwise_tree{sfx}(const {t} **leaf, int64_t n) {{
    if (n <= 128) return *(*leaf)++;
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    const {t} left = tt_pairwise_tree{sfx}(leaf, n2);
    return left + tt_pairwise_tree{sfx}(leaf, n - n2);
}}""" for t, sfx in (("float", "f"), ("double", "")))


def is_row_kernel(body):
    return any(ins.fn in REDUCE for ins in body.instrs) and not is_column_kernel(body)


def is_column_kernel(body):
    return any(fuse.column_sum(ins) for ins in body.instrs)


def pairwise_leaves(n):
    """(start, length) of each block NumPy's pairwise sum of n elements adds directly."""
    if n <= PW_BLOCK:
        return [(0, n)]
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_leaves(n2) + [(n2 + a, m) for a, m in pairwise_leaves(n - n2)]


def _contiguous(shape):
    return _broadcast_strides(shape, shape)


class RowKernel:
    """What a row kernel reads and writes, per row: shared by the C and CUDA backends.
    Operand k (outputs, then inputs, as in the buffer list) is read or written at
    `row_base[key] + inner offset`; keys are ("f", k) for elements of shape F and
    ("r", k, S) for per-row values of shape S."""

    def __init__(self, body):
        red = next(ins for ins in body.instrs if ins.fn in REDUCE)
        F = self.F = tuple(red.inputs[0].shape)
        r = self.r = len(F) - len(red.attrs["dims"])
        self.body, self.R, self.N = body, F[:r], F[r:]
        self.n = math.prod(self.N)
        self.nrows = math.prod(self.R)
        self.operands = list(body.outputs) + list(body.inputs)
        self.index = {v.id: k for k, v in enumerate(self.operands) if k >= len(body.outputs)}
        self.full = {v.id for ins in body.instrs if ins.fn not in REDUCE
                     for v in ins.outputs if tuple(v.shape) == F}
        keys = {}   # key -> strides over F (("f", k)) or over S (("r", k, S))
        for ins in body.instrs:
            shape = F if ins.fn in REDUCE else tuple(ins.outputs[0].shape)
            for v in ins.inputs:
                if v.id in self.index:
                    k = self.index[v.id]
                    key = ("f", k) if shape == F else ("r", k, shape)
                    keys[key] = _broadcast_strides(v.shape, shape)
        for k, v in enumerate(body.outputs):
            shape = tuple(v.shape)
            keys[("f", k) if v.id in self.full else ("r", k, shape)] = _contiguous(shape)
        self.keys = list(keys)
        self.outer_dims, outer = (_collapse(self.R, [keys[key][:r] for key in self.keys]) if r
                                  else ([], [[] for _ in self.keys]))   # one row: a full reduction
        self.outer = dict(zip(self.keys, outer))
        full_keys = [key for key in self.keys if key[0] == "f"]
        dims, inner = _collapse(self.N, [keys[key][r:] for key in full_keys])
        self.inner_dims, self.inner = dims, dict(zip(full_keys, inner))
        self.itype = "int64_t"
        self.pragma = []   # lines before each loop over a row's elements (the CUDA backend's)
        self.kept = {}     # value id of shape F -> a row buffer holding it (filled by a sum's loop)
        self.max_lanes = 0   # lanes of a row's max (`_max_phase`); the C backend sets MAX_LANES
        self._np_dtype = {"float": np.float32, "double": np.float64}

    def base(self, key):
        """The variable holding the row's offset into operand `key`: one per distinct
        stepping over the rows (most operands share one), which keeps GPU registers free."""
        return f"o{self._steps.index(tuple(self.outer[key]))}"

    def row_offsets(self, idx):
        """Declarations of the operands' offsets at the row of outer indices `idx`."""
        self._steps = list(dict.fromkeys(tuple(self.outer[key]) for key in self.keys))
        out = []
        for n, st in enumerate(self._steps):
            terms = [f"{i} * {s}" if s != 1 else i for i, s in zip(idx, st) if s]
            out.append(f"const {self.itype} o{n} = {' + '.join(terms) or '0'};")
        return out

    def inner_offset(self, key, j="j"):
        st, dims = self.inner[key], self.inner_dims
        if len(dims) == 1:
            return j if st[0] == 1 else (f"{j} * {st[0]}" if st[0] else "0")
        terms, below = [], 1
        for d in reversed(range(len(dims))):
            if st[d]:
                t = j if below == 1 else f"{j} / {below}"
                t = f"({t} % {dims[d]})" if d else f"({t})"
                terms.append(t if st[d] == 1 else f"{t} * {st[d]}")
            below *= dims[d]
        return " + ".join(terms) or "0"

    def lines(self, sum_phase):
        """The statements of one row (its operand offsets already declared).
        `sum_phase(acc, t, element_lines, element)` returns the lines that set the
        accumulator `acc` (of C type t) to the sum of `element` over j in [0, n)."""
        body = self.body
        names = {v.id: _lit(np.asarray(a).reshape(()).item(), CTYPE[v.dtype.name])
                 for v, a in body.consts.items()}
        made = {}        # full value id -> its instruction and number
        out = []
        for ins in body.instrs:                 # per-row loads
            shape = None if ins.fn in REDUCE else tuple(ins.outputs[0].shape)
            if shape is None or shape == self.F:
                continue
            for v in ins.inputs:
                if v.id in self.index:
                    key = ("r", self.index[v.id], shape)
                    name = f"y{self.keys.index(key)}"
                    if (v.id, shape) not in names:
                        names[(v.id, shape)] = name
                        out.append(f"const {CTYPE[v.dtype.name]} {name} = "
                                   f"p{key[1]}[{self.base(key)}];")
        for n, ins in enumerate(body.instrs):
            t = CTYPE[ins.outputs[0].dtype.name]
            v = ins.outputs[0]
            if v.id in self.full:
                made[v.id] = (n, ins)
                continue
            if ins.fn in REDUCE:
                pre, elem = self._elements(ins.inputs[0], made, names)
                acc = f"v{n}"
                if ins.fn is Sum:
                    out += sum_phase(acc, t, pre, elem)
                    if getattr(sum_phase, "keeps_row", False) and type(self.n) is int \
                            and self.n <= PW_BLOCK and ins.inputs[0].id in made:
                        self.kept[ins.inputs[0].id] = f"w{n}"   # the whole row: later loops read it
                else:
                    out += self._max_phase(acc, t, pre, elem)
                names[v.id] = acc
                continue
            shape = tuple(v.shape)
            args = [names[(a.id, shape)] if a.id in self.index else names[a.id] for a in ins.inputs]
            names[v.id] = f"v{n}"
            out.append(f"const {t} v{n} = {EMIT[ins.fn](args, ins, t)};  /* {ins.op} */")
        full_out = [(k, v) for k, v in enumerate(body.outputs) if v.id in self.full]
        if full_out:
            pre, elems = self._elements([v for _, v in full_out], made, names)
            out += [*self.pragma, f"for ({self.itype} j = 0; j < {self.n}; j++) {{", *("    " + x for x in pre)]
            for (k, v), e in zip(full_out, elems):
                out.append(f"    p{k}[{self.base(('f', k))} + {self.inner_offset(('f', k))}] = {e};")
            out.append("}")
        for k, v in enumerate(body.outputs):
            if v.id not in self.full:
                out.append(f"p{k}[{self.base(('r', k, tuple(v.shape)))}] = {names[v.id]};")
        return out

    def _max_phase(self, acc, t, pre, elem):
        """Lines setting `acc` to the max of `elem` over the row: from -inf, the first nan
        if there is one (np.maximum.reduce propagates a nan too). With `max_lanes` (the C
        backend's), the row is scanned in that many interleaved lanes, which the C compiler
        vectorizes (a single running max is a loop-carried select it does not), and a row
        holding a nan is scanned again in order for its first nan, which becomes the nan
        NumPy returns (`_numpy_nan`). Which of two tied zeros (-0.0, +0.0) the lanes keep
        does not matter: a zero max is given eager's sign afterwards (+0.0 if the row holds
        one), by a rescan of the rare rows whose max is zero."""
        first_nan = f"({acc} != {acc}) ? {acc} : "
        step = f"{acc} = {first_nan}((e > {acc} || e != e) ? e : {acc});"
        scan = [f"{acc} = -INFINITY;", *self.pragma, f"for ({self.itype} j = 0; j < {self.n}; j++) {{",
                *("    " + x for x in pre), f"    const {t} e = {elem};", f"    {step}", "}"]
        # a zero max takes the sign eager gives tied zeros (ops/reduce.py
        # `_signed_zero_extreme`): +0.0 if the row holds one, else -0.0; rare, so a rescan
        zero = [f"if ({acc} == 0) {{", f"    {acc} = {_lit(-0.0, t)};", *("    " + x for x in self.pragma),
                f"    for ({self.itype} j = 0; j < {self.n}; j++) {{", *("        " + x for x in pre),
                f"        const {t} e = {elem};",
                # copysign, not signbit: a macro in C, std::signbit in C++ (the CUDA host tests)
                f"        if (e == 0 && {'copysignf' if t == 'float' else 'copysign'}({_lit(1.0, t)}, e) > 0) "
                f"{{ {acc} = {_lit(0.0, t)}; break; }}", "    }", "}"]
        L = self.max_lanes
        if not L or t not in VECTOR:
            return [f"{t} {acc};", *scan, *zero]
        find = [*self.pragma, f"for ({self.itype} j = 0; j < {self.n}; j++) {{",
                *("    " + x for x in pre), f"    const {t} e = {elem};",
                f"    if (e != e) {{ {acc} = {self._numpy_nan(t, 'e')}; break; }}", "}"]
        return [f"{t} {acc};", "{", *("    " + x for x in self._lanes_max(acc, t, pre, elem)),
                f"    if ({acc}_nan) {{", *("        " + x for x in find), "    }",
                *("    " + x for x in zero), "}"]

    def _numpy_nan(self, t, e):
        """The nan np.maximum.reduce returns for a contiguous row of n whose first nan is
        `e`, at element j. NumPy reduces x[1:] onto x[0]: the first m = (n - 1) // L * L
        of them in SIMD vectors of L lanes (the accumulator starts as x[0] in every lane),
        the rest one at a time (numpy/_core/src/umath/loops_minmax.dispatch.c.src). The
        vectors' reduction returns the default nan (+, quiet, no payload) for any nan it
        met; the scalar tail keeps the first nan it meets, as it is; a row of one is x[0].
        L is NumPy's, found by asking it (`numpy_max_lanes`); 0 where NumPy does not match
        that rule: the first nan as it is."""
        L = numpy_max_lanes(self._np_dtype[t])
        if not L:
            return e
        n = self.n
        return (f"({n} >= 2 && j <= ({n} - 1) / {L} * {L}) ? {_lit(float('nan'), t)} : {e}")

    def _lanes_max(self, acc, t, pre, elem):
        """Lines setting `acc` to the lane-wise max of the row (element j in lane j % L) and
        `acc`_nan to whether the row holds a nan. The lanes are one vector of GCC's vector
        extensions (clang has them too): the C compiler leaves a select carried across
        iterations scalar, even over separate lanes, so the max is written on the vector
        itself, with the same comparison per lane. The elements are computed into a block
        buffer first (a plain loop, which vectorizes with any mix of dtypes)."""
        L, it, B = self.max_lanes, self.itype, MAX_BLOCK
        vt, vi = VECTOR[t]
        m, nv, lane, buf = f"{acc}_m", f"{acc}_nv", f"{acc}_lane", f"{acc}_e"
        step = [f"{vt} e;", f"memcpy(&e, {buf} + i, sizeof e);", f"const {vi} gt = e > {m};",
                f"{nv} |= (e != e);", f"{m} = ({vt})((({vi})e & gt) | (({vi}){m} & ~gt));"]
        return [f"{vt} {m} = {{{', '.join(['-INFINITY'] * L)}}};",
                f"{vi} {nv} = {{0}};",
                f"int {acc}_nan = 0;",
                f"{t} {lane}[{L}];",
                f"for ({it} jb = 0; jb < {self.n}; jb += {B}) {{",
                f"    const {it} bn = {self.n} - jb < {B} ? {self.n} - jb : {B};",
                f"    {t} {buf}[{B}];",
                *self.pragma,
                f"    for ({it} i = 0; i < bn; i++) {{", f"        const {it} j = jb + i;",
                *("        " + x for x in pre), f"        {buf}[i] = {elem};", "    }",
                f"    {it} i = 0;",
                f"    for (; i + {L} <= bn; i += {L}) {{", *("        " + x for x in step), "    }",
                f"    if (i < bn) {{   /* the row's last, partial group: lane by lane */",
                f"        memcpy({lane}, &{m}, sizeof {m});",
                f"        for (int k = 0; i + k < bn; k++) {{",
                f"            const {t} e = {buf}[i + k];",
                f"            {acc}_nan |= (e != e);",
                f"            {lane}[k] = (e > {lane}[k]) ? e : {lane}[k];", "        }",
                f"        memcpy(&{m}, {lane}, sizeof {m});", "    }", "}",
                f"memcpy({lane}, &{m}, sizeof {m});",
                f"for (int k = 0; k < {L}; k++) {acc}_nan |= ({nv}[k] != 0);",
                f"{acc} = {lane}[0];",
                f"for (int k = 1; k < {L}; k++) {acc} = ({lane}[k] > {acc}) ? {lane}[k] : {acc};"]

    def _elements(self, wanted, made, names):
        """(lines, expression(s)) computing the values `wanted` (one Value or a list) at
        element j of the row, from the loads and the ops of shape F they need."""
        many = isinstance(wanted, list)
        wanted = wanted if many else [wanted]
        need, stack = set(), [v.id for v in wanted]
        while stack:
            i = stack.pop()
            if i in made and i not in need and i not in self.kept:
                need.add(i)
                stack += [a.id for a in made[i][1].inputs]
        local = dict(names)
        local.update({i: f"{buf}[j]" for i, buf in self.kept.items()})
        lines, loads = [], []
        for i in sorted(need, key=lambda i: made[i][0]):
            for a in made[i][1].inputs:
                if a.id in self.index and a.id not in loads:
                    loads.append(a.id)
        for v in wanted:
            if v.id in self.index and v.id not in loads:
                loads.append(v.id)
        for vid in loads:
            k = self.index[vid]
            name = f"x{k}"
            local[vid] = name
            lines.append(f"const {CTYPE[self.operands[k].dtype.name]} {name} = "
                         f"p{k}[{self.base(('f', k))} + {self.inner_offset(('f', k))}];")
        for i in sorted(need, key=lambda i: made[i][0]):
            n, ins = made[i]
            t = CTYPE[ins.outputs[0].dtype.name]
            lines.append(f"const {t} v{n} = {EMIT[ins.fn]([local[a.id] for a in ins.inputs], ins, t)};"
                         f"  /* {ins.op} */")
            local[i] = f"v{n}"
        exprs = [local[v.id] for v in wanted]
        return lines, exprs if many else exprs[0]


def _pairwise_sum_phase(rk):
    def phase(acc, t, pre, elem):
        sfx = "f" if t == "float" else ""
        zero = _lit(0.0, t)
        leaves = pairwise_leaves(rk.n) if type(rk.n) is int else None
        fill = [*("        " + x for x in pre), f"        w[i] = {elem};"]
        if type(rk.n) is not int:   # a dynamic row length: the leaves are found per row
            return [f"{t} {acc};", "{",
                    f"    int64_t lo[{rk.n} / 32 + 2], len[{rk.n} / 32 + 2];",
                    f"    const int64_t count = tt_pairwise_leaves(0, {rk.n}, lo, len, 0);",
                    f"    {t} leaf[{rk.n} / 32 + 2];",
                    "    for (int64_t L = 0; L < count; L++) {",
                    f"        {t} w[{PW_BLOCK}];",
                    f"        for ({rk.itype} i = 0; i < len[L]; i++) {{",
                    f"            const {rk.itype} j = lo[L] + i;",
                    *("    " + x for x in fill), "        }",
                    f"        leaf[L] = tt_pairwise_block{sfx}(w, len[L]);", "    }",
                    f"    const {t} *next = leaf;",
                    f"    {acc} = {zero} + tt_pairwise_tree{sfx}(&next, {rk.n});", "}"]
        if len(leaves) == 1:   # the row fits one block: its buffer, w<acc>, outlives the sum
            w = f"w{acc[1:]}"
            return [f"{t} {w}[{rk.n}];", f"for ({rk.itype} j = 0; j < {rk.n}; j++) {{",
                    *(x[4:] for x in fill[:-1]), f"    {w}[j] = {elem};", "}",
                    f"const {t} {acc} = {zero} + tt_pairwise_block{sfx}({w}, {rk.n});"]
        lo = ", ".join(str(a) for a, _ in leaves)
        ln = ", ".join(str(m) for _, m in leaves)
        return [f"{t} {acc};", "{",
                f"    static const int32_t lo[{len(leaves)}] = {{{lo}}}, len[{len(leaves)}] = {{{ln}}};",
                f"    {t} leaf[{len(leaves)}];",
                f"    for (int L = 0; L < {len(leaves)}; L++) {{",
                f"        {t} w[{PW_BLOCK}];",
                f"        for ({rk.itype} i = 0; i < len[L]; i++) {{", f"            const {rk.itype} j = lo[L] + i;",
                *("    " + x for x in fill), "        }",
                f"        leaf[L] = tt_pairwise_block{sfx}(w, len[L]);", "    }",
                f"    const {t} *next = leaf;",
                f"    {acc} = {zero} + tt_pairwise_tree{sfx}(&next, {rk.n});", "}"]
    phase.keeps_row = True   # a row of one block stays in its buffer, w<acc number>
    return phase


@functools.lru_cache(maxsize=None)
def numpy_max_lanes(dtype):
    """The lanes L of NumPy's SIMD max over a contiguous row of `dtype` (RowKernel
    `_numpy_nan` has the rule: which nan it returns), found by asking NumPy: L is the
    first n - 1 at which a -nan last in a row of n comes back as the default +nan. 0 when
    NumPy's answers on rows of up to 3L + 2 (every place of the nan) and a few longer
    ones do not all follow the rule with that L (another NumPy, or one without SIMD)."""
    dtype = np.dtype(dtype)
    ints = {4: np.uint32, 8: np.uint64}[dtype.itemsize]
    default = np.array(np.nan, dtype).view(ints)

    def comes_back(n, p):   # whether np.max of a row of n with -nan at p is the default nan
        row = np.ones(n, dtype)
        row[p] = -np.nan
        return row.max().view(ints) == default
    L = next((n - 1 for n in range(2, 66) if comes_back(n, n - 1)), 0)
    if not L:
        return 0
    rows = [(n, p) for n in range(1, 3 * L + 3) for p in range(n)]
    rows += [(n, p) for n in (8 * L + 1, 8 * L + 2, 9 * L + 3) for p in (0, 1, n // 2, n - 3, n - 2, n - 1)]
    rule = all(comes_back(n, p) == (n >= 2 and p <= (n - 1) // L * L) for n, p in rows)
    return L if rule else 0


MAX_LANES = 8   # a row's max in 8 lanes: one AVX2 vector of floats (SSE2 and AVX-512 clones too)
GRAIN = 16   # a split flat loop is cut at multiples of 16 elements: whole 64-byte cache lines
MAX_BLOCK = 128   # elements per block buffer of a row's max (a multiple of MAX_LANES)
VECTOR = {"float": ("tt_v8f", "tt_v8i"), "double": ("tt_v8d", "tt_v8l")}   # tt_math.h


def _row_kernel_source(body, cname, same=None):
    rk = RowKernel(body)
    rk.max_lanes = MAX_LANES
    lines = []
    idx = [f"i{d}" for d in range(len(rk.outer_dims))]
    indent = "    "
    cut = _split_at(rk.outer_dims) if idx else None
    for n, (i, d) in enumerate(zip(idx, rk.outer_dims)):
        lo, hi = ("tt_lo", "tt_hi") if n == cut else ("0", d)
        lines.append(f"{indent}for (int64_t {i} = {lo}; {i} < {hi}; {i}++) {{")
        indent += "    "
    for x in rk.row_offsets(idx) + rk.lines(_pairwise_sum_phase(rk)):
        lines.append(indent + x)
    for _ in idx:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return _function(cname, rk.operands, len(body.outputs), same, lines,
                     symbolic.program_symbols(body), split=None if cut is None else (rk.outer_dims[cut], 1))


# ---------------------------------------------------------------- column kernels
# A fused body with sums over the leading dims F[:r] of its shape F (passes/fuse.py
# `columns`) is one loop nest over F, rows outside, columns inside; each sum's output (the
# C = prod(F[r:]) columns, contiguous) is zeroed first, then every row is added to it in
# order: NumPy's sequential sum per column of a C-contiguous array, from 0 (so -0.0 sums
# to 0.0, as in NumPy). The inner loop, over a row's columns, vectorizes; the accumulators
# stay in cache. Elementwise outputs of shape F are written in the same sweep.
def _column_kernel_source(body, cname, same=None):
    sums = [ins for ins in body.instrs if fuse.column_sum(ins)]
    F, r = fuse.column_sum(sums[0])
    operands = list(body.outputs) + list(body.inputs)
    acc = {ins.outputs[0].id for ins in sums}
    if same and any(operands[k].id in acc for k in same.values()):
        raise ValueError(f"c.kernel_source: {cname} sums into an output that shares an input's "
                         f"memory; a column kernel adds into its outputs and cannot")
    strides = [_broadcast_strides(F[r:], F) if v.id in acc else _broadcast_strides(v.shape, F)
               for v in operands]
    lead_dims, lead = _collapse(F[:r], [s[:r] for s in strides])
    cols_dims, cols = _collapse(F[r:], [s[r:] for s in strides])
    idx = [f"i{d}" for d in range(len(lead_dims))] + [f"j{d}" for d in range(len(cols_dims))]
    dims = lead_dims + cols_dims
    per = [a + b for a, b in zip(lead, cols)]

    def offset(st):
        terms = [i if s == 1 else f"{i} * {s}" for i, s in zip(idx, st) if s]
        return " + ".join(terms) or "0"

    lines = []
    cut = _split_at(cols_dims)   # a loop over columns is split: each part sums its own columns
    cut = 0 if cut is None else cut
    first = len(lead_dims) + cut
    rest = math.prod(cols_dims[cut + 1:])   # the dims before `cut` have length 1
    for k, v in enumerate(body.outputs):
        if v.id in acc:
            lines.append(f"    for (int64_t j = tt_lo * {rest}; j < tt_hi * {rest}; j++) "
                         f"p{k}[j] = {_lit(0.0, CTYPE[v.dtype.name])};")
    indent = "    "
    for n, (i, d) in enumerate(zip(idx, dims)):
        lo, hi = ("tt_lo", "tt_hi") if n == first else ("0", d)
        lines.append(f"{indent}for (int64_t {i} = {lo}; {i} < {hi}; {i}++) {{")
        indent += "    "
    names = {v.id: _lit(np.asarray(a).reshape(()).item(), CTYPE[v.dtype.name])
             for v, a in body.consts.items()}
    for k, v in enumerate(body.inputs, start=len(body.outputs)):
        names[v.id] = f"x{k}"
        lines.append(f"{indent}const {CTYPE[v.dtype.name]} x{k} = p{k}[{offset(per[k])}];")
    position = {v.id: k for k, v in enumerate(body.outputs)}
    for n, ins in enumerate(body.instrs):
        out = ins.outputs[0]
        if out.id in acc:
            k = position[out.id]
            lines.append(f"{indent}p{k}[{offset(per[k])}] += {names[ins.inputs[0].id]};  /* {ins.op} */")
            continue
        t = CTYPE[out.dtype.name]
        names[out.id] = f"v{n}"
        lines.append(f"{indent}const {t} v{n} = {EMIT[ins.fn]([names[v.id] for v in ins.inputs], ins, t)};"
                     f"  /* {ins.op} */")
    for k, v in enumerate(body.outputs):
        if v.id not in acc:
            lines.append(f"{indent}p{k}[{offset(per[k])}] = {names[v.id]};")
    for _ in dims:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return _function(cname, operands, len(body.outputs), same, lines, symbolic.program_symbols(body),
                     split=(cols_dims[cut], GRAIN if cut == len(cols_dims) - 1 else 1))


def _split_at(dims):
    """The loop a kernel's parts share out: the first of length other than 1 (a dim of 1
    that the collapse could not merge, next to a broadcast operand, would leave all the
    work to one part); None if every loop has length 1."""
    return next((d for d, n in enumerate(dims) if not (isinstance(n, int) and n == 1)), None)


@symbolic.with_formulas
def program_source(program, in_place=None):
    """The whole translation unit: the header, then one function per fused instruction.
    in_place: {output value id: input value id} computed in place (codegen/runner.py).
    Returns (source, {instr index: function name})."""
    head = [INCLUDE, ""]
    if any(ins.op == "fused" and is_row_kernel(ins.attrs["body"]) for ins in program.instrs):
        head += [PAIRWISE, ""]
    in_place = in_place or {}

    def source(ins, name):
        n_out = len(ins.outputs)
        position = {v.id: n_out + j for j, v in enumerate(ins.inputs)}
        same = {position[in_place[v.id]]: k for k, v in enumerate(ins.outputs)
                if v.id in in_place and in_place[v.id] in position}
        return kernel_source(ins, name, same)
    return translation_unit(program, head, source)


def translation_unit(program, head, kernel_source):
    """`head` (a list of lines), then `kernel_source(instr, name)` for every fused
    instruction; shared by the C and the CUDA backends. Returns (source, {index: name})."""
    parts = list(head)
    names = {}
    for k, ins in enumerate(program.instrs):
        if ins.op == "fused":
            names[k] = f"{ins.attrs['name']}_{k}"
            parts.append(kernel_source(ins, names[k]))
            parts.append("")
    return "\n".join(parts), names


# ---------------------------------------------------------------- the runner
@symbolic.with_formulas
def build_dynamic(program, write_back=None, threads=None):
    """For a program of symbolic sizes: its kernels compiled once, taking the sizes as an
    argument, and an instantiate.Instances that makes the runner of each call's sizes (the
    program at those sizes: its memory plan, arena and NumPy steps) from those kernels.
    threads: as in `build`."""
    program = fuse.columns(program)
    fused = {k for k, ins in enumerate(program.instrs) if ins.op == "fused"}
    in_place = _runner.in_place(program, fused, write_back or {})
    kernels, source = _compiled(program, in_place)
    symbols = symbolic.program_symbols(program)
    count = 1 + max((int(s[1:]) for s in symbols), default=-1)
    threads = _threads_of(threads)

    def at(env):
        sizes = [env.get(f"s{k}", 0) for k in range(count)]
        return Runner(instantiate.at(program, env), kernels, source, in_place, sizes=sizes,
                      threads=threads)
    generic = Runner(program, kernels, source, in_place, sizes=[0] * count, generic=True)
    return instantiate.Instances(at, generic)


def _compiled(program, in_place):
    """({instr index: (loaded C function, its `_part` entry)}, source) of a program's
    fused kernels."""
    source, names = program_source(program, in_place)
    lib = None
    if names:
        with open(HEADER) as f:
            header = f.read()
        lib = cache_disk.load(source, FLAGS, extra=header)
    # {k: (the whole kernel, its parts' entry)}
    return {k: (getattr(lib, name), getattr(lib, f"{name}_part")) for k, name in names.items()}, source


def _threads_of(threads):
    return _threads_mod.default_threads() if threads is None else threads


def build(program, write_back=None, threads=None):
    """A runner for `program`: call it with the input arrays, get the output arrays.
    write_back: {output index: input index} that the runner may compute in place.
    threads: how many parts big kernels and matmuls run in (codegen/threads.py); None: as
    many as NumPy's OpenBLAS runs (1 with another BLAS)."""
    program = fuse.columns(program)
    fused = {k for k, ins in enumerate(program.instrs) if ins.op == "fused"}
    in_place = _runner.in_place(program, fused, write_back or {})
    kernels, source = _compiled(program, in_place)
    return Runner(program, kernels, source, in_place, threads=_threads_of(threads))
