// transpose.cuh: a batch of matrices copied into column-major order (skcontract/kernels/
// relayout.py): x (batch, rows, cols) at any element strides into dense column-major
// matrices, out[b][c * rows + r] = x[b][r][c]. The tf32 Wgmma entries read their operands
// K-major only, and a row-major B (k x n, n contiguous) is copied so first (a column-major A
// too, as the copy of its transpose); so are int8 operands. An element-wise copy of a
// transpose reads or writes with a stride; here a CTA moves a TILE x TILE block through
// shared memory, so a warp reads TILE consecutive columns of one row and writes TILE
// consecutive rows of one column (the padded pitch keeps both sides free of bank
// conflicts). Grid: (row blocks x column blocks, batch), the column block fastest; blocks
// of TILE x ROWS threads, each thread TILE / ROWS elements.
#pragma once

namespace skc {

constexpr int TRANSPOSE_TILE = 32;
constexpr int TRANSPOSE_ROWS = 8;

template <class T>
__global__ void __launch_bounds__(TRANSPOSE_TILE * TRANSPOSE_ROWS)
transpose_copy(const T* __restrict__ x, T* __restrict__ out, int rows, int cols,
               long long sb, long long sr, long long sc) {
  __shared__ T block[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
  const int col_blocks = (cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
  const int r0 = (int)(blockIdx.x / col_blocks) * TRANSPOSE_TILE;
  const int c0 = (int)(blockIdx.x % col_blocks) * TRANSPOSE_TILE;
  const T* xb = x + (long long)blockIdx.y * sb;
  T* ob = out + (long long)blockIdx.y * rows * cols;
  const int tx = threadIdx.x % TRANSPOSE_TILE, ty = threadIdx.x / TRANSPOSE_TILE;
#pragma unroll
  for (int j = ty; j < TRANSPOSE_TILE; j += TRANSPOSE_ROWS) {
    const int r = r0 + j, c = c0 + tx;
    if (r < rows && c < cols) block[j][tx] = xb[r * sr + c * sc];
  }
  __syncthreads();
#pragma unroll
  for (int j = ty; j < TRANSPOSE_TILE; j += TRANSPOSE_ROWS) {
    const int c = c0 + j, r = r0 + tx;
    if (r < rows && c < cols) ob[(long long)c * rows + r] = block[tx][j];
  }
}

}  // namespace skc
