"""Row kernels of the C backend (RowKernel is shared with the CUDA backend).

A fused body with sums or maxima over the trailing dims F[r:] of its shape F (see
passes/fuse.py) is one loop over the rows F[:r]; per row, one loop over the row's n
elements per reduction, then one that writes the elements of the outputs of shape F.
Ops of shape F are computed inside those loops, again in each loop that needs them (no
row-sized temporary: a row of any length, and the same bits every time); ops on per-row
values once per row, between the loops.

Sums reproduce NumPy's order, so that a sum over a contiguous row is bitwise NumPy's:
np.add.reduce starts from 0 and adds numpy's pairwise_sum of the row
(numpy/_core/src/umath/loops_utils.h.src): blocks of at most 128 elements summed with 8
accumulators, combined by splitting n in halves rounded down to multiples of 8. The
generated loop computes the row's elements a block (a leaf of that recursion) at a time
into a 128-element buffer, sums it with `tt_pairwise_block`, and `tt_pairwise_tree`
replays the recursion over the block sums. A max starts from -inf and keeps the first
nan (np.maximum.reduce propagates nan).
"""
import functools
import math

import numpy as np

from ... import symbolic
from .columns import is_column_kernel
from .emit import CTYPE, expr, lit, reduces
from .loops import broadcast_strides, collapse, contiguous, function, split_at
from .toolchain import source_file
from ...core.rules import rule_of

PW_BLOCK = 128
PAIRWISE = source_file("pairwise.h")   # pasted into a unit with row kernels (c.py)


MAX_LANES = 8   # a row's max in 8 lanes: one AVX2 vector of floats (SSE2 and AVX-512 clones too)
MAX_BLOCK = 128   # elements per block buffer of a row's max (a multiple of MAX_LANES)
VECTOR = {"float": ("tt_v8f", "tt_v8i"), "double": ("tt_v8d", "tt_v8l")}   # tt_math.h


def is_row_kernel(body):
    return any(reduces(ins) for ins in body.instrs) and not is_column_kernel(body)


def pairwise_leaves(n):
    """(start, length) of each block NumPy's pairwise sum of n elements adds directly."""
    if n <= PW_BLOCK:
        return [(0, n)]
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_leaves(n2) + [(n2 + a, m) for a, m in pairwise_leaves(n - n2)]


class RowKernel:
    """What a row kernel reads and writes, per row: shared by the C and CUDA backends.
    Operand k (outputs, then inputs, as in the buffer list) is read or written at
    `row_base[key] + inner offset`; keys are ("f", k) for elements of shape F and
    ("r", k, S) for per-row values of shape S."""

    def __init__(self, body):
        red = next(ins for ins in body.instrs if reduces(ins))
        F = self.F = tuple(red.inputs[0].shape)
        r = self.r = len(F) - len(red.attrs["dims"])
        self.body, self.R, self.N = body, F[:r], F[r:]
        self.n = math.prod(self.N)
        self.nrows = math.prod(self.R)
        self.operands = list(body.outputs) + list(body.inputs)
        self.index = {v.id: k for k, v in enumerate(self.operands) if k >= len(body.outputs)}
        self.full = {v.id for ins in body.instrs if not reduces(ins)
                     for v in ins.outputs if tuple(v.shape) == F}
        keys = {}   # key -> strides over F (("f", k)) or over S (("r", k, S))
        for ins in body.instrs:
            shape = F if reduces(ins) else tuple(ins.outputs[0].shape)
            for v in ins.inputs:
                if v.id in self.index:
                    k = self.index[v.id]
                    key = ("f", k) if shape == F else ("r", k, shape)
                    keys[key] = broadcast_strides(v.shape, shape)
        for k, v in enumerate(body.outputs):
            shape = tuple(v.shape)
            keys[("f", k) if v.id in self.full else ("r", k, shape)] = contiguous(shape)
        self.keys = list(keys)
        self.outer_dims, outer = (collapse(self.R, [keys[key][:r] for key in self.keys]) if r
                                  else ([], [[] for _ in self.keys]))   # one row: a full reduction
        self.outer = dict(zip(self.keys, outer))
        full_keys = [key for key in self.keys if key[0] == "f"]
        dims, inner = collapse(self.N, [keys[key][r:] for key in full_keys])
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
        names = {v.id: lit(np.asarray(a).reshape(()).item(), CTYPE[v.dtype.name])
                 for v, a in body.consts.items()}
        made = {}        # full value id -> its instruction and number
        out = []
        for ins in body.instrs:                 # per-row loads
            shape = None if reduces(ins) else tuple(ins.outputs[0].shape)
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
            if reduces(ins):
                pre, elem = self._elements(ins.inputs[0], made, names)
                acc = f"v{n}"
                if rule_of(ins.fn).reduce == "sum":   # else "max"
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
            out.append(f"const {t} v{n} = {expr(ins, args, t)};  /* {ins.op} */")
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
        zero = [f"if ({acc} == 0) {{", f"    {acc} = {lit(-0.0, t)};", *("    " + x for x in self.pragma),
                f"    for ({self.itype} j = 0; j < {self.n}; j++) {{", *("        " + x for x in pre),
                f"        const {t} e = {elem};",
                # copysign, not signbit: a macro in C, std::signbit in C++ (the CUDA host tests)
                f"        if (e == 0 && {'copysignf' if t == 'float' else 'copysign'}({lit(1.0, t)}, e) > 0) "
                f"{{ {acc} = {lit(0.0, t)}; break; }}", "    }", "}"]
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
        return (f"({n} >= 2 && j <= ({n} - 1) / {L} * {L}) ? {lit(float('nan'), t)} : {e}")

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
                "    if (i < bn) {   /* the row's last, partial group: lane by lane */",
                f"        memcpy({lane}, &{m}, sizeof {m});",
                "        for (int k = 0; i + k < bn; k++) {",
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
            lines.append(f"const {t} v{n} = {expr(ins, [local[a.id] for a in ins.inputs], t)};"
                         f"  /* {ins.op} */")
            local[i] = f"v{n}"
        exprs = [local[v.id] for v in wanted]
        return lines, exprs if many else exprs[0]


def _pairwise_sum_phase(rk):
    def phase(acc, t, pre, elem):
        sfx = "f" if t == "float" else ""
        zero = lit(0.0, t)
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


def row_kernel_source(body, cname, same=None):
    rk = RowKernel(body)
    rk.max_lanes = MAX_LANES
    lines = []
    idx = [f"i{d}" for d in range(len(rk.outer_dims))]
    indent = "    "
    cut = split_at(rk.outer_dims) if idx else None
    for n, (i, d) in enumerate(zip(idx, rk.outer_dims)):
        lo, hi = ("tt_lo", "tt_hi") if n == cut else ("0", d)
        lines.append(f"{indent}for (int64_t {i} = {lo}; {i} < {hi}; {i}++) {{")
        indent += "    "
    for x in rk.row_offsets(idx) + rk.lines(_pairwise_sum_phase(rk)):
        lines.append(indent + x)
    for _ in idx:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return function(cname, rk.operands, len(body.outputs), same, lines,
                     symbolic.program_symbols(body), split=None if cut is None else (rk.outer_dims[cut], 1))
