// mma_fragments.cuh: what the mma.sync mainloops share.
//   * MmaM16N8Accumulators: the accumulator half of the mainloop interface (sk_gemm.cuh):
//     Acc, THREADS, NACC, PAIR, zero() and coord() for a grid of warps of m16n8 C fragments.
//     The fp16/bf16 (k16), tf32 (k8), int8 (k32) and sm_90 fp64 (k8/k16) mainloops derive
//     from it and add compute().
//   * ldmatrix_x4 / ldmatrix_x4_trans: four 8x8 b16 matrices from shared memory.
//   * MmaOp<T>: one m16n8k16 mma of fp16 / bf16 fragments into fp32 accumulators.
#pragma once
#include "sk_common.cuh"

namespace skc {

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

// d += a b, m16n8k16: a row-major (ldmatrix_x4's four registers), b column-major (two).
template <class T> struct MmaOp;
template <> struct MmaOp<half_t> {
  __device__ __forceinline__ static void mma(float (&d)[4], const unsigned (&a)[4],
                                             unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct MmaOp<bfloat16_t> {
  __device__ __forceinline__ static void mma(float (&d)[4], const unsigned (&a)[4],
                                             unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// The accumulators of a WARPS_M x WARPS_N grid of warps, each owning a WM x WN tile of
// m16n8 mma blocks. With g = lane / 4, t = lane % 4, accumulator e of block (mi, nj) is
// C(g + 8 (e / 2), 2t + e % 2): e and e + 1 (e even) are columns 2t, 2t + 1 of one row
// (PAIR = 2, PAIR_STRIDE 1).
template <class AccT, int BM, int BN, int WARPS_M, int WARPS_N>
struct MmaM16N8Accumulators {
  using Acc = AccT;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MI = WM / 16, NJ = WN / 8;
  static constexpr int NACC = MI * NJ * 4;
  static constexpr int PAIR = 2;

  __device__ __forceinline__ static void zero(Acc (&acc)[NACC]) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = Acc(0);
  }
  __device__ __forceinline__ static void coord(unsigned t, int i, int& r, int& c) {
    const int warp = t / 32, lane = t % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int mi = i / (NJ * 4), nj = (i / 4) % NJ, e = i % 4;
    r = wm * WM + mi * 16 + lane / 4 + (e / 2) * 8;
    c = wn * WN + nj * 8 + (lane % 4) * 2 + (e % 2);
  }
};

// What a mainloop deriving from MmaM16N8Accumulators names from it (a dependent base's
// members are not found by unqualified lookup).
#define SKC_M16N8_ACCUMULATORS(ACC)                                                  \
  using Base = MmaM16N8Accumulators<ACC, BM, BN, WARPS_M, WARPS_N>;                  \
  using Acc = typename Base::Acc;                                                    \
  using Base::THREADS;                                                               \
  using Base::WM;                                                                    \
  using Base::WN;                                                                    \
  using Base::MI;                                                                    \
  using Base::NJ;                                                                    \
  using Base::NACC;                                                                  \
  using Base::PAIR;                                                                  \
  using Base::zero;                                                                  \
  using Base::coord;

}  // namespace skc
