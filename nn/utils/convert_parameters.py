"""parameters_to_vector / vector_to_parameters, as torch.nn.utils."""
import tinytensor as tt


def parameters_to_vector(parameters):
    """All parameters flattened and joined into one 1-D tensor (differentiable)."""
    params = list(parameters)
    devices = {str(p.device) for p in params}
    if len(devices) > 1:
        raise TypeError(f"parameters_to_vector: found parameters on different devices "
                        f"{sorted(devices)}; move them to one device first")
    return tt.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D `vec` into `parameters` (in their order), as
    torch's does through `.data`: outside autograd."""
    if not isinstance(vec, tt.Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, but got "
                        f"{type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vec of shape {tuple(vec.shape)} does not hold "
                         f"the {total} entries of the parameters")
    start = 0
    with tt.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[start:start + n].reshape(tuple(p.shape)))
            start += n
