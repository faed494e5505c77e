"""How much of torch's operator database tinytensor has, and which names are missing.

    python -m tests.tinytensor.opinfo.coverage            # counts by namespace
    python -m tests.tinytensor.opinfo.coverage --missing  # and every missing name

Names torch keeps for itself (a leading underscore, `jiterator_*`, `torch.ops.*`,
`sparse.*`, `to_sparse`, and entries that test an aten overload no Python API exposes, as
`slice` tests `aten.slice`) are not counted: they are torch's internals, not its API.
"""
import collections
import warnings

from tests.coverage_report import report

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
    report(__doc__, coverage, lambda have, total: f"tinytensor has {have} of op_db's {total} public op names",
           rows=lambda cov: sorted(cov.items(), key=lambda kv: -len(kv[1][1])), width=22)

if __name__ == "__main__":
    main()
