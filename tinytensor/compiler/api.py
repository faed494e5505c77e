"""`tt.compile`: capture a step once per signature, run passes, replay the program."""
import contextlib
import functools
import gc
import warnings

from ..core.tensor import Tensor
from . import guards, interpret
from .capture import capture, flatten_tensors, known_tensors, own, owner, rebuild
from .passes import run_all

LIMIT = 8  # compiled signatures per function; past it, new signatures run eagerly
BACKENDS = ("numpy", "c", "cuda")


def compile(fn=None, *, backend="numpy", dynamic=False):
    """Compile `fn` (a function or an nn.Module: its forward, forward-only).

        @tt.compile
        def step(model, x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

    The first call per signature (see compiler/guards.py) runs `fn` eagerly while
    recording it, backward included, and returns that result; later calls replay the
    program on the new arrays, return its results as tensors without autograd history,
    and set each parameter's .grad as the eager step would. backend="numpy" runs the
    program with the ops' own NumPy code (the interpreter); "c" uses the generated C
    kernels once that backend exists. dynamic=True (symbolic batch / sequence sizes) is
    not implemented yet and raises NotImplementedError.
    """
    if fn is None:
        return functools.partial(compile, backend=backend, dynamic=dynamic)
    if dynamic:
        raise NotImplementedError(
            "tt.compile(dynamic=True): symbolic batch and sequence dimensions are not "
            f"implemented yet; with dynamic=False each new shape compiles its own program "
            f"(up to {LIMIT} per function, then new shapes run eagerly)")
    return CompiledFunction(fn, backend)


class CompiledFunction:
    """A function (or Module) with a cache of programs, one per call signature."""

    def __init__(self, fn, backend="numpy"):
        self._backend = _backend(backend)
        self.backend = backend
        self._module = fn if hasattr(fn, "named_parameters") and hasattr(fn, "forward") else None
        self._fn = _call_module if self._module is not None else fn
        self.__name__ = type(fn).__name__ if self._module is not None else \
            getattr(fn, "__qualname__", type(fn).__name__)
        if self._module is None:
            functools.update_wrapper(self, fn)
        self._cache = {}          # signature key -> _Entry
        self._last = None         # parts of the latest compiled signature
        self._extra = []          # leaves requiring grad that captures found outside the arguments
        self._cleared = set()     # ids of parameters whose entry .grad the step clears first
        self._warned = False
        self.counts = {}          # pass name -> instruction count, of the latest compile

    def __call__(self, *args, **kwargs):
        if self._module is not None:
            args = (self._module,) + args
        labels = {}
        parts = guards.signature(args, kwargs, self._extra, self._cleared, labels)
        key = guards.key(parts)
        entry = self._cache.get(key)
        if entry is not None:
            return entry(args, kwargs)
        if len(self._cache) >= LIMIT:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"tt.compile: {self.__name__} has been compiled for {LIMIT} signatures, the "
                    f"limit; new signatures run eagerly from now on. Changed from the last "
                    f"compiled one: {guards.changed(self._last, parts)}", RuntimeWarning, stacklevel=2)
            return self._fn(*args, **kwargs)
        with _collector_paused():
            program, result, meta = capture(self._fn, args, kwargs, name=self.__name__)
            known = {id(p) for p in self._extra}
            for kind, t in meta["bindings"]:
                if (kind == "param" and t.requires_grad and id(t) not in known
                        and not _in_args(t, args, kwargs)):
                    self._extra.append(t)
                    known.add(id(t))
            if meta["cleared"] - self._cleared:
                # the step clears these .grads (zero_grad) before reading them: the program
                # does not depend on them, so the key leaves them out (else the .grads the
                # first call leaves would miss the cache once)
                self._cleared |= meta["cleared"]
                drop = {label for i in meta["cleared"] for label in labels.get(i, ())}
                parts = [(label, v) for label, v in parts if label not in drop]
                key = guards.key(parts)
            program, self.counts = run_all(program)
            self._cache[key] = _Entry(program, meta, self._backend(program, meta["write_back"]))
        self._last = parts
        return result

    @property
    def programs(self):
        """The compiled programs, one per signature, in compile order."""
        return [e.program for e in self._cache.values()]


class _Entry:
    def __init__(self, program, meta, runner):
        self.program, self.meta, self.runner = program, meta, runner

    def __call__(self, args, kwargs):
        meta = self.meta
        for f in meta["before_call"]:  # an optimizer's step count, which its inputs read
            f()
        tensors = flatten_tensors((args, kwargs))
        arrays = [tensors[x].data if kind == "arg" else x.data if kind == "param" else
                  x() if kind == "call" else x.grad.data for kind, x in meta["bindings"]]
        outs = self.runner(arrays)
        for k, write in meta["writes"]:  # copies into the parameters' and state's own arrays
            write(outs[k])
        handed = set()
        inputs = {id(owner(a)) for a in arrays}
        n = meta["n_results"]
        template = flatten_tensors(meta["tree"])
        results = [Tensor._make(own(a, handed, inputs), t._device, False)
                   for a, t in zip(outs[:n], template)]
        for p, k in meta["grads"]:
            p.grad = None if k is None else Tensor._make(own(outs[k], handed, inputs), p._device, False)
        return rebuild(meta["tree"], results)


@contextlib.contextmanager
def _collector_paused():
    """Python's cycle collector off while a step is captured and compiled: the capture makes
    hundreds of thousands of objects (tape nodes, tensors, IR values), and every full
    collection walks them all; measured on the GPT-2 bench step, the first call of a new
    process takes 1.05-1.14 s with it paused against 1.27-1.38 s. Nothing is lost: the
    collector runs again as soon as the compile is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _call_module(module, *args, **kwargs):
    return module(*args, **kwargs)


def _in_args(t, args, kwargs):
    return id(t) in known_tensors((args, kwargs))


def _backend(name):
    """A function (program, write_back) -> runner(list of input arrays) -> list of output
    arrays; write_back ({output index: input index}) says which outputs a runner may compute
    straight into an input's array (capture's meta)."""
    if name not in BACKENDS:
        raise ValueError(f"tt.compile: unknown backend {name!r}; expected one of {BACKENDS}")
    if name == "numpy":
        return lambda program, write_back: functools.partial(interpret.run, program)
    if name == "cuda":
        # code generation loads when a backend is chosen: ~10 ms import tinytensor skips
        from .codegen import cuda as codegen_cuda
        from .passes import fuse  # likewise
        return lambda program, write_back: codegen_cuda.build(fuse.run(program))
    # code generation loads when a backend is chosen: ~10 ms import tinytensor skips
    from .codegen import c as codegen_c
    from .passes import fuse  # likewise
    return lambda program, write_back: codegen_c.build(fuse.run(program), write_back)
