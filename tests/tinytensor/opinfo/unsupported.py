"""OpInfo samples tinytensor refuses on purpose, in one place, each with why.

`UNSUPPORTED[name]` is a list of (reason, predicate): a sample the predicate accepts must
make tinytensor raise an error naming the op (harness.check_op checks both ways: a listed
sample that runs is a failure too, so the list cannot go stale). Keep predicates narrow:
they describe arguments, never a sample's position in OpInfo's list.
"""
import torch


def _is_tensor(x):
    return isinstance(x, torch.Tensor)


UNSUPPORTED = {
}


def refused_reason(name, sample):
    """Why tinytensor refuses this sample of `name`, or None if it must take it."""
    for reason, accepts in UNSUPPORTED.get(name, ()):
        if accepts(sample):
            return reason
    return None
