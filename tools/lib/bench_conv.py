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
