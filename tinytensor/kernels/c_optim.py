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
(left to NumPy), not float32/float64 NumPy arrays of one dtype, shape and native byte order,
a parameter or state that is not C-contiguous, a gradient sharing memory with p, m or v
other than being p's own array (the NumPy step's in-place updates then change what it reads
next; g = p itself, as `w.grad = w.detach()` gives, is computed here as NumPy does: decayed),
or a hyperparameter NumPy does not round to the parameter's dtype (NEP 50: an np.float64 lr
on float32 parameters makes the NumPy step compute in float64 and round once, where this
kernel computes in float32).
"""
import numpy as np

from . import c_eager, c_rows

# scalars: decay (1 - lr wd, decoupled), wd (L2), 1 - beta1, beta2, 1 - beta2, step_size,
# bias_correction2_sqrt, eps
_SCALARS = 8


def _source(name, ct):
    """buffers p, m, v (updated in place), g, scalars; n = (elements, decoupled, l2, same):
    same = 1 where g is p's own array, never read then (NumPy's `p *= decay` decays it)."""
    return f"""
{c_rows._clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict p = ({ct} *)b[0], *restrict m = ({ct} *)b[1], *restrict v = ({ct} *)b[2];
    const {ct} *restrict g = (const {ct} *)b[3], *restrict c = (const {ct} *)b[4];
    const {ct} decay = c[0], wd = c[1], a1 = c[2], b2 = c[3], a2 = c[4], step = c[5], bc2 = c[6], eps = c[7];
    const int64_t decoupled = n[1], l2 = n[2], same = n[3];
    const int64_t lo = tt_part_start(n[0], part, parts, 16), hi = tt_part_start(n[0], part + 1, parts, 16);
    for (int64_t i = lo; i < hi; i++) {{
        {ct} pi = p[i];
        if (decoupled) pi = pi * decay;
        {ct} gi = same ? pi : g[i];
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
    if p.dtype.char not in "fd" or not p.dtype.isnative or type(g) is not np.ndarray \
            or g.dtype != p.dtype or g.shape != p.shape:
        return False
    # g is p's own array only if they share memory: a.ctypes.data (1 us each) only then
    share_gp = np.may_share_memory(g, p)
    same = share_gp and g.ctypes.data == p.ctypes.data and g.strides == p.strides
    if (not same and share_gp) or np.may_share_memory(g, m) or np.may_share_memory(g, v) \
            or np.may_share_memory(p, m) or np.may_share_memory(p, v) or np.may_share_memory(m, v):
        return False   # bounds only (no exact solve): a false alarm just runs NumPy's step
    beta1, beta2 = betas
    # each scalar as the NumPy step computes it (the same expressions, the same types)
    values = [1.0 - lr * wd, wd, 1.0 - beta1, beta2, 1.0 - beta2,
              lr / (1.0 - beta1 ** step), (1.0 - beta2 ** step) ** 0.5, eps]
    if not all(_rounds_to(s, p.dtype) for s in values):
        return False
    lib = c_rows._load("adam", p.dtype.char, _source)
    if lib is None:
        return False
    scalars = np.array(values, p.dtype)
    c_rows._call(lib, [p, m, v, p if same else np.ascontiguousarray(g), scalars],
                 [p.size, int(bool(wd) and decoupled), int(bool(wd) and not decoupled), int(same)],
                 p.size, "adam")
    return True


# NEP 50 (NumPy 2): a Python float or int with a float array takes the array's dtype, whatever
# its value (NumPy 1's value-based rules made 1e300 with float32 float64): then _rounds_to
# needs no result_type call (0.55 us, 8 per parameter per step) for them
_WEAK_SCALARS = np.result_type(1e300, np.float32) == np.float32


def _rounds_to(s, dtype):
    """Whether NumPy, combining scalar s with an array of `dtype`, computes in `dtype` (s
    rounded to it first, as this kernel does): a Python float or int (weak, NEP 50) or a
    NumPy scalar no wider than dtype. An np.float64 with float32 computes in float64."""
    if _WEAK_SCALARS and (s.__class__ is float or s.__class__ is int) and dtype.kind == "f":
        return True
    try:
        return np.result_type(s, dtype) == dtype
    except (TypeError, ValueError):   # not a number NumPy knows: leave it to the NumPy step
        return False
