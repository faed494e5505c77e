"""`tt.masked`: torch.masked's reductions on strided tensors, with a `mask=` keyword
(implemented in tinytensor/ops/masked_reductions.py)."""
from .ops.masked_reductions import (sum, prod, cumsum, cumprod, amax, amin, argmax, argmin,  # noqa: F401,A004
                                    mean, var, std, logsumexp, logaddexp, softmax, log_softmax,
                                    softmin, norm, normalize, median)
