#include <stdint.h>

/* The gemm job of the C pool (c_pool.py compiles it with c_pool.c and blas.h; threads.py says why):
 * a matmul as parts. C[i] = A[i] @ B[i] over the batch i (up to 4 leading dims, strides
 * in bytes, 0 where an operand broadcasts), each part blas.h's row-major call(s). */
typedef struct {
    void *gemm;            /* cblas_sgemm or cblas_dgemm */
    int64_t ilp64, dbl;    /* 64-bit BLAS ints; double */
    int64_t nlead, lead[4], sa[4], sb[4], sc[4];
    int64_t M, N, K, ta, tb, lda, ldb, ldc;
    int64_t a_row, c_row;  /* bytes from one row of op(A) / C to the next */
    int64_t by_batch;      /* parts share the batch (else the rows) */
    char *A, *B, *C;
} tt_gemm;

static void tt_one_gemm(const tt_gemm *g, const char *a, const char *b, char *c, int64_t m) {
    if (m <= 0) return;
    tt_blas_gemm(g->gemm, g->ilp64, g->dbl, g->ta, g->tb, m, g->N, g->K, a, g->lda, b, g->ldb, 0.0,
                 c, g->ldc);
}

static int64_t tt_batch(const tt_gemm *g) {
    int64_t n = 1;
    for (int d = 0; d < g->nlead; d++) n *= g->lead[d];
    return n;
}

static void tt_gemm_batch(const tt_gemm *g, int64_t i, int64_t r0, int64_t r1) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (int d = (int)g->nlead - 1; d >= 0; d--) {   /* i's leading multi-index */
        const int64_t k = i % g->lead[d];
        i /= g->lead[d];
        oa += k * g->sa[d]; ob += k * g->sb[d]; oc += k * g->sc[d];
    }
    tt_one_gemm(g, g->A + oa + r0 * g->a_row, g->B + ob, g->C + oc + r0 * g->c_row, r1 - r0);
}

void tt_gemm_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {
    const tt_gemm *g = (const tt_gemm *)b;   /* n: unused (a kernel's sizes) */
    const int64_t count = tt_batch(g);
    if (g->by_batch) {
        for (int64_t i = count * part / parts; i < count * (part + 1) / parts; i++)
            tt_gemm_batch(g, i, 0, g->M);
    } else {
        const int64_t r0 = g->M * part / parts, r1 = g->M * (part + 1) / parts;
        for (int64_t i = 0; i < count; i++) tt_gemm_batch(g, i, r0, r1);
    }
}
