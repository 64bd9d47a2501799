// sk_scheduler.cuh: the device side of "the schedule is data".
// A CTA walks rows cta_offsets[cta] .. cta_offsets[cta+1] of the split table written by
// skcontract/schedule (table.py documents the columns and is the one definition of the
// enums below; a CPU test checks they agree). A range row stands for whole tiles named by
// their position in the tile walk; decode_tile turns a position into the tile's origin with
// the arithmetic of skcontract/schedule/swizzle.py (tile_coords), the one decoding the host
// also does. No decomposition arithmetic here.
#pragma once
#include "sk_common.cuh"

namespace skc {

enum : int { COL_BATCH = 0, COL_M0, COL_N0, COL_BM, COL_BN, COL_K0, COL_K1, COL_FLAGS, COL_TILE,
             COL_SLOT, COL_PEERS, COL_SPLIT, NUM_COLUMNS };
enum : int { FLAG_FIRST = 1, FLAG_FINAL = 2, FLAG_SMALL = 4, FLAG_SHARED_SUM = 8, FLAG_RANGE = 16 };
enum : int { COL_RANGE_FIRST = COL_M0, COL_RANGE_COUNT = COL_N0, COL_RANGE_STRIDE = COL_BM };
// The tile walk a kernel receives (table.tile_order_code): log2 of the swizzle band width in
// the low bits, RASTER_M_BIT set when the walk runs along M.
enum : int { RASTER_M_BIT = 8 };

struct Split {
  int batch, m0, n0, m_end, n_end, k0, k1, flags, tile, slot, peers, split;
  // Origin of the window the mainloop computes: the tile's, unless the kernel shifts an edge
  // tile back inside the operands (sk_gemm.cuh, window_origin); the epilogue stores only
  // [m0, m_end) x [n0, n_end) of it.
  int mw, nw;
  __device__ __forceinline__ bool first() const { return flags & FLAG_FIRST; }
  __device__ __forceinline__ bool final_() const { return flags & FLAG_FINAL; }
  __device__ __forceinline__ bool shared_sum() const { return flags & FLAG_SHARED_SUM; }
  // A split that is both first and final owns its tile: no fixup.
  __device__ __forceinline__ bool owns_tile() const { return (flags & 3) == 3 || tile < 0; }
};

__device__ __forceinline__ Split load_split(const int* __restrict__ table, int row, int M, int N) {
  const int* r = table + (long long)row * NUM_COLUMNS;
  Split s;
  s.batch = __ldg(r + COL_BATCH);
  s.m0 = __ldg(r + COL_M0);
  s.n0 = __ldg(r + COL_N0);
  s.m_end = min(M, s.m0 + __ldg(r + COL_BM));   // HyTiS rows may carry a smaller tile
  s.n_end = min(N, s.n0 + __ldg(r + COL_BN));
  s.k0 = __ldg(r + COL_K0);
  s.k1 = __ldg(r + COL_K1);
  s.flags = __ldg(r + COL_FLAGS);
  s.tile = __ldg(r + COL_TILE);
  s.slot = __ldg(r + COL_SLOT);
  s.peers = __ldg(r + COL_PEERS);
  s.split = __ldg(r + COL_SPLIT);
  s.mw = s.m0;
  s.nw = s.n0;
  return s;
}

// Tile position t of the batch-major, swizzled walk over a tm x tn grid of tiles: its batch
// entry and tile row / column.
__device__ __forceinline__ void decode_tile(int t, int tm, int tn, int tile_order, int& batch,
                                            int& mi, int& ni) {
  const int per = tm * tn;
  batch = t / per;
  const int r = t - batch * per;
  const bool along_m = (tile_order >> RASTER_M_BIT) & 1;
  const int minor_count = along_m ? tn : tm, major_count = along_m ? tm : tn;
  const int width = min(1 << (tile_order & ((1 << RASTER_M_BIT) - 1)), minor_count);
  const int band_tiles = width * major_count, full_bands = minor_count / width;
  const int band = r / band_tiles, in_band = r - band * band_tiles;
  const int w = max(band < full_bands ? width : minor_count - full_bands * width, 1);
  const int minor = band * width + in_band % w, major = in_band / w;
  mi = along_m ? major : minor;
  ni = along_m ? minor : major;
}

// Tile j of range row r: a whole tile, one split, no fixup.
template <int BM, int BN>
__device__ __forceinline__ Split range_tile(const int* __restrict__ r, int j, int M, int N,
                                            int tile_order) {
  const int t = __ldg(r + COL_RANGE_FIRST) + j * __ldg(r + COL_RANGE_STRIDE);
  int batch, mi, ni;
  decode_tile(t, (M + BM - 1) / BM, (N + BN - 1) / BN, tile_order, batch, mi, ni);
  Split s;
  s.batch = batch;
  s.m0 = mi * BM;
  s.n0 = ni * BN;
  s.m_end = min(M, s.m0 + BM);
  s.n_end = min(N, s.n0 + BN);
  s.k0 = 0;
  s.k1 = __ldg(r + COL_K1);
  s.flags = FLAG_FIRST | FLAG_FINAL;
  s.tile = -1;
  s.slot = -1;
  s.peers = 1;
  s.split = 0;
  s.mw = s.m0;
  s.nw = s.n0;
  return s;
}

// A table row's columns into L1 (the lines of its first and last column).
__device__ __forceinline__ void prefetch_row(const int* r) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(r));
  asm volatile("prefetch.global.L1 [%0];" ::"l"(r + NUM_COLUMNS - 1));
}

__device__ __forceinline__ int ld_nc_volatile(const int* p) {
  int v;
  asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// What a walk runs before its first split's body (Entry): nothing, or the kernel's entry into
// the stream (fixup.cuh, FollowPreviousGrid), so that a CTA reads its first row while the
// previous kernel of the stream finishes.
struct NoEntry {
  static constexpr bool AT_FIRST_ROW = false;
  __device__ __forceinline__ void operator()() const {}
};

// The persistent loop: Body is called once per split, in table order, a range row once per tile
// (one call site, so the body is inlined once). entry() runs once: where Entry::AT_FIRST_ROW,
// after the first row's loads (or after the loop, for a unit with no row), else before the loop
// with the first row's columns on their way into L1. The table and the CTA offsets are written
// once by the host before any launch reads them (launch.py) and never by a kernel, so they are the
// one global memory a CTA may read before it waits for the previous kernel. REREAD_END: the end is
// re-read after each split (an L1 hit) instead of living in a register through the body, whose
// peak (fixup workspace loads) spilled 128-register (512-thread) kernels; it costs the others
// time, so only those kernels ask for it. SKIP_RANGES: walk the listed rows only (the shared-sum
// pass, which has nothing to do for whole tiles). EAGER: read a row's columns with its flags,
// before knowing whether it is a range row, so that a split costs one round trip, not two (the
// Wgmma producer, whose first split holds up every load; the others keep the registers).
// for_each_split_of walks the rows of work unit `unit` (a CTA, or a cluster of CTAs that share the
// unit's tiles: sk_wgmma.cuh's pairs).
template <int BM, int BN, bool REREAD_END = false, bool SKIP_RANGES = false,
          bool EAGER = false, class Body, class Entry = NoEntry>
__device__ __forceinline__ void for_each_split_of(int unit, const int* __restrict__ table,
                                                  const int* __restrict__ cta_offsets, int M,
                                                  int N, int tile_order, Body&& body,
                                                  Entry entry = Entry()) {
  const int* end_at = cta_offsets + unit + 1;
  const int end = __ldg(end_at);
  int row = __ldg(cta_offsets + unit);
  bool entered = !Entry::AT_FIRST_ROW;
  if (!Entry::AT_FIRST_ROW) {
    if (row < end) prefetch_row(table + (long long)row * NUM_COLUMNS);
    entry();
  }
  int j = 0;  // the next tile of the range row being walked
  while (row < (REREAD_END ? ld_nc_volatile(end_at) : end)) {
    const int* r = table + (long long)row * NUM_COLUMNS;
    Split s;
    if (EAGER) s = load_split(table, row, M, N);
    if ((EAGER ? s.flags : __ldg(r + COL_FLAGS)) & FLAG_RANGE) {
      if (SKIP_RANGES) {
        ++row;
        continue;
      }
      s = range_tile<BM, BN>(r, j, M, N, tile_order);
      if (++j == __ldg(r + COL_RANGE_COUNT)) {
        j = 0;
        ++row;
      }
    } else {
      if (!EAGER) s = load_split(table, row, M, N);
      ++row;
    }
    if (Entry::AT_FIRST_ROW && !entered) {
      entry();
      entered = true;
    }
    body(s);
  }
  if (!entered) entry();
}

template <int BM, int BN, bool REREAD_END = false, bool SKIP_RANGES = false, class Body,
          class Entry = NoEntry>
__device__ __forceinline__ void for_each_split(const int* __restrict__ table,
                                               const int* __restrict__ cta_offsets, int M, int N,
                                               int tile_order, Body&& body,
                                               Entry entry = Entry()) {
  for_each_split_of<BM, BN, REREAD_END, SKIP_RANGES>((int)blockIdx.x, table, cta_offsets, M, N,
                                                     tile_order, body, entry);
}

}  // namespace skc
