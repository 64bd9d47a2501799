// sk_conv.cuh: 2-D convolution as an implicit GEMM on the sk_gemm.cuh kernels (the entry
// header of the im2col specs). The GEMM is C(m, n) = sum_k A(m, k) B(k, n) with
//   m = (image, p, q)    an output pixel (M = N * P * Q)
//   n                    an output channel of the group (K / groups)
//   k = (r, s, c)        a filter tap and an input channel of the group (c fastest)
// A is never materialised: Im2colTiles gathers A(m, k) = input[image, p * stride_h - pad_h +
// r * dil_h, q * stride_w - pad_w + s * dil_w, c] from a channels-last input (channels
// contiguous, any image / row / column strides) into the same shared-memory stage layout as a
// k-contiguous TileLoader, so the mainloops, fixups and epilogues are the GEMM ones. Taps that
// fall into the padding are zero-filled by cp.async's src-size. B is the filters as
// (K, R, S, C / groups) rows (k-contiguous, "col"); C is the NHWC output, ldc = K. Groups are
// the GEMM's batch: batch_a = C / groups channels, batch_b one group's filters, batch_c
// K / groups columns.
#pragma once
#include "sk_gemm.cuh"
#include "conv_shape.cuh"

namespace skc {

// A row of the tile whose output pixel lies outside the problem: its h origin is so negative
// that every tap reads as padding.
constexpr int OUTSIDE_ROW = -(1 << 30);

// One split's k-tiles of the gathered A. A thread copies the same chunk column of ITERS rows
// (LINES_PER_PASS apart); each row's output pixel is decoded once per split, each k-tile's
// (r, s, c) once per thread. A chunk of VEC channels never straddles two taps: the host uses
// VEC > 1 only when C / groups is a multiple of it.
template <class L, int BK>
struct Im2colTiles {
  using T = typename L::Elem;
  static_assert(L::KC, "the im2col operand is k-contiguous (channels-last)");
  static_assert(L::CTA_THREADS % L::CHUNKS_PER_LINE == 0,
                "a thread's chunks stay in one column of the tile");
  static constexpr int VEC = L::CHUNK_ELEMS, CPL = L::CHUNKS_PER_LINE, ITERS = L::ITERS;
  static constexpr int LINES_PER_PASS = L::CTA_THREADS / CPL;

  const T* x;  // the group's first channel of image 0
  const ConvShape& cs;
  int image[ITERS], h0[ITERS], w0[ITERS];
  int line0, col, k0, k1;

  __device__ __forceinline__ Im2colTiles(const T* x_, const ConvShape& cs_, const Split& s)
      : x(x_), cs(cs_), line0(threadIdx.x / CPL), col(threadIdx.x % CPL * VEC), k0(s.k0),
        k1(s.k1) {
    const int pq = cs.P * cs.Q;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int line = line0 + it * LINES_PER_PASS, m = s.mw + line;
      if (line < L::X_EXTENT && m < s.m_end) {
        const int img = m / pq, rem = m - img * pq, p = rem / cs.Q, q = rem - p * cs.Q;
        image[it] = img;
        h0[it] = p * cs.stride_y - cs.pad_y;
        w0[it] = q * cs.stride_x - cs.pad_x;
      } else {
        image[it] = 0;
        h0[it] = OUTSIDE_ROW;
        w0[it] = 0;
      }
    }
  }

  __device__ __forceinline__ bool interior(int) const { return false; }
  __device__ __forceinline__ void load_part(T*, int, int, int) const {}

  __device__ __forceinline__ void load(T* stage, int kt) const {
    const int k = k0 + kt * BK + col;
    const bool k_inside = k < k1;
    int dy = 0, dx = 0, c = 0;
    if (k_inside) {
      const int tap = k / cs.Cg, r = tap / cs.S;
      c = k - tap * cs.Cg;
      dy = r * cs.dil_y;
      dx = (tap - r * cs.S) * cs.dil_x;
    }
    T* dst = stage + line0 * L::LDS + col;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      if (L::TOTAL % L::CTA_THREADS != 0 && line0 + it * LINES_PER_PASS >= L::X_EXTENT) break;
      const int h = h0[it] + dy, w = w0[it] + dx;
      const bool ok = k_inside && (unsigned)h < (unsigned)cs.H && (unsigned)w < (unsigned)cs.W;
      const T* src = ok ? x + image[it] * cs.stride_n + h * cs.stride_h + w * cs.stride_w + c : x;
      T* d = dst + it * LINES_PER_PASS * L::LDS;
      if constexpr (L::ASYNC) {
        cp_async<L::CP_BYTES>(d, src, ok ? L::CP_BYTES : 0);
      } else {
        T v;
        if (ok) v = src[0]; else v = T{};
        d[0] = v;
      }
    }
  }
};

// Operand A gathered from a channels-last input (the A source of sk_conv; the group's first
// channel is batch_a channels on per group).
template <class L, int BK>
struct Im2colSource {
  using T = typename L::Elem;
  static constexpr bool SHIFTS = false;  // every row is gathered: nothing to gain
  const T* x;
  long long batch_a;
  const ConvShape& cs;
  __device__ __forceinline__ Im2colTiles<L, BK> tiles(const Split& s) const {
    return Im2colTiles<L, BK>(x + (long long)s.batch * batch_a, cs, s);
  }
};

// The implicit-GEMM convolution kernel: sk_gemm's arguments (A is the input; lda is unused)
// and the geometry.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_conv(const typename Cfg::TIn* __restrict__ X, const typename Cfg::TIn* __restrict__ B,
        typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
        const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
        unsigned* locks, int M, int N, int K, int tile_order, long long lda, long long ldb,
        long long ldc, long long batch_a, long long batch_b, long long batch_c,
        typename Cfg::Acc alpha, typename Cfg::Acc beta, const __grid_constant__ ConvShape conv) {
  const Im2colSource<typename Cfg::LA, Cfg::BK> a_source{X, batch_a, conv};
  stream_k_gemm<Cfg>(a_source, B, C, table, cta_offsets, ws, staging, locks, M, N, tile_order,
                     ldb, ldc, batch_b, batch_c, alpha, beta);
}

}  // namespace skc
