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
// tap s, tap r, BN output channels) of a tiled 4-D map over (C / groups, S, R, K). Both land
// in the K-major stage layout of sk_wgmma.cuh, whose consumers, fixups and epilogue run
// unchanged.
// A grouped convolution's groups are the GEMM's batch: a batch's k-tiles read its group's
// channels [batch * group_c, + group_c) of the input (group_c a multiple of BK) against its
// filters' rows [batch * group_k, + group_k), and its tiles are those columns of the output
// (batch_c, which the epilogue applies). Groups of fewer channels run merged, F to a group
// of BK channels (merged_groups.cuh): then the consumers recompute a finished tile's
// non-finite outputs from their own groups' channels (finish) before the store.
//
// A folded convolution (FoldedTaps, skcontract/kernels/conv.py) reads whole channel blocks
// although only its first cs.extent channels a pixel hold its data: past them lie the next
// column's pixels, facing zero weights (zero times an infinite input would be NaN). Reading
// the whole block keeps the TMA on full 128-byte rows; each consumer warpgroup zeros the
// elements past the extent in its rows of the landed stage before its wgmmas read them
// (sk_wgmma.cuh, mask_stage).
#pragma once
#include "sk_wgmma.cuh"
#include "conv_shape.cuh"
#include "merged_groups.cuh"

namespace skc {

template <class Cfg>
struct Im2colTmaLoads {
  using Sm = WgmmaSmem<Cfg>;
  static_assert(Cfg::A_KMAJOR && Cfg::B_KMAJOR, "channels-last input, (K, R, S, C) filters");
  static_assert(Cfg::CLUSTER == 1, "convolutions run on single CTAs");
  static_assert(Cfg::SMALL_BN == 0, "convolutions run one tile shape (no HyTiS rows)");
  static constexpr int part = 0;  // the cluster rank wgmma_gemm reads (no pairs)
  static constexpr bool MASKS = Cfg::MASKS_STAGES;  // (the host's Wgmma.masks_stages)
  static constexpr int CHUNKS = SWIZZLE_ROW_BYTES / 16;  // 16-byte chunks of a k-tile row
  const TmaMap& map_a;
  const TmaMap& map_b;
  const ConvShape& cs;
  long long group_c, group_k;  // a batch's (group's) input channels and output channels
  // the input and the filters (rows ldb apart), which finish reads
  const typename Cfg::TIn* x;
  const typename Cfg::TIn* w;
  long long ldb;
  int n0 = 0, c0 = 0, image = 0, h0 = 0, w0 = 0;
  // The next k-tile's channel block and filter tap (r, s): the producer steps them k-tile by
  // k-tile, since the divisions that would find them from the k-tile's index, three a k-tile
  // in the one thread that issues every load, hold up its loads.
  int block = 0, tap_r = 0, tap_s = 0;
  // BK-channel blocks of one tap (from the parameter, so that no register holds it)
  __device__ __forceinline__ int cblocks() const { return (cs.Cg + Cfg::BK - 1) / Cfg::BK; }
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
    n0 = (int)(s.batch * group_k) + s.n0;
    c0 = (int)(s.batch * group_c);
    const int t0 = s.k0 / Cfg::BK, tap = t0 / cblocks();  // splits start on k-tile boundaries
    block = t0 - tap * cblocks();
    tap_r = tap / cs.S;
    tap_s = tap - tap_r * cs.S;
  }
  // Whether this launch's stages need the mask: a folded convolution's (cs.extent > 0).
  __device__ __forceinline__ bool masks() const { return cs.extent != 0; }
  // The first 16-byte chunk past the pixel's extent of the rows of K's k-tile t (CHUNKS:
  // none): k-tiles walk a tap's channel blocks, then the taps.
  __device__ __forceinline__ int masked_from(int t) const {
    const int left = cs.extent - (t % cblocks()) * Cfg::BK;  // elements that hold data
    if (left >= Cfg::BK) return CHUNKS;
    return left <= 0 ? 0 : left * (int)sizeof(typename Cfg::TIn) / 16;
  }
  // Zero chunks [from, CHUNKS) of row r of the landed A box at shared address st (the
  // 128-byte swizzle puts chunk c of row r at c ^ (r % 8)).
  __device__ __forceinline__ static void mask(unsigned st, int r, int from) {
    const unsigned row_at = st + r * SWIZZLE_ROW_BYTES;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
      if (c >= from)
        asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n"
                     ::"r"(row_at + ((c ^ (r & 7)) << 4)), "r"(0) : "memory");
  }
  // k-tile kt of the split (kt = 0, 1, ... in turn): k-tiles walk a tap's channel blocks,
  // then the taps.
  __device__ __forceinline__ void load(unsigned char* st, unsigned long long* bar, int) {
    const int c = block * Cfg::BK;
    tma_load_im2col_4d(st, map_a, bar, c0 + c, w0, h0, image, (unsigned short)(tap_s * cs.dil_x),
                       (unsigned short)(tap_r * cs.dil_y));
    tma_load_4d(st + Sm::OA::STAGE_BYTES, map_b, bar, c, tap_s, tap_r, n0);
    if (++block == cblocks()) {
      block = 0;
      if (++tap_s == cs.S) {
        tap_s = 0;
        ++tap_r;
      }
    }
  }

  // A consumer's touch-up of its finished tile before the store: a merged convolution's
  // non-finite outputs, recomputed from their own groups' channels (merged_groups.cuh). Only
  // the merged kernels (Cfg::MERGED_GROUPS) hold the recomputation: its registers and code
  // would slow every other convolution's mainloop.
  template <int NACC>
  __device__ __forceinline__ void finish(const Split& s, typename Cfg::Acc (&acc)[NACC]) const {
    if constexpr (Cfg::MERGED_GROUPS) {
#pragma unroll
      for (int i = 0; i < NACC; ++i) {
        if (isfinite((float)acc[i])) continue;
        int r, c;
        Cfg::ML::coord(threadIdx.x, i, r, c);
        const int m = s.mw + r, n = s.nw + c;
        if (m >= s.m0 && m < s.m_end && n >= s.n0 && n < s.n_end)
          acc[i] = merged_exact(x, w, ldb, cs, s.batch, group_c, group_k, m, n);
      }
    }
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma_conv(SKC_WGMMA_KERNEL_PARAMS, const __grid_constant__ ConvShape conv) {
  // a folded convolution on an entry that cannot mask would be silently wrong: the host
  // never launches one (resolve_gemm's masked), and the kernel refuses it
  if (!Cfg::MASKS_STAGES && conv.extent != 0) __trap();
  // a merged convolution runs on the merged kernels alone, whose finish needs each tile's
  // finished sum in its consumers' registers (the host's specs.MERGED_PROTOCOLS)
  static_assert(!Cfg::MERGED_GROUPS || Cfg::REDUCTION == REDUCTION_NONE ||
                    Cfg::REDUCTION == REDUCTION_DETERMINISTIC,
                "merged groups: a fixup that leaves the tile's sum in registers");
  if ((conv.merged > 1) != Cfg::MERGED_GROUPS) __trap();
  Im2colTmaLoads<Cfg> loads{map_a, map_b, conv, batch_a, batch_c, A, B, ldb};
  wgmma_gemm<Cfg>(loads, C, table, cta_offsets, ws, staging, locks, M, N, tile_order, ldc,
                  batch_c, alpha, beta, map_c, store_tma != 0);
}

}  // namespace skc
