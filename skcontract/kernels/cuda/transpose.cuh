// transpose.cuh: a batch of matrices copied into column-major order (skcontract/kernels/
// relayout.py): x (batch, rows, cols) at any element strides into dense column-major
// matrices, out[b][c * rows + r] = x[b][r][c]. The tf32 Wgmma entries read their operands
// K-major only, and a row-major B (k x n, n contiguous) is copied so first (a column-major A
// too, as the copy of its transpose); so are int8 operands; and a convolution's NCHW input
// is copied to NHWC, its NHWC result back to NCHW, each image one matrix. An element-wise
// copy of a transpose reads or writes with a stride; here a CTA moves a TILE x TILE block
// through shared memory, so a warp reads TILE consecutive columns of one row and writes
// TILE consecutive rows of one column (the padded pitch keeps both sides free of bank
// conflicts for 4-byte elements). Grid: (row blocks x column blocks, batch), the column
// block fastest; blocks of TILE x ROWS threads, each thread TILE / ROWS elements.
#pragma once

namespace skc {

// The TILE x TILE block of x a CTA moves (blockIdx.x: row block x column blocks + column
// block) and its batch's matrices (blockIdx.y): the first row and column, x's and out's.
template <class T, int TILE>
struct TransposeBlock {
  int r0, c0;
  const T* xb;
  T* ob;
  __device__ __forceinline__ TransposeBlock(const T* x, T* out, int rows, int cols,
                                            long long sb) {
    const int col_blocks = (cols + TILE - 1) / TILE;
    r0 = (int)(blockIdx.x / col_blocks) * TILE;
    c0 = (int)(blockIdx.x % col_blocks) * TILE;
    xb = x + (long long)blockIdx.y * sb;
    ob = out + (long long)blockIdx.y * rows * cols;
  }
};

constexpr int TRANSPOSE_TILE = 32;
constexpr int TRANSPOSE_ROWS = 8;

template <class T>
__global__ void __launch_bounds__(TRANSPOSE_TILE * TRANSPOSE_ROWS)
transpose_copy(const T* __restrict__ x, T* __restrict__ out, int rows, int cols,
               long long sb, long long sr, long long sc) {
  __shared__ T block[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
  const TransposeBlock<T, TRANSPOSE_TILE> at(x, out, rows, cols, sb);
  const int tx = threadIdx.x % TRANSPOSE_TILE, ty = threadIdx.x / TRANSPOSE_TILE;
#pragma unroll
  for (int j = ty; j < TRANSPOSE_TILE; j += TRANSPOSE_ROWS) {
    const int r = at.r0 + j, c = at.c0 + tx;
    if (r < rows && c < cols) block[j][tx] = at.xb[r * sr + c * sc];
  }
  __syncthreads();
#pragma unroll
  for (int j = ty; j < TRANSPOSE_TILE; j += TRANSPOSE_ROWS) {
    const int c = at.c0 + j, r = at.r0 + tx;
    if (r < rows && c < cols) at.ob[(long long)c * rows + r] = block[tx][j];
  }
}

// The same copy for 2- and 4-byte elements in 16-byte vectors, where x's rows are
// contiguous (sc == 1) and 16-byte aligned and rows and cols are multiples of a vector's
// elements (the host checks: relayout.py): a CTA moves a VEC_TILE x VEC_TILE block, each
// thread LOADS vectors of a row in and as many of a column out, all its loads issued before
// its first shared-memory store, so an SM keeps more bytes in flight than the element copy
// above does.
constexpr int TRANSPOSE_VEC_TILE = 64;
constexpr int TRANSPOSE_VEC_THREADS = 256;

template <class T>
__global__ void __launch_bounds__(TRANSPOSE_VEC_THREADS)
transpose_copy_vec(const T* __restrict__ x, T* __restrict__ out, int rows, int cols,
                   long long sb, long long sr) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16-byte vectors of 2- or 4-byte elements");
  constexpr int TILE = TRANSPOSE_VEC_TILE, V = 16 / (int)sizeof(T), PER_ROW = TILE / V;
  constexpr int LOADS = TILE * TILE / V / TRANSPOSE_VEC_THREADS;
  union Vec {
    uint4 q;
    T e[V];
  };
  __shared__ T block[TILE][TILE + 1];
  const TransposeBlock<T, TILE> at(x, out, rows, cols, sb);
  Vec in[LOADS];
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int idx = threadIdx.x + i * TRANSPOSE_VEC_THREADS;
    const int r = at.r0 + idx / PER_ROW, c = at.c0 + (idx % PER_ROW) * V;
    if (r < rows && c < cols)
      in[i].q = *reinterpret_cast<const uint4*>(at.xb + (long long)r * sr + c);
  }
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int idx = threadIdx.x + i * TRANSPOSE_VEC_THREADS;
    const int j = idx / PER_ROW, v = (idx % PER_ROW) * V;
    if (at.r0 + j < rows && at.c0 + v < cols) {
#pragma unroll
      for (int t = 0; t < V; ++t) block[j][v + t] = in[i].e[t];
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int idx = threadIdx.x + i * TRANSPOSE_VEC_THREADS;
    const int j = idx / PER_ROW, v = (idx % PER_ROW) * V;
    const int c = at.c0 + j, r = at.r0 + v;
    if (r < rows && c < cols) {
      Vec o;
#pragma unroll
      for (int t = 0; t < V; ++t) o.e[t] = block[v + t][j];
      *reinterpret_cast<uint4*>(at.ob + (long long)c * rows + r) = o.q;
    }
  }
}

}  // namespace skc
