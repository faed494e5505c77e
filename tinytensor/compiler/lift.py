"""Lift a capture tape to IR: tape nodes -> ir.Instrs, tensors -> ir.Values (created on
first sight: the arguments, then the optimizer's and the sizes' inputs, then parameters
and constants as the ops read them)."""
import dataclasses

import numpy as np

from ..dtypes import from_numpy_dtype
from . import ir
from .interpret import fill_attrs
from .records import Binding


def drop_unread_saved(instrs, outputs):
    """Keep a side array of forward as an output only where a backward reads it."""
    read = {v.id for ins in instrs for v in ins.inputs} | {v.id for v in outputs}
    out = []
    for ins in instrs:
        if ins.saved:
            n = len(ins.outputs) - len(ins.saved)
            keep = [j for j, v in enumerate(ins.outputs[n:]) if v.id in read]
            ins = dataclasses.replace(ins, outputs=ins.outputs[:n] + [ins.outputs[n + j] for j in keep],
                                      saved=tuple(ins.saved[j] for j in keep))
        out.append(ins)
    return out


class Builder:
    """Tape nodes -> Instrs; tensors -> Values (created on first sight)."""

    def __init__(self, tape, arg_tensors, named, entry_grads, arg_bindings):
        self.inputs, self.instrs, self.consts, self.bindings = [], [], {}, []
        self.values = {}            # id(tensor) -> Value
        self.arrays = {}            # id(array) -> Value: a saved tensor a backward unpacks
        #                             is a new Tensor object around the same array
        self.named = named
        self.grad_owner = {id(g): p for p, g in entry_grads.values() if g is not None}
        # a tensor argument's .grad belongs to the argument of each call, not to this one
        self.arg_of = {}
        for t, binding in zip(arg_tensors, arg_bindings):
            self.arg_of.setdefault(id(t), binding)
        sym = tape.symbolic
        self.shape_of = sym.shape_of if sym is not None else (lambda t: t.data.shape)
        saved_shape = sym.saved_shapes.get if sym is not None else (lambda i, s: s)
        for i, (t, binding) in enumerate(zip(arg_tensors, arg_bindings)):
            if id(t) not in self.values:
                self._input(t, "input", f"arg{i}" if binding[0] == "arg" else "state", binding)
        for t, fn in tape.inputs:
            self._input(t, "input", t.name, Binding("call", fn))
        for t, value, np_dtype in tape.size_inputs:
            self._input(t, "input", t.name, Binding("size", (value, np_dtype)))
        for k, t in enumerate(tape.upstream):   # read by the backward program only (aot.py)
            self._input(t, "input", f"grad_out{k}", Binding("upstream", k))
        self.assigned = []          # (Value, write, input index or None) of each assignment, in order
        assigns = iter(tape.assigns)
        pending = next(assigns, None)
        released = tape.released
        for k, (node, results) in enumerate(zip(tape.nodes, tape.outputs)):
            while pending is not None and pending[0] <= k:
                self._assign(*pending[1:])
                pending = next(assigns, None)
            ins = [self.value(t) for t in node.inputs]
            outs = [ir.Value(tuple(self.shape_of(t)), m[1]) for t, m in zip(results, node.out_meta)]
            for t, v in zip(results, outs):
                self.values[id(t)] = v
                self.arrays.setdefault(id(t.data), v)
                gone = released.get(id(t))
                a = gone() if gone is not None else None
                if a is not None:   # an array its tensor gave up, alive elsewhere (saved, an index)
                    self.arrays.setdefault(id(a), v)
            saved = []
            for k, e in enumerate(node.saved or ()):
                # core/node.py's saved tuple: no version cell means an array forward
                # computed on the side; a backward reading it must get this call's
                array, _edge, _leaf, cell = e[:4]
                if cell is None and id(array) not in self.arrays:
                    v = ir.Value(tuple(saved_shape(id(array), array.shape)), from_numpy_dtype(array.dtype))
                    self.arrays[id(array)] = v
                    outs.append(v)
                    saved.append(k)
            attrs, paths = dict(node.attrs), []
            for path, a in arrays_in(node.attrs):
                v = self.arrays.get(id(a))
                if v is not None:  # an index tensor's array: an input, not a frozen attribute
                    paths.append(path)
                    ins.append(v)
            if paths:
                attrs = fill_attrs(attrs, paths, [None] * len(paths))
            self.instrs.append(ir.Instr(op=node.name, fn=node.fn, inputs=ins, outputs=outs,
                                        attrs=attrs, scope=node.scope,
                                        role=tape.roles.get(k) or ("backward" if node.order else "forward"),
                                        saved=tuple(saved), attr_inputs=tuple(paths)))
        while pending is not None:
            self._assign(*pending[1:])
            pending = next(assigns, None)

    def _assign(self, target, new, write, into):
        v = self.value(new)
        dest = self.values.get(id(into)) if into is not None else None
        index = next((i for i, x in enumerate(self.inputs) if x is dest), None)
        self.assigned.append((v, write, index))
        if target is not None:  # ops after the update read the new value, as eager does
            self.values[id(target)] = v

    def _input(self, t, kind, name, binding):
        v = ir.Value(tuple(self.shape_of(t)), t.dtype, kind=kind, name=name)
        self.values[id(t)] = v
        self.arrays.setdefault(id(t.data), v)
        self.inputs.append(v)
        self.bindings.append(binding)
        return v

    def value(self, t):
        v = self.values.get(id(t))
        if v is None:
            v = self.arrays.get(id(t.data))
        if v is not None:
            return v
        p = self.grad_owner.get(id(t))
        if p is not None:  # the .grad a parameter held on entry: read afresh at each call
            at = self.arg_of.get(id(p))
            return self._input(t, "param", f"{self._label(p) or 'param'}.grad",
                               Binding("grad", p) if at is None else Binding("arg_grad", at))
        if id(t) in self.named or t.requires_grad or (t.ndim and t.grad_fn is not None):
            label = self._label(t)
            return self._input(t, "param", label, Binding("param", t))
        # a constant: a 0-d number, or an array the step made without an op (tt.arange,
        # tt.tensor([...]), the ones a backward starts from); copied, so nothing can change it
        v = ir.Value(tuple(t.shape), t.dtype, kind="const")
        self.consts[v] = t.data.copy()
        self.values[id(t)] = v
        return v

    def _label(self, t):
        return self.named[id(t)][1] if id(t) in self.named else (t.name or "")


def arrays_in(attrs):
    """(path, array) for every array inside attrs (directly, or in nested tuples/lists)."""
    def go(obj, path):
        if isinstance(obj, np.ndarray) or type(obj).__module__.startswith("cupy"):
            yield path, obj
        elif isinstance(obj, (tuple, list)):
            for i, o in enumerate(obj):
                yield from go(o, path + (i,))
    for k, a in attrs.items():
        yield from go(a, (k,))
