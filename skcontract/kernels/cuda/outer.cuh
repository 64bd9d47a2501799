// outer.cuh: batched outer products C[b][i][j] = x[b][i] * y[b][j] into a dense C
// (skcontract/kernels/outer.py). Nothing is reused but x's element of a row and y's row, so
// the kernel is bound by C's writes: a thread writes VEC consecutive elements of a row, in one
// 16-byte store where the rows allow (VEC * sizeof(T) == 16), reading the row's x element (an
// L1 hit for the row's other threads) and VEC elements of y (as long as a row: L2-resident).
// A 1-D grid strides over the (row, chunk) pairs; 32-bit indices (the host keeps the pairs
// below 2^31 and each operand's offsets in 64 bits).
#pragma once

#include "sk_common.cuh"

namespace skc {

constexpr int OUTER_THREADS = 256;

// x * y rounded once to T (float16: the exact float32 product rounded, as IEEE's float16
// multiply rounds it).
template <class T>
__device__ __forceinline__ T outer_mul(T a, T b) { return a * b; }
template <>
__device__ __forceinline__ half_t outer_mul<half_t>(half_t a, half_t b) {
  return Cvt<half_t>::from_f32(Cvt<half_t>::to_f32(a) * Cvt<half_t>::to_f32(b));
}

// m: rows of one batch entry; n: a row's elements (a multiple of VEC); rows: batch * m;
// sxb, sxi: x's batch and row strides; syb, syj: y's batch and element strides (elements).
template <class T, int VEC>
__global__ void __launch_bounds__(OUTER_THREADS)
outer(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ c, int m, int n,
      int rows, long long sxb, long long sxi, long long syb, long long syj) {
  const int chunks = n / VEC;
  const int total = rows * chunks;  // below 2^31 (the host checks)
  for (int t = blockIdx.x * OUTER_THREADS + threadIdx.x; t < total;
       t += gridDim.x * OUTER_THREADS) {
    const int row = t / chunks;
    const int j0 = (t - row * chunks) * VEC;
    const int b = row / m, i = row - b * m;
    const T xv = x[b * sxb + i * sxi];
    const T* yr = y + b * syb + j0 * syj;
    alignas(16) T out[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) out[v] = outer_mul(xv, yr[v * syj]);
    T* cr = c + (long long)row * n + j0;
    if constexpr (VEC * sizeof(T) == 16) {
      *reinterpret_cast<uint4*>(cr) = *reinterpret_cast<const uint4*>(out);
    } else {
#pragma unroll
      for (int v = 0; v < VEC; ++v) cr[v] = out[v];
    }
  }
}

}  // namespace skc
