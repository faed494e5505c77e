"""Training-mode batch norm's forward and backward (ops/batch_norm.py `BatchNormTrain`)
as hand-written C passes on the pool: channels (dim 1 of (N, C, S), S the spatial dims
flattened) split over the parts, each channel whole in one part.

Why: the reference decomposition (mean, x - mu, xc * xc, mean, rsqrt, two multiplies, an
add forward; as many backward, each a single-threaded NumPy sweep with a strided
reduction) reads the input some fifteen times. Here a channel's N rows of S values are
read from memory once per pass direction: its later passes (the centred squares, the
output; the input gradient) find it in cache (a channel of a ResNet layer is 4-64 KiB).

Arithmetic (forward): the channel's sum and then the sum of squares about its mean are
accumulated in double (for float32 too, as torch's CPU kernel accumulates: acc_type<float>
is double): the channel's values row after row in LANES lanes, the lanes added pairwise into
the channel's total each time they have taken FLUSH values (and after the last row); mean =
sum / (N S), var = sum((x - mean)^2) / (N S) (biased), rstd = 1 / sqrt(var + eps), each
rounded once to the input's dtype; then y = (x - mean) * (rstd * w) + b in the input's
dtype (rstd * w rounded once). Backward, from the forward's saved mean and rstd: xhat =
(x - mean) * rstd in the input's dtype, the sums of g and of g * xhat in double as above
(the bias and weight gradients, rounded once), and dx = (rstd * w) * ((g - xhat *
mean(g xhat)) - mean(g)) in the input's dtype.

So the order of additions is fixed by (N, S) alone: the bits do not depend on the thread
count, nor vary run to run. They are not the decomposition's bits (its float32 sums are
float32 pairwise sums, its var is built from the float32 x - mean): the statistics are at
least as accurate as the decomposition's, and every result agrees with the NumPy path
within 8 ulp of the magnitude of the terms it sums (measured at most 5.4, most under 2.3;
tests/tinytensor/test_batch_norm_kernel.py states the bound and checks it, float32 and
float64, with torch float64 as the referee). A float32 channel whose sum overflows float32
but not double gets finite statistics here (as in torch) where the decomposition gives
inf or nan; a nan or inf input gives the decomposition's nan and inf pattern.

Measured 2026-12-02 on the dev VM (AMD EPYC family 26 model 2 = Zen 5, 2 cores, AVX-512;
OPENBLAS_CORETYPE=Haswell), `/work/notes/quiet.sh python tools/bench.py conv --threads T`,
its batch_norm rows (float32 training fwd + bwd with running stats; the VM was loaded by
other work, so torch's own times moved 0.8-2.5 ms between runs), tinytensor / torch ms:
    N=8 C=64 32x32  T=1: before 3.9 / 2.7 (1.49x)  after 1.3 / 1.9, 1.6 / 1.9 (0.69-0.81x)
                    T=2: before 3.0 / 2.0 (1.52x)  after 1.9 / 2.5, 1.2 / 1.8 (0.64-0.74x)
    N=32 C=256 8x8  T=1: before 3.4 / 1.9 (1.75x)  after 2.3 / 2.2, 2.0 / 2.3 (0.89-1.01x)
                    T=2: before 3.8 / 1.6 (2.33x)  after 1.8 / 1.9, 0.9 / 0.8 (0.95-1.19x)
The kernels alone (8, 64, 32, 32) float32: forward 0.10-0.15 ms, backward 0.11-0.14 ms; a
ResNet-18 training step (N=8 3x64x64 float32, 2 threads, fused vs reference batch norm
alternating in one process): median 206-213 vs 222-235 ms, fastest 150-166 vs 165-177 ms.
"""
import numpy as np

from . import c_eager
from .c_rows import _call, _clones, _load

LANES = 32      # a channel's sums in this many double lanes (four 64-byte vectors: 1.2-1.4x
                # faster than 16 on Zen 5, an add's latency hidden)
FLUSH = 1024    # values the lanes take before they are added into the channel's total
MIN_S = 4       # shortest spatial run taken: below it a channel's rows are slivers of
                # cache lines strided by C (BatchNorm1d's (N, C)), left to the decomposition


def _pairwise(terms):
    """C of the sum of `terms` (a power of two of them) added pairwise, neighbours first."""
    while len(terms) > 1:
        terms = [f"({a} + {b})" for a, b in zip(terms[::2], terms[1::2])]
    return terms[0]


def _channel_sums(rows, sums):
    """C statements adding, for each (expr, name) of `sums`, expr(j) (a C expression in
    double of the row index j) over the channel's N rows of S values into the double
    `name`: LANES lanes kept across rows, added pairwise into `name` whenever they have taken
    FLUSH values or more (and after the last row). `rows`: C declaring the row pointers of
    row i. The order depends on (N, S) alone."""
    decl = " ".join(f"double l{k}[{LANES}] = {{0}};" for k in range(len(sums)))
    body = " ".join(f"l{k}[k] += {e('jj')};" for k, (e, _) in enumerate(sums))
    tail = " ".join(f"l{k}[j & {LANES - 1}] += {e('j')};" for k, (e, _) in enumerate(sums))
    flush = ""
    for k, (_, name) in enumerate(sums):
        flush += (f"{name} += {_pairwise([f'l{k}[{i}]' for i in range(LANES)])}; "
                  f"for (int k = 0; k < {LANES}; k++) l{k}[k] = 0;\n                ")
    return f"""{{
            {decl}
            int64_t since = 0;
            for (int64_t i = 0; i < N; i++) {{
                {rows}
                int64_t j = 0;
                for (; j + {LANES} <= S; j += {LANES})
                    for (int k = 0; k < {LANES}; k++) {{ const int64_t jj = j + k; {body} }}
                for (; j < S; j++) {{ {tail} }}
                since += S;
                if (since < {FLUSH} && i + 1 < N) continue;
                since = 0;
                {flush}
            }}
        }}"""


def _forward_source(name, ct):
    """n = (N, C, S, has weight, has bias); b = y (N, C, S), mean, var, rstd (C), x (N, C,
    S), weight, bias (C; unread without one), eps (one double)."""
    row = f"const {ct} *restrict r = x + (i * C + c) * S;"
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict y = ({ct} *)b[0];
    {ct} *restrict mean = ({ct} *)b[1];
    {ct} *restrict var = ({ct} *)b[2];
    {ct} *restrict rstd = ({ct} *)b[3];
    const {ct} *restrict x = (const {ct} *)b[4];
    const {ct} *restrict w = (const {ct} *)b[5];
    const {ct} *restrict bias = (const {ct} *)b[6];
    const double eps = *(const double *)b[7];
    const int64_t N = n[0], C = n[1], S = n[2], has_w = n[3], has_b = n[4];
    const double count = (double)N * (double)S;
    const int64_t lo = tt_part_start(C, part, parts, 1), hi = tt_part_start(C, part + 1, parts, 1);
    for (int64_t c = lo; c < hi; c++) {{
        double s = 0, q = 0;
        {_channel_sums(row, [(lambda j: f"(double)r[{j}]", "s")])}
        const double md = s / count;
        {_channel_sums(row, [(lambda j: f"((double)r[{j}] - md) * ((double)r[{j}] - md)", "q")])}
        const double vd = q / count, rd = 1.0 / sqrt(vd + eps);
        const {ct} m = ({ct})md, k = ({ct})(has_w ? rd * (double)w[c] : rd);
        mean[c] = m;
        var[c] = ({ct})vd;
        rstd[c] = ({ct})rd;
        for (int64_t i = 0; i < N; i++) {{
            const {ct} *restrict r = x + (i * C + c) * S;
            {ct} *restrict o = y + (i * C + c) * S;
            if (has_b) {{
                const {ct} sh = bias[c];
                for (int64_t j = 0; j < S; j++) o[j] = (r[j] - m) * k + sh;
            }} else {{   /* no + 0: the decomposition's -0.0 stays */
                for (int64_t j = 0; j < S; j++) o[j] = (r[j] - m) * k;
            }}
        }}
    }}
}}
"""


def _backward_source(name, ct):
    """n = (N, C, S, has weight); b = dx (N, C, S), sum of g * xhat, sum of g (C), x, g
    (N, C, S), weight (C; unread without one), mean, rstd (C)."""
    rows = f"const {ct} *restrict r = x + (i * C + c) * S; const {ct} *restrict gr = g + (i * C + c) * S;"
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict dx = ({ct} *)b[0];
    {ct} *restrict dw = ({ct} *)b[1];
    {ct} *restrict db = ({ct} *)b[2];
    const {ct} *restrict x = (const {ct} *)b[3];
    const {ct} *restrict g = (const {ct} *)b[4];
    const {ct} *restrict w = (const {ct} *)b[5];
    const {ct} *restrict mean = (const {ct} *)b[6];
    const {ct} *restrict rstd = (const {ct} *)b[7];
    const int64_t N = n[0], C = n[1], S = n[2], has_w = n[3];
    const double count = (double)N * (double)S;
    const int64_t lo = tt_part_start(C, part, parts, 1), hi = tt_part_start(C, part + 1, parts, 1);
    for (int64_t c = lo; c < hi; c++) {{
        const {ct} m = mean[c], s = rstd[c];
        double sg = 0, sgx = 0;
        {_channel_sums(rows, [(lambda j: f"(double)gr[{j}]", "sg"),
                              (lambda j: f"(double)gr[{j}] * (double)((r[{j}] - m) * s)", "sgx")])}
        dw[c] = ({ct})sgx;
        db[c] = ({ct})sg;
        const {ct} a = ({ct})(sgx / count), cm = ({ct})(sg / count);
        const {ct} k = ({ct})(has_w ? (double)s * (double)w[c] : (double)s);
        for (int64_t i = 0; i < N; i++) {{
            const {ct} *restrict r = x + (i * C + c) * S;
            const {ct} *restrict gr = g + (i * C + c) * S;
            {ct} *restrict o = dx + (i * C + c) * S;
            for (int64_t j = 0; j < S; j++) o[j] = k * ((gr[j] - ((r[j] - m) * s) * a) - cm);
        }}
    }}
}}
"""


def usable(x, *params, any_size=False):
    """Whether x (N, C, *spatial) and its parameters suit the kernels (module docstring):
    `forward` runs C on them (the op is chosen on it, so that the fused op runs only where
    its kernels do). any_size: their dtypes and rank only (a capture's choice, whatever the
    size and layout of the call at hand)."""
    if not c_eager.enabled() or x.ndim < 3:
        return False
    if any_size:
        return x.dtype.char in "fd" and x.dtype.isnative and all(
            type(p) is np.ndarray and p.dtype == x.dtype for p in params)
    if not c_eager.takes(x, *params):
        return False
    return x.size // (x.shape[0] * x.shape[1]) >= MIN_S


def forward(x, w, b, eps):
    """(y, mean, biased var, rstd) of x (N, C, *spatial) per channel, or None (the caller
    computes them)."""
    params = [p for p in (w, b) if p is not None]
    if not usable(x, *params) or any(p.shape != (x.shape[1],) for p in params):
        return None
    lib = _load("batch_norm_fwd", x.dtype.char, _forward_source)
    if lib is None:
        return None
    N, C = x.shape[:2]
    y = np.empty(x.shape, x.dtype)
    mean, var, rstd = (np.empty(C, x.dtype) for _ in range(3))
    _call(lib, [y, mean, var, rstd, x, w if w is not None else x, b if b is not None else x,
                np.array([eps], np.float64)],
          [N, C, x.size // (N * C), int(w is not None), int(b is not None)], x.size, "batch_norm_forward")
    return y, mean, var, rstd


def backward(g, x, w, mean, rstd):
    """(dx, sum of g * xhat, sum of g) per channel from the forward's saved mean and rstd,
    or None (the caller computes them)."""
    params = [w] if w is not None else []
    if type(g) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape and not g.flags.c_contiguous:
        g = np.ascontiguousarray(g)   # a .sum() loss's broadcast gradient: laid out, not refused
    if not usable(x, g, *params, mean, rstd) or g.shape != x.shape:
        return None
    C = x.shape[1]
    if any(p.shape != (C,) for p in (*params, mean, rstd)):
        return None
    lib = _load("batch_norm_bwd", x.dtype.char, _backward_source)
    if lib is None:
        return None
    dx = np.empty(x.shape, x.dtype)
    dw, db = np.empty(C, x.dtype), np.empty(C, x.dtype)
    _call(lib, [dx, dw, db, x, g, w if w is not None else x, mean, rstd],
          [x.shape[0], C, x.size // (x.shape[0] * C), int(w is not None)], x.size, "batch_norm_backward")
    return dx, dw, db
