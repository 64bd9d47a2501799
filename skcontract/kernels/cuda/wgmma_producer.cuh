// wgmma_producer.cuh: the producer warpgroup's issuing thread: where its boxes come from (a
// Loads: DenseTmaLoads here, sk_wgmma_conv.cuh's Im2colTmaLoads) and its walk of the split
// table, which loads every k-tile of the CTA's splits into the ring (wgmma_produce).
#pragma once
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "fixup.cuh"
#include "wgmma_smem.cuh"
#include "wgmma_cluster.cuh"

namespace skc {

// Where the producer's boxes come from. A Loads has prefetch() (the maps' descriptors),
// split(s) (a split's coordinates, once per split) and load(stage, bar, kt) (k-tile kt of
// the split: A's box, then B's, completing on bar; called for kt = 0, 1, ... in turn).
// MASKS: whether a landed stage may need a touch-up before the wgmmas read it (then
// masks() says whether this launch's do, and masked_from(t), of K's t-th k-tile, and
// mask() make it: mask_stage); finish(s, acc), a consumer's touch-up of its finished tile
// before the store. DenseTmaLoads reads a GEMM's strided operands through tiled
// maps over (k, rows, batch); sk_wgmma_conv.cuh's Im2colTmaLoads reads a convolution's
// input through an im2col map.
template <class Cfg>
struct DenseTmaLoads {
  using Sm = WgmmaSmem<Cfg>;
  static constexpr bool MASKS = false;  // the stages are used as loaded
  const TmaMap& map_a;
  const TmaMap& map_b;
  bool batched_a, batched_b;
  int part = 0;  // a pair's cluster rank: the part of B this CTA loads for both
  int m0 = 0, n0 = 0, k0 = 0, ba = 0, bb = 0;
  bool small = false;  // a HyTiS small row: the first half of B
  __device__ __forceinline__ void prefetch() const {
    tma_prefetch(map_a);
    tma_prefetch(map_b);
  }
  __device__ __forceinline__ void split(const Split& s) {
    m0 = s.m0;
    n0 = s.n0;
    k0 = s.k0;
    ba = batched_a ? s.batch : 0;
    bb = batched_b ? s.batch : 0;
    small = small_row<Cfg>(s);
  }
  __device__ __forceinline__ void load(unsigned char* st, unsigned long long* bar, int kt) const {
    const int k = k0 + kt * Cfg::BK;
    Sm::OALoad::load(st, map_a, bar, m0, k, ba);
    if constexpr (Cfg::CLUSTER > 1)
      Sm::OBLoad::template load_part<Cfg::CLUSTER>(st + Sm::OA::STAGE_BYTES, map_b, bar, n0, k,
                                                   bb, part);
    else if constexpr (Cfg::SMALL_BN > 0)
      Sm::OBLoad::template load_parts<Sm::B_PARTS>(st + Sm::OA::STAGE_BYTES, map_b, bar, n0, k,
                                                   bb, small ? 1 : Sm::B_PARTS);
    else
      Sm::OBLoad::load(st + Sm::OA::STAGE_BYTES, map_b, bar, n0, k, bb);
  }
  // the consumers' touch-up of a finished tile (Im2colTmaLoads has one): none
  template <int NACC>
  __device__ __forceinline__ void finish(const Split&, typename Cfg::Acc (&)[NACC]) const {}
};

// The producer's thread: every k-tile of every split of the CTA, into the ring.
template <class Cfg, class Loads>
__device__ __forceinline__ void wgmma_produce(const WgmmaSmem<Cfg>& sm, Loads& loads,
                                              const int* table, const int* cta_offsets, int M,
                                              int N, int tile_order) {
  using Sm = WgmmaSmem<Cfg>;
  const int rank = loads.part;
  RingCursor at;
#ifdef SKCONTRACT_PROBE_MMA_ONLY
  int loaded = 0;  // the probe build loads the ring once, then marks its stages full
#endif
  for_each_split_of<Cfg::BM * Cfg::CLUSTER, Cfg::BN, false, false, true>(
      blockIdx.x / Cfg::CLUSTER, table, cta_offsets, M, N, tile_order, [&](const Split& us) {
    const Split s = cluster_part<Cfg>(us, rank);
    if (at.at_start()) trace(TRACE_FIRST_SPLIT);
    const int ktiles = (s.k1 - s.k0 + Cfg::BK - 1) / Cfg::BK;
    const unsigned stage_tx = Sm::stage_tx(M, N, small_row<Cfg>(s));
    loads.split(s);
    for (int kt = 0; kt < ktiles; ++kt) {
      mbar_wait(&sm.empty[at.stage], at.phase ^ 1);  // a fresh barrier's previous phase is done
#ifdef SKCONTRACT_PROBE_MMA_ONLY
      if (loaded++ >= Cfg::STAGES) {
        mbar_arrive(&sm.full[at.stage]);
        at.template advance<Cfg::STAGES>();
        continue;
      }
#endif
      trace_ktile(KTILE_ISSUED, at.taken);
      mbar_arrive_expect_tx(&sm.full[at.stage], stage_tx);
      loads.load(sm.stage(at.stage), &sm.full[at.stage], kt);
      if (at.at_start()) trace(TRACE_FIRST_LOAD);
      at.template advance<Cfg::STAGES>();
    }
  }, FollowPreviousGrid<Cfg::REDUCTION>());
  trace(TRACE_LAST_LOAD);
  if constexpr (Cfg::CLUSTER > 1) {
    // Stay until every consumer of the cluster has released every stage: the peer's
    // consumers arrive on this CTA's barriers, which must outlive their arrivals.
    for (int i = 0; i < Cfg::STAGES; ++i) {
      mbar_wait(&sm.empty[at.stage], at.phase ^ 1);
      at.template advance<Cfg::STAGES>();
    }
  }
}

}  // namespace skc
