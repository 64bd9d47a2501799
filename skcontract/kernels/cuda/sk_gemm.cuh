// sk_gemm.cuh: the persistent Stream-K GEMM kernel (the entry header; jit.py inlines its
// includes). One template, one instantiation per KernelSpec; the host emits a Cfg struct
// (skcontract/kernels/specs.py) naming:
//   TIn, TOut, Acc, BM, BN, BK, STAGES, THREADS, MIN_BLOCKS, REDUCTION, LA, LB (TileLoader), ML (mainloop).
// Structure (stream_k_gemm, shared with sk_conv.cuh's implicit-GEMM entry): scheduler loop
// over the CTA's split-table rows -> multi-stage cp.async pipeline feeding ML::compute ->
// Fixup -> Epilogue; with the arrival protocol, a second walk over the
// rows finishes the shared sums (fixup.cuh) once the CTA has arrived on all its tiles.
// docs/design/stream_k.md and docs/design/kernels.md describe the design.
//
// The mainloop interface (ML), all that the kernel, the fixup and the epilogue use:
//   Acc, THREADS, NACC          accumulator type, threads per CTA, accumulators per thread
//   zero(acc)                   acc[0 .. NACC) = 0
//   compute(As, Bs, acc)        acc += one BK slice of the A and B stages in shared memory
//   coord(t, i, r, c)           tile-relative row / column of thread t's accumulator i
//   PAIR, PAIR_STRIDE           PAIR == 2: accumulators i and i + PAIR_STRIDE (i / PAIR_STRIDE
//                               even) are columns c (even) and c + 1 of one row (epilogue.cuh;
//                               PAIR_STRIDE defaults to 1)
// and optionally (each off when the mainloop does not declare it):
//   SPREADS_LOADS, STEPS        compute(As, Bs, acc, between) calls between(s) once per k
//                               step s < STEPS; the kernel issues the next k-tile's copies there
//   SHIFT_WINDOWS               edge tiles compute over a window shifted inside the operands
//                               (window_origin below)
//   SCRATCH_BYTES               shared memory after the stages, passed as compute's 4th
//                               argument (unsigned char*) when nonzero
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"
#include "loader.cuh"
#include "mma_fragments.cuh"
#include "mainloop_mma16.cuh"
#include "mainloop_dmma.cuh"
#include "mainloop_tf32.cuh"
#include "mainloop_imma.cuh"
#include "mainloop_ffma.cuh"
#include "fixup.cuh"
#include "epilogue.cuh"

namespace skc {

// Shared memory a mainloop needs after the pipeline stages (ML::SCRATCH_BYTES; 0 when a
// mainloop does not declare it), passed to its compute() as a 4th argument when nonzero.
template <class ML, class = void> struct MainloopScratch { static constexpr int BYTES = 0; };
template <class ML> struct MainloopScratch<ML, decltype(void(ML::SCRATCH_BYTES))> {
  static constexpr int BYTES = ML::SCRATCH_BYTES;
};

// Whether a mainloop takes the next k-tile's copies between its k steps (ML::SPREADS_LOADS:
// compute(As, Bs, acc, between) calls between(step) once per k step; off unless it says so).
template <class ML, class = void> struct SpreadsLoads { static constexpr bool value = false; };
template <class ML> struct SpreadsLoads<ML, decltype(void(ML::SPREADS_LOADS))> {
  static constexpr bool value = ML::SPREADS_LOADS;
};

// Whether a mainloop shifts edge windows (ML::SHIFT_WINDOWS; off unless it says so).
template <class ML, class = void> struct ShiftsWindows { static constexpr bool value = false; };
template <class ML> struct ShiftsWindows<ML, decltype(void(ML::SHIFT_WINDOWS))> {
  static constexpr bool value = ML::SHIFT_WINDOWS;
};

// Origin of the window a split computes along one operand's x (M for A, N for B): the
// tile's x0, except for an edge tile (overhanging x_end) of an operand at least a tile
// wide, whose window is shifted back to end at x_end. Then every k-tile lies inside the
// operand and loads through load_interior(), instead of the edge tiles zero-filling through
// the predicated path on every k-tile while the rest of the wave waits for them. The
// shifted-in lines belong to the neighbouring tile; the epilogue does not store them. An
// x-contiguous operand shifts only by whole 16-byte chunks (cp.async alignment), else stays
// put. Opt-in per mainloop (SHIFT_WINDOWS): the fp64 DMMA "vec" kernels gain from it; on the
// FFMA kernel the epilogue's extra lower-bound checks cost more than it saves
// (docs/design/kernels.md).
template <class L, int X, bool ENABLED>
__device__ __forceinline__ int window_origin(int x0, int x_end) {
  if constexpr (!ENABLED || !L::INTERIOR_PATH) {
    return x0;
  } else {
    const int w = x_end - X;
    return x0 + X > x_end && w >= 0 && (L::KC || w % L::CHUNK_ELEMS == 0) ? w : x0;
  }
}

// Operand A read from a dense strided matrix (batch entries batch_a elements apart): the
// A source of sk_gemm. A source makes a split's k-tiles (tiles(s): DenseTiles' interface) and
// says whether edge windows may shift along M (SHIFTS; sk_conv.cuh's im2col source cannot).
template <class L, int BK>
struct DenseSource {
  using T = typename L::Elem;
  static constexpr bool SHIFTS = true;
  const T* A;
  long long lda, batch_a;
  __device__ __forceinline__ DenseTiles<L, BK> tiles(const Split& s) const {
    return DenseTiles<L, BK>(A + (long long)s.batch * batch_a, lda, s.mw, s.m_end, s.k0, s.k1);
  }
};

// The persistent Stream-K GEMM over the split table, A from `a_source` (a DenseSource or
// sk_conv.cuh's Im2colSource), B dense; the body of every sk_gemm.cuh-family kernel entry.
template <class Cfg, class ASource>
__device__ __forceinline__ void stream_k_gemm(
    const ASource& a_source, const typename Cfg::TIn* __restrict__ B,
    typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
    const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
    unsigned* locks, int M, int N, int tile_order, long long ldb, long long ldc,
    long long batch_b, long long batch_c, typename Cfg::Acc alpha, typename Cfg::Acc beta) {
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

  // Register-bound kernels (512 threads: a 128-register cap; or 128+ accumulator registers a
  // thread) re-read the split loop's end rather than hold it (sk_scheduler.cuh says why).
  constexpr bool TIGHT_REGISTERS = Cfg::THREADS > 256 || ML::NACC * sizeof(Acc) >= 512;

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

  constexpr bool SHIFT = ShiftsWindows<ML>::value;
  constexpr bool SHIFT_A = SHIFT && ASource::SHIFTS;
  constexpr bool SPREAD = SpreadsLoads<ML>::value && LA::INTERIOR_PATH && LB::INTERIOR_PATH;
  using Epi = Epilogue<ML, typename Cfg::TOut, SHIFT_A && LA::INTERIOR_PATH,
                       SHIFT && LB::INTERIOR_PATH>;
  auto windowed = [](Split s) {
    s.mw = window_origin<LA, Cfg::BM, SHIFT_A>(s.m0, s.m_end);
    s.nw = window_origin<LB, Cfg::BN, SHIFT>(s.n0, s.n_end);
    return s;
  };
  for_each_split<Cfg::BM, Cfg::BN, TIGHT_REGISTERS>(table, cta_offsets, M, N, tile_order,
                                                   [&](const Split& row) {
    const Split s = windowed(row);
    Acc acc[ML::NACC];
    ML::zero(acc);
    const int ktiles = (s.k1 - s.k0 + BK - 1) / BK;
    // k-tiles wholly inside an operand (the tile inside it along x, before the split's k
    // end) load without per-chunk predicates; the edge ones zero-fill.
    const auto a = a_source.tiles(s);
    const DenseTiles<LB, BK> b(B + (long long)s.batch * batch_b, ldb, s.nw, s.n_end, s.k0, s.k1);
    auto load_k_tile = [&](int stage, int kt) {
      a.load(sA + stage * LA::STAGE_ELEMS, kt);
      b.load(sB + stage * LB::STAGE_ELEMS, kt);
    };
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < ktiles) load_k_tile(st, st);
      cp_async_commit();
    }
    int read_stage = 0, write_stage = STAGES - 1;
    for (int kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int nk = kt + STAGES - 1;
      if constexpr (SPREAD) {
        // interior k-tiles: a part of the copies after each k step's fragment loads
        const bool spread = nk < ktiles && a.interior(nk) && b.interior(nk);
        if (nk < ktiles && !spread) load_k_tile(write_stage, nk);
        TIn* a_stage = sA + write_stage * LA::STAGE_ELEMS;
        TIn* b_stage = sB + write_stage * LB::STAGE_ELEMS;
        ML::compute(sA + read_stage * LA::STAGE_ELEMS, sB + read_stage * LB::STAGE_ELEMS, acc,
                    [&](int step) {
                      if (spread) {
                        a.load_part(a_stage, nk, step, ML::STEPS);
                        b.load_part(b_stage, nk, step, ML::STEPS);
                      }
                    });
        cp_async_commit();
      } else {
        if (nk < ktiles) load_k_tile(write_stage, nk);
        cp_async_commit();
        if constexpr (SCRATCH_BYTES > 0)
          ML::compute(sA + read_stage * LA::STAGE_ELEMS, sB + read_stage * LB::STAGE_ELEMS, acc,
                      scratch);
        else
          ML::compute(sA + read_stage * LA::STAGE_ELEMS, sB + read_stage * LB::STAGE_ELEMS, acc);
      }
      read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
      write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // the next split's prologue overwrites the stages
    if (Fixup<ML, Cfg::REDUCTION>::run(s, acc, ws, staging, locks, &flag))
      Epi::run(s, acc, C + (long long)s.batch * batch_c, ldc, alpha, beta);
  }, FollowPreviousGrid<Cfg::REDUCTION, false, false>());
  if constexpr (Cfg::REDUCTION == REDUCTION_ARRIVAL) {
    // Shared sums: the CTA has arrived on all its tiles; now it waits and sums its shares.
    static_assert(STAGES_BYTES >= Cfg::THREADS * 16,
                  "the shared sum's scratch lives in the pipeline stages");
    for_each_split<Cfg::BM, Cfg::BN, TIGHT_REGISTERS, true>(table, cta_offsets, M, N,
                                                            tile_order, [&](const Split& row) {
      if (!row.shared_sum()) return;
      const Split s = windowed(row);  // the window its accumulators were computed over
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      using Fx = Fixup<ML, Cfg::REDUCTION>;
      Fx::finish_shared(s, ws, locks, reinterpret_cast<Acc*>(smem_raw),
                        [&](unsigned t, int i, const Acc (&v)[Fx::V]) {
                          Epi::store_group(s, t, i, v, Cb, ldc, alpha, beta);
                        });
    });
  }
}

// The GEMM kernel: C = alpha * A B + beta * C over the split table, A and B dense.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_gemm(const typename Cfg::TIn* __restrict__ A, const typename Cfg::TIn* __restrict__ B,
        typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
        const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
        unsigned* locks, int M, int N, int K, int tile_order, long long lda, long long ldb,
        long long ldc,
        long long batch_a, long long batch_b, long long batch_c, typename Cfg::Acc alpha,
        typename Cfg::Acc beta) {
  const DenseSource<typename Cfg::LA, Cfg::BK> a_source{A, lda, batch_a};
  stream_k_gemm<Cfg>(a_source, B, C, table, cta_offsets, ws, staging, locks, M, N, tile_order,
                     ldb, ldc, batch_b, batch_c, alpha, beta);
}

}  // namespace skc
