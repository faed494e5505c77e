"""The C loop of an embedding's backward (codegen/c_index.py) gives np.add.at's bits: rows
added in index order, repeated and negative indices, float32 and float64; an index out of
range is an IndexError; other layouts fall back to NumPy."""
import shutil

import numpy as np
import pytest

from tinytensor import nn
import tinytensor as tt
from tinytensor.compiler.codegen import c_index
from tinytensor.ops.indexing import IndexAdd

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="needs a C compiler")


def _program_index_add(step):
    (entry,) = step._cache.values()
    return [ins for ins in entry.runner.program.instrs if ins.fn is IndexAdd]


def _embed_step(m, ids):
    loss = (m(ids) * m(ids)).sum()
    loss.backward()
    return loss


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
def test_an_embedding_backward_in_c_has_add_ats_bits(dtype):
    rng = np.random.default_rng(3)
    tt.manual_seed(0)
    m = nn.Embedding(7, 5).to(dtype)
    step = tt.compile(_embed_step, backend="c")
    for k in range(3):
        ids = tt.tensor(rng.integers(0, 7, (4, 9)))       # repeated ids: add.at's order matters
        m.weight.grad = None
        step(m, ids)
        got = m.weight.grad.numpy().copy()
        m.weight.grad = None
        _embed_step(m, ids)
        assert got.tobytes() == m.weight.grad.numpy().tobytes(), k
    (ins,) = _program_index_add(step)
    assert c_index.step(ins) is not None          # the C loop is what ran


def test_an_index_out_of_range_is_an_index_error_naming_the_op():
    # the forward's indexing refuses it first in a step; the loop checks on its own too
    tt.manual_seed(0)
    m = nn.Embedding(7, 5)
    step = tt.compile(_embed_step, backend="c")
    step(m, tt.tensor(np.array([[1, 2, 3]])))
    (ins,) = _program_index_add(step)
    loop = c_index.step(ins)
    g = np.ones((1, 3, 5), np.float32)
    out = np.empty((7, 5), np.float32)
    with pytest.raises(IndexError, match="index_add .*index 9 is out of bounds for dimension 0 with size 7"):
        loop(out, g, (np.array([[1, 9, 3]]),), True, (7, 5))
    assert loop(out, g, (np.array([[1, -1, 1]]),), True, (7, 5)) is out   # -1: the last row
    assert out[1].tolist() == [2.0] * 5 and out[6].tolist() == [1.0] * 5 and not out[2:6].any()


def test_the_loop_against_add_at_with_a_fallback_for_other_layouts():
    rng = np.random.default_rng(4)
    g = rng.standard_normal((6, 3, 4)).astype(np.float32)
    g[0, 0, :2] = -0.0
    index = rng.integers(-5, 5, (6, 3))
    want = np.zeros((5, 4), np.float32)
    np.add.at(want, (index,), g)
    tt.manual_seed(0)
    x = tt.tensor(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    ids = tt.tensor(index)

    def step(x, ids, g):
        y = x[ids]
        y.backward(g)
        return y
    compiled = tt.compile(step, backend="c")
    for gg in (g, np.asfortranarray(g.transpose(2, 1, 0)).transpose(2, 1, 0)):   # C, then strided
        x.grad = None
        compiled(x, ids, tt.tensor(gg))
        assert x.grad.numpy().tobytes() == want.tobytes()
