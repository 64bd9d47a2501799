// mainloop_ffma.cuh: exact CUDA-core mainloop (MainloopFfma: fp32 FFMA / fp64 DFMA, no tf32
// rounding). Implements the mainloop interface of sk_gemm.cuh (PAIR = 2 when B is
// x-contiguous).
//
// THREADS = 256 arranged TY x TX (TY = BM / TM, TM = min(8, BM)); each thread owns a TM x TN
// register tile (TN = BN / TX): 8 x 8 for the 128x128 tile, 8 x 1 for the 8x256 GEMV tile.
// Per 4-wide k slice a thread reads its operand fragments as 16-byte vectors:
//   * a k-contiguous operand (smem [x][BK + 4]): one vector of 4 k values per owned row,
//     rows strided by the thread count (x = t + T * i) so 8 lanes hit 8 distinct 16-byte
//     bank groups (row pitch 20 floats) or all read one row (broadcast);
//   * an x-contiguous operand (smem [k][ROWS + 4]): per k, vectors of G = min(4, TM) along x,
//     owned rows grouped (x = (i / G) * T * G + t * G + i % G) so a quarter warp reads 32
//     consecutive floats.
// So an 8x8 thread tile does 16 LDS.128 per 256 FFMA; the accumulators never leave registers.
#pragma once
#include "sk_common.cuh"

namespace skc {

__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

// N (1, 2 or 4) consecutive elements from shared memory (16-byte aligned when N == 4).
template <int N> __device__ __forceinline__ void lds_vec(const float* p, float* v) {
  if constexpr (N == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (N == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    v[0] = t.x; v[1] = t.y;
  } else {
    v[0] = p[0];
  }
}
template <int N> __device__ __forceinline__ void lds_vec(const double* p, double* v) {
  if constexpr (N >= 2) {
#pragma unroll
    for (int h = 0; h < N / 2; ++h) {
      const double2 t = *reinterpret_cast<const double2*>(p + 2 * h);
      v[2 * h] = t.x; v[2 * h + 1] = t.y;
    }
  } else {
    v[0] = p[0];
  }
}

template <class T, int BM, int BN, int BK, class LA, class LB>
struct MainloopFfma {
  using Acc = T;
  static constexpr int THREADS = 256;
  static constexpr int TM = BM >= 8 ? 8 : BM;
  static constexpr int TY = BM / TM, TX = THREADS / TY;
  static constexpr int TN = BN / TX;
  static constexpr int GA = TM < 4 ? TM : 4, GB = TN < 4 ? TN : 4;
  static constexpr int NACC = TM * TN;
  // an x-contiguous B gives each thread runs of GB consecutive columns (j, j + 1 pair up)
  static constexpr int PAIR = (!LB::KC && GB % 2 == 0) ? 2 : 1;
  static constexpr bool A_KC = LA::KC, B_KC = LB::KC;
  static_assert(TY * TM == BM && TX * TY == THREADS && TN * TX == BN && TN >= 1,
                "ffma tile shape");
  static_assert(BK % 4 == 0 && TM % GA == 0 && TN % GB == 0, "ffma tile shape");

  // tile-relative row of the thread's i-th row / column of its j-th column
  __device__ __forceinline__ static int row_of(int ty, int i) {
    return A_KC ? ty + TY * i : (i / GA) * (TY * GA) + ty * GA + i % GA;
  }
  __device__ __forceinline__ static int col_of(int tx, int j) {
    return B_KC ? tx + TX * j : (j / GB) * (TX * GB) + tx * GB + j % GB;
  }

  __device__ __forceinline__ static void zero(Acc (&acc)[NACC]) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = Acc(0);
  }
  __device__ __forceinline__ static void coord(unsigned t, int i, int& r, int& c) {
    r = row_of(t / TX, i / TN);
    c = col_of(t % TX, i % TN);
  }
  __device__ __forceinline__ static void compute(const T* As, const T* Bs, Acc (&acc)[NACC]) {
    const int ty = threadIdx.x / TX, tx = threadIdx.x % TX;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 4) {
      T a[TM][4], b[TN][4];  // a[i][q] = A(row i, kk + q), b[j][q] = B(col j, kk + q)
      if constexpr (A_KC) {
#pragma unroll
        for (int i = 0; i < TM; ++i) lds_vec<4>(As + row_of(ty, i) * LA::LDS + kk, a[i]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int i = 0; i < TM; i += GA) {
            T v[GA];
            lds_vec<GA>(As + (kk + q) * LA::LDS + row_of(ty, i), v);
#pragma unroll
            for (int e = 0; e < GA; ++e) a[i + e][q] = v[e];
          }
      }
      if constexpr (B_KC) {
#pragma unroll
        for (int j = 0; j < TN; ++j) lds_vec<4>(Bs + col_of(tx, j) * LB::LDS + kk, b[j]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int j = 0; j < TN; j += GB) {
            T v[GB];
            lds_vec<GB>(Bs + (kk + q) * LB::LDS + col_of(tx, j), v);
#pragma unroll
            for (int e = 0; e < GB; ++e) b[j + e][q] = v[e];
          }
      }
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i * TN + j] = fma_rn(a[i][q], b[j][q], acc[i * TN + j]);
    }
  }
};

}  // namespace skc
