// complex_embed.cuh: a complex matrix product run as a real one (skcontract/kernels/embed.py).
//
// With A (m x k complex) read as the real m x 2k matrix of its interleaved (re, im) pairs,
// and C (m x n) as m x 2n, C = A B is the real product C_r = A_r W^T where W (2n x 2k,
// row-major: the real B' read K-major) holds each element b = B[p][q] as the 2 x 2 block
//
//     W[2q    ][2p] = re b     W[2q    ][2p + 1] = -im b
//     W[2q + 1][2p] = im b     W[2q + 1][2p + 1] =  re b
//
// (row 2q is conj(b) read as a pair, row 2q + 1 is i conj(b)): C_r[i][2q] = sum_p
// re a re b - im a im b and C_r[i][2q + 1] = sum_p re a im b + im a re b. Four real
// multiply-adds per complex one, as the complex product has, in one real GEMM that the
// float32 (3xTF32, tf32, FFMA) and float64 (DMMA) kernels run under their Stream-K schedules.
//
// Conjugated operands cost nothing: conj(B) is B with im b negated, and conj(A) B is
// conj(A conj(B)), whose block (of b' = conj(b)'s, its imaginary output row negated) is
//
//     W[2q    ][2p] = re b     W[2q    ][2p + 1] = im b
//     W[2q + 1][2p] = im b     W[2q + 1][2p + 1] = -re b
//
// complex_embed writes W from X (k x cols complex, any element strides: B, or A^T for the
// transposed product C^T = B^T A^T) for a batch of matrices. A CTA moves a TILE x TILE block
// of X through shared memory: its warps read TILE elements along X's contiguous axis
// (p_fast: along k, else along cols) and write TILE consecutive (re, im) pairs along a row of
// W, so both sides are coalesced. Grid: (k blocks x col blocks, batch), the col block fastest.
#pragma once

namespace skc {

constexpr int EMBED_TILE = 32;
constexpr int EMBED_ROWS = 8;

template <class T> struct ComplexOf;
template <> struct ComplexOf<float> { using type = float2; };
template <> struct ComplexOf<double> { using type = double2; };

template <class T, class T2>
__device__ __forceinline__ T2 pair_of(T x, T y) {
  T2 v;
  v.x = x;
  v.y = y;
  return v;
}

// w[b][2q][2p .. 2p + 1] and w[b][2q + 1][2p .. 2p + 1] from x[b][p][q] (the blocks above;
// conj_read: the read operand is conjugated, conj_embedded: x is);
// sb, sk, sq: x's batch, k and cols strides in complex elements; ldw: W's row stride and wb
// its batch stride, in real elements (ldw even: rows of pairs on 8 or 16 bytes).
template <class T>
__global__ void __launch_bounds__(EMBED_TILE * EMBED_ROWS)
complex_embed(const typename ComplexOf<T>::type* __restrict__ x, T* __restrict__ w, int k,
              int cols, long long sb, long long sk, long long sq, long long ldw, long long wb,
              int p_fast, int conj_read, int conj_embedded) {
  using T2 = typename ComplexOf<T>::type;
  __shared__ T2 block[EMBED_TILE][EMBED_TILE + 1];  // [q - q0][p - p0]
  const int col_blocks = (cols + EMBED_TILE - 1) / EMBED_TILE;
  const int p0 = (int)(blockIdx.x / col_blocks) * EMBED_TILE;
  const int q0 = (int)(blockIdx.x % col_blocks) * EMBED_TILE;
  const T2* xb = x + (long long)blockIdx.y * sb;
  T* wb_ = w + (long long)blockIdx.y * wb;
  const int tx = threadIdx.x % EMBED_TILE, ty = threadIdx.x / EMBED_TILE;
#pragma unroll
  for (int j = ty; j < EMBED_TILE; j += EMBED_ROWS) {
    const int dp = p_fast ? tx : j, dq = p_fast ? j : tx;
    const int p = p0 + dp, q = q0 + dq;
    if (p < k && q < cols) block[dq][dp] = xb[(long long)p * sk + (long long)q * sq];
  }
  __syncthreads();
#pragma unroll
  for (int j = ty; j < EMBED_TILE; j += EMBED_ROWS) {
    const int q = q0 + j, p = p0 + tx;
    if (p < k && q < cols) {
      const T2 b = block[j][tx];
      const T im = conj_embedded ? -b.y : b.y, s = conj_read ? T(-1) : T(1);
      T* row = wb_ + (long long)(2 * q) * ldw + 2 * p;
      *reinterpret_cast<T2*>(row) = pair_of<T, T2>(b.x, -s * im);
      *reinterpret_cast<T2*>(row + ldw) = pair_of<T, T2>(im, s * b.x);
    }
  }
}

}  // namespace skc
