"""The small and unsigned integer dtypes (uint8, int8, int16, uint16, uint32, uint64) against
torch: promotion over every pair of dtypes (tensor-tensor, tensor-0-d, tensor-Python scalar),
wrap-around values, shifts with negative and oversized amounts, view(dtype), casts."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import dtypes

NAMES = [d.name for d in dtypes.ALL]
INTS = [d.name for d in dtypes.ALL if d.category == 1]
BITS = ["bool"] + INTS

# each dtype's extremes and a few ordinary values, so arithmetic wraps and casts overflow
VALUES = {
    "bool": [True, False, True, False],
    "uint8": [0, 1, 200, 255],
    "int8": [-128, -1, 1, 127],
    "int16": [-32768, -3, 300, 32767],
    "int32": [-2 ** 31, -7, 70000, 2 ** 31 - 1],
    "int64": [-2 ** 63, -5, 2 ** 40, 2 ** 63 - 1],
    "uint16": [0, 3, 40000, 65535],
    "uint32": [0, 5, 3_000_000_000, 2 ** 32 - 1],
    "uint64": [0, 9, 2 ** 63, 2 ** 64 - 1],
    "float16": [-2.5, 0.0, 1.5, 65504.0],
    "float32": [-1e30, -0.5, 3.25, 1e30],
    "float64": [-1e300, -0.25, 7.5, 1e300],
}

OPS = {
    "add": (lambda a, b: a + b),
    "mul": (lambda a, b: a * b),
    "and": (lambda a, b: a & b),
    "or": (lambda a, b: a | b),
    "xor": (lambda a, b: a ^ b),
}


def pair(name, zero_d=False):
    arr = np.array(VALUES[name], dtype=dtypes.from_any(name).np)
    if zero_d:
        arr = arr[3]  # the extreme value, as a 0-d array
    return tt.tensor(arr), torch.from_numpy(np.array(arr))


def in_int64(fn, a, b, dt):
    """fn in int64, which wraps modulo 2**64 like every narrower dtype, cast back to dt: right
    for + * & | ^, not for shifts."""
    wide = [x.to(torch.int64) if isinstance(x, torch.Tensor) else x for x in (a, b)]
    return fn(*wide).to(dt)


def torch_result(fn, a, b, fallback=in_int64):
    """torch's answer; where torch has the promotion but no kernel for a dtype (e.g. add on
    uint32), `fallback` computes it in the dtype torch would have produced."""
    try:
        return fn(a, b)
    except NotImplementedError:
        dt = torch.result_type(a, b)
        if dt not in (torch.uint16, torch.uint32, torch.uint64):
            raise
        return fallback(fn, a, b, dt)


def check_like_torch(fn, a, b, ta, tb, what, fallback=in_int64):
    """The same dtype and values as torch, or the same refusal; returns a mismatch or None."""
    try:
        want = torch_result(fn, ta, tb, fallback)
    except (RuntimeError, TypeError) as e:  # torch: a promotion it refuses, an op on floats
        try:
            got = fn(a, b)
        except (RuntimeError, TypeError):
            return None
        return f"{what}: torch refuses ({e}), tinytensor gives {got.dtype.name}"
    got = fn(a, b)
    if str(want.dtype) != f"torch.{got.dtype.name}":
        return f"{what}: dtype {got.dtype.name}, torch {want.dtype}"
    if not np.array_equal(got.numpy(), want.numpy(), equal_nan=got.dtype.is_floating_point):
        return f"{what}: {got.tolist()} vs torch {want.tolist()}"
    return None


def test_every_dtype_is_named_like_torch():
    for d in dtypes.ALL:
        assert getattr(tt, d.name) is d
        assert isinstance(getattr(torch, d.name), torch.dtype)
        assert dtypes.from_any(d.name) is d and dtypes.from_any(f"torch.{d.name}") is d
        assert dtypes.from_any(d.np) is d
    assert tt.short is tt.int16
    assert dtypes.from_any(np.longlong) is tt.int64 and dtypes.from_any(np.ulonglong) is tt.uint64


def test_promotion_table_is_torchs_for_every_pair():
    for a in dtypes.ALL:
        for b in dtypes.ALL:
            try:
                want = str(torch.promote_types(getattr(torch, a.name), getattr(torch, b.name)))
            except RuntimeError:
                with pytest.raises(RuntimeError, match=rf"{a.name} and {b.name}.*\.to\(dtype\)"):
                    dtypes.promote(a, b)
                continue
            assert want == f"torch.{dtypes.promote(a, b).name}", (a, b)


@pytest.mark.parametrize("op", OPS)
def test_tensor_tensor_ops_over_every_dtype_pair_match_torch(op):
    bad = []
    for x in NAMES:
        for y in NAMES:
            (a, ta), (b, tb) = pair(x), pair(y)
            bad.append(check_like_torch(OPS[op], a, b, ta, tb, f"{x} {op} {y}"))
    assert not [m for m in bad if m], "\n".join(m for m in bad if m)


@pytest.mark.parametrize("op", OPS)
def test_tensor_with_0d_tensor_over_every_dtype_pair_matches_torch(op):
    bad = []
    for x in NAMES:
        for y in NAMES:
            (a, ta), (b, tb) = pair(x), pair(y, zero_d=True)
            if x == "float16" and abs(float(tb)) > 65504:
                continue  # torch multiplies float16 by a 0-d operand in float32, tinytensor
                #           rounds the operand to float16 first: a float16 matter, not these dtypes
            bad.append(check_like_torch(OPS[op], a, b, ta, tb, f"{x} {op} 0-d {y}"))
            bad.append(check_like_torch(OPS[op], b, a, tb, ta, f"0-d {y} {op} {x}"))
    assert not [m for m in bad if m], "\n".join(m for m in bad if m)


# Python ints are wrapped into the tensor's dtype as torch does (300 against uint8 is 44)
SCALARS = [0, 3, 100, 255, 300, -1, -1000, 2 ** 40, -2 ** 63, 2 ** 64 - 1, True, False, 2.5]


@pytest.mark.parametrize("op", OPS)
def test_tensor_with_python_scalars_matches_torch(op):
    bad = []
    for x in NAMES:
        for s in SCALARS:
            if isinstance(s, int) and abs(s) > 2 ** 15 and x.startswith("float"):
                continue  # torch keeps a scalar in double for float16 math; tinytensor rounds it
            a, ta = pair(x)
            bad.append(check_like_torch(OPS[op], a, s, ta, s, f"{x} {op} {s!r}"))
            bad.append(check_like_torch(OPS[op], s, a, s, ta, f"{s!r} {op} {x}"))
    assert not [m for m in bad if m], "\n".join(m for m in bad if m)


def test_refused_promotion_names_both_dtypes_and_the_fix():
    with pytest.raises(RuntimeError, match=r"uint32 and int64 is not supported.*\.to\(dtype\)"):
        tt.tensor([1], dtype=tt.uint32) + tt.tensor([1])
    # a 0-d tensor or a scalar of the same category does not promote, so it is fine (as in torch)
    assert (tt.tensor([1], dtype=tt.uint32) + tt.tensor(1)).dtype is tt.uint32
    assert (tt.tensor([1], dtype=tt.uint64) * 2).tolist() == [2]


# ---------------------------------------------------------------------------------- shifts
def shift_reference(value, amount, name):
    """C-free shift semantics, as torch defines them: 0 or the sign fill past the width."""
    bits = 8 * dtypes.from_any(name).itemsize
    if amount < 0 or amount >= bits:
        return 0, (-1 if value < 0 else 0)
    left = (value << amount) & ((1 << bits) - 1)
    if name[0] == "i" and left >= 1 << (bits - 1):
        left -= 1 << bits
    return left, value >> amount


def by_definition(side):
    """The fallback for shifts torch has no kernel for (uint16/32/64): shift_reference."""
    def fallback(fn, a, b, dt):
        name = str(dt).replace("torch.", "")
        return torch.tensor([shift_reference(int(v), int(s), name)[side]
                             for v, s in zip(a.tolist(), b.tolist())], dtype=dt)
    return fallback


@pytest.mark.parametrize("name", INTS)
def test_shifts_by_every_amount_match_the_definition_and_torch(name):
    dt = dtypes.from_any(name)
    bits = 8 * dt.itemsize
    values = VALUES[name]
    amounts = [0, 1, bits - 1, bits, bits + 1, 70] + ([-1, -bits] if dt.np.kind == "i" else [])
    x = tt.tensor(values, dtype=dt)
    for s in amounts:
        want = [shift_reference(v, s, name) for v in values]
        by_tensor = tt.tensor([s] * len(values), dtype=dt)
        for amount in (s, by_tensor):
            assert (x << amount).tolist() == [w[0] for w in want], (name, s)
            assert (x >> amount).tolist() == [w[1] for w in want], (name, s)
            assert (x << amount).dtype is dt
        try:
            tx = torch.tensor(values, dtype=getattr(torch, name))
            t_left, t_right = (tx << s).tolist(), (tx >> s).tolist()
        except NotImplementedError:  # torch has no shift kernels for uint16/32/64
            continue
        assert [w[0] for w in want] == t_left and [w[1] for w in want] == t_right, (name, s)


def test_shifts_promote_like_torch_and_have_their_function_and_method_forms():
    bad = []
    for x in BITS:
        for y in BITS:
            a, ta = pair(x)
            amounts = np.array([0, 1, 3, 7], dtype=dtypes.from_any(y).np)  # in range for all
            b, tb = tt.tensor(amounts), torch.from_numpy(amounts)
            for side, (op, fn) in enumerate((("<<", lambda p, q: p << q), (">>", lambda p, q: p >> q))):
                bad.append(check_like_torch(fn, a, b, ta, tb, f"{x} {op} {y}", by_definition(side)))
    assert not [m for m in bad if m], "\n".join(m for m in bad if m)
    x = tt.tensor([1, -3], dtype=tt.int8)
    assert (1 << tt.tensor([3, 4])).tolist() == [8, 16] and (64 >> tt.tensor([1, 7])).tolist() == [32, 0]
    assert tt.ops.bitwise_left_shift(x, 2).tolist() == x.bitwise_left_shift(2).tolist() == [4, -12]
    assert tt.ops.bitwise_right_shift(x, 1).tolist() == x.bitwise_right_shift(1).tolist() == [0, -2]
    assert (tt.tensor([True]) << 1).tolist() == [2]  # bool with a Python int is int64, as in torch


def test_shifts_refuse_floats_and_bools_naming_the_op():
    with pytest.raises(TypeError, match=r"bitwise_left_shift: only integer tensors.*float32"):
        tt.tensor([1.0]) << 1
    with pytest.raises(TypeError, match=r"bitwise_right_shift: bool operands"):
        tt.tensor([True]) >> tt.tensor([True])


def test_bitwise_not_matches_torch_for_every_integer_dtype():
    for name in BITS:
        a, ta = pair(name)
        got = ~a
        assert got.dtype is a.dtype and got.tolist() == a.bitwise_not().tolist()
        try:
            want = (~ta).tolist()
        except NotImplementedError:  # torch: no kernel for uint16/32/64
            want = [~v & ((1 << 8 * a.dtype.itemsize) - 1) for v in VALUES[name]]
        assert got.tolist() == want, name


# ---------------------------------------------------------------------------------- view(dtype)
def test_view_dtype_reinterprets_bits_like_torch_for_every_pair():
    raw = np.random.default_rng(0).integers(0, 256, size=(3, 8), dtype=np.uint8)
    raw[raw == 0xFF] = 0  # no NaN payloads in floats: torch and NumPy may differ in those bits
    for x in NAMES:
        if x == "bool":
            continue
        src, tsrc = tt.tensor(raw).view(x), torch.from_numpy(raw.copy()).view(getattr(torch, x))
        for y in NAMES:
            if y == "bool":
                continue
            got, want = src.view(getattr(tt, y)), tsrc.view(getattr(torch, y))
            assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == y, (x, y)
            assert got.numpy().tobytes() == want.numpy().tobytes(), (x, y)
    assert tt.tensor([0, 1, 2], dtype=tt.uint8).view(tt.bool).tolist() == [False, True, True]


def test_view_dtype_errors_say_why():
    with pytest.raises(RuntimeError, match=r"view: cannot view a uint8 tensor of shape \(3,\) as int16 "
                                           r"\(1 vs 2 bytes.*last dimension \(3\) must be divisible by 2"):
        tt.zeros(3, dtype=tt.uint8).view(tt.int16)
    with pytest.raises(RuntimeError, match=r"shape \(\) as int16.*0-d tensor"):
        tt.zeros((), dtype=tt.uint8).view(tt.int16)
    assert tt.zeros((), dtype=tt.int16).view(tt.uint16).shape == ()


def test_view_dtype_carries_no_gradient_and_shape_views_still_work():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    assert not x.view(tt.int32).requires_grad and not x.view(tt.float16).requires_grad
    assert x.view(tt.float32).requires_grad  # the same dtype is an alias, as in torch
    assert x.view(2, 1).shape == (2, 1) and x.view(-1).shape == (2,) and x.view((1, 2)).shape == (1, 2)
    assert x.view("int32").tolist() == torch.tensor([1.0, 2.0]).view(torch.int32).tolist()


# ---------------------------------------------------------------------------------- creation and casts
@pytest.mark.parametrize("name", INTS)
def test_creation_and_casts_match_torch(name):
    dt, tdt = getattr(tt, name), getattr(torch, name)
    assert tt.zeros(2, dtype=dt).dtype is dt and tt.ones(2, dtype=name).dtype is dt
    assert tt.arange(5, dtype=dt).tolist() == list(range(5))
    assert tt.full((2,), 7, dtype=dt).tolist() == [7, 7]
    assert tt.from_numpy(np.zeros(2, dtype=dt.np)).dtype is dt  # NumPy's dtype is kept, as in torch
    assert tt.tensor(np.ones(1, dt.np)).dtype is dt
    wide = [-1, 300, 70000, -(2 ** 40) - 3, 2 ** 63 - 1]  # wraps when cast down
    got = tt.tensor(wide).to(dt)
    assert got.dtype is dt and got.tolist() == torch.tensor(wide).to(tdt).tolist()
    with pytest.raises(RuntimeError, match=rf"only floating-point.*{name}"):
        tt.zeros(2, dtype=dt).requires_grad_()


def test_byte_char_short_methods_like_torch():
    v = [-1, 130, 40000]
    x, tx = tt.tensor(v), torch.tensor(v)
    for m in ("byte", "char", "short", "int", "long"):
        got, want = getattr(x, m)(), getattr(tx, m)()
        assert str(want.dtype) == f"torch.{got.dtype.name}" and got.tolist() == want.tolist(), m


def test_compare_with_torch_checks_small_dtypes():
    from tinytensor.testing import compare_with_torch
    a = np.array([-100, 3, 127], dtype=np.int8)
    compare_with_torch(lambda x: (x << 1) ^ 5, lambda x: (x << 1) ^ 5, [a], grad=False)
    with pytest.raises(AssertionError, match="tinytensor dtype int16 vs torch torch.int8"):
        compare_with_torch(lambda x: x.short(), lambda x: x, [a], grad=False)


def test_view_dtype_shares_memory_like_torch():
    x = tt.tensor([1, 255], dtype=tt.uint8)
    v = x.view(tt.int8)
    x.add_(1)
    assert v.tolist() == [2, 0] and v._version is x._version


def test_python_ints_past_int64_build_exact_uint64_tensors():
    # NumPy reads [0, 2**64 - 1] as float64, which would round 2**64 - 1 up to 2**64
    assert tt.tensor([0, 2 ** 63 + 1, 2 ** 64 - 1], dtype=tt.uint64).tolist() == [0, 2 ** 63 + 1, 2 ** 64 - 1]
