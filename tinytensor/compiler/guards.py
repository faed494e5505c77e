"""Guards: the signature a program was captured under. A call whose signature differs runs
a new capture; each part carries a label, so a recompilation can say what changed
("arg 0 shape (4, 16) -> (4, 17)").

Parts: for each tensor argument its shape, dtype, device and requires_grad; Python scalars
and strings by value; for each Module argument the training flag of every submodule and
the identity, shape, dtype and requires_grad of every parameter and buffer; for every
parameter (of Module and optimizer arguments, and leaves an earlier capture found) whether
its .grad is None (an eager backward adds into an existing one), unless the step clears it
first (opt.zero_grad() inside); for each optimizer the options of every parameter group
but the learning rate (betas, eps, weight decay, ... are baked into a captured update; the
learning rate is a program input, so a schedule does not recompile); the grad mode, the
fused kernel switch and the default dtype, which decide what the ops record.

Every call checks the whole signature (a replay under a changed one would be silently
wrong), through `call_key`: the same walk without the labels, which only a recompile's
warning reads.
"""
from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..dtypes import get_default_dtype
from ..kernels import fusion
from ..messages import plain
from . import state
from .dynamic import MAX_SYMBOLS

_SCALARS = (bool, int, float, str, type(None))


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


def changed(old, new):
    """What differs between two signatures, as 'label old -> new' (the first few)."""
    before = dict(old)
    diffs = [f"{label} {_show(before.get(label))} -> {_show(v)}" for label, v in new
             if before.get(label, _MISSING) != v]
    gone = [label for label, _ in old if label not in dict(new)]
    diffs += [f"{label} is gone" for label in gone]
    return "; ".join(diffs[:3]) or "nothing visible (an object argument's identity?)"


_MISSING = object()


def _show(v):
    return repr(plain(v))


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

    def add(self, label, what, value):
        self.values.append(value)
        if self.names is not None:
            self.names.append(f"{label}{what}")

    def extend(self, label, whats, values):
        """Several parts at once (`whats[i]` labels `values[i]`)."""
        self.values += values
        if self.names is not None:
            self.names += [f"{label}{what}" for what in whats]

    def grad(self, label, what, p):
        """The `.grad` part of a parameter, unless the step clears that .grad first."""
        if id(p) not in self.cleared:
            self.add(label, what, _grad_state(self.entry.get(id(p), p.grad) if self.entry else p.grad))
            if self.labels is not None:
                self.labels.setdefault(id(p), []).append(f"{label}{what}")

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
        elif isinstance(a, _SCALARS):
            add(label, " value", (type(a).__name__, a))
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

    def module(self, label, a):
        found = _module_tensors(a) if self.names is None else None
        if found is not None:
            flags, tensors = found[0], [(None, t) for t in found[1]]
        else:
            flags = tuple(m.training for m in a.modules())
            tensors = list(a.named_parameters())
            if hasattr(a, "named_buffers"):
                tensors += [(n, b) for n, b in a.named_buffers() if isinstance(b, Tensor)]
        self.add(label, " training flags", flags)
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
    a.named_buffers()]) in their order, in one pass over the registries: the three walks
    (generators, name strings) were half of a small training step's guard time. None where
    a module among them walks itself its own way (`_plain_traversal`)."""
    flags, params, buffers = [], [], []
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
    return tuple(flags), params + buffers


def _grad_state(g):
    return None if g is None else (tuple(g.shape), g.dtype.name)
