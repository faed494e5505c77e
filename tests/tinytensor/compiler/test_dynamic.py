"""tt.compile(dynamic=True): one program for every batch and sequence size, KV-cached
generation without a capture per token, and clear errors where sizes cannot be symbolic."""
import numpy as np
import pytest

from tinytensor import models
from tinytensor import nn
import tinytensor as tt
from tinytensor.core.function import Function
from tinytensor import symbolic
from tinytensor.compiler.capture import CaptureError, capture
from tinytensor.symbolic import Poly, SymInt
from tinytensor.kernels import fusion

from .helpers import gpt, mlp, training_step

BACKENDS = ["numpy", "c"]


def _lm(m, ids):
    return m(ids, labels=ids).loss


def _mse(m, x, y):
    return ((m(x) - y) ** 2).mean()


def _params(m):
    return [p.data.copy() for p in m.parameters()]


# ---------------------------------------------------------------- the formulas
def test_symint_keeps_its_formula_through_integer_arithmetic():
    B, T = SymInt(4, Poly.symbol("s0")), SymInt(6, Poly.symbol("s1"))
    n = B * T - B + (2 * T) // 2 * 0 + 1
    assert int(n) == 4 * 6 - 4 + 1 and str(n) == "(s0*s1 - s0 + 1)"
    assert str((B * T * 8) // (B * T)) == "8" and (B * T * 8) % 8 == 0
    assert n.poly({"s0": 10, "s1": 3}) == 30 - 10 + 1
    assert isinstance(1 / (B * T), symbolic.SymFloat) and float(1 / (B * T)) == 1 / 24
    assert symbolic.evaluate(1 / (B * T), {"s0": 2, "s1": 5}) == 1 / 10
    assert T - T == 0 and type(T - T) is int          # a constant formula is a plain int
    # in the passes (formulas()), == compares formulas: a dynamic size is no fixed number
    with symbolic.formulas():
        assert B != 4 and B * T == T * B and B != T and not B * T == 24
    # anywhere else a SymInt is its number (a size the step left in a list compares as one)
    assert B == 4 and B * T == 24 and [T] == [6]
    with pytest.raises(symbolic.DynamicSizeError, match="only an exact division"):
        T // 4   # outside a capture; inside one it pins T (see the next test)


def test_comparisons_while_capturing_answer_for_todays_sizes_and_become_guards():
    guards = symbolic.Guards()
    T = SymInt(6, Poly.symbol("s1"))
    with symbolic.capturing(guards):
        assert T > 4 and T == 6 and not T == 7
    assert guards.hold({"s1": 6})
    assert not guards.hold({"s1": 7})     # T == 6 was answered True
    assert not guards.hold({"s1": 3})     # T > 4 was answered True


# ---------------------------------------------------------------- one program, any size
@pytest.mark.parametrize("backend", BACKENDS)
def test_gpt_training_step_one_program_for_every_batch_and_length(backend):
    # against eager with the backward the capture records (create_graph, fusion off): the
    # interpreter bit for bit at every size; the C kernels (their exp and tanh are not
    # NumPy's bits) within 1e-6 in loss and 1e-5 in every gradient (AdamW's eps makes
    # parameters whose gradient is ~0 differ more: the gradients are what is compared)
    m1, m2 = gpt(), gpt()
    o1, o2 = nn.optim.AdamW(m1.parameters(), lr=1e-2), nn.optim.AdamW(m2.parameters(), lr=1e-2)
    eager = training_step(_lm, create_graph=True)
    step = tt.compile(training_step(_lm), backend=backend, dynamic=True)
    rng = np.random.default_rng(0)
    for shape in [(2, 8), (3, 5), (2, 16), (4, 11), (3, 5), (2, 8)]:
        ids = tt.tensor(rng.integers(0, 32, shape))
        fused = fusion.set_fusion(False)
        try:
            le = eager(m1, o1, ids)
        finally:
            fusion.restore_fusion(fused)
        lc = step(m2, o2, ids)
        grads = [(p.grad.data, q.grad.data) for p, q in zip(m1.parameters(), m2.parameters())]
        if backend == "numpy":
            assert float(lc) == float(le), shape
            assert all(a.tobytes() == b.tobytes() for a, b in zip(_params(m1), _params(m2))), shape
            assert all(g.tobytes() == h.tobytes() for g, h in grads), shape
        else:
            np.testing.assert_allclose(float(lc), float(le), rtol=1e-6)
            for g, h in grads:
                np.testing.assert_allclose(h, g, rtol=0, atol=1e-5)
    assert len(step.programs) == 1
    text = step.programs[0].text()
    assert "[s0, s1]" in text and "(s0*s1)" in text   # the ids, and the flattened tokens


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_batch_is_dynamic_and_the_feature_dim_is_specialized(backend):
    # the 16 input features meet a (32, 16) weight: that symbol is pinned to 16 (a guard),
    # the batch stays free; a mean over the batch recomputes its 1/n per call
    m1, m2 = mlp(), mlp()
    o1, o2 = nn.optim.SGD(m1.parameters(), lr=0.1), nn.optim.SGD(m2.parameters(), lr=0.1)
    eager, step = training_step(_mse), tt.compile(training_step(_mse), backend=backend, dynamic=True)
    tt.manual_seed(0)
    for n in (8, 3, 20, 5):
        x, y = tt.randn(n, 16), tt.randn(n, 4)
        le, lc = eager(m1, o1, x, y), step(m2, o2, x, y)
        assert float(lc) == pytest.approx(float(le), rel=1e-6)
        for a, b in zip(_params(m1), _params(m2)):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    assert len(step.programs) == 1


def test_a_python_branch_on_a_size_is_a_guard_and_recaptures_when_it_flips():
    def f(x):
        if x.shape[0] > 4:
            return x * 2.0
        return x - 1.0
    g = tt.compile(f, dynamic=True)
    for n in (6, 9, 3, 2, 7):   # 5 features: never the batch size, so one pattern of sizes
        x = tt.randn(n, 5)
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    assert len(g.programs) == 2


def test_arange_and_masks_built_from_sizes_follow_the_sizes():
    def f(x):
        T = x.shape[1]
        mask = tt.ones(T, T, dtype=tt.bool).tril()
        pos = tt.arange(T).to(x.dtype)
        return tt.where(mask, x + pos, 0.0).sum(-1)
    g = tt.compile(f, backend="c", dynamic=True)
    for T in (5, 9, 2):
        x = tt.randn(3, T, T)
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    assert len(g.programs) == 1


# ---------------------------------------------------------------- KV-cached generation
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_gpt_generates_as_eager_with_one_decode_program(backend):
    m = gpt().eval()
    fast = tt.compile(m, backend=backend, dynamic=True)
    ids = tt.tensor(np.random.default_rng(1).integers(0, 32, (2, 3)))
    want = models.generate(m, ids, max_new_tokens=10)
    got = models.generate(fast, ids, max_new_tokens=10)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # the prompt (empty cache) and the decode step (a cache of any length; a length that
    # happens to equal another size, such as the batch, is one more signature)
    assert len(fast.programs) <= 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_decoding_logits_follow_eager_at_every_cache_length(backend):
    # the logits, not only the argmax: a size baked into an attribute (the causal mask's
    # diagonal was once) gives wrong logits that greedy tokens may hide
    m = gpt().eval()
    fast = tt.compile(m, backend=backend, dynamic=True)
    x = tt.tensor(np.random.default_rng(5).integers(0, 32, (3, 4)))
    with tt.no_grad():
        ce, cf = m.new_cache(), m.new_cache()
        for _ in range(10):
            le, lf = m(x, cache=ce).logits, fast(x, cache=cf).logits
            np.testing.assert_allclose(lf.numpy(), le.numpy(), rtol=0, atol=1e-5)
            x = tt.tensor(le.numpy()[:, -1:].argmax(-1))
    assert len(fast.programs) <= 3


def test_static_compile_with_a_cache_replays_the_cache_update():
    m = gpt().eval()
    fast = tt.compile(m)
    ids = tt.tensor(np.random.default_rng(2).integers(0, 32, (1, 4)))
    with tt.no_grad():
        for _ in range(2):   # the same signature twice: capture, then a replay
            c1, c2 = m.new_cache(), m.new_cache()
            a, b = m(ids, cache=c1), fast(ids, cache=c2)   # eager runs the fused attention
            np.testing.assert_allclose(b.logits.numpy(), a.logits.numpy(), rtol=0, atol=1e-6)
            for k1, k2 in zip(c1.self_attn, c2.self_attn):
                assert k2.key is not None and k2.key.shape == k1.key.shape
                np.testing.assert_allclose(k2.key.numpy(), k1.key.numpy(), rtol=0, atol=1e-6)
    assert len(fast.programs) == 1


# ---------------------------------------------------------------- clear errors
def test_a_shape_that_is_not_multilinear_is_refused_naming_the_op():
    def f(x):   # x is (T, T, T), one symbol: flattened, T**3 elements (T**2 still fits)
        return x.reshape(-1).sum()
    with pytest.raises(CaptureError, match=r"op reshape .* not a multilinear formula"):
        capture(f, (tt.randn(6, 6, 6),), dynamic=True)
    program, _, _ = capture(f, (tt.randn(6, 6),), dynamic=True)
    assert "[(s0*s0)]" in program.text()


def test_an_inexact_division_of_a_size_pins_it_so_each_size_is_right():
    # T // 3 has no formula: the program holds at the captured T only (a guard), and a
    # call at another T is captured anew instead of replaying the first one's slice
    f = tt.compile(lambda x: x[: x.shape[0] // 3] * 2.0, dynamic=True)
    for n in (7, 9, 7, 11):
        x = tt.randn(n, 2)
        np.testing.assert_array_equal(f(x).numpy(), (x[: n // 3] * 2.0).numpy())
    assert len(f.programs) == 3


class _Positive(Function):
    """x[x > 0] as one op: an output shape that depends on the data."""
    @staticmethod
    def forward(ctx, x):
        return x[x > 0]


def test_an_op_whose_shape_depends_on_the_data_is_refused():
    x = tt.tensor([1.0, -1, 1, 1, -1, -1, 1, 1, 1, -1, 1, 1])
    with pytest.raises(CaptureError, match="op _positive .* depends on the data"):
        capture(lambda x: _Positive.apply(x) * 2, (x,), dynamic=True)


@pytest.mark.parametrize("dynamic", [False, True])
def test_boolean_mask_indexing_and_nonzero_are_refused_not_frozen(dynamic):
    # their positions come from the data: a replay would reuse the first call's
    x = tt.randn(6)
    with pytest.raises(CaptureError, match="getitem with a boolean mask"):
        capture(lambda x: x[x > 0], (x,), dynamic=dynamic)
    with pytest.raises(CaptureError, match="nonzero"):
        capture(lambda x: x[tt.nonzero(x > 0)[:, 0]], (x,), dynamic=dynamic)


def test_a_state_object_whose_python_number_changes_is_refused():
    class Counter:
        def __init__(self):
            self.seen = 0
            self.total = None

    def f(x, c):
        c.seen += 1
        c.total = x.sum()
        return x * 2

    with pytest.raises(CaptureError, match=r"changes arg 1\.seen from 0 to 1"):
        capture(f, (tt.randn(3), Counter()))


def test_c_kernels_taking_sizes_are_bitwise_the_kernels_specialized_on_them():
    # forward only (nothing changes between calls): the static program's replay at each
    # shape against the one dynamic program's; their sources differ only in where sizes
    # come from, so every output bit agrees (row sums over a dynamic length included)
    m = gpt().eval()
    fwd = lambda ids: m(ids).logits.log_softmax(-1)
    static, dyn = tt.compile(fwd, backend="c"), tt.compile(fwd, backend="c", dynamic=True)
    rng = np.random.default_rng(3)
    for shape in [(2, 9), (3, 4), (2, 16)]:
        ids = tt.tensor(rng.integers(0, 32, shape))
        static(ids)
        dyn(ids)
        assert static(ids).detach().numpy().tobytes() == dyn(ids).detach().numpy().tobytes(), shape
    assert len(dyn.programs) == 1 and len(static.programs) == 3


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_function_reading_a_model_from_its_closure_is_captured_once(dynamic):
    # the model's parameters are found by the first capture; the key it is stored under
    # must already have their .grad parts, or the second call would capture again
    m = mlp()
    f = tt.compile(lambda x: m(x).sum(), dynamic=dynamic)
    x = tt.randn(5, 16)
    for _ in range(3):
        assert float(f(x)) == pytest.approx(float(m(x).sum()), rel=1e-6)
    assert len(f.programs) == 1


def test_sizes_seen_once_run_the_generic_runner_and_repeated_ones_get_an_instance():
    from tinytensor.compiler import instantiate
    made = []
    inst = instantiate.Instances(lambda env: made.append(env["s0"]) or (lambda inputs: ("own", env)),
                                 generic=lambda inputs, env: ("generic", env))
    for n in range(2, 40):            # decoding: a new cache length every call
        assert inst((n,), {"s0": n})(None)[0] == "generic"
    assert made == []
    for _ in range(instantiate.STREAK + 2):   # a training loop at one shape
        kind = inst((7,), {"s0": 7})(None)[0]
    assert kind == "own" and made == [7]


def test_explain_and_viz_show_the_program_of_symbolic_sizes(tmp_path):
    m = gpt()
    fast = tt.compile(m, backend="c", dynamic=True)
    ids = tt.tensor(np.arange(16).reshape(2, 8) % 32)
    with tt.no_grad():   # the forward alone: with grad on, the program holds its backward too
        rows = tt.compiler.explain(fast, ids, out=str(tmp_path))
    assert rows[-1]["stage"] == "fuse" and rows[-1]["kernels"] > 0 and rows[-1]["planned peak"] > 0
    assert "%arg0[s0, s1] int64" in (tmp_path / "0_captured.txt").read_text()
    kernels = list((tmp_path / f"{len(rows) - 1}_fuse_kernels").iterdir())   # the last stage
    assert kernels and any("const int64_t *n" in k.read_text() for k in kernels)
    fast(ids)
    graph = tt.viz.graph(fast)
    assert "s0" in graph.source


def test_a_dim_found_tied_to_a_weight_stays_static_so_a_batch_of_that_size_is_no_new_program():
    # 16 rows of 16 features: by size alone the batch would share the features' symbol;
    # the first capture found the features tied to the (32, 16) weight, so they are static
    m = mlp()
    f = tt.compile(lambda x: m(x).sum(-1), backend="c", dynamic=True)
    for n in (5, 16, 9):
        x = tt.randn(n, 16)
        np.testing.assert_allclose(f(x).detach().numpy(), m(x).sum(-1).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert len(f.programs) == 1


def test_static_compile_decoding_into_one_cache_object_updates_it_at_every_replay():
    # until stop 18 the cache was guarded by identity only: its tensors were baked in as
    # constants and the replay did not store the new keys (logits off by 0.15 at step 2)
    m = gpt().eval()
    fast = tt.compile(m)
    with tt.no_grad():
        c1, c2 = m.new_cache(), m.new_cache()
        x = tt.tensor([[3, 4, 5]])
        m(x, cache=c1), fast(x, cache=c2)
        for i in range(4):
            x = tt.tensor([[7 + i]])
            a, b = m(x, cache=c1), fast(x, cache=c2)
            np.testing.assert_allclose(b.logits.numpy(), a.logits.numpy(), rtol=0, atol=1e-6)
            assert c2.length == c1.length


@pytest.mark.parametrize("family", ["llama", "bart"])
def test_cached_decoding_of_rope_and_learned_positions_keeps_one_program(family):
    # RoPE's cos/sin and BART's learned positions come from arange(past, past + T): built
    # with tensor ops when those are sizes, so the cache length stays a symbol
    tt.manual_seed(0)
    if family == "llama":
        m = models.Llama(models.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                            num_hidden_layers=1, num_attention_heads=4,
                                            num_key_value_heads=2, max_position_embeddings=64))
        run = lambda f, y, cache: f(y, cache=cache).logits
    else:
        m = models.BART(models.BartConfig(vocab_size=32, d_model=16, encoder_layers=1, decoder_layers=1,
                                          encoder_attention_heads=2, decoder_attention_heads=2,
                                          encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64))
        enc = m.eval().encode(tt.tensor([[5, 6, 7]]))
        run = lambda f, y, cache: f(encoder_outputs=enc, decoder_input_ids=y, cache=cache).logits
    m.eval()
    fast = tt.compile(m, dynamic=True)
    with tt.no_grad():
        ce, cf = m.new_cache(), m.new_cache()
        y = tt.tensor([[3, 4]])
        for _ in range(9):
            want, got = run(m, y, ce), run(fast, y, cf)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-5)
            y = tt.tensor(want.numpy()[:, -1:].argmax(-1))
    # not one per token (9): the prompt, and a few decode programs where the cache length
    # happens to equal another size of these tiny models (2 heads, head size 4 or 8, the
    # 3 encoder positions): duck sizing makes each equality pattern its own signature
    assert len(fast.programs) <= 5
