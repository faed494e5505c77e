"""_OneCall: the base of the torch.nn layers that are one call of a tinytensor.functional
function with their constructor's arguments (GLU, ELU, Fold, ...).

Each layer still writes its own `__init__` with torch.nn's signature (tests compare it with
`inspect.signature`) and names its function there; this base keeps the arguments as
attributes under torch's names (so `m.dim = 1` after construction changes the call, as in
torch), passes them after the input in the order given, and prints them as torch.nn does."""
from .module import Module


class _OneCall(Module):
    def __init__(self, fn, **args):
        super().__init__()
        self._fn, self._args = fn, tuple(args)
        for name, value in args.items():
            setattr(self, name, value)

    def forward(self, input):
        return self._fn(input, *(getattr(self, name) for name in self._args))

    def extra_repr(self):
        # torch.nn's activations show `inplace` only when it is set: `ELU(alpha=1.0)`
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._args
                         if name != "inplace" or self.inplace)
