"""The eager backward of layer_norm and rms_norm over class-last rows (ops/norms.py
`FusedNorm`) as one hand-written C pass: per row the input gradient, and the weight and
bias gradients (column sums) accumulated on the way, all split over the C pool.

Why not the generated kernel (kernels/c_eager.py): it rebuilds each row's mean and 1/std
from x (two more row sums: five in all, where the forward's saved mean and 1/std leave
two) and sums the weight and bias gradients in a column pass on one thread (written whole
by one part: split by columns each part reads a sliver of every row). Measured on the dev
machine (Zen 5, 8192 rows of 256 float32): 2.4-4.1 ms at 1 thread, 1.6-1.8 ms at 2.

The arithmetic is the NumPy path's (`_cpu_backward`, the fallback): xhat = (x - mean) *
rstd from the forward's saved stats, gy = g * w, dx = rstd * ((gy - xhat * mean(gy *
xhat)) - mean(gy)) (rms: no mean(gy) term), in the input's dtype; the row sums are added
in LANES lanes and the column sums (g * xhat for the weight, g for the bias) row after row
within fixed blocks of ROWS rows, each block's sums then added in block order. Blocks never
depend on the thread count (a part is whole blocks), so the bits are the same on 1 or 2
threads and run to run; they are not NumPy's bits (its pairwise row sums, its einsum's
column order): equal to them within a few ulp of the sums' magnitudes (tests/tinytensor/
test_norm_backward_kernel.py states the tolerance).
"""
import numpy as np

from . import c_eager
from .c_rows import _call, _clones, _load

ROWS = 64     # rows per block of the column sums: fixed, so the order never follows the threads
LANES = 16    # row sums in this many lanes (a 64-byte vector of float32)


def _source(name, ct):
    """n = (rows, C, blocks, rms, has weight); b = dx (rows, C), column sums of g * xhat
    (blocks, C), of g (blocks, C), x (rows, C), weight (C; unread without one), g (rows, C),
    mean (rows; unread for rms), 1/std (rows)."""
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict dx = ({ct} *)b[0];
    {ct} *restrict sw = ({ct} *)b[1];
    {ct} *restrict sb = ({ct} *)b[2];
    const {ct} *restrict x = (const {ct} *)b[3];
    const {ct} *restrict w = (const {ct} *)b[4];
    const {ct} *restrict g = (const {ct} *)b[5];
    const {ct} *restrict mu = (const {ct} *)b[6];
    const {ct} *restrict rstd = (const {ct} *)b[7];
    const int64_t rows = n[0], C = n[1], blocks = n[2], rms = n[3], has_w = n[4];
    const {ct} inv = ({ct})1 / ({ct})C;
    const int64_t lo = tt_part_start(blocks, part, parts, 1), hi = tt_part_start(blocks, part + 1, parts, 1);
    for (int64_t blk = lo; blk < hi; blk++) {{
        {ct} *restrict cw = sw + blk * C;
        {ct} *restrict cb = sb + blk * C;
        for (int64_t j = 0; j < C; j++) {{ cw[j] = 0; cb[j] = 0; }}
        const int64_t r1 = (blk + 1) * {ROWS} < rows ? (blk + 1) * {ROWS} : rows;
        for (int64_t r = blk * {ROWS}; r < r1; r++) {{
            const {ct} *restrict xr = x + r * C;
            const {ct} *restrict gr = g + r * C;
            const {ct} m = rms ? ({ct})0 : mu[r], s = rstd[r];
            /* sum(gy * xhat), sum(gy) in lanes; the column sums on the way */
            {ct} d[{LANES}] = {{0}}, e[{LANES}] = {{0}};
            int64_t j = 0;
            for (; j + {LANES} <= C; j += {LANES})
                for (int k = 0; k < {LANES}; k++) {{
                    const {ct} xh = (xr[j + k] - m) * s, gv = gr[j + k];
                    const {ct} gy = has_w ? gv * w[j + k] : gv;
                    d[k] += gy * xh;
                    e[k] += gy;
                    cw[j + k] += gv * xh;
                    cb[j + k] += gv;
                }}
            {ct} sd = 0, se = 0;
            for (int k = 0; k < {LANES}; k++) {{ sd += d[k]; se += e[k]; }}
            for (; j < C; j++) {{
                const {ct} xh = (xr[j] - m) * s, gv = gr[j];
                const {ct} gy = has_w ? gv * w[j] : gv;
                sd += gy * xh;
                se += gy;
                cw[j] += gv * xh;
                cb[j] += gv;
            }}
            const {ct} a = sd * inv, c = rms ? ({ct})0 : se * inv;
            {ct} *restrict o = dx + r * C;
            for (j = 0; j < C; j++) {{
                const {ct} xh = (xr[j] - m) * s;
                const {ct} gy = has_w ? gr[j] * w[j] : gr[j];
                o[j] = s * ((gy - xh * a) - c);
            }}
        }}
    }}
}}
"""


def backward(g2, x2, w, mu, rstd, rms):
    """(dx, weight gradient, bias gradient) of rows x2 (rows, C) from the forward's saved
    mean (unused for rms) and 1/std, or None (the caller computes them). The column sums
    are returned whether or not a weight or bias exists (the caller takes what it needs)."""
    params = [w] if w is not None else []
    if not c_eager.enabled() or x2.ndim != 2 or x2.shape[1] == 0:
        return None
    if type(g2) is np.ndarray and g2.dtype == x2.dtype and not g2.flags.c_contiguous:
        g2 = np.ascontiguousarray(g2)   # e.g. a loss's broadcast gradient: a copy costs far less than NumPy's path
    if not c_eager.takes(x2, g2, *params):
        return None
    rows, C = x2.shape
    if g2.shape != x2.shape or (w is not None and w.shape != (C,)) or mu.shape != (rows,) \
            or rstd.shape != (rows,) or mu.dtype != x2.dtype or rstd.dtype != x2.dtype:
        return None
    lib = _load("norm_backward", x2.dtype.char, _source)
    if lib is None:
        return None
    blocks = -(-rows // ROWS)
    dx = np.empty(x2.shape, x2.dtype)
    sw = np.empty((blocks, C), x2.dtype)
    sb = np.empty((blocks, C), x2.dtype)
    _call(lib, [dx, sw, sb, x2, w if w is not None else x2, g2, np.ascontiguousarray(mu),
                np.ascontiguousarray(rstd)],
          [rows, C, blocks, int(rms), int(w is not None)], x2.size,
          "rms_norm_backward" if rms else "layer_norm_backward")
    # the blocks' sums in block order (NumPy adds the rows of an axis-0 sum one after another)
    return dx, sw.sum(axis=0), sb.sum(axis=0)
