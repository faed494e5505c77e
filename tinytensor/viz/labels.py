"""The text on each vertex, edge and cluster: what an op did, on which shapes, where, and
what it cost."""
from ..core.node import transform_text
from ..kernels.fusion import path_of
from .annotate import fmt_bytes, fmt_flops

_KIND_WORDS = {"param": "parameter", "input": "input", "output": "output", "grad": "gradient"}


def ordinal(n):
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def order_name(order):
    return {0: "forward", 1: "backward"}.get(order) or f"{ordinal(order)}-order backward"


def shape_text(shape, dtype=None, default_dtype=None):
    s = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    if dtype is not None and dtype is not default_dtype:
        s += f" {dtype.name}"
    return s


def _short(v, limit=32):
    if isinstance(v, float):
        r = f"{v:.4g}"
    elif hasattr(v, "shape") and hasattr(v, "dtype"):
        r = f"{v.dtype}{shape_text(v.shape)}"  # an index array: its type, not its values
    elif isinstance(v, tuple) and any(isinstance(x, slice) or hasattr(x, "shape") for x in v):
        r = "[" + ", ".join(_slice(x) for x in v) + "]"
    else:
        r = repr(v)
    return r if len(r) <= limit else r[:limit - 1] + "\u2026"


def _slice(x):
    if isinstance(x, slice):
        a = "" if x.start is None else str(x.start)
        b = "" if x.stop is None else str(x.stop)
        return f"{a}:{b}" + ("" if x.step is None else f":{x.step}")
    return _short(x, 20)


def op_head(v, width=40):
    """`softmax(dim=3)`, `mul(·, 0.3536)`: op name, scalar constants in place, attributes;
    long attribute lists wrap onto (at most two) further lines."""
    args = []
    if v.consts:
        consts = dict(v.consts)
        args = [consts.get(i, "\u00b7") for i in range(len(v.node.in_meta))]
    attrs = [f"{k}={_short(a)}" for k, a in v.attrs.items() if k not in ("advanced",)]
    head = f"{v.name}({', '.join(args + attrs)})" if args or attrs else v.name
    if len(head) <= width:
        return head
    lines = [f"{v.name}({', '.join(args)})" if args else v.name]
    cur = ""
    for a in attrs:
        if cur and len(cur) + len(a) + 2 > width:
            lines.append(cur)
            cur = a
        else:
            cur = f"{cur}, {a}" if cur else a
    if cur:
        lines.append(cur)
    if len(lines) > 3:
        lines = lines[:3]
        lines[2] += ", \u2026"
    return "\n".join(lines)


def cost_text(flops, out_bytes, saved_bytes):
    parts = []
    if flops:
        parts.append(fmt_flops(flops))
    if out_bytes:
        parts.append(f"out {fmt_bytes(out_bytes)}")
    if saved_bytes is None:
        parts.append("saved: freed")
    elif saved_bytes:
        parts.append(f"saved {fmt_bytes(saved_bytes)}")
    return " \u00b7 ".join(parts)


def vertex_label(v, show_scope, annotate, default_dtype, repeats=None):
    if v.kind == "op":
        lines = op_head(v).split("\n")
        path = path_of(v.node)  # "fused", "reference: <why>": which form of a fused family ran
        if path:
            note = f"({path})"
            if len(lines[-1]) + len(note) < 40:
                lines[-1] += " " + note
            else:
                lines.append(note)
        if v.node.transform:   # what tt.func made of the user's op: "[batched]", "[tangent]"
            lines.append(f"[{transform_text(v.node.transform)}]")
        outs = v.node.out_meta
        lines.append(", ".join(shape_text(m[0], m[1], default_dtype) for m in outs))
        if show_scope and v.scope:
            lines.append(f"@ {v.scope}" + _repeat_note(v.scope, repeats))
        if annotate:
            c = cost_text(v.flops, v.out_bytes, v.saved_bytes)
            if c:
                lines.append(c)
        return "\n".join(lines)
    if v.kind == "box":
        rep = (repeats or {}).get(v.name)
        head = v.name + (f"  \u00d7{rep[0]}" if rep else "")
        if v.order:
            head += f"  ({order_name(v.order)})"
        lines = [head, f"{v.members} ops"]
        inner = [f"{p} \u00d7{r[0]}" for p, r in (repeats or {}).items() if p.startswith(v.name + ".")]
        if inner:
            lines.append("contains " + ", ".join(inner))
        if annotate:
            c = cost_text(v.flops, v.out_bytes, v.saved_bytes)
            if c:
                lines.append(c + (" each" if rep else ""))
        return "\n".join(lines)
    lines = [v.name, shape_text(v.shape) + f" {v.dtype.name} \u00b7 {v.device}"]
    if v.saved:
        lines.append("saved for backward")
    return "\n".join(lines)


def _repeat_note(scope, repeats):
    parts = scope.split(".")
    for d in range(len(parts), 0, -1):
        r = (repeats or {}).get(".".join(parts[:d]))
        if r:
            return f" (\u00d7{r[0]})"
    return ""


def vertex_tooltip(v):
    if v.kind == "op":
        node = v.node
        ins = ", ".join(shape_text(m[0], m[1]) for m in node.in_meta)
        outs = ", ".join(shape_text(m[0], m[1]) for m in node.out_meta)
        where = f" @ {v.scope}" if v.scope else ""
        path = path_of(node)
        name = f"{node.name} ({path})" if path else node.name
        role = f", {transform_text(node.transform)}" if node.transform else ""
        return (f"#{node.seq} {name}{where} [{order_name(v.order)}{role}]: {ins} -> {outs}; "
                f"attrs {node.attrs}; {fmt_flops(v.flops)}")
    if v.about:
        return v.about
    if v.kind == "box":
        return f"folded module {v.name} [{order_name(v.order)}]: {v.members} op" + "s" * (v.members != 1)
    # the label already names most tensors by kind ("input", "output 1", "grad x")
    word = _KIND_WORDS[v.kind]
    head = v.name if v.name.split(" ", 1)[0] in (word, v.kind) else f"{word} {v.name}"
    inside = v.scope and not v.name.startswith(v.scope + ".")
    return head + (f" @ {v.scope}" if inside else "")


def cluster_label(path, totals, repeats, annotate):
    rep = repeats.get(path)
    head = path
    if rep:
        count, first, last = rep
        stem = path.rsplit(".", 1)[0] + "." if "." in path else ""
        head = f"{path} \u2026 {stem}{last}  \u00d7{count} (identical; drawn once)"
    lines = [head]
    if annotate:
        for order in sorted(o for (p, o) in totals if p == path):
            t = totals[(path, order)]
            c = cost_text(t.flops, t.out_bytes, t.saved_bytes)
            if c:
                each = " each" if rep else ""
                lines.append(f"{order_name(order)}{each}: {c}")
    return "\n".join(lines)


def graph_label(title, totals, annotate):
    lines = [title] if title else []
    if annotate:
        for order in sorted(o for (p, o) in totals if p == ""):
            t = totals[("", order)]
            lines.append(f"{order_name(order)} total: {t.ops} ops \u00b7 "
                         + cost_text(t.flops, t.out_bytes, t.saved_bytes))
    return "\n".join(lines)
