// sk_dot.cuh: the persistent memory-bound kernel of the Dot family (the entry header of its
// instantiations; jit.py inlines its includes). It walks the same split table as sk_gemm and
// merges split tiles with the same protocols' steps (fixup.cuh, FixupSteps); only the loop body
// and what a split hands on differ. The host
// emits a Cfg struct (skcontract/kernels/catalogue/dot.py, Dot) naming:
//   TIn, TOut, Acc, BM, BN, BK, THREADS, MIN_BLOCKS, REDUCTION, SHAPE, VEC_A, VEC_B, UNROLL,
//   CONJ_A, CONJ_B.
//
// Two shapes, each a problem whose bytes are read once (docs/design/kernels.md):
//   SHAPE_ROWS : C[b, r] = alpha * sum_k X[b, r, k] * Y[b, r, k] + beta * C[b, r]
//                X = A (row stride lda), Y = B (row stride ldb, 0 for a matrix-vector
//                product); k is contiguous in both. The table's tiles are BM rows x 1
//                (M = rows, N = 1). WARPS / BM warps share a row; each lane reads CPT
//                (16 bytes of) elements per sweep.
//   SHAPE_COLS : C[b, c] = alpha * sum_k V[b, k] * W[b, k, c] + beta * C[b, c]
//                V = A (a vector, k stride lda), W = B (row stride ldb, c contiguous). The
//                tiles are 1 x BN columns (M = 1, N = columns); the warps split k, each lane
//                owns CPT columns, and the warps' sums meet in shared memory.
// Output elements are ldc apart (rows: along r; cols: along c), batches batch_c apart.
// Every split first reduces its threads' accumulators to the tile's OUT = BM x BN output sums
// (lanes, then warps, in a fixed order); those sums are its partial, all that the fixup moves
// (DotMerge: 4-8 bytes an output, where a GEMM family moves its whole accumulator fragment).
// The split that completes a tile sums its peers' partials with every thread (THREADS / OUT
// threads an output, each every THREADS / OUT-th peer, then the threads by a fixed tree), so
// every protocol but atomic is bitwise reproducible run to run.
// VEC_A / VEC_B: the operand reads 16 bytes per load (the host checked the alignment); else
// one element per load, lanes on consecutive elements.
// Complex operands (complex.cuh) run the same code: a complex accumulator, its products'
// four real multiply-adds, alpha and beta real (ScalarOf); their splits merge through the
// workspace (no device atomic adds a complex pair as one).
#pragma once
#include "sk_common.cuh"
#include "complex.cuh"
#include "sk_scheduler.cuh"
#include "fixup.cuh"

namespace skc {

enum : int { SHAPE_ROWS = 0, SHAPE_COLS = 1 };

// An element of A times one of B, each conjugated where the Cfg says (CONJ_A, CONJ_B: an
// operand the step reads conjugated; complex only).
template <class Cfg, class Acc>
__device__ __forceinline__ Acc dot_mul(Acc a, Acc b) {
  return acc_mul(conj_if<Cfg::CONJ_A>(a), conj_if<Cfg::CONJ_B>(b));
}

// 16 bytes loaded as they are; converted where they are used, so that a thread's loads in
// flight hold 4 registers each whatever the element type.
struct Raw16 {
  unsigned w[4];
};

__device__ __forceinline__ Raw16 load16(const void* p) {
  Raw16 r;
  asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  return r;
}

// Element e of the 16 bytes, as an accumulator.
template <class T, class Acc>
__device__ __forceinline__ Acc elem(const Raw16& r, int e) {
  return AccCvt<T, Acc>::to_acc(reinterpret_cast<const T*>(r.w)[e]);
}

template <class T, class Acc>
__device__ __forceinline__ Acc load1(const T* p) {
  return AccCvt<T, Acc>::to_acc(p[0]);
}

// *p = alpha * v + beta * *p (beta == 0 never reads *p: a poisoned output is replaced).
template <class TOut, class Acc, class Scalar>
__device__ __forceinline__ void dot_store(TOut* p, Acc v, Scalar alpha, Scalar beta) {
  Acc out = acc_scale(alpha, v);
  if (beta != Scalar(0)) out = acc_add(out, acc_scale(beta, AccCvt<TOut, Acc>::to_acc(*p)));
  *p = AccCvt<TOut, Acc>::from_acc(out);
}

// __shfl_xor_sync over the full warp (a complex value as its two parts).
template <class T>
__device__ __forceinline__ T shfl_xor_all(T v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <class R>
__device__ __forceinline__ Complex<R> shfl_xor_all(Complex<R> v, int lane_mask) {
  return Complex<R>(shfl_xor_all(v.re, lane_mask), shfl_xor_all(v.im, lane_mask));
}

// A thread's accumulators: one per element of its 16-byte loads.
template <class Cfg>
struct DotFragment {
  static constexpr int CPT = 16 / (int)sizeof(typename Cfg::TIn);
};

template <class Cfg>
struct DotRows {
  using TIn = typename Cfg::TIn;
  using Acc = typename Cfg::Acc;
  static constexpr int CPT = DotFragment<Cfg>::CPT;
  static constexpr int WARPS = Cfg::THREADS / 32, WPR = WARPS / Cfg::BM;
  static constexpr int SWEEP = WPR * 32 * CPT;  // elements of a row one sweep of its warps reads
  static_assert(WARPS % Cfg::BM == 0, "whole warps per row");
  static_assert(Cfg::BK % SWEEP == 0, "a k-iteration is whole sweeps");

  __device__ __forceinline__ static void fma(Acc (&acc)[CPT], const Raw16& x, const Raw16& y) {
#pragma unroll
    for (int e = 0; e < CPT; ++e)
      acc[e] = acc_add(acc[e], dot_mul<Cfg>(elem<TIn, Acc>(x, e), elem<TIn, Acc>(y, e)));
  }

  // acc += the thread's products of row (s.m0 + warp / WPR) over [s.k0, s.k1).
  __device__ __forceinline__ static void compute(const Split& s, const TIn* gA, const TIn* gB,
                                                 long long lda, long long ldb, Acc (&acc)[CPT]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = s.m0 + warp / WPR;
    if (r >= s.m_end) return;
    const TIn* x = gA + (long long)r * lda;
    const TIn* y = gB + (long long)r * ldb;
    const int k1 = s.k1;
    if constexpr (Cfg::VEC_A && Cfg::VEC_B) {
      int k = s.k0 + ((warp % WPR) * 32 + lane) * CPT;
      for (; k + (Cfg::UNROLL - 1) * SWEEP + CPT <= k1; k += Cfg::UNROLL * SWEEP) {
        Raw16 xv[Cfg::UNROLL], yv[Cfg::UNROLL];
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; ++u) {
          xv[u] = load16(x + k + u * SWEEP);
          yv[u] = load16(y + k + u * SWEEP);
        }
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; ++u) fma(acc, xv[u], yv[u]);
      }
      for (; k + CPT <= k1; k += SWEEP) {
        fma(acc, load16(x + k), load16(y + k));
      }
      for (int e = 0; k + e < k1 && e < CPT; ++e)  // the row's last, partial vector
        acc[e] = acc_add(acc[e],
                         dot_mul<Cfg>(load1<TIn, Acc>(x + k + e), load1<TIn, Acc>(y + k + e)));
    } else {
      // element e of a lane's chunk is chunk + e * 32 + lane: each load is coalesced
      for (int chunk = s.k0 + (warp % WPR) * 32 * CPT; chunk < k1; chunk += SWEEP) {
#pragma unroll
        for (int e = 0; e < CPT; ++e) {
          const int k = chunk + e * 32 + lane;
          if (k < k1)
            acc[e] = acc_add(acc[e], dot_mul<Cfg>(load1<TIn, Acc>(x + k), load1<TIn, Acc>(y + k)));
        }
      }
    }
  }

  // The split's row sums (lanes, then the row's warps, in a fixed order) into out[0 .. BM).
  __device__ __forceinline__ static void totals(const Acc (&acc)[CPT], Acc* red, Acc* out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    Acc v = acc[0];
#pragma unroll
    for (int e = 1; e < CPT; ++e) v = acc_add(v, acc[e]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = acc_add(v, shfl_xor_all(v, off));
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (threadIdx.x < Cfg::BM) {
      Acc t = red[threadIdx.x * WPR];
      for (int w = 1; w < WPR; ++w) t = acc_add(t, red[threadIdx.x * WPR + w]);
      out[threadIdx.x] = t;
    }
    __syncthreads();
  }
};

template <class Cfg>
struct DotCols {
  using TIn = typename Cfg::TIn;
  using Acc = typename Cfg::Acc;
  static constexpr int CPT = DotFragment<Cfg>::CPT;
  static constexpr int WARPS = Cfg::THREADS / 32;
  static_assert(Cfg::BN == 32 * CPT, "a tile is one warp's columns");
  static_assert(Cfg::BK % (WARPS * Cfg::UNROLL) == 0, "a k-iteration is whole row groups");

  // Column of accumulator e of `lane`, relative to the tile.
  __device__ __forceinline__ static int column(int lane, int e) {
    return Cfg::VEC_B ? lane * CPT + e : e * 32 + lane;
  }

  // acc += V[k] * W[k, columns] for the thread's rows k = s.k0 + warp + WARPS * j.
  __device__ __forceinline__ static void compute(const Split& s, const TIn* gA, const TIn* gB,
                                                 long long lda, long long ldb, Acc (&acc)[CPT]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool full = s.n0 + Cfg::BN <= s.n_end;
    const TIn* w0 = gB + s.n0;
    int k = s.k0 + warp;
    constexpr int STEP = WARPS * Cfg::UNROLL;
    if (Cfg::VEC_B && full) {
      for (; k + (Cfg::UNROLL - 1) * WARPS < s.k1; k += STEP) {
        Raw16 wv[Cfg::UNROLL];
        Acc v[Cfg::UNROLL];
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; ++u) {
          const long long kk = k + u * WARPS;
          wv[u] = load16(w0 + kk * ldb + lane * CPT);
          v[u] = load1<TIn, Acc>(gA + kk * lda);
        }
#pragma unroll
        for (int u = 0; u < Cfg::UNROLL; ++u)
#pragma unroll
          for (int e = 0; e < CPT; ++e)
            acc[e] = acc_add(acc[e], dot_mul<Cfg>(v[u], elem<TIn, Acc>(wv[u], e)));
      }
      for (; k < s.k1; k += WARPS) {
        const Raw16 wv = load16(w0 + (long long)k * ldb + lane * CPT);
        const Acc v = load1<TIn, Acc>(gA + (long long)k * lda);
#pragma unroll
        for (int e = 0; e < CPT; ++e)
          acc[e] = acc_add(acc[e], dot_mul<Cfg>(v, elem<TIn, Acc>(wv, e)));
      }
    } else {
      for (; k < s.k1; k += WARPS) {
        const Acc v = load1<TIn, Acc>(gA + (long long)k * lda);
        const TIn* w = w0 + (long long)k * ldb;
#pragma unroll
        for (int e = 0; e < CPT; ++e) {
          const int c = column(lane, e);
          if (s.n0 + c < s.n_end) acc[e] = acc_add(acc[e], dot_mul<Cfg>(v, load1<TIn, Acc>(w + c)));
        }
      }
    }
  }

  // The split's column sums (over the warps, in warp order) into out[0 .. BN).
  __device__ __forceinline__ static void totals(const Acc (&acc)[CPT], Acc* red, Acc* out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < CPT; ++e) red[warp * Cfg::BN + column(lane, e)] = acc[e];
    __syncthreads();
    for (int c = threadIdx.x; c < Cfg::BN; c += Cfg::THREADS) {
      Acc v = red[c];
      for (int w = 1; w < WARPS; ++w) v = acc_add(v, red[w * Cfg::BN + c]);
      out[c] = v;
    }
    __syncthreads();
  }
};

template <class Cfg>
using DotBody = typename Conditional<Cfg::SHAPE == SHAPE_ROWS, DotRows<Cfg>, DotCols<Cfg>>::type;

// One accumulator through L2 (.cg), as the fixup's workspace traffic goes.
__device__ __forceinline__ float ld_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ double ld_cg(const double* p) {
  double v;
  asm volatile("ld.global.cg.f64 %0, [%1];" : "=d"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ void st_cg(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void st_cg(double* p, double v) {
  asm volatile("st.global.cg.f64 [%0], %1;" ::"l"(p), "d"(v) : "memory");
}
template <class R>
__device__ __forceinline__ Complex<R> ld_cg(const Complex<R>* p) {
  const R* r = reinterpret_cast<const R*>(p);
  return Complex<R>(ld_cg(r), ld_cg(r + 1));
}
template <class R>
__device__ __forceinline__ void st_cg(Complex<R>* p, Complex<R> v) {
  R* r = reinterpret_cast<R*>(p);
  st_cg(r, v.re);
  st_cg(r + 1, v.im);
}

// The fixup of a split's output sums `tot` (thread o < OUT holds output o's): fixup.cuh's
// protocols, their steps FixupSteps' (the same locks, counters, waits and orderings as Fixup's;
// fixup.cuh's header argues them), on OUT sums a slot instead of a fragment. run returns true
// in every thread of the CTA that completes the tile, with the tile's sums in tot of threads
// o < OUT.
template <class Cfg>
struct DotMerge {
  using Acc = typename Cfg::Acc;
  static constexpr int OUT = Cfg::BM * Cfg::BN, THREADS = Cfg::THREADS;
  static constexpr int GROUPS = THREADS / OUT;  // threads that sum one output's peers
  static_assert(OUT <= THREADS && THREADS % OUT == 0 && (OUT & (OUT - 1)) == 0,
                "a power-of-two count of outputs, whole groups of threads each (sum_peers' "
                "shuffles pair lanes of one output)");
  using Steps = FixupSteps<CtaSync>;

  // The sum over the tile's PEERS slots (from `first`) of every output, into tot of threads
  // o < OUT: thread t sums output t % OUT over peers t / OUT, + GROUPS, ..., then each
  // output's GROUPS threads meet (lanes by a shuffle tree, then warps in order): a fixed
  // order, so the result is the same every run.
  __device__ __forceinline__ static void sum_peers(const Acc* first, int peers, Acc& tot,
                                                   Acc* red) {
    const int o = threadIdx.x % OUT, g = threadIdx.x / OUT;
    Acc v = Acc(0);
    for (int p = g; p < peers; p += GROUPS) v = acc_add(v, ld_cg(first + (long long)p * OUT + o));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if constexpr (OUT < 32) {
#pragma unroll
      for (int off = 16; off >= OUT; off >>= 1) v = acc_add(v, shfl_xor_all(v, off));
      if (lane < OUT) red[warp * OUT + lane] = v;
    } else {
      red[threadIdx.x] = v;
    }
    __syncthreads();
    constexpr int PARTS = OUT < 32 ? THREADS / 32 : GROUPS;  // per output, in order
    if (threadIdx.x < OUT) {
      tot = red[threadIdx.x];
      for (int w = 1; w < PARTS; ++w) tot = acc_add(tot, red[w * OUT + threadIdx.x]);
    }
    __syncthreads();  // red is reused by the next split
  }

  __device__ __forceinline__ static bool run(const Split& s, Acc& tot, Acc* ws, Acc* staging,
                                             unsigned* locks, int* flag, Acc* red) {
    if (Cfg::REDUCTION == REDUCTION_NONE || s.owns_tile()) return true;
    const int o = threadIdx.x;
    // branches at compile time: a complex accumulator has no atomicAdd, and no atomic kernel
    if constexpr (Cfg::REDUCTION == REDUCTION_DETERMINISTIC) {
      unsigned* lock = locks + s.tile;
      Acc* slot = ws + (long long)s.slot * OUT;
      Steps::wait_turn(s, lock);
      if (!s.first() && o < OUT) tot = acc_add(ld_cg(slot + o), tot);  // slot value first
      if (!s.final_()) {
        if (o < OUT) st_cg(slot + o, tot);
        Steps::pass_turn(s, lock);
        return false;
      }
      Steps::end_turns(lock);
      return true;
    } else if constexpr (Cfg::REDUCTION == REDUCTION_ARRIVAL) {
      if (o < OUT) st_cg(ws + (long long)s.slot * OUT + o, tot);
      if (!Steps::arrive_last(s, locks, flag)) return false;
      sum_peers(ws + ((long long)s.slot - s.split) * OUT, s.peers, tot, red);
      Steps::reset(s, locks);
      return true;
    } else if constexpr (Cfg::REDUCTION == REDUCTION_ATOMIC) {  // staging[TILE] kept zeroed
      Acc* sum = staging + (long long)s.tile * OUT;
      if (o < OUT) atomicAdd(sum + o, tot);
      if (!Steps::arrive_last(s, locks, flag)) return false;
      if (o < OUT) {
        tot = ld_cg(sum + o);
        st_cg(sum + o, Acc(0));
      }
      Steps::reset(s, locks);
      return true;
    } else {
      return true;  // REDUCTION_NONE: returned above
    }
  }
};

// Output o (< OUT) of the split's tile: C[row] (rows) or C[column] (cols), inside the operands.
template <class Cfg, class Scalar>
__device__ __forceinline__ void dot_emit(const Split& s, int o, typename Cfg::Acc v,
                                         typename Cfg::TOut* Cb, long long ldc, Scalar alpha,
                                         Scalar beta) {
  const int at = (Cfg::SHAPE == SHAPE_ROWS ? s.m0 : s.n0) + o;
  if (at < (Cfg::SHAPE == SHAPE_ROWS ? s.m_end : s.n_end))
    dot_store(Cb + (long long)at * ldc, v, alpha, beta);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_dot(const typename Cfg::TIn* __restrict__ A, const typename Cfg::TIn* __restrict__ B,
       typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
       const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
       unsigned* locks, int M, int N, int K, int tile_order, long long lda, long long ldb,
       long long ldc, long long batch_a, long long batch_b, long long batch_c,
       typename ScalarOf<typename Cfg::Acc>::type alpha,
       typename ScalarOf<typename Cfg::Acc>::type beta) {
  using Acc = typename Cfg::Acc;
  using Body = DotBody<Cfg>;
  using Merge = DotMerge<Cfg>;
  constexpr int OUT = Merge::OUT;
  // the totals' scratch (rows: a value a warp; cols: a column a warp) and sum_peers'
  constexpr int RED = Cfg::SHAPE == SHAPE_ROWS ? Cfg::THREADS / 32 : (Cfg::THREADS / 32) * Cfg::BN;
  constexpr int SCRATCH = RED > Cfg::THREADS ? RED : Cfg::THREADS;
  __shared__ Acc scratch[SCRATCH];
  __shared__ Acc sums[OUT];
  __shared__ int flag;
  for_each_split<Cfg::BM, Cfg::BN>(table, cta_offsets, M, N, tile_order, [&](const Split& s) {
    Acc acc[DotFragment<Cfg>::CPT];
#pragma unroll
    for (int e = 0; e < DotFragment<Cfg>::CPT; ++e) acc[e] = Acc(0);
    Body::compute(s, A + (long long)s.batch * batch_a, B + (long long)s.batch * batch_b, lda,
                  ldb, acc);
    Body::totals(acc, scratch, sums);
    Acc tot = threadIdx.x < OUT ? sums[threadIdx.x] : Acc(0);
    if (Merge::run(s, tot, ws, staging, locks, &flag, scratch) && threadIdx.x < OUT)
      dot_emit<Cfg>(s, threadIdx.x, tot, C + (long long)s.batch * batch_c, ldc, alpha, beta);
  }, FollowPreviousGrid<Cfg::REDUCTION>());
}

}  // namespace skc
