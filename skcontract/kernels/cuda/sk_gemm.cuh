// sk_gemm.cuh: the persistent Stream-K GEMM kernel. One template, one instantiation per
// KernelSpec; the host emits a Cfg struct (see skcontract/kernels/specs.py) naming:
//   TIn, TOut, Acc, BM, BN, BK, STAGES, THREADS, MIN_BLOCKS, FIXUP, LA, LB (TileLoader), ML (mainloop).
// Structure: scheduler loop over the CTA's split-table rows -> multi-stage cp.async pipeline
// feeding ML::compute -> Fixup -> Epilogue; with the aligned fixup, a second walk over the
// rows finishes the shared sums (fixup.cuh) once the CTA has arrived on all its tiles.
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"
#include "loader.cuh"
#include "mainloop_mma_sync.cuh"
#include "mainloop_ffma.cuh"
#include "mainloop_ffma_kmajor.cuh"
#include "fixup.cuh"
#include "epilogue.cuh"

namespace skc {

// Shared memory a mainloop needs after the pipeline stages (ML::SCRATCH_BYTES; 0 when a
// mainloop does not declare it), passed to its compute() as a 4th argument when nonzero.
template <class ML, class = void> struct MainloopScratch { static constexpr int BYTES = 0; };
template <class ML> struct MainloopScratch<ML, decltype(void(ML::SCRATCH_BYTES))> {
  static constexpr int BYTES = ML::SCRATCH_BYTES;
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_gemm(const typename Cfg::TIn* __restrict__ A, const typename Cfg::TIn* __restrict__ B,
        typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
        const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
        unsigned* locks, int M, int N, int K, long long lda, long long ldb, long long ldc,
        long long batch_a, long long batch_b, long long batch_c, typename Cfg::Acc alpha,
        typename Cfg::Acc beta) {
  using TIn = typename Cfg::TIn;
  using Acc = typename Cfg::Acc;
  using LA = typename Cfg::LA;
  using LB = typename Cfg::LB;
  using ML = typename Cfg::ML;
  constexpr int STAGES = Cfg::STAGES, BK = Cfg::BK;
  static_assert(STAGES >= 2, "at least two pipeline stages");
  static_assert(ML::THREADS == Cfg::THREADS, "mainloop thread count");
  constexpr int STAGES_BYTES = STAGES * (LA::STAGE_BYTES + LB::STAGE_BYTES);
  constexpr int SCRATCH_BYTES = MainloopScratch<ML>::BYTES;
  static_assert(SCRATCH_BYTES == 0 || STAGES_BYTES % 16 == 0, "16-byte aligned scratch");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int flag;
  {  // The host computes the shared-memory size from the spec: check it agrees.
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)(STAGES_BYTES + SCRATCH_BYTES)) __trap();
  }
  TIn* sA = reinterpret_cast<TIn*>(smem_raw);
  TIn* sB = sA + STAGES * LA::STAGE_ELEMS;
  unsigned char* scratch = smem_raw + STAGES_BYTES;  // after the stages (KernelSpec.smem_bytes)

  for_each_split<(Cfg::THREADS > 256)>(table, cta_offsets, M, N, [&](const Split& s) {
    const TIn* gA = A + (long long)s.batch * batch_a;
    const TIn* gB = B + (long long)s.batch * batch_b;
    Acc acc[ML::NACC];
    ML::zero(acc);
    const int ktiles = (s.k1 - s.k0 + BK - 1) / BK;
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < ktiles) {
        LA::load(sA + st * LA::STAGE_ELEMS, gA, lda, s.m0, s.k0 + st * BK, s.m_end, s.k1);
        LB::load(sB + st * LB::STAGE_ELEMS, gB, ldb, s.n0, s.k0 + st * BK, s.n_end, s.k1);
      }
      cp_async_commit();
    }
    int read_stage = 0, write_stage = STAGES - 1;
    for (int kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int nk = kt + STAGES - 1;
      if (nk < ktiles) {
        LA::load(sA + write_stage * LA::STAGE_ELEMS, gA, lda, s.m0, s.k0 + nk * BK, s.m_end, s.k1);
        LB::load(sB + write_stage * LB::STAGE_ELEMS, gB, ldb, s.n0, s.k0 + nk * BK, s.n_end, s.k1);
      }
      cp_async_commit();
      if constexpr (SCRATCH_BYTES > 0)
        ML::compute(sA + read_stage * LA::STAGE_ELEMS, sB + read_stage * LB::STAGE_ELEMS, acc,
                    scratch);
      else
        ML::compute(sA + read_stage * LA::STAGE_ELEMS, sB + read_stage * LB::STAGE_ELEMS, acc);
      read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
      write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // the next split's prologue overwrites the stages
    if (Fixup<ML, Cfg::FIXUP>::run(s, acc, ws, staging, locks, &flag))
      Epilogue<ML, typename Cfg::TOut>::run(s, acc, C + (long long)s.batch * batch_c, ldc,
                                            alpha, beta);
  });
  if constexpr (Cfg::FIXUP == FIXUP_ALIGNED) {
    // Shared sums: the CTA has arrived on all its tiles; now it waits and sums its shares.
    static_assert(STAGES_BYTES >= Cfg::THREADS * 16,
                  "the shared sum's scratch lives in the pipeline stages");
    for_each_split<(Cfg::THREADS > 256)>(table, cta_offsets, M, N, [&](const Split& s) {
      if (!s.shared_sum()) return;
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      Fixup<ML, Cfg::FIXUP>::finish_shared(
          s, ws, locks, &flag, reinterpret_cast<Acc*>(smem_raw), [&](int i, Acc v) {
            Epilogue<ML, typename Cfg::TOut>::store_one(s, i, v, Cb, ldc, alpha, beta);
          });
    });
  }
}

}  // namespace skc
