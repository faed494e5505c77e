"""`tt.compile`: capture a step once per signature, run passes, replay the program."""
import contextlib
import enum
import functools
import gc
import warnings

import numpy as _np

from ..core.grad_mode import STATE
from ..core.tensor import Tensor
from ..device import device_of_array
from . import dynamic as _dynamic
from .. import symbolic
from . import choose, guards, instantiate, interpret, state
from .capture import capture
from .pytree import flatten_tensors, known_tensors, own, owner, rebuild

LIMIT = 8  # compiled signatures per function; past it, new signatures run eagerly
BACKENDS = ("numpy", "c", "cuda")


def compile(fn=None, *, backend=None, dynamic=False, threads=None):
    """Compile `fn` (a function or an nn.Module: its forward, forward-only).

        @tt.compile
        def step(model, x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

    The first call per signature (see compiler/guards.py) runs `fn` eagerly while
    recording it, backward included, and returns that result; later calls replay the
    program on the new arrays, return its results, and set each parameter's .grad as the
    eager step would. Results that require grad (a compiled model: `tt.compile(model)`)
    are differentiable: `loss.backward()` outside runs the compiled backward (aot.py).

    backend: None, the default, picks the fastest that works at each compile (see
    compiler/choose.py): "cuda" when the step's tensors are on a GPU, else "c" where a C
    compiler is found, else "numpy" with one warning naming the compiler to install.
    "numpy" runs the program with the ops' own NumPy code (the interpreter); "c" and
    "cuda" the generated kernels. `.backend` is the latest compile's.

    dynamic=True: the sizes of the tensor arguments (and of the tensors a state object such
    as a KV cache holds) are symbols, so one program serves every batch and sequence size
    and a cached decoder every cache length; a size the step ties to a fixed one (a Linear's
    input features) is pinned back to its number. See compiler/dynamic.py.

    threads (the C backend): how many threads big kernels and matmuls are split over (see
    compiler/codegen/threads.py); None, the default, as many as NumPy's OpenBLAS runs (the
    cores an eager step uses; OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set it), 1 when NumPy's
    BLAS is another. Elementwise and row kernels give the same bits with any number; a split
    matmul agrees to BLAS's rounding (bit for bit only on CPUs whose BLAS kernel rounds a
    block of rows as the whole).

    A compiled Module still answers for the Module (`fast.config`, `fast.new_cache()`), so
    `models.generate(tt.compile(model, dynamic=True), ids)` decodes with it.
    """
    if fn is None:
        return functools.partial(compile, backend=backend, dynamic=dynamic, threads=threads)
    if not isinstance(dynamic, bool):
        raise TypeError(f"tt.compile: dynamic must be True or False, got {dynamic!r}")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"tt.compile: threads must be a whole number >= 1 or None, got {threads!r}")
        if threads > 1 and backend not in (None, "c"):
            raise ValueError(f"tt.compile: threads={threads} splits the C backend's kernels; "
                             f"backend={backend!r} runs in one thread (use backend='c')")
    return CompiledFunction(fn, backend, dynamic, threads)


class CompiledFunction:
    """A function (or Module) with a cache of programs, one per call signature."""

    def __init__(self, fn, backend=None, dynamic=False, threads=None):
        self._backend = None if backend is None else _backend(backend, threads)
        self._backends = {}       # backend=None: the ones chosen so far, by name (choose.py)
        self._threads = threads
        self.backend = backend
        self.dynamic = dynamic
        self._static = frozenset()   # dynamic=True: (tensor number, dim) found tied to a size
        self._module = fn if hasattr(fn, "named_parameters") and hasattr(fn, "forward") else None
        self._fn = _call_module if self._module is not None else fn
        self.__name__ = type(fn).__name__ if self._module is not None else \
            getattr(fn, "__qualname__", type(fn).__name__)
        if self._module is None:
            functools.update_wrapper(self, fn)
        self._cache = {}          # signature key -> _Entry
        self._grad_free = {}      # key without .grad parts -> differentiable _Entry (aot.py)
        self._last = None         # parts of the latest compiled signature
        self._extra = []          # leaves requiring grad that captures found outside the arguments
        self._cleared = set()     # ids of parameters whose entry .grad the step clears first
        self._warned = False
        self.counts = {}          # pass name -> instruction count, of the latest compile

    def __getattr__(self, name):
        # a compiled Module reads as the Module: config, new_cache, forward's signature, ...
        module = self.__dict__.get("_module")
        if module is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(module, name)

    def __call__(self, *args, **kwargs):
        if STATE.vmap or STATE.fw_levels:
            if STATE.capture is not None:   # inside tt.compile(transform(...)): that capture records it
                return self._fn(*(((self._module,) + args) if self._module is not None else args), **kwargs)
            _refuse_inside_transform(self.__name__)
        if self._module is not None:
            args = (self._module,) + args
        dyn = self._static if self.dynamic else False
        ckey = guards.call_key(args, kwargs, self._extra, self._cleared, dyn)
        entry = self._cache.get(ckey)
        if entry is None and self._grad_free:
            # a differentiable entry reads no .grad: the .grads a backward left since do not
            # make it a new signature (aot.py); keyed under this call's key from now on
            entry = self._grad_free.get(guards.call_key(args, kwargs, self._extra, aot.EVERY, dyn))
            if entry is not None:
                self._cache[ckey] = entry
        if entry is not None:
            if dyn is False:
                return entry(args, kwargs)
            for e in entry:   # the programs of this pattern of sizes: the first whose guards pass
                out = e(args, kwargs)
                if out is not _MISS:
                    return out
        labels = {}  # the labelled signature: for the warning below and the cleared .grads
        parts = guards.signature(args, kwargs, self._extra, self._cleared, labels, dyn)
        key = guards.key(parts)
        if self._count() >= LIMIT:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"tt.compile: {self.__name__} has been compiled for {LIMIT} signatures, the "
                    f"limit; new signatures run eagerly from now on. Changed from the last "
                    f"compiled one: {guards.changed(self._last, parts)}", RuntimeWarning, stacklevel=2)
            return self._fn(*args, **kwargs)
        if STATE.capture is not None:
            # called inside another compiled function's capture: its ops are that capture's
            # to record (a replay here would hand it results it cannot see into)
            return self._fn(*args, **kwargs)
        with _collector_paused():
            entry_slots = state.snapshot(args, kwargs)   # a KV cache as the step found it
            rng, slots = aot.rng_state(), state.slots(args, kwargs)
            program, result, meta = capture(self._fn, args, kwargs, name=self.__name__,
                                            dynamic=self.dynamic, static=self._static,
                                            differentiable=True)
            known = {id(p) for p in self._extra}
            found, rekey = len(self._extra), False
            for kind, t in meta.bindings:
                if (kind == "param" and t.requires_grad and id(t) not in known
                        and not _in_args(t, args, kwargs)):
                    self._extra.append(t)
                    known.add(id(t))
            if self.dynamic and not meta.symbolic.static <= self._static:
                # dims this capture found tied to a fixed size: static from now on, in the
                # key too (this program, which pins them by guards, is stored under it)
                self._static = dyn = self._static | meta.symbolic.static
                rekey = True
            if rekey or len(self._extra) > found:
                # leaves outside the arguments (a model a closure reads): every later call's
                # key has their .grad parts, so this program's key must have them too, as
                # they were when the capture began
                labels = {}
                parts = guards.keep_attributes(
                    guards.signature(args, kwargs, self._extra, self._cleared, labels, dyn,
                                     entry_grads=meta.entry_grads, entry_slots=entry_slots), parts)
                key = guards.key(parts)
            if meta.cleared - self._cleared:
                # the step clears these .grads (zero_grad) before reading them: the program
                # does not depend on them, so the key leaves them out (else the .grads the
                # first call leaves would miss the cache once)
                self._cleared |= meta.cleared
                drop = {label for i in meta.cleared for label in labels.get(i, ())}
                parts = [(label, v) for label, v in parts if label not in drop]
                key = guards.key(parts)
            from . import pipeline   # the passes load at the first compile: import tinytensor skips them
            with symbolic.formulas():
                program, self.counts = pipeline.run(program, pipeline.COMMON)
                if meta.aot is not None:   # differentiable results: forward and backward programs
                    entry = aot.entry(program, meta, self._builder(args, kwargs, meta), self.dynamic,
                                       self.__name__)
                else:
                    backend = self._builder(args, kwargs, meta)(program, meta.write_back, self.dynamic)
            if meta.aot is not None:
                if self.dynamic:
                    self._cache.setdefault(key, []).append(entry)
                else:
                    self._cache[key] = entry
                    if aot.reads_no_grad(meta):
                        self._grad_free[guards.call_key(args, kwargs, self._extra, aot.EVERY, dyn)] = entry
                # this call's results come out of the compiled call too, so that the user's
                # backward runs the compiled backward; its forward draws what the capture drew
                aot.set_rng_state(rng)
                for path, v in slots:   # the state objects as the capture found them
                    state.write(args, kwargs, path, v)
                result = entry(args, kwargs)
            elif self.dynamic:
                entry = _DynamicEntry(program, meta, backend)
                self._cache.setdefault(key, []).append(entry)
            else:
                self._cache[key] = _Entry(program, meta, backend)
        self._last = parts
        return result

    def _builder(self, args, kwargs, meta):
        """A function (program, write_back, dynamic) -> runner: the backend asked for, else
        the one choose.py picks for this call (the interpreter, with a warning, for a
        program the C compiler fails to build)."""
        if self._backend is not None:
            return self._backend
        self.backend = name = choose.backend(args, kwargs, meta)
        if name not in self._backends:
            self._backends[name] = _backend(name, self._threads)
        chosen = self._backends[name]

        def build(program, write_back, dynamic=False):
            try:
                return chosen(program, write_back, dynamic)
            except Exception as e:
                if not choose.fell_back(self.__name__, name, e):
                    raise
                self.backend = "numpy"
                return _backend("numpy")(program, write_back, dynamic)
        return build


    def _entries(self):
        if not self.dynamic:   # one entry may sit under several keys (_grad_free)
            return list({id(e): e for e in self._cache.values()}.values())
        return [e for entries in self._cache.values() for e in entries]

    def _count(self):
        return len(self._entries())

    @property
    def programs(self):
        """The compiled programs, one per signature, in compile order."""
        return [e.program for e in self._entries()]


class _Entry:
    def __init__(self, program, meta, runner):
        self.program, self.meta, self.runner = program, meta, runner
        # per call, only the arrays change: what to read for each input, where results go
        self._fetch = [(Fetch[kind.upper()], x) for kind, x in meta.bindings]
        self._devices = [t._device for t in flatten_tensors(meta.tree)]
        self._plain = all(how in _PLAIN for how, _ in self._fetch)
        # .grads of parameters, and of the tensor arguments (this call's, by binding)
        at = meta.grad_args or [None] * len(meta.grads)
        self._grads = [g for g, b in zip(meta.grads, at) if b is None]
        self._arg_grads = [(b, k) for (_, k), b in zip(meta.grads, at) if b is not None]

    def __call__(self, args, kwargs):
        meta = self.meta
        for f in meta.before_call:  # an optimizer's step count, which its inputs read
            f()
        tensors = flatten_tensors((args, kwargs))
        if self._plain:   # the common bindings, by locals (this runs per input per call)
            ARG, PARAM, CALL = Fetch.ARG, Fetch.PARAM, Fetch.CALL
            arrays = [tensors[x].data if how == ARG else x.data if how == PARAM else x() if how == CALL
                      else x.grad.data for how, x in self._fetch]
        else:   # state objects' tensors too
            arrays = [self._read(k, args, kwargs, tensors) for k in range(len(self._fetch))]
        return self._finish(args, kwargs, arrays, self.runner(arrays))

    def _read(self, k, args, kwargs, tensors):
        """The array of program input k for this call (None for a number of sizes)."""
        how, x = self._fetch[k]
        if how == Fetch.ARG:
            return tensors[x].data
        if how == Fetch.SLOT:
            return state.read(args, kwargs, x).data
        if how == Fetch.ARG_GRAD:
            return _argument(x, args, kwargs, tensors).grad.data
        if how == Fetch.PARAM:
            return x.data
        if how == Fetch.CALL:
            return x()
        return x.grad.data if how == Fetch.GRAD else None   # SIZE: filled in by the caller

    def _finish(self, args, kwargs, arrays, outs, env=None):
        """The writes, .grads, state slots and results of a replay's output arrays."""
        meta = self.meta
        for k, write in meta.writes:  # copies into the parameters' and state's own arrays
            write(outs[k])
        handed = set()
        inputs = {id(a) if a.base is None else id(owner(a)) for a in arrays}
        make = Tensor._make
        results = [make(own(a, handed, inputs), device, False)
                   for a, device in zip(outs, self._devices)]
        for p, k in self._grads:
            p.grad = None if k is None else make(own(outs[k], handed, inputs), p._device, False)
        if self._arg_grads:
            tensors = flatten_tensors((args, kwargs))
            for b, k in self._arg_grads:
                p = _argument(b, args, kwargs, tensors)
                p.grad = None if k is None else make(own(outs[k], handed, inputs), p._device, False)
        for k, path in meta.slot_writes:   # a KV cache's new keys and values, and the like
            new = None if k is None else make(own(outs[k], handed, inputs),
                                              device_of_array(outs[k]), False)
            state.write(args, kwargs, path, new)
        leaf = None if env is None else (lambda o: symbolic.evaluate(o, env))  # sizes returned
        return rebuild(meta.tree, results, leaf)


class Fetch(enum.IntEnum):
    """How a replay reads program input k, by its binding's kind (records.Binding): an int
    compared in the per-call loop, named here."""
    ARG = 0        # the call's tensor argument
    PARAM = 1      # a parameter's or buffer's array
    CALL = 2       # fn(): an optimizer's learning rate, bias correction, state
    GRAD = 3       # a parameter's .grad
    SLOT = 4       # a tensor a state object holds (a KV cache)
    SIZE = 5       # a number of the call's sizes (dynamic=True)
    ARG_GRAD = 6   # the .grad of the call's tensor argument


_PLAIN = (Fetch.ARG, Fetch.PARAM, Fetch.CALL, Fetch.GRAD)   # read without the call's state objects


def _argument(binding, args, kwargs, tensors):
    """This call's tensor at an argument binding (capture's ("arg", i) or ("slot", path))."""
    kind, x = binding
    return tensors[x] if kind == "arg" else state.read(args, kwargs, x)
_MISS = object()


class _DynamicEntry(_Entry):
    """A program of symbolic sizes: reads the sizes off the call, checks the capture's
    guards, and runs the program made for those sizes (`instances`, see instantiate.py)."""

    def __init__(self, program, meta, instances):
        super().__init__(program, meta, instances)
        bindings = meta.bindings
        self._sized = [k for k, (kind, _) in enumerate(bindings) if kind in ("arg", "slot")]
        self._sized_inputs = [program.inputs[k] for k in self._sized]
        self._sizes = [(k, x) for k, (kind, x) in enumerate(bindings) if kind == "size"]
        self._symbols = sorted(meta.symbolic.symbols)
        self._guards = meta.symbolic.guards

    def __call__(self, args, kwargs):
        tensors = flatten_tensors((args, kwargs))
        sized = [self._read(k, args, kwargs, tensors) for k in self._sized]
        env = _dynamic.sizes_of(self._sized_inputs, sized)
        if env is None or len(env) != len(self._symbols) \
                or not _dynamic.shapes_agree(self._sized_inputs, sized, env) or not self._guards.hold(env):
            return _MISS
        for f in self.meta.before_call:
            f()
        arrays = [self._read(k, args, kwargs, tensors) for k in range(len(self._fetch))]
        for k, (value, dt) in self._sizes:
            arrays[k] = _np.asarray(symbolic.evaluate(value, env), dtype=dt)
        runner = self.runner(tuple(env[s] for s in self._symbols), env)
        return self._finish(args, kwargs, arrays, runner(arrays), env)


@contextlib.contextmanager
def _collector_paused():
    """Python's cycle collector off while a step is captured and compiled: the capture makes
    hundreds of thousands of objects (tape nodes, tensors, IR values), and every full
    collection walks them all (on the GPT-2 bench step, pausing it shortens the first call
    of a new process by about a sixth). Nothing is lost: the
    collector runs again as soon as the compile is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _refuse_inside_transform(name):
    """A replay runs the program on plain arrays: a tt.func.vmap batch (its tensors' arrays
    are one example's zeros) or a tt.func.jvp tangent would be lost without an error."""
    from .capture import CaptureError, user_frame
    what = " and ".join(w for w, on in (("tt.func.vmap", STATE.vmap), ("tt.func.jvp", STATE.fw_levels)) if on)
    raise CaptureError(
        f"tt.compile: {name} was called inside {what} at {user_frame()}: a compiled program "
        "replays plain arrays, so the batch or the tangents would be lost. Compile the "
        "function that applies the transform instead (tt.compile(tt.func.vmap(f)), or of a "
        "function calling tt.func.jvp(f, ...), captures the transform in one program), or "
        "call the uncompiled function here")


def _call_module(module, *args, **kwargs):
    return module(*args, **kwargs)


def _in_args(t, args, kwargs):
    return id(t) in known_tensors((args, kwargs))


def _backend(name, threads=None):
    """A function (program, write_back, dynamic=False) -> runner(list of input arrays) ->
    list of output arrays; write_back ({output index: input index}) says which outputs a
    runner may compute straight into an input's array (capture's meta). dynamic=True: an
    instantiate.Instances, (sizes, {symbol: size}) -> the runner for those sizes.
    threads: the C backend's (tt.compile)."""
    if name not in BACKENDS:
        raise ValueError(f"tt.compile: unknown backend {name!r}; expected one of {BACKENDS}")
    if name == "numpy":
        def numpy_backend(program, write_back, dynamic=False):
            if dynamic:
                return instantiate.Instances(
                    lambda env: functools.partial(interpret.run, instantiate.at(program, env)))
            return functools.partial(interpret.run, program)
        return numpy_backend
    # code generation loads when a backend is chosen: ~10 ms import tinytensor skips
    from . import pipeline
    if name == "cuda":
        from .codegen import cuda as codegen
    else:
        from .codegen import c as codegen
    more = {} if name == "cuda" else {"threads": threads}

    def generated(program, write_back, dynamic=False):
        program = pipeline.lower(program, name)
        if dynamic:
            return codegen.build_dynamic(program, write_back, **more)
        return codegen.build(program, write_back, **more)
    return generated


from . import aot  # noqa: E402  (its entries subclass the ones above)
