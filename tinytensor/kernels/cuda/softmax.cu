// softmax / log_softmax over the last axis of a (rows, n) array, forward and backward.
//
// Short rows (n <= 32 * VEC * MAX_ITEMS): one warp per row, the row held in registers:
// one read, one write, warp-shuffle reductions. Long rows: one block per row with the
// online algorithm (a running max and a running sum rescaled whenever the max grows), so
// the forward reads the row twice (statistics, then output) and writes it once.
// Rows are a 64-bit count (a 2-D grid, `grid_block`).
// log_softmax is (x - m) - log(s), never x - (m + log(s)): at |x| ~ 1e8 a float holds only
// multiples of 8, so m + log(s) rounds back to m and the output loses log(s).

// ---------------------------------------------------------------- one warp per row
template <class T, int VEC, int MAX_ITEMS, bool LOG>
__global__ void __launch_bounds__(128) softmax_fwd_warp(const T* __restrict__ x, T* __restrict__ y,
                                                       long long rows, int n) {
  typedef typename Acc<T>::type A;
  const int lane = threadIdx.x;
  const long long row = grid_block() * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const T* xr = x + row * n;
  T* yr = y + row * n;
  A v[MAX_ITEMS][VEC];
  A m = neg_inf<A>();
#pragma unroll
  for (int i = 0; i < MAX_ITEMS; ++i) {
    const int c = (i * 32 + lane) * VEC;
    if (c < n) {
      load_vec<T, VEC>(xr + c, v[i]);
#pragma unroll
      for (int j = 0; j < VEC; ++j) m = tt_max(m, v[i][j]);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i][j] = neg_inf<A>();
    }
  }
  m = warp_max(m);
  A s = 0;
#pragma unroll
  for (int i = 0; i < MAX_ITEMS; ++i)
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      A e = tt_exp(v[i][j] - m);  // padding: exp(-inf) = 0
      s += e;
      if (!LOG) v[i][j] = e;
    }
  s = warp_sum(s);
  const A r = LOG ? tt_log(s) : A(1) / s;
#pragma unroll
  for (int i = 0; i < MAX_ITEMS; ++i) {
    const int c = (i * 32 + lane) * VEC;
    if (c < n) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i][j] = LOG ? (v[i][j] - m) - r : v[i][j] * r;
      store_vec<T, VEC>(yr + c, v[i]);
    }
  }
}

// softmax: dx = y * (g - sum(g * y));  log_softmax: dx = g - exp(y) * sum(g)
template <class T, int VEC, int MAX_ITEMS, bool LOG>
__global__ void __launch_bounds__(128) softmax_bwd_warp(const T* __restrict__ g, const T* __restrict__ y,
                                                       T* __restrict__ dx, long long rows, int n) {
  typedef typename Acc<T>::type A;
  const int lane = threadIdx.x;
  const long long row = grid_block() * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const long long off = row * n;
  A gv[MAX_ITEMS][VEC], yv[MAX_ITEMS][VEC];
  A dot = 0;
#pragma unroll
  for (int i = 0; i < MAX_ITEMS; ++i) {
    const int c = (i * 32 + lane) * VEC;
    if (c < n) {
      load_vec<T, VEC>(g + off + c, gv[i]);
      load_vec<T, VEC>(y + off + c, yv[i]);
#pragma unroll
      for (int j = 0; j < VEC; ++j) dot += LOG ? gv[i][j] : gv[i][j] * yv[i][j];
    }
  }
  dot = warp_sum(dot);
#pragma unroll
  for (int i = 0; i < MAX_ITEMS; ++i) {
    const int c = (i * 32 + lane) * VEC;
    if (c < n) {
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        gv[i][j] = LOG ? gv[i][j] - tt_exp(yv[i][j]) * dot : yv[i][j] * (gv[i][j] - dot);
      store_vec<T, VEC>(dx + off + c, gv[i]);
    }
  }
}

// ---------------------------------------------------------------- one block per row
template <class T, int VEC, bool LOG>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) softmax_fwd_block(const T* __restrict__ x, T* __restrict__ y,
                                                         long long rows, int n) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long row = grid_block();
  if (row >= rows) return;  // the whole block
  const T* xr = x + row * n;
  T* yr = y + row * n;
  A m = neg_inf<A>(), s = 0;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
    online_add<A, VEC>(m, s, v);
  }
  block_online(m, s, buf);
  const A r = LOG ? tt_log(s) : A(1) / s;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = LOG ? (v[j] - m) - r : tt_exp(v[j] - m) * r;
    store_vec<T, VEC>(yr + c, v);
  }
}

template <class T, int VEC, bool LOG>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) softmax_bwd_block(const T* __restrict__ g, const T* __restrict__ y,
                                                         T* __restrict__ dx, long long rows, int n) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long row = grid_block();
  if (row >= rows) return;  // the whole block
  const long long off = row * n;
  A dot = 0;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A gv[VEC], yv[VEC];
    load_vec<T, VEC>(g + off + c, gv);
    if (!LOG) load_vec<T, VEC>(y + off + c, yv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) dot += LOG ? gv[j] : gv[j] * yv[j];
  }
  dot = block_sum(dot, buf);
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A gv[VEC], yv[VEC];
    load_vec<T, VEC>(g + off + c, gv);
    load_vec<T, VEC>(y + off + c, yv);
#pragma unroll (sizeof(T) == 8 ? 1 : VEC)
    for (int j = 0; j < VEC; ++j) gv[j] = LOG ? gv[j] - tt_exp(yv[j]) * dot : yv[j] * (gv[j] - dot);
    store_vec<T, VEC>(dx + off + c, gv);
  }
}
