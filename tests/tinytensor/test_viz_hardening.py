"""tt.viz.graph: `names` label inputs that need no grad whichever way the graph is given
(output tensors or a tape), and tooltips say what a tensor vertex is without repeating it."""
import re
import warnings

import pytest

from tinytensor import nn
import tinytensor as tt

_TOOLTIP = re.compile(r'^\s*"([^"]+)" \[label=.*?, tooltip="((?:[^"\\]|\\.)*)"')


def tensor_vertices(g):
    """What the picture shows of its tensors: (kind, name, shape) of every non-op vertex."""
    return sorted((v.kind, v.name, v.shape) for v in g.graph.vertices.values() if v.kind != "op")


def tooltips(g):
    out = {}
    for line in g.source.splitlines():
        m = _TOOLTIP.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _mlp():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    model[0].weight.name, model[2].weight.name = "fc1.weight", "fc2.weight"
    return model, tt.randn(3, 4)  # the input needs no grad


@pytest.mark.parametrize("backward", [0, 1, 2])
def test_names_label_an_input_that_needs_no_grad_from_outputs_as_from_a_tape(backward):
    model, x = _mlp()
    with tt.record() as tape:
        model(x).square().mean()
    from_tape = tt.viz.graph(tape, names={"x": x}, backward=backward)
    # run again off the tape: the nodes keep no reference to inputs that need no grad
    from_outputs = tt.viz.graph(model(x).square().mean(), names={"x": x}, backward=backward)
    assert ("input", "x", (3, 4)) in tensor_vertices(from_outputs)
    assert tensor_vertices(from_outputs) == tensor_vertices(from_tape)


def test_an_input_read_by_two_ops_is_one_named_vertex_from_either_entry_point():
    model, x = _mlp()
    w = tt.randn(4, 2, requires_grad=True)
    w.name = "w"
    with tt.record() as tape:
        (model(x) * (x @ w)).sum()
    from_outputs = tt.viz.graph((model(x) * (x @ w)).sum(), names={"x": x})
    assert [v for v in tensor_vertices(from_outputs) if v[0] == "input"] == [("input", "x", (3, 4))]
    assert tensor_vertices(from_outputs) == tensor_vertices(tt.viz.graph(tape, names={"x": x}))


def test_a_name_the_output_graph_cannot_place_warns_and_the_tape_can():
    w = tt.randn(3, requires_grad=True)
    x = tt.randn(3)
    with tt.record() as tape:
        (w * 2.0 + x).sum()
    y = (w * 2.0 + x).sum()  # add saves nothing: the graph behind y keeps no trace of x
    with pytest.warns(UserWarning, match=r"names \['x'\].*tt\.record\(\)"):
        tt.viz.graph(y, names={"x": x})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = tt.viz.graph(tape, names={"x": x})
    assert ("input", "x", (3,)) in tensor_vertices(g)


def test_gradient_tooltips_name_the_order_and_the_tensor_once():
    model, x = _mlp()
    g = tt.viz.graph(model(x).square().mean(), backward=2)
    tips = tooltips(g)
    grads = {(v.order, v.name): tips[v.id] for v in g.graph.vertices.values() if v.kind == "grad"}
    assert grads[(1, "grad fc1.weight")] == \
        "gradient w.r.t. fc1.weight: d(sum of the outputs) / d fc1.weight"
    assert grads[(2, "grad\u00b2 fc1.weight")] == \
        "2nd-order gradient w.r.t. fc1.weight: d(sum of the 1st-order gradients) / d fc1.weight"
    for v in g.graph.vertices.values():
        if v.kind != "op":
            words = tips[v.id].split()
            assert not any(a == b for a, b in zip(words, words[1:])), tips[v.id]
    params = {v.name: tips[v.id] for v in g.graph.vertices.values() if v.kind == "param"}
    assert params["fc1.weight"] == "parameter fc1.weight"
    outputs = [tips[v.id] for v in g.graph.vertices.values() if v.kind == "output"]
    assert outputs == ["output"]


def test_gradients_left_by_a_recorded_backward_say_so():
    model, x = _mlp()
    with tt.record() as tape:
        model(x).square().mean().backward()
    g = tt.viz.graph(tape)
    tips = [tooltips(g)[v.id] for v in g.graph.vertices.values() if v.kind == "grad"]
    assert tips and set(tips) == {"gradient (left by the recorded backward)"}


def test_folded_module_tooltips_say_module_order_and_size():
    model, x = _mlp()
    g = tt.viz.graph(model(x).square().mean(), backward=1, max_depth=0)
    tips = tooltips(g)
    boxes = {(v.name, v.order): tips[v.id] for v in g.graph.vertices.values() if v.kind == "box"}
    assert boxes[("1", 0)] == "folded module 1 [forward]: 1 op"   # the GELU
    assert boxes[("0", 1)].startswith("folded module 0 [backward]: ") and boxes[("0", 1)].endswith(" ops")


@pytest.mark.parametrize("source", ["tape", "outputs"])
def test_drawing_the_backward_after_the_users_own_backward_says_what_to_do(source):
    w = tt.randn(3, 3, requires_grad=True)
    with tt.record() as tape:
        loss = (w.tanh() * w).sum()
    loss.backward()  # frees the saved tensors viz's own backward would need
    with pytest.raises(RuntimeError) as e:
        tt.viz.graph(tape if source == "tape" else loss, backward=True)
    msg = str(e.value)
    assert msg.startswith("viz.graph(backward=True)"), msg
    assert "draw before that backward" in msg and "retain_graph=True" in msg, msg
    assert "backward=False" in msg, msg
