"""The eager sum of a whole float array (ops/reduce.py `Sum` over every dim) in C, split over
the C pool: NumPy's pairwise summation, the same bits.

Why: NumPy adds a contiguous array as one pairwise sum on one thread (2M float32: 0.32 ms
on Zen 5 here, torch 0.10 ms at 1 thread, 0.05 ms at 2).

How the bits stay NumPy's: np.add.reduce over a contiguous array is one recursion over its
n elements: blocks of at most 128 elements added with 8 accumulators, longer ranges split
in halves rounded down to a multiple of 8, the two sums added (codegen/pairwise.h, which
the C here runs). The recursion's top DEPTH levels are unrolled here into at most
2**DEPTH subtrees (fixed by n alone, never by the thread count), which the parts sum in C;
their sums are then added up the same tree, in the array's dtype.
"""
import functools

import numpy as np

from . import c_eager
from .c_rows import SUFFIX, _call, _clones, _load

DEPTH = 4   # 16 subtrees: 2 per part at 2 threads (the pool's 4 parts per thread)


def _source(name, ct):
    """n = (subtrees,); b = sums (subtrees), x, starts (int64), lengths (int64)."""
    f = SUFFIX[ct]
    return f"""
{c_eager._toolchain[0].pairwise()}
/* NumPy's pairwise_sum of a[0:n]: a block below 129 elements, else the halves' sums */
static {ct} {name}_pairwise(const {ct} *a, int64_t n) {{
    if (n <= 128) return tt_pairwise_block{f}(a, n);
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    const {ct} left = {name}_pairwise(a, n2);
    return left + {name}_pairwise(a + n2, n - n2);
}}
{_clones()}void {name}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{
    {ct} *restrict sums = ({ct} *)b[0];
    const {ct} *restrict x = (const {ct} *)b[1];
    const int64_t *start = (const int64_t *)b[2], *len = (const int64_t *)b[3];
    const int64_t lo = tt_part_start(n[0], part, parts, 1), hi = tt_part_start(n[0], part + 1, parts, 1);
    for (int64_t k = lo; k < hi; k++) sums[k] = {name}_pairwise(x + start[k], len[k]);
}}
"""


@functools.lru_cache(maxsize=64)
def _subtrees(n):
    """(starts, lengths) of the recursion's nodes DEPTH levels down (a block above that: itself)."""
    out = []

    def walk(start, m, depth):
        if m <= 128 or depth == DEPTH:
            out.append((start, m))
            return
        m2 = m // 2
        m2 -= m2 % 8
        walk(start, m2, depth + 1)
        walk(start + m2, m - m2, depth + 1)
    walk(0, n, 0)
    starts, lengths = zip(*out)
    return np.array(starts, np.int64), np.array(lengths, np.int64)


def _combine(sums, m, depth, at):
    """The subtrees' sums added up the recursion (as NumPy adds the halves), from index at[0]."""
    if m <= 128 or depth == DEPTH:
        at[0] += 1
        return sums[at[0] - 1]
    m2 = m // 2
    m2 -= m2 % 8
    left = _combine(sums, m2, depth + 1, at)
    return left + _combine(sums, m - m2, depth + 1, at)


def sum_all(x):
    """x.sum() as NumPy computes it (a scalar of x's dtype), or None (NumPy sums)."""
    if not c_eager.enabled() or not c_eager.takes(x):
        return None
    lib = _load("sum_all", x.dtype.char, _source)
    if lib is None:
        return None
    starts, lengths = _subtrees(x.size)
    sums = np.empty(len(starts), x.dtype)
    _call(lib, [sums, x, starts, lengths], [len(starts)], x.size, "sum_all")
    return _combine(sums, x.size, 0, [0])
