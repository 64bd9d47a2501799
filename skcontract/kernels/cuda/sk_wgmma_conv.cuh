// sk_wgmma_conv.cuh: 2-D convolution as an implicit GEMM on the Wgmma family (the entry
// header of its im2col specs; sk_conv.cuh is the portable families'). The GEMM is the one
// sk_conv.cuh describes, m = (image, p, q), n = an output channel, with k = (r, s, channel
// block, c): each filter tap's channels are padded to whole BK-channel blocks, so the host
// plans K = R * S * ceil(C / BK) * BK and a k-tile is one tap's block of BK channels.
//
// The producer loads a k-tile's A with one TMA im2col load: the tile's BM output pixels
// (consecutive m: the map walks W, then H, then N by the convolution's strides inside the
// bounding box its corners set from the padding and the filter's extent), each shifted by
// the tap (s * dil_x, r * dil_y), channels [block * BK, block * BK + BK); taps in the
// padding and channels past C read as zeros. B's k-tile is the filters' box (BK channels,
// tap s, tap r, BN output channels) of a tiled 4-D map over (C, S, R, K). Both land in the
// K-major stage layout of sk_wgmma.cuh, whose consumers, fixups and epilogue run unchanged.
// One group only (the host sends grouped convolutions to the portable families).
#pragma once
#include "sk_wgmma.cuh"
#include "conv_shape.cuh"

namespace skc {

template <class Cfg>
struct Im2colTmaLoads {
  using Sm = WgmmaSmem<Cfg>;
  static_assert(Cfg::A_KMAJOR && Cfg::B_KMAJOR, "channels-last input, (K, R, S, C) filters");
  static_assert(Cfg::CLUSTER == 1, "convolutions run on single CTAs");
  static constexpr int part = 0;  // the cluster rank wgmma_gemm reads (no pairs)
  const TmaMap& map_a;
  const TmaMap& map_b;
  const ConvShape& cs;
  int cblocks;  // BK-channel blocks of one tap
  int n0 = 0, t0 = 0, image = 0, h0 = 0, w0 = 0;
  __device__ __forceinline__ void prefetch() const {
    tma_prefetch(map_a);
    tma_prefetch(map_b);
  }
  // the split's first output pixel, as the input position of its filter window's corner
  __device__ __forceinline__ void split(const Split& s) {
    const int pq = cs.P * cs.Q;
    image = s.m0 / pq;
    const int rem = s.m0 - image * pq, p = rem / cs.Q, q = rem - p * cs.Q;
    h0 = p * cs.stride_y - cs.pad_y;
    w0 = q * cs.stride_x - cs.pad_x;
    n0 = s.n0;
    t0 = s.k0 / Cfg::BK;  // splits start on k-tile boundaries
  }
  __device__ __forceinline__ void load(unsigned char* st, unsigned long long* bar, int kt) const {
    const int t = t0 + kt, block = t % cblocks, tap = t / cblocks;
    const int r = tap / cs.S, s = tap - r * cs.S, c = block * Cfg::BK;
    tma_load_im2col_4d(st, map_a, bar, c, w0, h0, image, (unsigned short)(s * cs.dil_x),
                       (unsigned short)(r * cs.dil_y));
    tma_load_4d(st + Sm::OA::STAGE_BYTES, map_b, bar, c, s, r, n0);
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma_conv(SKC_WGMMA_KERNEL_PARAMS, const __grid_constant__ ConvShape conv) {
  Im2colTmaLoads<Cfg> loads{map_a, map_b, conv, (conv.Cg + Cfg::BK - 1) / Cfg::BK};
  wgmma_gemm<Cfg>(loads, C, table, cta_offsets, ws, staging, locks, M, N, tile_order, ldc,
                  batch_c, alpha, beta, map_c, store_tma != 0);
}

}  // namespace skc
