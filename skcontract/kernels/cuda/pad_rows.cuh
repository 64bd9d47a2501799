// pad_rows.cuh: lines of contiguous elements copied into dense lines padded to 16 bytes
// (skcontract/kernels/pad_rows.py): x, a batch of `rows`-line matrices whose lines hold
// `cols` contiguous elements (batch and line strides sb, sr, in elements), into
// out[line * ld + c], ld >= cols. The kernels that read operands by TMA need every line
// on 16 bytes; an operand whose lines miss them (K = 197 float16 elements, 394 bytes) is
// copied so first. A line's start then lies on any element, so a thread moves one element
// at a time: a warp copies one line, its lanes 32 consecutive elements a step, PAD_UNROLL
// steps in flight. The columns from `cols` to `ld` are not written (the reads stop at
// `cols`).
#pragma once

namespace skc {

constexpr int PAD_THREADS = 256;
constexpr int PAD_WARPS = PAD_THREADS / 32;
constexpr int PAD_UNROLL = 8;

template <class T>
__global__ void __launch_bounds__(PAD_THREADS)
pad_rows_copy(const T* __restrict__ x, T* __restrict__ out, long long lines, int rows,
              int cols, int ld, long long sb, long long sr) {
  const int lane = threadIdx.x & 31;
  const long long step = (long long)gridDim.x * PAD_WARPS;
  for (long long line = (long long)blockIdx.x * PAD_WARPS + (threadIdx.x >> 5); line < lines;
       line += step) {
    const long long b = line / rows, r = line - b * rows;
    const T* src = x + b * sb + r * sr;
    T* dst = out + line * ld;
#pragma unroll PAD_UNROLL
    for (int c = lane; c < cols; c += 32) dst[c] = src[c];
  }
}

}  // namespace skc
