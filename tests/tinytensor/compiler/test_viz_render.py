"""tt.viz.graph of a compiled function renders as a tape's graph does: the format by the
file's suffix (before, render("x.svg") wrote DOT into x.svg and the picture into x.svg.pdf)."""
import shutil
import warnings

from tinytensor import nn
import tinytensor as tt


def _graphs():
    tt.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.GELU("tanh"), nn.Linear(8, 2))
    f = tt.compile(lambda x: m(x).sum(), backend="c")
    x = tt.randn(4, 8)
    f(x)
    with tt.record() as tape:
        m(x).sum()
    return {"compiled": tt.viz.graph(f), "eager": tt.viz.graph(tape)}


def test_compiled_and_eager_graphs_render_by_suffix_alike(tmp_path):
    for name, g in _graphs().items():
        dot_path = g.render(str(tmp_path / f"{name}.dot"))
        text = (tmp_path / f"{name}.dot").read_text()
        assert dot_path == str(tmp_path / f"{name}.dot") and text.startswith("digraph")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tt.viz.GraphvizNotFoundWarning)
            got = g.render(str(tmp_path / f"{name}.svg"))
        if shutil.which("dot"):
            assert got == str(tmp_path / f"{name}.svg")
            assert "<svg" in (tmp_path / f"{name}.svg").read_text()
        else:   # no Graphviz: the DOT source beside, as for any graph
            assert got == str(tmp_path / f"{name}.dot")
        # an explicit format the name lacks: graphviz's convention, for both
        g.render(str(tmp_path / f"{name}_fmt"), format="dot")
        assert (tmp_path / f"{name}_fmt.dot").read_text() == g.source
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{n}{s}" for n in ("compiled", "eager") for s in (".dot", ".svg", "_fmt", "_fmt.dot")]
        if shutil.which("dot") else
        [f"{n}{s}" for n in ("compiled", "eager") for s in (".dot", "_fmt", "_fmt.dot")])
    assert "subgraph cluster_" in _graphs()["compiled"].source   # the fused kernels drawn
