"""Second order, composed from the two modes: hessian = jacfwd(jacrev), hvp = forward over
reverse (one jvp of the gradient: the cost of about two gradients, whatever the size)."""
from .forward import jacfwd, jvp
from .reverse import grad_and_value, jacrev


def hessian(func, argnums=0):
    return jacfwd(jacrev(func, argnums), argnums)


def hvp(func, primals, tangents):
    """(func(*primals), H·tangents) for scalar func: the Hessian w.r.t. every primal times
    the tangents, as torch.autograd.functional.hvp returns them (a tuple over primals)."""
    primals, tangents = tuple(primals), tuple(tangents)
    g = grad_and_value(func, argnums=tuple(range(len(primals))))
    (grads, value), (hv, _) = jvp(g, primals, tangents)
    return value, hv
