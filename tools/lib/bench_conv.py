"""Convolution and pooling benchmarks (`python tools/bench.py conv`): tinytensor against torch
on the CPU, float32, forward + backward of input, weight and bias. The headline case is a
ResNet-like 3x3 conv, N=8, 64 -> 64 channels, 32x32, stride 1, padding 1."""


def conv_cases():
    """(name, tinytensor step, torch step) for each case; both sides start from the same
    arrays, and their outputs are checked to agree before anything is timed."""
    import numpy as np
    import torch
    import torch.nn.functional as TF
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(0)

    def make(*shape, scale=1.0):
        a = (rng.standard_normal(shape) * scale).astype(np.float32)
        return tt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)

    def steps(tt_fn, th_fn, tt_ins, th_ins):
        np.testing.assert_allclose(tt_fn(*tt_ins).detach().numpy(), th_fn(*th_ins).detach().numpy(),
                                   rtol=1e-3, atol=1e-3)

        def tt_step():
            for t in tt_ins:
                t.grad = None
            tt_fn(*tt_ins).sum().backward()

        def th_step():
            for t in th_ins:
                t.grad = None
            th_fn(*th_ins).sum().backward()
        return tt_step, th_step

    x, xt = make(8, 64, 32, 32)
    w, wt = make(64, 64, 3, 3, scale=0.05)
    b, bt = make(64)
    yield ("conv2d 3x3 N=8 64->64 32x32 pad 1 (ResNet), fwd+bwd",
           *steps(lambda a, c, d: F.conv2d(a, c, d, padding=1), lambda a, c, d: TF.conv2d(a, c, d, padding=1),
                  [x, w, b], [xt, wt, bt]))
    w2, w2t = make(128, 64, 3, 3, scale=0.05)
    yield ("conv2d 3x3 N=8 64->128 32x32 stride 2 pad 1, fwd+bwd",
           *steps(lambda a, c: F.conv2d(a, c, stride=2, padding=1),
                  lambda a, c: TF.conv2d(a, c, stride=2, padding=1), [x, w2], [xt, w2t]))
    p, pt = make(8, 3, 224, 224)
    wp, wpt = make(192, 3, 16, 16, scale=0.02)
    yield ("conv2d 16x16 stride 16 N=8 3->192 224x224 (ViT patches), fwd+bwd",
           *steps(lambda a, c: F.conv2d(a, c, stride=16), lambda a, c: TF.conv2d(a, c, stride=16),
                  [p, wp], [pt, wpt]))
    a1, a1t = make(8, 80, 300)
    w1, w1t = make(192, 80, 3, scale=0.05)
    yield ("conv1d k=3 N=8 80->192 L=300 pad 1 (Whisper front end), fwd+bwd",
           *steps(lambda a, c: F.conv1d(a, c, padding=1), lambda a, c: TF.conv1d(a, c, padding=1),
                  [a1, w1], [a1t, w1t]))
    yield ("max_pool2d 3x3 stride 2 pad 1 N=8 C=64 32x32, fwd+bwd",
           *steps(lambda a: F.max_pool2d(a, 3, 2, 1), lambda a: TF.max_pool2d(a, 3, 2, 1), [x], [xt]))
    yield ("avg_pool2d 2x2 N=8 C=64 32x32, fwd+bwd",
           *steps(lambda a: F.avg_pool2d(a, 2), lambda a: TF.avg_pool2d(a, 2), [x], [xt]))


def batch_norm_cases():
    """BatchNorm2d training forward + backward (input, weight, bias) at two ResNet sizes."""
    import numpy as np
    import torch
    import torch.nn.functional as TF
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(1)
    for n, c, hw in ((8, 64, 32), (32, 256, 8)):
        a = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
        w = rng.uniform(0.5, 1.5, c).astype(np.float32)
        ins = [tt.tensor(v, requires_grad=True) for v in (a, w, w * 0.1)]
        tins = [torch.tensor(v, requires_grad=True) for v in (a, w, w * 0.1)]
        np.testing.assert_allclose(F.batch_norm(ins[0], None, None, ins[1], ins[2], True).detach().numpy(),
                                   TF.batch_norm(tins[0], None, None, tins[1], tins[2], True).detach().numpy(),
                                   rtol=1e-3, atol=1e-3)

        def step(f, xs, m, c=c):
            def run():
                for t in xs:
                    t.grad = None
                (f(xs[0], m.zeros(c), m.ones(c), xs[1], xs[2], True) ** 2).sum().backward()
            return run
        yield (f"batch_norm train N={n} C={c} {hw}x{hw}, fwd+bwd (with running stats)",
               step(F.batch_norm, ins, tt), step(TF.batch_norm, tins, torch))


def run_resnet(repeat, batch=8, size=64, rounds=3, compiled=False, markdown=False):
    """ResNet-18 training steps (forward, cross-entropy, backward, SGD with momentum) in
    float32, models.resnet.resnet18 against the torch twin with the same weights, timed
    alternately in the same process; `rounds` separate measurements of `repeat` steps each,
    so the ratio's spread between rounds is printed beside its median."""
    import time

    import numpy as np
    import torch

    from tinytensor import nn
    import tinytensor as tt
    from tinytensor.models.resnet import resnet18
    from tinytensor.tools.lib.torch_resnet import torch_resnet18
    from tinytensor.tools.lib.timing import median_n
    from tinytensor.tools.lib.training import classifier_step

    torch.manual_seed(0)
    theirs = torch_resnet18(100)
    ours = resnet18(num_classes=100)
    ours.load_state_dict(theirs.state_dict())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    y = rng.integers(0, 100, batch)
    xt, yt, xo, yo = torch.tensor(x), torch.tensor(y), tt.tensor(x), tt.tensor(y)
    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.01, momentum=0.9)
    opt_o = nn.optim.SGD(ours.parameters(), lr=0.01, momentum=0.9)

    step_ours = classifier_step

    def step_torch():
        opt_t.zero_grad()
        loss = torch.nn.functional.cross_entropy(theirs(xt), yt)
        loss.backward()
        opt_t.step()
        return loss

    first = float(step_ours(ours, opt_o, xo, yo).item()), float(step_torch().item())
    assert abs(first[0] - first[1]) < 1e-3 * abs(first[1]), f"first losses differ: {first}"
    fns, names = [lambda: step_ours(ours, opt_o, xo, yo), step_torch], ["eager", "torch"]
    if compiled:
        fast = tt.compile(step_ours)
        t = time.perf_counter()
        fast(ours, opt_o, xo, yo)
        print(f"tt.compile: first call (capture + C compile) {time.perf_counter() - t:.1f} s", flush=True)
        fns.insert(1, lambda: fast(ours, opt_o, xo, yo))
        names.insert(1, "compiled")
    per_round = [median_n(fns, repeat, settle=1) for _ in range(rounds)]
    med = [sorted(r[k] for r in per_round)[len(per_round) // 2] for k in range(len(fns))]
    ratios = [[r[k] / r[-1] for r in per_round] for k in range(len(fns) - 1)]
    head = f"ResNet-18 training step, N={batch} 3x{size}x{size}, float32, SGD momentum"
    if markdown:
        print(f"| {head} | " + " | ".join(f"{n} (ms)" for n in names) + " | "
              + " | ".join(f"{n} / torch (range)" for n in names[:-1]) + " |")
        print("|---|" + "---:|" * (2 * len(names) - 1))
        print("| median of rounds | " + " | ".join(f"{m * 1e3:.1f}" for m in med) + " | "
              + " | ".join(f"{np.median(r):.2f} ({min(r):.2f}-{max(r):.2f})" for r in ratios) + " |")
    else:
        print(head)
        for k, n in enumerate(names):
            extra = "" if k == len(names) - 1 else (f"   ratio {np.median(ratios[k]):.2f} "
                                                     f"(rounds {min(ratios[k]):.2f}-{max(ratios[k]):.2f})")
            print(f"  {n:9s} {med[k] * 1e3:9.1f} ms{extra}", flush=True)
