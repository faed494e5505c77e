"""Differential fuzzer of tt.compile: random programs run eager and compiled, call after call.

    python tools/fuzz_compile.py --programs 2000                 # the long run (issue 22 §7)
    python tools/fuzz_compile.py --programs 200 --seed 5000 --backends c
    python tools/fuzz_compile.py --programs 500 --enable all     # known bugs' features too
    python tools/fuzz_compile.py --list-features

Each program (elementwise, reductions, softmax and norms, movement, matmul, indexing and
losses; float32 or float64; broadcasting, size-1 and odd sizes; forward, .backward() inside
the step or tt.grad) is compiled on each backend and called again with the same values in
fresh tensors, with new values, in another layout, with leaves already holding a .grad: each
call must give eager's bits (an exactly rounded program) or stay within 2x eager's error
against a float64 reference. A failure is shrunk to a minimal program and printed as a
script that reproduces it. Exits 1 if any program failed.
"""
import argparse
import sys
import time

from tinytensor.tools.lib.fuzz_programs import DEFAULT, FEATURES, KNOWN_BUGS
from tinytensor.tools.lib.fuzz_run import fuzz
from tinytensor.tools.lib.progress import progress


def features_of(args):
    chosen = set(FEATURES) if args.enable == "all" else set(DEFAULT)
    if args.enable and args.enable != "all":
        chosen |= set(args.enable.split(","))
    if args.disable:
        chosen -= set(args.disable.split(","))
    unknown = chosen - set(FEATURES)
    if unknown:
        raise SystemExit(f"fuzz_compile: unknown features {sorted(unknown)}; "
                         f"see --list-features")
    return frozenset(chosen)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fuzz_compile.py", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=100, help="how many programs to draw")
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed (then +1 each)")
    ap.add_argument("--backends", default="numpy,c", help="comma-separated: numpy, c, cuda")
    ap.add_argument("--enable", default="",
                    help="features to add to the default ones (comma-separated), or 'all'")
    ap.add_argument("--disable", default="", help="features to leave out (comma-separated)")
    ap.add_argument("--max-ops", type=int, default=8, help="ops per program, at most")
    ap.add_argument("--no-shrink", action="store_true", help="report failures as drawn")
    ap.add_argument("--progress-every", type=int, default=10, metavar="N",
                    help="when stdout is not a terminal (a log file), print a plain progress "
                         "line every N programs (default 10)")
    ap.add_argument("--list-features", action="store_true",
                    help="print the features (and the known bugs that keep some off) and exit")
    args = ap.parse_args(argv)
    if args.list_features:
        for name, what in FEATURES.items():
            off = f"   [off by default: {KNOWN_BUGS[name]}]" if name in KNOWN_BUGS else ""
            print(f"{name:15s} {what}{off}")
        return 0
    features = features_of(args)
    backends = tuple(b for b in args.backends.split(",") if b)
    bar = progress(range(args.seed, args.seed + args.programs), "fuzz")
    seen, done = [0], [0]
    # the bar redraws one terminal line; a log (nohup, CI) gets a plain line now and then
    plain = not sys.stdout.isatty() and args.progress_every > 0

    def on_program(seed, failures):
        for f in failures[seen[0]:]:
            bar.write(f.report() + "\n")
        seen[0] = len(failures)
        bar.set(failures=len(failures), seed=seed)
        done[0] += 1
        if plain and (done[0] % args.progress_every == 0 or done[0] == args.programs):
            print(f"fuzz: {done[0]}/{args.programs} programs (seeds {args.seed}-{seed}), "
                  f"{len(failures)} failures, {time.perf_counter() - start:.0f} s", flush=True)

    start = time.perf_counter()
    failures = fuzz(bar, features, backends, shrink_failures=not args.no_shrink,
                    max_ops=args.max_ops, on_program=on_program)
    bar.close()
    print(f"{args.programs} programs x {len(backends)} backends in "
          f"{time.perf_counter() - start:.0f} s: {len(failures)} failures; features: "
          f"{', '.join(sorted(features))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
