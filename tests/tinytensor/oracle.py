"""The one-line-per-case helper shared by the op test files: run `fn(m, *inputs)` with
m = tinytensor and m = torch and compare values, gradients and double-backward."""
import torch

import tinytensor as tt
from tinytensor.testing import compare_with_torch


def F(m):
    return tt.functional if m is tt else torch.nn.functional


def with_squares(fn, m):
    """fn's outputs plus their squares: a squared output makes the double-backward check go
    through the backward of the op's backward (a linear op's own gradient is constant)."""
    def run(*xs):
        out = fn(m, *xs)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        return outs + tuple(o * o for o in outs if o.is_floating_point())
    return run


def check(fn, inputs, dtype="float64", **kw):
    compare_with_torch(with_squares(fn, tt), with_squares(fn, torch), inputs,
                       dtype=dtype, double_backward=dtype == "float64", **kw)
