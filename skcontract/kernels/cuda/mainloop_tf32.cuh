// mainloop_tf32.cuh: tf32 tensor-core mainloop (MainloopTf32) for float32 operands when the
// caller allows tf32: mma.sync m16n8k8 .tf32 with fp32 accumulators, operands read through
// 4- / 8-byte shared loads and rounded by cvt.rna.tf32.f32. Implements the mainloop
// interface of sk_gemm.cuh; the accumulator half comes from MmaM16N8Accumulators
// (mma_fragments.cuh).
//
// Fragments (g = lane / 4, t = lane % 4): a0 = A(g, t), a1 = A(g + 8, t), a2 = A(g, t + 4),
// a3 = A(g + 8, t + 4); b0 = B(k = t, n = g), b1 = B(t + 4, g).
// The k index of the fragment is permuted inside each k8 step, for A and B alike (fragment k
// t -> 2t, t + 4 -> 2t + 1): the 8 products summed are the same, and a k-contiguous operand
// then gives each thread its two k values as one 8-byte load (pitch BK + 8: conflict-free
// per half warp). x-contiguous operands (pitch X + 4) are read as scalars: banks 8t + g.
#pragma once
#include "sk_common.cuh"
#include "mma_fragments.cuh"

namespace skc {

__device__ __forceinline__ unsigned to_tf32(float f) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// X(x, k) and X(x, k + 1) of a stage (k even), converted to tf32.
template <class L>
__device__ __forceinline__ void lds_tf32_pair(const float* stage, int x, int k, unsigned& lo,
                                              unsigned& hi) {
  if constexpr (L::KC) {
    const float2 v = *reinterpret_cast<const float2*>(&L::at(stage, x, k));
    lo = to_tf32(v.x);
    hi = to_tf32(v.y);
  } else {
    lo = to_tf32(L::at(stage, x, k));
    hi = to_tf32(L::at(stage, x, k + 1));
  }
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, class LA, class LB>
struct MainloopTf32 : MmaM16N8Accumulators<float, BM, BN, WARPS_M, WARPS_N> {
  SKC_M16N8_ACCUMULATORS(float)
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 8 == 0, "tf32 tile shape");
  static_assert(!LA::KC || LA::LDS % 2 == 0, "8-byte fragment loads need an even pitch");
  static_assert(!LB::KC || LB::LDS % 2 == 0, "8-byte fragment loads need an even pitch");

  __device__ __forceinline__ static void compute(const float* As, const float* Bs,
                                                 Acc (&acc)[NACC]) {
    const int warp = threadIdx.x / 32, l = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int g = l / 4, t = l % 4;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      unsigned a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int x = wm * WM + mi * 16 + g;
        lds_tf32_pair<LA>(As, x, kk + 2 * t, a[mi][0], a[mi][2]);
        lds_tf32_pair<LA>(As, x + 8, kk + 2 * t, a[mi][1], a[mi][3]);
      }
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj) {
        unsigned b0, b1;
        lds_tf32_pair<LB>(Bs, wn * WN + nj * 8 + g, kk + 2 * t, b0, b1);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
          mma_tf32(*reinterpret_cast<float(*)[4]>(&acc[(mi * NJ + nj) * 4]), a[mi], b0, b1);
      }
    }
  }
};

}  // namespace skc
