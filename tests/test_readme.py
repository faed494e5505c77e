"""The README's Python examples run as written, each block on its own (a fresh namespace,
in an empty directory), and print what the README shows.

A ```python block is run; when a ```text block follows it directly, that text is exactly
what the block must print. A block whose first line says `mpiexec -n 2 python NAME.py` is
saved as NAME.py and run that way (rank 0 prints). Every Python block runs: none is left as
an untested illustration."""
import contextlib
import io
import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")
# a python block, then optionally (only blank lines between) the text block of its output
BLOCK = re.compile(r"```python\n(.*?)```(?:\s*\n```text\n(.*?)```)?", re.S)


def _blocks():
    text = open(README).read()
    found = []
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 2  # the first line of code
        found.append(pytest.param(match.group(1), match.group(2), line, id=f"README.md:{line}"))
    return found


def test_readme_has_examples_with_shown_output():
    blocks = _blocks()
    assert len(blocks) >= 4, "the README has lost its tour"
    assert sum(b.values[1] is not None for b in blocks) >= 3, "the tour should show what it prints"


def test_every_python_block_is_run():
    text = open(README).read()
    untested = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r"^```(py|python3)\n", text, re.M)]
    assert not untested, f"README.md lines {untested}: mark them ```python and make them run"


MPI_SCRIPT = re.compile(r"run it with: mpiexec -n 2 python (\w+\.py)")


@pytest.mark.parametrize("code,expected,line", _blocks())
def test_readme_example_runs_alone_and_prints_what_it_shows(code, expected, line, tmp_path,
                                                          monkeypatch):
    script = MPI_SCRIPT.search(code.split("\n", 1)[0])
    if script:
        return _run_under_mpiexec(code, expected, script.group(1), tmp_path)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    # pad with blank lines so a traceback points at the README's own line numbers
    source = "\n" * (line - 1) + code
    with contextlib.redirect_stdout(out):
        exec(compile(source, "README.md", "exec"), {"__name__": "__readme__"})
    if expected is not None:
        got = [ln.rstrip() for ln in out.getvalue().rstrip().splitlines()]
        assert got == [ln.rstrip() for ln in expected.rstrip().splitlines()]


def _run_under_mpiexec(code, expected, name, tmp_path):
    from tests.tinytensor.distributed.mpi import mpiexec, needs_mpi
    if needs_mpi.args[0]:
        pytest.skip(needs_mpi.kwargs["reason"])
    (tmp_path / name).write_text(code)
    proc = mpiexec([name], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if expected is not None:
        assert proc.stdout.split() == expected.split(), proc.stdout
