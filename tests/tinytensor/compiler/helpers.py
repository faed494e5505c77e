"""Shared programs for the compiler tests: small models, steps, and captures of them."""
import numpy as np

from tinytensor import models
from tinytensor import nn
import tinytensor as tt
from tinytensor.compiler import interpret
from tinytensor.compiler.capture import capture, flatten_tensors


def mlp(seed=0):
    tt.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def gpt(seed=0, drop=0.0):
    tt.manual_seed(seed)
    return models.GPT(models.GPTConfig(vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                       resid_pdrop=drop, embd_pdrop=drop, attn_pdrop=drop))


def training_step(loss_fn, create_graph=False):
    """step(m, opt, *batch): loss_fn(m, *batch), zero_grad, backward, opt.step(); returns the
    loss. create_graph=True is the backward the capture records (each op's `backward` in
    ops), the eager reference a compiled step equals bit for bit with fusion off."""
    def step(m, opt, *batch):
        loss = loss_fn(m, *batch)
        opt.zero_grad()
        loss.backward(create_graph=create_graph)
        opt.step()
        return loss
    return step


def lm_loss(m, ids):
    return m(ids, labels=ids).loss


def mse_step(m, x, y):
    loss = ((m(x) - y) ** 2).mean()
    loss.backward()
    return loss


def lm_step(m, ids):
    loss = m(ids, labels=ids).loss
    loss.backward()
    return loss


def bound_arrays(meta, args, kwargs=None):
    tensors = flatten_tensors((args, kwargs or {}))
    return [tensors[x].data if k == "arg" else x.data if k == "param"
            else tensors[x[1]].grad.data if k == "arg_grad" else x.grad.data
            for k, x in meta.bindings]


def captured(step, args):
    """(program, captured output arrays (result, then grads), input arrays)."""
    program, result, meta = capture(step, args)
    outs = [t.data for t in flatten_tensors(result)]
    outs += [p.grad.data for p, k in meta.grads if k is not None]
    return program, outs, bound_arrays(meta, args)


def assert_bitwise(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert g.tobytes() == w.tobytes(), float(np.abs(g.astype(float) - w).max())


def interpreted(program, arrays):
    return interpret.run(program, arrays)


def train_run(make, opt_cls, batches, step, opts):
    """Losses and final parameters of one run, with the learning rate decaying each step
    (a schedule must not recompile: lr is a program input)."""
    m = make()
    opt = opt_cls(m.parameters(), **opts)
    losses = []
    for i, batch in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = 1e-2 * (1 - i / len(batches))
        losses.append(float(step(m, opt, *batch).data))
    return losses, [p.data.copy() for p in m.parameters()], m, opt


def random_tensor(shape, seed=0):
    return tt.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def agrees_dynamic(fn, shapes, backend="numpy"):
    """fn compiled with dynamic=True returns what fn returns, at each shape in turn (the
    first call captures, the others replay unless a guard fails); the compiled function."""
    fast = tt.compile(fn, backend=backend, dynamic=True)
    for k, shape in enumerate(shapes):
        x = random_tensor(shape, seed=k)
        want, got = fn(x), fast(x)
        assert got.shape == want.shape, f"at {shape}: shape {got.shape}, eager {want.shape}"
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"at input shape {shape}")
    return fast
