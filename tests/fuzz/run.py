"""Fuzz a reader of untrusted bytes with seeded mutations of real files.

    python -m tests.fuzz.run pickle --cases 20000 --seed 1     # torch_pickle.load_torch_bin
    python -m tests.fuzz.run safetensors --seconds 600          # nn.load
    python -m tests.fuzz.run hfjson --seconds 600               # HF-directory JSON files
    python -m tests.fuzz.run pickle --seed 1 --case 1234        # replay one case

Every case must end in a clean result or the reader's own error (CheckpointError;
ConfigError for the HF files): another exception, or a case over --case-cpu seconds of CPU,
is reported with the command that replays it, and the exit status is 1. The process runs
under --cpu-limit and --mem-limit (resource.setrlimit) once its seed files are made, so a
crash or a runaway case kills only it; each case's number is printed before it runs
("CASE n"), so the last one names the case that crashed. Case n of seed s is the same
mutation on every machine: random.Random(f"{s}:{n}").
"""
import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
import traceback

from . import targets

TARGETS = ("pickle", "safetensors", "hfjson")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=TARGETS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cases", type=int, default=None, help="how many cases (default: until --seconds)")
    p.add_argument("--seconds", type=float, default=60.0, help="time budget without --cases")
    p.add_argument("--case", type=int, default=None, help="run only this case (to replay it)")
    p.add_argument("--seeds", default=None, help="a directory of seed files already made")
    p.add_argument("--case-cpu", type=float, default=2.0, help="CPU seconds a case may take")
    p.add_argument("--cpu-limit", type=int, default=3600, help="CPU seconds for the whole run")
    p.add_argument("--mem-limit", type=int, default=3072, help="address space, MiB")
    p.add_argument("--quiet", action="store_true", help="no CASE lines")
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix=f"fuzz-{args.target}-")
    seeds_dir = args.seeds or _make_seeds(args.target, os.path.join(work, "seeds"))
    own = targets.own_errors(args.target)
    make_case = _case_maker(args.target, seeds_dir, work)  # imports the reader before the limits
    resource.setrlimit(resource.RLIMIT_CPU, (args.cpu_limit, args.cpu_limit + 1))
    mem = args.mem_limit << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    numbers = [args.case] if args.case is not None else _numbers(args.cases, args.seconds)
    counts, bugs, slowest = {"ok": 0, "own error": 0}, [], (0.0, -1)
    for n in numbers:
        if not args.quiet:
            print(f"CASE {n}", flush=True)
        run = make_case(random.Random(f"{args.seed}:{n}"))
        start = time.process_time()
        try:
            run()
            counts["ok"] += 1
        except own:
            counts["own error"] += 1
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 -- a bug to report, with how to replay it
            bugs.append(f"case {n}: {type(e).__name__}: {str(e)[:300]}\n{traceback.format_exc()}")
        cpu = time.process_time() - start
        if cpu > args.case_cpu:
            bugs.append(f"case {n}: took {cpu:.2f} s of CPU, more than --case-cpu {args.case_cpu}")
        slowest = max(slowest, (cpu, n))
    replay = f"python -m tests.fuzz.run {args.target} --seed {args.seed} --case N"
    for bug in bugs:
        print(f"BUG {bug}\n  replay: {replay}", flush=True)
    summary = dict(target=args.target, seed=args.seed, cases=len(numbers) if args.case is not None
                   else sum(counts.values()) + len({b.split(":")[0] for b in bugs}), **counts,
                   bugs=len(bugs), slowest_cpu_s=round(slowest[0], 3), slowest_case=slowest[1])
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 1 if bugs else 0


def _make_seeds(target, directory):
    os.makedirs(directory)
    getattr(targets, f"{target}_seeds")(directory)
    return directory


def _case_maker(target, seeds_dir, work):
    if target == "hfjson":
        dirs = targets.HFDirectories(seeds_dir, os.path.join(work, "dirs"))
        from tinytensor import models  # noqa: F401 -- imported now, under no limits
        from tinytensor.tools.lib import text  # noqa: F401
        import tokenizers  # noqa: F401
        return dirs.case
    seeds = {}
    for name in sorted(os.listdir(seeds_dir)):
        with open(os.path.join(seeds_dir, name), "rb") as f:
            seeds[name] = f.read()
    path = os.path.join(work, "case")
    case = getattr(targets, f"{target}_case")
    case(random.Random(0), seeds, path)  # imports the reader now
    return lambda rng: case(rng, seeds, path)


def _numbers(cases, seconds):
    if cases is not None:
        yield from range(cases)
        return
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        yield n
        n += 1


if __name__ == "__main__":
    sys.exit(main())
