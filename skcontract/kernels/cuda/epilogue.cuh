// epilogue.cuh: C = alpha * acc + beta * C, converted to the output type, stored with bounds.
// Epilogue<ML, TOut, SHIFT_M, SHIFT_N>: run() stores a thread's accumulators, store_group()
// a run of any thread's (the arrival protocol's shared sums, where a CTA stores its share of
// a tile in the peers' fragment order); both use only the mainloop's Acc, NACC, coord(),
// PAIR and PAIR_STRIDE (sk_gemm.cuh).
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
  // Global row / column of window coordinate r / c, and whether the split stores it (its
  // own rows / columns of the window). Kernels that never shift check the upper bounds
  // only: the lower-bound compares would cost them code and time for nothing.
  __device__ __forceinline__ static int row(const Split& s, int r) {
    return (SHIFT_M ? s.mw : s.m0) + r;
  }
  __device__ __forceinline__ static int col(const Split& s, int c) {
    return (SHIFT_N ? s.nw : s.n0) + c;
  }
  // gr's row, and columns gc .. gc + width - 1, are the split's own
  __device__ __forceinline__ static bool owned(const Split& s, int gr, int gc, int width) {
    bool ok = gr < s.m_end && gc + width - 1 < s.n_end;
    if constexpr (SHIFT_M) ok = ok && gr >= s.m0;
    if constexpr (SHIFT_N) ok = ok && gc >= s.n0;
    return ok;
  }
  // Accumulator i (the mainloop's register order) of thread t, with value `a`.
  __device__ __forceinline__ static void store_one(const Split& s, unsigned t, int i, Acc a,
                                                   TOut* __restrict__ C, long long ldc,
                                                   Acc alpha, Acc beta) {
    int r, c;
    ML::coord(t, i, r, c);
    const int gr = row(s, r), gc = col(s, c);
    if (owned(s, gr, gc, 1)) {
      TOut* p = C + (long long)gr * ldc + gc;
      Acc v = acc_mul(alpha, a);
      if (beta != Acc(0)) v = acc_add(v, acc_mul(beta, AccCvt<TOut, Acc>::to_acc(*p)));
      *p = AccCvt<TOut, Acc>::from_acc(v);
    }
  }
  // Accumulators i and i + STRIDE: one vector store when both columns are inside and the
  // address is aligned for it (an odd ldc or C offset falls back to two element stores).
  __device__ __forceinline__ static void store_pair(const Split& s, unsigned t, int i, Acc a0,
                                                    Acc a1, TOut* __restrict__ C,
                                                    long long ldc, Acc alpha, Acc beta) {
    int r, c;
    ML::coord(t, i, r, c);
    const int gr = row(s, r), gc = col(s, c);
    TOut* p = C + (long long)gr * ldc + gc;
    if (owned(s, gr, gc, 2) &&
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
      store_one(s, t, i, a0, C, ldc, alpha, beta);
      store_one(s, t, i + STRIDE, a1, C, ldc, alpha, beta);
    }
  }
  // Accumulators i .. i + N - 1 of thread t, values v: column pairs as vectors where the
  // mainloop's pairs are adjacent accumulators (PAIR_STRIDE 1).
  template <int N>
  __device__ __forceinline__ static void store_group(const Split& s, unsigned t, int i,
                                                     const Acc (&v)[N], TOut* __restrict__ C,
                                                     long long ldc, Acc alpha, Acc beta) {
    if constexpr (PAIRED && STRIDE == 1 && N % 2 == 0) {
#pragma unroll
      for (int e = 0; e < N; e += 2) store_pair(s, t, i + e, v[e], v[e + 1], C, ldc, alpha, beta);
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e) store_one(s, t, i + e, v[e], C, ldc, alpha, beta);
    }
  }
  __device__ __forceinline__ static void run(const Split& s, const Acc (&acc)[ML::NACC],
                                             TOut* __restrict__ C, long long ldc, Acc alpha,
                                             Acc beta) {
    if constexpr (PAIRED) {
#pragma unroll
      for (int i = 0; i < ML::NACC; ++i)
        if ((i / STRIDE) % 2 == 0)
          store_pair(s, threadIdx.x, i, acc[i], acc[i + STRIDE], C, ldc, alpha, beta);
    } else {
#pragma unroll
      for (int i = 0; i < ML::NACC; ++i) store_one(s, threadIdx.x, i, acc[i], C, ldc, alpha, beta);
    }
  }
};

}  // namespace skc
