"""Engine benchmarks (`python tools/bench.py`): per-op overhead and large ops, fwd+bwd,
tinytensor against PyTorch on the same inputs."""


def cases():
    """(name, tinytensor step, torch step, inner repetitions) for each benchmark."""
    import numpy as np
    import torch
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(0)

    def pair(*shape):
        a = rng.standard_normal(shape).astype(np.float32)
        return tt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)

    # per-op overhead: a chain of 31 small-tensor ops, forward + backward
    x, xt = pair(16, 16)
    w, wt = pair(16, 16)

    def chain(lib_x, lib_w):
        h = lib_x
        for _ in range(10):
            h = (h * lib_w + 1.0).tanh()
        return h.sum()

    def tt_chain():
        x.grad = w.grad = None
        chain(x, w).backward()

    def th_chain():
        xt.grad = wt.grad = None
        chain(xt, wt).backward()

    yield "per-op overhead: 31-op chain on 16x16, fwd+bwd", tt_chain, th_chain, 20

    a, at = pair(1024, 1024)
    b, bt = pair(1024, 1024)

    def tt_mm():
        a.grad = b.grad = None
        (a @ b).sum().backward()

    def th_mm():
        at.grad = bt.grad = None
        (at @ bt).sum().backward()

    yield "matmul 1024x1024 @ 1024x1024, fwd+bwd", tt_mm, th_mm, 1

    s, st = pair(4096, 4096)
    gs = rng.standard_normal((4096, 4096)).astype(np.float32)
    g_tt, g_th = tt.tensor(gs), torch.tensor(gs)

    def tt_sm():
        s.grad = None
        F.softmax(s, dim=-1).backward(g_tt)

    def th_sm():
        st.grad = None
        torch.softmax(st, dim=-1).backward(g_th)

    yield "softmax 4096x4096 (last dim), fwd+bwd", tt_sm, th_sm, 1
