// sk_dot.cuh: the persistent memory-bound kernel of the Dot family (the entry header of its
// instantiations; jit.py inlines its includes). It walks the same split table as sk_gemm and
// merges split tiles with the same Fixup (fixup.cuh); only the loop body differs. The host
// emits a Cfg struct (skcontract/kernels/catalogue.py, Dot) naming:
//   TIn, TOut, Acc, BM, BN, BK, THREADS, MIN_BLOCKS, REDUCTION, SHAPE, VEC_A, VEC_B, UNROLL.
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
// A thread's CPT accumulators are its fragment for the fixup; the final split reduces them in
// a fixed order (lanes, then warps), so every protocol but atomic is bitwise reproducible.
// VEC_A / VEC_B: the operand reads 16 bytes per load (the host checked the alignment); else
// one element per load, lanes on consecutive elements.
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"
#include "fixup.cuh"

namespace skc {

enum : int { SHAPE_ROWS = 0, SHAPE_COLS = 1 };

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
template <class TOut, class Acc>
__device__ __forceinline__ void dot_store(TOut* p, Acc v, Acc alpha, Acc beta) {
  Acc out = acc_mul(alpha, v);
  if (beta != Acc(0)) out = acc_add(out, acc_mul(beta, AccCvt<TOut, Acc>::to_acc(*p)));
  *p = AccCvt<TOut, Acc>::from_acc(out);
}

// What the Fixup needs of a "mainloop": the accumulator type, threads and accumulators each.
template <class Cfg>
struct DotFragment {
  using Acc = typename Cfg::Acc;
  static constexpr int THREADS = Cfg::THREADS;
  static constexpr int CPT = 16 / (int)sizeof(typename Cfg::TIn);
  static constexpr int NACC = CPT;
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
      acc[e] = acc_add(acc[e], acc_mul(elem<TIn, Acc>(x, e), elem<TIn, Acc>(y, e)));
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
        acc[e] = acc_add(acc[e], acc_mul(load1<TIn, Acc>(x + k + e), load1<TIn, Acc>(y + k + e)));
    } else {
      // element e of a lane's chunk is chunk + e * 32 + lane: each load is coalesced
      for (int chunk = s.k0 + (warp % WPR) * 32 * CPT; chunk < k1; chunk += SWEEP) {
#pragma unroll
        for (int e = 0; e < CPT; ++e) {
          const int k = chunk + e * 32 + lane;
          if (k < k1)
            acc[e] = acc_add(acc[e], acc_mul(load1<TIn, Acc>(x + k), load1<TIn, Acc>(y + k)));
        }
      }
    }
  }

  // The final split: the row's sum (lanes, then its warps, in a fixed order) to C.
  __device__ __forceinline__ static void finish(const Split& s, const Acc (&acc)[CPT],
                                                typename Cfg::TOut* Cb, long long ldc,
                                                Acc alpha, Acc beta, Acc* red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    Acc v = acc[0];
#pragma unroll
    for (int e = 1; e < CPT; ++e) v = acc_add(v, acc[e]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = acc_add(v, __shfl_xor_sync(0xffffffffu, v, off));
    if constexpr (WPR > 1) {
      if (lane == 0) red[warp] = v;
      __syncthreads();
      v = red[(warp / WPR) * WPR];
      for (int w = 1; w < WPR; ++w) v = acc_add(v, red[(warp / WPR) * WPR + w]);
      __syncthreads();  // red is reused by the next split
    }
    const int r = s.m0 + warp / WPR;
    if (lane == 0 && warp % WPR == 0 && r < s.m_end) dot_store(Cb + (long long)r * ldc, v, alpha, beta);
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
            acc[e] = acc_add(acc[e], acc_mul(v[u], elem<TIn, Acc>(wv[u], e)));
      }
      for (; k < s.k1; k += WARPS) {
        const Raw16 wv = load16(w0 + (long long)k * ldb + lane * CPT);
        const Acc v = load1<TIn, Acc>(gA + (long long)k * lda);
#pragma unroll
        for (int e = 0; e < CPT; ++e) acc[e] = acc_add(acc[e], acc_mul(v, elem<TIn, Acc>(wv, e)));
      }
    } else {
      for (; k < s.k1; k += WARPS) {
        const Acc v = load1<TIn, Acc>(gA + (long long)k * lda);
        const TIn* w = w0 + (long long)k * ldb;
#pragma unroll
        for (int e = 0; e < CPT; ++e) {
          const int c = column(lane, e);
          if (s.n0 + c < s.n_end) acc[e] = acc_add(acc[e], acc_mul(v, load1<TIn, Acc>(w + c)));
        }
      }
    }
  }

  // The final split: each column's sum over the warps (in warp order) to C.
  __device__ __forceinline__ static void finish(const Split& s, const Acc (&acc)[CPT],
                                                typename Cfg::TOut* Cb, long long ldc,
                                                Acc alpha, Acc beta, Acc* red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < CPT; ++e) red[warp * Cfg::BN + column(lane, e)] = acc[e];
    __syncthreads();
    for (int c = threadIdx.x; c < Cfg::BN; c += Cfg::THREADS) {
      if (s.n0 + c >= s.n_end) continue;
      Acc v = red[c];
      for (int w = 1; w < WARPS; ++w) v = acc_add(v, red[w * Cfg::BN + c]);
      dot_store(Cb + (long long)(s.n0 + c) * ldc, v, alpha, beta);
    }
    __syncthreads();  // red is reused by the next split
  }
};

template <class Cfg>
using DotBody = typename Conditional<Cfg::SHAPE == SHAPE_ROWS, DotRows<Cfg>, DotCols<Cfg>>::type;

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_dot(const typename Cfg::TIn* __restrict__ A, const typename Cfg::TIn* __restrict__ B,
       typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
       const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
       unsigned* locks, int M, int N, int K, int tile_order, long long lda, long long ldb,
       long long ldc, long long batch_a, long long batch_b, long long batch_c,
       typename Cfg::Acc alpha, typename Cfg::Acc beta) {
  using Acc = typename Cfg::Acc;
  using Frag = DotFragment<Cfg>;
  using Body = DotBody<Cfg>;
  using Fix = Fixup<Frag, Cfg::REDUCTION>;
  constexpr int RED = Cfg::SHAPE == SHAPE_ROWS ? Cfg::THREADS / 32 : (Cfg::THREADS / 32) * Cfg::BN;
  // the shared sum's scratch (fixup.cuh) and the final reduction share this
  constexpr int SCRATCH = RED > Cfg::THREADS * Fix::V ? RED : Cfg::THREADS * Fix::V;
  __shared__ Acc scratch[SCRATCH];
  __shared__ int flag;
  for_each_split<Cfg::BM, Cfg::BN>(table, cta_offsets, M, N, tile_order, [&](const Split& s) {
    Acc acc[Frag::NACC];
#pragma unroll
    for (int e = 0; e < Frag::NACC; ++e) acc[e] = Acc(0);
    Body::compute(s, A + (long long)s.batch * batch_a, B + (long long)s.batch * batch_b, lda,
                  ldb, acc);
    if (Fix::run(s, acc, ws, staging, locks, &flag))
      Body::finish(s, acc, C + (long long)s.batch * batch_c, ldc, alpha, beta, scratch);
  });
  if constexpr (Cfg::REDUCTION == REDUCTION_ARRIVAL) {
    // Shared sums: the CTA has arrived on all its tiles; now it waits and sums its shares.
    for_each_split<Cfg::BM, Cfg::BN, false, true>(table, cta_offsets, M, N, tile_order,
                                                  [&](const Split& s) {
      if (!s.shared_sum()) return;
      Acc acc[Frag::NACC];
      bool last = false;
      Fix::finish_shared_in_one(s, ws, locks, &flag, scratch, [&](int i, Acc v) {
        acc[i] = v;
        last = true;
      });
      __syncthreads();  // the scratch is the final reduction's next
      if (last) Body::finish(s, acc, C + (long long)s.batch * batch_c, ldc, alpha, beta, scratch);
    });
  }
}

}  // namespace skc
