"""tools/gpu_check.sh on a machine without a usable GPU: a plain message, a failing exit."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tinytensor as tt

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(tt.cuda_is_available(), reason="a CUDA device is present: the real check runs")
def test_without_a_gpu_it_says_nothing_was_measured_and_fails(tmp_path):
    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh")], cwd=tmp_path,
                         env=dict(os.environ, OUT=str(tmp_path / "out"), PYTHON=sys.executable),
                         capture_output=True, text=True, timeout=30)
    assert res.returncode != 0
    assert "no usable CUDA GPU" in res.stderr and "nothing was measured" in res.stderr
    assert "device 'cuda' is not available" in res.stderr  # the reason, from tinytensor
    assert not (tmp_path / "out" / "gpu_tests.txt").exists()  # no test run to mistake for one


def test_a_gpu_run_where_every_test_skips_fails(tmp_path):
    # a stand-in python: CuPy "works", but every gpu test skips (e.g. a broken install)
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\ncase "$*" in\n  *"-m pytest"*) echo "3 skipped, 2900 deselected in 1.0s";;\n'
                    '  *bench.py*) echo "softmax ...";;\nesac\nexit 0\n')
    fake.chmod(0o755)
    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh")], cwd=tmp_path,
                         env=dict(os.environ, OUT=str(tmp_path / "out"), PYTHON=str(fake)),
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 1
    assert "no gpu test passed (all skipped or none collected)" in res.stderr
    assert "gpu tests exit 1, benchmarks exit 0" in res.stdout


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_runs_nothing(tmp_path, flag):
    # a stand-in python that would leave a trace if the check started
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\ntouch "{tmp_path}/ran"\nexit 0\n')
    fake.chmod(0o755)
    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh"), flag], cwd=tmp_path,
                         env=dict(os.environ, OUT=str(tmp_path / "out"), PYTHON=str(fake)),
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert "Usage: OUT=/some/dir bash tools/gpu_check.sh [--quick]" in res.stdout
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_an_unknown_argument_is_refused_before_anything_runs(tmp_path):
    res = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh"), "--bogus"], cwd=tmp_path,
                         env=dict(os.environ, OUT=str(tmp_path / "out")), capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 2 and "unknown argument '--bogus'" in res.stderr
    assert not (tmp_path / "out").exists()
