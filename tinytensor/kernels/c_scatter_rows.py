"""`np.add.at(out, ids, values)` for integer ids along the first dim of a C-contiguous float
array (the gradient of embedding and of `weight[ids]`) as one C pass: out[ids[r]] +=
values[r] for each r in order, which is the order of add.at's additions to each element,
so the bits are add.at's. It runs on one thread (a split by columns was slower).

Why: add.at runs its generic indexed loop element by element (~40 ms for a (64, 128)
batch of 256-wide rows on the dev machine; this pass is a few ms, most of it the
first touch of the zeroed gradient's pages, which torch pays as well).
"""
import numpy as np

from . import c_eager
from .c_rows import _call, _clones, _load


def _source(name, ct):
    """n = (ids, row length, rows of out); b = out (rows, D), ids (int64), values (ids, D)."""
    return f"""
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict out = ({ct} *)b[0];
    const int64_t *restrict ids = (const int64_t *)b[1];
    const {ct} *restrict v = (const {ct} *)b[2];
    const int64_t count = n[0], D = n[1];
    const int64_t lo = tt_part_start(D, part, parts, 16), hi = tt_part_start(D, part + 1, parts, 16);
    for (int64_t r = 0; r < count; r++) {{
        {ct} *restrict o = out + ids[r] * D;
        const {ct} *restrict s = v + r * D;
        for (int64_t j = lo; j < hi; j++) o[j] = o[j] + s[j];
    }}
}}
"""


def add_rows(out, ids, values):
    """add.at(out, ids, values) in C where it fits (ids an integer array, each in [0,
    len(out)); out and values C-contiguous floats of one dtype with values.shape ==
    ids.shape + out.shape[1:]): True, done; False where NumPy must do it."""
    if (type(out) is not np.ndarray or type(ids) is not np.ndarray or type(values) is not np.ndarray
            or ids.dtype.kind not in "iu" or out.ndim < 1 or ids.size == 0 or not c_eager.enabled()
            or values.shape != ids.shape + out.shape[1:] or not c_eager.takes(values, out)):
        return False
    ids = np.ascontiguousarray(ids.reshape(-1), np.int64)
    if int(ids.min()) < 0 or int(ids.max()) >= out.shape[0]:   # add.at wraps or refuses them
        return False
    lib = _load("scatter_rows_add", out.dtype.char, _source)
    if lib is None:
        return False
    D = out.size // out.shape[0] if out.shape[0] else 0
    if D == 0:
        return False
    # one thread: split by columns each part read 128 bytes of every row, and the 2-thread
    # embedding step took 15 ms against 10 ms whole
    _call(lib, [out, ids, values], [ids.size, D], 0, "scatter_rows_add")
    return True
