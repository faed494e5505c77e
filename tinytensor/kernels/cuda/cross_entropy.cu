// Cross-entropy from logits, one block per row of C classes, never materialising the
// softmax. With w the class weights (1 without), t the target, eps the label smoothing,
// m = max(x), d = x - m and ls = log(sum(exp(d))):
//   loss = (1 - eps) * w[t] * (ls - d[t]) + eps / C * (sum(w) * ls - sum(w * d))
//   dx   = coef * ((1 - eps) * w[t] * (p - onehot(t)) + eps / C * (sum(w) * p - w))
// with p = exp(d - ls) recomputed in the backward from the saved m and ls. Never from the
// absolute logsumexp m + ls: at |x| ~ 1e8 a float holds only multiples of 8, so m + ls
// rounds to m and the loss and gradient lose ls (the arithmetic of the CPU path, and of
// log_softmax). Ignored rows give a zero loss and a zero gradient. Rows are a 64-bit count
// (a 2-D grid, `grid_block`); eps and sum(w) come in the accumulator type.

template <class T, int VEC>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) ce_fwd(const T* __restrict__ x, const long long* __restrict__ target,
                                              const typename Acc<T>::type* __restrict__ weight,
                                              typename Acc<T>::type* __restrict__ loss,
                                              typename Acc<T>::type* __restrict__ max_out,
                                              typename Acc<T>::type* __restrict__ ls_out,
                                              long long rows, int C, long long ignore_index,
                                              typename Acc<T>::type smoothing, int has_w,
                                              typename Acc<T>::type wsum) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const long long row = grid_block();
  if (row >= rows) return;  // the whole block
  const long long t = target[row];
  if (t == ignore_index) {  // the whole block leaves together
    if (threadIdx.x == 0) { loss[row] = 0; max_out[row] = 0; ls_out[row] = 0; }
    return;
  }
  const T* xr = x + row * C;
  A m = neg_inf<A>(), s = 0, sd = 0;
  for (int c = threadIdx.x * VEC; c < C; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
    online_add<A, VEC>(m, s, v);
  }
  block_online(m, s, buf);
  if (smoothing > A(0)) {
    // sum(w * d) needs the row's max first, so a second pass (the row is in cache): a
    // running sum of w * x instead would cancel catastrophically against sum(w) * m
    for (int c = threadIdx.x * VEC; c < C; c += blockDim.x * VEC) {
      A v[VEC];
      load_vec<T, VEC>(xr + c, v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) sd += has_w ? weight[c + j] * (v[j] - m) : v[j] - m;
    }
    sd = block_sum(sd, buf);
  }
  if (threadIdx.x == 0) {
    const A ls = tt_log(s);
    const A wt = has_w ? weight[t] : A(1);
    A l = (A(1) - smoothing) * wt * (ls - (to_float(xr[t]) - m));
    if (smoothing > A(0)) l += smoothing / A(C) * (wsum * ls - sd);
    loss[row] = l;
    max_out[row] = m;
    ls_out[row] = ls;
  }
}

template <class T, int VEC>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) ce_bwd(const T* __restrict__ x, const long long* __restrict__ target,
                                              const typename Acc<T>::type* __restrict__ weight,
                                              const typename Acc<T>::type* __restrict__ row_max,
                                              const typename Acc<T>::type* __restrict__ row_ls,
                                              const typename Acc<T>::type* __restrict__ coef,
                                              int coef_stride, T* __restrict__ dx, long long rows, int C,
                                              long long ignore_index, typename Acc<T>::type smoothing,
                                              int has_w, typename Acc<T>::type wsum) {
  typedef typename Acc<T>::type A;
  const long long row = grid_block();
  if (row >= rows) return;  // the whole block
  const long long t = target[row];
  const long long off = row * C;
  const bool ignored = t == ignore_index;
  const A k = ignored ? A(0) : coef[row * coef_stride];
  const A wt = ignored ? A(0) : (has_w ? weight[t] : A(1));
  const A hard = (A(1) - smoothing) * wt;   // weight of (p - onehot)
  const A soft = smoothing / A(C);          // weight of (sum(w) p - w)
  const A pscale = k * (hard + soft * wsum);
  const A m = ignored ? A(0) : row_max[row], ls = ignored ? A(0) : row_ls[row];
  for (int c = threadIdx.x * VEC; c < C; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(x + off + c, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      A d = ignored ? A(0) : pscale * tt_exp((v[j] - m) - ls);
      if (!ignored) {
        if (c + j == t) d -= k * hard;
        if (smoothing > A(0)) d -= k * soft * (has_w ? weight[c + j] : A(1));
      }
      v[j] = d;
    }
    store_vec<T, VEC>(dx + off + c, v);
  }
}
