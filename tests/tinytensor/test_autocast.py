"""tt.autocast against torch.autocast("cpu"): the same ops end in the same dtypes, a GPT-2
step gives the same loss and gradients within low-precision tolerance, parameters stay
float32. The expected dtypes are torch's, measured here, never written down."""
import numpy as np
import pytest

import tinytensor as tt
import tinytensor.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

BF16 = getattr(tt, "bfloat16", None)
LOW = [pytest.param((tt.float16, torch.float16), id="float16"),
       pytest.param((BF16, torch.bfloat16), id="bfloat16",
                    marks=pytest.mark.skipif(BF16 is None, reason="tt.bfloat16 not there yet"))]


def _pair(*shape, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if positive:
        a = 1.0 / (1.0 + np.exp(-a))
    return tt.tensor(a), torch.tensor(a)


def _cases():
    x, tx = _pair(4, 8)
    w, tw = _pair(6, 8, seed=1)
    b, tb = _pair(6, seed=2)
    y, ty = _pair(4, 6, seed=3)
    p, tp = _pair(4, 6, seed=4, positive=True)
    c, tc = _pair(1, 2, 5, 5, seed=5)
    k, tk = _pair(3, 2, 3, 3, seed=6)
    t = np.array([0, 3, 5, 1])
    it, itt = tt.tensor(t), torch.tensor(t)
    d, td = _pair(4, 8, seed=7)
    d, td = d.double(), td.double()
    return {
        "matmul": (lambda: x @ w.mT, lambda: tx @ tw.mT),
        "mm": (lambda: tt.mm(x, w.mT), lambda: torch.mm(tx, tw.mT)),
        "bmm": (lambda: tt.bmm(x[None], w.mT[None]), lambda: torch.bmm(tx[None], tw.mT[None])),
        "linear": (lambda: F.linear(x, w, b), lambda: TF.linear(tx, tw, tb)),
        "einsum": (lambda: tt.einsum("ij,kj->ik", x, w), lambda: torch.einsum("ij,kj->ik", tx, tw)),
        "conv2d": (lambda: F.conv2d(c, k), lambda: TF.conv2d(tc, tk)),
        "conv1d": (lambda: F.conv1d(c[:, :, :, 0], k[:, :, 0]), lambda: TF.conv1d(tc[:, :, :, 0], tk[:, :, 0])),
        "conv_transpose2d": (lambda: F.conv_transpose2d(c, k.transpose(0, 1)),
                             lambda: TF.conv_transpose2d(tc, tk.transpose(0, 1))),
        "float64 linear": (lambda: F.linear(d, w.double()), lambda: TF.linear(td, tw.double())),
        # on the CPU these follow their input: low precision after a linear
        "softmax": (lambda: F.softmax(F.linear(x, w), -1), lambda: TF.softmax(TF.linear(tx, tw), -1)),
        "log_softmax": (lambda: F.log_softmax(F.linear(x, w), -1),
                        lambda: TF.log_softmax(TF.linear(tx, tw), -1)),
        # without affine parameters: a low-precision input with float32 ones is a norms.py
        # question (torch keeps the input's dtype there, with or without autocast)
        "layer_norm": (lambda: F.layer_norm(F.linear(x, w), (6,)),
                       lambda: TF.layer_norm(TF.linear(tx, tw), (6,))),
        "rms_norm": (lambda: F.rms_norm(F.linear(x, w), (6,)), lambda: TF.rms_norm(TF.linear(tx, tw), (6,))),
        "sum": (lambda: F.linear(x, w).sum(), lambda: TF.linear(tx, tw).sum()),
        "mean": (lambda: F.linear(x, w).mean(), lambda: TF.linear(tx, tw).mean()),
        "gelu": (lambda: F.gelu(F.linear(x, w)), lambda: TF.gelu(TF.linear(tx, tw))),
        "cosine_similarity": (lambda: F.cosine_similarity(F.linear(x, w), y),
                              lambda: TF.cosine_similarity(TF.linear(tx, tw), ty)),
        "softmax float32": (lambda: F.softmax(x, -1), lambda: TF.softmax(tx, -1)),
        # torch's float32 list: the losses
        "cross_entropy": (lambda: F.cross_entropy(F.linear(x, w), it), lambda: TF.cross_entropy(TF.linear(tx, tw), itt)),
        "nll_loss": (lambda: F.nll_loss(F.linear(x, w), it), lambda: TF.nll_loss(TF.linear(tx, tw), itt)),
        "mse_loss": (lambda: F.mse_loss(F.linear(x, w), y), lambda: TF.mse_loss(TF.linear(tx, tw), ty)),
        "l1_loss": (lambda: F.l1_loss(F.linear(x, w), y), lambda: TF.l1_loss(TF.linear(tx, tw), ty)),
        "smooth_l1_loss": (lambda: F.smooth_l1_loss(F.linear(x, w), y),
                           lambda: TF.smooth_l1_loss(TF.linear(tx, tw), ty)),
        "huber_loss": (lambda: F.huber_loss(F.linear(x, w), y), lambda: TF.huber_loss(TF.linear(tx, tw), ty)),
        "kl_div": (lambda: F.kl_div(F.linear(x, w), p, reduction="batchmean"),
                   lambda: TF.kl_div(TF.linear(tx, tw), tp, reduction="batchmean")),
        "bce_with_logits": (lambda: F.binary_cross_entropy_with_logits(F.linear(x, w), p),
                            lambda: TF.binary_cross_entropy_with_logits(TF.linear(tx, tw), tp)),
        "bce": (lambda: F.binary_cross_entropy(F.sigmoid(F.linear(x, w)), p),
                lambda: TF.binary_cross_entropy(torch.sigmoid(TF.linear(tx, tw)), tp)),
    }


@pytest.mark.parametrize("low", LOW)
def test_each_op_ends_in_torchs_dtype(low):
    dt, tdt = low
    wrong, cases = {}, _cases()
    for name, (ours, theirs) in cases.items():
        with tt.autocast("cpu", dtype=dt):
            got = ours().dtype.name
        with torch.autocast("cpu", dtype=tdt):
            want = str(theirs().dtype).removeprefix("torch.")
        if got != want:
            wrong[name] = (got, want)
    assert not wrong, f"(tinytensor, torch) dtypes under autocast: {wrong}"


@pytest.fixture(scope="module")
def gpt_pair(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    from tinytensor import models
    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager", bos_token_id=0, eos_token_id=0))
    d = tmp_path_factory.mktemp("gpt2")
    ref.save_pretrained(d)
    return ref, models.from_hf(str(d))


def _output_dtypes(named_modules):
    seen, handles = {}, []
    for name, mod in named_modules:
        if name:
            def hook(mod, inp, out, name=name):
                seen[name] = str((out[0] if isinstance(out, tuple) else out).dtype).split(".")[-1]
            handles.append(mod.register_forward_hook(hook))
    return seen, handles


@pytest.mark.parametrize("low", LOW)
def test_gpt2_step_matches_torch_autocast(gpt_pair, low):
    dt, tdt = low
    ref, model = gpt_pair
    ids = np.random.default_rng(1).integers(0, 96, (3, 12))
    want, h1 = _output_dtypes(ref.transformer.named_modules())
    got, h2 = _output_dtypes(model.named_modules())
    try:
        ref.zero_grad()
        with torch.autocast("cpu", dtype=tdt):
            r = ref(torch.tensor(ids), labels=torch.tensor(ids))
        r.loss.backward()
        model.zero_grad()
        with tt.autocast("cpu", dtype=dt):
            o = model(input_ids=tt.tensor(ids), labels=tt.tensor(ids))
        o.loss.backward()
    finally:
        for h in h1 + h2:
            h.remove()
    assert len(got) > 20 and {k: v for k, v in got.items() if want.get(k) != v} == {}
    assert got["h.0.attn.c_attn"] == dt.name and got["h.1.mlp.c_proj"] == dt.name  # autocast acted
    assert o.logits.dtype is dt and o.loss.dtype is tt.float32
    tol = 8e-3 if dt is tt.float16 else 6e-2   # 10 and 7 mantissa bits
    assert abs(o.loss.item() - r.loss.item()) < tol * abs(r.loss.item())
    for name, p in model.named_parameters():
        assert p.dtype is tt.float32 and p.grad.dtype is tt.float32, name
        full = name if name.startswith("lm_head") else "transformer." + name
        g = ref.get_parameter(full).grad.numpy()
        if type(ref.get_submodule(full.rsplit(".", 1)[0])).__name__ == "Conv1D" and g.ndim == 2:
            g = g.T  # HF's Conv1D keeps its weight as (in, out)
        err = np.linalg.norm(p.grad.numpy() - g) / max(np.linalg.norm(g), 1e-12)
        assert err < 10 * tol, f"{name}: relative gradient error {float(err):.3g}"


def test_gradient_flows_back_through_the_cast_to_float32():
    x, tx = _pair(4, 8)
    w, tw = _pair(6, 8, seed=1)
    for t in (x, w, tx, tw):
        t.requires_grad_()
    with tt.autocast("cpu", dtype=tt.float16):
        y = F.linear(x, w)
    with torch.autocast("cpu", dtype=torch.float16):
        ty = TF.linear(tx, tw)
    y.float().square().sum().backward()
    ty.float().square().sum().backward()
    assert x.grad.dtype is tt.float32 and w.grad.dtype is tt.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-2, atol=1e-2)


def test_context_decorator_nesting_and_restore():
    x, w = _pair(2, 3)[0], _pair(4, 3, seed=1)[0]

    @tt.autocast("cpu", dtype=tt.float16)
    def inner():
        return (x @ w.mT).dtype

    @tt.autocast("cpu", dtype=tt.float16)
    def gen():
        yield (x @ w.mT).dtype

    assert inner() is tt.float16 and next(gen()) is tt.float16
    assert (x @ w.mT).dtype is tt.float32 and not tt.is_autocast_enabled()
    with tt.autocast("cpu", dtype=tt.float16):
        assert tt.is_autocast_enabled("cpu") and not tt.is_autocast_enabled("cuda")
        with tt.autocast("cpu", enabled=False):
            assert (x @ w.mT).dtype is tt.float32
        assert (x @ w.mT).dtype is tt.float16
        with pytest.raises(KeyError):
            with tt.autocast("cpu", dtype=tt.float16):
                raise KeyError
        assert tt.get_autocast_dtype("cpu") is tt.float16
    assert not tt.is_autocast_enabled()


def test_cuda_autocast_leaves_cpu_tensors_alone():
    # torch casts per device: a CPU tensor under autocast("cuda") keeps float32
    x, w = _pair(2, 3)[0], _pair(4, 3, seed=1)[0]
    with tt.autocast("cuda"):
        assert (x @ w.mT).dtype is tt.float32


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"autocast: dtype must be one of tt.float16.*got tt.float32"):
        tt.autocast("cpu", dtype=tt.float32)
    with pytest.raises(ValueError, match=r"device_type must be 'cpu' or 'cuda', got 'tpu'"):
        tt.autocast("tpu")


@pytest.mark.gpu
def test_cuda_list_runs_softmax_and_norms_in_float32():
    if not tt.cuda_is_available():
        pytest.skip("no CUDA device")
    x, w = (t.to("cuda") for t in (_pair(4, 8)[0], _pair(6, 8, seed=1)[0]))
    with tt.autocast("cuda", dtype=tt.float16):
        h = F.linear(x, w)
        assert h.dtype is tt.float16
        assert F.softmax(h, -1).dtype is tt.float32
        assert F.layer_norm(h, (6,)).dtype is tt.float32
