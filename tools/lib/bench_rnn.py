"""Recurrent benchmarks (`python tools/bench.py rnn`): a 2-layer nn.LSTM against torch.nn.LSTM
on the CPU, float32, forward + backward (input and every parameter), same weights. The
sizes are PyTorch's word_language_model defaults (batch 20, 200 embedding and hidden units,
35 steps of backpropagation through time); the one-step case isolates what each time step
costs (the recurrent matmul, the gates and their backward); the fusion-off case runs the
cell as its ten reference ops instead of the fused cell (tinytensor/ops/recurrent.py); the
compiled case is the same 35-step step through tt.compile."""


def rnn_cases(compiled=True):
    """(name, tinytensor step, torch step) for each case; outputs are checked to agree first."""
    import numpy as np
    import torch
    import tinytensor as tt
    from tinytensor import nn

    rng = np.random.default_rng(0)

    def pair(T, B, H, layers=2):
        theirs = torch.nn.LSTM(H, H, layers)
        ours = nn.LSTM(H, H, layers)
        ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
        x = rng.standard_normal((T, B, H)).astype(np.float32)
        xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        np.testing.assert_allclose(ours(xo)[0].detach().numpy(), theirs(xt)[0].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)

        def tt_step():
            ours.zero_grad()
            xo.grad = None
            out, (h, c) = ours(xo)
            (out.sum() + c.sum()).backward()

        def th_step():
            theirs.zero_grad()
            xt.grad = None
            out, (h, c) = theirs(xt)
            (out.sum() + c.sum()).backward()

        def tt_compiled_step(m, x):
            out, (h, c) = m(x)
            loss = out.sum() + c.sum()
            loss.backward()
            return loss
        return tt_step, th_step, (ours, xo, tt_compiled_step)

    for T, what in ((35, "35 steps (word LM: B=20, H=200)"), (1, "1 step (B=20, H=200)")):
        tt_step, th_step, (m, x, fn) = pair(T, 20, 200)
        yield (f"LSTM 2 layers, {what}, fwd+bwd", tt_step, th_step)
        if T == 35:   # the fused cell's gain: the same step on the reference ops
            def reference_step(tt_step=tt_step):
                with tt.kernels.use_fusion(False):
                    tt_step()
            yield (f"LSTM 2 layers, {what}, fwd+bwd, reference cell (fusion off)", reference_step, th_step)
        if compiled and T == 35:
            f = tt.compile(fn)

            def compiled_step(f=f, m=m, x=x):
                m.zero_grad()
                f(m, x)
            yield (f"LSTM 2 layers, {what}, fwd+bwd, tt.compile", compiled_step, th_step)
