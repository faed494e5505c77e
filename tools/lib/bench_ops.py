"""Per-op benchmarks (`python tools/bench.py ops`): forward + backward of one hot op at a typical
activation size, tinytensor against torch on the same float32 arrays, to find the ops that fall
off a cliff. Activations are (64, 128, 256) unless the name says otherwise; the backward gets a
fixed random output gradient (a scalar loss: none), so no op is timed on an all-zero gradient."""


def _spec(small):
    """(name, fn(lib, F, *inputs), input shapes, integer input (high, shape) or None) per case.
    fn is written once for both libraries: tinytensor mirrors torch's names. small shrinks
    every size so that a test can prove each case runs, in milliseconds."""
    act = (4, 8, 16) if small else (64, 128, 256)
    img = (2, 4, 8, 8) if small else (8, 32, 32, 32)
    ce = (16, 32) if small else (2048, 1024)
    att = (1, 2, 16, 8) if small else (8, 8, 256, 64)
    conv_x, conv_w = ((2, 4, 8, 8), (4, 4, 3, 3)) if small else ((8, 64, 32, 32), (64, 64, 3, 3))
    vocab, dim, ids = (50, 16, (4, 8)) if small else (50304, 256, (64, 128))
    lin = (16, 8, 12) if small else (8192, 256, 1024)   # (tokens, in, out): an MLP's first layer
    return [
        ("F.gelu exact (erf)", lambda m, F, x: F.gelu(x), [act], None),
        ("erf", lambda m, F, x: m.erf(x), [act], None),
        ("F.silu", lambda m, F, x: F.silu(x), [act], None),
        ("F.gelu tanh", lambda m, F, x: F.gelu(x, approximate="tanh"), [act], None),
        ("sigmoid", lambda m, F, x: m.sigmoid(x), [act], None),
        ("tanh", lambda m, F, x: m.tanh(x), [act], None),
        ("exp", lambda m, F, x: m.exp(x), [act], None),
        ("topk(8, -1)", lambda m, F, x: m.topk(x, 8, -1)[0], [act], None),
        ("max_pool2d(2) " + "x".join(map(str, img)), lambda m, F, x: F.max_pool2d(x, 2), [img], None),
        ("layer_norm (last dim, affine)",
         lambda m, F, x, w, b: F.layer_norm(x, (act[-1],), w, b), [act, act[-1:], act[-1:]], None),
        ("log_softmax(-1)", lambda m, F, x: F.log_softmax(x, dim=-1), [act], None),
        ("softmax(-1)", lambda m, F, x: F.softmax(x, dim=-1), [act], None),
        ("cross_entropy " + "x".join(map(str, ce)),
         lambda m, F, x, t: F.cross_entropy(x, t), [ce], (ce[1], ce[:1])),
        ("causal sdpa " + "x".join(map(str, att)),
         lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         [att, att, att], None),
        ("cumsum(-1)", lambda m, F, x: m.cumsum(x, -1), [act], None),
        ("sum", lambda m, F, x: x.sum(), [act], None),
        ("var(-1)", lambda m, F, x: x.var(-1), [act], None),
        ("transpose(1, 2) + reshape", lambda m, F, x: x.transpose(1, 2).reshape(act[0], -1), [act], None),
        ("conv2d 3x3 " + "x".join(map(str, conv_x)),
         lambda m, F, x, w: F.conv2d(x, w, padding=1), [conv_x, conv_w], None),
        (f"embedding {vocab}x{dim}", lambda m, F, w, i: F.embedding(i, w), [(vocab, dim)], (vocab, ids)),
        # the rest of a Transformer block and a ResNet's: linear, the elementwise arithmetic
        # around them, dropout, the pooling and batch norm of a CNN
        ("F.linear (+bias) " + "x".join(map(str, lin)),
         lambda m, F, x, w, b: F.linear(x, w, b), [lin[:2], lin[1:][::-1], lin[-1:]], None),
        ("x * y + z", lambda m, F, x, y, z: x * y + z, [act, act, act], None),
        ("x + bias (broadcast)", lambda m, F, x, b: x + b, [act, act[-1:]], None),
        ("relu", lambda m, F, x: F.relu(x), [act], None),
        ("mean(-1)", lambda m, F, x: x.mean(-1), [act], None),
        ("mse_loss", lambda m, F, x, y: F.mse_loss(x, y), [act, act], None),
        ("max_pool2d 3x3/2 pad 1 " + "x".join(map(str, conv_x)),
         lambda m, F, x: F.max_pool2d(x, 3, 2, 1), [conv_x], None),
        ("batch_norm train " + "x".join(map(str, conv_x)),
         lambda m, F, x, w, b: F.batch_norm(x, None, None, w, b, True), [conv_x, conv_x[1:2], conv_x[1:2]], None),
        ("conv2d 3x3 stride 2 " + "x".join(map(str, conv_x)),
         lambda m, F, x, w: F.conv2d(x, w, stride=2, padding=1), [conv_x, conv_w], None),
        ("adaptive_avg_pool2d(1) " + "x".join(map(str, conv_x)),
         lambda m, F, x: F.adaptive_avg_pool2d(x, 1), [conv_x], None),
        # the activations whose selects ran as NumPy's where (branching per element: half
        # of random signs mispredicted) or as several single-threaded passes; the masks of
        # where and masked_fill are random signs too; softmax over a middle dim ran NumPy's passes
        ("F.elu", lambda m, F, x: F.elu(x), [act], None),
        ("F.relu6", lambda m, F, x: F.relu6(x), [act], None),
        ("F.hardtanh", lambda m, F, x: F.hardtanh(x), [act], None),
        ("F.hardswish", lambda m, F, x: F.hardswish(x), [act], None),
        ("F.softplus", lambda m, F, x: F.softplus(x), [act], None),
        ("F.logsigmoid", lambda m, F, x: F.logsigmoid(x), [act], None),
        ("abs", lambda m, F, x: m.abs(x), [act], None),
        ("where(z > 0, x, y)", lambda m, F, x, y, z: m.where(z > 0, x, y), [act, act, act], None),
        ("masked_fill(z > 0, 0)", lambda m, F, x, z: x.masked_fill(z > 0, 0.0), [act, act], None),
        ("softmax(1) (not the last dim)", lambda m, F, x: F.softmax(x, dim=1), [act], None),
    ]


def ops_cases(small=False, only=()):
    """(name, tinytensor step, torch step) per op. Both sides get the same arrays; each case's
    forward outputs are checked to agree before anything is timed."""
    import numpy as np
    import torch
    import torch.nn.functional as TF
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(0)
    for name, fn, shapes, int_input in _spec(small):
        if only and not any(w in name for w in only):
            continue
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        tt_ins = [tt.tensor(a, requires_grad=True) for a in arrays]
        th_ins = [torch.tensor(a, requires_grad=True) for a in arrays]
        if int_input is not None:
            ids = rng.integers(0, int_input[0], int_input[1])
            tt_ins.append(tt.tensor(ids))
            th_ins.append(torch.tensor(ids))
        out_tt, out_th = fn(tt, F, *tt_ins), fn(torch, TF, *th_ins)
        np.testing.assert_allclose(out_tt.detach().numpy(), out_th.detach().numpy(), rtol=2e-4, atol=2e-4,
                                   err_msg=name)
        g = rng.standard_normal(out_th.shape).astype(np.float32) if out_th.dim() else None
        g_tt, g_th = (tt.tensor(g), torch.tensor(g)) if g is not None else (None, None)
        yield (name, _step(fn, tt, F, tt_ins, g_tt), _step(fn, torch, TF, th_ins, g_th))


def _step(fn, lib, F, ins, grad):
    leaves = [t for t in ins if t.requires_grad]

    def step():
        for t in leaves:
            t.grad = None
        out = fn(lib, F, *ins)
        out.backward() if grad is None else out.backward(grad)
    return step


def cpu_model():
    """The CPU as a benchmark line must name it: lscpu's "Model name" (a VM may say only
    "AMD EPYC", which spans several generations), with the family and model numbers, the
    widest vector unit, and the kernel set OpenBLAS runs (numbers of NumPy's matmuls
    depend on it: $OPENBLAS_CORETYPE can hold a newer CPU to an older set)."""
    import platform
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = info.get("model name") or platform.processor() or platform.machine()
    details = []
    if "cpu family" in info:
        details.append(f"family {info['cpu family']} model {info.get('model', '?')}")
    flags = set(info.get("flags", "").split())
    if flags:
        details.append("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2")
    from tinytensor.blas_threads import blas
    b = blas()
    core = b.corename() if b is not None else None
    if core:
        details.append(f"OpenBLAS {core}")
    return f"{name} ({', '.join(details)})" if details else name
