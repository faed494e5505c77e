"""The eager softmax forward over the last dim as one hand-written C row pass: each row's
exponentials are written once, into the output, summed there in NumPy's pairwise order
and divided in place.

Why not the generated kernel (kernels/c_eager.py, which the softmax backward and
log_softmax still use): the codegen's row kernel evaluates exp(x - max) twice per element,
once for the sum and once for the output (it keeps no row buffer), and exp is most of a
softmax's time (2M float32 exps ~2.2 ms on one core of the dev machine). The arithmetic here
is the generated kernel's step for step (tt_math.h's exp, codegen/pairwise.h's sum from +0,
one division per element), so the bits are the same: tt.compile's replay of a softmax
still gives eager's bits (tests/tinytensor/test_eager_kernels.py checks both).
"""
import numpy as np

from . import c_eager
from .c_rows import SUFFIX, _call, _clones, _load, vector_types


def _source(name, ct):
    """n = (rows, C); b = out (rows, C), x (rows, C)."""
    f = SUFFIX[ct]
    nan = "tt_f32((int)0x7fc00000u)" if ct == "float" else "tt_f64((long long)0x7ff8000000000000ull)"
    return f"""
#include <string.h>
{c_eager._toolchain[0].pairwise()}
{vector_types(name, ct)}{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
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
                if (row[j] != row[j]) {{ m = (C >= 2 && j <= (C - 1) / 8 * 8) ? {nan} : row[j]; break; }}
        for (j = 0; j < C; j++) o[j] = tt_exp{f}(row[j] - m);
        /* NumPy's pairwise sum of the row, from +0, as the generated kernel adds it */
        int64_t lo_[C / 32 + 2], len[C / 32 + 2];
        const int64_t count = tt_pairwise_leaves(0, C, lo_, len, 0);
        {ct} leaf[C / 32 + 2];
        for (int64_t L = 0; L < count; L++) leaf[L] = tt_pairwise_block{f}(o + lo_[L], len[L]);
        const {ct} *next = leaf;
        const {ct} s = ({ct})0 + tt_pairwise_tree{f}(&next, C);
        for (j = 0; j < C; j++) o[j] = o[j] / s;
    }}
}}
"""


def forward(x2):
    """softmax over the rows of x2 (rows, C), or None (the generated kernel or NumPy)."""
    if not c_eager.enabled() or x2.ndim != 2 or not 0 < x2.shape[1] <= c_eager.MAX_ROW or not c_eager.takes(x2):
        return None
    lib = _load("softmax_rows", x2.dtype.char, _source)
    if lib is None:
        return None
    out = np.empty(x2.shape, x2.dtype)
    _call(lib, [out, x2], list(x2.shape), x2.size, "softmax")
    return out
