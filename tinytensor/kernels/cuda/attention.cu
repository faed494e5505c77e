// Flash attention, forward and backward (flash-attention-2 style), never forming the
// L x S score matrix. Layout: q, o (P, L, d); k, v (P / G, S, d) with P = batch * heads
// flattened and G query heads per key/value head (grouped-query attention). Scores are
// in log2 units, x = s * scale * log2(e) + bias * log2(e). `stats` (P, L) float2 holds per
// row the max m of x and ls = log2(sum(2^(x - m))), kept apart: the backward recomputes
// p = 2^((x - m) - ls), never 2^(x - (m + ls)), since at large scores m + ls rounds (at
// 1e8 a float holds only multiples of 8) and p with it. A row that sees no key has
// (m, ls) = (+inf, 0), so that every p is 0. `bias` (P, S) float32 is an optional additive
// key mask (key padding: 0 or -inf). Causal is top-left aligned: query i sees keys j <= i.
//
// flash_*_mma: float16 / bfloat16, head dim D in {64, 128}, tensor cores through
//   mma.sync.m16n8k16 with fp32 accumulation; fragments loaded with ldmatrix.
// flash_*_simt: any T, head dim d <= D in {64, 128}, plain fp32 FMAs (float32 inputs,
//   and head dims the mma kernels do not take).

#define LOG2E 1.4426950408889634f

// The parameters of the two forward kernels, and of the two backward kernels: the
// dispatcher (cuda_attention.py) launches the tensor-core kernel or the SIMT one with the
// same arguments. (test_kernels_hardening reads a kernel's parameters through these.)
#define FLASH_FWD_PARAMS                                                                        \
  const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o, \
      float2* __restrict__ stats, const float* __restrict__ bias, int has_bias, int H, int G,   \
      int L, int S, int d, float scale_log2, int causal
#define FLASH_BWD_PARAMS                                                                           \
  const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,                       \
      const T* __restrict__ dout, const float2* __restrict__ stats, const float* __restrict__ dd,  \
      float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv,                      \
      const float* __restrict__ bias, int has_bias, int H, int G, int L, int S, int d,             \
      float scale_log2, float scale, int causal

// x of one score, rounded the same way (no FMA contraction) in every kernel: the backward's
// (x - m) - ls is exact only for the very x the forward took m and ls over
__device__ __forceinline__ float score_log2(float s, float scale_log2, int has_bias, float kbias) {
  const float x = __fmul_rn(s, scale_log2);
  return has_bias ? __fadd_rn(x, kbias) : x;
}

__device__ __forceinline__ float key_bias(const float* brow, int key) { return __fmul_rn(brow[key], LOG2E); }

__device__ __forceinline__ float2 row_stats(float m, float l) {
  return l > 0.f ? make_float2(m, log2f(l)) : make_float2(pos_inf<float>(), 0.f);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

__device__ __forceinline__ void ldsm_x4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_t(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

// c += a (16x16, row) * b (16x8, col); a: 4 regs, b: 2 regs of two 16-bit values each
__device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1, half16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1, bf16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c[0], c[1] (columns 0-7, 8-15) += a * b, b a 16x16 tile as ldsm_x4 or ldsm_x4_t loads a
// B operand: registers b[0], b[1] hold its first 8 columns, b[2], b[3] the next 8
template <class T>
__device__ __forceinline__ void mma_n16(float (*c)[4], const unsigned* a, const unsigned* b) {
  mma(c[0], a, b[0], b[1], T());
  mma(c[1], a, b[2], b[3], T());
}

// two floats -> one register of two 16-bit values, `lo` in the low half (the lower column)
__device__ __forceinline__ unsigned pack2(float lo, float hi, half16) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ unsigned pack2(float lo, float hi, bf16) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// rows [r0, r0 + ROWS) of a (n, D) array into shared memory (row stride DS), zeros past n
template <class T, int D, int DS, int ROWS>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int r0, int n) {
  constexpr int CHUNKS = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < ROWS * CHUNKS; c += blockDim.x) {
    const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < n) val = *reinterpret_cast<const uint4*>(src + (long long)(r0 + r) * D + col);
    *reinterpret_cast<uint4*>(dst + r * DS + col) = val;
  }
}

// ---------------------------------------------------------------- tensor-core forward
template <class T, int D>
__global__ void __launch_bounds__(128) flash_fwd_mma(FLASH_FWD_PARAMS) {
  constexpr int BR = 64, BC = 64, DS = D + 8;  // +8: conflict-free ldmatrix rows
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + BR * DS;
  T* sV = sK + BC * DS;
  const int bh = blockIdx.y, q0 = blockIdx.x * BR;
  const long long kvh = (long long)(bh / H) * (H / G) + (bh % H) / G;
  const T* kp = k + kvh * S * D;
  const T* vp = v + kvh * S * D;
  const float* brow = bias + (long long)bh * S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;

  load_tile<T, D, DS, BR>(sQ, q + (long long)bh * L * D, q0, L);
  __syncthreads();
  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldsm_x4(qf[kk], sQ + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DS + kk * 16 + (lane >> 4) * 8);

  float of[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) of[i][0] = of[i][1] = of[i][2] = of[i][3] = 0.f;
  float m[2] = {neg_inf<float>(), neg_inf<float>()}, l[2] = {0.f, 0.f};
  const int row0 = q0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
  const int kend = causal ? min(S, q0 + BR) : S;

  for (int k0 = 0; k0 < kend; k0 += BC) {
    __syncthreads();  // the previous tiles are consumed
    load_tile<T, D, DS, BC>(sK, kp, k0, S);
    load_tile<T, D, DS, BC>(sV, vp, k0, S);
    __syncthreads();
    float sf[BC / 8][4];
#pragma unroll
    for (int i = 0; i < BC / 8; ++i) sf[i][0] = sf[i][1] = sf[i][2] = sf[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < BC / 16; ++np) {
        unsigned b[4];
        ldsm_x4(b, sK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * DS + kk * 16 + ((lane >> 3) & 1) * 8);
        mma_n16<T>(sf + 2 * np, qf[kk], b);
      }
    }
    // scale, mask, and the online softmax update of each of the thread's two rows
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + r * 8;
      float mx = neg_inf<float>();
#pragma unroll
      for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = k0 + nt * 8 + t4 * 2 + e;
          const float s = col >= S || (causal && col > row)
                              ? neg_inf<float>()
                              : score_log2(sf[nt][2 * r + e], scale_log2, has_bias, has_bias ? key_bias(brow, col) : 0.f);
          sf[nt][2 * r + e] = s;
          mx = fmaxf(mx, s);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[r], mx);
      const float mu = mn == neg_inf<float>() ? 0.f : mn;  // no key yet: avoid -inf - -inf
      const float corr = exp2f(m[r] - mu);
      m[r] = mn;
      float ps = 0.f;
#pragma unroll
      for (int nt = 0; nt < BC / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(sf[nt][2 * r + e] - mu);
          sf[nt][2 * r + e] = p;
          ps += p;
        }
      l[r] = l[r] * corr + ps;  // partial over this thread's columns; the quad is summed at the end
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        of[dn][2 * r] *= corr;
        of[dn][2 * r + 1] *= corr;
      }
    }
    // o += p @ v: the accumulator layout of two n-tiles of p is the A layout of one k-tile
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      unsigned pa[4] = {pack2(sf[2 * kk][0], sf[2 * kk][1], T()), pack2(sf[2 * kk][2], sf[2 * kk][3], T()),
                        pack2(sf[2 * kk + 1][0], sf[2 * kk + 1][1], T()),
                        pack2(sf[2 * kk + 1][2], sf[2 * kk + 1][3], T())};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        unsigned b[4];
        ldsm_x4_t(b, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DS + dp * 16 + (lane >> 4) * 8);
        mma_n16<T>(of + 2 * dp, pa, b);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    const int row = row0 + r * 8;
    if (row >= L) continue;
    const float inv = lr > 0.f ? 1.f / lr : 0.f;  // a row that saw no key: zeros
    T* orow = o + ((long long)bh * L + row) * D;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
      *reinterpret_cast<unsigned*>(orow + dn * 8 + t4 * 2) = pack2(of[dn][2 * r] * inv, of[dn][2 * r + 1] * inv, T());
    if (t4 == 0) stats[(long long)bh * L + row] = row_stats(m[r], lr);
  }
}

// ---------------------------------------------------------------- tensor-core backward
// One block per 64 keys (16 per warp); loops over query tiles of BQ rows. dK and dV
// accumulate in registers; dQ is added to a float32 buffer with atomics.
template <class T, int D, int BQ>
__global__ void __launch_bounds__(128) flash_bwd_mma(FLASH_BWD_PARAMS) {
  constexpr int BC = 64, DS = D + 8, PS = BQ + 8;
  constexpr int MT = BQ / 16, NT = (D / 8) * MT / 4;  // dQ: m-tiles, n-tiles per warp
  extern __shared__ __align__(16) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = sK + BC * DS;
  T* sQ = sV + BC * DS;
  T* sO = sQ + BQ * DS;  // dO
  T* sS = sO + BQ * DS;  // dS^T (keys x queries)
  float2* sML = reinterpret_cast<float2*>(sS + BC * PS);  // (m, ls) per query
  float* sD = reinterpret_cast<float*>(sML + BQ);
  const int bh = blockIdx.y, k0 = blockIdx.x * BC;
  const long long kvh = (long long)(bh / H) * (H / G) + (bh % H) / G;
  const float* brow = bias + (long long)bh * S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;

  load_tile<T, D, DS, BC>(sK, k + kvh * S * D, k0, S);
  load_tile<T, D, DS, BC>(sV, v + kvh * S * D, k0, S);
  float dkf[D / 8][4], dvf[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dkf[i][e] = dvf[i][e] = 0.f;
  const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0 and key0 + 8
  float kb[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) kb[r] = has_bias && key0 + 8 * r < S ? key_bias(brow, key0 + 8 * r) : 0.f;
  const int qstart = causal ? (k0 / BQ) * BQ : 0;  // earlier queries see none of these keys

  for (int q0 = qstart; q0 < L; q0 += BQ) {
    __syncthreads();
    load_tile<T, D, DS, BQ>(sQ, q + (long long)bh * L * D, q0, L);
    load_tile<T, D, DS, BQ>(sO, dout + (long long)bh * L * D, q0, L);
    for (int i = threadIdx.x; i < BQ; i += blockDim.x) {
      const bool ok = q0 + i < L;
      sML[i] = ok ? stats[(long long)bh * L + q0 + i] : make_float2(pos_inf<float>(), 0.f);
      sD[i] = ok ? dd[(long long)bh * L + q0 + i] : 0.f;
    }
    __syncthreads();
    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys: (16, BQ)
    float st[BQ / 8][4], dpt[BQ / 8][4];
#pragma unroll
    for (int i = 0; i < BQ / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[i][e] = dpt[i][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned ka[4], va[4];
      const int arow = (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DS + kk * 16 + (lane >> 4) * 8;
      ldsm_x4(ka, sK + arow);
      ldsm_x4(va, sV + arow);
#pragma unroll
      for (int np = 0; np < BQ / 16; ++np) {
        const int brow_ = (np * 16 + (lane & 7) + (lane >> 4) * 8) * DS + kk * 16 + ((lane >> 3) & 1) * 8;
        unsigned b[4];
        ldsm_x4(b, sQ + brow_);
        mma_n16<T>(st + 2 * np, ka, b);
        ldsm_x4(b, sO + brow_);
        mma_n16<T>(dpt + 2 * np, va, b);
      }
    }
    // P^T = exp2((x - m) - ls), dS^T = P^T * (dP^T - rowsum(dO * O))
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + (e >> 1) * 8, qi = nt * 8 + t4 * 2 + (e & 1);
        float p = 0.f;
        if (key < S && !(causal && key > q0 + qi)) {
          const float2 ml = sML[qi];
          p = exp2f((score_log2(st[nt][e], scale_log2, has_bias, kb[e >> 1]) - ml.x) - ml.y);
        }
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - sD[qi]);
      }
    // dV += P^T dO, dK += dS^T Q (k = queries; B loaded transposed)
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
      unsigned pa[4] = {pack2(st[2 * kk][0], st[2 * kk][1], T()), pack2(st[2 * kk][2], st[2 * kk][3], T()),
                        pack2(st[2 * kk + 1][0], st[2 * kk + 1][1], T()),
                        pack2(st[2 * kk + 1][2], st[2 * kk + 1][3], T())};
      unsigned sa[4] = {pack2(dpt[2 * kk][0], dpt[2 * kk][1], T()), pack2(dpt[2 * kk][2], dpt[2 * kk][3], T()),
                        pack2(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1], T()),
                        pack2(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3], T())};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        const int brow_ = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DS + dp * 16 + (lane >> 4) * 8;
        unsigned b[4];
        ldsm_x4_t(b, sO + brow_);
        mma_n16<T>(dvf + 2 * dp, pa, b);
        ldsm_x4_t(b, sQ + brow_);
        mma_n16<T>(dkf + 2 * dp, sa, b);
      }
      // dS^T to shared memory for dQ (rows: this warp's keys; columns: queries)
      T* srow = sS + (warp * 16 + g) * PS + kk * 16 + t4 * 2;
      *reinterpret_cast<unsigned*>(srow) = sa[0];
      *reinterpret_cast<unsigned*>(srow + 8 * PS) = sa[1];
      *reinterpret_cast<unsigned*>(srow + 8) = sa[2];
      *reinterpret_cast<unsigned*>(srow + 8 * PS + 8) = sa[3];
    }
    __syncthreads();
    // dQ (BQ, D) += dS (BQ, 64 keys) K (64 keys, D): warp -> m-tile mi, n-tiles [n0, n0 + NT)
    {
      const int mi = warp % MT, n0 = (warp / MT) * NT;
      float dqf[NT][4];
#pragma unroll
      for (int i = 0; i < NT; ++i) dqf[i][0] = dqf[i][1] = dqf[i][2] = dqf[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        unsigned a[4];
        ldsm_x4_t(a, sS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * PS + mi * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int j = 0; j < NT / 2; ++j) {
          unsigned b[4];
          ldsm_x4_t(b, sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DS + (n0 + 2 * j) * 8 + (lane >> 4) * 8);
          mma_n16<T>(dqf + 2 * j, a, b);
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = q0 + mi * 16 + g + (e >> 1) * 8;
          if (row < L) atomicAdd(dq + ((long long)bh * L + row) * D + (n0 + j) * 8 + t4 * 2 + (e & 1), dqf[j][e] * scale);
        }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + 8 * r;
    if (key >= S) continue;
    float* dkr = dk + ((long long)bh * S + key) * D;
    float* dvr = dv + ((long long)bh * S + key) * D;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<float2*>(dkr + dn * 8 + t4 * 2) = make_float2(dkf[dn][2 * r] * scale, dkf[dn][2 * r + 1] * scale);
      *reinterpret_cast<float2*>(dvr + dn * 8 + t4 * 2) = make_float2(dvf[dn][2 * r], dvf[dn][2 * r + 1]);
    }
  }
}

// ---------------------------------------------------------------- SIMT kernels
// rows [r0, r0 + 32) of a (n, d) array as float into shared memory (row stride D + 1), zeros
// past n and past d
template <class T, int D>
__device__ __forceinline__ void load_tile_f(float* dst, const T* src, int r0, int n, int d) {
  for (int i = threadIdx.x; i < 32 * D; i += blockDim.x) {
    const int r = i / D, c = i % D;
    dst[r * (D + 1) + c] = (r0 + r < n && c < d) ? to_float(src[(long long)(r0 + r) * d + c]) : 0.f;
  }
}

// One block per 32 queries (8 per warp); a lane owns one key of each 32-key tile for the
// scores and columns lane, lane + 32, ... of the output.
template <class T, int D>
__global__ void __launch_bounds__(128) flash_fwd_simt(FLASH_FWD_PARAMS) {
  constexpr int DP = D + 1, R = 8, C = D / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem);
  float* sK = sQ + 32 * DP;
  float* sV = sK + 32 * DP;
  const int bh = blockIdx.y, q0 = blockIdx.x * 32;
  const long long kvh = (long long)(bh / H) * (H / G) + (bh % H) / G;
  const float* brow = bias + (long long)bh * S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  load_tile_f<T, D>(sQ, q + (long long)bh * L * d, q0, L, d);
  float acc[R][C], m[R], l[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    m[i] = neg_inf<float>();
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < C; ++j) acc[i][j] = 0.f;
  }
  const int kend = causal ? min(S, q0 + 32) : S;
  for (int k0 = 0; k0 < kend; k0 += 32) {
    __syncthreads();
    load_tile_f<T, D>(sK, k + kvh * S * d, k0, S, d);
    load_tile_f<T, D>(sV, v + kvh * S * d, k0, S, d);
    __syncthreads();
    float s[R];
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] = 0.f;
#pragma unroll 8
    for (int c = 0; c < D; ++c) {
      const float kv = sK[lane * DP + c];
#pragma unroll
      for (int i = 0; i < R; ++i) s[i] += sQ[(warp * R + i) * DP + c] * kv;
    }
    const int key = k0 + lane;
    const float kbias = has_bias && key < S ? key_bias(brow, key) : 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int row = q0 + warp * R + i;
      float x = score_log2(s[i], scale_log2, has_bias, kbias);
      if (key >= S || (causal && key > row)) x = neg_inf<float>();
      const float mn = fmaxf(m[i], warp_max(x));
      const float mu = mn == neg_inf<float>() ? 0.f : mn;
      const float corr = exp2f(m[i] - mu);
      const float p = exp2f(x - mu);
      m[i] = mn;
      l[i] = l[i] * corr + warp_sum(p);
#pragma unroll
      for (int j = 0; j < C; ++j) acc[i][j] *= corr;
      for (int jj = 0; jj < 32; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int j = 0; j < C; ++j) acc[i][j] += pj * sV[jj * DP + lane + 32 * j];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int row = q0 + warp * R + i;
    if (row >= L) continue;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const int c = lane + 32 * j;
      if (c < d) o[((long long)bh * L + row) * d + c] = from_float<T>(acc[i][j] * inv);
    }
    if (lane == 0) stats[(long long)bh * L + row] = row_stats(m[i], l[i]);
  }
}

// One block per 32 keys; loops over query tiles of 32. Phase 1: a lane owns a key, a warp
// 8 queries (P and dS to shared memory). Phase 2: a warp owns 8 keys, a lane columns
// (dK, dV in registers). Phase 3: a warp owns 8 queries, a lane columns (dQ by atomics).
template <class T, int D>
__global__ void __launch_bounds__(128) flash_bwd_simt(FLASH_BWD_PARAMS) {
  constexpr int DP = D + 1, R = 8, C = D / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  float* sK = reinterpret_cast<float*>(smem);
  float* sV = sK + 32 * DP;
  float* sQ = sV + 32 * DP;
  float* sO = sQ + 32 * DP;
  float* sP = sO + 32 * DP;  // (queries, keys), stride 33
  float* sS = sP + 32 * 33;
  float2* sML = reinterpret_cast<float2*>(sS + 32 * 33);  // (m, ls) per query
  float* sD = reinterpret_cast<float*>(sML + 32);
  const int bh = blockIdx.y, k0 = blockIdx.x * 32;
  const long long kvh = (long long)(bh / H) * (H / G) + (bh % H) / G;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  load_tile_f<T, D>(sK, k + kvh * S * d, k0, S, d);
  load_tile_f<T, D>(sV, v + kvh * S * d, k0, S, d);
  const int key = k0 + lane;
  const float kbias = has_bias && key < S ? key_bias(bias + (long long)bh * S, key) : 0.f;
  float dka[R][C], dva[R][C];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) dka[i][j] = dva[i][j] = 0.f;
  const int qstart = causal ? k0 : 0;
  for (int q0 = qstart; q0 < L; q0 += 32) {
    __syncthreads();
    load_tile_f<T, D>(sQ, q + (long long)bh * L * d, q0, L, d);
    load_tile_f<T, D>(sO, dout + (long long)bh * L * d, q0, L, d);
    if (threadIdx.x < 32) {
      const bool ok = q0 + lane < L;
      sML[lane] = ok ? stats[(long long)bh * L + q0 + lane] : make_float2(pos_inf<float>(), 0.f);
      sD[lane] = ok ? dd[(long long)bh * L + q0 + lane] : 0.f;
    }
    __syncthreads();
    float s[R], dp[R];
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] = dp[i] = 0.f;
    for (int c = 0; c < D; ++c) {
      const float kc = sK[lane * DP + c], vc = sV[lane * DP + c];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        s[i] += sQ[(warp * R + i) * DP + c] * kc;
        dp[i] += sO[(warp * R + i) * DP + c] * vc;
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int qi = warp * R + i;
      float p = 0.f;
      if (key < S && !(causal && key > q0 + qi)) {
        const float2 ml = sML[qi];
        p = exp2f((score_log2(s[i], scale_log2, has_bias, kbias) - ml.x) - ml.y);
      }
      sP[qi * 33 + lane] = p;
      sS[qi * 33 + lane] = p * (dp[i] - sD[qi]);
    }
    __syncthreads();
    for (int qi = 0; qi < 32; ++qi) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float p = sP[qi * 33 + warp * R + i], ds = sS[qi * 33 + warp * R + i];
#pragma unroll
        for (int j = 0; j < C; ++j) {
          dva[i][j] += p * sO[qi * DP + lane + 32 * j];
          dka[i][j] += ds * sQ[qi * DP + lane + 32 * j];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int row = q0 + warp * R + i;
      float acc[C];
#pragma unroll
      for (int j = 0; j < C; ++j) acc[j] = 0.f;
      for (int kj = 0; kj < 32; ++kj) {
        const float ds = sS[(warp * R + i) * 33 + kj];
#pragma unroll
        for (int j = 0; j < C; ++j) acc[j] += ds * sK[kj * DP + lane + 32 * j];
      }
      if (row < L) {
#pragma unroll
        for (int j = 0; j < C; ++j) {
          const int c = lane + 32 * j;
          if (c < d) atomicAdd(dq + ((long long)bh * L + row) * d + c, acc[j] * scale);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int kr = k0 + warp * R + i;
    if (kr >= S) continue;
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const int c = lane + 32 * j;
      if (c < d) {
        dk[((long long)bh * S + kr) * d + c] = dka[i][j] * scale;
        dv[((long long)bh * S + kr) * d + c] = dva[i][j];
      }
    }
  }
}

// rowsum(dO * O) per row, one warp per row; rows (batch * heads * queries) a 64-bit count
template <class T>
__global__ void __launch_bounds__(128) flash_bwd_dot(const T* __restrict__ dout, const T* __restrict__ o,
                                                    float* __restrict__ dd, long long rows, int d) {
  const long long row = grid_block() * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float s = 0.f;
  for (int c = threadIdx.x; c < d; c += 32) s += to_float(dout[row * d + c]) * to_float(o[row * d + c]);
  s = warp_sum(s);
  if (threadIdx.x == 0) dd[row] = s;
}
