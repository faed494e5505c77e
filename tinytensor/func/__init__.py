"""`tt.func`: composable function transforms, as torch.func (issue 27).

    tt.func.grad(f)(x)                     the gradient of scalar f at x
    tt.func.jvp(f, (x,), (v,))             (f(x), J v) in one forward pass (forward mode)
    tt.func.vjp(f, x)                      (f(x), vjp_fn): vjp_fn(u) = u^T J
    tt.func.jacrev(f) / jacfwd(f)          the Jacobian by reverse / forward mode
    tt.func.hessian(f), tt.func.hvp(f, (x,), (v,))
    tt.func.functional_call(model, params, (x,))

They nest to any order (jvp of grad, grad of grad, jvp of jvp) and take pytrees (tuples,
lists, dicts) of tensors. Forward mode pushes a tangent through each op's `jvp` rule
(core/forward_ad.py)."""
from .forward import jacfwd, jvp, linearize  # noqa: F401
from .module import functional_call, stack_module_state  # noqa: F401
from .reverse import grad, grad_and_value, jacrev, vjp  # noqa: F401
from .second import hessian, hvp  # noqa: F401
from .vmap import vmap  # noqa: F401

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp",
           "linearize", "functional_call", "stack_module_state", "vmap"]
