// sk_wgmma.cuh: the Wgmma family's persistent Stream-K GEMM kernel for sm_90a (the entry
// header of skcontract/kernels/catalogue/wgmma.py's Wgmma entries; jit.py inlines its includes).
//
// The CTA is BM / 64 consumer warpgroups (the first threads) and one producer warpgroup
// (the last). One producer thread walks the CTA's rows of the split table (for_each_split,
// as every family does) and, for each k-tile, waits for a free stage of the shared-memory
// ring and loads the A and B boxes into it with TMA (128-byte swizzle, zero fill past the
// operands' edges), completing on the stage's `full` mbarrier. The consumers walk the same
// rows in the same order, so both sides derive the same k-tile sequence from the table and
// the ring's phases agree with no other communication. Each consumer warpgroup multiplies
// its 64 rows of the tile with wgmma.mma_async m64nBNkK straight from shared memory, keeps
// one k-tile's wgmmas in flight, and frees a stage (one arrival per warp on its `empty`
// mbarrier) once the wgmmas that read it are done. The fixup (fixup.cuh) and the epilogue
// run on the consumers only, synchronising through named barriers 1 (all consumers) and
// 2, 3 (one warpgroup's epilogue); the producer never waits on a fixup, so the
// deadlock-freedom argument of docs/design/stream_k.md is unchanged. Where an operand is
// MN-major and wgmma reads its type K-major only (3xTF32's, WgmmaSmem::TRANSPOSES), the
// producer warpgroup's other warps turn each landed stage K-major (wgmma_transpose; named
// barrier 4) and mark it on the stage's `transposed` mbarrier, which the consumers wait on
// after `full`.
//
// The kernel body (wgmma_gemm, here) composes the family's features, a header each:
//   wgmma_tile.cuh       the tile: warpgroups, the accumulator fragment, one k step, an
//                        operand's stage with its wgmma descriptors and TMA loads
//   wgmma_epilogue.cuh   the tile's store through a shared-memory staging, by TMA or by the
//                        consumer threads
//   wgmma_smem.cuh       the CTA's shared memory and the ring's protocol; HyTiS's small rows
//   wgmma_cluster.cuh    cluster pairs (cluster_part) and the cluster protocol's sums
//   wgmma_producer.cuh   the producer's loads (DenseTmaLoads) and its walk (wgmma_produce)
//   wgmma_transpose.cuh  the transposers: an MN-major tf32 operand's stage turned K-major
//   wgmma_tf32x3.cuh     3xTF32: the stages' split and its mainloop
//   wgmma_mainloop.cuh   the consumers' mainloop
// Cfg picks among them at compile time, in a few named places: the ring's barriers
// (init_barriers), the mainloop a split runs (wgmma_consume), its store (wgmma_store), and,
// in wgmma_gemm, the register trade, the fixup and the passes after the split walk.
//
// Cfg (skcontract/kernels/catalogue/wgmma.py, Wgmma.cfg_lines): TIn, TOut, Acc, BM (64 or 128),
// BN (64, 128 or 256), BK (one 128-byte swizzle row: 64 16-bit, 32 tf32 or 128 s8), STAGES,
// THREADS (BM / 64 + 1 warpgroups), MIN_BLOCKS, REDUCTION, A_KMAJOR, B_KMAJOR, EPI_PITCH
// (the epilogue staging's row pitch in floats), SPLIT_REGS (registers a thread of a launch
// whose warpgroups trade registers; 0: no trade) with PRODUCER_REGS and CONSUMER_REGS (the
// setmaxnreg targets of the trade: the producer keeps what issuing TMA needs, the consumers
// take the rest), STORE_COLS (WgmmaEpilogue), TF32X3 (float32 operands at float32 accuracy:
// wgmma_tf32x3.cuh), ML (WgmmaTile, wgmma_tile.cuh), SMALL_BN (HyTiS: the columns of the
// small tile the table's FLAG_SMALL rows name, BM x SMALL_BN = BN / 2; 0 for a kernel that
// runs the one tile). Shared memory: WgmmaSmem (wgmma_smem.cuh).
//
// HyTiS (SMALL_BN > 0): a small row's k-tile loads A's box and the first half of B's stage
// (B's map box is one half: the full tile loads two), its wgmmas are m64nSMALL_BN on the
// first half of the accumulators (m64nN's fragment for N = BN / 2 is the first half of
// N = BN's, and the stage's layout, 64-column boxes or K-major rows, is the same), and the
// epilogue stores SMALL_BN columns. Whole tiles only: such a kernel runs no fixup.
//
// Probe builds (jit.py's PROBES; tools/time_gemm.py --probe) time one half of the mainloop,
// their outputs wrong: SKCONTRACT_PROBE_LOADS_ONLY, the loads alone (the consumers wait for
// each stage and free it, issuing no wgmma); SKCONTRACT_PROBE_MMA_ONLY, the wgmmas alone (the
// producer loads the ring once, then marks each freed stage full without loading it).
// 3xTF32's mainloop has no probe.
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "fixup.cuh"
#include "epilogue.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_epilogue.cuh"
#include "wgmma_smem.cuh"
#include "wgmma_cluster.cuh"
#include "wgmma_producer.cuh"
#include "wgmma_transpose.cuh"
#include "wgmma_tf32x3.cuh"
#include "wgmma_mainloop.cuh"

namespace skc {

// Loads in flight a consumer thread keeps in the shared sum's pass (Fixup::finish_shared): its
// accumulators are dead by then, and fewer dependent L2 round trips shorten the pass that
// ends the kernel (the portable families keep the Fixup's default).
constexpr int SHARED_SUM_BATCH = 8;

// The ring's mbarriers, by one thread before the CTA's (or the cluster's) first sync: a
// stage's `full` (the producer's arrive.expect_tx), `empty` (the consumers' releases, from
// every CTA of a pair) and, where operands are transposed in the stages, `transposed` (the
// transposers'); the cluster protocol's `ready`.
template <class Cfg>
__device__ __forceinline__ void init_barriers(const WgmmaSmem<Cfg>& sm) {
  constexpr int CONSUMERS = Cfg::ML::THREADS;
  for (int s = 0; s < Cfg::STAGES; ++s) {
    mbar_init(&sm.full[s], 1);
    mbar_init(&sm.empty[s], Cfg::CLUSTER * CONSUMERS / RELEASE_GROUP<Cfg>);
    if constexpr (WgmmaSmem<Cfg>::TRANSPOSES) mbar_init(&sm.transposed[s], TRANSPOSERS);
  }
  if constexpr (Cfg::REDUCTION == REDUCTION_CLUSTER) cluster_expect<Cfg>(sm);
  mbar_fence_init();
}

// A consumer warpgroup's split: acc = its 64 rows of the split's product (of a HyTiS small
// row, the first half of acc; the rest stays zero and is not stored).
template <class Cfg, class Loads>
__device__ __forceinline__ void wgmma_consume(const WgmmaSmem<Cfg>& sm, RingCursor& at,
                                              const Split& s, const Loads& loads,
                                              typename Cfg::Acc (&acc)[Cfg::ML::NACC]) {
  using Acc = typename Cfg::Acc;
  if constexpr (Cfg::TF32X3) {
    static_assert(!Loads::MASKS, "3xTF32 splits the stages as loaded");
    wgmma_consume_x3<Cfg>(sm, at, s, acc);
    return;
  }
#pragma unroll
  for (int i = 0; i < Cfg::ML::NACC; ++i) acc[i] = Acc(0);
  if constexpr (Cfg::SMALL_BN > 0) {
    if (small_row<Cfg>(s)) {
      wgmma_mainloop<Cfg::SMALL_BN, Cfg>(sm, at, s, loads,
                                         reinterpret_cast<Acc(&)[Cfg::SMALL_BN / 2]>(acc));
      return;
    }
  }
  wgmma_mainloop<Cfg::BN, Cfg>(sm, at, s, loads, acc);
}

// A split's store of the tile it owns: int32 accumulators through the portable epilogue,
// fp32 ones through the staging (WgmmaEpilogue), by TMA where the launch gives C's map
// (store_tma), else by the consumer threads; a HyTiS small row stores its SMALL_BN columns.
template <class Cfg>
__device__ __forceinline__ void wgmma_store(const WgmmaSmem<Cfg>& sm, const Split& s,
                                            const typename Cfg::Acc (&acc)[Cfg::ML::NACC],
                                            typename Cfg::TOut* __restrict__ C, long long ldc,
                                            long long batch_c, typename Cfg::Acc alpha,
                                            typename Cfg::Acc beta, const TmaMap& map_c,
                                            bool store_tma) {
  using Store = typename WgmmaSmem<Cfg>::Store;
  const int cols = small_row<Cfg>(s) ? Cfg::SMALL_BN : Cfg::BN;
  if constexpr (!WGMMA_STAGED_EPILOGUE<typename Cfg::Acc>)
    Epilogue<typename Cfg::ML, typename Cfg::TOut, false, false>::run(
        s, acc, C + (long long)s.batch * batch_c, ldc, alpha, beta);
  else if (store_tma)
    Store::run_tma(s, acc, sm.epi, map_c, alpha, cols);
  else
    Store::run(s, acc, sm.epi, C + (long long)s.batch * batch_c, ldc, alpha, beta, cols);
}

// The kernel body: the ring's barriers, the producer walking `loads`, the consumers'
// mainloop, fixup and epilogue (the entries below and sk_wgmma_conv.cuh's).
template <class Cfg, class Loads>
__device__ __forceinline__ void wgmma_gemm(Loads& loads, typename Cfg::TOut* __restrict__ C,
                                           const int* __restrict__ table,
                                           const int* __restrict__ cta_offsets,
                                           typename Cfg::Acc* ws, typename Cfg::Acc* staging,
                                           unsigned* locks, int M, int N, int tile_order,
                                           long long ldc, long long batch_c,
                                           typename Cfg::Acc alpha, typename Cfg::Acc beta,
                                           const TmaMap& map_c, bool store_tma) {
  using Acc = typename Cfg::Acc;
  using ML = typename Cfg::ML;
  using Sm = WgmmaSmem<Cfg>;
  using Fx = Fixup<ML, Cfg::REDUCTION, ConsumerSync<ML::THREADS>>;
  constexpr int CONSUMERS = ML::THREADS;
  static_assert(Cfg::THREADS == CONSUMERS + WARPGROUP, "consumers and one producer warpgroup");
  static_assert(Cfg::SMALL_BN == 0 || (Cfg::REDUCTION == REDUCTION_NONE && !Cfg::TF32X3 &&
                                       WGMMA_STAGED_EPILOGUE<Acc>),
                "HyTiS's tables split no tile; its small rows run the 16-bit staged mainloop");
  static_assert(Cfg::STAGES * Sm::STAGE_BYTES >= CONSUMERS * Fx::V * (int)sizeof(Acc),
                "the shared sum's scratch lives in the ring");
  // The register split (Cfg::SPLIT_REGS: the registers a thread the launch allocates, 0 for
  // none): the producer gives registers back and the consumers take them; both sums equal
  // the launch's, which the compile check and the loader verify, so an increase never waits
  // for registers that no one frees.
  constexpr bool SPLIT = Cfg::SPLIT_REGS > 0;
  static_assert(!SPLIT || (Cfg::THREADS == 3 * WARPGROUP &&
                           Cfg::PRODUCER_REGS + 2 * Cfg::CONSUMER_REGS == 3 * Cfg::SPLIT_REGS),
                "the register split is for two consumer warpgroups");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const Sm sm(smem_raw);
  {  // The host computes the shared-memory size from the spec: check it agrees.
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (smem_raw + dyn < sm.end()) __trap();
  }
  constexpr bool IN_CLUSTERS = Cfg::CLUSTER > 1 || Cfg::REDUCTION == REDUCTION_CLUSTER;
  if (threadIdx.x == 0) init_barriers<Cfg>(sm);
  if (threadIdx.x == CONSUMERS) loads.prefetch();
  if (threadIdx.x == 0 && store_tma) tma_prefetch(map_c);
  if constexpr (IN_CLUSTERS)
    cluster_sync();  // the peers' barriers are initialised before their loads or arrivals
  else
    __syncthreads();
  // The set-up above reads only shared memory and the parameters, and each walk below reads its
  // first row before it waits (FollowPreviousGrid): both overlap the previous kernel.
  if (threadIdx.x == 0) trace(TRACE_START);

  if (threadIdx.x >= CONSUMERS) {  // the producer warpgroup: one thread issues every load
    if constexpr (SPLIT) setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    if (threadIdx.x == CONSUMERS)
      wgmma_produce<Cfg>(sm, loads, table, cta_offsets, M, N, tile_order);
    else if constexpr (Sm::TRANSPOSES) {
      if (threadIdx.x >= CONSUMERS + 32)  // the other warps transpose what it loads
        wgmma_transpose<Cfg>(sm, table, cta_offsets, M, N, tile_order,
                             threadIdx.x - CONSUMERS - 32);
    }
    return;
  }

  if constexpr (SPLIT) setmaxnreg_inc<Cfg::CONSUMER_REGS>();
  RingCursor at;
  const int unit = blockIdx.x / Cfg::CLUSTER, rank = loads.part;
  for_each_split_of<Cfg::BM * Cfg::CLUSTER, Cfg::BN>(unit, table, cta_offsets, M, N, tile_order,
                                                     [&](const Split& us) {
    const Split s = cluster_part<Cfg>(us, rank);
    Acc acc[ML::NACC];
    wgmma_consume<Cfg>(sm, at, s, loads, acc);
    if (threadIdx.x == 0) trace(TRACE_MAINLOOP_DONE);
    bool owns = true;
    if constexpr (Cfg::REDUCTION == REDUCTION_CLUSTER) {
      if (!s.owns_tile()) {  // the sum comes after the split walk (cluster_finish)
        cluster_push<Cfg>(sm, s, acc);
        return;
      }
    } else {
      owns = Fx::run(s, acc, ws, staging, locks, sm.flag);
    }
    if (threadIdx.x == 0) trace(TRACE_FIXUP_DONE);
    if (owns) {
      loads.finish(s, acc);  // (a merged convolution's touch-up; none for others)
      wgmma_store<Cfg>(sm, s, acc, C, ldc, batch_c, alpha, beta, map_c, store_tma);
    }
  }, FollowPreviousGrid<Cfg::REDUCTION>());
  if (store_tma) Sm::Store::drain_tma();
  if (threadIdx.x == 0) trace(TRACE_EPILOGUE_DONE);
  if constexpr (Cfg::REDUCTION == REDUCTION_ARRIVAL) {
    // Shared sums, after the CTA's last split: the ring is idle (every load was consumed).
    using Epi = Epilogue<ML, typename Cfg::TOut, false, false>;
    for_each_split_of<Cfg::BM * Cfg::CLUSTER, Cfg::BN, false, true>(
        unit, table, cta_offsets, M, N, tile_order, [&](const Split& us) {
      if (!us.shared_sum()) return;
      const Split s = cluster_part<Cfg>(us, rank);
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      Fx::template finish_shared<SHARED_SUM_BATCH>(
          s, ws, locks, reinterpret_cast<Acc*>(sm.ring),
          [&](unsigned t, int i, const Acc (&v)[Fx::V]) {
            Epi::store_group(s, t, i, v, Cb, ldc, alpha, beta);
          });
    });
    if (threadIdx.x == 0) trace(TRACE_SHARED_DONE);
  }
  if constexpr (Cfg::REDUCTION == REDUCTION_CLUSTER) {
    using Epi = Epilogue<ML, typename Cfg::TOut, false, false>;
    for_each_split_of<Cfg::BM, Cfg::BN, false, true>(
        unit, table, cta_offsets, M, N, tile_order, [&](const Split& s) {
      if (s.owns_tile()) return;
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      cluster_finish<Cfg>(sm, s, [&](unsigned t, int i, const Acc (&v)[4]) {
        Epi::store_group(s, t, i, v, Cb, ldc, alpha, beta);
      });
    });
    if (threadIdx.x == 0) trace(TRACE_SHARED_DONE);
  }
  if (threadIdx.x == 0) trace(TRACE_END);
}

// The Wgmma kernels' parameters: the arguments every family's kernel takes (launch.py fills
// them in this order), then A's, B's and C's tensor maps and whether the epilogue stores
// through C's (WgmmaEpilogue::run_tma; when not, C's map is not read).
#define SKC_WGMMA_KERNEL_PARAMS                                                                \
  const typename Cfg::TIn *__restrict__ A, const typename Cfg::TIn *__restrict__ B,           \
      typename Cfg::TOut *__restrict__ C, const int *__restrict__ table,                      \
      const int *__restrict__ cta_offsets, typename Cfg::Acc *ws, typename Cfg::Acc *staging, \
      unsigned *locks, int M, int N, int K, int tile_order, long long lda, long long ldb,     \
      long long ldc, long long batch_a, long long batch_b, long long batch_c,                 \
      typename Cfg::Acc alpha, typename Cfg::Acc beta, const __grid_constant__ TmaMap map_a,  \
      const __grid_constant__ TmaMap map_b, const __grid_constant__ TmaMap map_c, int store_tma

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma(SKC_WGMMA_KERNEL_PARAMS) {
  static_assert(Cfg::CLUSTER == 1, "pairs launch sk_wgmma_pair");
  DenseTmaLoads<Cfg> loads{map_a, map_b, batch_a != 0, batch_b != 0};
  wgmma_gemm<Cfg>(loads, C, table, cta_offsets, ws, staging, locks, M, N, tile_order, ldc,
                  batch_c, alpha, beta, map_c, store_tma != 0);
}

// The same over clusters of two CTAs (the launch's grid counts CTAs: twice the table's work
// units), which share B's k-tiles by multicast (cluster_part).
template <class Cfg>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma_pair(SKC_WGMMA_KERNEL_PARAMS) {
  static_assert(Cfg::CLUSTER == 2, "sk_wgmma_pair runs clusters of two");
  DenseTmaLoads<Cfg> loads{map_a, map_b, batch_a != 0, batch_b != 0, (int)cluster_ctarank()};
  wgmma_gemm<Cfg>(loads, C, table, cta_offsets, ws, staging, locks, M, N, tile_order, ldc,
                  batch_c, alpha, beta, map_c, store_tma != 0);
}

}  // namespace skc
