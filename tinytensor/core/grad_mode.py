"""Grad modes, module scope and anomaly mode: the state every op consults, one per thread."""
import contextlib
import functools
import inspect
import threading

import numpy as np

from ..dtypes import is_floating_np
from ..messages import plain
from .hooks import NO_CAPTURE, for_capture


class _State(threading.local):
    """Per thread, as torch's grad mode is: a thread that runs `no_grad` (a data loader's,
    an evaluation's) leaves another thread's recording alone. The class attributes are each
    new thread's starting values; the lists are made per thread in __init__."""
    grad_enabled = True
    scope_path = ""
    anomaly = False
    order = 0             # derivative order of the backward being recorded (0: forward)
    transform = ()        # what the ops running now compute for tt.func: ("batched",), ("tangent",), ... (viz labels)
    fw_levels = ()        # open forward-mode levels (tt.func.jvp), outermost first: ints
    vmap = ()             # the active tt.func.vmap levels, outermost first (func/batching.py)
    autocast = None       # the policy of the innermost enabled tt.autocast (amp.py), or None
    hooks = NO_CAPTURE    # what a capture in progress answers (core/hooks.py): ask this
    _capture = None

    def __init__(self):
        self.scope = []   # module path parts pushed by nn.Module.__call__
        self.tapes = []   # active record() tapes

    @property
    def capture(self):
        """The compiler's capture tape in progress (compiler/capture.py), or None: the
        compiler's own business. Everything else asks `hooks`."""
        return self._capture

    @capture.setter
    def capture(self, tape):
        self._capture = tape
        self.hooks = for_capture(tape)


STATE = _State()
# while STATE.vmap is set, op wrappers that read index values (getitem, embedding) and the
# random draws ask tt.func.vmap's wrappers, by name; func/batching_wrappers.py fills this in
# (func sits above core, ops and creation, which therefore never import it)
VMAP_WRAPPERS = {}


# --------------------------------------------------------------------------- grad modes
class _GradMode:
    """Base for context managers that set one field of STATE (`field`, to `mode`) and are
    also decorators."""
    field = "grad_enabled"
    mode = True

    def __enter__(self):
        self.prev = getattr(STATE, self.field)
        setattr(STATE, self.field, self.mode)

    def __exit__(self, *exc):
        setattr(STATE, self.field, self.prev)
        return False

    def _again(self):
        """A fresh manager of the same mode, for one call of a decorated function."""
        return self.__class__()

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            # the body of a generator runs at each next(), after a plain wrapper has returned:
            # enter the mode around every step instead
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                value = None
                while True:
                    with self._again():
                        try:
                            item = gen.send(value)
                        except StopIteration as stop:
                            return stop.value
                    value = yield item
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._again():
                return fn(*args, **kwargs)
        return wrapper


class _NoParamGradMode(_GradMode):
    """Also usable as a bare decorator, `@tt.no_grad`, like torch."""

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        return cls()(fn)


class no_grad(_NoParamGradMode):
    """Ops inside record nothing and produce tensors that do not require grad."""
    mode = False


class inference_mode(no_grad):
    """torch.inference_mode's name for no_grad (tinytensor has no faster inference path)."""


class enable_grad(_NoParamGradMode):
    mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode):
        self.mode = bool(mode)
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode  # takes effect as a function call too, like torch

    def __enter__(self):
        pass

    def __call__(self, fn):
        STATE.grad_enabled = self.prev
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = STATE.grad_enabled
            STATE.grad_enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.grad_enabled = prev
        return wrapper


def is_grad_enabled():
    return STATE.grad_enabled


# --------------------------------------------------------------------------- module scope
@contextlib.contextmanager
def module_scope(name, absolute=False):
    """Run ops under a module path: `name` is appended to the current path, or replaces
    it with absolute=True (nn.Module passes its full path, `blocks.3.attn`)."""
    prev = enter_scope(name, absolute)
    try:
        yield
    finally:
        exit_scope(prev)


def enter_scope(name, absolute=False):
    """module_scope's entry as a plain call, for nn.Module.__call__ (a generator context
    manager costs ~1.5 us more per module call); returns what exit_scope restores."""
    state = STATE
    prev = state.scope_path
    if absolute:
        path = name
    else:
        path = f"{prev}.{name}" if prev and name else (name or prev)
    state.scope.append(name)
    state.scope_path = path
    return prev


def exit_scope(prev):
    state = STATE
    state.scope.pop()
    state.scope_path = prev


def current_module_path():
    return STATE.scope_path


@contextlib.contextmanager
def transform_label(word):
    """Ops run inside compute what a tt.func transform made of the user's op ("batched",
    "tangent"): the tape records it on their nodes and graph export shows it."""
    prev = STATE.transform
    STATE.transform = prev + (word,)
    try:
        yield
    finally:
        STATE.transform = prev


# --------------------------------------------------------------------------- anomaly mode
class detect_anomaly(_GradMode):
    """Raise at the first op whose forward or backward produces NaN or Inf."""

    field = "anomaly"

    def __init__(self, enabled=True):
        self.mode = enabled

    def _again(self):
        return detect_anomaly(self.mode)


class AnomalyError(RuntimeError):
    pass


def check_anomaly(node, arrays, phase):
    for i, a in enumerate(arrays):
        if a is None or not (a.dtype.kind == "f" or is_floating_np(a.dtype)):
            continue
        xp = np if isinstance(a, (np.ndarray, np.generic)) else __import__("cupy")
        if not bool(xp.isfinite(a).all()):
            what = "NaN" if bool(xp.isnan(a).any()) else "Inf"
            shapes = ", ".join(str(tuple(m[0])) for m in node.in_meta)
            where = f" in {node.scope}" if node.scope else ""
            raise AnomalyError(
                f"detect_anomaly: {phase} of op '{node.name}'{where} produced {what} "
                f"in {'output' if phase == 'forward' else 'gradient for input'} {i} "
                f"(input shapes: {shapes}; attributes: {plain(node.attrs)})")
