"""Per-sample gradients of a small MLP: tt.func.vmap(grad) against a Python loop of grads,
and torch.func.vmap(grad) / a torch loop measured in the same run (CPU, float32).

    PYTHONPATH=. python tools/bench_vmap.py [--batch 64] [--width 256] [--repeat 5]
"""
import argparse
import time

import numpy as np


def _best(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--inputs", type=int, default=128)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    import tinytensor as tt
    import tinytensor.functional as F
    from tinytensor.func import grad, vmap

    rng = np.random.default_rng(0)
    shapes = [(a.inputs, a.width), (a.width,), (a.width, a.classes), (a.classes,)]
    p_np = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in shapes]
    x_np = rng.standard_normal((a.batch, a.inputs)).astype(np.float32)
    y_np = rng.integers(0, a.classes, a.batch)

    def loss(p, x, y):
        h = (x @ p[0] + p[1]).relu()
        return F.cross_entropy((h @ p[2] + p[3]).unsqueeze(0), y.unsqueeze(0))

    params = [tt.tensor(v) for v in p_np]
    x, y = tt.tensor(x_np), tt.tensor(y_np)
    g = grad(loss)
    per_sample = vmap(g, in_dims=(None, 0, 0))
    t_vmap = _best(lambda: per_sample(params, x, y), a.repeat)
    t_loop = _best(lambda: [g(params, x[i], y[i]) for i in range(a.batch)], a.repeat)
    rows = [("tinytensor vmap(grad)", t_vmap), ("tinytensor loop of grad", t_loop)]
    try:
        import torch
        tp = [torch.tensor(v) for v in p_np]
        tx, ty = torch.tensor(x_np), torch.tensor(y_np)

        def tloss(p, x, y):
            h = (x @ p[0] + p[1]).relu()
            return torch.nn.functional.cross_entropy((h @ p[2] + p[3]).unsqueeze(0), y.unsqueeze(0))
        tg = torch.func.grad(tloss)
        tvm = torch.func.vmap(tg, in_dims=(None, 0, 0))
        rows.append(("torch.func vmap(grad)", _best(lambda: tvm(tp, tx, ty), a.repeat)))
        rows.append(("torch.func loop of grad",
                     _best(lambda: [tg(tp, tx[i], ty[i]) for i in range(a.batch)], a.repeat)))
    except ImportError:
        pass
    print(f"MLP {a.inputs}-{a.width}-{a.classes}, batch {a.batch}, float32, best of {a.repeat}")
    for name, t in rows:
        print(f"  {name:26s} {t * 1e3:9.2f} ms")
    print(f"  vmap speedup over the loop: {t_loop / t_vmap:.1f}x")


if __name__ == "__main__":
    main()
