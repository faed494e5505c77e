// layer_norm (RMS = false) and rms_norm (RMS = true) over the last n elements of each row.
//
// Forward: one block per row, two passes for the statistics (the mean, then the mean
// square of the centred values: stable where E[x^2] - E[x]^2 is not), a third writes
// y = xhat * w + b. The row is read from DRAM once; the later passes hit L1/L2.
// Backward: dx per row as forward; dw and db are column sums over rows, done by a
// second kernel whose threads own columns (coalesced), one partial sum per row chunk.
// Rows are a 64-bit count (a 2-D grid, `grid_block`); eps comes in the accumulator type
// (double for double).

template <class T, int VEC, bool RMS>
__global__ void __launch_bounds__(1024) norm_fwd(const T* __restrict__ x, const T* __restrict__ w,
                                                const T* __restrict__ b, T* __restrict__ y,
                                                typename Acc<T>::type* __restrict__ mean_out,
                                                typename Acc<T>::type* __restrict__ rstd_out,
                                                long long rows, int n, typename Acc<T>::type eps,
                                                int has_w, int has_b) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long row = grid_block();
  if (row >= rows) return;  // the whole block
  const long long off = row * n;
  const T* xr = x + off;
  A mu = 0;
  if (!RMS) {
    A s = 0;
    for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
      A v[VEC];
      load_vec<T, VEC>(xr + c, v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) s += v[j];
    }
    mu = block_sum(s, buf) / A(n);
  }
  A ss = 0;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) ss += (v[j] - mu) * (v[j] - mu);
  }
  const A rstd = tt_rsqrt(block_sum(ss, buf) / A(n) + eps);
  if (threadIdx.x == 0) {
    mean_out[row] = mu;
    rstd_out[row] = rstd;
  }
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A v[VEC], wv[VEC], bv[VEC];
    load_vec<T, VEC>(xr + c, v);
    if (has_w) load_vec<T, VEC>(w + c, wv);
    if (has_b) load_vec<T, VEC>(b + c, bv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      A o = (v[j] - mu) * rstd;
      if (has_w) o *= wv[j];
      if (has_b) o += bv[j];
      v[j] = o;
    }
    store_vec<T, VEC>(y + off + c, v);
  }
}

// gw = g * w (g alone without a weight) and x: VEC values at column c of one row
template <class T, int VEC, class A>
__device__ __forceinline__ void load_gw_x(const T* __restrict__ g, const T* __restrict__ x,
                                          const T* __restrict__ w, int has_w, int c, A* gw, A* xv) {
  load_vec<T, VEC>(g + c, gw);
  load_vec<T, VEC>(x + c, xv);
  if (has_w) {
    A wv[VEC];
    load_vec<T, VEC>(w + c, wv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) gw[j] *= wv[j];
  }
}

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w (rms: no mean(gw) term)
template <class T, int VEC, bool RMS>
__global__ void __launch_bounds__(1024) norm_bwd_dx(const T* __restrict__ g, const T* __restrict__ x,
                                                   const T* __restrict__ w,
                                                   const typename Acc<T>::type* __restrict__ mean,
                                                   const typename Acc<T>::type* __restrict__ rstd,
                                                   T* __restrict__ dx, long long rows, int n, int has_w) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long row = grid_block();
  if (row >= rows) return;  // the whole block
  const long long off = row * n;
  const A mu = RMS ? A(0) : mean[row], rs = rstd[row];
  A s1 = 0, s2 = 0;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A gw[VEC], xv[VEC];
    load_gw_x<T, VEC>(g + off, x + off, w, has_w, c, gw, xv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      s1 += gw[j];
      s2 += gw[j] * (xv[j] - mu) * rs;
    }
  }
  s2 = block_sum(s2, buf) / A(n);
  if (!RMS) s1 = block_sum(s1, buf) / A(n);
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A gw[VEC], xv[VEC];
    load_gw_x<T, VEC>(g + off, x + off, w, has_w, c, gw, xv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A xh = (xv[j] - mu) * rs;
      gw[j] = rs * (RMS ? gw[j] - xh * s2 : gw[j] - s1 - xh * s2);
    }
    store_vec<T, VEC>(dx + off + c, gw);
  }
}

// partial column sums over the rows of chunk blockIdx.y: dw += g * xhat, db += g
template <class T, bool RMS>
__global__ void __launch_bounds__(256) norm_bwd_wb(const T* __restrict__ g, const T* __restrict__ x,
                                                  const typename Acc<T>::type* __restrict__ mean,
                                                  const typename Acc<T>::type* __restrict__ rstd,
                                                  typename Acc<T>::type* __restrict__ dw_part,
                                                  typename Acc<T>::type* __restrict__ db_part,
                                                  long long rows, int n, long long rows_per_chunk) {
  typedef typename Acc<T>::type A;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= n) return;
  const long long r0 = blockIdx.y * rows_per_chunk;
  const long long r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  A dw = 0, db = 0;
  for (long long r = r0; r < r1; ++r) {
    const long long i = r * n + col;
    const A gv = to_float(g[i]);
    const A mu = RMS ? A(0) : mean[r];
    dw += gv * (to_float(x[i]) - mu) * rstd[r];
    db += gv;
  }
  dw_part[(long long)blockIdx.y * n + col] = dw;
  db_part[(long long)blockIdx.y * n + col] = db;
}
