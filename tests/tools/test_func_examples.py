"""The worked examples of docs/func.md (tools/examples/) at a reduced size, float64: each
result equals torch.func's on the same weights, and one more oracle where it is cheap."""
import re
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.tools.examples import attention_jacobian, hessian_eigenvalue, per_sample_grad_norms


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch.func's "no batching rule" performance notes
        yield


def test_per_sample_gradient_norms_equal_torch_func_and_a_loop_of_backwards():
    from tinytensor import models
    from tinytensor.tools.lib import gpt_twin
    r = per_sample_grad_norms.run(per_sample_grad_norms.SMALL, batch=3, seq=8, dtype="float64")
    np.testing.assert_allclose(r["norms"], r["torch"], rtol=1e-10)
    # the plain way, one backward per example, on the same model (same seed)
    tt.manual_seed(0)
    model = models.GPT(gpt_twin.gpt_config(**per_sample_grad_norms.SMALL)).to(tt.float64)
    ids = np.random.default_rng(0).integers(0, per_sample_grad_norms.SMALL["vocab_size"], (3, 8))
    loop = []
    for row in ids:
        model.zero_grad()
        model(tt.tensor(row[None]), labels=tt.tensor(row[None])).loss.backward()
        loop.append(np.sqrt(sum((p.grad.numpy() ** 2).sum() for p in model.parameters())))
    np.testing.assert_allclose(r["norms"], loop, rtol=1e-10)
    assert len(set(np.round(r["norms"], 6))) == 3   # per example, not one norm repeated


def test_hessian_power_iteration_follows_torch_func_step_by_step():
    r = hessian_eigenvalue.run(hessian_eigenvalue.SMALL, batch=2, seq=5, steps=6, dtype="float64")
    np.testing.assert_allclose(r["estimates"], r["torch"], rtol=1e-8)
    assert r["estimates"][-1] > 0 and abs(r["estimates"][-1] - r["estimates"][-2]) < abs(r["estimates"][1] - r["estimates"][0])


def test_attention_jacobian_equals_torch_func_is_causal_and_is_drawn(tmp_path):
    out = tmp_path / "j.svg"
    r = attention_jacobian.run(attention_jacobian.SMALL, seq=6, head=1, dtype="float64", out=str(out))
    T, hs, T2, C = r["jacobian"].shape
    assert (T, hs, T2, C) == (6, 8, 6, 16)
    np.testing.assert_allclose(r["jacobian"], r["torch"], rtol=1e-10, atol=1e-12)
    assert np.all(r["map"][np.triu_indices(T, 1)] == 0)          # output t never reads input s > t
    assert np.all(r["map"][np.tril_indices(T)] > 0)
    svg = out.read_text()
    cells = re.findall(r"<title>\[(\d+), (\d+)\] ([0-9.e+-]+)</title>", svg)
    assert len(cells) == T * T
    i, j, v = cells[T + 0]   # row 1, column 0
    assert (int(i), int(j)) == (1, 0) and float(v) == pytest.approx(r["map"][1, 0], rel=1e-3)
