/* tinytensor compiler: exp, expm1, tanh, log and erf that the C compiler can vectorize.
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

/* torch's sign as NumPy's reference computes it (ops/elementwise.py _sign_array): +-1 with
 * x's sign, +0 for +-0 and nan. The 1 is built on the bits: GCC folds g * (x < 0 ? -1 : 1)
 * into a flip of g's sign bit, which a nan g then carries (NumPy's multiply returns g's nan
 * as it is). */
static inline float tt_signf(float x) {
    return (x > 0 || x < 0) ? tt_f32(0x3f800000 | (tt_i32(x) & INT32_MIN)) : 0.0f;
}
static inline double tt_sign(double x) {
    return (x > 0 || x < 0) ? tt_f64(0x3ff0000000000000LL | (tt_i64(x) & INT64_MIN)) : 0.0;
}

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
/* n = round(x / ln2), returned, *k = n as an int and *r = x - n ln2, for exp and expm1. k is
 * read off the bits of n + 1.5*2^23 (n sits in its low mantissa bits), not converted: a float
 * -> int conversion of nan is undefined, and `n = x == x ? n : 0` (how this avoided it) made
 * GCC 12 compute everything after it twice in the AVX-512 clone, once for n = 0 (exp 0.37 ->
 * 0.29 ns per float on one Zen 5 core without it). For nan x, k is garbage and r is nan: the
 * callers return x + x there (the nan quieted, as NumPy does). */
static inline float tt_ln2_reduce_f(float x, float *r, int32_t *k) {
    const float big = x * 0x1.715476p+0f + 0x1.8p23f;               /* round to nearest */
    const float n = big - 0x1.8p23f;
    float hi = x - n * 0x1.62e4p-1f;
    *r = hi - n * 0x1.7f7d1cp-20f;
    *k = tt_i32(big) - tt_i32(0x1.8p23f);
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
    float r;
    int32_t k;
    tt_ln2_reduce_f(xc, &r, &k);
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f
              + r * (0x1.111112p-7f + r * (0x1.6c16c2p-10f + r * 0x1.a01a02p-13f))))));
    int32_t k1 = k >> 1;
    float s1 = tt_f32((k1 + 127) << 23), s2 = tt_f32((k - k1 + 127) << 23);
    const float y = p * s1 * s2;
    return x == x ? y : x + x;
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
    float r;
    int32_t k;
    tt_ln2_reduce_f(y, &r, &k);
    float q = 0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f + r * (0x1.111112p-7f
              + r * (0x1.6c16c2p-10f + r * (0x1.a01a02p-13f + r * 0x1.a01a02p-16f)))));
    float p = r + r * r * q;
    float s = tt_f32((k + 127) << 23);
    return s * p + (s - 1.0f);
}

static inline float tt_tanhf(float x) {
    float a = fabsf(x);
    a = a > 20.0f ? 20.0f : a;                 /* tanh(20) rounds to 1; nan passes */
    float u = tt_expm1f_pos(a + a);
    const float t = copysignf(u / (u + 2.0f), x);
    return x == x ? t : x + x;                 /* tt_expm1f_pos of nan: some nan */
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

/* ---------------------------------------------------------------- sigmoid
 * 1 / (1 + exp(-x)) as NumPy's reference computes it on either side of 0 without overflow:
 * e = exp(-|x|), then 1 / (1 + e) for x >= 0 and e / (1 + e) below (nan: e / (1 + e), a nan).
 * A function, not an expression of two exps that the emitter writes out (codegen/emit.py):
 * written as one `(x >= 0 ? 1 : exp(-|x|)) / (1 + exp(-|x|))`, GCC 12 if-converted the AVX-512
 * clone into two exp polynomials and three masked divisions per vector (0.86 ns per float on
 * Zen 5, twice tt_expf); here e is one value, and the same operations give the same bits. */
static inline float tt_sigmoidf(float x) {
    const float e = tt_expf(-fabsf(x));
    return (x >= 0 ? 1.0f : e) / (1.0f + e);
}

static inline double tt_sigmoid(double x) {
    const double e = tt_exp(-fabs(x));
    return (x >= 0 ? 1.0 : e) / (1.0 + e);
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

/* ---------------------------------------------------------------- erf and erfc
 * The pieces of ops/special.py (eager's erf), with its coefficients: for a = |x|
 *   small   erf(a) = a P(a*a)                 a < 0.5 (float: a < 1)
 *   cx_k    erfc(a) = exp(-a*a) P(a)          [0.5, 1), [1, 2), [2, 4) (float: from 1)
 *   tail    erfc(a) = exp(-a*a) P(1/(a*a)) / a     a >= 4 (clamped at 30, float: 12, where
 *           erfc has long underflowed to 0: inf gives 0, nan stays nan)
 * erf(x) = sign(x) (1 - erfc(a)), erfc(-a) = 2 - erfc(a), erfc = 1 - erf on the small piece.
 * Branch-free: a lane's piece is a few compares, each coefficient a select among the pieces'
 * (a shorter piece's leading coefficients 0), so one Horner chain serves all lanes and the loop
 * vectorizes. double uses the float64 tables (~2 ulp) and a*a = hi + lo split exactly (Dekker,
 * no FMA needed), exp(-a*a) = exp(-hi) (1 - lo): exp's relative accuracy whatever a*a's size.
 * float erfc (tt_erfcf) is computed in double with tables of 1e-10 relative error (two pieces:
 * tt_erf_parts32) and rounded once (<= 0.51 ulp). float erf (tt_erff, the Erf op's) and the
 * float exact GELU are computed in float (below: one piece per function, no table pick).
 * Measured bounds: tests/tinytensor/compiler/test_tt_erf.py. */
/* BEGIN generated by `python -m tinytensor.tools.erf_coeffs --c` from tinytensor/ops/_erf_coeffs.py */
/* float64: pieces small, cx1, cx2, cx3, tail; t = (v - MID) * SCALE */
#define TT_ERF64_N 18
static const double TT_ERF64_MID[5] = {0x1.0000000000000p-3, 0x1.8000000000000p-1, 0x1.8000000000000p+0, 0x1.8000000000000p+1, 0x1.0000000000000p-5};
static const double TT_ERF64_SCALE[5] = {0x1.0000000000000p+3, 0x1.0000000000000p+2, 0x1.0000000000000p+1, 0x1.0000000000000p+0, 0x1.0000000000000p+5};
static const double TT_ERF64_POLY[5][18] = {
    { /* small */ [9] = 0x1.8b4b60851826bp-44, -0x1.c0bb73b49d962p-38, 0x1.c5c56ebdde4c3p-32, -0x1.934038e557f46p-26, 0x1.35219bf052861p-20, -0x1.8f7e682ca9335p-15, 0x1.a6db683de1274p-10, -0x1.658407f4c04bbp-5, 0x1.15446b34ed348p+0},
    { /* cx1 */ [5] = 0x1.6b481d24254f5p-39, -0x1.08c556c4d7d5ap-35, 0x1.6b8481db1275ap-32, -0x1.ebee7119c9363p-29, 0x1.3f81a121243b6p-25, -0x1.8c9801ff0806fp-22, 0x1.d43a7c5eca247p-19, -0x1.054d6813ee7cbp-15, 0x1.1192f5bd6f5fcp-12, -0x1.09e77d40eadb7p-9, 0x1.d90093ae10908p-7, -0x1.78cdd551ee4e9p-4, 0x1.038d54ea3d834p-1},
    { /* cx2 */ [3] = 0x1.819707b18baa5p-37, -0x1.5818fa3c2a0d8p-34, 0x1.14cff905c6c52p-31, -0x1.d2f0c117c2611p-29, 0x1.7f9d3bddcd27cp-26, -0x1.30c470595520dp-23, 0x1.d45090b3f934fp-21, -0x1.5b0ab45af7dfbp-18, 0x1.ee705e882dd0ep-16, -0x1.513ed7737c5d3p-13, 0x1.b65944f34010bp-11, -0x1.0dc51d29337d3p-8, 0x1.37ea271bc54f2p-6, -0x1.4f1988444cb5ap-4, 0x1.494daffa2ad68p-2},
    { /* cx3 */ [0] = -0x1.1b460bea38f20p-37, 0x1.58427bcf142c4p-35, -0x1.4c55e1e29e94cp-33, 0x1.8478bbaf9ab7bp-31, -0x1.c7b1b854f2367p-29, 0x1.018c624816f09p-26, -0x1.1d774cff47edfp-24, 0x1.3696cb37dcf88p-22, -0x1.4b146c6ed27e6p-20, 0x1.595f27c2c7c6dp-18, -0x1.6025101d28a94p-16, 0x1.5e7392ddcfa64p-14, -0x1.53dec9d0b9a9cp-12, 0x1.409cc2ed7c676p-10, -0x1.259061ba854c1p-8, 0x1.043fe1a98be88p-6, -0x1.bd6ae4d14b16fp-5, 0x1.6e9827d229d2dp-3},
    { /* tail */ [5] = 0x1.22c1eea0a9b93p-40, -0x1.4c72d1bf9ecd3p-38, 0x1.5898b57b25303p-36, -0x1.c90d9682e974bp-34, 0x1.49bd12903345fp-31, -0x1.01deb0ab668e3p-28, 0x1.c070b1672ffcfp-26, -0x1.bb48265839bc6p-23, 0x1.00fd05e0612bdp-19, -0x1.6ec49a0d3f50bp-16, 0x1.5dcd442df6328p-12, -0x1.088ffc939719bp-7, 0x1.1c8c55ad08099p-1},
};
/* float32_c: pieces small, large; t = (v - MID) * SCALE */
#define TT_ERF32_N 12
static const double TT_ERF32_MID[2] = {0x1.0000000000000p-1, 0x1.8618618618619p-3};
static const double TT_ERF32_SCALE[2] = {0x1.0000000000000p+1, 0x1.e8ba2e8ba2e8bp+0};
static const double TT_ERF32_POLY[2][12] = {
    { /* small */ [4] = -0x1.445f47d33d87bp-24, 0x1.4a9da0f178cf0p-20, -0x1.2638790e9e1c6p-16, 0x1.c827dc5bc9b59p-13, -0x1.2b902beb7bf5ep-9, 0x1.4543691d8f268p-6, -0x1.1fd1629207160p-3, 0x1.ee51eb2384786p-1},
    { /* large */ [0] = -0x1.f050c0c9b9801p-26, -0x1.56f246e4a6e4fp-24, 0x1.e1e917c97d435p-22, 0x1.07a2d89b384e6p-19, -0x1.ed2438bc1b959p-18, -0x1.5bbff0f99ebebp-15, 0x1.b89c078c30b7fp-13, 0x1.7f2ed1239fdecp-11, -0x1.5b5a7bdd5451cp-7, 0x1.bc990baded7c0p-5, -0x1.7092c7dbfb927p-3, 0x1.754252f276313p-3},
};
/* float32_v: g(t) = C0 + t P(t) (tt_vpoly), t = (v - MID) * SCALE, v = (a - K) / (a + K) (erf_small: v = a*a); P highest first */
#define TT_V_GELU_K 2.0f
#define TT_V_GELU_AMAX 14.85f
#define TT_V_GELU_MID -0x1.e62c0f316079cp-4
#define TT_V_GELU_SCALE 0x1.227a65b5df3efp+0
#define TT_V_GELU_C0 0x1.6c96d36ab9438p+0
#define TT_V_GELU_N 12
static const float TT_V_GELU_P[12] = { -0x1.37c5aa0000000p-17f, -0x1.0d90100000000p-15f, -0x1.081a380000000p-17f, 0x1.597ca40000000p-13f, 0x1.b63f860000000p-12f, 0x1.aec9f40000000p-14f, -0x1.1c019e0000000p-9f, -0x1.68b07a0000000p-8f, 0x1.e62a300000000p-9f, 0x1.9474520000000p-5f, 0x1.91d9580000000p-6f, -0x1.2fd99a0000000p-1f};
#define TT_V_ERFC_K 3.0f
#define TT_V_ERFC_AMAX 4.0f
#define TT_V_ERFC_MID -0x1.2492492492492p-2
#define TT_V_ERFC_SCALE 0x1.2aaaaaaaaaaaap+1
#define TT_V_ERFC_C0 0x1.61f6fb4dafa2ep+0
#define TT_V_ERFC_N 7
static const float TT_V_ERFC_P[7] = { 0x1.1637e00000000p-17f, -0x1.91e5b60000000p-15f, -0x1.216b420000000p-12f, 0x1.53cf0a0000000p-8f, -0x1.2d91240000000p-5f, 0x1.5a68400000000p-3f, -0x1.1f2ba60000000p-1f};
#define TT_V_ERF_SMALL_MID 0x1.0000000000000p-3
#define TT_V_ERF_SMALL_SCALE 0x1.0000000000000p+3
#define TT_V_ERF_SMALL_C0 0x1.15446b34ed348p+0
#define TT_V_ERF_SMALL_N 4
static const float TT_V_ERF_SMALL_P[4] = { 0x1.3545120000000p-20f, -0x1.8fbd6e0000000p-15f, 0x1.a6db660000000p-10f, -0x1.6584040000000p-5f};
/* END generated */

/* v's piece among the 5 of double by a's edges: the selected entry of table T */
#define TT_ERF64_PICK(T, a) ((a) >= 4.0 ? (T)[4] : (a) >= 2.0 ? (T)[3] : (a) >= 1.0 ? (T)[2] : \
                             (a) >= 0.5 ? (T)[1] : (T)[0])

/* erfc(a) for a = |x| >= 0.5 (returned) and P with erf(a) = a P for a < 0.5 (*small);
 * each is meaningful only in its own range. nan: *small is nan. */
static inline double tt_erf_parts(double a, double *small) {
    double ac = a > 30.0 ? 30.0 : a;
    double sq = ac * ac;
    double v = ac >= 4.0 ? 1.0 / sq : (ac >= 0.5 ? ac : sq);
    double t = (v - TT_ERF64_PICK(TT_ERF64_MID, ac)) * TT_ERF64_PICK(TT_ERF64_SCALE, ac);
    double p = 0.0;
#pragma GCC unroll 32      /* past 16 GCC would keep the loop, and not vectorize around it */
    for (int i = 0; i < TT_ERF64_N; i++) {
        double c = ac >= 4.0 ? TT_ERF64_POLY[4][i] : ac >= 2.0 ? TT_ERF64_POLY[3][i]
                 : ac >= 1.0 ? TT_ERF64_POLY[2][i] : ac >= 0.5 ? TT_ERF64_POLY[1][i] : TT_ERF64_POLY[0][i];
        p = c + t * p;
    }
    *small = p;
    /* ac*ac = sq + lo exactly: ac = h + l with h of 26 bits, so h*h, 2*h*l, l*l are exact */
    double split = ac * 134217729.0;                              /* 2^27 + 1 */
    double h = split - (split - ac), l = ac - h;
    double lo = ((h * h - sq) + 2.0 * h * l) + l * l;
    double m = ac >= 4.0 ? p / ac : p;
    m = m * (1.0 - lo);                                           /* exp(-lo), lo ~ 1e-14 at most */
    return m * tt_exp(tt_neg(sq));
}

static inline double tt_erf(double x) {
    double a = fabs(x), small, e = tt_erf_parts(a, &small);
    return a >= 0.5 ? copysign(1.0 - e, x) : x * small;          /* nan: x * small, a nan */
}

static inline double tt_erfc(double x) {
    double a = fabs(x), small, e = tt_erf_parts(a, &small);
    return a >= 0.5 ? (x < 0.0 ? 2.0 - e : e) : 1.0 - x * small;
}

/* exp(x) for -144 <= x <= 0 to ~1e-12 relative, in double, for results rounded to float:
 * tt_exp's reduction with Taylor to degree 10 (|r| <= ln2/2: r^11/11! < 1e-12), no 2^n split
 * (2^-208 is a normal double) */
static inline double tt_exp32(double x) {
    double r, n = tt_ln2_reduce(x, &r);
    double p = tt_horner(r, TT_EXP_TAYLOR + 4, 9);                 /* from 1/10! */
    p = 1.0 + r * p;
    p = 1.0 + r * p;
    return p * tt_pow2(n);
}

/* the same for a double z whose result is rounded to float, with the float tables: two
 * pieces, small (a < 1) and erfcx(a) as a polynomial in v = (a - 2) / (a + 2) on [1, 12]
 * (one select per coefficient), a*a rounded (its error ~1e-16 relative, far below float's),
 * 0 from a = 12 on (erfc(12) ~ 1e-64: 0 in float) */
static inline double tt_erf_parts32(double a, double *small) {
    double ac = a > 12.0 ? 12.0 : a;
    double sq = ac * ac;
    double v = ac >= 1.0 ? (ac - 2.0) / (ac + 2.0) : sq;
    double t = (v - (ac >= 1.0 ? TT_ERF32_MID[1] : TT_ERF32_MID[0]))
             * (ac >= 1.0 ? TT_ERF32_SCALE[1] : TT_ERF32_SCALE[0]);
    double p = 0.0;
#pragma GCC unroll 32
    for (int i = 0; i < TT_ERF32_N; i++)
        p = (ac >= 1.0 ? TT_ERF32_POLY[1][i] : TT_ERF32_POLY[0][i]) + t * p;
    *small = p;
    return ac >= 12.0 ? 0.0 : p * tt_exp32(tt_neg(sq));
}

static inline double tt_erfc32(double z) {
    double a = fabs(z), small, e = tt_erf_parts32(a, &small);
    return a >= 1.0 ? (z < 0.0 ? 2.0 - e : e) : 1.0 - z * small;
}

/* x*x = h + *l exactly, for |x| < 2^60: Dekker's split of x in its top 12 bits and the rest */
static inline float tt_sq_pairf(float x, float *l) {
    float s = x * 4097.0f, xh = s - (s - x), xl = x - xh, h = x * x;
    *l = ((xh * xh - h) + 2.0f * xh * xl) + xl * xl;
    return h;
}

/* exp(-(h + l)) for an exact pair h + l, 0 <= h <= 112, as a double within ~1e-8 relative:
 * n = round(-h / ln2), r = -h - n ln2 - l (|r| <= ln2/2; the first difference exact, as n has
 * 8 bits and ln2_hi 16), exp(r) by Taylor to r^7, its last two steps and 2^n in double */
static inline double tt_exp_neg_pairf(float h, float l) {
    float n = h * -0x1.715476p+0f + 0x1.8p23f;
    n = n - 0x1.8p23f;
    float r = (tt_negf(h) - n * 0x1.62e4p-1f) - (n * 0x1.7f7d1cp-20f + l);
    float q = 0.5f + r * (0x1.555556p-3f + r * (0x1.555556p-5f + r * (0x1.111112p-7f
              + r * (0x1.6c16c2p-10f + r * 0x1.a01a02p-13f))));
    double rd = r;
    return (1.0 + rd * (1.0 + rd * (double)q)) * tt_pow2((double)n);
}

/* g(t) = C0 + t P(t) for a piece of tables TT_V_*: P in float (its share of g is small, so
 * are its rounding errors), t and the last step in double (g's slope in t is not small: t's
 * rounding in float would cost ~1 ulp) */
static inline double tt_vpoly(double t, const float *p, int n, double c0) {
    float tf = (float)t, s = p[0];
#pragma GCC unroll 16
    for (int i = 1; i < n; i++)
        s = p[i] + tf * s;
    return c0 + t * (double)s;
}

/* erfcx(a s) (a + K) and w = 1 / (a + K) for piece T of float32_v (generated above) */
#define TT_VPIECE(T, a, w) ((w) = 1.0 / ((double)(a) + (double)T##_K), \
    tt_vpoly((((double)(a) - (double)T##_K) * (w) - T##_MID) * T##_SCALE, T##_P, T##_N, T##_C0))

/* erf of a float in float arithmetic (8 lanes to an AVX2 vector), one piece each side of
 * 1/2 computed for every lane and selected: a (erf(a) / a)(a*a) below, 1 - erfc(a) above with
 * erfc(a) = exp(-a*a) w g (float32_v's erfc piece, a*a an exact pair), 1 from a = 4 on. Measured
 * against float64 over every 7th float32 of |x| < 16: <= 0.83 ulp. */
static inline float tt_erff(float x) {
    float a = fabsf(x);
    float ac = a > TT_V_ERFC_AMAX ? TT_V_ERFC_AMAX : a;
    float l, h = tt_sq_pairf(ac, &l);
    double w, g = TT_VPIECE(TT_V_ERFC, ac, w);
    double big = 1.0 - g * w * tt_exp_neg_pairf(h, l);
    /* (its g is flat in t: t's rounding in float costs nothing there) */
    float t = (x * x - (float)TT_V_ERF_SMALL_MID) * (float)TT_V_ERF_SMALL_SCALE;
    double xd = x, small = xd * tt_vpoly(t, TT_V_ERF_SMALL_P, TT_V_ERF_SMALL_N, TT_V_ERF_SMALL_C0);
    return (float)(a < 0.5f ? small : copysign(big, xd));   /* nan: small, a nan */
}

static inline float tt_erfcf(float x) { return (float)tt_erfc32((double)x); }

/* ---------------------------------------------------------------- the exact GELU
 * x (1 + erf(x / sqrt 2)) / 2, written x cdf(x) with cdf(x) = erfc(-x / sqrt 2) / 2: no
 * cancellation in 1 + erf for x << 0 (eager's float64 form loses it there), and its slope
 * d/dx = cdf(x) + x exp(-x*x / 2) / sqrt(2 pi). The cdf is a double that a kernel computing
 * both the GELU and its slope of one x computes once (GeluCdf; fuse.py writes them as
 * gelu_cdf and the two below).
 *
 * float x (tt_gelu_cdf32) is computed in float, 8 lanes to an AVX2 vector, with one piece
 * over the whole line (no per-lane table pick): for a = |x| <= TT_V_GELU_AMAX,
 *   cdf(-a) = exp(-a*a / 2) w g(t) / 2,   w = 1 / (a + K),  t from v = (a - K) w,
 * g = erfcx(a / sqrt 2) (a + K) a near-constant polynomial (0.64 .. 2: its Horner sum in float
 * loses little), cdf(a) = 1 - cdf(-a). exp(-a*a/2) takes a*a as an exact float pair (Dekker's
 * split: no FMA, which the AVX2 clone lacks), so the far tail keeps its digits (x = -14:
 * cdf 1e-45, which 1 + erf loses entirely). w, t, the polynomial's last step and the products
 * are double (a float t alone costs ~1 ulp: g's slope in t is not small). Measured against
 * float64 over every 7th float32 of |x| < 16 (3.1e8 values; test_tt_erf.py holds a sample):
 * gelu <= 1.32 ulp, slope <= 1.31 ulp (of its larger term near its zero, x ~ -0.75), erf
 * <= 0.83 ulp. */
#define TT_INV_SQRT_2 0x1.6a09e667f3bcdp-1
#define TT_INV_SQRT_2PI 0x1.9884533d43651p-2

/* cdf(x) for a float x, as a double (its error ~1 ulp of float); 0 past -AMAX (x cdf(x) is 0
 * in float there), nan for nan */
static inline double tt_gelu_cdff(float x) {
    float a = fabsf(x);
    float ac = a > TT_V_GELU_AMAX ? TT_V_GELU_AMAX : a;
    float l, h = tt_sq_pairf(ac, &l);
    double w, g = TT_VPIECE(TT_V_GELU, ac, w);
    double q = (g * 0.5) * w * tt_exp_neg_pairf(h * 0.5f, l * 0.5f);
    q = a > TT_V_GELU_AMAX ? 0.0 : q;
    return x < 0.0f ? q : 1.0 - q;
}

static inline double tt_gelu_cdf(double x) { return tt_erfc(tt_neg(x * TT_INV_SQRT_2)) * 0.5; }
static inline double tt_gelu_cdf32(double x) { return tt_gelu_cdff((float)x); }
static inline float tt_gelu_erf_cdff(float x, double cdf) { return (float)((double)x * cdf); }
static inline double tt_gelu_erf_cdf(double x, double cdf) { return x * cdf; }

/* the cdf rounded to float first: eager's forward keeps that float for its backward
 * (kernels/c_rows.py), so a kernel that computes the cdf afresh gets the same bits. The pdf's
 * exp as the cdf's (an exact x*x); |x| clamped at AMAX, where x pdf(x) is far below float.
 * x - x (+0, or nan at +-inf) restores what the clamp hides: cdf + x pdf at +-inf is
 * 1 + inf * 0, nan, as in NumPy, the double kernel and torch (and a -0 sum becomes +0, as theirs) */
static inline float tt_gelu_erf_slope_cdff(float x, double cdf) {
    float a = fabsf(x);
    a = a > TT_V_GELU_AMAX ? TT_V_GELU_AMAX : a;
    float l, h = tt_sq_pairf(a, &l);
    double pdf = tt_exp_neg_pairf(h * 0.5f, l * 0.5f) * TT_INV_SQRT_2PI;
    return (float)((double)(float)cdf + (double)copysignf(a, x) * pdf + (double)(x - x));
}

static inline double tt_gelu_erf_slope_cdf(double x, double cdf) {
    return cdf + x * (tt_exp(x * x * -0.5) * TT_INV_SQRT_2PI);
}

static inline float tt_gelu_erff(float x) { return tt_gelu_erf_cdff(x, tt_gelu_cdff(x)); }
static inline double tt_gelu_erf(double x) { return tt_gelu_erf_cdf(x, tt_gelu_cdf(x)); }
static inline float tt_gelu_erf_slopef(float x) { return tt_gelu_erf_slope_cdff(x, tt_gelu_cdff(x)); }
static inline double tt_gelu_erf_slope(double x) { return tt_gelu_erf_slope_cdf(x, tt_gelu_cdf(x)); }

#endif
