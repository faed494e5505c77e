"""OpInfo samples tinytensor refuses on purpose, in one place, each with why.

`UNSUPPORTED[name]` is a list of (reason, predicate): a sample the predicate accepts must
make tinytensor raise an error naming the op (harness.check_op checks both ways: a listed
sample that runs is a failure too, so the list cannot go stale). Keep predicates narrow:
they describe arguments, never a sample's position in OpInfo's list.
"""
import torch


def _is_tensor(x):
    return isinstance(x, torch.Tensor)


def _reaches_past_the_tensor(sample):
    """as_strided's (size, stride, storage_offset) reach beyond the input's own entries
    (into the storage of the tensor it is a view of, in torch)."""
    size, stride = sample.args[0], sample.args[1]
    offset = sample.kwargs.get("storage_offset", sample.args[2] if len(sample.args) > 2 else 0)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset - 1
    return last >= sample.input.numel()


NO_STORAGES = ("tinytensor has no storages: a tensor is its own array, so as_strided can "
               "only address the tensor's own entries")

def _degree_past_16384(sample):
    """A Laguerre degree above 2^14: torch's C loop runs millions of steps per element; here each
    degree is one array pass, so such a degree is refused (by name) rather than run for minutes."""
    n = sample.args[0]
    values = n.detach().cpu().numpy() if _is_tensor(n) else [n]
    import numpy as np
    v = np.trunc(np.asarray(values, dtype=float))
    return bool((np.isfinite(v) & (v > 16384)).any())


UNSUPPORTED = {
    # issue 23: ops not checked for complex refuse complex inputs by name (ops/complex_rules.py)
    "nn.functional.silu": [("silu is not written for complex tensors yet",
                            lambda s: _is_tensor(s.input) and s.input.is_complex())],
    "special.laguerre_polynomial_l": [("degrees above 2^14 (one array pass per degree)",
                                       _degree_past_16384)],
    "as_strided": [(NO_STORAGES, _reaches_past_the_tensor)],
    "as_strided_copy": [(NO_STORAGES, _reaches_past_the_tensor)],
    "as_strided_scatter": [(NO_STORAGES, _reaches_past_the_tensor)],
}


def refused_reason(name, sample):
    """Why tinytensor refuses this sample of `name`, or None if it must take it."""
    for reason, accepts in UNSUPPORTED.get(name, ()):
        if accepts(sample):
            return reason
    return None
