"""The command line the coverage scripts share (tests/nn/coverage.py,
tests/tinytensor/opinfo/coverage.py): counts by group, `--missing` for every missing name."""
import argparse


def report(doc, coverage, headline, rows=lambda cov: cov.items(), width=8):
    """coverage() is {group: (names we have, names we miss)}; prints headline(have, total),
    then each group of rows(cov) as `have of total` (and its missing names with --missing)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="list every missing name")
    args = ap.parse_args()
    cov = coverage()
    have = sum(len(h) for h, _ in cov.values())
    total = sum(len(h) + len(m) for h, m in cov.values())
    print(headline(have, total))
    for group, (h, m) in rows(cov):
        print(f"  {group:{width}s} {len(h):4d} of {len(h) + len(m):4d}")
        if args.missing and m:
            print("      missing: " + " ".join(m))
