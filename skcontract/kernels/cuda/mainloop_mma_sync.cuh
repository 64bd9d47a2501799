// mainloop_mma_sync.cuh: tensor-core mainloop through inline-PTX mma.sync (sm_80+).
//   fp16 / bf16: mma.m16n8k16, fp32 accumulators, operands through ldmatrix(.trans)
//   fp64       : DMMA mma.m8n8k4 (MainloopDmma) or, on sm_90, mma.m16n8k{4,8,16}.f64
//                (MainloopDmma16; decomposed into m8n8k4 below sm_90), fp64 accumulators,
//                operands through scalar shared loads; MainloopDmmaVec: m16n8k8 with k (and,
//                x-contiguous, the fragment rows) permuted per k8 step so fragments load as
//                16-byte pairs, optionally double-buffered across k8 steps
//   tf32       : mma.m16n8k8.f32.tf32 (MainloopTf32, float32 operands only when the caller
//                allows tf32), fp32 accumulators, operands through 32/64-bit shared loads and
//                cvt.rna.tf32.f32
//   int8       : mma.m16n8k32.s32.s8.s8 (MainloopImma), int32 accumulators (wrapping), k-
//                contiguous operands through ldmatrix (b16 rows = pairs of int8 pairs),
//                x-contiguous ones through byte loads packed into 32-bit registers
// A mainloop provides: Acc, NACC (accumulators per thread), PAIR (2: accumulators i and
// i + PAIR_STRIDE, i / PAIR_STRIDE even, are columns c (even) and c + 1 of one row; PAIR_STRIDE
// defaults to 1), zero(), compute(stageA, stageB, acc) for one BK slice, and coord(i, r, c)
// (tile-relative row / column of accumulator i of this thread). The fixup and the epilogue
// only use that interface, so a wgmma mainloop can slot in later.
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

// The accumulators of a WARPS_M x WARPS_N grid of warps, each owning a WM x WN tile of
// m16n8 mma blocks. fp16/bf16 (k16), tf32 (k8), int8 (k32) and sm_90's fp64 (k4/k8/k16)
// share this C fragment: accumulator e of block (mi, nj) is C(g + 8 (e / 2), 2t + e % 2).
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
  __device__ __forceinline__ static void coord(int i, int& r, int& c) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int mi = i / (NJ * 4), nj = (i / 4) % NJ, e = i % 4;
    r = wm * WM + mi * 16 + lane / 4 + (e / 2) * 8;
    c = wn * WN + nj * 8 + (lane % 4) * 2 + (e % 2);
  }
};

// What a mainloop deriving from MmaM16N8Accumulators names from it (dependent base).
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

// 16-bit operands, m16n8k16. LA / LB are the TileLoader types (they fix the smem layout).
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

// fp64 DMMA m8n8k4. A frag: A[lane/4][lane%4]; B frag: B[lane%4][lane/4];
// C frag: C[lane/4][2*(lane%4) + {0,1}].
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, class LA, class LB>
struct MainloopDmma {
  using Acc = double;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MI = WM / 8, NJ = WN / 8;
  static constexpr int NACC = MI * NJ * 2;
  static constexpr int PAIR = 2;
  static_assert(WM % 8 == 0 && WN % 8 == 0 && BK % 4 == 0, "dmma tile shape");

  __device__ __forceinline__ static void zero(Acc (&acc)[NACC]) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.0;
  }
  __device__ __forceinline__ static void coord(int i, int& r, int& c) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int mi = i / (NJ * 2), nj = (i / 2) % NJ, e = i % 2;
    r = wm * WM + mi * 8 + lane / 4;
    c = wn * WN + nj * 8 + (lane % 4) * 2 + e;
  }
  __device__ __forceinline__ static void compute(const double* As, const double* Bs,
                                                 Acc (&acc)[NACC]) {
    const int warp = threadIdx.x / 32, l = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    // Large warp tiles (64 accumulators) keep one k4 step of fragments live at a time.
#pragma unroll (NACC > 32 ? 1 : BK / 4)
    for (int kk = 0; kk < BK; kk += 4) {
      double a[MI], b[NJ];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) a[mi] = LA::at(As, wm * WM + mi * 8 + l / 4, kk + l % 4);
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj) b[nj] = LB::at(Bs, wn * WN + nj * 8 + l / 4, kk + l % 4);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj) {
          double* d = &acc[(mi * NJ + nj) * 2];
          asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 "
                       "{%0,%1}, {%2}, {%3}, {%0,%1};\n"
                       : "+d"(d[0]), "+d"(d[1]) : "d"(a[mi]), "d"(b[nj]));
        }
    }
  }
};

// m16n8k4 f64 step: a0 = A(g, t), a1 = A(g + 8, t); b = B(k = t, n = g);
// d0,d1 = D(g, 2t + {0,1}), d2,d3 = D(g + 8, 2t + {0,1}).
__device__ __forceinline__ void dmma_m16n8k4(double (&d)[4], double a0, double a1, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 "
               "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3]) : "d"(a0), "d"(a1), "d"(b));
#else  // (not volatile: lets ptxas schedule the pair; sm_80 fallback)
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
      : "+d"(d[0]), "+d"(d[1]) : "d"(a0), "d"(b));
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
      : "+d"(d[2]), "+d"(d[3]) : "d"(a1), "d"(b));
#endif
}
// m16n8k8 / m16n8k16 f64 (sm_90): a[i] = A(g + 8 (i % 2), t + 4 (i / 2)), b[i] = B(t + 4 i, g).
template <int KI>
__device__ __forceinline__ void dmma_m16n8(double (&d)[4], const double (&a)[KI / 2],
                                           const double (&b)[KI / 4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (KI == 8) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
    return;
  } else if constexpr (KI == 16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, "
                 "{%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]),
                   "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
    return;
  }
#endif
#pragma unroll
  for (int h = 0; h < KI / 4; ++h) dmma_m16n8k4(d, a[2 * h], a[2 * h + 1], b[h]);
}

// fp64 through m16n8k{KI} (KI = 4, 8 or 16); warp tile WM x WN of 16 x 8 blocks.
// C frag: D(g + 8 (e / 2), 2t + e % 2) for accumulator e of a block.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int KI, class LA, class LB>
struct MainloopDmma16 : MmaM16N8Accumulators<double, BM, BN, WARPS_M, WARPS_N> {
  SKC_M16N8_ACCUMULATORS(double)
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % KI == 0, "dmma16 tile shape");
  static_assert(KI == 4 || KI == 8 || KI == 16, "m16n8k4 / k8 / k16");
  // k per step: KI on sm_90; below it the decomposition into m8n8k4 steps k by 4 (same sums,
  // fewer live fragments).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  static constexpr int KS = 4;
#else
  static constexpr int KS = KI;
#endif

  __device__ __forceinline__ static void compute(const double* As, const double* Bs,
                                                 Acc (&acc)[NACC]) {
    const int warp = threadIdx.x / 32, l = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int g = l / 4, t = l % 4;
#pragma unroll (NACC > 32 || THREADS > 256 ? 1 : BK / KS)
    for (int kk = 0; kk < BK; kk += KS) {
      double a[MI][KS / 2], b[NJ][KS / 4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < KS / 2; ++i)
          a[mi][i] = LA::at(As, wm * WM + mi * 16 + g + 8 * (i % 2), kk + t + 4 * (i / 2));
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj)
#pragma unroll
        for (int i = 0; i < KS / 4; ++i) b[nj][i] = LB::at(Bs, wn * WN + nj * 8 + g, kk + t + 4 * i);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj)
          dmma_m16n8<KS>(*reinterpret_cast<double(*)[4]>(&acc[(mi * NJ + nj) * 4]), a[mi], b[nj]);
    }
  }
};

// fp64 m16n8k8 with 16-byte fragment loads (KernelSpec.frag "vec" / "vecdb").
// DMMA reads its A fragment from 4 consecutive doubles a0..a3 = (row g, k t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4) and its B fragment from b0, b1 = (k t, col g), (t + 4, g); one
// ld.shared.v2.f64 fills 2 consecutive doubles. Inside each k8 step, for both operands alike
// (the same 8 products are summed), k t -> physical 2t and t + 4 -> 2t + 1, so a k-contiguous
// B stage gives (b0, b1) in one load; an x-contiguous A stage also has its fragment rows
// permuted, g -> 2g and g + 8 -> 2g + 1 (coord() maps them back), giving (a0, a1) and
// (a2, a3) in one load each. A k-contiguous A stage stays 4 scalar loads: its pair would be
// (a0, a2), and the shuffle into a0..a3 order costs more than it saves (ptxas copied the
// fragment per DMMA and spilled).
// P feeds DMMA's A fragment, Q its B fragment: P = A, Q = B, except A row-major with B
// row-major (A k-, B x-contiguous), which runs C^T = B^T A^T (P = B, Q = A) so that both load
// in pairs. Below sm_90 dmma_m16n8<8> runs k4 halves h from (a[2h], a[2h + 1], b[h]): each
// lane's P and Q values share the physical k 2t + h, so the sums are unchanged.
// Pitches (KernelSpec.pad), with 16 lanes per wavefront for 8-byte loads and 8 for 16-byte
// ones: k-contiguous 8 (mod 16) doubles puts row g + 1 four 16-byte bank groups after row g
// (Q pairs conflict-free; P scalars, on even words only, take 2 wavefronts per half warp, the
// fewest possible); x-contiguous 2 (mod 4) puts k line 2t at 4t or 12t (mod 16) bank pairs
// (P pairs and Q scalars conflict-free; the scalar path's 8 (mod 16) would stack those lines).
// DB: the next k8 step's fragments are loaded before this step's mma (BK unrolled, two
// fragment sets live); otherwise, as MainloopDmma16, large tiles keep one step live.
template <bool C, class T, class F> struct Select { using type = T; };
template <class T, class F> struct Select<false, T, F> { using type = F; };

// One 8-byte shared load the compiler may not merge with its neighbour into a 16-byte one
// (a merged (a0, a2) load needs register copies into DMMA's a0..a3 order).
__device__ __forceinline__ double lds_f64(const double* p) {
  double v;
  asm volatile("ld.shared.f64 %0, [%1];\n" : "=d"(v) : "r"(smem_addr(p)));
  return v;
}
__device__ __forceinline__ void lds_f64x2(const double* p, double& lo, double& hi) {
  const double2 v = *reinterpret_cast<const double2*>(p);
  lo = v.x;
  hi = v.y;
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, class LA, class LB, bool DB>
struct MainloopDmmaVec {
  using Acc = double;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int KI = 8;                                 // k per mma (m16n8k8)
  static constexpr int STEPS = BK / KI;
  static constexpr bool TRANS = LA::KC && !LB::KC;             // C^T = B^T A^T
  using LP = typename Select<TRANS, LB, LA>::type;             // feeds DMMA's A fragment
  using LQ = typename Select<TRANS, LA, LB>::type;             // feeds DMMA's B fragment
  static constexpr int WP = TRANS ? WN : WM, WQ = TRANS ? WM : WN;  // warp extents
  static constexpr int PI = WP / 16, QJ = WQ / 8;              // m16n8 blocks per warp
  static constexpr int NACC = PI * QJ * 4;
  // column pairs: e, e + 1 (D's 2t, 2t + 1); transposed, e, e + 2 (P rows 2g, 2g + 1)
  static constexpr int PAIR = 2, PAIR_STRIDE = TRANS ? 2 : 1;
  // edge tiles shift their window inside the operands (sk_gemm.cuh, window_origin)
  static constexpr bool SHIFT_WINDOWS = true;
  static constexpr bool P_ROWPERM = !LP::KC;                   // fragment row g -> 2g
  static constexpr int KC_PITCH_MOD = 16, KC_PITCH_REM = 8;    // k-contiguous: 8 (mod 16)
  static constexpr int XC_PITCH_MOD = 4, XC_PITCH_REM = 2;     // x-contiguous: 2 (mod 4)
  static_assert(WP % 16 == 0 && WQ % 8 == 0 && BK % KI == 0, "dmma vec tile shape");
  static_assert(LA::KC ? LA::LDS % KC_PITCH_MOD == KC_PITCH_REM
                       : LA::LDS % XC_PITCH_MOD == XC_PITCH_REM, "A pitch: bank conflicts");
  static_assert(LB::KC ? LB::LDS % KC_PITCH_MOD == KC_PITCH_REM
                       : LB::LDS % XC_PITCH_MOD == XC_PITCH_REM, "B pitch: bank conflicts");

  __device__ __forceinline__ static void zero(Acc (&acc)[NACC]) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.0;
  }
  // Accumulator e of block (pi, qj): DMMA's D(g + 8 (e / 2), 2t + e % 2), P row through the
  // row permutation; (P x, Q x) is (row, column) of C, or (column, row) when TRANS.
  __device__ __forceinline__ static void coord(int i, int& r, int& c) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wp = TRANS ? warp % WARPS_N : warp / WARPS_N;
    const int wq = TRANS ? warp / WARPS_N : warp % WARPS_N;
    const int pi = i / (QJ * 4), qj = (i / 4) % QJ, e = i % 4;
    const int px = wp * WP + pi * 16 + (P_ROWPERM ? 2 * g + e / 2 : g + 8 * (e / 2));
    const int qx = wq * WQ + qj * 8 + 2 * t + e % 2;
    r = TRANS ? qx : px;
    c = TRANS ? px : qx;
  }

  struct Frags {
    double p[PI][4], q[QJ][2];
  };
  // Fragments of the k8 step whose lane k pair starts at k (= step base + 2t); xp / xq: this
  // lane's first P row / Q row.
  __device__ __forceinline__ static void load(Frags& f, const double* Ps, const double* Qs,
                                              int xp, int xq, int k) {
#pragma unroll
    for (int pi = 0; pi < PI; ++pi) {
      const int x = xp + pi * 16;
      if constexpr (P_ROWPERM) {
        lds_f64x2(&LP::at(Ps, x, k), f.p[pi][0], f.p[pi][1]);
        lds_f64x2(&LP::at(Ps, x, k + 1), f.p[pi][2], f.p[pi][3]);
      } else {
        f.p[pi][0] = lds_f64(&LP::at(Ps, x, k));
        f.p[pi][1] = lds_f64(&LP::at(Ps, x + 8, k));
        f.p[pi][2] = lds_f64(&LP::at(Ps, x, k + 1));
        f.p[pi][3] = lds_f64(&LP::at(Ps, x + 8, k + 1));
      }
    }
#pragma unroll
    for (int qj = 0; qj < QJ; ++qj) {
      const int x = xq + qj * 8;
      if constexpr (LQ::KC) {
        lds_f64x2(&LQ::at(Qs, x, k), f.q[qj][0], f.q[qj][1]);
      } else {
        f.q[qj][0] = LQ::at(Qs, x, k);
        f.q[qj][1] = LQ::at(Qs, x, k + 1);
      }
    }
  }
  __device__ __forceinline__ static void mma(const Frags& f, Acc (&acc)[NACC]) {
#pragma unroll
    for (int pi = 0; pi < PI; ++pi)
#pragma unroll
      for (int qj = 0; qj < QJ; ++qj)
        dmma_m16n8<KI>(*reinterpret_cast<double(*)[4]>(&acc[(pi * QJ + qj) * 4]), f.p[pi],
                       f.q[qj]);
  }

  // The next k-tile's copies go out a part per k8 step (SPREADS_LOADS: between(s) after step
  // s's fragment loads, before its mma): the global loads stream through the k-tile instead
  // of leaving in one burst after the barrier (fp64 1024^3 0.78 -> 0.86x cuBLAS). Not with
  // DB nor 512 threads: the two-CTA kernel (255 registers) and the 16-warp one (128) spill
  // with the copies' addresses live. Measured
  // on the other mainloops too (H200, 2026-11-30) and left off there: exact fp32 3% slower,
  // tf32 up to 12% slower, fp16 / bf16 / int8 no better.
  static constexpr bool SPREADS_LOADS = !DB && THREADS <= 256;
  __device__ __forceinline__ static void compute(const double* As, const double* Bs,
                                                 Acc (&acc)[NACC]) {
    compute(As, Bs, acc, NoLoads{});
  }
  template <class Between>
  __device__ __forceinline__ static void compute(const double* As, const double* Bs,
                                                 Acc (&acc)[NACC], Between&& between) {
    // sm_90: %tid.x through volatile asm, so the lane offsets below are recomputed per BK tile
    // instead of being hoisted out of the persistent loop and held through fixup and epilogue
    // (16 warps, deterministic fixup: 16-32 bytes of spills otherwise). sm_80's ptxas spills
    // more with it, so it keeps threadIdx.x.
    unsigned tid = threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
#endif
    const int warp = tid / 32, l = tid % 32;
    const int g = l / 4, t = l % 4;
    const int wp = TRANS ? warp % WARPS_N : warp / WARPS_N;
    const int wq = TRANS ? warp / WARPS_N : warp % WARPS_N;
    const double* Ps = TRANS ? Bs : As;
    const double* Qs = TRANS ? As : Bs;
    const int xp = wp * WP + (P_ROWPERM ? 2 * g : g), xq = wq * WQ + g;
    if constexpr (DB) {
      Frags f[2];
      load(f[0], Ps, Qs, xp, xq, 2 * t);
#pragma unroll
      for (int s = 0; s < STEPS; ++s) {
        if (s + 1 < STEPS) load(f[(s + 1) % 2], Ps, Qs, xp, xq, (s + 1) * KI + 2 * t);
        mma(f[s % 2], acc);
      }
    } else {
#pragma unroll (NACC > 32 || THREADS > 256 ? 1 : STEPS)
      for (int kk = 0; kk < BK; kk += KI) {
        Frags f;
        load(f, Ps, Qs, xp, xq, kk + 2 * t);
        between(kk / KI);
        mma(f, acc);
      }
    }
  }
};

// ---- tf32: mma.m16n8k8.row.col.f32.tf32.tf32.f32 ------------------------------------------
// Fragments (g = lane / 4, t = lane % 4): a0 = A(g, t), a1 = A(g + 8, t), a2 = A(g, t + 4),
// a3 = A(g + 8, t + 4); b0 = B(k = t, n = g), b1 = B(t + 4, g); C as m16n8k16.
// The k index of the fragment is permuted inside each k8 step, for A and B alike (fragment k
// t -> 2t, t + 4 -> 2t + 1): the 8 products summed are the same, and a k-contiguous operand
// then gives each thread its two k values as one 8-byte load (pitch BK + 8: conflict-free
// per half warp). x-contiguous operands (pitch X + 4) are read as scalars: banks 8t + g.
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

// ---- int8: mma.m16n8k32.row.col.s32.s8.s8.s32 ----------------------------------------------
// Fragments: register r of A holds A(g + 8 (r % 2), 4t + 16 (r / 2) + q) in byte q; register r
// of B holds B(k = 4t + 16 r + q, n = g) in byte q; C as m16n8k16 (s32, wrapping).
// In bytes that is the m16n8k16 b16 layout, so a k-contiguous stage (pitch BK + 16 bytes) is
// read with the same ldmatrix (non-trans) addressing, k offsets counted in bytes. ldmatrix
// cannot transpose bytes: an x-contiguous stage is read with byte loads packed per register.
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
