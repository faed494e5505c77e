"""The fusion switch: whether the core ops take the fused kernels or their reference
decompositions.

    import tinytensor as tt
    tt.kernels.set_fusion(False)              # everything runs the reference ops
    with tt.kernels.use_fusion(False): ...    # only inside the block (also a decorator)
    with tt.kernels.use_fusion(False, ops="attention"): ...   # one family only
    TINYTENSOR_FUSION=0 python train.py       # off from the start (also "false", "off", "no")

The families are "softmax" (softmax and log_softmax), "attention"
(scaled_dot_product_attention), "layer_norm" (layer_norm and rms_norm), "cross_entropy"
and "batch_norm" (batch_norm in training). Turning fusion off is for debugging: the reference path records the
primitive ops on the tape, so a graph or a gradient can be inspected op by op.
"""
import functools
import os

FAMILIES = ("softmax", "attention", "layer_norm", "cross_entropy", "batch_norm")

# families whose fused op tt.compile's capture records as itself (`for_capture`): its replay
# runs the op's own kernels (eager's bits, which its reference decomposition does not give)
# and its gradient reads only tensors of the tape (no constant a replay would freeze)
CAPTURED = ("batch_norm",)

_on = os.environ.get("TINYTENSOR_FUSION", "1").strip().lower() not in ("0", "false", "off", "no")
_off_families = set()


def enabled(family=None):
    """True when the fused path may be taken (for `family`, if given)."""
    return _on and (family is None or family not in _off_families)


def _check(ops):
    ops = [ops] if isinstance(ops, str) else list(ops)
    for op in ops:
        if op not in FAMILIES:
            raise ValueError(f"fusion: unknown op family {op!r}; expected one of {FAMILIES}")
    return ops


def set_fusion(enabled, ops=None):
    """Turn fusion on or off, globally or for some families; returns the previous state,
    which `restore_fusion` accepts."""
    global _on
    prev = (_on, frozenset(_off_families))
    if ops is None:
        _on = bool(enabled)
        if enabled:
            _off_families.clear()
    else:
        for op in _check(ops):
            if enabled:
                _off_families.discard(op)
            else:
                _off_families.add(op)
    return prev


def for_capture():
    """tt.compile's capture: every family off but CAPTURED (which keeps its setting); returns
    the previous state, which `restore_fusion` accepts."""
    prev = (_on, frozenset(_off_families))
    _off_families.update(f for f in FAMILIES if f not in CAPTURED)
    return prev


def restore_fusion(state):
    global _on
    _on = state[0]
    _off_families.clear()
    _off_families.update(state[1])


class use_fusion:
    """Context manager (and decorator) that sets fusion inside a block."""

    def __init__(self, enabled=True, ops=None):
        self.enabled = enabled
        self.ops = None if ops is None else _check(ops)

    def __enter__(self):
        self.prev = set_fusion(self.enabled, self.ops)
        return self

    def __exit__(self, *exc):
        restore_fusion(self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with use_fusion(self.enabled, self.ops):
                return fn(*args, **kwargs)
        return wrapper


def fusion_enabled(family=None):
    return enabled(family)


# ---------------------------------------------------------------- which path ran, and why
_reports = []  # the open report() blocks


def choose(family, rule, *args):
    """The path one call of a `family` op takes: None for the fused op, else why the
    reference decomposition runs ("fusion off", or what `rule(*args)` found against the
    fused op; the rule runs only while fusion is on). Open `report()` blocks hear of it."""
    why = rule(*args) if enabled(family) else "fusion off"
    if _reports:
        path = ("fused", None) if why is None else ("reference", why)
        for r in _reports:
            r._add(family, path)
    return why


class report(dict):
    """Which path each fused family took inside a block, and why the fused op did not apply.

        with tt.kernels.report() as r:
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
        r["attention"]   # ("reference", "dropout_p > 0 (the fused op has no dropout)")
        r.counts         # {("attention", "reference", "dropout_p > 0 ..."): 1}

    `r[family]` is (path, reason) of the family's last call, path "fused" (reason None) or
    "reference"; `r.counts` counts every (family, path, reason) seen, so a block whose calls
    went different ways shows all of them."""

    def __init__(self):
        super().__init__()
        self.counts = {}

    def _add(self, family, path):
        self[family] = path
        key = (family,) + path
        self.counts[key] = self.counts.get(key, 0) + 1

    def __enter__(self):
        _reports.append(self)
        return self

    def __exit__(self, *exc):
        # by identity: two reports that heard the same calls are equal dicts
        del _reports[next(i for i, r in enumerate(_reports) if r is self)]


def path_of(node):
    """The path a tape node ran: "fused" for a fused op, "reference: <why>" for a node of a
    reference decomposition that `mark` tagged, else None."""
    return node.__dict__.get("fusion") or getattr(node.fn, "fusion", None)


def mark(out, op, why, *inputs):
    """Tag the nodes that produced `out` from `inputs` (the reference decomposition of `op`
    that just ran) with why it ran, for graph export. Nodes already tagged keep their tag
    (a fused softmax inside the reference attention is still fused). Nothing is recorded
    when nothing was tracked; returns `out`."""
    from ..core.grad_mode import STATE  # the tapes that may hold the nodes, not the grad mode
    tapes = STATE.tapes
    if out.grad_fn is None and not tapes:
        return out
    stop = {id(t) for t in inputs if t is not None}

    def producer(t):
        if t.grad_fn is not None:
            return t.grad_fn
        for tape in tapes:
            p = tape.producer(t)
            if p is not None:
                return tape.nodes[p[0]]
        return None

    stop_nodes = {producer(t) for t in inputs if t is not None} - {None}
    first = producer(out)
    stack, seen = ([first] if first is not None and first not in stop_nodes else []), set()
    text = f"reference: {why}"
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if path_of(node) is None:
            node.fusion = text if node.name == op else f"{op} {text}"
        preds = [e[0] for e in node.edges if e.__class__ is tuple]
        preds += [producer(t) for t in node.inputs if id(t) not in stop]
        stack.extend(p for p in preds if p is not None and p not in stop_nodes and p not in seen)
    return out
