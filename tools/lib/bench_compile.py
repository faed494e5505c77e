"""Compiler benchmarks (`python tools/bench.py compile`): the generated C of a fused
program against eager tinytensor and torch eager, in one run.

Cases: a 5-op elementwise chain (x * 1.5 + 0.5) * x - 0.25, relu, float32, at 64K and 1M
elements; GELU (tanh) forward, and forward + backward, at 1M. "compiled" times the C
runner of the captured, fused program on the input arrays (the tt.compile call wrapper
around it is not included); eager and torch time the same step written with their ops.
"""
from tools.lib.timing import median_n


def chain(x):
    return ((x * 1.5 + 0.5) * x - 0.25).relu()


def compiled_runner(step, tensors):
    """The C runner of `step` captured on `tensors` and fused, and its input arrays."""
    from tinytensor.compiler.capture import capture
    from tinytensor.compiler.codegen import c
    from tinytensor.compiler.passes import fuse
    program, _, _ = capture(step, tuple(tensors))
    fused = fuse.run(program)
    runner = c.build(fused)
    arrays = [t.data for t in tensors]
    n_kernels = sum(ins.op == "fused" for ins in fused.instrs)
    return (lambda: runner(arrays)), n_kernels


def cases():
    """(name, compiled step, eager step, torch step, kernels)."""
    import numpy as np
    import torch
    import torch.nn.functional as TF
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(0)
    for n in (64 * 1024, 1024 * 1024):
        a = rng.standard_normal(n).astype(np.float32)
        x, xt = tt.tensor(a), torch.tensor(a)
        run, k = compiled_runner(chain, [x])
        yield (f"5-op elementwise chain, float32, {n // 1024}K", run,
               lambda x=x: chain(x), lambda xt=xt: torch.relu((xt * 1.5 + 0.5) * xt - 0.25), k)

    n = 1024 * 1024
    a = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    x, xt = tt.tensor(a), torch.tensor(a)
    gelu = lambda x: F.gelu(x, approximate="tanh")
    run, k = compiled_runner(gelu, [x])
    yield ("GELU (tanh) forward, float32, 1M", run, lambda: gelu(x),
           lambda: TF.gelu(xt, approximate="tanh"), k)

    xg, gg = tt.tensor(a, requires_grad=True), tt.tensor(g)
    xtg, gt = torch.tensor(a, requires_grad=True), torch.tensor(g)

    def step(x, g):
        y = gelu(x)
        y.backward(g)
        return y

    run, k = compiled_runner(step, [xg, gg])

    def eager_step():
        xg.grad = None
        step(xg, gg)

    def torch_step():
        xtg.grad = None
        TF.gelu(xtg, approximate="tanh").backward(gt)

    yield ("GELU (tanh) forward+backward, float32, 1M", run, eager_step, torch_step, k)


def run_compile(repeat):
    rows = []
    for name, f_c, f_e, f_t, kernels in cases():
        c, e, t = median_n([f_c, f_e, f_t], repeat)
        rows.append((name, c, e, t, kernels))
        print(f"{name:44s} compiled {c * 1e3:7.3f} ms ({kernels} kernel{'s' * (kernels != 1)})   "
              f"eager {e * 1e3:7.3f} ms   torch {t * 1e3:7.3f} ms   "
              f"eager/compiled {e / c:5.2f}x   torch/compiled {t / c:5.2f}x", flush=True)
    return rows
