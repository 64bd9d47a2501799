// depthwise.cuh: depthwise convolutions, one filter a channel (skcontract/kernels/depthwise.py):
// out[n][c][p][q] = bias[c] + sum_{i, j} x[n][c][p * sh - pt + i * dh][q * sw - pl + j * dw]
// * w[c][i][j], taps outside the image read as zeros. An implicit GEMM runs such a
// convolution as one GEMM a channel of one output column, all padding; it is memory-bound,
// and here a thread computes one output element from its taps, accumulated in Acc (float for
// 16-bit and float32 data, double for float64), and rounds it once. Consecutive threads take
// consecutive channels where the output is channels-last (channels_fast), else consecutive
// columns, so the input's and the output's accesses are coalesced for either layout; a tap
// read by neighbouring outputs comes from L1 / L2. Any element strides (NCHW, NHWC, views).
//
// depthwise_vec is the channels-last kernel where the channels lie on 16 bytes (the host
// checks: channels contiguous in the input and the output, C and every other stride a
// multiple of the 16-byte vector, both pointers on 16 bytes). A thread computes a strip of
// DEPTHWISE_STRIP output columns of one vector of channels: each tap's input vector is one
// 16-byte load, each tap's weights are read once a strip, and the index arithmetic is done
// once a strip, not once an element.
#pragma once

#include "sk_common.cuh"

namespace skc {

constexpr int DEPTHWISE_THREADS = 256;
// Output columns a thread of depthwise_vec computes: four amortise a tap's weight loads over
// four input loads while the accumulators (4 x 8 floats for 16-bit data) stay in registers.
constexpr int DEPTHWISE_STRIP = 4;

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

// 16 bytes of T as the vector depthwise_vec loads and stores.
template <class T> struct alignas(16) DepthwiseVec {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

// Sizes and steps as depthwise's; strides in elements, all but the channels' (1).
template <class T>
__global__ void __launch_bounds__(DEPTHWISE_THREADS)
depthwise_vec(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
              T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int r, int s,
              int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
              long long sxn, long long sxh, long long sxw, long long swc, long long swr,
              long long sws, long long son, long long sop, long long soq, int has_bias) {
  using Acc = typename DepthwiseAcc<T>::type;
  using Cv = AccCvt<T, Acc>;
  using Vec = DepthwiseVec<T>;
  constexpr int V = Vec::N;
  constexpr int QT = DEPTHWISE_STRIP;
  const int groups = c / V, strips = (q + QT - 1) / QT;
  const long long total = (long long)n * p * strips * groups;
  for (long long t = (long long)blockIdx.x * DEPTHWISE_THREADS + threadIdx.x; t < total;
       t += (long long)gridDim.x * DEPTHWISE_THREADS) {
    const int g = (int)(t % groups);
    long long rest = t / groups;
    const int oq0 = (int)(rest % strips) * QT;
    rest /= strips;
    const int op = (int)(rest % p), nn = (int)(rest / p);
    const int ch0 = g * V;
    Acc acc[QT][V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const Acc b0 = has_bias ? Cv::to_acc(bias[ch0 + v]) : Acc(0);
#pragma unroll
      for (int u = 0; u < QT; ++u) acc[u][v] = b0;
    }
    const T* xn = x + nn * sxn + ch0;
    const T* wg = w + ch0 * swc;
    const int ih0 = op * stride_h - pad_top, iw0 = oq0 * stride_w - pad_left;
    for (int i = 0; i < r; ++i) {
      const int ih = ih0 + i * dil_h;
      if (ih < 0 || ih >= h) continue;
      const T* xrow = xn + ih * sxh;
      for (int j = 0; j < s; ++j) {
        Acc wv[V];
#pragma unroll
        for (int v = 0; v < V; ++v) wv[v] = Cv::to_acc(wg[v * swc + i * swr + j * sws]);
#pragma unroll
        for (int u = 0; u < QT; ++u) {
          const int iw = iw0 + u * stride_w + j * dil_w;
          if (oq0 + u >= q || iw < 0 || iw >= wd) continue;
          const Vec in = *reinterpret_cast<const Vec*>(xrow + iw * sxw);
#pragma unroll
          for (int v = 0; v < V; ++v) acc[u][v] += Cv::to_acc(in.v[v]) * wv[v];
        }
      }
    }
    T* on = out + nn * son + op * sop + ch0;
#pragma unroll
    for (int u = 0; u < QT; ++u) {
      if (oq0 + u >= q) break;
      Vec res;
#pragma unroll
      for (int v = 0; v < V; ++v) res.v[v] = Cv::from_acc(acc[u][v]);
      *reinterpret_cast<Vec*>(on + (oq0 + u) * soq) = res;
    }
  }
}

}  // namespace skc
