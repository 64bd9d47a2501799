// small_batched.cuh: many small matrix products C[b] = A[b] B[b] (skcontract/kernels/
// small_batched.py), each of at most 32 x 32 x 32. A GEMM tile of 64 rows or more computes
// mostly padding on such products, and a tile walk pays a round trip a product; here a CTA
// stages `per_cta` whole products in shared memory, then its threads each compute JB
// neighbouring outputs of a row from shared memory and write them (dense C).
//
// Shared memory:  [ A of the CTA's products, rows `lda` apart ][ pad to 16 B ][ B, dense ]
// B's products lie `b_stage_stride` = k * n elements apart; where it is 0, B (of batch
// stride 0: one matrix for every product, as a tall product folded into a batch has) is
// staged once.
//
// - Staging: where a CTA's products of an operand are one dense run in memory (the operand
//   dense over its batch), it reads 16-byte vectors, SMALL_UNROLL in flight a thread (a CTA
//   reads its whole stage before it computes, so its reads must keep many bytes in flight;
//   an element at a time leaves the memory system idle); else element by element at the
//   operand's strides, in the order of its smaller stride (a column-major operand's
//   columns down all the CTA's rows).
// - A's rows lie `lda` = k | 1 elements apart, an odd stride: the threads of a warp read A at
//   up to 32 different rows at once, and rows an even number of 4-byte words apart would
//   fall in the same banks.
// - A thread's JB outputs read one A element and one JB-wide vector of B a k step, so that a
//   k step costs two shared-memory reads for JB multiply-adds (JB = 4 where n is a multiple
//   of 4, else 1).
// Products accumulate in Acc (float for float16 and float32, double for float64, the
// element type itself for complex64 and complex128: complex.cuh's acc_add / acc_mul), k in
// order.
#pragma once

#include "sk_common.cuh"
#include "complex.cuh"

namespace skc {

constexpr int SMALL_THREADS = 256;
constexpr int SMALL_VECTOR_BYTES = 16;
constexpr int SMALL_UNROLL = 4;

// JB consecutive elements of a row, loaded and stored as one vector (at most 16 bytes).
template <class T, int JB>
struct alignas(JB * sizeof(T) < 16 ? JB * sizeof(T) : 16) SmallRow {
  T v[JB];
};

// The CTA's products [b0, b0 + count) of one operand (rows x cols each) into shared memory
// `s`, rows `ld` elements apart, read at the operand's element strides (batch, row, column;
// a batch stride of 0 repeats one matrix).
template <class T>
__device__ __forceinline__ void small_stage(const T* __restrict__ x, T* s, int b0, int count,
                                            int rows, int cols, int ld, long long s_batch,
                                            long long s_row, long long s_col) {
  const int per = rows * cols;
  const int total = count * per;
  const T* run = x + (long long)b0 * s_batch;
  constexpr int V = SMALL_VECTOR_BYTES / sizeof(T);
  if (s_col == 1 && s_row == cols && s_batch == per &&
      (reinterpret_cast<unsigned long long>(run) & (SMALL_VECTOR_BYTES - 1)) == 0) {
    const uint4* src = reinterpret_cast<const uint4*>(run);
    const int vectors = total / V;
#pragma unroll SMALL_UNROLL
    for (int t = threadIdx.x; t < vectors; t += SMALL_THREADS) {
      union { uint4 u; T e[V]; } got;
      got.u = src[t];
      if (ld == cols) {
        reinterpret_cast<uint4*>(s)[t] = got.u;
        continue;
      }
      // element e of the run is row e / cols (over all the CTA's products) at column
      // e % cols: one division a vector, then step along the row
      int row = t * V / cols, col = t * V - row * cols;
#pragma unroll
      for (int u = 0; u < V; ++u) {
        s[row * ld + col] = got.e[u];
        if (++col == cols) { col = 0; ++row; }
      }
    }
    for (int e = vectors * V + threadIdx.x; e < total; e += SMALL_THREADS) {
      const int row = e / cols;
      s[row * ld + e - row * cols] = run[e];
    }
    return;
  }
  if (llabs(s_row) < llabs(s_col)) {
    // column by column over all the CTA's rows (a column-major operand, a tall one's rows
    // folded into products: each column of the CTA's rows one run in memory)
    const int all_rows = count * rows;
#pragma unroll SMALL_UNROLL
    for (int t = threadIdx.x; t < total; t += SMALL_THREADS) {
      const int j = t / all_rows, e = t - j * all_rows;
      const int g = e / rows, i = e - g * rows;
      s[e * ld + j] = x[(long long)(b0 + g) * s_batch + i * s_row + j * s_col];
    }
    return;
  }
  for (int t = threadIdx.x; t < total; t += SMALL_THREADS) {
    const int g = t / per, r = t - g * per;
    const int i = r / cols, j = r - i * cols;
    s[(g * rows + i) * ld + j] = x[(long long)(b0 + g) * s_batch + i * s_row + j * s_col];
  }
}

template <class T, class Acc, int JB>
__global__ void __launch_bounds__(SMALL_THREADS)
small_batched(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int batch,
              int m, int n, int k, long long sab, long long sam, long long sak, long long sbb,
              long long sbk, long long sbn, int per_cta, int b_stage_stride) {
  extern __shared__ __align__(16) unsigned char small_smem[];
  constexpr int V = SMALL_VECTOR_BYTES / sizeof(T);
  const int lda = k | 1;
  T* stage_a = reinterpret_cast<T*>(small_smem);
  T* stage_b = stage_a + (per_cta * m * lda + V - 1) / V * V;
  const int b0 = blockIdx.x * per_cta;
  const int count = min(per_cta, batch - b0);
  small_stage(a, stage_a, b0, count, m, k, lda, sab, sam, sak);
  small_stage(b, stage_b, b0, b_stage_stride == 0 ? 1 : count, k, n, n, sbb, sbk, sbn);
  __syncthreads();
  const int nq = n / JB;
  const int per = m * nq;
  T* cb = c + (long long)b0 * m * n;
  for (int t = threadIdx.x; t < count * per; t += SMALL_THREADS) {
    const int g = t / per, r = t - g * per;
    const int i = r / nq, q = r - i * nq;
    const T* ar = stage_a + (g * m + i) * lda;
    const T* bq = stage_b + g * b_stage_stride + q * JB;
    Acc acc[JB];
#pragma unroll
    for (int u = 0; u < JB; ++u) acc[u] = Acc(0);
    for (int kk = 0; kk < k; ++kk) {
      const Acc av = AccCvt<T, Acc>::to_acc(ar[kk]);
      const SmallRow<T, JB> bv = *reinterpret_cast<const SmallRow<T, JB>*>(bq + kk * n);
#pragma unroll
      for (int u = 0; u < JB; ++u)
        acc[u] = acc_add(acc[u], acc_mul(av, AccCvt<T, Acc>::to_acc(bv.v[u])));
    }
    SmallRow<T, JB> out;
#pragma unroll
    for (int u = 0; u < JB; ++u) out.v[u] = AccCvt<T, Acc>::from_acc(acc[u]);
    *reinterpret_cast<SmallRow<T, JB>*>(cb + (g * m + i) * n + q * JB) = out;
  }
}

}  // namespace skc
