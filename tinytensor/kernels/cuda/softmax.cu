// softmax / log_softmax over the last axis of a (rows, n) array, forward and backward.
//
// Short rows (n <= 32 * VEC * MAX_ITEMS): one warp per row, the row held in registers:
// one read, one write, warp-shuffle reductions. Long rows: one block per row with the
// online algorithm (a running max and a running sum rescaled whenever the max grows), so
// the forward reads the row twice (statistics, then output) and writes it once.

// ---------------------------------------------------------------- one warp per row
template <class T, int VEC, int MAX_ITEMS, bool LOG>
__global__ void __launch_bounds__(128) softmax_fwd_warp(const T* __restrict__ x, T* __restrict__ y,
                                                       int rows, int n) {
  typedef typename Acc<T>::type A;
  const int row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row >= rows) return;
  const T* xr = x + (long long)row * n;
  T* yr = y + (long long)row * n;
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
  const A r = LOG ? m + tt_log(s) : A(1) / s;
#pragma unroll
  for (int i = 0; i < MAX_ITEMS; ++i) {
    const int c = (i * 32 + lane) * VEC;
    if (c < n) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i][j] = LOG ? v[i][j] - r : v[i][j] * r;
      store_vec<T, VEC>(yr + c, v[i]);
    }
  }
}

// softmax: dx = y * (g - sum(g * y));  log_softmax: dx = g - exp(y) * sum(g)
template <class T, int VEC, int MAX_ITEMS, bool LOG>
__global__ void __launch_bounds__(128) softmax_bwd_warp(const T* __restrict__ g, const T* __restrict__ y,
                                                       T* __restrict__ dx, int rows, int n) {
  typedef typename Acc<T>::type A;
  const int row = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
  if (row >= rows) return;
  const long long off = (long long)row * n;
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
                                                         int rows, int n) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long off = (long long)blockIdx.x * n;
  const T* xr = x + off;
  T* yr = y + off;
  A m = neg_inf<A>(), s = 0;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
    A vm = v[0];
#pragma unroll
    for (int j = 1; j < VEC; ++j) vm = tt_max(vm, v[j]);
    A vs = 0;
#pragma unroll
    for (int j = 0; j < VEC; ++j) vs += tt_exp(v[j] - vm);
    online_merge(m, s, vm, vs);
  }
  // merge the threads' (m, s): the block max first, then every sum rescaled to it
  const A bm = block_max(m, buf);
  s = m == neg_inf<A>() ? A(0) : s * tt_exp(m - bm);
  s = block_sum(s, buf);
  const A r = LOG ? bm + tt_log(s) : A(1) / s;
  for (int c = threadIdx.x * VEC; c < n; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = LOG ? v[j] - r : tt_exp(v[j] - bm) * r;
    store_vec<T, VEC>(yr + c, v);
  }
}

template <class T, int VEC, bool LOG>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) softmax_bwd_block(const T* __restrict__ g, const T* __restrict__ y,
                                                         T* __restrict__ dx, int rows, int n) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long off = (long long)blockIdx.x * n;
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
