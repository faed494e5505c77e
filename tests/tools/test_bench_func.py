"""`tools/bench.py func` at tiny sizes (a smoke test: nothing is timed for real). Every case
checks that tinytensor's result equals torch.func's before it times anything."""
import re

import pytest

from tinytensor.tools import bench
from tinytensor.tools.lib import bench_func


def test_bench_func_tiny_prints_a_table_of_every_case(capsys):
    bench.main(["func", "--tiny", "--threads", "1", "--rounds", "2", "--repeat", "1", "--markdown"])
    out = capsys.readouterr().out
    assert out.startswith("CPU: ")
    rows = [line for line in out.splitlines() if line.startswith("| per-sample") or line.startswith("| hvp")]
    assert [r.split(" | ")[0] for r in rows] == ["| per-sample grads, MLP 12-16-16-5, batch 4",
                                                 "| per-sample grads, GPT 2 layers C=8, batch 3x6",
                                                 "| hvp, GPT-2 block C=8, 2x5 tokens"]
    ratio = r"\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)"
    assert all(re.search(rf"\| {ratio} \| [0-9.]+ \| {ratio} \|$", r) for r in rows[:2])
    assert re.search(rf"\| {ratio} \| – \| – \|$", rows[2])


def test_a_case_whose_answer_differs_from_torch_is_refused_before_timing():
    import numpy as np
    import torch
    import tinytensor as tt
    ours = {"w": tt.tensor(np.ones(3, dtype=np.float32))}
    theirs = {"w": torch.tensor(np.full(3, 1.1, dtype=np.float32))}
    with pytest.raises(AssertionError, match="bench.py func: case: w differs from torch.func"):
        bench_func._agree("case", ours, theirs)


def test_rounds_must_be_positive():
    with pytest.raises(SystemExit):
        bench.main(["func", "--rounds", "0"])
