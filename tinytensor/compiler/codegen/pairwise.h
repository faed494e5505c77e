/* NumPy's pairwise sum, replayed by the C backend's row kernels (rows.py pastes this file
   into a translation unit that has one): np.add.reduce over a contiguous row adds blocks of
   at most 128 elements with 8 accumulators and combines the block sums by splitting n in
   halves rounded down to multiples of 8 (numpy/_core/src/umath/loops_utils.h.src).

   tt_pairwise_leaves: the leaves of that recursion over n elements for a row whose length
   is a dynamic size (rows.py `pairwise_leaves` is the same in Python, for fixed lengths):
   their starts and lengths, in order; returns k + count. */
static int64_t tt_pairwise_leaves(int64_t start, int64_t n, int64_t *lo, int64_t *len, int64_t k) {
    if (n <= 128) { lo[k] = start; len[k] = n; return k + 1; }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    k = tt_pairwise_leaves(start, n2, lo, len, k);
    return tt_pairwise_leaves(start + n2, n - n2, lo, len, k);
}
/* tt_pairwise_block{f,}: the sum of one leaf (n <= 128), as NumPy's pairwise_sum adds it: a
   plain loop below 8 elements, else 8 accumulators combined in a fixed tree.
   tt_pairwise_tree{f,}: the sum of n elements whose blocks (leaves of the recursion, in
   order) sum to *leaf. Written once for float (suffix f) and double (no suffix). */
#define TT_PAIRWISE(T, S)                                                                   \
static inline T tt_pairwise_block##S(const T *a, int64_t n) {                               \
    if (n < 8) {                                                                            \
        T res = 0;                                                                          \
        for (int64_t i = 0; i < n; i++) res += a[i];                                        \
        return res;                                                                         \
    }                                                                                       \
    T r0 = a[0], r1 = a[1], r2 = a[2], r3 = a[3], r4 = a[4], r5 = a[5], r6 = a[6], r7 = a[7]; \
    int64_t i;                                                                              \
    for (i = 8; i < n - (n % 8); i += 8) {                                                  \
        r0 += a[i + 0]; r1 += a[i + 1]; r2 += a[i + 2]; r3 += a[i + 3];                     \
        r4 += a[i + 4]; r5 += a[i + 5]; r6 += a[i + 6]; r7 += a[i + 7];                     \
    }                                                                                       \
    T res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));                              \
    for (; i < n; i++) res += a[i];                                                         \
    return res;                                                                             \
}                                                                                           \
static T tt_pairwise_tree##S(const T **leaf, int64_t n) {                                   \
    if (n <= 128) return *(*leaf)++;                                                        \
    int64_t n2 = n / 2;                                                                     \
    n2 -= n2 % 8;                                                                           \
    const T left = tt_pairwise_tree##S(leaf, n2);                                           \
    return left + tt_pairwise_tree##S(leaf, n - n2);                                        \
}
TT_PAIRWISE(float, f)
TT_PAIRWISE(double, )
#undef TT_PAIRWISE
