"""The gradient graph: run the backward itself under `tt.record()` and draw what it ran.

Each op's backward is written in tinytensor ops, so recording `tt.grad(...,
create_graph=True)` yields the gradient computation as ordinary tape nodes. The engine
stamps them with the module path of the op being differentiated and their derivative
order (1 for the gradient, 2 for the gradient of the gradient, ...), which is what the
picture groups and colours by. create_graph=True is needed even for order 1: without
it some backwards take raw-array fast paths that record nothing.
"""
from ..core import grad, record
from ..core.tensor import Tensor
from .labels import ordinal

_SUPERSCRIPT = {1: "", 2: "\u00b2", 3: "\u00b3"}


def record_gradients(outputs, wrt, orders):
    """Differentiate `outputs` w.r.t. `wrt` `orders` times (each order differentiates the sum
    of the previous gradients). Returns the tape, [(grad, label, module path, 'grad', about)] and
    {label: seed tensor} for the all-ones gradients the backward started from."""
    outs = [o for o in outputs if o.requires_grad]
    if not outs:
        raise ValueError("viz.graph(backward=...): no output requires grad, so there is no "
                         "gradient graph to draw")
    wrt = [w for w in wrt if w.requires_grad]
    if not wrt:
        raise ValueError("viz.graph(backward=...): the graph reads no tensor that requires grad")
    results, seeds_by_name = [], {}
    with record() as tape:
        current = outs
        for order in range(1, orders + 1):
            seeds = [Tensor._ones_meta(o.shape, o.dtype, o.device) for o in current]
            for k, s in enumerate(seeds):
                single = len(seeds) == 1 and order == 1
                seeds_by_name["ones (seed)" if single else f"ones (seed {order}.{k})"] = s
            try:
                grads = grad(current, wrt, grad_outputs=seeds, create_graph=True,
                             retain_graph=True, allow_unused=True)
            except RuntimeError as e:
                if "a second time" not in str(e):
                    raise
                # the user's own backward() already ran and freed what this one needs
                raise RuntimeError(
                    "viz.graph(backward=True) records a backward of its own, but a backward "
                    "already ran through this graph and freed its saved tensors (loss.backward() "
                    "before drawing?); draw before that backward, call it with "
                    "retain_graph=True, or draw the forward only (backward=False)"
                    f" [{e}]") from None
            nxt = []
            for w, gr in zip(wrt, grads):
                if gr is None:
                    continue
                name = w.name or "input"
                sup = _SUPERSCRIPT.get(order, f"^{order}")
                results.append((gr, f"grad{sup} {name}", name.rsplit(".", 1)[0] if "." in name
                                else "", "grad", _about(order, name)))
                if gr.requires_grad:
                    nxt.append(gr)
            if not nxt:
                break
            current = nxt
    return tape, results, seeds_by_name


def _about(order, name):
    """The tooltip of a gradient: what record_gradients differentiated, w.r.t. what."""
    if order == 1:
        return f"gradient w.r.t. {name}: d(sum of the outputs) / d {name}"
    return (f"{ordinal(order)}-order gradient w.r.t. {name}: "
            f"d(sum of the {ordinal(order - 1)}-order gradients) / d {name}")
