"""Movement ops against PyTorch: forward, gradient and gradient-of-gradient in float64.

Each case is `fn(m, *inputs)` where `m` is the library (tinytensor or torch), so one
lambda serves both sides; inputs are shapes (random float64 tensors that require grad)
or arrays (int arrays are constants).
"""
import numpy as np
import pytest

import tinytensor as tt
from .cases import table_tests
from .oracle import F, check





I23 = np.arange(6).reshape(2, 3)  # an int64 constant

CASES = {
    # reshape / view
    "reshape": (lambda m, x: x.reshape(4, 3), [(3, 4)]),
    "reshape_neg1": (lambda m, x: x.reshape(2, -1, 3), [(3, 4)]),
    "reshape_tuple": (lambda m, x: x.reshape((-1,)), [(2, 3, 2)]),
    "reshape_scalar": (lambda m, x: x.reshape(()), [(1, 1)]),
    "reshape_from_scalar": (lambda m, x: x.reshape(1, 1, 1), [()]),
    "reshape_zero": (lambda m, x: x.reshape(3, 0, 2), [(0, 6)]),
    "view_neg1": (lambda m, x: x.view(-1, 2), [(2, 3, 2)]),
    "fn_reshape": (lambda m, x: m.reshape(x, (6, -1)), [(3, 4)]),
    # flatten / unflatten
    "flatten": (lambda m, x: x.flatten(), [(2, 3, 4)]),
    "flatten_1": (lambda m, x: x.flatten(1), [(2, 3, 4)]),
    "flatten_0_1": (lambda m, x: x.flatten(0, 1), [(2, 3, 4)]),
    "flatten_neg": (lambda m, x: x.flatten(-3, -2), [(2, 3, 4, 2)]),
    "flatten_same": (lambda m, x: x.flatten(1, 1), [(2, 3, 4)]),
    "flatten_scalar": (lambda m, x: x.flatten(), [()]),
    "flatten_zero": (lambda m, x: x.flatten(1), [(2, 0, 3)]),
    "unflatten": (lambda m, x: x.unflatten(1, (3, 4)), [(2, 12)]),
    "unflatten_neg": (lambda m, x: x.unflatten(-1, (2, -1)), [(2, 3, 6)]),
    # transpose / permute / movedim / T / mT
    "transpose": (lambda m, x: x.transpose(0, 1), [(2, 3)]),
    "transpose_neg": (lambda m, x: x.transpose(-1, -3), [(2, 3, 4)]),
    "transpose_same": (lambda m, x: x.transpose(1, 1), [(2, 3)]),
    "transpose_1d": (lambda m, x: x.transpose(0, -1), [(3,)]),
    "fn_transpose": (lambda m, x: m.transpose(x, 1, 2), [(2, 3, 4)]),
    "permute": (lambda m, x: x.permute(2, 0, 1), [(2, 3, 4)]),
    "permute_tuple_neg": (lambda m, x: x.permute((-1, 0, -2)), [(2, 3, 4)]),
    "permute_zero": (lambda m, x: x.permute(1, 0), [(0, 3)]),
    "movedim": (lambda m, x: x.movedim(0, -1), [(2, 3, 4)]),
    "movedim_neg": (lambda m, x: x.movedim(-1, 1), [(2, 3, 4)]),
    "movedim_tuple": (lambda m, x: m.movedim(x, (0, 1), (2, 0)), [(2, 3, 4)]),
    "T": (lambda m, x: x.T, [(2, 3)]),
    "T_1d": (lambda m, x: x.T if m is tt else x.permute(0), [(3,)]),  # torch warns on 1-D .T
    "mT": (lambda m, x: x.mT, [(2, 3, 4)]),
    # squeeze / unsqueeze
    "squeeze_all": (lambda m, x: x.squeeze(), [(1, 3, 1, 2)]),
    "squeeze_dim": (lambda m, x: x.squeeze(2), [(1, 3, 1, 2)]),
    "squeeze_dim_neg": (lambda m, x: x.squeeze(-4), [(1, 3, 1, 2)]),
    "squeeze_not1": (lambda m, x: x.squeeze(1), [(1, 3, 1, 2)]),
    "squeeze_tuple": (lambda m, x: x.squeeze((0, -2)), [(1, 3, 1, 2)]),
    "squeeze_scalar": (lambda m, x: x.squeeze(), [(1, 1)]),
    "squeeze_0d": (lambda m, x: x.squeeze(0), [()]),
    "squeeze_zero": (lambda m, x: x.squeeze(), [(1, 0, 1)]),
    "unsqueeze": (lambda m, x: x.unsqueeze(1), [(2, 3)]),
    "unsqueeze_neg": (lambda m, x: x.unsqueeze(-1), [(2, 3)]),
    "unsqueeze_neg3": (lambda m, x: x.unsqueeze(-3), [(2, 3)]),
    "unsqueeze_0d": (lambda m, x: x.unsqueeze(-1), [()]),
    # expand / broadcast_to
    "expand": (lambda m, x: x.expand(3, 4), [(3, 1)]),
    "expand_neg1": (lambda m, x: x.expand(-1, 4), [(3, 1)]),
    "expand_lead": (lambda m, x: x.expand(2, 5, -1, 4), [(3, 1)]),
    "expand_tuple": (lambda m, x: x.expand((2, 3, 4)), [(4,)]),
    "expand_0d": (lambda m, x: x.expand(2, 3), [()]),
    "expand_to_zero": (lambda m, x: x.expand(0, 3), [(1, 3)]),
    "broadcast_to": (lambda m, x: m.broadcast_to(x, (2, 3, 4)), [(3, 1)]),
    "broadcast_to_method": (lambda m, x: x.broadcast_to((4, 2, 3)), [(1, 3)]),
    "broadcast_tensors": (lambda m, x, y: m.broadcast_tensors(x, y), [(3, 1), (2, 1, 4)]),
    # repeat / tile / repeat_interleave
    "repeat": (lambda m, x: x.repeat(2, 3), [(2, 3)]),
    "repeat_lead": (lambda m, x: x.repeat(2, 1, 3), [(2, 3)]),
    "repeat_ones": (lambda m, x: x.repeat(1, 1), [(2, 3)]),
    "repeat_zero": (lambda m, x: x.repeat(0, 2), [(2, 3)]),
    "repeat_1d": (lambda m, x: x.repeat(3), [(2,)]),
    "tile": (lambda m, x: x.tile(2, 2), [(2, 3)]),
    "tile_short": (lambda m, x: x.tile(2), [(2, 3)]),
    "tile_long": (lambda m, x: m.tile(x, (2, 1, 2)), [(2, 3)]),
    "repeat_interleave": (lambda m, x: x.repeat_interleave(2), [(2, 3)]),
    "repeat_interleave_dim": (lambda m, x: x.repeat_interleave(3, dim=1), [(2, 3)]),
    "repeat_interleave_neg": (lambda m, x: m.repeat_interleave(x, 2, dim=-3), [(2, 3, 2)]),
    "repeat_interleave_counts": (lambda m, x: x.repeat_interleave(m.tensor([2, 0, 3]), dim=1), [(2, 3)]),
    "repeat_interleave_one": (lambda m, x: x.repeat_interleave(m.tensor([2]), dim=0), [(2, 3)]),
    "repeat_interleave_zero": (lambda m, x: x.repeat_interleave(0, dim=0), [(2, 3)]),
    # cat / stack
    "cat": (lambda m, x, y: m.cat([x, y]), [(2, 3), (4, 3)]),
    "cat_dim1": (lambda m, x, y, z: m.cat([x, y, z], 1), [(2, 3), (2, 1), (2, 4)]),
    "cat_neg": (lambda m, x, y: m.cat((x, y), dim=-2), [(2, 3, 4), (2, 1, 4)]),
    "cat_one": (lambda m, x: m.cat([x], 1), [(2, 3)]),
    "cat_zero": (lambda m, x, y: m.cat([x, y], 0), [(0, 3), (2, 3)]),
    "concat": (lambda m, x, y: m.concat([x, y], 1), [(2, 3), (2, 2)]),
    "cat_f32_f64": (lambda m, x, y: m.cat([x, y.float()], 0), [(2, 3), (1, 3)]),
    "cat_int_f64": (lambda m, x, i: m.cat([i, x], 0), [(1, 3), I23]),
    "stack": (lambda m, x, y: m.stack([x, y]), [(2, 3), (2, 3)]),
    "stack_dim": (lambda m, x, y, z: m.stack([x, y, z], 2), [(2, 3), (2, 3), (2, 3)]),
    "stack_neg": (lambda m, x, y: m.stack((x, y), dim=-1), [(2, 3), (2, 3)]),
    "stack_0d": (lambda m, x, y: m.stack([x, y]), [(), ()]),
    # split / chunk / unbind
    "split_int": (lambda m, x: x.split(2), [(5, 3)]),
    "split_int_dim": (lambda m, x: x.split(2, dim=-1), [(3, 4)]),
    "split_big": (lambda m, x: m.split(x, 10), [(5, 3)]),
    "split_list": (lambda m, x: x.split([1, 3, 1]), [(5, 3)]),
    "split_list_zero": (lambda m, x: x.split([2, 0, 1], 1), [(2, 3)]),
    "chunk": (lambda m, x: x.chunk(2), [(4, 3)]),
    "chunk_uneven": (lambda m, x: x.chunk(3, dim=1), [(2, 7)]),
    "chunk_uneven2": (lambda m, x: m.chunk(x, 4, -1), [(2, 5)]),
    "chunk_more": (lambda m, x: x.chunk(5), [(3, 2)]),
    "unbind": (lambda m, x: x.unbind(), [(3, 2)]),
    "unbind_neg": (lambda m, x: m.unbind(x, -1), [(2, 3, 4)]),
    "unbind_empty": (lambda m, x: x.unbind(1) + (x,), [(3, 0)]),
    # flip / roll
    "flip": (lambda m, x: x.flip(0), [(2, 3)]),
    "flip_many": (lambda m, x: m.flip(x, (0, -1)), [(2, 3, 4)]),
    "flip_list": (lambda m, x: x.flip([1]), [(2, 3, 4)]),
    "roll_flat": (lambda m, x: x.roll(2), [(2, 3)]),
    "roll_flat_neg": (lambda m, x: m.roll(x, -4), [(2, 3)]),
    "roll_dim": (lambda m, x: x.roll(1, 1), [(2, 3)]),
    "roll_dim_list": (lambda m, x: x.roll(1, [0]), [(3, 2)]),
    "roll_dim_neg": (lambda m, x: x.roll(-1, -1), [(2, 3)]),
    "roll_big": (lambda m, x: x.roll(7, 0), [(3, 2)]),
    "roll_tuple": (lambda m, x: x.roll((1, -2), (0, 2)), [(2, 3, 4)]),
    "roll_tuple_same": (lambda m, x: m.roll(x, (1, 1), (1, 1)), [(2, 3)]),
    # pad (torch.nn.functional.pad semantics)
    "pad_last": (lambda m, x: F(m).pad(x, (1, 2)), [(2, 3)]),
    "pad_two": (lambda m, x: F(m).pad(x, (1, 0, 0, 2)), [(2, 3)]),
    "pad_three": (lambda m, x: F(m).pad(x, (1, 1, 2, 0, 1, 1)), [(2, 3, 2)]),
    "pad_value": (lambda m, x: F(m).pad(x, (2, 1), value=-3.5), [(2, 3)]),
    "pad_crop": (lambda m, x: F(m).pad(x, (-1, -1)), [(2, 4)]),
    "pad_crop_mixed": (lambda m, x: F(m).pad(x, (-1, 2, 1, -1), value=1.0), [(3, 4)]),
    "pad_zeros": (lambda m, x: F(m).pad(x, (0, 0)), [(2, 3)]),
    "pad_zero_dim": (lambda m, x: F(m).pad(x, (1, 1)), [(2, 0)]),
    # tril / triu
    "tril": (lambda m, x: x.tril(), [(3, 4)]),
    "tril_p1": (lambda m, x: x.tril(1), [(3, 4)]),
    "tril_m1": (lambda m, x: m.tril(x, -1), [(2, 4, 3)]),
    "triu": (lambda m, x: x.triu(), [(4, 3)]),
    "triu_p1": (lambda m, x: m.triu(x, diagonal=1), [(2, 3, 3)]),
    "triu_m1": (lambda m, x: x.triu(-1), [(4, 3)]),
    # compositions
    "permute_reshape": (lambda m, x: x.permute(1, 0, 2).reshape(3, -1), [(2, 3, 4)]),
    "expand_reshape": (lambda m, x: x.expand(2, 3, 4).reshape(6, 4), [(3, 1)]),
    "split_heads": (lambda m, x: x.view(2, 3, 2, 4).transpose(1, 2).flatten(0, 1), [(2, 3, 8)]),
}


FLOAT32 = ["reshape_neg1", "permute", "expand_lead", "repeat", "repeat_interleave_dim",
           "cat_dim1", "stack_neg", "split_list", "chunk_uneven", "roll_tuple", "pad_crop_mixed",
           "tril_m1", "split_heads", "cat_f32_f64"]
test_movement, test_movement_float32, test_movement_cuda = table_tests(CASES, FLOAT32, check)


def test_views_share_version_counter():
    x = tt.zeros(2, 3)
    v = x.reshape(3, 2)
    x.add_(1)
    assert v._version is x._version and v._version_number == 1


def test_contiguous_is_identity():
    x = tt.randn(2, 3)
    assert x.contiguous() is x


# ---------------------------------------------------------------- bad input
ERRORS = {
    "reshape_bad_size": (lambda x: x.reshape(4, 2), ValueError, r"reshape.*\(4, 2\).*\(2, 3\)"),
    "reshape_two_neg1": (lambda x: x.reshape(-1, -1), ValueError, "only one dimension"),
    "reshape_neg1_bad": (lambda x: x.reshape(-1, 4), ValueError, r"reshape.*\(2, 3\)"),
    "reshape_negative": (lambda x: x.reshape(-2, -3), ValueError, "reshape"),
    "expand_bad": (lambda x: x.expand(2, 4), ValueError, r"expand.*\(2, 3\).*\(2, 4\)"),
    "expand_few": (lambda x: x.expand(3), ValueError, "expand"),
    "expand_neg1_lead": (lambda x: x.expand(-1, 2, 3), ValueError, "expand"),
    "cat_mismatch": (lambda x: tt.cat([x, tt.zeros(3, 2)]), ValueError, r"cat.*\(2, 3\).*\(3, 2\)"),
    "cat_ndim": (lambda x: tt.cat([x, tt.zeros(3)]), ValueError, "cat"),
    "cat_empty": (lambda x: tt.cat([]), ValueError, "cat"),
    "stack_mismatch": (lambda x: tt.stack([x, tt.zeros(3, 2)]), ValueError, "stack"),
    "permute_bad": (lambda x: x.permute(0, 0), ValueError, "permute"),
    "permute_count": (lambda x: x.permute(0), ValueError, "permute"),
    "transpose_range": (lambda x: x.transpose(0, 2), IndexError, "transpose.*dimension 2"),
    "squeeze_range": (lambda x: x.squeeze(3), IndexError, "squeeze"),
    "unsqueeze_range": (lambda x: x.unsqueeze(4), IndexError, "unsqueeze"),
    "split_sections": (lambda x: x.split([1, 3]), ValueError, "split"),
    "split_size": (lambda x: x.split(0), ValueError, "split"),
    "chunk_zero": (lambda x: x.chunk(0), ValueError, "chunk"),
    "repeat_few": (lambda x: x.repeat(2), ValueError, "repeat"),
    "repeat_neg": (lambda x: x.repeat(-1, 2), ValueError, "repeat"),
    "roll_mismatch": (lambda x: x.roll((1, 2), 0), ValueError, "roll"),
    "roll_tuple_nodims": (lambda x: x.roll((1, 2)), ValueError, "roll"),
    "pad_odd": (lambda x: tt.functional.pad(x, (1,)), ValueError, "pad"),
    "pad_crop_too_much": (lambda x: tt.functional.pad(x, (-2, -2)), ValueError, "pad"),
    "pad_mode": (lambda x: tt.functional.pad(x, (1, 1), mode="bogus"), NotImplementedError,
                 "pad: mode 'bogus' is not supported"),
    "tril_1d": (lambda x: x[0].tril(), ValueError, "tril"),
    "flatten_order": (lambda x: x.flatten(1, 0), ValueError, "flatten"),
    "unflatten_bad": (lambda x: x.unflatten(1, (2, 2)), ValueError, "unflatten"),
    "repeat_interleave_counts": (lambda x: x.repeat_interleave(tt.tensor([1, 2]), dim=1), ValueError,
                                 "repeat_interleave"),
    "movedim_range": (lambda x: x.movedim(0, 5), IndexError, "movedim"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_movement_errors(name):
    fn, exc, match = ERRORS[name]
    with pytest.raises(exc, match=match):
        fn(tt.zeros(2, 3))


@pytest.mark.parametrize("name,f", [
    ("cat_one", lambda x: tt.cat([x])),
    ("stack_one_row", lambda x: tt.stack([x])[0]),
    ("pad_zero", lambda x: tt.functional.pad(x, (0, 0))),
    ("pad_crop_to_zero", lambda x: tt.functional.pad(x, (-1, 1))),
    ("flip", lambda x: x.flip(0)),  # torch.flip copies, unlike np.flip
], ids=lambda v: v if isinstance(v, str) else "")
def test_copying_ops_return_new_memory_like_torch(name, f):
    # torch.cat([x]), F.pad(x, (0, 0)) and x.flip are copies: writing into them must not change x
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = f(x)
    y.add_(10)
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("case", [
    lambda m, x: x.t(),
    lambda m, x: x.narrow(1, 1, 2),
    lambda m, x: x.narrow(0, -2, 2),
    lambda m, x: x.select(1, 2),
    lambda m, x: x.select(0, -1),
])
def test_t_narrow_select_match_torch(case):
    check(case, [(3, 4)])


def test_t_and_narrow_errors():
    with pytest.raises(ValueError, match="t: expects a tensor with at most 2 dimensions"):
        tt.zeros(2, 3, 4).t()
    with pytest.raises(IndexError, match="narrow: start 3 and length 2 do not fit"):
        tt.zeros(2, 4).narrow(1, 3, 2)


def test_contiguous_copies_only_when_needed_and_gives_writable_memory():
    x = tt.randn(3, 4)
    assert x.contiguous() is x
    y = x.T.contiguous()
    assert y.data.flags.c_contiguous and y.tolist() == x.T.tolist()
    e = tt.ones(1, 3).expand(2, 3).contiguous()
    e.add_(1)  # an expand() view itself is read-only; its contiguous copy is not
    assert e.tolist() == [[2.0] * 3] * 2
    check(lambda m, a: a.mT.contiguous() * 2, [(2, 3)])
