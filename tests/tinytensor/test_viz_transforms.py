"""Graph export of a transformed function (issue 27): the ops a vmap batching rule or a jvp
rule ran are labelled as such on the tape and in the DOT text; the user's own ops are not."""
import re
import warnings

import numpy as np

import tinytensor as tt
from tinytensor.func import jvp, vmap


def _f(x):
    return (x.sin() * 2.0).sum(-1)


def _inputs():
    rng = np.random.default_rng(0)
    return tt.tensor(rng.standard_normal((4, 3))), tt.tensor(rng.standard_normal((4, 3)))


def _labels(dot):
    """{vertex id: its label} from DOT text."""
    return dict(re.findall(r'"(n\d+)" \[label="([^"]*)"', dot))


def _dot(tape):
    return tt.viz.graph(tape, use_graphviz=False).source


def test_plain_ops_carry_no_transform_label():
    x, _ = _inputs()
    with tt.record() as tape:
        _f(x)
    assert all(n.transform == () for n in tape.nodes)
    assert "[batched" not in _dot(tape) and "tangent]" not in _dot(tape)


def test_vmap_ops_are_labelled_batched_on_the_tape_and_in_the_dot_text():
    x, _ = _inputs()
    with tt.record() as tape:
        vmap(_f)(x)
    names = [n.name for n in tape.nodes]
    assert names == ["sin", "mul", "sum"]
    assert [n.transform for n in tape.nodes] == [("batched",)] * 3
    assert str(tape).count("[batched]") == 3
    labels = _labels(_dot(tape))
    ops = [v for v in labels.values() if v.split("\\n")[0].split("(")[0] in names]
    assert len(ops) == 3 and all("\\n[batched]\\n" in v for v in ops)


def test_nested_vmap_counts_its_levels():
    x, _ = _inputs()
    with tt.record() as tape:
        vmap(vmap(lambda r: r.sin()))(x)
    assert [n.transform for n in tape.nodes] == [("batched", "batched")]
    assert "[batched \u00d72]" in str(tape)


def test_jvp_tangent_ops_are_labelled_tangent_and_the_primal_ops_are_not():
    x, t = _inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # an op without a jvp rule yet notes its fallback
        with tt.record() as tape:
            out, tangent = jvp(_f, (x,), (t,))
    primal = [n for n in tape.nodes if not n.transform]
    tangent_ops = [n for n in tape.nodes if n.transform == ("tangent",)]
    assert [n.name for n in primal if n.name != "alias"] == ["sin", "mul", "sum"]
    assert tangent_ops and len(primal) + len(tangent_ops) == len(tape.nodes)
    # the tangent ops are exactly those computing the tangent: the result's producer among them
    assert tape.producer(tangent)[0] in [tape.nodes.index(n) for n in tangent_ops]
    dot = _dot(tape)
    tagged = [v for v in _labels(dot).values() if "[tangent]" in v]
    assert len(tagged) == len(tangent_ops)
    assert re.search(r'tooltip="#\d+ \w+ \[[a-z -]+, tangent\]', dot)
