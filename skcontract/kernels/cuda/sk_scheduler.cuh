// sk_scheduler.cuh: the device side of "the schedule is data".
// A CTA walks rows cta_offsets[cta] .. cta_offsets[cta+1] of the split table written by
// skcontract/schedule (table.py documents the columns and is the one definition of the
// enums below; a CPU test checks they agree). No decomposition arithmetic here.
#pragma once
#include "sk_common.cuh"

namespace skc {

enum : int { COL_BATCH = 0, COL_M0, COL_N0, COL_BM, COL_BN, COL_K0, COL_K1, COL_FLAGS, COL_TILE,
             COL_SLOT, COL_PEERS, COL_SPLIT, NUM_COLUMNS };
enum : int { FLAG_FIRST = 1, FLAG_FINAL = 2, FLAG_SMALL = 4, FLAG_SHARED_SUM = 8 };

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

__device__ __forceinline__ int ld_nc_volatile(const int* p) {
  int v;
  asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// The persistent loop: Body is called once per split, in table order. REREAD_END: the end is
// re-read after each split (an L1 hit) instead of living in a register through the body,
// whose peak (fixup workspace loads) spilled 128-register (512-thread) kernels; it costs the
// others time (docs/benchmarks/log.md), so only those kernels ask for it.
template <bool REREAD_END = false, class Body>
__device__ __forceinline__ void for_each_split(const int* __restrict__ table,
                                               const int* __restrict__ cta_offsets, int M, int N,
                                               Body&& body) {
  const int begin = __ldg(cta_offsets + blockIdx.x);
  if constexpr (REREAD_END) {
    for (int row = begin; row < ld_nc_volatile(cta_offsets + blockIdx.x + 1); ++row)
      body(load_split(table, row, M, N));
  } else {
    const int end = __ldg(cta_offsets + blockIdx.x + 1);
    for (int row = begin; row < end; ++row) body(load_split(table, row, M, N));
  }
}

}  // namespace skc
