/* tinytensor compiler: exp, expm1, tanh and log that the C compiler can vectorize.
 *
 * libm's expf/tanhf/logf are opaque calls, so a loop calling them runs one element at a
 * time and loses to NumPy's SIMD math. These are written branch-free (special cases are
 * selects, bit tricks go through memcpy) and `static inline`, so a loop over them turns
 * into vector code (also with SSE2 only: no double <-> int64 conversions). Accuracy is
 * checked against a float64 (for float) or long double (for double) reference by
 * tests/tinytensor/compiler/test_codegen_c.py over the whole range, including +-inf, nan,
 * denormals and large |x|. Compiled with -ffp-contract=off and without -ffast-math, so
 * every line below is evaluated exactly as written (no reassociation, no fused
 * multiply-add), which the range reductions depend on.
 */
#ifndef TT_MATH_H
#define TT_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Where part `part` of `parts` of a loop of d iterations starts (codegen/c.py `_function`):
 * at a multiple of `grain`, d for the part past the last. */
static inline int64_t tt_part_start(int64_t d, int64_t part, int64_t parts, int64_t grain) {
    if (part >= parts) return d;
    const int64_t x = d * part / parts;
    return x - x % grain;
}

/* 8 lanes of a row's max (codegen/c.py `_lanes_max`): comparisons give lanes of 0 or -1 */
typedef float tt_v8f __attribute__((vector_size(32)));
typedef int32_t tt_v8i __attribute__((vector_size(32)));
typedef double tt_v8d __attribute__((vector_size(64)));
typedef int64_t tt_v8l __attribute__((vector_size(64)));

static inline float tt_f32(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t tt_i32(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline double tt_f64(int64_t i) { double f; memcpy(&f, &i, 8); return f; }
static inline int64_t tt_i64(double f) { int64_t i; memcpy(&i, &f, 8); return i; }

/* -x as NumPy's negative computes it: the sign bit flipped, a nan's too. Written on the
 * bits, which GCC does not fold into a neighbour as it does a unary minus (-(x / c) into
 * x / -c, a + -b into a - b): the same numbers, but a nan would keep its sign. */
static inline float tt_negf(float x) { return tt_f32(tt_i32(x) ^ INT32_MIN); }
static inline double tt_neg(double x) { return tt_f64(tt_i64(x) ^ INT64_MIN); }

/* 2^n for a whole n in [-1022, 1023], without a double -> int64 conversion (SSE2 has none
 * in vector form): n + 1.5*2^52 + 1023 holds n + 1023 in its low mantissa bits, and
 * shifting those into the exponent field builds the power of two. */
static inline double tt_pow2(double n) {
    return tt_f64((int64_t)((uint64_t)tt_i64(n + (0x1.8p52 + 1023.0)) << 52));
}

/* ---------------------------------------------------------------- exp
 * x = n ln2 + r, |r| <= ln2/2 (Cody-Waite: ln2 split in a high part with trailing zero
 * bits, so n*ln2_hi is exact), exp(r) by its Taylor polynomial, then 2^n applied as two
 * factors so that results in the denormal range are rounded once, not twice. */
/* n = round(x / ln2) (0 for nan), returned, and *r = x - n ln2, for exp and expm1 */
static inline float tt_ln2_reduce_f(float x, float *r) {
    float n = x * 0x1.715476p+0f + 0x1.8p23f;                       /* round to nearest */
    n = n - 0x1.8p23f;
    n = x == x ? n : 0.0f;                                          /* no float->int of nan */
    float hi = x - n * 0x1.62e4p-1f;
    *r = hi - n * 0x1.7f7d1cp-20f;
    return n;
}

static inline double tt_ln2_reduce(double x, double *r) {
    double n = x * 0x1.71547652b82fep+0 + 0x1.8p52;
    n = n - 0x1.8p52;
    n = x == x ? n : 0.0;
    double hi = x - n * 0x1.62e42fee00000p-1;
    *r = hi - n * 0x1.a39ef35793c76p-33;
    return n;
}

/* c[0] z^(n-1) + ... + c[n-1] by Horner's rule, in that order. The loop has a constant
 * count at every call, so the compiler unrolls it: the code is the written-out chain. */
static inline double tt_horner(double z, const double *c, int n) {
    double p = c[0];
    for (int i = 1; i < n; i++)
        p = c[i] + z * p;
    return p;
}

/* 1/14!, 1/13!, ..., 1/2!: exp's Taylor coefficients, highest first */
static const double TT_EXP_TAYLOR[13] = {
    1.0 / 87178291200.0, 1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
    1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
    1.0 / 24.0, 1.0 / 6.0, 0.5};

static inline float tt_expf(float x) {
    float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);   /* nan passes through */
    float r, n = tt_ln2_reduce_f(xc, &r);
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f
              + r * (0x1.111112p-7f + r * (0x1.6c16c2p-10f + r * 0x1.a01a02p-13f))))));
    int32_t k = (int32_t)n;
    int32_t k1 = k >> 1;
    float s1 = tt_f32((k1 + 127) << 23), s2 = tt_f32((k - k1 + 127) << 23);
    return p * s1 * s2;
}

static inline double tt_exp(double x) {
    double xc = x < -746.0 ? -746.0 : (x > 710.0 ? 710.0 : x);
    double r, n = tt_ln2_reduce(xc, &r);
    double p = tt_horner(r, TT_EXP_TAYLOR + 1, 12);                /* from 1/13! */
    p = 1.0 + r * p;
    p = 1.0 + r * p;
    double n1 = (n * 0.5 + 0x1.8p52) - 0x1.8p52;
    double s1 = tt_pow2(n1), s2 = tt_pow2(n - n1);
    return p * s1 * s2;
}

/* ---------------------------------------------------------------- expm1 and tanh
 * expm1(y) for 0 <= y <= 40 (what tanh needs): y = n ln2 + r, expm1(r) = r + r^2 (...),
 * and expm1(y) = 2^n expm1(r) + (2^n - 1): both terms exact, one rounding in the sum.
 * tanh(x) = expm1(2|x|) / (expm1(2|x|) + 2) with x's sign: no cancellation near 0. */
static inline float tt_expm1f_pos(float y) {
    float r, n = tt_ln2_reduce_f(y, &r);
    float q = 0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f + r * (0x1.111112p-7f
              + r * (0x1.6c16c2p-10f + r * (0x1.a01a02p-13f + r * 0x1.a01a02p-16f)))));
    float p = r + r * r * q;
    float s = tt_f32(((int32_t)n + 127) << 23);
    return s * p + (s - 1.0f);
}

static inline float tt_tanhf(float x) {
    float a = fabsf(x);
    a = a > 20.0f ? 20.0f : a;                 /* tanh(20) rounds to 1; nan passes */
    float u = tt_expm1f_pos(a + a);
    return copysignf(u / (u + 2.0f), x);
}

static inline double tt_expm1_pos(double y) {
    double r, n = tt_ln2_reduce(y, &r);
    double q = tt_horner(r, TT_EXP_TAYLOR, 13);                    /* from 1/14! */
    double p = r + r * r * q;
    double s = tt_pow2(n);
    return s * p + (s - 1.0);
}

static inline double tt_tanh(double x) {
    double a = fabs(x);
    a = a > 40.0 ? 40.0 : a;                   /* tanh(40) rounds to 1 */
    double u = tt_expm1_pos(a + a);
    return copysign(u / (u + 2.0), x);
}

/* ---------------------------------------------------------------- log
 * x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f),
 * log(1 + f) = 2 atanh(s) = f - (hfsq - s (hfsq + R(s^2))) (fdlibm's arrangement, which
 * keeps f's low bits), log x = e ln2_hi + (log(1 + f) + e ln2_lo). Denormals are scaled
 * up by 2^23 (2^54) first. */
static inline float tt_logf(float x) {
    int sub = x < 0x1p-126f;
    float xs = sub ? x * 0x1p23f : x;
    int32_t ix = tt_i32(xs);
    int32_t e = ((ix >> 23) & 0xff) - 127 - (sub ? 23 : 0);
    float m = tt_f32((ix & 0x7fffff) | 0x3f800000);
    int big = m > 0x1.6a09e6p+0f;
    m = big ? m * 0.5f : m;
    e = big ? e + 1 : e;
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float R = z * (0x1.555556p-1f + z * (0x1.99999ap-2f + z * (0x1.24924ap-2f + z * 0x1.c71c72p-3f)));
    float hfsq = 0.5f * f * f;
    float ef = (float)e;
    float res = ef * 0x1.62e4p-1f - ((hfsq - (s * (hfsq + R) + ef * 0x1.7f7d1cp-20f)) - f);
    return (x > 0.0f && x < INFINITY) ? res : (x == 0.0f ? -INFINITY : (x == INFINITY ? x : NAN));
}

static inline double tt_log(double x) {
    int sub = x < 0x1p-1022;
    double xs = sub ? x * 0x1p54 : x;
    uint64_t ix = (uint64_t)tt_i64(xs);
    /* the exponent field as a double, read through the mantissa of 2^52 (no int64 -> double) */
    double e = tt_f64((int64_t)(0x4330000000000000ULL | ((ix >> 52) & 0x7ff))) - 0x1p52;
    e = e - 1023.0 - (sub ? 54.0 : 0.0);
    double m = tt_f64((int64_t)((ix & 0xfffffffffffffULL) | 0x3ff0000000000000ULL));
    int big = m > 0x1.6a09e667f3bcdp+0;
    m = big ? m * 0.5 : m;
    e = big ? e + 1.0 : e;
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    static const double atanh_series[10] = {                       /* 2/21, 2/19, ..., 2/3 */
        2.0 / 21.0, 2.0 / 19.0, 2.0 / 17.0, 2.0 / 15.0, 2.0 / 13.0, 2.0 / 11.0, 2.0 / 9.0,
        2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0};
    double R = z * tt_horner(z, atanh_series, 10);
    double hfsq = 0.5 * f * f;
    double ef = e;
    double res = ef * 0x1.62e42fee00000p-1 - ((hfsq - (s * (hfsq + R) + ef * 0x1.a39ef35793c76p-33)) - f);
    return (x > 0.0 && x < INFINITY) ? res : (x == 0.0 ? -INFINITY : (x == INFINITY ? x : NAN));
}

#endif
