/* The CUDA backend's prelude (cuda.py): tt_math.h's names onto CUDA's accurate math.
   NVRTC sees no CUDA headers; nvcc's (math.h) already define NAN and INFINITY. */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif
#define tt_expf(x) expf(x)
#define tt_exp(x) exp(x)
#define tt_tanhf(x) tanhf(x)
#define tt_tanh(x) tanh(x)
#define tt_logf(x) logf(x)
#define tt_log(x) log(x)
#define tt_erff(x) erff(x)
#define tt_erf(x) erf(x)
#define tt_gelu_cdf32(x) (erfc(-(x) * 0.7071067811865476) * 0.5)
#define tt_gelu_cdf(x) (erfc(-(x) * 0.7071067811865476) * 0.5)
#define tt_gelu_erf_cdff(x, c) ((float)((double)(x) * (c)))
#define tt_gelu_erf_cdf(x, c) ((x) * (c))
#define tt_gelu_erf_slope_cdff(x, c) ((float)((double)(float)(c) + (double)(x) * (exp((double)(x) * (x) * -0.5) * 0.3989422804014327)))
#define tt_gelu_erf_slope_cdf(x, c) ((c) + (x) * (exp((x) * (x) * -0.5) * 0.3989422804014327))
#define tt_gelu_erff(x) tt_gelu_erf_cdff(x, tt_gelu_cdf32((double)(x)))
#define tt_gelu_erf(x) tt_gelu_erf_cdf(x, tt_gelu_cdf(x))
#define tt_gelu_erf_slopef(x) tt_gelu_erf_slope_cdff(x, tt_gelu_cdf32((double)(x)))
#define tt_gelu_erf_slope(x) tt_gelu_erf_slope_cdf(x, tt_gelu_cdf(x))
#define tt_f32(i) __int_as_float(i)
#define tt_f64(i) __longlong_as_double(i)
#define tt_negf(x) __int_as_float(__float_as_int(x) ^ (int)0x80000000u)
#define tt_signf(x) ((x) > 0 || (x) < 0 ? __int_as_float(0x3f800000 | (__float_as_int(x) & (int)0x80000000u)) : 0.0f)
#define tt_sign(x) ((x) > 0 || (x) < 0 ? __longlong_as_double(0x3ff0000000000000LL | (__double_as_longlong(x) & (-0x7fffffffffffffffLL - 1))) : 0.0)
#define tt_neg(x) __longlong_as_double(__double_as_longlong(x) ^ (-0x7fffffffffffffffLL - 1))
/* tt_math.h's sigmoid as its one expression (CUDA's compiler merges the two exps) */
#define tt_sigmoidf(x) (((x) >= 0 ? 1.0f : expf(-fabsf(x))) / (1.0f + expf(-fabsf(x))))
#define tt_sigmoid(x) (((x) >= 0 ? 1.0 : exp(-fabs(x))) / (1.0 + exp(-fabs(x))))
