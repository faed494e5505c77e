"""The mixin `Tensor` inherits its op methods and operators from: empty here, since core
imports no op. `tinytensor.ops` fills it when it loads (ops/methods.py, `attach`), so
`x.sum(...)` is `ops.sum(x, ...)` with no frame in between, and core never names an op."""


class TensorMethods:
    __slots__ = ()
