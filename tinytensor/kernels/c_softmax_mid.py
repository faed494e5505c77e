"""softmax over a dim that is not the last, forward and backward, as hand-written C passes
over the array read as (A, C, B): C the softmax's dim, B > 1 the contiguous dims after it.

Why: the generated kernels reduce only the last dim (a decomposition with a middle-dim sum
leaves the sum outside a kernel), so this softmax ran NumPy's five single-threaded passes
forward and three backward. Here each part of the work is a block of up to BW columns (b)
of one a: C rows of that block, read three times from cache, vectorised along b.
softmax(x, 1) forward + backward, (64, 128, 256) float32, Zen 5 (2026-12-02,
/work/notes/scratch_ops_act2.py via quiet.sh): 8.9 -> 2.9-3.6 ms at 2 threads (torch 2.5-5.9),
8.6 -> 3.5 ms at 1.

The order of the arithmetic is NumPy's for these layouts: NumPy reduces a C-contiguous
(A, C, B) array over its middle axis one row of B at a time, so every column's sum is
sequential in c from its first element (checked: `tests/tinytensor/test_eager_kernels.py`;
B == 1 is a last-dim sum, pairwise, and not taken here). So
- the backward y * (g - sum(g * y)) is NumPy's reference to the bit;
- the forward's max, subtraction, sum and division are NumPy's operations in NumPy's order,
  its exp tt_math.h's (as the compiled decomposition's, which fuses exp into a C kernel):
  within the exp's few ulps of NumPy's, as the last-dim C softmax.
"""
import numpy as np

from . import c_eager
from .c_rows import SUFFIX, _call, _load

BW = 64   # columns per block: C rows of BW floats stay in L1/L2 for the three passes


def _source(name, ct, backward):
    f = SUFFIX[ct]
    if backward:   # b: out, y, g
        body = f"""
        for (int64_t j = 0; j < w; j++) s[j] = g0[j] * y0[j];
        for (int64_t c = 1; c < C; c++) {{
            const {ct} *restrict yr = y0 + c * B, *restrict gr = g0 + c * B;
            for (int64_t j = 0; j < w; j++) s[j] = s[j] + gr[j] * yr[j];
        }}
        for (int64_t c = 0; c < C; c++) {{
            const {ct} *restrict yr = y0 + c * B, *restrict gr = g0 + c * B;
            {ct} *restrict o = o0 + c * B;
            for (int64_t j = 0; j < w; j++) o[j] = (gr[j] - s[j]) * yr[j];
        }}"""
        ins = f"const {ct} *restrict y = (const {ct} *)b[1], *restrict g = (const {ct} *)b[2];"
        at = "const %s *restrict y0 = y + base, *restrict g0 = g + base;" % ct
    else:          # b: out, x
        body = f"""
        {ct} m[{BW}];
        for (int64_t j = 0; j < w; j++) m[j] = x0[j];
        for (int64_t c = 1; c < C; c++) {{
            const {ct} *restrict xr = x0 + c * B;
            /* NumPy's max: a nan, once met, stays */
            for (int64_t j = 0; j < w; j++) m[j] = (xr[j] > m[j] || xr[j] != xr[j]) ? xr[j] : m[j];
        }}
        for (int64_t c = 0; c < C; c++) {{
            const {ct} *restrict xr = x0 + c * B;
            {ct} *restrict o = o0 + c * B;
            for (int64_t j = 0; j < w; j++) o[j] = tt_exp{f}(xr[j] - m[j]);
            if (c == 0) for (int64_t j = 0; j < w; j++) s[j] = o[j];
            else for (int64_t j = 0; j < w; j++) s[j] = s[j] + o[j];
        }}
        for (int64_t c = 0; c < C; c++) {{
            {ct} *restrict o = o0 + c * B;
            for (int64_t j = 0; j < w; j++) o[j] = o[j] / s[j];
        }}"""
        ins = f"const {ct} *restrict x = (const {ct} *)b[1];"
        at = "const %s *restrict x0 = x + base;" % ct
    return f"""
{c_eager._toolchain[0].clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict out = ({ct} *)b[0];
    {ins}
    const int64_t A = n[0], C = n[1], B = n[2], nb = (B + {BW} - 1) / {BW}, units = A * nb;
    const int64_t lo = tt_part_start(units, part, parts, 1), hi = tt_part_start(units, part + 1, parts, 1);
    for (int64_t u = lo; u < hi; u++) {{
        const int64_t a = u / nb, b0 = (u % nb) * {BW};
        const int64_t w = B - b0 < {BW} ? B - b0 : {BW}, base = a * C * B + b0;
        {at}
        {ct} *restrict o0 = out + base;
        {ct} s[{BW}];
        {body}
    }}
}}
"""


def _acb(shape, dim):
    """(A, C, B) of `shape` read around `dim`."""
    return (int(np.prod(shape[:dim], dtype=np.int64)), shape[dim], int(np.prod(shape[dim + 1:], dtype=np.int64)))


def _takes(dim, *arrays):
    a = arrays[0]
    return (c_eager.enabled() and 0 <= dim < a.ndim - 1 and c_eager.takes(*arrays)
            and all(b.shape == a.shape for b in arrays) and _acb(a.shape, dim)[2] > 1)


def forward(x, dim):
    """softmax(x, dim) for a dim before the last of a big contiguous float array (module
    docstring), or None (NumPy computes it)."""
    if not _takes(dim, x):
        return None
    lib = _load("softmax_mid", x.dtype.char, lambda name, ct: _source(name, ct, False))
    if lib is None:
        return None
    out = np.empty(x.shape, x.dtype)
    _call(lib, [out, x], list(_acb(x.shape, dim)), x.size, "softmax_mid")
    return out


def backward(g, y, dim):
    """y * (g - sum(g * y, dim)) as NumPy's reference computes it (module docstring), or None."""
    if not _takes(dim, y, g):
        return None
    lib = _load("softmax_mid_backward", y.dtype.char, lambda name, ct: _source(name, ct, True))
    if lib is None:
        return None
    out = np.empty(y.shape, y.dtype)
    _call(lib, [out, y, g], list(_acb(y.shape, dim)), y.size, "softmax_mid_backward")
    return out
