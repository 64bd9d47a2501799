// fold_copy.cuh: the input copy of a folded convolution (FoldedTaps in
// skcontract/kernels/conv.py; skcontract/ops/conv2d_gpu.py, folded_copies), and of any
// channels-last 4-D array of 16-bit elements padded the same way: an (N, H, W, C) array at
// any strides into dense (N, H, WIDTH, CH) rows, LEFT zero pixels before each row's W
// pixels, zeros after them and past C channels. One thread writes one pixel's CH elements
// with one store (a 16-byte vector for 8 channels), so the copy reads the array once and
// writes its rows once, where a pad through the array library writes them twice.
#pragma once

namespace skc {

template <int CH>
struct alignas(2 * CH < 16 ? 2 * CH : 16) FoldPixel {
  unsigned short v[CH];
};

template <int CH>
__global__ void fold_copy(const unsigned short* __restrict__ x, FoldPixel<CH>* __restrict__ out,
                          long long pixels, int H, int W, int C, int width, int left,
                          long long sn, long long sh, long long sw, long long sc) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < pixels; p += step) {
    const long long row = p / width;
    const int w = (int)(p - row * width) - left;
    const long long n = row / H;
    const int h = (int)(row - n * H);
    const bool inside = w >= 0 && w < W;
    const unsigned short* src = x + n * sn + h * sh + (long long)(inside ? w : 0) * sw;
    FoldPixel<CH> px;
#pragma unroll
    for (int c = 0; c < CH; ++c) px.v[c] = (inside && c < C) ? src[c * sc] : (unsigned short)0;
    out[p] = px;
  }
}

}  // namespace skc
