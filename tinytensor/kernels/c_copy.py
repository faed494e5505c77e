"""A strided array laid out C-contiguous in C, split over the C pool: the copy a reshape of a
transposed (or otherwise strided) array makes (ops/movement.py `Reshape`).

Why: NumPy makes it on one thread, element by element along the output's last dim, which
for a transpose of the last two dims reads one element per cache line (x (64, 128, 256)
float32 transposed (1, 2): 2.3 ms at 1 thread on Zen 5, torch 2.0 ms at 1 thread and 1.07
at 2). Here the output's last two dims go in TILE x TILE tiles, so both the reads and the
writes of a tile stay in L1, and the parts are ranges of tiles. On one thread NumPy copies
(as the pool runs as many threads as OpenBLAS, c_attention.py's rule): in a transpose +
reshape step there the C copy was no faster (fwd+bwd median 5.95 vs 5.54 ms; at 2 threads
4.68 vs 5.54 ms, Zen 5).

Bits: a copy of each element's bytes (as an unsigned integer of its size), so every value
(nan payloads, -0.0) comes through unchanged.
"""
import numpy as np

from . import c_eager
from ..blas_threads import blas
from .c_rows import _call, _clones, _load

TILE = 16
MAX_DIMS = 6


def _source(name, ct):
    """n = (dims, shape..., source strides in elements...); b = out, the source's first
    element. Element types by size: the `ct` of the same width, copied as its bits."""
    it = "uint32_t" if ct == "float" else "uint64_t"
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {it} *restrict out = ({it} *)b[0];
    const {it} *restrict src = (const {it} *)b[1];
    const int64_t d = n[0];
    const int64_t *shape = n + 1, *st = n + 1 + d;
    const int64_t R = shape[d - 2], C = shape[d - 1], sR = st[d - 2], sC = st[d - 1];
    int64_t outer = 1;
    for (int64_t k = 0; k < d - 2; k++) outer *= shape[k];
    const int64_t tiles = (R + {TILE} - 1) / {TILE};
    const int64_t lo = tt_part_start(outer * tiles, part, parts, 1), hi = tt_part_start(outer * tiles, part + 1, parts, 1);
    for (int64_t u = lo; u < hi; u++) {{
        const int64_t o = u / tiles, r0 = u % tiles * {TILE};
        const int64_t r1 = r0 + {TILE} < R ? r0 + {TILE} : R;
        int64_t off = 0, rem = o;   /* the source offset of outer index o */
        for (int64_t k = d - 3; k >= 0; k--) {{ off += rem % shape[k] * st[k]; rem /= shape[k]; }}
        const {it} *restrict s = src + off;
        {it} *restrict dst = out + o * R * C;
        if (sC == 1) {{
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = 0; c < C; c++) dst[r * C + c] = s[r * sR + c];
            continue;
        }}
        for (int64_t c0 = 0; c0 < C; c0 += {TILE}) {{
            const int64_t c1 = c0 + {TILE} < C ? c0 + {TILE} : C;
            for (int64_t c = c0; c < c1; c++)
                for (int64_t r = r0; r < r1; r++) dst[r * C + c] = s[r * sR + c * sC];
        }}
    }}
}}
"""


def _collapsed(shape, strides):
    """(shape, strides) with size-1 dims dropped and each dim merged into the one before it
    where the pair is one run in the source (the outer stride = inner stride * inner size):
    the same elements in the same order, in fewer dims."""
    dims = [(s, t) for s, t in zip(shape, strides) if s != 1]
    out = []
    for s, t in dims:
        if out and out[-1][1] == t * s:
            out[-1] = (out[-1][0] * s, t)
        else:
            out.append((s, t))
    return [s for s, _ in out], [t for _, t in out]


def contiguous(a):
    """a C-contiguous copy of the NumPy array `a`, or None (NumPy copies): a strided float
    array of at least MIN_ELEMENTS elements, two threads or more."""
    if type(a) is not np.ndarray or a.flags.c_contiguous or a.dtype.char not in "fd" \
            or a.size < c_eager.MIN_ELEMENTS or not c_eager.enabled():
        return None
    b = blas()
    if b is None or b.get() < 2:
        return None
    item = a.itemsize
    if any(t % item for t in a.strides):
        return None
    shape, strides = _collapsed(a.shape, [t // item for t in a.strides])
    if len(shape) > MAX_DIMS:
        return None
    while len(shape) < 2:
        shape, strides = [1] + shape, [0] + strides
    lib = _load("copy", a.dtype.char, _source)
    if lib is None:
        return None
    out = np.empty(a.shape, a.dtype)
    _call(lib, [out, a], [len(shape), *shape, *strides], a.size, "copy")
    return out
