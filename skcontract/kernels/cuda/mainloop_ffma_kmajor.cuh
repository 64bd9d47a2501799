// mainloop_ffma_kmajor.cuh: exact fp32 FFMA mainloop reading both operands k-major
// (KernelSpec.ffma = "kmajor"), the classic high-performance SGEMM inner loop.
//
// 256 threads, each an 8 x 8 register tile of a 128 x 128 tile. Per single k a thread loads
// its 8 A values and 8 B values as 2 + 2 LDS.128 and does 64 FFMA; the next k's fragments
// are loaded before this k's FMAs (register double buffering). 64 accumulators + 2 x 16
// fragment registers leave room under the 128-register cap of two CTAs per SM
// (min_blocks = 2) for the pipeline's addresses and the split's fields (tid() below and the
// loaders' LINE_STEP keep that rest small; the fixups' workspace loads are the other peak).
//
// Operand sources, both [k][x] in shared memory:
//   * x-contiguous stage (A column-major, B row-major): the cp.async stage [k][X + PAD] itself;
//   * k-contiguous stage (A row-major, B column-major): transposed once per stage into a
//     k-major scratch [BK][X] after the stages (SCRATCH_BYTES; sk_gemm.cuh carves it out).
//
// Thread -> outputs: a warp is LANES_Y x LANES_X = 4 x 8 lanes, the CTA TY / LANES_Y x
// TX / LANES_X = 4 x 2 warps, so thread (ty, tx) of the 16 x 16 grid owns rows
// (i / G) * (BM / 2) + ty * G + i % G and columns (j / G) * (BN / 2) + tx * G + j % G (G = 4).
// Per k a warp's A load touches 4 consecutive float4 (64 bytes, each broadcast to 8 lanes)
// and its B load 8 consecutive float4 (128 bytes): no bank conflict.
#pragma once
#include "sk_common.cuh"
#include "mainloop_ffma.cuh"

namespace skc {

template <int BM, int BN, int BK, class LA, class LB>
struct MainloopFfmaKMajor {
  using T = float;
  using Acc = float;
  static constexpr int THREADS = 256;
  static constexpr int WARP = 32;
  static constexpr int TM = 8, TN = 8;               // register tile per thread
  static constexpr int G = 4;                        // consecutive rows / columns per LDS.128
  static constexpr int TY = BM / TM, TX = BN / TN;   // thread grid (16 x 16 for 128 x 128)
  static constexpr int LANES_X = 8, LANES_Y = WARP / LANES_X;  // lanes of a warp, x by y
  static constexpr int WARPS_X = TX / LANES_X;
  static constexpr int HALF_M = TY * G, HALF_N = TX * G;  // distance of a thread's 2 groups
  static constexpr int NACC = TM * TN;
  static constexpr int PAIR = 1;
  static constexpr bool A_KC = LA::KC, B_KC = LB::KC;
  static_assert(TY * TX == THREADS && TM == 2 * G && TN == 2 * G, "kmajor: 8x8 per thread");
  static_assert(TY % LANES_Y == 0 && TX % LANES_X == 0, "kmajor: whole warps");

  // k-major scratch: transposed k-contiguous operands, A's then B's, pitch X (no padding:
  // every warp-wide access below touches one k line only).
  static constexpr int SCRATCH_A = A_KC ? BK * BM : 0, SCRATCH_B = B_KC ? BK * BN : 0;
  static constexpr int SCRATCH_BYTES = (SCRATCH_A + SCRATCH_B) * (int)sizeof(T);
  // k-major pitch (floats) each operand is read with
  static constexpr int PITCH_A = A_KC ? BM : LA::LDS, PITCH_B = B_KC ? BN : LB::LDS;
  static_assert(PITCH_A % G == 0 && PITCH_B % G == 0, "16-byte aligned fragment loads");

  // The thread index, read afresh (volatile: not hoisted) by compute() and coord(): their
  // thread-dependent offsets are recomputed per k-tile / epilogue (a few integer ops) instead
  // of living in registers through the whole split loop, which spills under the
  // 128-register cap of min_blocks = 2.
  __device__ __forceinline__ static int tid() {
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
  }
  __device__ __forceinline__ static int thread_y(int t) {
    return (t / WARP) / WARPS_X * LANES_Y + (t % WARP) / LANES_X;
  }
  __device__ __forceinline__ static int thread_x(int t) {
    return (t / WARP) % WARPS_X * LANES_X + t % LANES_X;
  }
  __device__ __forceinline__ static int row_of(int ty, int i) {
    return (i / G) * HALF_M + ty * G + i % G;
  }
  __device__ __forceinline__ static int col_of(int tx, int j) {
    return (j / G) * HALF_N + tx * G + j % G;
  }

  __device__ __forceinline__ static void zero(Acc (&acc)[NACC]) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = Acc(0);
  }
  __device__ __forceinline__ static void coord(int i, int& r, int& c) {
    const int t = tid();
    r = row_of(thread_y(t), i / TN);
    c = col_of(thread_x(t), i % TN);
  }

  // k-contiguous stage [X][L::LDS] -> scratch [BK][X] (ON = false: nothing to do). Vector v
  // (4 k values of one row) is x = v % X, k = 4 (v / X): a warp takes 32 consecutive rows at
  // one k quad.
  //   reads : 8 lanes (one LDS.128 phase) hit 16-byte units x * LDS / 4 + k / 4 (mod 8) for
  //           8 consecutive x: distinct because LDS / 4 is odd (loader pad of 4 floats);
  //   writes: each of the 4 scalar stores puts 32 consecutive x of one k line: 32 banks.
  // Every load is issued before the first store (load(), then store()): stage and scratch
  // share one array, so the compiler would otherwise keep each load behind the last store.
  template <int X, class L, bool ON>
  struct Transpose {
    static constexpr int ITERS = X * BK / G / THREADS;
    static_assert(X % WARP == 0 && ITERS * THREADS * G == X * BK, "transpose shape");
    static_assert(L::LDS % (2 * G) == G, "k-contiguous pitch: an odd number of float4");
    T q[ITERS][G];
    __device__ __forceinline__ void load(const T* stage, int t) {
#pragma unroll
      for (int it = 0; it < ITERS; ++it) {
        const int v = t + it * THREADS;
        lds_vec<G>(stage + v % X * L::LDS + v / X * G, q[it]);
      }
    }
    __device__ __forceinline__ void store(T* dst, int t) const {
#pragma unroll
      for (int it = 0; it < ITERS; ++it) {
        const int v = t + it * THREADS;
#pragma unroll
        for (int e = 0; e < G; ++e) dst[(v / X * G + e) * X + v % X] = q[it][e];
      }
    }
  };
  template <int X, class L>
  struct Transpose<X, L, false> {
    __device__ __forceinline__ void load(const T*, int) {}
    __device__ __forceinline__ void store(T*, int) const {}
  };

  // 8 values of one k line: two float4 HALF apart.
  template <int HALF>
  __device__ __forceinline__ static void load_frag(const T* p, T (&f)[2 * G]) {
    lds_vec<G>(p, f);
    lds_vec<G>(p + HALF, f + G);
  }

  // scratch_raw: SCRATCH_BYTES after the stages (sk_gemm passes it only when nonzero: with
  // both operands x-contiguous there is nothing to transpose).
  __device__ __forceinline__ static void compute(const T* As, const T* Bs, Acc (&acc)[NACC],
                                                 unsigned char* scratch_raw = nullptr) {
    T* scratch = reinterpret_cast<T*>(scratch_raw);
    const int t = tid();
    Transpose<BM, LA, A_KC> ta;
    Transpose<BN, LB, B_KC> tb;
    ta.load(As, t);
    tb.load(Bs, t);
    ta.store(scratch, t);
    tb.store(scratch + SCRATCH_A, t);
    // The scratch is written only after sk_gemm's barrier that follows the previous
    // compute; this barrier makes the transposed stage visible before it is read.
    if constexpr (A_KC || B_KC) __syncthreads();
    const T* pa = (A_KC ? scratch : As) + thread_y(t) * G;
    const T* pb = (B_KC ? scratch + SCRATCH_A : Bs) + thread_x(t) * G;
    T a[2][TM], b[2][TN];
    load_frag<HALF_M>(pa, a[0]);
    load_frag<HALF_N>(pb, b[0]);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const int cur = k & 1;
      if (k + 1 < BK) {
        load_frag<HALF_M>(pa + (k + 1) * PITCH_A, a[cur ^ 1]);
        load_frag<HALF_N>(pb + (k + 1) * PITCH_B, b[cur ^ 1]);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i * TN + j] = fma_rn(a[cur][i], b[cur][j], acc[i * TN + j]);
    }
  }
};

}  // namespace skc
