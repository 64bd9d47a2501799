// wgmma_mainloop.cuh: a consumer warpgroup's mainloop (wgmma_mainloop): for each k-tile of a
// split it waits for the stage, touches it up where the Loads masks stages (mask_stage),
// issues the k-tile's wgmmas straight from shared memory, keeps one k-tile's wgmmas in
// flight, and frees each stage once the wgmmas that read it are done.
#pragma once
#include "hopper.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_epilogue.cuh"
#include "wgmma_smem.cuh"

namespace skc {

// A consumer warpgroup's touch-up of its 64 rows of a landed A box before its wgmmas read
// them (a Loads with MASKS: Im2colTmaLoads, whose folded convolutions read whole channel
// blocks): a row a thread of the first 64 zeros what Loads::mask names for K's k-tile t,
// fences it to the async proxy (the wgmmas read through it), and the warpgroup meets.
template <class Loads>
__device__ __forceinline__ void mask_stage(const Loads& loads, const unsigned char* sa, int row0,
                                           int t) {
  const int from = loads.masked_from(t);
  if (from >= Loads::CHUNKS) return;  // the same for the whole warpgroup
  const int lt = threadIdx.x % WARPGROUP;
  if (lt < WGMMA_M) Loads::mask(smem_addr(sa), row0 + lt, from);
  fence_async_shared();
  asm volatile("bar.sync %0, %1;\n" ::"r"(EPI_BARRIER0 + (int)(threadIdx.x / WARPGROUP)),
               "n"(WARPGROUP) : "memory");
}

// A consumer warpgroup's mainloop over one split's k-tiles, N columns of the stage's B into
// d (the split's tile, or a HyTiS small row's first half of it). One k-tile's wgmmas stay
// in flight; a stage is freed (one arrival per warp) once the wgmmas that read it are done.
template <int N, class Cfg, class Loads>
__device__ __forceinline__ void wgmma_mainloop(const WgmmaSmem<Cfg>& sm, RingCursor& at,
                                               const Split& s, const Loads& loads,
                                               typename Cfg::Acc (&d)[N / 2]) {
  using Sm = WgmmaSmem<Cfg>;
  const int row0 = WGMMA_M * warpgroup_index();  // this warpgroup's rows of the tile
  const int ktiles = (s.k1 - s.k0 + Cfg::BK - 1) / Cfg::BK;
  int held = -1;  // the stage whose wgmmas may still be in flight
  auto release = [&]() {
    if (held >= 0) release_stage(sm, held);
  };
  for (int kt = 0; kt < ktiles; ++kt) {
    wait_stage(sm, at);
    if (threadIdx.x == 0) {
      if (at.at_start()) trace(TRACE_FIRST_LANDED);
      trace_ktile(KTILE_LANDED, at.taken);
    }
    if constexpr (Loads::MASKS) {
      if (loads.masks()) mask_stage(loads, sm.stage(at.stage), row0, s.k0 / Cfg::BK + kt);
    }
    fence_accumulators(d);
    wgmma_fence();
#ifndef SKCONTRACT_PROBE_LOADS_ONLY  // (the probe build that times the loads alone)
    // the k-tile's first descriptors; each k step's are these advanced by the step's offset
    const unsigned char* sa = sm.stage(at.stage);
    const unsigned long long da = Sm::OA::desc(sa, row0, 0);
    const unsigned long long db = Sm::OB::desc(sa + Sm::OA::STAGE_BYTES, 0, 0);
#pragma unroll
    for (int kk = 0; kk < Cfg::BK / WGMMA_K<typename Cfg::TIn>; ++kk)
      wgmma_step<N, Sm::A_READ_KMAJOR, Sm::B_READ_KMAJOR, typename Cfg::TIn>(
          d, Sm::OA::advance(da, Sm::OA::offset(0, kk)),
          Sm::OB::advance(db, Sm::OB::offset(0, kk)), 1);
#endif
    wgmma_commit();
    wgmma_wait<1>();  // the previous k-tile's wgmmas are done: free its stage
    fence_accumulators(d);
    release();
    held = at.stage;
    at.template advance<Cfg::STAGES>();
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  release();
}

}  // namespace skc
