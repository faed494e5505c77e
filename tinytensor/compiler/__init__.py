"""The compiler: `tt.compile` records a step once per input signature and replays it.

    capture.py    run the step once under record(); its tape (forward, and the backward
                  as create_graph records it) becomes an ir.Program
    ir.py         the SSA program: Value, Instr, Program, verify(), text()
    interpret.py  the oracle: runs a Program with the ops' own forwards
    passes/       dce, cse, fold, simplify, fuse, plan (program in, program out)
    pipeline.py   which passes run, in which order, for each backend (one list)
    codegen/c.py  fused kernels as C (cc, ctypes); cache_disk.py keeps them by source hash
    explain.py    tt.compiler.explain(step, *args, out=...): every stage as text, picture, C
    guards.py     the signature a program is valid for
    api.py        tt.compile and CompiledFunction
    aot.py        differentiable outputs: the joint forward+backward split in two programs
    hooks.py      the compiler's answers to core's capture hooks (core/hooks.py)
    eager_kernels.py  the machinery of the eager C kernels, installed into kernels/c_eager.py

Captured: the forward, the backward (.backward() and tt.grad, recorded as create_graph
records them) and nn.optim steps (SGD, Adam, AdamW, role "optimizer": lr and the bias
corrections are inputs read at every replay, new values are copied into the parameters).

Not captured (each a clear error or documented here):
- in-place ops on tensors the step uses (x.add_(y)) raise; use the out-of-place form;
- reading values into Python (.item(), bool(t), float(t), .numpy(), .tolist()) raises,
  naming the line;
- random numbers drawn outside a recorded op (tt.rand inside the step) raise; dropout is a
  recorded op and replays like eager (same seed, same result);
- tensors the step reads without receiving them as arguments or through a Module or
  optimizer argument are baked in as constants if they do not require grad;
- a new input signature (shapes, dtypes, devices) compiles anew, up to 8 per function, then
  new ones run eagerly with one warning; dynamic=True instead captures the sizes as
  symbols (dynamic.py, ../symbolic.py), so one program serves every call whose sizes pass
  its guards;
- outputs that require grad are differentiable (aot.py: the forward and its backward are
  captured together and split in two programs; backward() outside runs the second), but
  backward(create_graph=True) through them raises; under tt.no_grad() they carry no history,
  and so do the results of a step that runs its own backward.
"""
from . import hooks as _hooks  # noqa: F401  (installs the compiler's capture hooks in core)
from . import eager_kernels as _eager_kernels  # noqa: F401  (installs the eager kernels' toolchain)
from . import ir
from .api import CompiledFunction, compile
from .capture import CaptureError
from .explain import explain

__all__ = ["compile", "CompiledFunction", "CaptureError", "explain", "ir"]
