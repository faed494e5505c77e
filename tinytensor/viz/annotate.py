"""FLOPs, bytes of output and bytes saved for backward: per op, and summed per module.

FLOPs count multiply and add separately (a multiply-add is 2), as in the usual model
FLOP tables. Each op's count is its rule's (`compile_rule.flops` beside its Function,
core/rules.py):
- matmul (..., M, K) @ (..., K, N): 2 * M * N * K per batch element, so attention's
  q @ k^T and probs @ v cost 2 * B * H * T^2 * head_dim each: the T^2 term;
- einsum: 2 * the product of every subscript size (one multiply-add per point of the
  joint index space), 1 * that for a one-operand sum;
- element-wise ops: 1 per output element (exp, gelu, ... count as one);
- reductions: 1 per input element;
- fused ops count the steps of their reference decomposition, so a graph costs the same
  with fusion on or off: softmax/log_softmax 5 per element (max, subtract, exp, sum,
  divide); layer_norm 5 (mean, subtract, square, mean, scale) + 1 each for weight and
  bias; rms_norm 3 + 1 for weight; cross_entropy 5 per logit + 4 per target;
- scaled_dot_product_attention (fused) with q (..., L, E), k (..., S, E), v (..., S, Ev):
  2*L*S*(E + Ev) for the two matmuls + L*S for the scale, 5*L*S for the softmax and L*S
  for a mask or causal masking, per batch element and query head: the T^2 terms;
- movement, indexing and copies (reshape, permute, getitem, cat, cast, ...): 0.

Bytes of output are numel * itemsize of each output. Bytes saved are the arrays the op
keeps for its backward (its `saved` entries plus arrays stashed on the ctx, such as
layer_norm's rstd); views are counted at their full size.
"""
import math

from ..core.function import Function
from ..core.node import SAVED_DATA
from ..core.rules import rule_of

# attributes every Node has; anything else holding an array is a stash for backward
_NODE_FIELDS = {"fn", "name", "attrs", "seq", "scope", "edges", "in_meta", "out_meta", "inputs",
                "saved", "to_save", "freed", "out_hooks", "retained", "needs_input_grad",
                "non_differentiable", "order"}


def numel(shape):
    return math.prod(shape)


def op_flops(name, attrs, in_meta, out_meta, fn=None):
    """FLOPs of one op application from its tape record (see the module docstring): its
    Function's `compile_rule.flops` (core/rules.py), found by the op's name without `fn`."""
    if not out_meta:
        return 0
    flops = rule_of(fn).flops if fn is not None else _flops_named(name)
    return flops(attrs, in_meta, out_meta) if callable(flops) else flops * numel(out_meta[0][0])


_NAMED = {}   # op name -> its FLOPs rule, where a Function of that name has one


def _flops_named(name):
    if not _NAMED:
        todo = [Function]
        while todo:
            c = todo.pop()
            todo += c.__subclasses__()
            if c.name is not None and _NAMED.get(c.name, 1) == 1:   # a counted one wins
                _NAMED[c.name] = rule_of(c).flops
    return _NAMED.get(name, 1)


def out_bytes(out_meta):
    return sum(numel(m[0]) * m[1].itemsize for m in out_meta)


def saved_arrays(node):
    """The arrays a node holds for its backward, or None once its backward freed them."""
    if node.freed:
        return None
    arrays = [entry[SAVED_DATA] for entry in node.saved or ()]
    for k, v in vars(node).items():
        if k not in _NODE_FIELDS and hasattr(v, "nbytes") and hasattr(v, "shape"):
            arrays.append(v)
    return arrays


def annotate(graph):
    """Fill flops/out_bytes/saved_bytes on op vertices and graph.totals per module path."""
    totals = {}
    seen_saved = {}
    for v in graph.vertices.values():
        if v.kind != "op":
            continue
        node = v.node
        v.flops = op_flops(node.name, node.attrs, node.in_meta, node.out_meta, node.fn)
        v.out_bytes = out_bytes(node.out_meta)
        arrays = saved_arrays(node)
        v.saved_bytes = None if arrays is None else sum(a.nbytes for a in arrays)
        parts = v.scope.split(".") if v.scope else []
        for depth in range(len(parts) + 1):
            path = ".".join(parts[:depth])
            t = totals.get((path, v.order))
            if t is None:
                t = totals[(path, v.order)] = Totals()
                seen_saved[(path, v.order)] = set()
            t.ops += 1
            t.flops += v.flops
            t.out_bytes += v.out_bytes
            seen = seen_saved[(path, v.order)]
            for a in arrays or ():
                if id(a) not in seen:  # an array two ops keep is held once
                    seen.add(id(a))
                    t.saved_bytes += a.nbytes
    graph.totals = totals
    return graph


class Totals:
    __slots__ = ("ops", "flops", "out_bytes", "saved_bytes")

    def __init__(self):
        self.ops = self.flops = self.out_bytes = self.saved_bytes = 0

    def __repr__(self):
        return (f"Totals(ops={self.ops}, flops={self.flops}, out_bytes={self.out_bytes}, "
                f"saved_bytes={self.saved_bytes})")


def fmt_flops(n):
    return _fmt(n, 1000, ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"])


def fmt_bytes(n):
    return _fmt(n, 1024, ["B", "KiB", "MiB", "GiB", "TiB"])


def _fmt(n, base, units):
    k = 0
    x = float(n)
    while abs(x) >= base and k < len(units) - 1:
        x /= base
        k += 1
    if k == 0:
        return f"{int(n)} {units[0]}"
    return f"{x:.3g} {units[k]}"
