"""Every op_db entry tinytensor has, against torch on OpInfo's own samples (harness.py).

The list is not written here: an op joins the moment tinytensor has its name, so a new op
is checked against torch's samples without anyone remembering to add it. float64 checks
values and first-order gradients on every sample; float32 a strided subset of them. CI
runs a strided subset of each op's samples (CAP), leaving out the few very large ones
(MAX_NUMEL elements); TINYTENSOR_OPINFO_FULL=1 runs them all. A known failure always runs
all of its samples, so that its strict xfail holds whichever sample fails.
"""
import os

import pytest

from .harness import check_op, op_db, tinytensor_function
from .known_failures import KNOWN_FAILURES

FULL = os.environ.get("TINYTENSOR_OPINFO_FULL") == "1"
CAP = {"float64": None if FULL else 40, "float32": None if FULL else 10}
MAX_NUMEL = None if FULL else 5000


def known(name, variant, dtype):
    return KNOWN_FAILURES.get((name, variant, dtype), KNOWN_FAILURES.get((name, variant)))


def _check(name, variant, dtype):
    if known(name, variant, dtype):
        check_op(name, variant=variant, dtype=dtype)
    else:
        check_op(name, variant=variant, dtype=dtype, cap=CAP[dtype], max_numel=MAX_NUMEL)


def _entries():
    try:
        db = op_db()
    except pytest.skip.Exception:
        return []
    return sorted(k for k in db if tinytensor_function(k[0]) is not None)


def _params(dtype):
    for name, variant in _entries():
        why = known(name, variant, dtype)
        marks = pytest.mark.xfail(strict=True, reason=why) if why else ()
        yield pytest.param(name, variant, id=f"{name}.{variant}" if variant else name, marks=marks)


@pytest.mark.parametrize("name, variant", list(_params("float64")))
def test_float64(name, variant):
    _check(name, variant, "float64")


@pytest.mark.parametrize("name, variant", list(_params("float32")))
def test_float32(name, variant):
    _check(name, variant, "float32")


def test_known_failures_are_ops_tinytensor_has():
    """A known failure of an op that is gone, or misspelt, would xfail forever unseen."""
    entries = set(_entries())
    if not entries:
        pytest.skip("op_db needs expecttest")
    assert not {k[:2] for k in KNOWN_FAILURES} - entries
