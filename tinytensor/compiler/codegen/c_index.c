/* An embedding's backward as a loop (c_index.py explains it). */
#include <stdint.h>
#include <string.h>

/* out (N, R), zeroed here; g (M, R); idx (M). Returns the position of an index out of
   range, or -1. */
#define TT_INDEX_ADD_ROWS(T, S)                                                            \
int64_t tt_index_add_rows_##S(T *out, const T *g, const int64_t *idx, int64_t N, int64_t R, \
                              int64_t M) {                                                 \
    memset(out, 0, (size_t)(N * R) * sizeof(T));                                           \
    for (int64_t m = 0; m < M; m++) {                                                      \
        int64_t r = idx[m];                                                                \
        if (r < 0) r += N;                                                                 \
        if (r < 0 || r >= N) return m;                                                     \
        T *row = out + r * R;                                                              \
        const T *add = g + m * R;                                                          \
        for (int64_t c = 0; c < R; c++) row[c] += add[c];                                  \
    }                                                                                      \
    return -1;                                                                             \
}

TT_INDEX_ADD_ROWS(float, f32)
TT_INDEX_ADD_ROWS(double, f64)
