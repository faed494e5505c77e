"""Eager C kernels the compiler cannot generate from a decomposition yet: the exact GELU and
erf (until the codegen emits erf: their math is tt_math.h's `tt_erf*`/`tt_gelu_erf*`, the
functions it will emit) and top-k over the last dim (a selection, no IR op).

Same machinery as kernels/c_eager.py: the same flags, header and private disk cache
(codegen/c.py FLAGS, compiler/cache_disk.py), the `name_part(b, n, part, parts)` entry the
C pool (codegen/c_pool.py) splits over threads, each part a range of elements or rows, so
results do not depend on the thread count; the same switch (`c_eager.enabled`) and the
same fallback to NumPy. Each function returns None where NumPy must compute.
"""
import threading

import numpy as np

from . import c_eager

TOPK_MAX = 64   # a row's k best kept by insertion: O(n k) at worst, for the small k of top-k
_libs = {}      # (kind, dtype char) -> (whole, part address) or None
_lock = threading.Lock()
_CT = {"f": "float", "d": "double"}


def _elementwise_source(name, ct, n_in, outs, let=""):
    """C of an elementwise kernel over n[0] elements: outputs p0, p1, ... = outs (C
    expressions of the inputs x1, x2, ... and of what `let` binds), inputs after them."""
    n_out = len(outs)
    params = ", ".join([f"{ct} *restrict p{k}" for k in range(n_out)]
                       + [f"const {ct} *restrict p{n_out + k}" for k in range(n_in)])
    loads = " ".join(f"const {ct} x{k + 1} = p{n_out + k}[j];" for k in range(n_in))
    stores = " ".join(f"p{k}[j] = {e};" for k, e in enumerate(outs))
    args = ", ".join([f"({ct} *)b[{k}]" for k in range(n_out)]
                     + [f"(const {ct} *)b[{n_out + k}]" for k in range(n_in)])
    return f"""
static inline __attribute__((always_inline)) void {name}_body({params}, const int64_t s0, int64_t part, int64_t parts) {{
    const int64_t lo = tt_part_start(s0, part, parts, 16), hi = tt_part_start(s0, part + 1, parts, 16);
    for (int64_t j = lo; j < hi; j++) {{ {loads} {let} {stores} }}
}}
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {name}_body({args}, n[0], part, parts);
}}
"""


def _topk_source(name, ct, largest):
    """C of top-k over rows: n = (rows, row length, k); writes k int64 indices per row, in
    the order of torch.topk (and of ops/sorting.py's stable argsort): best first, ties in
    index order, nan the largest value (first for largest=True, last for largest=False)."""
    cmp = ">" if largest else "<"
    nan_first = "1" if largest else "0"
    return f"""
/* whether a (at index ia) comes before b (at ib): nan largest, ties by index */
static inline int {name}_before({ct} a, int64_t ia, {ct} b, int64_t ib) {{
    if (a != a) return b != b ? ia < ib : {nan_first};
    if (b != b) return !{nan_first};
    return a {cmp} b || (a == b && ia < ib);
}}
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    int64_t *restrict out = (int64_t *)b[0];
    const {ct} *restrict x = (const {ct} *)b[1];
    const int64_t rows = n[0], len = n[1], k = n[2];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
    {ct} val[{TOPK_MAX}];
    for (int64_t r = lo; r < hi; r++) {{
        const {ct} *row = x + r * len;
        int64_t *idx = out + r * k;
        int64_t m = 0;   /* kept so far, best first */
        for (int64_t j = 0; j < len; j++) {{
            const {ct} v = row[j];
            if (m == k && !{name}_before(v, j, val[m - 1], idx[m - 1])) continue;
            int64_t p = m < k ? m++ : k - 1;   /* the place freed at the end */
            while (p > 0 && {name}_before(v, j, val[p - 1], idx[p - 1])) {{
                val[p] = val[p - 1]; idx[p] = idx[p - 1]; p--;
            }}
            val[p] = v; idx[p] = j;
        }}
    }}
}}
"""


def _cumsum_source(name, ct, reverse):
    """C of a running sum along rows: n = (rows, row length); out[r, j] = x[r, 0] + ... +
    x[r, j] added left to right as NumPy's cumsum does (reverse: x[r, j] + ... + x[r, len-1]
    added right to left, flip-cumsum-flip's order: cumsum's backward). Eight rows at a time,
    so eight independent additions are in flight instead of one chain."""
    first, step, cond = ("len - 1", "j--", "j >= 0") if reverse else ("0", "j++", "j < len")
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict out = ({ct} *)b[0];
    const {ct} *restrict x = (const {ct} *)b[1];
    const int64_t rows = n[0], len = n[1];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
    int64_t r = lo;
    for (; r + 8 <= hi; r += 8) {{
        {ct} acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
        for (int64_t j = {first}; {cond}; {step})
            for (int k = 0; k < 8; k++) {{
                acc[k] = j == {first} ? x[(r + k) * len + j] : acc[k] + x[(r + k) * len + j];
                out[(r + k) * len + j] = acc[k];
            }}
    }}
    for (; r < hi; r++) {{
        {ct} acc = 0;
        for (int64_t j = {first}; {cond}; {step}) {{
            acc = j == {first} ? x[r * len + j] : acc + x[r * len + j];
            out[r * len + j] = acc;
        }}
    }}
}}
"""


def _gather_source(name, ct, scatter):
    """C of gather along the last dim, n = (rows, row length of x, of index): out[r, j] =
    x[r, index[r, j]]; or (scatter) scatter-add: out[r, index[r, j]] += src[r, j] over j in
    order, as NumPy's add.at adds (out holds x already). Indices are in range: the ops'
    wrappers check them (ops/indexing.py `index_in_range`)."""
    body = ("o[ix[j]] = o[ix[j]] + v[j];" if scatter else "o[j] = v[ix[j]];")
    o_len, v_len = ("s", "l") if scatter else ("l", "s")
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    const int64_t rows = n[0], s = n[1], l = n[2];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
    for (int64_t r = lo; r < hi; r++) {{
        {ct} *restrict o = ({ct} *)b[0] + r * {o_len};
        const {ct} *restrict v = (const {ct} *)b[1] + r * {v_len};
        const int64_t *restrict ix = (const int64_t *)b[2] + r * l;
        for (int64_t j = 0; j < l; j++) {body}
    }}
}}
"""


def _max_pool2d_source(name, ct):
    it = "int32_t" if ct == "float" else "int64_t"   # a value's bits, for the masked select
    return _max_pool2d_text(name, ct, it)


def _max_pool2d_text(name, ct, it):
    """C of max pooling's winners over planes (N*C, H, W): n = (planes, H, W, OH, OW, kh, kw,
    sh, sw, ph, pw, dh, dw) with ph, pw the low-side padding; out[p, i, j] = h * W + w of
    the window's first largest real element, a nan winning (NumPy's argmax over the window
    padded with the lowest value, as ops/pooling.py `MaxPoolIndex` computes it: padding
    never wins, a window of lowest values names its first real element)."""
    return f"""
#include <string.h>
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    int64_t *restrict out = (int64_t *)b[0];
    const {ct} *restrict x = (const {ct} *)b[1];
    const int64_t planes = n[0], H = n[1], W = n[2], OH = n[3], OW = n[4], kh = n[5], kw = n[6];
    const int64_t sh = n[7], sw = n[8], ph = n[9], pw = n[10], dh = n[11], dw = n[12];
    const int64_t lo = tt_part_start(planes, part, parts, 1), hi = tt_part_start(planes, part + 1, parts, 1);
    /* every window inside the plane (no low padding, the last window's far edge in it, a
       row of outputs fits the buffers): no bounds checks, and a row of outputs at a time,
       each window element in turn across the row, so the windows' compare chains run side
       by side (vectorised) instead of one after another; the winner by masks, since GCC
       makes a branch of `take ? v : bv`, which random data mispredicts half the time.
       The same order of comparisons per window as the loop below. */
    const int inside = ph == 0 && pw == 0 && OW <= 1024 && (OH - 1) * sh + (kh - 1) * dh < H
                       && (OW - 1) * sw + (kw - 1) * dw < W;
    for (int64_t p = lo; p < hi && inside; p++) {{
        const {ct} *restrict plane = x + p * H * W;
        int64_t *restrict o = out + p * OH * OW;
        {it} bb[1024];
        int64_t best[1024];
        for (int64_t i = 0; i < OH; i++) {{
            const int64_t top = i * sh * W;
            for (int64_t j = 0; j < OW; j++) {{
                {ct} v = plane[top + j * sw];
                memcpy(&bb[j], &v, sizeof v);
                best[j] = top + j * sw;
            }}
            for (int64_t a = 0; a < kh; a++)
                for (int64_t c = 0; c < kw; c++) {{
                    if (a == 0 && c == 0) continue;
                    const int64_t off = top + a * dh * W + c * dw;
                    for (int64_t j = 0; j < OW; j++) {{
                        const int64_t at = off + j * sw;
                        const {ct} v = plane[at];
                        {ct} bv;
                        memcpy(&bv, &bb[j], sizeof bv);
                        {it} vb;
                        memcpy(&vb, &v, sizeof v);
                        const {it} take = -({it})((bv == bv) & ((v > bv) | (v != v)));
                        best[j] = (at & (int64_t)take) | (best[j] & ~(int64_t)take);
                        bb[j] = (vb & take) | (bb[j] & ~take);
                    }}
                }}
            for (int64_t j = 0; j < OW; j++) o[i * OW + j] = best[j];
        }}
    }}
    for (int64_t p = lo; p < hi && !inside; p++) {{
        const {ct} *restrict plane = x + p * H * W;
        int64_t *restrict o = out + p * OH * OW;
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {{
                int64_t best = -1;
                {ct} bv = 0;
                for (int64_t a = 0; a < kh; a++) {{
                    const int64_t h = i * sh - ph + a * dh;
                    if (h < 0 || h >= H) continue;
                    for (int64_t c = 0; c < kw; c++) {{
                        const int64_t w = j * sw - pw + c * dw;
                        if (w < 0 || w >= W) continue;
                        const {ct} v = plane[h * W + w];
                        if (best < 0 || (bv == bv && (v > bv || v != v))) {{ best = h * W + w; bv = v; }}
                    }}
                }}
                o[i * OW + j] = best;
            }}
    }}
}}
"""


def _flash_source(name, ct, backward):
    """C of flash attention's per-block softmax step on the CPU (ops/attention.py), rows of
    scores s (rows, n) in place; n = (rows, n, rows per head block lq, first query i0, first
    key j0, causal). A key after its query (causal, top-left aligned) is masked.
    Forward (buffers s, m, l, corr, per row m and l updated): m' = max(m, max s), c =
    exp(m - m') (m' = -inf counts as 0), s = exp(s - m'), l = l c + sum s.
    Backward (buffers s, m, logl): s = exp((s - m) - logl), the probabilities."""
    sfx = "f" if ct == "float" else ""
    head = f"""{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict s = ({ct} *)b[0];
    const int64_t rows = n[0], len = n[1], lq = n[2], i0 = n[3], j0 = n[4], causal = n[5];
    const int64_t lo = tt_part_start(rows, part, parts, 1), hi = tt_part_start(rows, part + 1, parts, 1);
"""
    if backward:
        return head + f"""    const {ct} *restrict m = (const {ct} *)b[1], *restrict logl = (const {ct} *)b[2];
    for (int64_t r = lo; r < hi; r++) {{
        {ct} *restrict row = s + r * len;
        const int64_t i = i0 + r % lq;
        int64_t end = causal ? i - j0 + 1 : len;
        end = end < 0 ? 0 : (end > len ? len : end);
        const {ct} mr = m[r], lr = logl[r];
        for (int64_t j = 0; j < end; j++) row[j] = tt_exp{sfx}((row[j] - mr) - lr);
        for (int64_t j = end; j < len; j++) row[j] = 0;
    }}
}}
"""
    return head + f"""    {ct} *restrict m = ({ct} *)b[1], *restrict l = ({ct} *)b[2], *restrict corr = ({ct} *)b[3];
    for (int64_t r = lo; r < hi; r++) {{
        {ct} *restrict row = s + r * len;
        const int64_t i = i0 + r % lq;
        int64_t end = causal ? i - j0 + 1 : len;
        end = end < 0 ? 0 : (end > len ? len : end);
        {ct} mx = -INFINITY;
        for (int64_t j = 0; j < end; j++) mx = (row[j] > mx || row[j] != row[j]) ? row[j] : mx;
        const {ct} old = m[r];
        const {ct} mn = (old > mx || old != old) ? old : mx;     /* np.maximum: nan wins */
        const {ct} safe = mn == -INFINITY ? 0 : mn;
        const {ct} c = tt_exp{sfx}(old - safe);
        for (int64_t j = 0; j < end; j++) row[j] = tt_exp{sfx}(row[j] - safe);
        for (int64_t j = end; j < len; j++) row[j] = 0;
        {ct} acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
        int64_t j = 0;
        for (; j + 8 <= end; j += 8)
            for (int k = 0; k < 8; k++) acc[k] += row[j + k];
        {ct} sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; j < end; j++) sum += row[j];
        l[r] = l[r] * c + sum;
        corr[r] = c;
        m[r] = mn;
    }}
}}
"""


def flash_block(s, m, l, i0, j0, causal):
    """Flash attention's forward step on a block of scores s (..., lq, n), in place: the
    probabilities (unnormalised), m and l updated; returns the per-row rescale factor of the
    old output, or None (NumPy does the step)."""
    if not c_eager.enabled() or not c_eager.takes(s, m, l) or s.ndim < 2:
        return None
    lib = _load("flash_fwd", s.dtype.char, lambda name, ct: _flash_source(name, ct, False))
    if lib is None:
        return None
    corr = np.empty(m.shape, m.dtype)
    rows = s.size // s.shape[-1]
    _call(lib, [s, m, l, corr], [rows, s.shape[-1], s.shape[-2], i0, j0, int(causal)], s.size, "flash_fwd")
    return corr


def flash_probs(s, m, logl, i0, j0, causal):
    """Flash attention's backward probabilities exp((s - m) - log l) of a block of scores,
    in place (masked keys 0); False where NumPy must compute them."""
    if not c_eager.enabled() or not c_eager.takes(s, m, logl) or s.ndim < 2:
        return False
    lib = _load("flash_bwd", s.dtype.char, lambda name, ct: _flash_source(name, ct, True))
    if lib is None:
        return False
    rows = s.size // s.shape[-1]
    _call(lib, [s, m, logl], [rows, s.shape[-1], s.shape[-2], i0, j0, int(causal)], s.size, "flash_bwd")
    return True


def _clones():
    return c_eager._toolchain[0].clones()


SUFFIX = {"float": "f", "double": ""}   # tt_math.h's name suffix per C type (tt_expf, tt_exp)


def vector_types(name, ct):
    """C typedefs of 32-byte vectors of `ct` and of same-width ints (`name`_v, `name`_i) and
    their lane count `name`_L: the hand-written row kernels' (c_softmax, c_cross_entropy)."""
    lanes, it = (8, "int32_t") if ct == "float" else (4, "int64_t")
    return (f"typedef {ct} {name}_v __attribute__((vector_size(32)));\n"
            f"typedef {it} {name}_i __attribute__((vector_size(32)));\n"
            f"#define {name}_L {lanes}\n")


def _load(kind, char, source_fn):
    key = (kind, char)
    got = _libs.get(key, False)
    if got is not False:
        return got
    with _lock:
        got = _libs.get(key, False)
        if got is False:
            name = f"tt_eager_{kind}_{char}"
            got = _libs[key] = c_eager._toolchain[0].compile_part(name, source_fn(name, _CT[char]))
    return got


def _call(lib, arrays, sizes, work, name):
    """Run a loaded kernel on `arrays` (outputs first) with sizes `sizes`: split over the
    pool's threads when `work` (elements) is big."""
    c_eager.calls[name] = c_eager.calls.get(name, 0) + 1
    c_eager._toolchain[0].call(lib, arrays, sizes, work)


# kind -> (inputs, {C type: (C binding, output expressions)}): the functions the codegen
# emits for the exact GELU, its slope and erf, so compiled and eager agree. The exact
# GELU's forward, when a backward is to come, also returns its slope, which the backward
# multiplies by g: one sweep computes both from one cdf and one exp(-x*x/2) (the two
# functions' identical steps, inlined side by side, are computed once). The slope is
# tt_gelu_erf_slope_cdf[f] of that cdf, as a compiled step computes it afresh: the same bits.
_KINDS = {
    "gelu_erf": (1, {"float": ("", ("tt_gelu_erff(x1)",)), "double": ("", ("tt_gelu_erf(x1)",))}),
    "gelu_erf_slope": (1, {"float": ("const double c = tt_gelu_cdf32((double)x1);",
                                     ("tt_gelu_erf_cdff(x1, c)", "tt_gelu_erf_slope_cdff(x1, c)")),
                           "double": ("const double c = tt_gelu_cdf(x1);",
                                      ("tt_gelu_erf_cdf(x1, c)", "tt_gelu_erf_slope_cdf(x1, c)"))}),
    "gelu_erf_backward": (2, {"float": ("", ("x2 * tt_gelu_erf_slopef(x1)",)),
                              "double": ("", ("x2 * tt_gelu_erf_slope(x1)",))}),
    "erf": (1, {"float": ("", ("tt_erff(x1)",)), "double": ("", ("tt_erf(x1)",))}),
}


def elementwise(kind, *arrays):
    """A kernel of _KINDS on arrays of one shape: the exact GELU ("gelu_erf"; "gelu_erf_slope":
    and its slope), its backward g * slope ("gelu_erf_backward" on (x, g)) or erf: the result
    (a tuple where there are several), or None."""
    a = arrays[0]
    if not c_eager.enabled() or not c_eager.takes(*arrays) or any(b.shape != a.shape for b in arrays):
        return None
    n_in, forms = _KINDS[kind]

    def source(name, ct):
        let, outs = forms[ct]
        return _elementwise_source(name, ct, n_in, outs, let)
    lib = _load(kind, a.dtype.char, source)
    if lib is None:
        return None
    outs = [np.empty(a.shape, a.dtype) for _ in forms["float"][1]]
    _call(lib, [*outs, *arrays], [a.size], a.size, kind)
    return outs[0] if len(outs) == 1 else tuple(outs)


def topk_indices(x, k, largest):
    """(rows..., k) int64 indices of the k best of each last-dim row of x, or None."""
    if not (0 < k <= TOPK_MAX) or x.ndim == 0 or not c_eager.enabled() or not c_eager.takes(x):
        return None
    lib = _load("topk_max" if largest else "topk_min", x.dtype.char,
                lambda name, ct: _topk_source(name, ct, largest))
    if lib is None:
        return None
    n = x.shape[-1]
    rows = x.size // n
    out = np.empty(x.shape[:-1] + (k,), np.int64)
    _call(lib, [out, x], [rows, n, k], x.size, "topk")
    return out


def cumsum_last(x, reverse=False):
    """The running sum of x along its last dim (reverse: from the end, cumsum's backward),
    in NumPy's order of additions, or None (NumPy computes it)."""
    if x.ndim == 0 or x.shape[-1] == 0 or not c_eager.enabled() or not c_eager.takes(x):
        return None
    kind = "cumsum_rev" if reverse else "cumsum"
    lib = _load(kind, x.dtype.char, lambda name, ct: _cumsum_source(name, ct, reverse))
    if lib is None:
        return None
    out = np.empty(x.shape, x.dtype)
    _call(lib, [out, x], [x.size // x.shape[-1], x.shape[-1]], x.size, kind)
    return out


def _int64_rows(*arrays):
    return all(type(a) is np.ndarray and a.dtype == np.int64 and a.flags.c_contiguous for a in arrays)


def gather_last(x, index):
    """x[..., index] along the last dim row by row (gather with dim = -1, index of x's
    leading shape), or None."""
    if x.ndim == 0 or x.shape[:-1] != index.shape[:-1] or not c_eager.enabled() \
            or not c_eager.takes(x) or not _int64_rows(index) or index.size < c_eager.MIN_ELEMENTS:
        return None
    lib = _load("gather", x.dtype.char, lambda name, ct: _gather_source(name, ct, False))
    if lib is None:
        return None
    out = np.empty(index.shape, x.dtype)
    _call(lib, [out, x, index], [index.size // max(index.shape[-1], 1), x.shape[-1], index.shape[-1]],
          index.size, "gather")
    return out


def scatter_add_last(out, index, src):
    """out[..., index] += src along the last dim, in place, in NumPy's add.at order (out,
    index and src of one leading shape; src the index's shape); False where NumPy must."""
    if out.ndim == 0 or out.shape[:-1] != index.shape[:-1] or src.shape != index.shape \
            or not c_eager.enabled() or not c_eager.takes(out, src) or not _int64_rows(index) \
            or index.size < c_eager.MIN_ELEMENTS:
        return False
    lib = _load("scatter_add", out.dtype.char, lambda name, ct: _gather_source(name, ct, True))
    if lib is None:
        return False
    _call(lib, [out, src, index], [index.size // max(index.shape[-1], 1), out.shape[-1], index.shape[-1]],
          index.size, "scatter_add")
    return True


def max_pool2d_index(x, kernel, stride, dilation, low_pads, out_size):
    """Max pooling's winners of x (N, C, H, W) as flat h * W + w indices (N, C, OH, OW), or
    None."""
    if x.ndim != 4 or not c_eager.enabled() or not c_eager.takes(x):
        return None
    lib = _load("max_pool2d", x.dtype.char, _max_pool2d_source)
    if lib is None:
        return None
    N, C, H, W = x.shape
    out = np.empty((N, C) + tuple(out_size), np.int64)
    _call(lib, [out, x], [N * C, H, W, *out_size, *kernel, *stride, *low_pads, *dilation],
          x.size, "max_pool2d")
    return out
