"""Benchmarks: tinytensor against PyTorch on the CPU, measured in the same run.

    python tools/bench.py [--threads 2] [--repeat 15] [--markdown]   # engine: per-op and large ops
    python tools/bench.py kernels [--gpu] [--quick]                   # fused kernels (tools/bench_kernels.py)
    python tools/bench.py train [--markdown]                          # GPT training step (tools/bench_train.py)

Both libraries get the same number of threads (NumPy's BLAS through the environment,
torch through set_num_threads). Each case reports the median of several timed runs
after warm-up, and the ratio tinytensor / torch (below 1.0 means tinytensor is faster).
Benchmarks never gate CI: they print numbers, they do not assert on them.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tools.timing import median_times, set_threads  # noqa: E402


def _parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="other suites: `bench.py train --help` (a GPT-2 training "
                                        "step), `bench.py kernels --help` (fused kernels)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=15, help="timed runs per case (median reported)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    return ap.parse_args()


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


def main():
    args = _parse()
    set_threads(args.threads)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import platform
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    import tinytensor as tt

    rows = []
    for name, f_tt, f_th, inner in cases():
        t_tt, t_th = median_times(f_tt, f_th, args.repeat, inner)
        rows.append((name, t_tt, t_th, t_tt / t_th))
        if not args.markdown:
            print(f"{name:48s} tinytensor {t_tt * 1e3:9.3f} ms   torch {t_th * 1e3:9.3f} ms   "
                  f"ratio {t_tt / t_th:5.2f}", flush=True)
    cpu = platform.processor() or platform.machine()
    print(f"\nmachine: {cpu}, {os.cpu_count()} cores, {args.threads} threads; numpy {np.__version__}, "
          f"torch {torch.__version__}, tinytensor {tt.__version__}")
    if args.markdown:
        print("\n| benchmark | tinytensor (ms) | torch (ms) | ratio |\n|---|---:|---:|---:|")
        for name, a, b, r in rows:
            print(f"| {name} | {a * 1e3:.3f} | {b * 1e3:.3f} | {r:.2f} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["kernels"]:
        from tools.bench_kernels import kernels_main
        kernels_main(sys.argv[2:])
    elif sys.argv[1:2] == ["train"]:
        from tools.bench_train import train_main
        train_main(sys.argv[2:])
    else:
        main()
