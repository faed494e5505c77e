"""How much of torch's operator database tinytensor has, and which names are missing.

    python -m tests.tinytensor.opinfo.coverage            # counts by namespace
    python -m tests.tinytensor.opinfo.coverage --missing  # and every missing name

Names torch keeps for itself (a leading underscore, `jiterator_*`, `torch.ops.*`,
`sparse.*`, `to_sparse`, and entries that test an aten overload no Python API exposes, as
`slice` tests `aten.slice`) are not counted: they are torch's internals, not its API.
"""
import argparse
import collections
import warnings

from .harness import op_db, tinytensor_function


def public(name):
    return not (name.startswith(("_", "jiterator_", "torch.", "sparse.")) or name == "to_sparse")


def namespace(name):
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "nn" else (parts[0] if len(parts) > 1 else "torch")


def coverage():
    """{namespace: (have, missing)} over op_db's public names."""
    import torch
    aten_only = {n for (n, _), op in op_db().items() if isinstance(op.op, torch._ops.OpOverload)}
    out = collections.defaultdict(lambda: ([], []))
    for name in sorted({n for n, _ in op_db() if public(n) and n not in aten_only}):
        out[namespace(name)][tinytensor_function(name) is None].append(name)
    return dict(out)


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="list every missing name")
    args = ap.parse_args()
    cov = coverage()
    have = sum(len(h) for h, _ in cov.values())
    total = sum(len(h) + len(m) for h, m in cov.values())
    print(f"tinytensor has {have} of op_db's {total} public op names")
    for ns, (h, m) in sorted(cov.items(), key=lambda kv: -len(kv[1][1])):
        print(f"  {ns:22s} {len(h):4d} of {len(h) + len(m):4d}")
        if args.missing and m:
            print("      missing: " + " ".join(m))


if __name__ == "__main__":
    main()
