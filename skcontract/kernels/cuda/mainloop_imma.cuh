// mainloop_imma.cuh: int8 tensor-core mainloop (MainloopImma): mma.sync m16n8k32 .s8 with
// int32 accumulators (wrapping). Implements the mainloop interface of sk_gemm.cuh; the
// accumulator half comes from MmaM16N8Accumulators (mma_fragments.cuh).
//
// Fragments: register r of A holds A(g + 8 (r % 2), 4t + 16 (r / 2) + q) in byte q; register r
// of B holds B(k = 4t + 16 r + q, n = g) in byte q. In bytes that is the m16n8k16 b16 layout,
// so a k-contiguous stage (pitch BK + 16 bytes) is read with the same ldmatrix (non-trans)
// addressing, k offsets counted in bytes. ldmatrix cannot transpose bytes: an x-contiguous
// stage is read with byte loads packed per register.
#pragma once
#include "sk_common.cuh"
#include "mma_fragments.cuh"

namespace skc {

__device__ __forceinline__ void mma_s8(int (&d)[4], const unsigned (&a)[4], unsigned b0,
                                       unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// X(x, k .. k + 3) of an x-contiguous stage packed little-endian into one register.
template <class L>
__device__ __forceinline__ unsigned lds_s8x4(const int8_t* stage, int x, int k) {
  const unsigned b0 = (unsigned char)L::at(stage, x, k);
  const unsigned b1 = (unsigned char)L::at(stage, x, k + 1);
  const unsigned b2 = (unsigned char)L::at(stage, x, k + 2);
  const unsigned b3 = (unsigned char)L::at(stage, x, k + 3);
  return b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, class LA, class LB>
struct MainloopImma : MmaM16N8Accumulators<int, BM, BN, WARPS_M, WARPS_N> {
  SKC_M16N8_ACCUMULATORS(int)
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 32 == 0, "int8 mma.sync tile shape");
  static_assert(!LA::KC || LA::LDS % 16 == 0, "ldmatrix rows need a 16-byte pitch");
  static_assert(!LB::KC || LB::LDS % 16 == 0, "ldmatrix rows need a 16-byte pitch");

  __device__ __forceinline__ static void compute(const int8_t* As, const int8_t* Bs,
                                                 Acc (&acc)[NACC]) {
    const int warp = threadIdx.x / 32, l = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int j = l / 8, r8 = l % 8, g = l / 4, t = l % 4;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 32) {
      unsigned a[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int m = wm * WM + mi * 16;
        if constexpr (LA::KC) {
          ldmatrix_x4(a[mi], As + (m + r8 + (j % 2) * 8) * LA::LDS + kk + (j / 2) * 16);
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            a[mi][r] = lds_s8x4<LA>(As, m + g + 8 * (r % 2), kk + 4 * t + 16 * (r / 2));
        }
      }
      // B fragments two n8 blocks at a time: b[0], b[1] for block nj, b[2], b[3] for nj + 1.
#pragma unroll
      for (int nj = 0; nj < NJ; nj += 2) {
        const int n = wn * WN + nj * 8;
        unsigned b[4];
        if constexpr (LB::KC) {
          ldmatrix_x4(b, Bs + (n + r8 + (j / 2) * 8) * LB::LDS + kk + (j % 2) * 16);
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            b[r] = lds_s8x4<LB>(Bs, n + g + 8 * (r / 2), kk + 4 * t + 16 * (r % 2));
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          mma_s8(*reinterpret_cast<int(*)[4]>(&acc[(mi * NJ + nj) * 4]), a[mi], b[0], b[1]);
          mma_s8(*reinterpret_cast<int(*)[4]>(&acc[(mi * NJ + nj + 1) * 4]), a[mi], b[2], b[3]);
        }
      }
    }
  }
};

}  // namespace skc
