"""F.pad modes reflect, replicate and circular against torch in float64: values, gradients
(entries gathered more than once add up) and double backward, in 1, 2 and 3 padded
dimensions, batched and unbatched, with negative (cropping) pads; torch's refusals."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from .oracle import F, check

MODES = ["reflect", "replicate", "circular"]
SHAPES = [  # (input shape, pads)
    ((2, 5), (2, 3)), ((2, 3, 5), (4, 1)), ((2, 3, 5), (0, 2)), ((3, 4), (3, 0)),
    ((2, 4, 5), (1, 2, 3, 0)), ((2, 2, 4, 5), (2, 1, 1, 3)), ((2, 2, 4, 5), (0, 0, 2, 2)),
    ((2, 3, 4, 5), (1, 2, 3, 1, 2, 1)), ((1, 2, 3, 4, 5), (2, 2, 1, 0, 0, 1)),
    ((2, 3, 5), (-1, 2)), ((2, 4, 5), (2, -2, -1, 1)),
]


@pytest.mark.parametrize("shape,pads", SHAPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_against_torch(mode, shape, pads):
    check(lambda m, x: F(m).pad(x, pads, mode=mode), [shape])


def test_circular_full_wrap_and_replicate_wide():
    check(lambda m, x: F(m).pad(x, (4, 4), mode="circular"), [(2, 3, 4)])
    check(lambda m, x: F(m).pad(x, (7, 9, 6, 0), mode="replicate"), [(2, 3, 4)])


def test_float32_and_values():
    check(lambda m, x: F(m).pad(x, (2, 1, 1, 2), mode="reflect"), [(2, 3, 4)], dtype="float32")
    x = tt.arange(4.0).reshape(1, 4)
    assert F(tt).pad(x, (3, 1), mode="reflect").tolist() == [[3.0, 2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0]]


@pytest.mark.parametrize("mode", MODES)
def test_integer_input(mode):
    data = np.arange(24).reshape(2, 3, 4)
    ours = F(tt).pad(tt.tensor(data), (2, 1), mode=mode)
    theirs = F(torch).pad(torch.tensor(data), (2, 1), mode=mode)
    assert ours.dtype.name == "int64" and ours.tolist() == theirs.tolist()


BAD = [  # (mode, shape, pads, exception type, message)
    ("reflect", (2, 2, 4), (4, 0), RuntimeError, r"pad: mode 'reflect' needs pads smaller than the "
                                                 r"dimension they pad, got \(4, 0\) for dimension 2"),
    ("circular", (2, 2, 4), (5, 0), RuntimeError,
     r"wrap around dimension 2 of shape \(2, 2, 4\) more than once"),
    ("reflect", (4,), (1, 1), NotImplementedError, r"pad: mode 'reflect' with 2 pads needs a 2-d "
                                                   r"\(unbatched\) or 3-d \(batched\) input"),
    ("replicate", (2, 3, 4, 5), (1, 1), NotImplementedError, r"got shape \(2, 3, 4, 5\)"),
    ("circular", (2, 3), (1, 1, 1, 1), NotImplementedError, r"with 4 pads needs a 3-d"),
    ("reflect", (2, 3, 0), (1, 1), RuntimeError, r"non-empty dimensions other than the batch"),
    ("replicate", (2, 0, 4), (1, 1), RuntimeError, r"non-empty dimensions"),
    ("bogus", (2, 3, 4), (1, 1), NotImplementedError, r"pad: mode 'bogus' is not supported"),
]


@pytest.mark.parametrize("mode,shape,pads,exc,match", BAD, ids=[f"{b[0]}-{b[1]}-{b[2]}" for b in BAD])
def test_refusals_match_torch(mode, shape, pads, exc, match):
    with pytest.raises(exc):
        F(torch).pad(torch.zeros(shape), pads, mode=mode)
    with pytest.raises(exc, match=match):
        F(tt).pad(tt.zeros(*shape), pads, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_batch_of_zero_is_fine(mode):
    theirs = F(torch).pad(torch.zeros(0, 3, 4), (1, 2), mode=mode)
    assert tuple(F(tt).pad(tt.zeros(0, 3, 4), (1, 2), mode=mode).shape) == tuple(theirs.shape) == (0, 3, 7)
