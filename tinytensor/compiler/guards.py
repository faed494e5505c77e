"""Guards: the signature a program was captured under. A call whose signature differs runs
a new capture; each part carries a label, so a recompilation can say what changed
("arg 0 shape (4, 16) -> (4, 17)").

Parts: for each tensor argument its shape, dtype, device and requires_grad, and for one
that requires grad whether its .grad is None and the hooks registered on it; how the
tensor arguments alias (one tensor passed twice, two sharing memory, one that is a
parameter or buffer of a Module or optimizer argument or shares its memory); Python
scalars and strings by value, floats by their bits where == cannot tell (0.0 and -0.0;
NaN, which equals nothing and would miss at every call); NumPy arrays and scalars by
shape, dtype and contents (a step reads them as constants); for each Module argument the
training flag of every submodule, its plain attributes (bool, int, float, str, None and
tuples of them: Dropout.p, a temperature, a mode string) and its forward hooks, and the
identity, shape, dtype and requires_grad of every parameter and buffer; for every
parameter (of Module and optimizer arguments, and leaves an earlier capture found) whether
its .grad is None (an eager backward adds into an existing one), unless the step clears it
first (opt.zero_grad() inside), and its hooks; for each optimizer the options of every
parameter group but the learning rate (betas, eps, weight decay, ... are baked into a
captured update; the learning rate is a program input, so a schedule does not recompile);
the grad mode, the fused kernel switch and the default dtype, which decide what the ops
record. Any other object argument is keyed by identity.

Every call checks the whole signature (a replay under a changed one would be silently
wrong), through `call_key`: the same walk without the labels, which only a recompile's
warning reads.
"""
import hashlib
import struct
from sys import getrefcount

import numpy as np

from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..device import CPU as _CPU
from ..dtypes import get_default_dtype
from ..kernels import fusion
from ..messages import plain
from . import state
from .dynamic import MAX_SYMBOLS

_SCALARS = (bool, int, float, str, type(None))
# module attributes keyed as they are (exact types: a lookup, not an isinstance chain);
# floats and tuples go through _exact / _plain_tuple
_PLAIN = frozenset((bool, int, str, type(None)))
_KEYED = _PLAIN | {float, tuple}
# nn.Module's own bookkeeping: the training flags are keyed apart, the rest are names
_MODULE_OWN = frozenset(("training", "_scope_name", "_path", "_names_valid"))
_ATTRIBUTES = "*"   # the label of a module's attributes part ends so (`changed` lists each)


def signature(args, kwargs, extra=(), cleared=frozenset(), labels=None, dynamic=False,
              entry_grads=None, entry_slots=None):
    """[(label, value)] for a call; equal value tuples replay the same program.

    `cleared`: ids of parameters whose .grad the step clears before reading it, left out.
    `labels`, a dict, receives id(parameter) -> [labels of its .grad parts].
    dynamic (False, or for dynamic=True the set of (tensor number, dim) known to be static,
    tensors numbered in the order this walk meets them: state.walk_tensors): tensor shapes
    enter as their pattern of equal sizes, static dims as numbers; the program checks the
    sizes themselves (its guards).
    entry_grads ({id(leaf): its .grad then}): the .grads as they were when a capture began,
    for the signature of a call that has run since (capture's meta); entry_slots
    (state.snapshot) likewise for the slots of the state objects."""
    walk = _Walk(cleared, {} if labels is None else labels, dynamic)
    walk.entry = entry_grads or {}
    walk.entry_slots = entry_slots or {}
    walk.call(args, kwargs, extra)
    return list(zip(walk.names, walk.values))


def call_key(args, kwargs, extra=(), cleared=frozenset(), dynamic=False):
    """key(signature(...)), without its labels: the check every call makes. Labels (f-strings,
    module paths) cost more than the values, and only a recompile's warning reads them."""
    walk = _Walk(cleared, None, dynamic)
    walk.call(args, kwargs, extra)
    return tuple(walk.values)


def key(parts):
    return tuple(v for _, v in parts)


def changed(old, new, limit=3):
    """What differs between two signatures, as 'label old -> new' (the first `limit`, all
    for None); a module's attributes one by one ('arg 0 drop.p 0.1 -> 0.5')."""
    before = dict(old)
    diffs = []
    for label, v in new:
        was = before.get(label, _MISSING)
        if was == v:
            continue
        if label.endswith(_ATTRIBUTES) and isinstance(was, tuple) and isinstance(v, tuple):
            diffs += _attribute_diffs(label[:-len(_ATTRIBUTES)], was, v)
        else:
            diffs.append(f"{label} {_show(was)} -> {_show(v)}")
    gone = [label for label, _ in old if label not in dict(new)]
    diffs += [f"{label} is gone" for label in gone]
    return "; ".join(diffs[:limit]) or "nothing visible (an object argument's identity?)"


def keep_attributes(parts, entry):
    """`parts` with each module's attributes as `entry` (a signature taken before the step
    ran) has them: the step may change one (a counter), and its program holds the value
    the capture began with."""
    before = dict(entry)
    return [(label, before.get(label, v) if label.endswith(_ATTRIBUTES) else v)
            for label, v in parts]


_MISSING = object()


def _attribute_diffs(prefix, old, new):
    was, now = dict(old), dict(new)
    return [f"{prefix}{k} {_show(was.get(k, _MISSING))} -> {_show(now.get(k, _MISSING))}"
            for k in list(was) + [k for k in now if k not in was]
            if was.get(k, _MISSING) != now.get(k, _MISSING)]


def _show(v):
    return "(none)" if v is _MISSING else repr(plain(v))


class _Shown(tuple):
    """A key value that prints as what it stands for (in `changed`), compared as a tuple."""
    __slots__ = ()


class _Bits(_Shown):
    """A float keyed by its bits: 0.0 and -0.0 apart, a NaN equal to itself."""
    __slots__ = ()

    def __new__(cls, v):
        return tuple.__new__(cls, ("float bits", _F64.pack(v)))

    def __repr__(self):
        v = _F64.unpack(self[1])[0]
        return ("-nan" if self[1][7] & 0x80 else "nan") if v != v else repr(v)


_F64 = struct.Struct("<d")


def _one_holder():
    """getrefcount of an array that one tensor alone holds, read as `aliasing` reads it (the
    tensor's slot, a local name, getrefcount's argument): measured, not assumed."""
    t = Tensor._make(np.empty(0), _CPU, False)
    a = t.data
    return getrefcount(a)


_ONE_HOLDER = _one_holder()


def _exact(v):
    """A float as the key holds it: itself where == is equality of bits (every float but
    zeros and NaN), else its bits."""
    return v if v == v and v != 0.0 else _Bits(v)


class _Contents(_Shown):
    """A NumPy array or scalar keyed by shape, dtype and bytes: the step reads its values."""
    __slots__ = ()

    def __new__(cls, a):
        # an array of Python objects holds pointers, not values: keyed by identity, as
        # other objects are
        return tuple.__new__(cls, ("array", a.shape, a.dtype.str,
                                   ("object array", id(a)) if a.dtype.hasobject else a.tobytes()))

    def __repr__(self):
        if not isinstance(self[3], bytes):
            return f"object array of shape {self[1]} (id {self[3][1]})"
        a = np.frombuffer(self[3], dtype=self[2]).reshape(self[1])
        if not self[1]:
            return f"{a.dtype.name} {a.item()!r}"
        return (f"array of shape {self[1]} {a.dtype.name} "
                f"(contents {hashlib.sha1(self[3]).hexdigest()[:10]})")


class _Aliases(_Shown):
    """How a call's tensors alias: (k, how, j) per tensor k that is or shares memory with
    tensor j (tensors numbered in the order the walk meets them), or with tensor j of the
    Modules' and optimizers' own (`how` ends in 'parameter')."""
    __slots__ = ()

    def __repr__(self):
        if not self:
            return "apart"
        return ", ".join(f"tensor {k} {how} {'' if how.endswith('parameter') else 'tensor '}{j}"
                         for k, how, j in self)


_APART = _Aliases(())


def _inexact(v):
    """A float or tuple attribute as the key holds it (a tuple holding anything but plain
    values as _OTHER: it is not keyed)."""
    if type(v) is float:
        return v if v == v and v != 0.0 else _Bits(v)
    v = _plain_tuple(v)
    return _OTHER if v is None else v


_OTHER = _Shown(("not keyed",))


def _plain_tuple(v):
    """A tuple of plain values (nested tuples too) as the key holds it, or None."""
    out = []
    for x in v:
        t = type(x)
        if t is float:
            x = _exact(x)
        elif t is tuple:
            x = _plain_tuple(x)
            if x is None:
                return None
        elif t not in _PLAIN:
            return None
        out.append(x)
    return tuple(out)


def _attributes(d):
    """A module's plain attributes (its __dict__ `d`) and forward hooks, as the key holds
    them: a forward reads them (Dropout.p, a temperature, a mode), and a program bakes in
    what it read. `_module_tensors` has its own copy inline: this runs for every submodule
    at every call (one comprehension was the fastest way measured)."""
    out = [(k, v if type(v) in _PLAIN else _inexact(v)) for k, v in d.items()
           if type(v) in _KEYED and k not in _MODULE_OWN]
    if d.get("_forward_pre_hooks") or d.get("_forward_hooks"):
        out += _hooks(d)
    return tuple(out)


def _hooks(d):
    """A module's forward hooks as attribute parts: the functions themselves (the key holds
    them, so no id is reused)."""
    pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
    return ([("forward pre-hooks", tuple(pre))] if pre else []) + \
        ([("forward hooks", tuple(post))] if post else [])


def _array_owner(a):
    while getattr(a, "base", None) is not None:
        a = a.base
    return id(a)


# optimizer options a captured update bakes in; the learning rate is read at each call
_READ_EACH_CALL = ("params", "lr", "initial_lr", "name")
_OPTION = _SCALARS + (tuple,)  # kept as they are; other option values by repr
_TENSOR_PARTS = (" shape", " dtype", " device", " requires_grad")


class _Walk:
    """Collects a call's signature values and, unless `labels` is None, their labels.

    One walk for both, so the labelled signature and the per-call key cannot drift apart;
    without labels, none is formatted and Modules are walked by `_module_tensors`."""

    def __init__(self, cleared, labels, dynamic=False):
        self.values, self.cleared, self.labels = [], cleared, labels
        self.names = [] if labels is not None else None
        self.sizes = {} if dynamic is not False else None   # size -> its class, in order of first sight
        self.static = dynamic if dynamic is not False else frozenset()
        self.tensors = 0   # tensors met so far (their number in state.walk_tensors)
        self.entry = {}
        self.entry_slots = {}
        self.met = []      # the tensors met (arguments, containers, state slots), in order
        self.held = []     # lists of the Modules' and optimizers' own tensors, for aliasing
        self.held_ids = []   # sets of the ids of the Modules' ones (the walk makes them anyway)
        self.opt_held = False   # whether an optimizer's parameters are among `held`

    def add(self, label, what, value):
        self.values.append(value)
        if self.names is not None:
            self.names.append(f"{label}{what}")

    def extend(self, label, whats, values):
        """Several parts at once (`whats[i]` labels `values[i]`)."""
        self.values += values
        if self.names is not None:
            self.names += [f"{label}{what}" for what in whats]

    def grad(self, label, what, p, shape=None):
        """The `.grad` part of a parameter, unless the step clears that .grad first, and the
        hooks on it (they run on its gradient, a capture records what they did).
        shape (a tensor argument's, under dynamic=True): a .grad is keyed as having that
        shape or not, so calls of other sizes share the key."""
        if id(p) not in self.cleared:
            g = self.entry.get(id(p), p.grad) if self.entry else p.grad
            if shape is not None and g is not None:
                self.add(label, what, (tuple(g.shape) == shape, g.dtype.name))
            else:
                self.add(label, what, _grad_state(g))
            if self.labels is not None:
                self.labels.setdefault(id(p), []).append(f"{label}{what}")
        if p._hooks:
            self.add(label, f"{what} hooks" if self.names is not None else None, tuple(p._hooks))

    def _label(self, label, what):
        return None if self.names is None else f"{label}{what}"

    def call(self, args, kwargs, extra):
        for i, a in enumerate(args):
            self.part(self._label("arg ", i), a)
        for k, a in kwargs.items():
            self.part(self._label("argument ", repr(k)), a)
        for n, p in enumerate(extra):
            self.grad("leaf ", f"{p.name or n} .grad" if self.names is not None else None, p)
        add = self.add
        if self.met:
            add("tensor arguments", "", self.aliasing() if len(self.met) > 1 or self.held else _APART)
        add("grad mode", "", STATE.grad_enabled)
        add("fused kernels", "", tuple([fusion.enabled(f) for f in fusion.FAMILIES]))
        add("default dtype", "", get_default_dtype().name)
        ac = STATE.autocast  # the casts autocast inserts are baked into the captured program
        add("autocast", "", None if ac is None else (ac.device_type, ac.dtype.name))

    def part(self, label, a):
        add = self.add
        if isinstance(a, Tensor):
            shape = tuple(a.shape) if self.sizes is None else self.pattern(a.shape)
            self.extend(label, _TENSOR_PARTS, (shape, a.dtype.name, str(a.device), a.requires_grad))
            self.met.append(a)
            if a.requires_grad:   # its .grad: set, or added into (compiler/capture.py)
                self.grad(label, " .grad" if self.names is not None else None, a,
                          None if self.sizes is None else tuple(a.shape))
        elif isinstance(a, _SCALARS):
            add(label, " value", (type(a).__name__, _exact(a) if isinstance(a, float) else a))
        elif isinstance(a, (np.ndarray, np.generic)):
            add(label, " value", _Contents(np.asarray(a)))
        elif type(a).__module__.startswith("cupy") and hasattr(a, "get"):
            add(label, " value", _Contents(a.get()))
        elif isinstance(a, (tuple, list)):
            add(label, " length", len(a))
            for j, x in enumerate(a):
                self.part(self._label(label, f"[{j}]"), x)
        elif isinstance(a, dict):
            add(label, " keys", tuple(a))
            for k, x in a.items():
                self.part(self._label(label, f"[{k!r}]"), x)
        elif hasattr(a, "named_parameters") and hasattr(a, "training"):  # an nn.Module
            self.module(label, a)
        elif hasattr(a, "param_groups"):  # an optimizer
            named = self.names is not None
            for gi, group in enumerate(a.param_groups):
                options = tuple([(k, v if isinstance(v, _OPTION) else repr(v))
                                 for k, v in group.items() if k not in _READ_EACH_CALL])
                add(label, f" param_groups[{gi}] options" if named else None, options)
                self.held.append(group["params"])
                self.opt_held = True
                for pi, p in enumerate(group["params"]):
                    where = f"{label} param_groups[{gi}]['params'][{pi}]" if named else None
                    add(where, "", (id(p), tuple(p.shape), p.dtype.name))
                    self.grad(where, ".grad", p)
        elif state.is_state_object(a):
            # a KV cache and the like: its layout and Python values, its tensors as tensors
            # (compiler/state.py); another object of the same layout replays the same program
            add(label, " object", type(a).__name__)
            slots = self.entry_slots.get(id(a))
            for path, v in (state.slots_of(a) if slots is None else slots):
                self.part(self._label(label, state.describe_tail(path)), v)
        else:
            add(label, " object", (type(a).__name__, id(a)))

    def pattern(self, shape):
        """A tensor's shape as dynamic=True keys it: each size >= 2 (unless a static dim) as
        the class of its size, numbered in order of first sight across the call (duck
        sizing, as the capture names symbols): calls with one pattern differ only in sizes
        a program of that pattern takes as arguments."""
        sizes, out, k = self.sizes, [], self.tensors
        self.tensors += 1
        for d, n in enumerate(shape):
            if n >= 2 and (k, d) not in self.static and (n in sizes or len(sizes) < MAX_SYMBOLS):
                out.append(-1 - sizes.setdefault(n, len(sizes)))
            else:
                out.append(n)
        return tuple(out)

    def aliasing(self):
        """How the tensors met alias one another and the Modules' and optimizers' own
        tensors (`_Aliases`). A capture reads one tensor passed twice as one input, and a
        parameter passed as an argument as that argument: a call that aliases otherwise
        needs a program of its own."""
        seen, memory, out = {}, {}, []
        for k, t in enumerate(self.met):
            j = seen.setdefault(id(t), k)
            if j != k:
                out.append((k, "is", j))
                continue
            j = memory.setdefault(_array_owner(t.data), k)
            if j != k:
                out.append((k, "shares memory with", j))
        if not self.held:
            return _Aliases(out) if out else _APART
        # against the Modules' and optimizers' own tensors: their maps are made only for a
        # tensor that may be one of them (an id the module walk met; a leaf requiring grad
        # where an optimizer's parameters are walked) or may share their memory (an array
        # held elsewhere too, or a view), not at every call of a model with 100s of them
        own = arrays = None
        for k, t in enumerate(self.met):
            maybe = self.opt_held and t.requires_grad and t.grad_fn is None
            if not maybe:
                i = id(t)
                for ids in self.held_ids:
                    if i in ids:
                        maybe = True
                        break
            if maybe:
                if own is None:
                    own = {}
                    for n, h in enumerate(h for hs in self.held for h in hs):
                        own.setdefault(id(h), n)
                n = own.get(id(t))
                if n is not None:
                    out.append((k, "is parameter", n))
                    continue
            a = t.data
            if getrefcount(a) > _ONE_HOLDER or getattr(a, "base", None) is not None:
                if arrays is None:
                    arrays = {}
                    for n, h in enumerate(h for hs in self.held for h in hs):
                        arrays.setdefault(_array_owner(h.data), n)
                n = arrays.get(_array_owner(a))
                if n is not None:
                    out.append((k, "shares memory with parameter", n))
        return _Aliases(out) if out else _APART

    def module(self, label, a):
        found = _module_tensors(a) if self.names is None else None
        if found is not None:
            flags, tensors, attributes = found[0], [(None, t) for t in found[1]], found[2]
            self.held.append(found[1])
            self.held_ids += found[3]
            self.add(label, " training flags", flags)
            self.values += attributes
        else:
            flags = tuple(m.training for m in a.modules())
            tensors = list(a.named_parameters())
            if hasattr(a, "named_buffers"):
                tensors += [(n, b) for n, b in a.named_buffers() if isinstance(b, Tensor)]
            self.held.append([t for _, t in tensors])
            self.held_ids.append({id(t) for _, t in tensors})
            self.add(label, " training flags", flags)
            mods = list(a.named_modules()) if hasattr(a, "named_modules") else \
                [("", m) for m in a.modules()]
            self.extend(label, [f" {path}.{_ATTRIBUTES}" if path else f" {_ATTRIBUTES}"
                                for path, _ in mods], [_attributes(vars(m)) for _, m in mods])
        named = self.names is not None
        for n, p in tensors:
            where = f"{label} {n}" if named else None
            self.add(where, "", (id(p), tuple(p.shape), p.dtype.name, p.requires_grad))
            if p.requires_grad:
                self.grad(where, ".grad", p)


_TRAVERSAL = ("modules", "named_modules", "named_parameters", "named_buffers", "_named")
_plain = {}  # Module class -> whether its traversal is the base class's own


def _plain_traversal(cls):
    """Whether `cls` walks its submodules, parameters and buffers with nn.Module's own methods
    (found by duck typing: tinytensor cannot import nn), so `_module_tensors` lists exactly
    what they would. A class that overrides one of them is walked through its methods."""
    known = _plain.get(cls)
    if known is None:
        base = next((k for k in reversed(cls.__mro__) if all(n in vars(k) for n in _TRAVERSAL)), None)
        known = _plain[cls] = base is not None and all(
            getattr(cls, n) is vars(base)[n] for n in _TRAVERSAL)
    return known


def _module_tensors(root):
    """(training flags of a.modules(), [the tensors of a.named_parameters(), then those of
    a.named_buffers()], [`_attributes` of each of a.modules()]) in their order, in one pass
    over the registries: the three walks (generators, name strings) were half of a small
    training step's guard time. None where a module among them walks itself its own way
    (`_plain_traversal`)."""
    flags, params, buffers, attributes = [], [], [], []
    plain, keyed, bookkeeping = _PLAIN, _KEYED, _MODULE_OWN
    seen_m, seen_p, seen_b = set(), set(), set()
    stack = [root]
    while stack:  # preorder, children in registration order, each module once: named_modules
        m = stack.pop()
        if m is None or id(m) in seen_m:
            continue
        if not _plain_traversal(m.__class__):
            return None
        seen_m.add(id(m))
        flags.append(m.training)
        d = m.__dict__
        # _attributes(d), inline
        attrs = [(k, v if type(v) in plain else _inexact(v)) for k, v in d.items()
                 if type(v) in keyed and k not in bookkeeping]
        if d.get("_forward_pre_hooks") or d.get("_forward_hooks"):
            attrs += _hooks(d)
        attributes.append(tuple(attrs))
        for p in d["_parameters"].values():
            if p is not None and id(p) not in seen_p:
                seen_p.add(id(p))
                params.append(p)
        for b in d["_buffers"].values():
            if b is not None and id(b) not in seen_b:
                seen_b.add(id(b))
                if isinstance(b, Tensor):
                    buffers.append(b)
        children = d["_modules"]
        if children:
            stack += reversed(children.values())
    return tuple(flags), params + buffers, attributes, (seen_p, seen_b)


def _grad_state(g):
    return None if g is None else (tuple(g.shape), g.dtype.name)
