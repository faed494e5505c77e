"""Hand-written C for an embedding's backward: index_add of whole rows, `zeros(shape)` with
`g[m]` added into row `index[m]` for every m. NumPy runs it as np.add.at, whose generic
loop took 2.5-2.8 ms of the GPT-2 bench step (1024 rows of 256 into a 1024-row table);
this loop takes 0.13 ms.

It computes exactly what IndexAdd's NumPy forward computes: np.add.at adds the rows in
index order, one element after another from 0, and so does the loop (the same float
additions in the same order: the same bits). A negative index counts from the end and one
out of range is an IndexError, as in NumPy. `step(ins)` is the C runner's hook
(runner._into_step): None unless `ins` is such an index_add (float32/float64 rows, an int64
index: a tensor of the step or a constant); the function it returns falls back to
IndexAdd.forward_into for arrays of another layout or dtype.

gather and scatter_add along a dim were tried here too: on cross-entropy's 32 labels the
ctypes call and its checks (~7 us) cost more than NumPy's forward (~5 us).
"""
import ctypes
import math

import numpy as np

from ...ops.indexing import IndexAdd
from .. import cache_disk
from .pointers import data_pointer as pointer
from .toolchain import FLAGS, source_file

SOURCE = source_file("c_index.c")

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_INT64 = np.dtype(np.int64)
_lib = []


def _function(suffix):
    if not _lib:
        _lib.append(cache_disk.load(SOURCE, FLAGS))
    fn = getattr(_lib[0], f"tt_index_add_rows_{suffix}")
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
    return fn


def _fits(a, dtype):
    return a.__class__ is np.ndarray and a.dtype == dtype and a.flags.c_contiguous


def step(ins):
    """The C form of index_add for `ins` (fn(out, g, key, advanced, shape) -> out), or None."""
    key = ins.attrs.get("key")
    if ins.fn is not IndexAdd or ins.saved or not ins.attrs.get("advanced") \
            or type(key) is not tuple or len(key) != 1:
        return None
    if ins.attr_inputs == (("key", 0),) and len(ins.inputs) == 2:   # an index tensor of the step
        g_v, idx_v = ins.inputs
        idx_shape, idx_dtype = tuple(idx_v.shape), np.dtype(idx_v.dtype.np)
    elif not ins.attr_inputs and len(ins.inputs) == 1 and isinstance(key[0], np.ndarray):
        (g_v,), idx_shape, idx_dtype = ins.inputs, key[0].shape, key[0].dtype   # a constant
    else:
        return None
    shape = tuple(ins.attrs["shape"])
    dtype = np.dtype(ins.outputs[0].dtype.np)
    if dtype not in _SUFFIX or idx_dtype != _INT64 or not shape \
            or not all(isinstance(d, int) for d in shape) or tuple(g_v.shape) != idx_shape + shape[1:]:
        return None
    fn = _function(_SUFFIX[dtype])
    N, R, M = shape[0], math.prod(shape[1:]), math.prod(idx_shape)

    def index_add(out, g, key, advanced, shape):
        (index,) = key
        if not (_fits(g, dtype) and _fits(index, _INT64)):
            return IndexAdd.forward_into(out, g, key, advanced, shape)
        at = fn(pointer(out), pointer(g), pointer(index), N, R, M)
        if at >= 0:
            bad = int(index.reshape(-1)[at])
            raise IndexError(f"index_add (the backward of indexing by an index tensor): index "
                             f"{bad} is out of bounds for dimension 0 with size {N}")
        return out
    return index_add
