// mainloop_dmma.cuh: fp64 tensor-core mainloops (DMMA), fp64 accumulators.
//   * MainloopDmma16: mma.sync m16n8k{8,16}.f64 (sm_90), operands through 8-byte shared
//     loads; below sm_90 each step runs as m8n8k4 pairs (dmma_m16n8).
//   * MainloopDmmaVec: m16n8k8 with each k8 step's fragments permuted so that they load as
//     16-byte pairs (KernelSpec.frag "vec"), optionally with the next step's fragments
//     loaded ahead ("vecdb"). Declares SHIFT_WINDOWS, and SPREADS_LOADS / STEPS.
// Both implement the mainloop interface of sk_gemm.cuh; MainloopDmma16 takes its
// accumulator half from MmaM16N8Accumulators (mma_fragments.cuh).
#pragma once
#include "sk_common.cuh"
#include "mma_fragments.cuh"

namespace skc {

// m16n8k4 f64 as two m8n8k4 (the DMMA below sm_90): a0 = A(g, t), a1 = A(g + 8, t);
// b = B(k = t, n = g); d0,d1 = D(g, 2t + {0,1}), d2,d3 = D(g + 8, 2t + {0,1}).
// Not volatile: ptxas may schedule the pair.
__device__ __forceinline__ void dmma_m16n8k4(double (&d)[4], double a0, double a1, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
      : "+d"(d[0]), "+d"(d[1]) : "d"(a0), "d"(b));
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
      : "+d"(d[2]), "+d"(d[3]) : "d"(a1), "d"(b));
}
// m16n8k{KI} f64: a[i] = A(g + 8 (i % 2), t + 4 (i / 2)), b[i] = B(t + 4 i, g). sm_90 runs
// KI = 8 / 16 as one mma; below sm_90 it runs as KI / 4 k4 halves h from (a[2h], a[2h + 1],
// b[h]), the same sums.
template <int KI>
__device__ __forceinline__ void dmma_m16n8(double (&d)[4], const double (&a)[KI / 2],
                                           const double (&b)[KI / 4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(KI == 8 || KI == 16, "sm_90 DMMA: m16n8k8 / m16n8k16");
  if constexpr (KI == 8) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, "
                 "{%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]),
                   "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
  }
#else
#pragma unroll
  for (int h = 0; h < KI / 4; ++h) dmma_m16n8k4(d, a[2 * h], a[2 * h + 1], b[h]);
#endif
}

// fp64 through m16n8k{KI} (KI = 8 or 16); warp tile WM x WN of 16 x 8 blocks, C fragment
// as MmaM16N8Accumulators.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int KI, class LA, class LB>
struct MainloopDmma16 : MmaM16N8Accumulators<double, BM, BN, WARPS_M, WARPS_N> {
  SKC_M16N8_ACCUMULATORS(double)
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % KI == 0, "dmma16 tile shape");
  static_assert(KI == 8 || KI == 16, "m16n8k8 / m16n8k16");
  // k per step: KI on sm_90; below it k4 steps (the m8n8k4 decomposition: the same sums,
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
    // Large warp tiles and 512-thread CTAs (register-bound) keep one k step of fragments
    // live at a time.
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

// ---- MainloopDmmaVec: m16n8k8 with 16-byte fragment loads ---------------------------------
// DMMA reads its A fragment from 4 consecutive doubles a0..a3 = (row g, k t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4) and its B fragment from b0, b1 = (k t, col g), (t + 4, g); one
// ld.shared.v2.f64 fills 2 consecutive doubles. Inside each k8 step, for both operands alike
// (the same 8 products are summed), k t -> physical 2t and t + 4 -> 2t + 1, so a k-contiguous
// B stage gives (b0, b1) in one load; an x-contiguous A stage also has its fragment rows
// permuted, g -> 2g and g + 8 -> 2g + 1 (coord() maps them back), giving (a0, a1) and
// (a2, a3) in one load each. A k-contiguous A stage stays 4 scalar loads: its pair would be
// (a0, a2), and shuffling that into a0..a3 order costs register copies per DMMA (and spills).
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
  __device__ __forceinline__ static void coord(unsigned thread, int i, int& r, int& c) {
    const int warp = thread / 32, lane = thread % 32, g = lane / 4, t = lane % 4;
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
  // s's fragment loads, before its mma), so the global loads stream through the k-tile
  // instead of leaving in one burst after the barrier. Not with DB nor with 512 threads:
  // there (255 and 128 registers a thread) the copies' live addresses spill.
  static constexpr bool SPREADS_LOADS = !DB && THREADS <= 256;
  __device__ __forceinline__ static void compute(const double* As, const double* Bs,
                                                 Acc (&acc)[NACC]) {
    compute(As, Bs, acc, NoLoads{});
  }
  template <class Between>
  __device__ __forceinline__ static void compute(const double* As, const double* Bs,
                                                 Acc (&acc)[NACC], Between&& between) {
    // sm_90: %tid.x through volatile asm, so the lane offsets below are recomputed per k-tile
    // instead of being hoisted out of the persistent loop and held through fixup and
    // epilogue, which spills the register-bound configurations. sm_80's ptxas spills more
    // with it, so there it reads threadIdx.x.
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

}  // namespace skc
