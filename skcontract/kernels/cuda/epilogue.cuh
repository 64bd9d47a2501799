// epilogue.cuh: C = alpha * acc + beta * C, converted to the output type, stored with bounds.
// int32 accumulators (int8 operands): alpha / beta are int32 and the arithmetic wraps mod 2^32.
// C is row-major with leading dimension ldc (the host transposes the problem for a
// column-major output). beta == 0 never reads C, so a NaN-poisoned output is fully replaced.
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"

namespace skc {

template <class ML, class TOut>
struct Epilogue {
  using Acc = typename ML::Acc;
  // Accumulator i (the mainloop's register order) of this thread, with value `a`.
  __device__ __forceinline__ static void store_one(const Split& s, int i, Acc a,
                                                   TOut* __restrict__ C, long long ldc,
                                                   Acc alpha, Acc beta) {
    int r, c;
    ML::coord(i, r, c);
    const int gr = s.m0 + r, gc = s.n0 + c;
    if (gr < s.m_end && gc < s.n_end) {
      TOut* p = C + (long long)gr * ldc + gc;
      Acc v = acc_mul(alpha, a);
      if (beta != Acc(0)) v = acc_add(v, acc_mul(beta, AccCvt<TOut, Acc>::to_acc(*p)));
      *p = AccCvt<TOut, Acc>::from_acc(v);
    }
  }
  __device__ __forceinline__ static void run(const Split& s, const Acc (&acc)[ML::NACC],
                                             TOut* __restrict__ C, long long ldc, Acc alpha,
                                             Acc beta) {
#pragma unroll
    for (int i = 0; i < ML::NACC; ++i) store_one(s, i, acc[i], C, ldc, alpha, beta);
  }
};

}  // namespace skc
