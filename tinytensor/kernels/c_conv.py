"""Eager C kernels of the 2-d convolutions' layout steps (ops/conv.py): im2col (the padded
input's windows laid out as columns) and its adjoint col2im (each column entry added back
where it was read from), split over the C pool by (batch, channel) planes.

Why: NumPy pads with a copy, then gathers the windows with one strided copy, on one
thread; col2im is kh * kw strided `+=` sweeps over a zeroed padded array, then a crop.
Measured (Zen 5, 1 thread, x (8, 64, 32, 32) float32, 3x3, padding 1): im2col 1.2 ms
(+0.17 ms of padding), col2im 4.0-4.8 ms, beside 6.3-7.2 ms per GEMM.

Bits: im2col is a copy (zeros where the window leaves the input); col2im adds each
element's contributions from +0 in NumPy's order (kernel offsets in row-major order, one
`+=` each), so both equal the NumPy path's bytes. A plane is computed whole by one part,
so the result does not depend on the thread count.
"""
import numpy as np

from . import c_eager
from .c_rows import _call, _clones, _load

# n = (planes, H, W, kh, kw, OH, OW, sh, sw, ph, pw, dh, dw), ph and pw the low-side pads
_GEOMETRY = """    const int64_t planes = n[0], H = n[1], W = n[2], kh = n[3], kw = n[4], OH = n[5], OW = n[6];
    const int64_t sh = n[7], sw = n[8], ph = n[9], pw = n[10], dh = n[11], dw = n[12];
    const int64_t lo = tt_part_start(planes, part, parts, 1), hi = tt_part_start(planes, part + 1, parts, 1);"""

# the outputs whose input row oh * sh - ph + i * dh lies in [0, H): [oh0, oh1); columns alike
_RANGES = """            const int64_t top = i * dh - ph, off = j * dw - pw;
            const int64_t oh0 = _tt_first(top, sh, OH), oh1 = _tt_first(top - H, sh, OH);
            const int64_t ow0 = _tt_first(off, sw, OW), ow1 = _tt_first(off - W, sw, OW);
            const int64_t rows = oh1 > oh0 ? oh1 - oh0 : 0, cols = ow1 > ow0 ? ow1 - ow0 : 0;"""

# the first o >= 0 with o * s + a >= 0 (a window's start a, stride s), at most n
_FIRST = """static inline int64_t _tt_first(int64_t a, int64_t s, int64_t n) {
    const int64_t o = a >= 0 ? 0 : (-a + s - 1) / s;
    return o < n ? o : n;
}
"""


def _entry(name, ct, out, src):
    """The C entry both kernels share: `out` (b[0]) from `src` (b[1]), over its part's planes."""
    return f"""
#include <string.h>
{_FIRST}{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict {out} = ({ct} *)b[0];
    const {ct} *restrict {src} = (const {ct} *)b[1];
{_GEOMETRY}
    for (int64_t p = lo; p < hi; p++) {{"""


def _im2col_source(name, ct):
    """b = col (planes, kh, kw, OH, OW), x (planes, H, W). A kernel offset's block of
    outputs is zeroed whole when the windows leave the input there (one memset, not one
    per output row: GCC makes a call of each zeroing loop), then the input copied in."""
    return _entry(name, ct, "col", "x") + f"""
        const {ct} *restrict plane = x + p * H * W;
        for (int64_t i = 0; i < kh; i++)
          for (int64_t j = 0; j < kw; j++) {{
            {ct} *restrict c = col + ((p * kh + i) * kw + j) * OH * OW;
{_RANGES}
            if (rows < OH || cols < OW) memset(c, 0, sizeof({ct}) * OH * OW);
            for (int64_t oh = oh0; oh < oh0 + rows; oh++) {{
                const {ct} *restrict src = plane + (oh * sh + top) * W + ow0 * sw + off;
                {ct} *restrict dst = c + oh * OW + ow0;
                if (sw == 1)
                    for (int64_t k = 0; k < cols; k++) dst[k] = src[k];
                else
                    for (int64_t k = 0; k < cols; k++) dst[k] = src[k * sw];
            }}
          }}
    }}
}}
"""


def _col2im_source(name, ct):
    """b = x (planes, H, W), col (planes, kh, kw, OH, OW)."""
    return _entry(name, ct, "x", "col") + f"""
        {ct} *restrict plane = x + p * H * W;
        memset(plane, 0, sizeof({ct}) * H * W);
        for (int64_t i = 0; i < kh; i++)
          for (int64_t j = 0; j < kw; j++) {{
            const {ct} *restrict c = col + ((p * kh + i) * kw + j) * OH * OW;
{_RANGES}
            for (int64_t oh = oh0; oh < oh0 + rows; oh++) {{
                {ct} *restrict dst = plane + (oh * sh + top) * W + ow0 * sw + off;
                const {ct} *restrict src = c + oh * OW + ow0;
                if (sw == 1)
                    for (int64_t k = 0; k < cols; k++) dst[k] += src[k];
                else
                    for (int64_t k = 0; k < cols; k++) dst[k * sw] += src[k];
            }}
          }}
    }}
}}
"""


def _sizes(planes, spatial, kernel, out, stride, pads, dilation):
    return [planes, *spatial, *kernel, *out, *stride, *(lo for lo, _ in pads), *dilation]


def _run(kind, source, out_shape, src, sizes):
    """Kernel `kind` from `src` into a new array of out_shape, or None (NumPy computes)."""
    lib = _load(kind, src.dtype.char, source)
    if lib is None:
        return None
    out = np.empty(out_shape, src.dtype)
    _call(lib, [out, src], sizes, max(out.size, src.size), kind)   # the work: the columns
    return out


def im2col(x, kernel, stride, pads, dilation, out):
    """(N, C, kh, kw, OH, OW) columns of x (N, C, H, W), or None (NumPy lays them out)."""
    if x.ndim != 4 or len(kernel) != 2 or not c_eager.enabled() or not c_eager.takes(x):
        return None
    N, C = x.shape[:2]
    return _run("im2col", _im2col_source, (N, C) + tuple(kernel) + tuple(out), x,
                _sizes(N * C, x.shape[2:], kernel, out, stride, pads, dilation))


def col2im(col, spatial, kernel, stride, pads, dilation):
    """The adjoint of im2col: x (N, C, *spatial) from columns (N, C, kh, kw, OH, OW), or None."""
    if col.ndim != 6 or len(kernel) != 2 or not c_eager.enabled() or not c_eager.takes(col):
        return None
    N, C = col.shape[:2]
    return _run("col2im", _col2im_source, (N, C) + tuple(spatial), col,
                _sizes(N * C, spatial, kernel, col.shape[4:], stride, pads, dilation))
