"""explain: per stage the IR text, a picture with a cluster per kernel, the kernels' C and
a stats table whose numbers are those of the program."""
import importlib

import numpy as np

# the module, not tt.compiler.explain (the function the package exports under its name)
explain = importlib.import_module("tinytensor.compiler.explain")
from tinytensor.compiler.passes import fuse
from tinytensor.compiler import pipeline

from ._programs import program_of


def stages():
    x = np.ones((16, 32), np.float32)
    program, _ = program_of(lambda x: ((x * 2.0).exp() + 1.0).tanh().sum(), x)
    for ins in program.instrs:
        ins.scope = "h.0.mlp"
    return {"captured": program, "fused": fuse.run(program)}


def test_writes_text_picture_sources_and_a_table(tmp_path, monkeypatch):
    rows = explain.explain_stages(stages(), tmp_path)
    names = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert names == sorted(["0_captured.txt", "0_captured.svg", "1_fused.txt", "1_fused.svg",
                            "fused_mul_exp_add_tanh_sum_0.c", "stats.md"])
    svg = (tmp_path / "1_fused.svg").read_text()
    n = 16 * 32
    # the kernel's cluster: its name, FLOPs (4 ops per element and the 0-d sum), bytes
    # (reads x, writes the 0-d sum: the reduction is fused too)
    assert "fused_mul_exp_add_tanh_sum" in svg and f"{4 * n + 1} FLOPs, {4 * n + 4} bytes" in svg
    assert "h.0.mlp" in svg
    assert "tt_expf" in (tmp_path / "1_fused_kernels" / "fused_mul_exp_add_tanh_sum_0.c").read_text()
    # captured: mul, exp, add, tanh each read and write an array (mul and add also a 0-d
    # constant), the sum reads one and writes a 0-d result; at most two intermediates live
    full = 4 * n
    assert rows[0] == {"stage": "captured", "nodes": 5, "kernels": 0,
                       "bytes moved": 9 * full + 3 * 4, "planned peak": 2 * full}
    # fused: one kernel reads x and writes the 0-d result; no intermediate is left
    assert rows[1] == {"stage": "fused", "nodes": 1, "kernels": 1,
                       "bytes moved": full + 4, "planned peak": 0}
    assert "| fused | 1 | 1 |" in (tmp_path / "stats.md").read_text()


def test_without_dot_it_writes_the_dot_source(tmp_path, monkeypatch):
    monkeypatch.setattr(explain.shutil, "which", lambda name: None)
    explain.explain_stages(stages(), tmp_path)
    assert (tmp_path / "1_fused.dot").read_text().count("subgraph cluster_") == 1


def test_explain_a_step_writes_every_stage_and_fusion_cuts_nodes_and_bytes(tmp_path):
    from tinytensor import nn
    import tinytensor as tt
    import tinytensor.functional as F
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU("tanh"), nn.Linear(16, 4))

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    rows = tt.compiler.explain(step, tt.randn(8, 16), tt.randint(0, 4, (8,)), out=str(tmp_path))
    stages = [r["stage"] for r in rows]
    assert stages[0] == "captured" and stages[-1] == "fuse"
    first, last = rows[0], rows[-1]
    assert last["kernels"] >= 1 and last["nodes"] < first["nodes"]
    assert last["bytes moved"] < first["bytes moved"]
    assert (tmp_path / "stats.md").read_text().count("\n") == len(rows) + 2
    assert any((tmp_path / f"{len(rows) - 1}_fuse_kernels").iterdir())


def test_viz_graph_draws_a_compiled_function_and_a_program_as_explain_does(tmp_path):
    from tinytensor import nn
    import tinytensor as tt
    tt.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.GELU("tanh"), nn.Linear(8, 2))
    f = tt.compile(lambda x: m(x).sum(), backend="c")
    try:
        tt.viz.graph(f)
    except ValueError as e:
        assert "has not run yet" in str(e)
    f(tt.randn(4, 8))
    fused = pipeline.lower(f.programs[0], "c")     # what the C backend runs: fused, column kernels too
    kernels = sum(ins.op == "fused" for ins in fused.instrs)
    g = tt.viz.graph(f)                            # drawn as the C backend runs it: fused
    assert kernels >= 1 and g.source.count("subgraph cluster_") == kernels
    assert explain.picture(fused, "compiled program").source == g.source   # the same picture
    assert tt.viz.graph(f.programs[0]).source.count("subgraph cluster_") == 0   # before fusion
    if explain.shutil.which("dot"):
        g.render(str(tmp_path / "compiled"), format="svg", cleanup=True)
        assert "fused_" in (tmp_path / "compiled.svg").read_text()
