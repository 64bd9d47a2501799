// depthwise.cuh: depthwise convolutions, one filter a channel (skcontract/kernels/depthwise.py):
// out[n][c][p][q] = bias[c] + sum_{i, j} x[n][c][p * sh - pt + i * dh][q * sw - pl + j * dw]
// * w[c][i][j], taps outside the image read as zeros. An implicit GEMM runs such a
// convolution as one GEMM a channel of one output column, all padding; it is memory-bound,
// and here a thread computes one output element from its taps, accumulated in Acc (float for
// 16-bit and float32 data, double for float64), and rounds it once. Consecutive threads take
// consecutive channels where the output is channels-last (channels_fast), else consecutive
// columns, so the input's and the output's accesses are coalesced for either layout; a tap
// read by neighbouring outputs comes from L1 / L2. Any element strides (NCHW, NHWC, views).
#pragma once

#include "sk_common.cuh"

namespace skc {

constexpr int DEPTHWISE_THREADS = 256;

// The accumulator of T: float, double for double (as the GEMM kernels accumulate).
template <class T> struct DepthwiseAcc { using type = float; };
template <> struct DepthwiseAcc<double> { using type = double; };

// Sizes and steps; strides in elements: x (n, c, h, w), w (c, r, s), out (n, c, p, q).
template <class T>
__global__ void __launch_bounds__(DEPTHWISE_THREADS)
depthwise(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
          T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int r, int s,
          int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
          long long sxn, long long sxc, long long sxh, long long sxw, long long swc,
          long long swr, long long sws, long long son, long long soc, long long sop,
          long long soq, int channels_fast, int has_bias) {
  using Acc = typename DepthwiseAcc<T>::type;
  using Cv = AccCvt<T, Acc>;
  const int total = n * c * p * q;  // below 2^31 (the host checks)
  for (int t = blockIdx.x * DEPTHWISE_THREADS + threadIdx.x; t < total;
       t += gridDim.x * DEPTHWISE_THREADS) {
    int ch, oq, op, nn;
    if (channels_fast) {
      ch = t % c;
      int rest = t / c;
      oq = rest % q;
      rest /= q;
      op = rest % p;
      nn = rest / p;
    } else {
      oq = t % q;
      int rest = t / q;
      op = rest % p;
      rest /= p;
      ch = rest % c;
      nn = rest / c;
    }
    const T* xc = x + nn * sxn + ch * sxc;
    const T* wc = w + ch * swc;
    Acc acc = has_bias ? Cv::to_acc(bias[ch]) : Acc(0);
    const int ih0 = op * stride_h - pad_top, iw0 = oq * stride_w - pad_left;
    for (int i = 0; i < r; ++i) {
      const int ih = ih0 + i * dil_h;
      if (ih < 0 || ih >= h) continue;
      for (int j = 0; j < s; ++j) {
        const int iw = iw0 + j * dil_w;
        if (iw < 0 || iw >= wd) continue;
        acc += Cv::to_acc(xc[ih * sxh + iw * sxw]) * Cv::to_acc(wc[i * swr + j * sws]);
      }
    }
    out[nn * son + ch * soc + op * sop + oq * soq] = Cv::from_acc(acc);
  }
}

}  // namespace skc
