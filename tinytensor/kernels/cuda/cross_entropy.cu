// Cross-entropy from logits, one block per row of C classes, never materialising the
// softmax. With w the class weights (1 without), t the target, eps the label smoothing:
//   loss = (1 - eps) * w[t] * (lse - x[t]) + eps / C * (sum(w) * lse - sum(w * x))
//   dx   = coef * ((1 - eps) * w[t] * (p - onehot(t)) + eps / C * (sum(w) * p - w))
// with p = exp(x - lse) recomputed in the backward from the saved lse. Ignored rows give
// a zero loss and a zero gradient.

template <class T, int VEC>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) ce_fwd(const T* __restrict__ x, const long long* __restrict__ target,
                                              const typename Acc<T>::type* __restrict__ weight,
                                              typename Acc<T>::type* __restrict__ loss,
                                              typename Acc<T>::type* __restrict__ lse_out,
                                              int rows, int C, long long ignore_index, float smoothing,
                                              int has_w, float wsum) {
  typedef typename Acc<T>::type A;
  __shared__ A buf[32];
  const int row = blockIdx.x;
  const long long t = target[row];
  if (t == ignore_index) {  // the whole block leaves together
    if (threadIdx.x == 0) { loss[row] = 0; lse_out[row] = 0; }
    return;
  }
  const T* xr = x + (long long)row * C;
  A m = neg_inf<A>(), s = 0, sx = 0;
  for (int c = threadIdx.x * VEC; c < C; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(xr + c, v);
    A vm = v[0];
#pragma unroll
    for (int j = 1; j < VEC; ++j) vm = tt_max(vm, v[j]);
    A vs = 0;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      vs += tt_exp(v[j] - vm);
      if (smoothing > 0.f) sx += has_w ? weight[c + j] * v[j] : v[j];
    }
    online_merge(m, s, vm, vs);
  }
  const A bm = block_max(m, buf);
  s = m == neg_inf<A>() ? A(0) : s * tt_exp(m - bm);
  s = block_sum(s, buf);
  if (smoothing > 0.f) sx = block_sum(sx, buf);
  if (threadIdx.x == 0) {
    const A lse = bm + tt_log(s);
    const A wt = has_w ? weight[t] : A(1);
    A l = (A(1) - A(smoothing)) * wt * (lse - to_float(xr[t]));
    if (smoothing > 0.f) l += A(smoothing) / A(C) * (A(wsum) * lse - sx);
    loss[row] = l;
    lse_out[row] = lse;
  }
}

template <class T, int VEC>
__global__ void __launch_bounds__(sizeof(T) == 8 ? 512 : 1024) ce_bwd(const T* __restrict__ x, const long long* __restrict__ target,
                                              const typename Acc<T>::type* __restrict__ weight,
                                              const typename Acc<T>::type* __restrict__ lse,
                                              const typename Acc<T>::type* __restrict__ coef,
                                              int coef_stride, T* __restrict__ dx, int rows, int C,
                                              long long ignore_index, float smoothing, int has_w, float wsum) {
  typedef typename Acc<T>::type A;
  const int row = blockIdx.x;
  const long long t = target[row];
  const long long off = (long long)row * C;
  const bool ignored = t == ignore_index;
  const A k = ignored ? A(0) : coef[(long long)row * coef_stride];
  const A wt = ignored ? A(0) : (has_w ? weight[t] : A(1));
  const A hard = (A(1) - A(smoothing)) * wt;   // weight of (p - onehot)
  const A soft = A(smoothing) / A(C);          // weight of (sum(w) p - w)
  const A pscale = k * (hard + soft * A(wsum)), l = ignored ? A(0) : lse[row];
  for (int c = threadIdx.x * VEC; c < C; c += blockDim.x * VEC) {
    A v[VEC];
    load_vec<T, VEC>(x + off + c, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      A d = ignored ? A(0) : pscale * tt_exp(v[j] - l);
      if (!ignored) {
        if (c + j == t) d -= k * hard;
        if (smoothing > 0.f) d -= k * soft * (has_w ? weight[c + j] : A(1));
      }
      v[j] = d;
    }
    store_vec<T, VEC>(dx + off + c, v);
  }
}
