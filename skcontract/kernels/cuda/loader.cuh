// loader.cuh: global -> shared operand loader (cp.async, predicated, any leading dimension).
// TileLoader (Cfg::LA / Cfg::LB) fixes one operand's stage layout and copies k-tiles into it;
// sk_gemm.cuh and the mainloops use KC, LDS, STAGE_ELEMS / STAGE_BYTES, CHUNK_ELEMS,
// at(stage, x, k), load(), and, where INTERIOR_PATH, interior_src() / load_interior() /
// load_interior_part().
//
// An operand is viewed as X(x, k): x runs over M (operand A) or N (operand B), k over K.
//   KCONTIG = true : X(x, k) = ptr[x * ld + k]   (A row-major, B column-major)
//   KCONTIG = false: X(x, k) = ptr[k * ld + x]   (A column-major, B row-major)
// The shared tile keeps the global contiguous dimension contiguous:
//   KCONTIG: smem[x][BK + PAD]      else: smem[k][ROWS + PAD]
// PAD is 16 bytes (64 for fp64 x-contiguous) so ldmatrix rows, DMMA fragments and cp.async
// chunks hit distinct banks.
// VEC elements are copied per cp.async (VEC * sizeof(T) in {4, 8, 16}); VEC == 1 with a 1- or
// 2-byte T (a leading dimension that is not 4-byte aligned) falls back to synchronous element
// loads.
// Chunks that straddle the edge (x_end, k_end) are zero-filled through cp.async's src-size.
// Interior k-tiles (the whole tile inside the operand: most of them) take load_interior(),
// which has no per-chunk index arithmetic or predicates: a thread's chunks are a fixed
// number of lines apart, so each is its first chunk's address plus a multiple of one stride.
// DenseTiles is one split's k-tiles of a dense operand through a TileLoader: the kernels'
// operand-tiles interface (interior(kt), load(stage, kt), load_part(stage, kt, part, parts));
// sk_conv.cuh's ConvTiles is the other implementation.
#pragma once
#include "sk_common.cuh"

namespace skc {

template <class T, int ROWS, int BK, bool KCONTIG, int VEC, int THREADS, int PAD_ARG = -1,
          int UNROLL_ARG = 0>
struct TileLoader {
  using Elem = T;
  static constexpr bool KC = KCONTIG;
  static constexpr int X_EXTENT = ROWS;                // the tile's extent along x
  static constexpr int CTA_THREADS = THREADS;
  // 16 bytes of padding; fp64 stored x-contiguous pads 64 bytes so the pitch is 8 (mod 16)
  // doubles and the DMMA fragment reads (4 k lines x 8 x values) hit 16 distinct bank pairs.
  // PAD_ARG >= 0 overrides (the host passes KernelSpec.pad(); tf32 k-contiguous pads 8 floats
  // so its 8-byte fragment loads are conflict-free).
  static constexpr int PAD = PAD_ARG >= 0 ? PAD_ARG
                             : (sizeof(T) == 8 && !KCONTIG) ? 8 : 16 / (int)sizeof(T);
  static constexpr int CONT = KCONTIG ? BK : ROWS;     // contiguous extent in smem
  static constexpr int LINES = KCONTIG ? ROWS : BK;    // strided extent
  static constexpr int LDS = CONT + PAD;               // smem leading dimension (elements)
  static constexpr int STAGE_ELEMS = LINES * LDS;
  static constexpr int STAGE_BYTES = STAGE_ELEMS * (int)sizeof(T);
  static constexpr int CHUNKS_PER_LINE = CONT / VEC;
  static constexpr int TOTAL = CHUNKS_PER_LINE * LINES;
  static constexpr int ITERS = (TOTAL + THREADS - 1) / THREADS;
  static constexpr int CP_BYTES = VEC * (int)sizeof(T);
  static constexpr int CHUNK_ELEMS = VEC;
  static constexpr bool ASYNC = CP_BYTES == 4 || CP_BYTES == 8 || CP_BYTES == 16;
  static_assert(CONT % VEC == 0, "tile extent must be a multiple of the vector width");
  // Chunks issued per unrolled group (UNROLL_ARG > 0 caps it: element-wise / 4-byte copies of
  // the tf32 and int8 kernels would otherwise hold every address live at once and spill).
  static constexpr int UNROLL = UNROLL_ARG > 0 && UNROLL_ARG < ITERS ? UNROLL_ARG : ITERS;

  // load_interior() applies: 16-byte chunks, every thread the same count, and a thread's
  // chunks in one column (THREADS a multiple of the chunks per line). Narrower chunks (a
  // misaligned operand) keep the predicated path: the interior path's per-split pointers
  // would spill the register-bound fp64 kernels.
  static constexpr bool INTERIOR_PATH = CP_BYTES == 16 && TOTAL % THREADS == 0 &&
                                        THREADS % CHUNKS_PER_LINE == 0;
  static constexpr int LINES_PER_PASS = THREADS / CHUNKS_PER_LINE;

  // Element (x, k) of a stage, tile-relative.
  __device__ __forceinline__ static const T& at(const T* stage, int x, int k) {
    return KCONTIG ? stage[x * LDS + k] : stage[k * LDS + x];
  }

  // This thread's first chunk of the k-tile at k0 in a tile whose x origin is x0.
  __device__ __forceinline__ static const T* interior_src(const T* __restrict__ g, long long ld,
                                                          int x0, int k0) {
    const int line = threadIdx.x / CHUNKS_PER_LINE, c = threadIdx.x % CHUNKS_PER_LINE * VEC;
    return KCONTIG ? g + (long long)(x0 + line) * ld + (k0 + c)
                   : g + (long long)(k0 + line) * ld + (x0 + c);
  }
  // Load a k-tile that lies wholly inside the operand (x0 + ROWS <= x_end, k0 + BK <= k_end);
  // src = interior_src(g, ld, x0, k0).
  __device__ __forceinline__ static void load_interior(T* stage, const T* src, long long ld) {
    load_interior_part(stage, src, ld, 0, 1);
  }
  // Part `part` of `parts` of load_interior()'s copies (a thread's chunks it with
  // it * parts / ITERS == part), for mainloops that spread a k-tile's copies over their k
  // steps; part and parts are compile-time once the caller's loop is unrolled.
  __device__ __forceinline__ static void load_interior_part(T* stage, const T* src, long long ld,
                                                            int part, int parts) {
    static_assert(INTERIOR_PATH, "load_interior needs 16-byte chunks in fixed columns");
    T* dst = stage + threadIdx.x / CHUNKS_PER_LINE * LDS + threadIdx.x % CHUNKS_PER_LINE * VEC;
    const long long step = (long long)LINES_PER_PASS * ld;  // global lines are ld apart
#pragma unroll
    for (int it = 0; it < ITERS; ++it)
      if (it * parts / ITERS == part) cp_async_16(dst + it * LINES_PER_PASS * LDS, src + it * step);
  }

  // Load the tile whose origin is (x0, k0); elements with x >= x_end or k >= k_end read as 0.
  __device__ __forceinline__ static void load(T* stage, const T* __restrict__ g, long long ld,
                                              int x0, int k0, int x_end, int k_end) {
    const int tid = threadIdx.x;
#pragma unroll (UNROLL)
    for (int it = 0; it < ITERS; ++it) {
      const int idx = tid + it * THREADS;
      if (TOTAL % THREADS == 0 || idx < TOTAL) {
        const int line = idx / CHUNKS_PER_LINE;
        const int c = idx % CHUNKS_PER_LINE * VEC;
        int gl, gc, rem;
        bool valid;
        if (KCONTIG) { gl = x0 + line; gc = k0 + c; valid = gl < x_end; rem = k_end - gc; }
        else         { gl = k0 + line; gc = x0 + c; valid = gl < k_end; rem = x_end - gc; }
        rem = rem < 0 ? 0 : (rem > VEC ? VEC : rem);
        if (!valid) rem = 0;
        T* dst = stage + line * LDS + c;
        const T* src = g + (rem > 0 ? (long long)gl * ld + gc : 0);
        if constexpr (ASYNC) {
          cp_async<CP_BYTES>(dst, src, rem * (int)sizeof(T));
        } else {
          T v;
          if (rem > 0) v = src[0]; else v = T{};
          dst[0] = v;
        }
      }
    }
  }
};

// One split's k-tiles of a dense operand X(x, k) (TileLoader L): the window along x starts
// at xw and the operand ends at x_end; the split's k range is [k0, k1). Interior k-tiles
// (the window inside the operand, before the split's last full k-tile) load through
// load_interior(), the others through the predicated load().
template <class L, int BK>
struct DenseTiles {
  using T = typename L::Elem;
  const T* g;
  const T* src;  // this thread's first chunk of k-tile 0 (INTERIOR_PATH)
  long long ld, kstep;
  int xw, x_end, k0, k1, kfull;
  bool inside;

  __device__ __forceinline__ DenseTiles(const T* g_, long long ld_, int xw_, int x_end_,
                                        int k0_, int k1_)
      : g(g_), src(L::interior_src(g_, ld_, xw_, k0_)), ld(ld_), kstep(L::KC ? BK : BK * ld_),
        xw(xw_), x_end(x_end_), k0(k0_), k1(k1_), kfull((k1_ - k0_) / BK),
        inside(xw_ + L::X_EXTENT <= x_end_) {}

  __device__ __forceinline__ bool interior(int kt) const {
    return L::INTERIOR_PATH && inside && kt < kfull;
  }
  __device__ __forceinline__ void load(T* stage, int kt) const {
    if constexpr (L::INTERIOR_PATH) {
      if (interior(kt)) {
        L::load_interior(stage, src + kt * kstep, ld);
        return;
      }
    }
    L::load(stage, g, ld, xw, k0 + kt * BK, x_end, k1);
  }
  // Part `part` of `parts` of an interior k-tile's copies (interior(kt) holds).
  __device__ __forceinline__ void load_part(T* stage, int kt, int part, int parts) const {
    if constexpr (L::INTERIOR_PATH) L::load_interior_part(stage, src + kt * kstep, ld, part, parts);
  }
};

}  // namespace skc
