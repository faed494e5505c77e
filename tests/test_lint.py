"""ruff over the whole tree with pyproject.toml's [tool.ruff] rules (pyflakes-level: unused
or undefined names, redefinitions, comparisons that are bugs): a name left behind by a move
fails the suite, in seconds. Part of the suite rather than a step of .ci/run, so that the
README's one test command is the whole check."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_finds_nothing():
    try:
        import ruff  # noqa: F401  (the test extra installs it)
    except ImportError:
        if shutil.which("ruff") is None:
            pytest.skip("ruff is not installed (pip install -e '.[test]')")
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
