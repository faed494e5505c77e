"""Eager C kernels of the fused cross-entropy over class-last rows (ops/cross_entropy.py),
without class weights: the forward's per-row loss and stats (max m, ls = log(sum(exp(x -
m)))) and the backward's dx, each one pass over a row held in L1, split by rows over the C
pool (kernels/c_rows.py's machinery), so the bits do not depend on the thread count.

Why: NumPy runs the forward as ~6 single-threaded sweeps over the logits and the backward as
~6 more (subtract, subtract, exp, scale, scatter, copy out), a chunk of rows at a time.

The arithmetic is the NumPy path's, step for step, in the logits' dtype (`_cpu_forward`,
`_cpu_backward`), with tt_math.h's exp and log in place of NumPy's and the row sums added in
16 lanes instead of NumPy's pairwise order: equal to it within a few ulp, not bitwise.
Rows with a nan put nan everywhere their NumPy twin does (the max propagates it).
"""
import numpy as np

from . import c_eager
from .c_rows import SUFFIX, _call, _clones, _load, vector_types


def _forward_source(name, ct):
    """n = (rows, C); b = loss (rows), stats (2, rows), x (rows, C), safe targets (int64),
    valid (uint8), consts (double: 1 - eps, eps / C, C as the reference's wsum, eps > 0)."""
    f = SUFFIX[ct]
    return f"""
#include <string.h>
{vector_types(name, ct)}{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict loss = ({ct} *)b[0];
    {ct} *restrict stats = ({ct} *)b[1];
    const {ct} *restrict x = (const {ct} *)b[2];
    const int64_t *restrict t = (const int64_t *)b[3];
    const unsigned char *restrict valid = (const unsigned char *)b[4];
    const double *c = (const double *)b[5];
    const {ct} hard = ({ct})c[0], soft = ({ct})c[1], wsum = ({ct})c[2];
    const int smooth = c[3] != 0;
    const int64_t rows = n[0], C = n[1];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
    for (int64_t r = lo; r < hi; r++) {{
        const {ct} *restrict row = x + r * C;
        if (!valid[r]) {{ loss[r] = 0; stats[r] = 0; stats[rows + r] = 0; continue; }}
        /* the max, nan if any element is (NumPy's max propagates nan): a lane that met a
           nan keeps it, since nothing compares greater than nan (vector types: GCC does
           not vectorize this select written on scalars) */
        {name}_v mv;
        for (int k = 0; k < {name}_L; k++) mv[k] = -INFINITY;
        int64_t j = 0;
        for (; j + {name}_L <= C; j += {name}_L) {{
            {name}_v v;
            memcpy(&v, row + j, sizeof v);
            const {name}_i take = (v > mv) | (v != v);
            mv = ({name}_v)(((({name}_i)v) & take) | ((({name}_i)mv) & ~take));
        }}
        {ct} m = mv[0];
        for (int k = 1; k < {name}_L; k++) m = (mv[k] > m || mv[k] != mv[k]) ? mv[k] : m;
        for (; j < C; j++) m = (row[j] > m || row[j] != row[j]) ? row[j] : m;
        /* sum(exp(x - m)) and, with label smoothing, sum(x - m) */
        {ct} se[16] = {{0}}, sd[16] = {{0}};
        for (j = 0; j + 16 <= C; j += 16)
            for (int k = 0; k < 16; k++) {{
                const {ct} d = row[j + k] - m;
                se[k] += tt_exp{f}(d);
                sd[k] += d;
            }}
        {ct} s = 0, sdt = 0;
        for (int k = 0; k < 16; k++) {{ s += se[k]; sdt += sd[k]; }}
        for (; j < C; j++) {{ const {ct} d = row[j] - m; s += tt_exp{f}(d); sdt += d; }}
        const {ct} ls = tt_log{f}(s);
        {ct} l = hard * (ls - (row[t[r]] - m));
        if (smooth) l += soft * (wsum * ls - sdt);
        loss[r] = l;
        stats[r] = m;
        stats[rows + r] = ls;
    }}
}}
"""


def _backward_source(name, ct):
    """n = (rows, C); b = dx (rows, C), x, stats (2, rows), safe targets (int64), valid
    (uint8), k (the row's upstream coefficient), hard ((1 - eps) per row), consts (double:
    eps / C * wsum, eps / C, eps > 0)."""
    f = SUFFIX[ct]
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict dx = ({ct} *)b[0];
    const {ct} *restrict x = (const {ct} *)b[1];
    const {ct} *restrict stats = (const {ct} *)b[2];
    const int64_t *restrict t = (const int64_t *)b[3];
    const unsigned char *restrict valid = (const unsigned char *)b[4];
    const {ct} *restrict kk = (const {ct} *)b[5];
    const {ct} *restrict hard = (const {ct} *)b[6];
    const double *c = (const double *)b[7];
    const {ct} softw = ({ct})c[0], soft = ({ct})c[1];
    const int smooth = c[2] != 0;
    const int64_t rows = n[0], C = n[1];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
    for (int64_t r = lo; r < hi; r++) {{
        const {ct} *restrict row = x + r * C;
        {ct} *restrict out = dx + r * C;
        if (!valid[r]) {{ for (int64_t j = 0; j < C; j++) out[j] = 0; continue; }}
        const {ct} m = stats[r], ls = stats[rows + r], k = kk[r], h = hard[r];
        const {ct} a = k * (h + softw), ks = k * soft;
        if (smooth)
            for (int64_t j = 0; j < C; j++) out[j] = tt_exp{f}((row[j] - m) - ls) * a - ks;
        else
            for (int64_t j = 0; j < C; j++) out[j] = tt_exp{f}((row[j] - m) - ls) * a;
        /* the target's element in the reference's order: (p a - k h) - k soft */
        const int64_t tr = t[r];
        {ct} p = tt_exp{f}((row[tr] - m) - ls) * a - k * h;
        out[tr] = smooth ? p - ks : p;
    }}
}}
"""


def _takes(x2, t):
    return (c_eager.enabled() and x2.ndim == 2 and x2.shape[1] > 0 and c_eager.takes(x2)
            and type(t) is np.ndarray and t.dtype == np.int64 and t.flags.c_contiguous)


def forward(x2, safe, valid, eps):
    """(loss per row, stats (2, rows)) of class-last rows x2 (rows, C) with targets `safe`
    (ignored rows: any class) and `valid` (bool per row), label smoothing eps, no class
    weights; or None (NumPy computes them)."""
    if not _takes(x2, safe):
        return None
    lib = _load("cross_entropy", x2.dtype.char, _forward_source)
    if lib is None:
        return None
    rows, C = x2.shape
    loss = np.empty(rows, x2.dtype)
    stats = np.empty((2, rows), x2.dtype)
    consts = np.array([1.0 - eps, eps / C, float(C), float(eps > 0)])
    _call(lib, [loss, stats, x2, safe, np.ascontiguousarray(valid, np.uint8), consts],
          [rows, C], x2.size, "cross_entropy")
    return loss, stats


def backward(x2, safe, valid, stats, k, hard, eps):
    """dx of class-last rows x2 from the forward's stats, the per-row coefficients k and
    hard ((1 - eps) * kept), no class weights; or None (NumPy computes it)."""
    if not _takes(x2, safe) or stats.dtype != x2.dtype:
        return None
    lib = _load("cross_entropy_backward", x2.dtype.char, _backward_source)
    if lib is None:
        return None
    rows, C = x2.shape
    dx = np.empty(x2.shape, x2.dtype)
    soft = eps / C
    consts = np.array([soft * C, soft, float(eps > 0)])
    _call(lib, [dx, x2, np.ascontiguousarray(stats), safe, np.ascontiguousarray(valid, np.uint8),
                np.ascontiguousarray(k, x2.dtype), np.ascontiguousarray(hard, x2.dtype), consts],
          [rows, C], x2.size, "cross_entropy_backward")
    return dx
