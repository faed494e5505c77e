"""Eager C kernels of the 2-d convolutions at stride 1 (ops/conv.py) as shifted GEMMs: no
im2col columns. With an image zero-padded once to xp (C, Hp rows R apart), kernel tap
(i, j) reads xp from offset i * dh * R + j * dw, each output row R wide: so the tap is one
GEMM on a pointer-offset view of xp, rows Hp * R apart, L = (OH - 1) * R + OW columns (the
R - OW extra columns of each output row read the next row's start: garbage, cropped or
zeroed). R is the padded width Wp less the zero columns a row's right pad and the next
row's left pad can share (min(left, right, (kw - 1) * dw)): at padding 1, 3x3, one garbage
column per row, not two. Per image, kh * kw GEMMs of the loaded BLAS's gemm
(codegen/blas.h) into a padded scratch, then a crop:

    forward       y (O, OH*R)    = sum over taps of W_t (O, C) @ xp[:, off_t:]      then crop
    input grad    dxp (C, Hp*R) += W_t^T (C, O) @ gp (O, OH*R) at off_t, in tap order, crop
    weight grad   dW_t (O, C)    = gp (O, OH*R) @ xp[:, off_t:]^T, one partial per image

gp is g widened to R columns with zeros in the extra ones, so nothing leaks from them; W_t
is the weight laid out (kh, kw, O, C / groups) once. A group is its rows / channels of
those (every GEMM per group). Images are the parts of the C pool (each computed whole by
one part, its scratch malloc'ed there), each part's GEMMs one BLAS thread; the weight
gradient's per-image partials are summed by NumPy in image order. So no result depends on
the thread count.

Why: today's path lays out the (N, C * kh * kw, OH * OW) columns twice per step (forward,
weight gradient: 2 ms each) and adds them back once (col2im, 1.6 ms), beside one batched
GEMM per face of the same multiply-adds as these. Measured 2026-12-02, AMD EPYC (Zen 5,
family 26 model 2; OPENBLAS_CORETYPE=Haswell), conv2d 3x3 of x (8, 64, 32, 32) float32,
w (64, 64, 3, 3), padding 1, forward + backward (`python tools/bench.py ops --threads T
--only conv`, each run a median of 7; 18-19 runs over 20 minutes of a busy shared machine,
so wide ranges): 1 thread median 22.3 ms (19.8-27.9), torch 12.5 (10.7-14.3), ratio median
1.75 (1.60-2.02); 2 threads 13.7 ms (11.4-18.9), torch 8.1 (6.6-13.5), ratio 1.77
(1.03-2.31). The im2col path beside it then: 1 thread 23.9-26.4 ms (1.90-2.13x), 2 threads
16.3-22.3 (1.94-2.30x). At a quiet moment a step took 20.3 ms at 1 thread, 19.8 of it in
these kernels' calls, and those are nearly all GEMM: OpenBLAS's Haswell sgemm
(OPENBLAS_CORETYPE pins it) runs these shapes at ~104 GFLOPS, 6.1 ms of a face's 6.3-6.7.
With OPENBLAS_CORETYPE=SkylakeX (AVX-512 sgemm, ~185 GFLOPS here) the bench ran 16.3 ms at
1 thread (1.37x torch) and 8.5 at 2 (1.28x), one run each, of this file's first version
(two garbage columns a row).

Bits: not the im2col path's (its GEMM sums K = C * kh * kw products at once, these sum C
per tap and add taps), within float rounding of it and of torch. Where the reference's
products are not all finite the garbage columns would matter (0 * inf): the input
gradient falls back when the weight holds an inf or nan, the weight gradient when an input
element it reads does (the kernel reports it, then the im2col path computes); the forward's
garbage is cropped. A sum of zeros may come out +0 where the reference gives -0.

Each function returns None where the im2col path must compute: C kernels off or no
compiler, not OpenBLAS, not float32/float64 in native order, fewer than
c_eager.MIN_ELEMENTS input elements, the shapes below (MIN_OUTPUT, MIN_IMAGES,
ROW_PER_GARBAGE), sizes a 32-bit-int BLAS cannot take, no memory for a part's scratch, or the
non-finite cases above.
"""
import math

import numpy as np

from . import c_eager
from .c_rows import _clones, _load as _rows_load

# Where im2col computes instead (measured 2026-12-02, Zen 5, 3x3, padding 1, float32, the
# three faces together, shifted / im2col time; (N, C = O, H = W)):
# - an output row shorter than ROW_PER_GARBAGE times its garbage columns (multiply-adds
#   im2col does not do);
# - images of fewer than MIN_OUTPUT outputs, where the many small GEMMs lose to im2col's few
#   big ones: at 1 thread (64, 64, 8) 1.15, (32, 256, 8) 1.22, (16, 256, 16) 0.96; at 2
#   threads (3, 128, 16) 1.37, (2, 256, 16) 1.22, (16, 256, 16) 1.09, (8, 128, 16) 1.00;
#   32x32 and up: 2 threads (2, 128, 32) 0.50, (2, 64, 32) 0.72-0.87, (8, 64, 32) 0.78;
# - fewer than MIN_IMAGES images: an image is one part, so one image runs on one thread where
#   im2col's GEMM splits its rows over all (2 threads: (1, 64, 56) 1.27, (1, 128, 32) 1.91).
#   Splitting an image by output channels or taps (a fixed split, so the bits stay the
#   thread count's own) would lift this; not done.
# These depend on the shapes only, never on the thread count: the bits do not either.
MIN_OUTPUT = 512
MIN_IMAGES = 2
ROW_PER_GARBAGE = 8
_gemms = {}   # dtype char -> (the BLAS gemm's address, 64-bit ints) or None

# n = (N, C, H, W, O, kh, kw, Hp, Wp, ph, pw, dh, dw, groups, shared, ilp64, dbl); b = (out, a, b,
# flags (N int64: 1 where an image's input held an inf or nan, 2 where its scratch could not
# be allocated), gemm)
_GEOMETRY = """    const int64_t N = n[0], C = n[1], H = n[2], W = n[3], O = n[4], kh = n[5], kw = n[6];
    const int64_t Hp = n[7], Wp = n[8], ph = n[9], pw = n[10], dh = n[11], dw = n[12], G = n[13];
    const int64_t S = n[14], ilp64 = n[15], dbl = n[16], R = Wp - S;   /* R: the row pitch */
    const int64_t OH = Hp - dh * (kh - 1), OW = Wp - dw * (kw - 1), L = (OH - 1) * R + OW;
    const int64_t P = Hp * R, Q = OH * R, Cg = C / G, Og = O / G, T = kh * kw;
    int64_t *restrict flags = (int64_t *)b[3];
    void *const gemm = b[4];
    const int64_t lo = tt_part_start(N, part, parts, 1), hi = tt_part_start(N, part + 1, parts, 1);
    (void)H; (void)W; (void)ph; (void)pw; (void)Cg; (void)Og; (void)T; (void)L; (void)S;
    if (lo >= hi) return;"""

# the part's two scratch planes, or flags 2 for its images
_SCRATCH = """    {ct} *s1 = malloc(sizeof({ct}) * ({n1})), *s2 = malloc(sizeof({ct}) * ({n2}));
    if (!s1 || !s2) {{
        free(s1); free(s2);
        for (int64_t i = lo; i < hi; i++) flags[i] = 2;
        return;
    }}"""


def _helpers(name, ct):
    """pad (x into xp at (ph, pw), rows R apart, zeros around; rows and columns past a
    negative high pad dropped; whether a copied element is an inf or nan), widen (g's rows R
    wide, zeros after OW) and crop (the plane at (ph, pw) out of a padded one, zeros where
    it was dropped)."""
    return f"""
#include <stdlib.h>
#include <string.h>
static inline int64_t {name}_min(int64_t a, int64_t b) {{ return a < b ? a : b; }}

static int {name}_pad({ct} *restrict xp, const {ct} *restrict x, int64_t C, int64_t H, int64_t W,
                      int64_t Hp, int64_t Wp, int64_t R, int64_t ph, int64_t pw) {{
    const int64_t rows = {name}_min(H, Hp - ph), cols = {name}_min(W, Wp - pw);
    int bad = 0;
    for (int64_t c = 0; c < C; c++)
        for (int64_t r = 0; r < Hp; r++) {{
            {ct} *restrict d = xp + (c * Hp + r) * R;
            const int64_t h = r - ph;
            if (h < 0 || h >= rows) {{ memset(d, 0, sizeof({ct}) * R); continue; }}
            const {ct} *restrict s = x + (c * H + h) * W;
            memset(d, 0, sizeof({ct}) * pw);
            for (int64_t k = 0; k < cols; k++) {{
                const {ct} v = s[k];
                d[pw + k] = v;
                bad |= !(v - v == 0);   /* nan for an inf or a nan */
            }}
            memset(d + pw + cols, 0, sizeof({ct}) * (R - pw - cols));
        }}
    memset(xp + C * Hp * R, 0, sizeof({ct}) * (Wp - R));   /* the last row's shared columns */
    return bad;
}}

static void {name}_widen({ct} *restrict gp, const {ct} *restrict g, int64_t rows, int64_t OW, int64_t R) {{
    for (int64_t r = 0; r < rows; r++) {{
        memcpy(gp + r * R, g + r * OW, sizeof({ct}) * OW);
        memset(gp + r * R + OW, 0, sizeof({ct}) * (R - OW));
    }}
}}

static void {name}_crop({ct} *restrict x, const {ct} *restrict xp, int64_t C, int64_t H, int64_t W,
                        int64_t Hp, int64_t Wp, int64_t R, int64_t ph, int64_t pw) {{
    const int64_t rows = {name}_min(H, Hp - ph), cols = {name}_min(W, Wp - pw);
    for (int64_t c = 0; c < C; c++)
        for (int64_t h = 0; h < H; h++) {{
            {ct} *restrict d = x + (c * H + h) * W;
            if (h >= rows) {{ memset(d, 0, sizeof({ct}) * W); continue; }}
            memcpy(d, xp + (c * Hp + h + ph) * R + pw, sizeof({ct}) * cols);
            memset(d + cols, 0, sizeof({ct}) * (W - cols));
        }}
}}
"""


def _entry(name, ct, body):
    return _helpers(name, ct) + f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
{_GEOMETRY}
{body}
    free(s1); free(s2);
}}
"""


def _forward_source(name, ct):
    """b = y (N, O, OH, OW), x (N, C, H, W), wt (kh, kw, O, C/G): s1 = xp, s2 = y padded."""
    return _entry(name, ct, _SCRATCH.format(ct=ct, n1="C * P + S", n2="O * Q") + f"""
    const {ct} *restrict x = (const {ct} *)b[1], *restrict wt = (const {ct} *)b[2];
    for (int64_t im = lo; im < hi; im++) {{
        {name}_pad(s1, x + im * C * H * W, C, H, W, Hp, Wp, R, ph, pw);
        for (int64_t g = 0; g < G; g++)
            for (int64_t t = 0; t < T; t++)
                tt_blas_gemm(gemm, ilp64, dbl, 111, 111, Og, L, Cg, wt + (t * O + g * Og) * Cg, Cg,
                             s1 + g * Cg * P + (t / kw) * dh * R + (t % kw) * dw, P, t ? 1.0 : 0.0,
                             s2 + g * Og * Q, Q);
        {name}_crop(({ct} *)b[0] + im * O * OH * OW, s2, O, OH, OW, OH, OW, R, 0, 0);
        flags[im] = 0;
    }}""")


def _input_grad_source(name, ct):
    """b = dx (N, C, H, W), g (N, O, OH, OW), wt (kh, kw, O, C/G): s1 = dx padded, s2 = gp.
    Each tap's product is added to dxp in tap order from zeros (BLAS's beta = 1: C + A @ B),
    as col2im adds the columns."""
    return _entry(name, ct, _SCRATCH.format(ct=ct, n1="C * P + S", n2="O * Q") + f"""
    const {ct} *restrict gg = (const {ct} *)b[1], *restrict wt = (const {ct} *)b[2];
    for (int64_t im = lo; im < hi; im++) {{
        {name}_widen(s2, gg + im * O * OH * OW, O * OH, OW, R);
        memset(s1, 0, sizeof({ct}) * (C * P + S));
        for (int64_t g = 0; g < G; g++)
            for (int64_t t = 0; t < T; t++)
                tt_blas_gemm(gemm, ilp64, dbl, 112, 111, Cg, L, Og, wt + (t * O + g * Og) * Cg, Cg,
                             s2 + g * Og * Q, Q, 1.0,
                             s1 + g * Cg * P + (t / kw) * dh * R + (t % kw) * dw, P);
        {name}_crop(({ct} *)b[0] + im * C * H * W, s1, C, H, W, Hp, Wp, R, ph, pw);
        flags[im] = 0;
    }}""")


def _weight_grad_source(name, ct):
    """b = dw (N, kh, kw, O, C/G) per image, x (N, C, H, W), g (N, O, OH, OW): s1 = xp, s2 = gp."""
    return _entry(name, ct, _SCRATCH.format(ct=ct, n1="C * P + S", n2="O * Q") + f"""
    const {ct} *restrict x = (const {ct} *)b[1], *restrict gg = (const {ct} *)b[2];
    for (int64_t im = lo; im < hi; im++) {{
        flags[im] = {name}_pad(s1, x + im * C * H * W, C, H, W, Hp, Wp, R, ph, pw);
        if (flags[im]) continue;   /* 0 * inf in a garbage column: the im2col path computes */
        {name}_widen(s2, gg + im * O * OH * OW, O * OH, OW, R);
        {ct} *restrict dw_ = ({ct} *)b[0] + im * T * O * Cg;
        for (int64_t g = 0; g < G; g++)
            for (int64_t t = 0; t < T; t++)
                tt_blas_gemm(gemm, ilp64, dbl, 111, 112, Og, Cg, L, s2 + g * Og * Q, Q,
                             s1 + g * Cg * P + (t / kw) * dh * R + (t % kw) * dw, P, 0.0,
                             dw_ + (t * O + g * Og) * Cg, Cg);
    }}""")


def _load(kind, char, source_fn):
    """c_rows.py's loader, with blas.h's text before the kernel's."""
    return _rows_load(kind, char, lambda name, ct: c_eager._toolchain[0].blas() + source_fn(name, ct))


def _run(kind, source, out, a, b, geometry):
    """Kernel `kind` into `out` from a, b (C-contiguous): True, or False where it could not
    (the caller then returns None)."""
    N, C, H, W, O, kh, kw, Hp, Wp = geometry[:9]
    tc = c_eager._toolchain[0]
    gemm = _gemms.get(out.dtype.char, False)
    if gemm is False:   # the BLAS's address and int width do not change: asking took 0.07 ms
        gemm = _gemms[out.dtype.char] = tc.gemm(out.dtype)
    if gemm is None:
        return False
    address, ilp64 = gemm
    OH, OW = _out(geometry)
    if not ilp64 and max(Hp * Wp + Wp, C, O) >= 2 ** 31:
        return False   # a 32-bit BLAS cannot take these sizes
    lib = _load(kind, out.dtype.char, source)
    if lib is None:
        return False
    flags = np.empty(N, np.int64)
    tc.call_gemm(lib, [out, a, b, flags], list(geometry) + [int(ilp64), int(out.dtype.char == "d")],
                 address, N * O * C // geometry[13] * kh * kw * OH * OW)
    if flags.any():
        return False
    c_eager.calls[kind] = c_eager.calls.get(kind, 0) + 1
    return True


def _geometry(N, C, spatial, O, kernel, pads, dilation, groups):
    """The kernels' n[:15], or None where the shifted GEMMs do not apply."""
    if len(kernel) != 2 or len(spatial) != 2 or N < max(1, MIN_IMAGES):
        return None
    (H, W), (kh, kw), ((ph, qh), (pw, qw)), (dh, dw) = spatial, kernel, pads, dilation
    Hp, Wp = H + ph + qh, W + pw + qw
    OH, OW = Hp - dh * (kh - 1), Wp - dw * (kw - 1)
    shared = max(0, min(pw, qw, dw * (kw - 1)))
    if OH <= 0 or OW <= 0 or OH * OW < MIN_OUTPUT or OW < ROW_PER_GARBAGE * (dw * (kw - 1) - shared):
        return None
    return [N, C, H, W, O, kh, kw, Hp, Wp, ph, pw, dh, dw, groups, shared]


def _out(geometry):
    """(OH, OW) of a geometry."""
    kh, kw, Hp, Wp, dh, dw = (geometry[i] for i in (5, 6, 7, 8, 11, 12))
    return Hp - dh * (kh - 1), Wp - dw * (kw - 1)


def _taken(size, *arrays):
    """The arrays C-contiguous where the kernels take them: NumPy float32 or float64 arrays
    of one dtype in native order, the face's input or output of `size` elements at least
    c_eager.MIN_ELEMENTS long; else None."""
    a = arrays[0]
    if not c_eager.enabled() or size < c_eager.MIN_ELEMENTS or a.dtype.char not in "fd" \
            or not a.dtype.isnative or any(type(b) is not np.ndarray or b.dtype != a.dtype for b in arrays):
        return None
    return [np.ascontiguousarray(b) for b in arrays]


def _taps(w):
    """w (O, C/G, kh, kw) as (kh, kw, O, C/G): tap t's (O, C/G) matrix contiguous."""
    return np.ascontiguousarray(w.transpose(2, 3, 0, 1))


def forward(x, w, pads, dilation, groups):
    """conv2d(x, w) at stride 1 with pads ((low, high) per dim), (N, O, OH, OW); or None."""
    got = _taken(x.size, x, w)
    geometry = got and _geometry(x.shape[0], x.shape[1], x.shape[2:], w.shape[0], w.shape[2:],
                                 pads, dilation, groups)
    if not geometry:
        return None
    x, w = got
    y = np.empty((x.shape[0], w.shape[0]) + _out(geometry), x.dtype)
    return y if _run("conv_shift_forward", _forward_source, y, x, _taps(w), geometry) else None


def input_grad(g, w, input_size, pads, dilation, groups):
    """The input gradient (N, C, *input_size) of a stride-1 conv2d given g = dL/dy; or None.
    Falls back where w holds an inf or nan (module docstring)."""
    got = _taken(g.shape[0] * w.shape[1] * groups * math.prod(input_size), g, w)
    geometry = got and _geometry(g.shape[0], w.shape[1] * groups, tuple(input_size), w.shape[0],
                                 w.shape[2:], pads, dilation, groups)
    if not geometry or not np.isfinite(w).all() or g.shape[2:] != _out(geometry):
        return None
    g, w = got
    dx = np.empty(tuple(geometry[:2]) + tuple(input_size), g.dtype)
    return dx if _run("conv_shift_input_grad", _input_grad_source, dx, g, _taps(w), geometry) else None


def weight_grad(x, g, kernel_size, pads, dilation, groups):
    """The weight gradient (O, C/G, kh, kw) of a stride-1 conv2d given g = dL/dy; or None.
    Falls back where x holds an inf or nan that a window reads (module docstring)."""
    got = _taken(x.size, x, g)
    geometry = got and _geometry(x.shape[0], x.shape[1], x.shape[2:], g.shape[1], tuple(kernel_size),
                                 pads, dilation, groups)
    if not geometry or g.shape[2:] != _out(geometry):
        return None
    x, g = got
    N, C, O, (kh, kw) = x.shape[0], x.shape[1], g.shape[1], kernel_size
    part = np.empty((N, kh, kw, O, C // groups), x.dtype)
    if not _run("conv_shift_weight_grad", _weight_grad_source, part, x, g, geometry):
        return None
    return np.ascontiguousarray(part.sum(axis=0).transpose(2, 3, 0, 1))
