"""Causal or unmasked attention of small heads in C: the forward and backward of
ops/attention.py's flash path for one whole (query, key) matrix pair per batch*head, the
heads shared out over the C pool's threads (kernels/c_rows.py's machinery: the same
flags, header, disk cache and pool; `c_eager.enabled()` the same switch).

Why: for a model's small heads (nanoGPT: 8 x 4 heads of 64 x 32) NumPy's flash path runs
a dozen passes of batched 64 x 64 products and elementwise ops per call, each a loop over
32 tiny matrices. Here each head is one pass: a query row's scores, its softmax and its
output (forward), or its probabilities and the four gradient terms (backward), while the
row and the head's keys sit in cache. Measured on the 2-core dev machine (nanoGPT's
shape (8, 4, 64, 32), causal, float32, 2 threads): forward 0.70 -> 0.44 ms, backward
0.93 -> 0.73 ms. On one thread these plain loops lose to the BLAS products of the NumPy
path (0.72 -> 0.83 ms forward), so they run only where the heads are split over threads.

Same arithmetic as the flash path: q is scaled first, scores are dot products, the forward
keeps per row the max m and log(l) (`stats`), the backward rebuilds p = exp((s - m) - log l)
from them, dV += p g, dS = p (g.v - rowsum(g * o)), dQ += dS k (times scale at the end),
dK += dS q*scale. Sums run in the input's dtype, in another order than BLAS's: results
agree with the NumPy path to rounding, not bitwise.

`forward` / `backward` return None where the NumPy path must run: one thread, no C compiler, not
float32/float64 of native byte order, a mask, grouped-query heads, a head's keys and values
over MAX_BLOCK elements (they are kept transposed on the stack), or fewer than MIN_WORK
multiply-adds (the call's fixed cost); `backward` also where q, k, v, out, stats or g holds an
inf or nan: its loops stop at the causal edge, where the NumPy path's block products (and
torch's) multiply the masked zeros by every key, value and gradient row of the block, and
0 * nan = nan (the check: ~35 us, ~5% of nanoGPT's backward; finite inputs whose products
overflow are not caught).
"""
import numpy as np

from ..blas_threads import blas
from . import c_eager, c_rows

MAX_BLOCK = 1 << 17  # keys * (E + Ev): a head's transposed keys and values, on the stack (8 MiB)
MIN_WORK = 1 << 16   # multiply-adds of q k^T below which NumPy's few passes cost less
MIN_THREADS = 2      # one core runs NumPy's path faster (BLAS's products): see the docstring


def _dot(ct):
    return f"""
static inline {ct} tt_att_dot(const {ct} *restrict a, const {ct} *restrict b, int64_t n) {{
    {ct} acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[j + k] * b[j + k];
    {ct} s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; j < n; j++) s += a[j] * b[j];
    return s;
}}
static inline void tt_att_axpy({ct} *restrict y, {ct} a, const {ct} *restrict x, int64_t n) {{
    for (int64_t j = 0; j < n; j++) y[j] += a * x[j];
}}
/* xt (E x S) = x (S x E) transposed: a row's dot products with every key become vector
   loops over the keys (tt_att_row) instead of one horizontal sum per key */
static inline void tt_att_transpose({ct} *restrict xt, const {ct} *restrict x, int64_t S, int64_t E) {{
    for (int64_t j = 0; j < S; j++)
        for (int64_t e = 0; e < E; e++) xt[e * S + j] = x[j * E + e];
}}
/* s[j] = sum_e a[e] xt[e][j] for j < end */
static inline void tt_att_row({ct} *restrict s, const {ct} *restrict a, const {ct} *restrict xt,
                              int64_t S, int64_t E, int64_t end) {{
    for (int64_t j = 0; j < end; j++) s[j] = 0;
    for (int64_t e = 0; e < E; e++) tt_att_axpy(s, a[e], xt + e * S, end);
}}
"""


def _source(name, ct, backward):
    """n = (heads, L, S, E, Ev, causal); buffers: forward out (heads, L, Ev), stats
    (heads, L, 2), q, k, v, scale (one element); backward dq, dk, dv, q, k, v, out, stats,
    g, scale."""
    sfx = "f" if ct == "float" else ""
    head = f"""{_dot(ct)}
{c_rows._clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    const int64_t H = n[0], L = n[1], S = n[2], E = n[3], F = n[4], causal = n[5];
    const int64_t lo = tt_part_start(H, part, parts, 1), hi = tt_part_start(H, part + 1, parts, 1);
    {ct} qs[E > 0 ? E : 1];
"""
    if not backward:
        return head + f"""    {ct} *restrict out = ({ct} *)b[0], *restrict stats = ({ct} *)b[1];
    const {ct} *restrict q = (const {ct} *)b[2], *restrict k = (const {ct} *)b[3], *restrict v = (const {ct} *)b[4];
    const {ct} scale = (({ct} *)b[5])[0];
    {ct} p[S > 0 ? S : 1];
    {ct} kt[S * E > 0 ? S * E : 1];   /* at most MAX_BLOCK elements: _takes */
    for (int64_t h = lo; h < hi; h++) {{
        const {ct} *qh = q + h * L * E, *kh = k + h * S * E, *vh = v + h * S * F;
        tt_att_transpose(kt, kh, S, E);
        for (int64_t i = 0; i < L; i++) {{
            {ct} *restrict o = out + (h * L + i) * F;
            for (int64_t e = 0; e < E; e++) qs[e] = qh[i * E + e] * scale;
            const int64_t end = causal ? (i + 1 < S ? i + 1 : S) : S;
            {ct} mx = -INFINITY;
            tt_att_row(p, qs, kt, S, E, end);
            for (int64_t j = 0; j < end; j++) mx = (p[j] > mx || p[j] != p[j]) ? p[j] : mx;
            {ct} acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
            int64_t j = 0;
            for (; j < end; j++) p[j] = tt_exp{sfx}(p[j] - mx);
            for (j = 0; j + 8 <= end; j += 8)
                for (int t = 0; t < 8; t++) acc[t] += p[j + t];
            {ct} l = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; j < end; j++) l += p[j];
            for (int64_t f = 0; f < F; f++) o[f] = 0;
            for (j = 0; j < end; j++) tt_att_axpy(o, p[j], vh + j * F, F);
            for (int64_t f = 0; f < F; f++) o[f] /= l;
            stats[(h * L + i) * 2] = mx;
            stats[(h * L + i) * 2 + 1] = tt_log{sfx}(l);
        }}
    }}
}}
"""
    return head + f"""    {ct} *restrict dq = ({ct} *)b[0], *restrict dk = ({ct} *)b[1], *restrict dv = ({ct} *)b[2];
    const {ct} *restrict q = (const {ct} *)b[3], *restrict k = (const {ct} *)b[4], *restrict v = (const {ct} *)b[5];
    const {ct} *restrict out = (const {ct} *)b[6], *restrict stats = (const {ct} *)b[7], *restrict g = (const {ct} *)b[8];
    const {ct} scale = (({ct} *)b[9])[0];
    {ct} p[S > 0 ? S : 1], dp[S > 0 ? S : 1];
    {ct} kt[S * (E + F) > 0 ? S * (E + F) : 1], *vt = kt + S * E;   /* at most MAX_BLOCK: _takes */
    for (int64_t h = lo; h < hi; h++) {{
        const {ct} *qh = q + h * L * E, *kh = k + h * S * E, *vh = v + h * S * F;
        {ct} *dkh = dk + h * S * E, *dvh = dv + h * S * F;
        tt_att_transpose(kt, kh, S, E);
        tt_att_transpose(vt, vh, S, F);
        for (int64_t x = 0; x < S * E; x++) dkh[x] = 0;
        for (int64_t x = 0; x < S * F; x++) dvh[x] = 0;
        for (int64_t i = 0; i < L; i++) {{
            const {ct} *gi = g + (h * L + i) * F;
            {ct} *restrict dqi = dq + (h * L + i) * E;
            for (int64_t e = 0; e < E; e++) {{ qs[e] = qh[i * E + e] * scale; dqi[e] = 0; }}
            const {ct} dd = tt_att_dot(gi, out + (h * L + i) * F, F);
            const {ct} m = stats[(h * L + i) * 2], lg = stats[(h * L + i) * 2 + 1];
            const int64_t end = causal ? (i + 1 < S ? i + 1 : S) : S;
            tt_att_row(p, qs, kt, S, E, end);
            for (int64_t j = 0; j < end; j++) p[j] = tt_exp{sfx}((p[j] - m) - lg);
            tt_att_row(dp, gi, vt, S, F, end);
            for (int64_t j = 0; j < end; j++) dp[j] = p[j] * (dp[j] - dd);   /* dS */
            for (int64_t j = 0; j < end; j++) {{
                tt_att_axpy(dvh + j * F, p[j], gi, F);
                tt_att_axpy(dqi, dp[j], kh + j * E, E);
                tt_att_axpy(dkh + j * E, dp[j], qs, E);
            }}
            for (int64_t e = 0; e < E; e++) dqi[e] *= scale;
        }}
    }}
}}
"""


def _threads():
    """OpenBLAS's thread count now (the C pool runs as many): the heads are split over the
    pool's threads; on one thread NumPy's path (BLAS products) is faster (module docstring)."""
    b = blas()
    return b.get() if b is not None else 1


def _takes(q, k, v, mask, groups):
    if mask is not None or groups != 1 or not c_eager.enabled() or _threads() < MIN_THREADS:
        return False
    if q.dtype.char not in "fd" or not q.dtype.isnative or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-1] != v.shape[:-1]:
        return False
    L, E = q.shape[-2:]
    S = k.shape[-2]
    return 0 < S and S * (E + v.shape[-1] + 2) <= MAX_BLOCK and q.size * S >= MIN_WORK


def _heads(x):
    return np.ascontiguousarray(x).reshape((-1,) + x.shape[-2:])


def _prepared(q, k, v, mask, groups, backward):
    """(the loaded forward or backward kernel, q/k/v as (heads, rows, dim), their sizes
    (H, L, S, E, F)), or None where the C path does not take these inputs."""
    if not _takes(q, k, v, mask, groups):
        return None
    lib = c_rows._load("attn_bwd" if backward else "attn_fwd", q.dtype.char,
                       lambda name, ct: _source(name, ct, backward))
    if lib is None:
        return None
    qh, kh, vh = _heads(q), _heads(k), _heads(v)
    (H, L, E), (S, F) = qh.shape, vh.shape[-2:]
    return lib, (qh, kh, vh), (H, L, S, E, F)


def forward(q, k, v, mask, scale, causal, groups):
    """(out, stats) of the flash path's forward, or None."""
    got = _prepared(q, k, v, mask, groups, False)
    if got is None:
        return None
    lib, (qh, kh, vh), (H, L, S, E, F) = got
    out = np.empty((H, L, F), q.dtype)
    stats = np.empty((H, L, 2), q.dtype)
    c_rows._call(lib, [out, stats, qh, kh, vh, np.array([scale], q.dtype)],
                 [H, L, S, E, F, int(causal)], H * L * S * E, "attention_forward")
    return out.reshape(q.shape[:-1] + (F,)), stats.reshape(q.shape[:-1] + (2,))


def backward(q, k, v, out, stats, g, mask, scale, causal, groups):
    """(dq, dk, dv) of the flash path's backward, or None."""
    if g.dtype != q.dtype or out.dtype != q.dtype or stats.dtype != q.dtype:
        return None
    if not all(np.isfinite(a).all() for a in (q, k, v, out, stats, g)):
        return None   # the NumPy path's nan pattern (module docstring)
    got = _prepared(q, k, v, mask, groups, True)
    if got is None:
        return None
    lib, (qh, kh, vh), (H, L, S, E, F) = got
    dq, dk, dv = np.empty(qh.shape, q.dtype), np.empty(kh.shape, q.dtype), np.empty(vh.shape, q.dtype)
    c_rows._call(lib, [dq, dk, dv, qh, kh, vh, _heads(out), _heads(stats), _heads(g),
                       np.array([scale], q.dtype)],
                 [H, L, S, E, F, int(causal)], 2 * H * L * S * E, "attention_backward")
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
