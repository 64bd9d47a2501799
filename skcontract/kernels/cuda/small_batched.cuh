// small_batched.cuh: many small matrix products C[b] = A[b] B[b] (skcontract/kernels/
// small_batched.py), each of at most 32 x 32 x 32. A GEMM tile of 64 rows or more computes
// mostly padding on such products, and a tile walk pays a round trip a product; here a CTA
// stages `per_cta` whole products in shared memory (A's and B's elements read in order of
// their index, so operands whose batch entries are dense are read in coalesced runs), then its
// threads each compute output elements from shared memory and write them in order (dense C).
// Products accumulate in Acc (float for float16 and float32, double for float64), k in order.
#pragma once

#include "sk_common.cuh"

namespace skc {

constexpr int SMALL_THREADS = 256;

// The CTA's products [b0, b0 + count): A (m x k) and B (k x n) of each into shared memory,
// at the operands' element strides (batch, row, column; a batch stride of 0 repeats one).
template <class T>
__device__ __forceinline__ void small_stage(const T* __restrict__ x, T* s, int b0, int count,
                                            int rows, int cols, long long sb, long long sr,
                                            long long sc) {
  const int per = rows * cols;
  for (int t = threadIdx.x; t < count * per; t += SMALL_THREADS) {
    const int g = t / per, r = t - g * per;
    const int i = r / cols, j = r - i * cols;
    s[t] = x[(long long)(b0 + g) * sb + i * sr + j * sc];
  }
}

template <class T, class Acc>
__global__ void __launch_bounds__(SMALL_THREADS)
small_batched(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int batch,
              int m, int n, int k, long long sab, long long sam, long long sak, long long sbb,
              long long sbk, long long sbn, int per_cta) {
  extern __shared__ __align__(16) unsigned char small_smem[];
  T* sa = reinterpret_cast<T*>(small_smem);
  T* sb = sa + per_cta * m * k;
  const int b0 = blockIdx.x * per_cta;
  const int count = min(per_cta, batch - b0);
  small_stage(a, sa, b0, count, m, k, sab, sam, sak);
  small_stage(b, sb, b0, count, k, n, sbb, sbk, sbn);
  __syncthreads();
  const int per = m * n;
  T* cb = c + (long long)b0 * per;
  for (int t = threadIdx.x; t < count * per; t += SMALL_THREADS) {
    const int g = t / per, r = t - g * per;
    const int i = r / n, j = r - i * n;
    const T* ar = sa + (g * m + i) * k;
    const T* bc = sb + g * k * n + j;
    Acc acc = 0;
    for (int kk = 0; kk < k; ++kk)
      acc += AccCvt<T, Acc>::to_acc(ar[kk]) * AccCvt<T, Acc>::to_acc(bc[kk * n]);
    cb[t] = AccCvt<T, Acc>::from_acc(acc);
  }
}

}  // namespace skc
