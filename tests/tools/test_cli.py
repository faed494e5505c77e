"""tools/ as a package: thin programs whose --help is clean and complete, helpers in
tools.lib that are importable from anywhere and are not programs themselves."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
PROGRAMS = [("train.py",), ("graph.py",), ("train_mlp.py",), ("bench.py",),
            ("bench.py", "kernels"), ("bench.py", "train"), ("bench.py", "ops"), ("bench.py", "func"),
            ("generate.py",), ("embed.py",), ("fuzz_compile.py",)]
# this checkout's tinytensor, not whichever one is installed (a worktree's tests would
# otherwise run the programs against the main checkout's editable install)
CHECKOUT = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


@pytest.mark.parametrize("program", PROGRAMS, ids=" ".join)
def test_help_exits_0_and_prints_a_complete_usage(program):
    # run as README shows it: `python tools/<program> ...` from the repository root
    res = subprocess.run([sys.executable, f"tools/{program[0]}", *program[1:], "--help"],
                         cwd=ROOT, env=CHECKOUT, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    text = res.stdout
    assert text.startswith(f"usage: {' '.join(program)} ")
    description = text.split("\n\n")[1]
    assert description.rstrip().endswith((".", ":")), f"description cut short: {description!r}"
    options = text.split("options:\n", 1)[1]
    # every flag has a description, on its own line or the next (argparse wraps long ones)
    lines = options.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"  (-\S.*?)(?:\s{2,}(\S.*))?$", line)
        if m:
            described = m.group(2) or (i + 1 < len(lines) and lines[i + 1].startswith(" " * 10))
            assert described, f"{' '.join(program)}: no description for {m.group(1)!r}"


def test_bench_names_every_suite_when_given_an_unknown_one():
    from tinytensor.tools import bench
    res = subprocess.run([sys.executable, "tools/bench.py", "nope"], cwd=ROOT, env=CHECKOUT,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "unknown suite 'nope'" in res.stderr
    assert all(name in res.stderr for name in bench.SUITES if name)


def test_bench_kernels_gpu_without_a_gpu_says_nothing_was_measured():
    import tinytensor as tt
    if tt.cuda_is_available():
        pytest.skip("a CUDA device is present")
    res = subprocess.run([sys.executable, "tools/bench.py", "kernels", "--gpu"], cwd=ROOT, env=CHECKOUT,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode != 0
    assert "nothing was measured" in res.stderr and "device 'cuda' is not available" in res.stderr


def test_tools_is_importable_from_anywhere_without_path_edits(tmp_path):
    code = ("import tinytensor.tools.train, tinytensor.tools.graph, tinytensor.tools.bench, "
            "tinytensor.tools.lib.tasks, tinytensor.tools.lib.bench_kernels")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    offenders = [str(p.relative_to(ROOT)) for p in TOOLS.rglob("*.py") if "sys.path" in p.read_text()]
    assert offenders == []


def _helpers():
    return sorted(p for p in (TOOLS / "lib").glob("*.py"))


def test_the_helpers_are_in_tools_lib_and_not_programs():
    names = {p.stem for p in _helpers()}
    assert {"corpus", "tasks", "model_zoo", "plot", "progress", "timing", "bench_kernels",
            "bench_train"} <= names
    # no helper left beside the programs
    assert sorted(p.name for p in TOOLS.glob("*.py")) == [
        "__init__.py", "bench.py", "embed.py", "erf_coeffs.py", "fuzz_compile.py", "generate.py",
        "graph.py", "train.py", "train_mlp.py"]
    for path in _helpers():
        tree = ast.parse(path.read_text())
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imports |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "argparse" not in imports, f"{path.name} parses arguments"
        assert "__main__" not in path.read_text(), f"{path.name} runs as a program"
