"""Benchmarks: tinytensor against PyTorch, measured in the same run.

    python tools/bench.py [--threads 2] [--repeat 15] [--markdown]   # engine: per-op and large ops
    python tools/bench.py kernels [--gpu] [--quick]                   # fused kernels, CPU and CUDA
    python tools/bench.py train [--markdown]                          # a GPT-2 training step
    python tools/bench.py train --model nanogpt [--markdown]          # nanoGPT's iteration: eager, compiled, torch
    python tools/bench.py compile [--markdown]                        # generated C vs eager
    python tools/bench.py dist [--markdown]                           # 1 vs 2 MPI processes (DDP)
    python tools/bench.py conv [--markdown]                           # convolutions and pooling, fwd+bwd
    python tools/bench.py conv --resnet [--compiled] [--rounds 3]     # a ResNet-18 training step vs torch
    python tools/bench.py ops [--markdown]                            # one hot op each, fwd+bwd, worst first
    python tools/bench.py rnn [--markdown]                            # a 2-layer LSTM, fwd+bwd, eager and compiled
    python tools/bench.py func [--rounds 5] [--markdown]              # tt.func vs torch.func: per-sample grads, hvp

Both libraries get the same number of threads (NumPy's BLAS through the environment,
torch through set_num_threads). Each case reports the median of several timed runs
after warm-up, and the ratio tinytensor / torch (below 1.0 means tinytensor is faster).
Benchmarks never gate CI: they print numbers, they do not assert on them.
"""
import argparse
import json
import os
import sys

from tinytensor.tools.lib import bench_compile, bench_dist, bench_engine, bench_kernels, bench_train
from tinytensor.tools.lib import bench_conv, bench_nanogpt, bench_ops
from tinytensor.tools.lib import bench_rnn
from tinytensor.tools.lib import bench_func
from tinytensor.tools.lib.timing import median_n, set_threads

# suite: (its --help text, the default of --repeat, the default of --rounds: None where the
# suite measures in one round)
SUITES = {None: (__doc__, 15, None), "kernels": (bench_kernels.__doc__, 5, None),
          "train": (bench_train.__doc__, 7, None), "dist": (bench_dist.__doc__, 5, None),
          "compile": (bench_compile.__doc__, 15, None), "conv": (bench_conv.__doc__, 7, 3),
          "ops": (bench_ops.__doc__, 7, 3), "rnn": (bench_rnn.__doc__, 7, None),
          "func": (bench_func.__doc__, 5, 5)}


def parser(suite=None):
    doc, repeat, rounds = SUITES[suite]
    ap = argparse.ArgumentParser(prog="bench.py" + (f" {suite}" if suite else ""), description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    # the options every suite reads, then each suite's own
    ap.add_argument("--threads", type=int, default=2,
                    help="threads for NumPy's BLAS and for torch (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=repeat,
                    help="timed runs per case; the median is reported (default: %(default)s)")
    if rounds is not None:
        ap.add_argument("--rounds", type=int, default=rounds,
                        help=("with --resnet: " if suite == "conv" else "")
                        + "separate measurements, for the ratio's range (default: %(default)s)")
    if suite != "kernels":  # kernels prints its own report (and JSON under $OUT)
        ap.add_argument("--markdown", action="store_true",
                        help="print a Markdown table instead of one line per case")
    if suite == "kernels":
        ap.add_argument("--gpu", action="store_true",
                        help="only the CUDA benchmarks; fails without a usable CUDA device")
        ap.add_argument("--quick", action="store_true",
                        help="a smaller CUDA attention sweep (T = 512, 2048, 8192)")
        ap.epilog = "With $OUT set, the numbers also go to $OUT/bench_kernels.json."
    elif suite == "train":
        ap.add_argument("--model", choices=("gpt2", "nanogpt"), default="gpt2",
                        help="gpt2: models.GPT against transformers' GPT-2; nanogpt: a nanoGPT "
                             "iteration, eager and compiled, against torch (default: %(default)s)")
    elif suite == "conv":
        ap.add_argument("--resnet", action="store_true",
                        help="time a ResNet-18 training step (models.resnet) against torch instead")
        ap.add_argument("--compiled", action="store_true", help="with --resnet: tt.compile's step too")
        ap.add_argument("--batch", type=int, default=8, help="with --resnet: batch size (default: %(default)s)")
        ap.add_argument("--size", type=int, default=64, help="with --resnet: image side (default: %(default)s)")
    elif suite == "func":
        ap.add_argument("--tiny", action="store_true",
                        help="tiny models (a smoke test of the suite, not a measurement)")
    elif suite == "ops":
        ap.add_argument("--only", default="",
                        help="comma-separated substrings: time only the cases whose name has one")
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    suite = argv[0] if argv[:1] and not argv[0].startswith("-") else None
    if suite is not None and suite not in SUITES:
        named = [name for name in SUITES if name]
        parser().error(f"unknown suite {suite!r}; choose {', '.join(named[:-1])} or {named[-1]} "
                       "(or none: the engine)")
    args = parser(suite).parse_args(argv[1:] if suite else argv)
    if args.threads < 1 or args.repeat < 1 or getattr(args, "rounds", 1) < 1:
        parser(suite).error("--threads, --repeat and --rounds must be at least 1")
    set_threads(args.threads)
    {None: engine, "kernels": kernels, "train": train, "dist": dist, "compile": compile_, "conv": conv,
     "ops": ops, "rnn": rnn, "func": func}[suite](args)


def _torch_threads(n):
    import torch
    torch.set_num_threads(n)
    return torch


def _table(rows, digits):
    print("| benchmark | tinytensor (ms) | torch (ms) | ratio |\n|---|---:|---:|---:|")
    for name, a, b in rows:
        print(f"| {name} | {a * 1e3:.{digits}f} | {b * 1e3:.{digits}f} | {a / b:.2f} |")


def _measure(args, cases, name_width, ms_format, settle=0, gap=0.0):
    """Times each case (name, f_tt, f_th[, inner calls per timing]) into rows (name, seconds
    tinytensor, seconds torch); without --markdown each case is printed as soon as it is
    measured, so a long run shows its progress. settle, gap: untimed calls at the start of
    each library's turn and seconds slept before them (timing.median_n)."""
    rows = []
    for name, f_tt, f_th, *inner in cases:
        a, b = median_n([f_tt, f_th], args.repeat, *(inner or [1]), settle=settle, gap=gap)
        rows.append((name, a, b))
        if not args.markdown:
            print(f"{name:{name_width}s} tinytensor {a * 1e3:{ms_format}} ms   "
                  f"torch {b * 1e3:{ms_format}} ms   ratio {a / b:5.2f}", flush=True)
    return rows


def engine(args):
    import platform
    import numpy as np
    import tinytensor as tt
    torch = _torch_threads(args.threads)
    rows = _measure(args, bench_engine.cases(), 48, "9.3f")
    cpu = platform.processor() or platform.machine()
    print(f"\nmachine: {cpu}, {os.cpu_count()} cores, {args.threads} threads; numpy {np.__version__}, "
          f"torch {torch.__version__}, tinytensor {tt.__version__}")
    if args.markdown:
        print()
        _table(rows, 3)


def kernels(args):
    if args.gpu:
        import tinytensor as tt
        try:
            tt.device("cuda").xp
        except RuntimeError as e:
            raise SystemExit(f"bench.py kernels --gpu: {e}\nnothing was measured")
    else:
        _torch_threads(args.threads)
    results = bench_kernels.run_kernels(args.repeat, gpu_only=args.gpu, quick=args.quick)
    out_dir = os.environ.get("OUT")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "bench_kernels.json"), "w") as f:
            json.dump(results, f, indent=1, default=float)


def train(args):
    _torch_threads(args.threads)
    if args.model == "nanogpt":
        import numpy as np
        import torch
        import tinytensor as tt
        print(f"CPU: {bench_ops.cpu_model()}, {os.cpu_count()} cores, {args.threads} threads each "
              f"(load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}); numpy {np.__version__}, "
              f"torch {torch.__version__}, tinytensor {tt.__version__}", flush=True)
        bench_nanogpt.run(args.repeat, markdown=args.markdown)
        return
    rows = _measure(args, bench_train.train_cases(), 46, "8.1f")
    if args.markdown:
        _table(rows, 1)


def dist(args):
    # one thread per process whatever --threads says: the comparison is 1 core against 2
    bench_dist.run(args.repeat, markdown=args.markdown)


def compile_(args):
    import platform
    import numpy as np
    import tinytensor as tt
    from tinytensor.compiler.codegen import toolchain
    torch = _torch_threads(args.threads)
    rows = bench_compile.run_compile(args.repeat)
    cpu = platform.processor() or platform.machine()
    print(f"\nmachine: {cpu}, {os.cpu_count()} cores, {args.threads} threads for torch and BLAS "
          f"(the generated C: tt.compile's default, as many as BLAS); numpy {np.__version__}, torch {torch.__version__}, "
          f"tinytensor {tt.__version__}; C flags {' '.join(toolchain.FLAGS)}")
    if args.markdown:
        print("\n| benchmark | compiled (ms) | eager (ms) | torch (ms) | eager / compiled | torch / compiled |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, a, e, t, _ in rows:
            print(f"| {name} | {a * 1e3:.3f} | {e * 1e3:.3f} | {t * 1e3:.3f} | {e / a:.2f} | {t / a:.2f} |")



def conv(args):
    torch = _torch_threads(args.threads)
    if args.resnet:
        print(f"CPU: {bench_ops.cpu_model()}, {os.cpu_count()} cores, {args.threads} threads each "
              f"(load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}); torch {torch.__version__}; "
              f"median of {args.repeat} steps per round", flush=True)
        bench_conv.run_resnet(args.repeat, args.batch, args.size, args.rounds, args.compiled, args.markdown)
        return
    import itertools
    cases = itertools.chain(bench_conv.conv_cases(), bench_conv.batch_norm_cases())
    rows = _measure(args, cases, 66, "8.1f", settle=1, gap=0.03)   # as ops: `ops` says why
    if args.markdown:
        _table(rows, 1)


def rnn(args):
    import numpy as np
    torch = _torch_threads(args.threads)
    print(f"CPU: {bench_ops.cpu_model()}, {os.cpu_count()} cores, {args.threads} threads each; "
          f"median of {args.repeat}; numpy {np.__version__}, torch {torch.__version__}", flush=True)
    rows = _measure(args, bench_rnn.rnn_cases(), 60, "8.2f")
    if args.markdown:
        _table(rows, 2)


def func(args):
    import numpy as np
    import tinytensor as tt
    torch = _torch_threads(args.threads)
    print(f"CPU: {bench_ops.cpu_model()}, {os.cpu_count()} cores, {args.threads} threads each "
          f"(load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}); median of {args.repeat} "
          f"per round, {args.rounds} rounds; numpy {np.__version__}, torch {torch.__version__}, "
          f"tinytensor {tt.__version__}", flush=True)
    rows = bench_func.measure(args.repeat, args.rounds, tiny=args.tiny,
                              out=(lambda line: None) if args.markdown else (lambda line: print(line, flush=True)))
    if args.markdown:
        print()
        print(bench_func.markdown(rows))


def ops(args):
    """Every case is built and checked against torch first, then timed in --rounds rounds,
    printed as it goes; the table sorts them worst median ratio first, so the cliffs head
    the list, each with its ratio's range over the rounds."""
    import numpy as np
    import tinytensor as tt
    torch = _torch_threads(args.threads)
    keep = [w for w in args.only.split(",") if w]
    cases = list(bench_ops.ops_cases(only=keep))   # built (and checked against torch) once
    # the other library's threads spin on after its call (torch's OpenMP workers ~10 ms, our
    # C pool) and would slow this one's, which a training loop of one library never sees.
    # Each round times every case again (a median of --repeat), so the range shows how far
    # one measurement moves: on the 2-core Zen 5 VM a 2-thread sigmoid's ratio went from 0.5
    # to 1.9 between runs (2026-12-02)
    rounds = []
    for r in range(args.rounds):
        if not args.markdown and args.rounds > 1:
            print(f"round {r + 1} of {args.rounds}", flush=True)
        rounds.append(_measure(args, cases, 36, "8.2f", settle=1, gap=0.03))
    print(f"\nCPU: {bench_ops.cpu_model()}, {os.cpu_count()} cores, {args.threads} threads each; "
          f"median of {args.repeat} per round, {args.rounds} round(s); numpy {np.__version__}, "
          f"torch {torch.__version__}, tinytensor {tt.__version__}")
    print()
    _ranges_table(rounds)


def _ranges_table(rounds):
    """The cases of several rounds: median over rounds of each time and of the ratio, with
    the ratio's range (min-max over rounds), worst median ratio first."""
    import statistics
    rows = []
    for per_case in zip(*rounds):
        ratios = [a / b for _, a, b in per_case]
        rows.append((per_case[0][0], statistics.median(a for _, a, _ in per_case),
                     statistics.median(b for _, _, b in per_case), statistics.median(ratios),
                     min(ratios), max(ratios)))
    rows.sort(key=lambda r: r[3], reverse=True)
    print("| benchmark | tinytensor (ms) | torch (ms) | ratio | ratio range |\n|---|---:|---:|---:|---:|")
    for name, a, b, ratio, lo, hi in rows:
        print(f"| {name} | {a * 1e3:.2f} | {b * 1e3:.2f} | {ratio:.2f} | {lo:.2f}–{hi:.2f} |")


if __name__ == "__main__":
    main()
