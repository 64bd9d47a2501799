// mainloop_ffma.cuh: exact CUDA-core mainloop (fp32 FFMA / fp64 DFMA, no tf32 rounding).
// THREADS = 256 arranged 16 x 16; thread (ty, tx) owns rows ty + 16 i and columns tx + 16 j,
// so one warp reads 16 consecutive B values and 2 A values per k (no bank conflicts).
#pragma once
#include "sk_common.cuh"

namespace skc {

__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

template <class T, int BM, int BN, int BK, class LA, class LB>
struct MainloopFfma {
  using Acc = T;
  static constexpr int THREADS = 256;
  static constexpr int TM = BM / 16, TN = BN / 16;
  static constexpr int NACC = TM * TN;
  static constexpr int PAIR = 1;
  static_assert(BM % 16 == 0 && BN % 16 == 0, "ffma tile shape");

  __device__ __forceinline__ static void zero(Acc (&acc)[NACC]) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = Acc(0);
  }
  __device__ __forceinline__ static void coord(int i, int& r, int& c) {
    r = threadIdx.x / 16 + 16 * (i / TN);
    c = threadIdx.x % 16 + 16 * (i % TN);
  }
  __device__ __forceinline__ static void compute(const T* As, const T* Bs, Acc (&acc)[NACC]) {
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll 4
    for (int k = 0; k < BK; ++k) {
      T a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = LA::at(As, ty + 16 * i, k);
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = LB::at(Bs, tx + 16 * j, k);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i * TN + j] = fma_rn(a[i], b[j], acc[i * TN + j]);
    }
  }
};

}  // namespace skc
