"""Adam's and AdamW's step on one parameter in one C loop (kernels/c_rows.py's machinery:
the same flags, header, disk cache and pool; `c_eager.enabled()` the same switch).

Why: nn/optim.py's NumPy update is a dozen array operations per parameter, each a pass over
memory and a temporary; nanoGPT's step (53 parameters, 0.8M entries) took 5.5 ms against
torch's 3.5 ms on the 2-core dev machine. One pass per parameter updates p, m and v in place.

The same operations in the same order and precision as the NumPy code (each Python float
rounded to the parameter's dtype first, as NumPy does with a scalar; no contraction into
fused multiply-adds, the flags' -ffp-contract=off; sqrt and division correctly rounded in
both), so the results are bitwise the NumPy path's: the tests hold them so.

`adam(...)` returns False where NumPy must compute: no C compiler, amsgrad or maximize
(left to NumPy), not float32/float64 NumPy arrays of one dtype and shape, a parameter or
state that is not C-contiguous.
"""
import numpy as np

from . import c_eager, c_rows

# scalars: decay (1 - lr wd, decoupled), wd (L2), 1 - beta1, beta2, 1 - beta2, step_size,
# bias_correction2_sqrt, eps
_SCALARS = 8


def _source(name, ct):
    """buffers p, m, v (updated in place), g, scalars; n = (elements, decoupled, l2)."""
    return f"""
{c_rows._clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict p = ({ct} *)b[0], *restrict m = ({ct} *)b[1], *restrict v = ({ct} *)b[2];
    const {ct} *restrict g = (const {ct} *)b[3], *restrict c = (const {ct} *)b[4];
    const {ct} decay = c[0], wd = c[1], a1 = c[2], b2 = c[3], a2 = c[4], step = c[5], bc2 = c[6], eps = c[7];
    const int64_t decoupled = n[1], l2 = n[2];
    const int64_t lo = tt_part_start(n[0], part, parts, 16), hi = tt_part_start(n[0], part + 1, parts, 16);
    for (int64_t i = lo; i < hi; i++) {{
        {ct} pi = p[i], gi = g[i];
        if (decoupled) pi = pi * decay;
        if (l2) gi = gi + wd * pi;
        const {ct} mi = m[i] + a1 * (gi - m[i]);
        const {ct} vi = v[i] * b2 + a2 * (gi * gi);
        const {ct} denom = {"sqrtf" if ct == "float" else "sqrt"}(vi) / bc2 + eps;   /* sqrtf: float, never double */
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * (mi / denom);
    }}
}}
"""


def adam(p, g, m, v, *, lr, betas, eps, wd, decoupled, step, amsgrad=False, maximize=False):
    """One Adam(W) step of parameter array p with gradient g and moments m, v (p, m, v
    updated in place; `step` already counted); False where NumPy must do it."""
    if amsgrad or maximize or not c_eager.enabled():
        return False
    arrays = (p, m, v)
    if any(type(a) is not np.ndarray or a.dtype != p.dtype or a.shape != p.shape
           or not a.flags.c_contiguous or not a.flags.writeable for a in arrays):
        return False
    if p.dtype.char not in "fd" or type(g) is not np.ndarray or g.dtype != p.dtype or g.shape != p.shape:
        return False
    lib = c_rows._load("adam", p.dtype.char, _source)
    if lib is None:
        return False
    beta1, beta2 = betas
    scalars = np.array([1.0 - lr * wd, wd, 1.0 - beta1, beta2, 1.0 - beta2,
                        lr / (1.0 - beta1 ** step), (1.0 - beta2 ** step) ** 0.5, eps], p.dtype)
    c_rows._call(lib, [p, m, v, np.ascontiguousarray(g), scalars],
                 [p.size, int(bool(wd) and decoupled), int(bool(wd) and not decoupled)], p.size, "adam")
    return True
