// epilogue.cuh: C = alpha * acc + beta * C, converted to the output type, stored with bounds.
// int32 accumulators (int8 operands): alpha / beta are int32 and the arithmetic wraps mod 2^32.
// C is row-major with leading dimension ldc (the host transposes the problem for a
// column-major output). Accumulator coordinates are relative to the split's window origin
// (mw, nw); only the tile's own [m0, m_end) x [n0, n_end) is stored. beta == 0 never reads
// C, so a NaN-poisoned output is fully replaced.
// Column pairs of the mainloop's fragment go out as one vector store.
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"

namespace skc {

// Accumulators i and i + PAIR_STRIDE (i / PAIR_STRIDE even) of a mainloop with PAIR == 2 hold
// columns c (even) and c + 1 of one row: the epilogue stores them as one 2-element vector
// (full sectors, half the store instructions). PAIR_STRIDE is 1 unless the mainloop says.
template <class ML, class = void> struct PairStride { static constexpr int value = 1; };
template <class ML> struct PairStride<ML, decltype(void(ML::PAIR_STRIDE))> {
  static constexpr int value = ML::PAIR_STRIDE;
};
template <class T> struct alignas(2 * sizeof(T)) Pair { T v[2]; };

// SHIFT_M / SHIFT_N: whether the kernel may shift its windows along M / N (sk_gemm.cuh,
// window_origin); a kernel that never does skips the lower-bound compares.
template <class ML, class TOut, bool SHIFT_M = true, bool SHIFT_N = true>
struct Epilogue {
  using Acc = typename ML::Acc;
  static constexpr int STRIDE = PairStride<ML>::value;
  static constexpr bool PAIRED = ML::PAIR == 2 && ML::NACC % (2 * STRIDE) == 0;
  // lo <= x < hi: the split's own rows / columns of its window (x >= lo holds unless shifted)
  template <bool SHIFTED>
  __device__ __forceinline__ static bool inside(int x, int lo, int hi) {
    return (!SHIFTED || x >= lo) && x < hi;
  }
  // Accumulator i (the mainloop's register order) of this thread, with value `a`.
  __device__ __forceinline__ static void store_one(const Split& s, int i, Acc a,
                                                   TOut* __restrict__ C, long long ldc,
                                                   Acc alpha, Acc beta) {
    int r, c;
    ML::coord(i, r, c);
    const int gr = s.mw + r, gc = s.nw + c;
    if (inside<SHIFT_M>(gr, s.m0, s.m_end) && inside<SHIFT_N>(gc, s.n0, s.n_end)) {
      TOut* p = C + (long long)gr * ldc + gc;
      Acc v = acc_mul(alpha, a);
      if (beta != Acc(0)) v = acc_add(v, acc_mul(beta, AccCvt<TOut, Acc>::to_acc(*p)));
      *p = AccCvt<TOut, Acc>::from_acc(v);
    }
  }
  // Accumulators i and i + STRIDE: one vector store when both columns are inside and the
  // address is aligned for it (an odd ldc or C offset falls back to two element stores).
  __device__ __forceinline__ static void store_pair(const Split& s, int i, Acc a0, Acc a1,
                                                    TOut* __restrict__ C, long long ldc,
                                                    Acc alpha, Acc beta) {
    int r, c;
    ML::coord(i, r, c);
    const int gr = s.mw + r, gc = s.nw + c;
    TOut* p = C + (long long)gr * ldc + gc;
    if (inside<SHIFT_M>(gr, s.m0, s.m_end) && inside<SHIFT_N>(gc, s.n0, s.n_end - 1) &&
        (reinterpret_cast<unsigned long long>(p) & (sizeof(Pair<TOut>) - 1)) == 0) {
      Acc v0 = acc_mul(alpha, a0), v1 = acc_mul(alpha, a1);
      if (beta != Acc(0)) {
        const Pair<TOut> old = *reinterpret_cast<const Pair<TOut>*>(p);
        v0 = acc_add(v0, acc_mul(beta, AccCvt<TOut, Acc>::to_acc(old.v[0])));
        v1 = acc_add(v1, acc_mul(beta, AccCvt<TOut, Acc>::to_acc(old.v[1])));
      }
      Pair<TOut> out;
      out.v[0] = AccCvt<TOut, Acc>::from_acc(v0);
      out.v[1] = AccCvt<TOut, Acc>::from_acc(v1);
      *reinterpret_cast<Pair<TOut>*>(p) = out;
    } else {
      store_one(s, i, a0, C, ldc, alpha, beta);
      store_one(s, i + STRIDE, a1, C, ldc, alpha, beta);
    }
  }
  __device__ __forceinline__ static void run(const Split& s, const Acc (&acc)[ML::NACC],
                                             TOut* __restrict__ C, long long ldc, Acc alpha,
                                             Acc beta) {
    if constexpr (PAIRED) {
#pragma unroll
      for (int i = 0; i < ML::NACC; ++i)
        if ((i / STRIDE) % 2 == 0) store_pair(s, i, acc[i], acc[i + STRIDE], C, ldc, alpha, beta);
    } else {
#pragma unroll
      for (int i = 0; i < ML::NACC; ++i) store_one(s, i, acc[i], C, ldc, alpha, beta);
    }
  }
};

}  // namespace skc
