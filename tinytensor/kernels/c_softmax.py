"""The eager softmax and log_softmax forwards over the last dim as one hand-written C row
pass each: a row's exponentials are written once, into the output, summed there in NumPy's
pairwise order, then divided in place (softmax) or overwritten by (x - max) - log(sum)
(log_softmax).

Why not the generated kernel (kernels/c_eager.py, which the backwards still use): the
codegen's row kernel evaluates exp(x - max) twice per element for softmax, once for the
sum and once for the output (it keeps no row buffer), and exp is most of a softmax's time
(2M float32 exps ~2.2 ms on one core of the dev machine). log_softmax's generated kernel
evaluates exp once, but copies the row through block buffers for its max and its sum: the
row pass here is as fast at 1 thread and ~10% faster at 2 (Zen 5, (8192, 256) float32,
min of 150: 0.99 vs 1.13 ms), and one hand-written pass serves both. The arithmetic is the
generated kernel's step for step (tt_math.h's exp and log, codegen/pairwise.h's sum from +0, one
division or two subtractions per element; the max's nan as NumPy's SIMD max returns it,
with its lanes on this machine; a zero max's sign, which the generated kernel settles, never
shows: x - m is then +-0 or x, and a lone zero max leaves no tie), so the bits are the same:
tt.compile's replay still gives eager's bits (tests/tinytensor/test_eager_kernels.py
checks both).
"""
import numpy as np

from . import c_eager
from .c_rows import SUFFIX, _call, _clones, _load


def _vectors(name, ct):
    """C typedefs of 64-byte vectors of `ct` and same-width ints (`name`_v, `name`_i) and
    their lane count `name`_L, for the row's max: one AVX-512 register (c_rows's 32-byte
    vector_types cost a fifth of the log_softmax pass here, Zen 5); the max's value does
    not depend on the lanes (its nan is settled apart, by NumPy's rule)."""
    lanes, it = (16, "int32_t") if ct == "float" else (8, "int64_t")
    return (f"typedef {ct} {name}_v __attribute__((vector_size(64)));\n"
            f"typedef {it} {name}_i __attribute__((vector_size(64)));\n"
            f"#define {name}_L {lanes}\n")


def _source(name, ct, log, lanes):
    """n = (rows, C); b = out (rows, C), x (rows, C). log: log_softmax. lanes: NumPy's max's
    (the toolchain's max_lanes), which decide the nan a row's max is."""
    f = SUFFIX[ct]
    nan = "tt_f32((int)0x7fc00000u)" if ct == "float" else "tt_f64((long long)0x7ff8000000000000ull)"
    first_nan = f"(C >= 2 && j <= (C - 1) / {lanes} * {lanes}) ? {nan} : row[j]" if lanes else "row[j]"
    if log:   # (x - m) - log(sum), the exponentials' row overwritten
        finish = f"""const {ct} ls = tt_log{f}(s);
        for (j = 0; j < C; j++) o[j] = (row[j] - m) - ls;"""
    else:
        finish = "for (j = 0; j < C; j++) o[j] = o[j] / s;"
    return f"""
#include <string.h>
{c_eager._toolchain[0].pairwise()}
{_vectors(name, ct)}{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict out = ({ct} *)b[0];
    const {ct} *restrict x = (const {ct} *)b[1];
    const int64_t rows = n[0], C = n[1];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
    for (int64_t r = lo; r < hi; r++) {{
        const {ct} *restrict row = x + r * C;
        {ct} *restrict o = out + r * C;
        /* the max; with a nan in the row the generated kernel's nan (NumPy's max's) */
        {name}_v mv;
        {name}_i nv = {{0}};
        for (int k = 0; k < {name}_L; k++) mv[k] = -INFINITY;
        int64_t j = 0;
        for (; j + {name}_L <= C; j += {name}_L) {{
            {name}_v v;
            memcpy(&v, row + j, sizeof v);
            const {name}_i gt = v > mv;
            nv |= v != v;
            mv = ({name}_v)(((({name}_i)v) & gt) | ((({name}_i)mv) & ~gt));
        }}
        int isnan_ = 0;
        for (int k = 0; k < {name}_L; k++) isnan_ |= nv[k] != 0;
        {ct} m = mv[0];
        for (int k = 1; k < {name}_L; k++) m = mv[k] > m ? mv[k] : m;
        for (; j < C; j++) {{ isnan_ |= row[j] != row[j]; m = row[j] > m ? row[j] : m; }}
        if (isnan_)
            for (j = 0; j < C; j++)
                if (row[j] != row[j]) {{ m = {first_nan}; break; }}
        for (j = 0; j < C; j++) o[j] = tt_exp{f}(row[j] - m);
        /* NumPy's pairwise sum of the row, from +0, as the generated kernel adds it */
        int64_t lo_[C / 32 + 2], len[C / 32 + 2];
        const int64_t count = tt_pairwise_leaves(0, C, lo_, len, 0);
        {ct} leaf[C / 32 + 2];
        for (int64_t L = 0; L < count; L++) leaf[L] = tt_pairwise_block{f}(o + lo_[L], len[L]);
        const {ct} *next = leaf;
        const {ct} s = ({ct})0 + tt_pairwise_tree{f}(&next, C);
        {finish}
    }}
}}
"""


def forward(x2, log=False):
    """softmax (log: log_softmax) over the rows of x2 (rows, C), or None (the generated
    kernel or NumPy)."""
    if not c_eager.enabled() or x2.ndim != 2 or not 0 < x2.shape[1] <= c_eager.MAX_ROW or not c_eager.takes(x2):
        return None
    lanes = c_eager._toolchain[0].max_lanes(x2.dtype)
    kind = ("log_softmax_rows" if log else "softmax_rows") + f"_l{lanes}"
    lib = _load(kind, x2.dtype.char, lambda name, ct: _source(name, ct, log, lanes))
    if lib is None:
        return None
    out = np.empty(x2.shape, x2.dtype)
    _call(lib, [out, x2], list(x2.shape), x2.size, "log_softmax" if log else "softmax")
    return out
