#include <stdint.h>

/* One call of the loaded BLAS's cblas_sgemm / cblas_dgemm (threads.py finds it; its
 * address comes in as `gemm`), row-major: C = A @ B (alpha 1) + beta * C, trans 111 (no) /
 * 112 (yes), ld in elements. The same BLAS may take 64-bit ints (ilp64) or 32-bit ones:
 * the caller has checked that every size fits the latter. The gemm job (gemm.c) and the
 * shifted-GEMM convolutions (kernels/c_conv_shift.py) call it. */
typedef void (*tt_sgemm64)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                           const float *, int64_t, float, float *, int64_t);
typedef void (*tt_sgemm32)(int, int, int, int32_t, int32_t, int32_t, float, const float *, int32_t,
                           const float *, int32_t, float, float *, int32_t);
typedef void (*tt_dgemm64)(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
                           const double *, int64_t, double, double *, int64_t);
typedef void (*tt_dgemm32)(int, int, int, int32_t, int32_t, int32_t, double, const double *, int32_t,
                           const double *, int32_t, double, double *, int32_t);

static inline void tt_blas_gemm(void *gemm, int64_t ilp64, int64_t dbl, int64_t ta, int64_t tb,
                                int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                                const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (dbl && ilp64)
        ((tt_dgemm64)gemm)(101, (int)ta, (int)tb, m, n, k, 1.0, (const double *)a, lda,
                           (const double *)b, ldb, beta, (double *)c, ldc);
    else if (dbl)
        ((tt_dgemm32)gemm)(101, (int)ta, (int)tb, (int32_t)m, (int32_t)n, (int32_t)k, 1.0,
                           (const double *)a, (int32_t)lda, (const double *)b, (int32_t)ldb, beta,
                           (double *)c, (int32_t)ldc);
    else if (ilp64)
        ((tt_sgemm64)gemm)(101, (int)ta, (int)tb, m, n, k, 1.0f, (const float *)a, lda,
                           (const float *)b, ldb, (float)beta, (float *)c, ldc);
    else
        ((tt_sgemm32)gemm)(101, (int)ta, (int)tb, (int32_t)m, (int32_t)n, (int32_t)k, 1.0f,
                           (const float *)a, (int32_t)lda, (const float *)b, (int32_t)ldb,
                           (float)beta, (float *)c, (int32_t)ldc);
}
