// Shared by every kernel file; pasted in front of each .cu (no include path needed), so
// it uses no CUDA headers: fp16 and bf16 are 16-bit storage types converted with PTX.
// Nothing instantiates a kernel for bf16 until tinytensor has a bfloat16 dtype; the
// templates stay generic over it (cvt to and from bf16 needs sm_80).
#pragma once

struct half16 { unsigned short x; };   // IEEE binary16 storage
struct bf16 { unsigned short x; };     // bfloat16 storage

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ double to_float(double v) { return v; }
__device__ __forceinline__ float to_float(half16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x));
  return f;
}
__device__ __forceinline__ float to_float(bf16 v) { return __uint_as_float(((unsigned)v.x) << 16); }

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_float<double>(float v) { return v; }
template <> __device__ __forceinline__ half16 from_float<half16>(float v) {
  half16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(v));
  return h;
}
template <> __device__ __forceinline__ bf16 from_float<bf16>(float v) {
  bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.x) : "f"(v));
  return h;
}

// the type a row is accumulated in: double for double, float for everything else
template <class T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

template <class T, class A> __device__ __forceinline__ T cast_to(A v);
template <> __device__ __forceinline__ float cast_to<float, float>(float v) { return v; }
template <> __device__ __forceinline__ double cast_to<double, double>(double v) { return v; }
template <> __device__ __forceinline__ half16 cast_to<half16, float>(float v) { return from_float<half16>(v); }
template <> __device__ __forceinline__ bf16 cast_to<bf16, float>(float v) { return from_float<bf16>(v); }

template <class A> __device__ __forceinline__ A neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double neg_inf<double>() { return __longlong_as_double(0xfff0000000000000ULL); }
template <class A> __device__ __forceinline__ A pos_inf() { return -neg_inf<A>(); }

__device__ __forceinline__ float tt_exp(float v) { return expf(v); }
__device__ __forceinline__ double tt_exp(double v) { return exp(v); }
__device__ __forceinline__ float tt_log(float v) { return logf(v); }
__device__ __forceinline__ double tt_log(double v) { return log(v); }
__device__ __forceinline__ float tt_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double tt_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float tt_rsqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double tt_rsqrt(double v) { return rsqrt(v); }

// The index of this block in a grid of row blocks, 64-bit: x holds up to 2^31 - 1 blocks
// and y counts the grids of those (`_cuda.grid`), so row counts past 2^31 fit. A 2-D grid
// rather than a grid-stride loop: the loop costs the warp-per-row kernels up to 16
// registers, and with them occupancy.
__device__ __forceinline__ long long grid_block() { return (long long)blockIdx.y * gridDim.x + blockIdx.x; }

// VEC consecutive elements moved with one load/store (VEC * sizeof(T) <= 16 bytes)
template <class T, int VEC> struct __align__(sizeof(T) * VEC) Vec { T v[VEC]; };

template <class T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, typename Acc<T>::type* out) {
  Vec<T, VEC> r = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
  for (int i = 0; i < VEC; ++i) out[i] = to_float(r.v[i]);
}

template <class T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const typename Acc<T>::type* in) {
  Vec<T, VEC> r;
#pragma unroll
  for (int i = 0; i < VEC; ++i) r.v[i] = cast_to<T>(in[i]);
  *reinterpret_cast<Vec<T, VEC>*>(p) = r;
}

template <class A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class A> __device__ __forceinline__ A warp_max(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = tt_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; `buf` holds >= 32 values. Every thread gets the result.
template <class A> __device__ __forceinline__ A block_sum(A v, A* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // buf may still be read by an earlier reduction
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  v = lane < nwarps ? buf[lane] : A(0);
  return warp_sum(v);
}

template <class A> __device__ __forceinline__ A block_max(A v, A* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  v = lane < nwarps ? buf[lane] : neg_inf<A>();
  return warp_max(v);
}

// online softmax statistics: merge (m, s) with (m2, s2), where s sums exp(x - m). A part
// whose max is -inf holds nothing (its s2 may be exp(-inf - -inf) = nan): it is skipped, or
// its nan would spread over the whole row through s2 * exp(m2 - mn) = nan * 0.
template <class A> __device__ __forceinline__ void online_merge(A& m, A& s, A m2, A s2) {
  if (m2 == neg_inf<A>()) return;
  const A mn = tt_max(m, m2);
  s = s * tt_exp(m - mn) + s2 * tt_exp(m2 - mn);  // m = -inf (nothing yet): s = 0 * 0 + s2
  m = mn;
}

// fold VEC consecutive values into a thread's running (m, s)
template <class A, int VEC> __device__ __forceinline__ void online_add(A& m, A& s, const A* v) {
  A vm = v[0];
#pragma unroll
  for (int j = 1; j < VEC; ++j) vm = tt_max(vm, v[j]);
  A vs = 0;
#pragma unroll
  for (int j = 0; j < VEC; ++j) vs += tt_exp(v[j] - vm);
  online_merge(m, s, vm, vs);
}

// the threads' (m, s) merged over the block: m becomes the block max, s the sum rescaled to it
template <class A> __device__ __forceinline__ void block_online(A& m, A& s, A* buf) {
  const A bm = block_max(m, buf);
  s = block_sum(m == neg_inf<A>() ? A(0) : s * tt_exp(m - bm), buf);
  m = bm;
}
