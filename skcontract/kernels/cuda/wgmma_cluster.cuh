// wgmma_cluster.cuh: the Wgmma family's two uses of thread-block clusters. A cluster pair
// (Cfg::CLUSTER = 2, sk_wgmma_pair) shares a work unit of 2 BM rows: cluster_part gives each
// CTA its rows of the unit's splits, and B's k-tiles are multicast into both
// (WgmmaOperand::load_part). The cluster protocol (REDUCTION_CLUSTER) sums a tile's splits
// across the CTAs of one cluster through their shared memory (ClusterShares, cluster_expect,
// cluster_push, cluster_finish).
#pragma once
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "fixup.cuh"
#include "wgmma_smem.cuh"

namespace skc {

// A cluster pair's work unit is a tile of CLUSTER * BM rows: its CTAs walk the unit's rows
// of the table together, each computing BM of the rows (by cluster rank) with the same k
// range, so they load the same B k-tiles, which they share by multicast. Each keeps its own
// fixup: CLUSTER locks and slots a tile (the host allocates them), a tile's arrival slots
// still consecutive in SPLIT order for each CTA. A CTA whose rows lie past M computes
// zeros and stores nothing, but still runs every k-tile: its peer's loads and stage
// releases wait on it.
template <class Cfg>
__device__ __forceinline__ Split cluster_part(Split s, int rank) {
  if constexpr (Cfg::CLUSTER > 1) {
    s.m0 += rank * Cfg::BM;
    s.mw = s.m0;
    s.m_end = max(s.m0, min(s.m_end, s.m0 + Cfg::BM));
    if (s.tile >= 0) {
      if (Cfg::REDUCTION == REDUCTION_ARRIVAL)
        s.slot = Cfg::CLUSTER * (s.slot - s.split) + rank * s.peers + s.split;
      else if (s.slot >= 0)
        s.slot = Cfg::CLUSTER * s.slot + rank;
      s.tile = Cfg::CLUSTER * s.tile + rank;
    }
  }
  return s;
}

// The cluster protocol (REDUCTION_CLUSTER): the split's tile is shared by the CTAs of its
// cluster, PEERS of them, the CTA of rank r computing split r (the aligned split); the tile's
// 16-byte vectors of fp32 accumulators (fragment order, as a workspace slot) are cut into
// PEERS shares as equal as they come, share r summed and stored by the CTA of rank r.
// cluster_push, where the split is computed: the CTA puts its partial tile in its idle ring
// and copies each peer's share of it, one bulk copy a peer, into slot r of that peer's
// receive buffer (WgmmaSmem.epi), completing the bytes on the peer's `ready` barrier.
// cluster_finish, after the split walk: once `ready` has every peer's bytes (it expects them
// from the start: cluster_expect), the CTA sums its share over the slots (its own in its
// ring) in split order (bitwise reproducible) and passes each sum to store(t, i, v) as the
// shared sum does; each CTA reads only its own shared memory. A copy reads its source after
// it is issued, so no CTA exits before every peer has its bytes: each arrives on the cluster
// barrier once its own have come, and waits on it last. No deadlock: a cluster's CTAs are
// resident together, and each sends its shares before it waits on anything but its own
// loads, and arrives on the cluster barrier before it waits on it.
template <class Cfg>
struct ClusterShares {
  static constexpr int V = Vec16<float>::V;  // the fixups' 16-byte vectors of accumulators
  static constexpr int NVEC = Cfg::ML::NACC * Cfg::ML::THREADS / V;
  // share r of `peers`: vectors [first(r), first(r + 1))
  __device__ __forceinline__ static int first(int r, int peers) { return NVEC * r / peers; }
  // the bytes the CTA of rank r receives from its peers
  __device__ __forceinline__ static unsigned received_bytes(int r, int peers) {
    return (peers - 1) * (first(r + 1, peers) - first(r, peers)) * V * 4;
  }
};

// Before the cluster's first sync: `ready`'s one arrival, which expects the peers' bytes.
template <class Cfg>
__device__ __forceinline__ void cluster_expect(const WgmmaSmem<Cfg>& sm) {
  mbar_init(sm.ready, 1);
  mbar_arrive_expect_tx(sm.ready, ClusterShares<Cfg>::received_bytes(
                                      (int)cluster_ctarank(), (int)cluster_nctarank()));
}

template <class Cfg>
__device__ __forceinline__ void cluster_push(const WgmmaSmem<Cfg>& sm, const Split& s,
                                             const float (&acc)[Cfg::ML::NACC]) {
  using ML = typename Cfg::ML;
  using Sh = ClusterShares<Cfg>;
  using Sync = ConsumerSync<ML::THREADS>;
  constexpr int V = Sh::V;
  static_assert(Cfg::CLUSTER == 1, "a pair's cluster is its work unit, not a tile's splits");
  static_assert(WgmmaSmem<Cfg>::EPI_BYTES >= Sh::NVEC * V * 4, "the tile fits the receiver");
  static_assert(Cfg::STAGES * WgmmaSmem<Cfg>::STAGE_BYTES >= Sh::NVEC * V * 4,
                "the partial tile fits the ring");
  if (threadIdx.x == 0 && (cluster_ctarank() != (unsigned)s.split ||
                           cluster_nctarank() != (unsigned)s.peers))
    __trap();  // the launch's clusters are not the table's tiles
  float* out = reinterpret_cast<float*>(sm.ring);
  Sync::sync();  // the other warpgroup's wgmmas may still read the ring
#pragma unroll
  for (int g = 0; g < ML::NACC / V; ++g)
    *reinterpret_cast<float4*>(out + (g * ML::THREADS + threadIdx.x) * V) =
        make_float4(acc[g * V], acc[g * V + 1], acc[g * V + 2], acc[g * V + 3]);
  fence_async_shared();  // the copies read through the async proxy
  Sync::sync();
  const int r = (int)threadIdx.x;  // thread r sends share r
  if (r < s.peers && r != s.split) {
    const int lo = Sh::first(r, s.peers), count = Sh::first(r + 1, s.peers) - lo;
    bulk_copy_to_peer(sm.epi + s.split * count * V, out + lo * V, count * V * 4, sm.ready,
                      (unsigned)r);
  }
}

template <class Cfg, class Store>
__device__ __forceinline__ void cluster_finish(const WgmmaSmem<Cfg>& sm, const Split& s,
                                               Store&& store) {
  using ML = typename Cfg::ML;
  using Sh = ClusterShares<Cfg>;
  constexpr int V = Sh::V;
  mbar_wait_acquire_cluster(sm.ready, 0);
  cluster_arrive_relaxed();  // every copy to this CTA is done (its sources may go)
  if (threadIdx.x == 0) trace(TRACE_SHARED_WAITED);
  const int lo = Sh::first(s.split, s.peers), share = Sh::first(s.split + 1, s.peers) - lo;
  const float* own = reinterpret_cast<const float*>(sm.ring) + lo * V;
  for (int i = (int)threadIdx.x; i < share; i += ML::THREADS) {
    float4 acc = s.split == 0 ? *reinterpret_cast<const float4*>(own + i * V)
                              : *reinterpret_cast<const float4*>(sm.epi + i * V);
    for (int p = 1; p < s.peers; ++p) {
      const float* at = p == s.split ? own + i * V : sm.epi + (p * share + i) * V;
      const float4 part = *reinterpret_cast<const float4*>(at);
      acc.x += part.x;
      acc.y += part.y;
      acc.z += part.z;
      acc.w += part.w;
    }
    const float sum[V] = {acc.x, acc.y, acc.z, acc.w};
    store((unsigned)((lo + i) % ML::THREADS), (lo + i) / ML::THREADS * V, sum);
  }
  cluster_wait();  // every peer has every copy, so this CTA's ring is read
}

}  // namespace skc
