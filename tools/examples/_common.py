"""What the worked examples share: their command line (--small first, --no-torch last,
the example's own options between) and the timed torch.func check beside our result."""
import argparse
import time


def parse_args(prog, doc, small_help, options, argv):
    """`prog --small [options] --no-torch`, described by the first paragraph of `doc`;
    options: (flag, keyword arguments of add_argument) pairs."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help=small_help)
    for flag, kwargs in options:
        ap.add_argument(flag, **kwargs)
    ap.add_argument("--no-torch", action="store_true", help="skip the torch.func check")
    return ap.parse_args(argv)


def timed(fn):
    """(fn(), the seconds it took)."""
    t = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t


def torch_check(result, check_torch, setup):
    """Adds "torch" and "torch_seconds" to result: the value of the function setup() returns
    and its time (setup itself, importing torch and copying the model, is not timed), or
    None and None without the check."""
    result["torch"], result["torch_seconds"] = timed(setup()) if check_torch else (None, None)
    return result
