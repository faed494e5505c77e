"""Seeded mutations of real files: truncation, bit flips, byte overwrites, chunks deleted
or duplicated, nesting, huge numbers, values of the wrong JSON kind. Every mutator takes a
random.Random and bytes and returns bytes; `mutate` applies one to three of them."""
import re

_INTERESTING = b"\x00\xff\x7f\x80()[]{}\",:t.Q}N9-e"
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_VALUE = re.compile(rb'-?\d+(?:\.\d+)?|"(?:[^"\\]|\\.)*"|true|false|null')
_HUGE = [b"9223372036854775807", b"9223372036854775808", b"18446744073709551616", b"-1",
         b"-9223372036854775809", b"1e308", b"-0", b"65535", b"4294967295", b"0"]
_KINDS = [b"null", b"true", b"0", b"-1", b'""', b'"x"', b"[]", b"{}", b"[1]", b'{"a": 1}',
          b"1.5", b'"\\udcff"', b'"<|endoftext|>"']


def truncate(rng, data):
    return data[:rng.randrange(len(data) + 1)]


def flip_bits(rng, data):
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def overwrite(rng, data):
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.choice(_INTERESTING)
    return bytes(out)


def delete_chunk(rng, data):
    if not data:
        return data
    i = rng.randrange(len(data))
    return data[:i] + data[i + rng.randint(1, 64):]


def duplicate_chunk(rng, data):
    if not data:
        return data
    i = rng.randrange(len(data))
    chunk = data[i:i + rng.randint(1, 256)]
    j = rng.randrange(len(data) + 1)
    return data[:j] + chunk * rng.choice([1, 2, 100]) + data[j:]


def _depth(rng):
    return rng.choice([2, 50, 130, 1000, 100_000])


def json_nesting(rng, data):
    """Wrap a JSON value in arrays (or an object) nested up to 100,000 deep."""
    values = list(_VALUE.finditer(data))
    if not values:
        return data
    m = rng.choice(values)
    k = _depth(rng)
    if rng.random() < 0.5:
        wrapped = b"[" * k + m.group() + b"]" * k
    else:
        wrapped = b'{"a": ' * k + m.group() + b"}" * k
    return data[:m.start()] + wrapped + data[m.end():]


def json_number(rng, data):
    """Replace a number by a huge, negative, float or 5,000-digit one, or a list by a
    1,000- to 200,000-dimension shape."""
    numbers = list(_NUMBER.finditer(data))
    if numbers and rng.random() < 0.85:
        m = rng.choice(numbers)
        new = rng.choice(_HUGE + [b"9" * rng.choice([20, 4299, 4301, 5000])])
        return data[:m.start()] + new + data[m.end():]
    lists = [m for m in re.finditer(rb"\[[\d, ]*\]", data)]
    if not lists:
        return data
    m = rng.choice(lists)
    n = rng.choice([65, 1000, 200_000])
    return data[:m.start()] + b"[" + b",".join([b"65535"] * n) + b"]" + data[m.end():]


def json_kind(rng, data):
    """Replace a value with one of another JSON kind."""
    values = list(_VALUE.finditer(data))
    if not values:
        return data
    m = rng.choice(values)
    return data[:m.start()] + rng.choice(_KINDS) + data[m.end():]


def pickle_nesting(rng, data):
    """Insert a tuple nested up to 100,000 deep (MARKs or TUPLE1s) before an opcode."""
    i = rng.randrange(len(data) + 1)
    k = _depth(rng)
    nest = b"(" * k + b")" + b"t" * k if rng.random() < 0.5 else b")" + b"\x85" * k
    return data[:i] + nest + data[i:]


def pickle_number(rng, data):
    """Replace a small int (BININT1 'K') with a huge LONG4, a negative BININT or a big LONG1."""
    spots = [m.start() for m in re.finditer(rb"K", data)]
    if not spots:
        return data
    i = rng.choice(spots)
    n = rng.choice([-1, 1 << 31, 1 << 63, -(1 << 63) - 1, 10 ** rng.choice([30, 4400, 5000])])
    if -(1 << 31) <= n < 1 << 31:
        new = b"J" + n.to_bytes(4, "little", signed=True)
    else:
        raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
        new = b"\x8b" + len(raw).to_bytes(4, "little") + raw
    return data[:i] + new + data[i + 2:]


GENERIC = [truncate, flip_bits, overwrite, delete_chunk, duplicate_chunk]
JSON = GENERIC + [json_nesting, json_number, json_kind] * 2
PICKLE = GENERIC + [pickle_nesting, pickle_number] * 2


def mutate(rng, data, mutators):
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        data = rng.choice(mutators)(rng, data)
    return data
