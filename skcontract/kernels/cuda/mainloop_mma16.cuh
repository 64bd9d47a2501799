// mainloop_mma16.cuh: fp16 / bf16 tensor-core mainloop (MainloopMma16), mma.sync
// m16n8k16 with fp32 accumulators, operands read through ldmatrix (.trans for an
// x-contiguous stage). Implements the mainloop interface of sk_gemm.cuh; the accumulator
// half comes from MmaM16N8Accumulators (mma_fragments.cuh).
#pragma once
#include "sk_common.cuh"
#include "mma_fragments.cuh"

namespace skc {

// LA / LB are the TileLoader types (they fix the shared-memory layout); A_KC / B_KC whether
// each operand's stage is k-contiguous.
template <class T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, class LA, class LB,
          bool A_KC, bool B_KC>
struct MainloopMma16 : MmaM16N8Accumulators<float, BM, BN, WARPS_M, WARPS_N> {
  SKC_M16N8_ACCUMULATORS(float)
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "mma.sync tile shape");

  __device__ __forceinline__ static void compute(const T* As, const T* Bs, Acc (&acc)[NACC]) {
    const int warp = threadIdx.x / 32, l = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int j = l / 8, r8 = l % 8;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int m = wm * WM + mi * 16;
        if (A_KC) ldmatrix_x4(a[mi], As + (m + r8 + (j % 2) * 8) * LA::LDS + kk + (j / 2) * 8);
        else ldmatrix_x4_trans(a[mi], As + (kk + r8 + (j / 2) * 8) * LA::LDS + m + (j % 2) * 8);
      }
      // B fragments two n8 blocks at a time, consumed at once (keeps few registers live).
#pragma unroll
      for (int nj = 0; nj < NJ; nj += 2) {
        const int n = wn * WN + nj * 8;
        unsigned b[4];
        if (B_KC) ldmatrix_x4(b, Bs + (n + r8 + (j / 2) * 8) * LB::LDS + kk + (j % 2) * 8);
        else ldmatrix_x4_trans(b, Bs + (kk + r8 + (j % 2) * 8) * LB::LDS + n + (j / 2) * 8);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          MmaOp<T>::mma(*reinterpret_cast<float(*)[4]>(&acc[(mi * NJ + nj) * 4]), a[mi], b[0], b[1]);
          MmaOp<T>::mma(*reinterpret_cast<float(*)[4]>(&acc[(mi * NJ + nj + 1) * 4]), a[mi], b[2], b[3]);
        }
      }
    }
  }
};

}  // namespace skc
