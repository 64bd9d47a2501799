// merged_groups.cuh: a grouped convolution of few channels a group run with F groups merged
// into one (skcontract/kernels/merged_groups.py; the rule: skcontract/kernels/conv.py,
// merged_groups).
//
// The Wgmma convolution entry reads a group's channels in whole 64-channel k-tiles (one
// 128-byte swizzle row of 16-bit elements). A group of 4 - 16 channels (ResNeXt's) runs
// with F = 64 / Cg groups merged: a k-tile is F groups' channels of a tap, and the
// merged group's F Kg output channels are a tile's columns. merged_filters writes the merged
// groups' filters, (K, R, S, F Cg), each output channel's Cg channels at its group's place
// among the F and zeros at the others' (the zeros give every finite input's products with
// other groups' channels exactly 0).
//
// An infinite or NaN input channel meets those zeros (inf x 0 = NaN) and turns the outputs
// of the merged groups' other channels NaN at the pixels whose window holds it: every such
// output is non-finite, and every other keeps its own group's sum. So the kernel's consumers
// look over a finished tile's accumulators (Im2colTmaLoads::finish) and recompute each
// non-finite one from its own group's channels alone (merged_exact, float fmaf sums, a cost
// only tiles holding one pay): the output is then what the F groups computed apart give.
#pragma once
#include "sk_common.cuh"
#include "conv_shape.cuh"

namespace skc {

// out = the (K, R, S, F Cg) merged filters of the (K, Cg, R, S) filters w at element strides
// (sk, sc, sr, ss); Kg output channels a group, F groups merged, F Cg a multiple of 8 (a
// tap's row of 16-byte vectors: out is on 16 bytes). A thread writes a 16-byte vector: its
// row's group's channels where they fall in it, zeros around them.
template <class T>
__global__ void merged_filters(const T* __restrict__ w, T* __restrict__ out, int K, int Kg,
                               int Cg, int R, int S, int F, long long sk, long long sc,
                               long long sr, long long ss) {
  constexpr int E = 16 / (int)sizeof(T);  // elements of a vector
  static_assert(E == 8, "16-bit elements, packed in pairs into the vector's four words");
  const int per_row = F * Cg / E, taps = R * S, vectors = K * taps * per_row;
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors;
       v += gridDim.x * blockDim.x) {
    const int row = v / per_row, k = row / taps, rs = row - k * taps, r = rs / S,
              s = rs - r * S;
    const int c0 = (v - row * per_row) * E - (k / Kg) % F * Cg;  // its first channel's
    const T* src = w + k * sk + r * sr + s * ss;
    unsigned half[E];
#pragma unroll
    for (int e = 0; e < E; ++e)
      half[e] = c0 + e >= 0 && c0 + e < Cg ? src[(c0 + e) * sc].x : 0u;
    reinterpret_cast<uint4*>(out)[v] = make_uint4(half[0] | half[1] << 16, half[2] | half[3] << 16,
                                                  half[4] | half[5] << 16, half[6] | half[7] << 16);
  }
}

// Output channel n (of the merged group `batch`'s group_k) at output pixel m, from its own
// group's Cg = cs.Cg / cs.merged channels: the input x (channels-last, cs's strides) and
// the merged filters w (rows ldb apart; a tap's cs.Cg channels, the group's at f Cg).
template <class T>
__device__ __noinline__ float merged_exact(const T* __restrict__ x, const T* __restrict__ w,
                                           long long ldb, const ConvShape& cs, int batch,
                                           long long group_c, long long group_k, int m, int n) {
  const int cg = cs.Cg / cs.merged, kg = (int)(group_k / cs.merged), f = n / kg;
  const int pq = cs.P * cs.Q, img = m / pq, rem = m - img * pq, p = rem / cs.Q,
            q = rem - p * cs.Q;
  const T* xg = x + img * cs.stride_n + batch * group_c + (long long)f * cg;
  const T* wn = w + (batch * group_k + n) * ldb + (long long)f * cg;
  float acc = 0.0f;
  for (int r = 0; r < cs.R; ++r) {
    const int h = p * cs.stride_y - cs.pad_y + r * cs.dil_y;
    for (int s = 0; s < cs.S; ++s) {
      const int wi = q * cs.stride_x - cs.pad_x + s * cs.dil_x;
      // a tap in the padding reads zeros, as the kernel's loads do: its products are 0,
      // or NaN where the filter holds an infinity or a NaN
      const bool inside = h >= 0 && h < cs.H && wi >= 0 && wi < cs.W;
      const T* px = xg + (inside ? h * cs.stride_h + wi * cs.stride_w : 0);
      const T* pw = wn + (long long)(r * cs.S + s) * cs.Cg;
      for (int c = 0; c < cg; ++c)
        acc = fmaf(inside ? Cvt<T>::to_f32(px[c]) : 0.0f, Cvt<T>::to_f32(pw[c]), acc);
    }
  }
  return acc;
}

}  // namespace skc
