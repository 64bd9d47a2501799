// wgmma_transpose.cuh: the transposers, the producer warpgroup's other warps where an operand
// is MN-major and wgmma reads its type K-major only (tf32: WgmmaSmem::TRANSPOSES): they turn
// each landed stage K-major in place (wgmma_transpose) before the consumers read it.
#pragma once
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "fixup.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_smem.cuh"

namespace skc {

// The producer's other warps where an operand is transposed in the stage (WgmmaSmem::
// TRANSPOSES): the TMA loads a tf32 operand's MN-major boxes (MN_CHUNK = 32 columns by BK =
// 32 k rows, 4 KB, 128-byte swizzled k rows) and these warps rewrite each in place as the
// K-major rows wgmma reads (32 rows of 32 k, 128-byte swizzled): a box's 32 columns become
// the 32 rows at the same 4 KB, so each box turns on its own. A chunk is 4 k of one column
// (16 bytes of its K-major row): a thread reads its 4 floats from 4 k rows (a warp's lanes
// take consecutive columns, so a warp reads whole 128-byte rows) and, once every
// transposer has read the box, stores them at once (8 lanes on 8 rows: distinct
// 16-byte chunks under the swizzle). Once every box is done, each transposer fences its
// stores to the async proxy, which the wgmmas read through, and arrives on the stage's
// `transposed` mbarrier (TRANSPOSERS arrivals: each releases its own stores).
constexpr int TRANSPOSERS = WARPGROUP - 32;  // the producer warpgroup but the issuer's warp
constexpr int TRANSPOSE_BARRIER = 4;         // named: 1 consumers, 2 and 3 a warpgroup's
constexpr int TRANSPOSE_BOX = 32;            // columns (and k) of a 32-bit MN-major box
constexpr int TRANSPOSE_BOX_CHUNKS = TRANSPOSE_BOX * TRANSPOSE_BOX / 4;

__device__ __forceinline__ float ld_shared_f32(unsigned at) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(at));
  return v;
}

// A box at a time, the next box's reads before this box's stores: a transposer holds two
// boxes' chunks (3 each) in registers, and meets the others once a box (its stores wait for
// every read of the box; the next box's reads touch only that box). The whole stage's
// chunks at once would raise the kernel's registers past its cap and spill.
template <int PER_THREAD>
__device__ __forceinline__ void transpose_read(unsigned box, int t, float4 (&v)[PER_THREAD]) {
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int c = t + i * TRANSPOSERS;  // the box's chunk: column n, k rows 4 kq ..
    const int n = c % TRANSPOSE_BOX, kq = c / TRANSPOSE_BOX;
    if (c < TRANSPOSE_BOX_CHUNKS) {
      float x[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 4 * kq + e;
        x[e] = ld_shared_f32(box + k * SWIZZLE_ROW_BYTES + (((n >> 2) ^ (k & 7)) << 4) +
                             ((n & 3) << 2));
      }
      v[i] = make_float4(x[0], x[1], x[2], x[3]);
    }
  }
}

template <int PER_THREAD>
__device__ __forceinline__ void transpose_write(unsigned box, int t,
                                                const float4 (&v)[PER_THREAD]) {
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int c = t + i * TRANSPOSERS;
    const int n = c % TRANSPOSE_BOX, kq = c / TRANSPOSE_BOX;
    if (c < TRANSPOSE_BOX_CHUNKS)
      st_shared_f4(box + n * SWIZZLE_ROW_BYTES + ((kq ^ (n & 7)) << 4), v[i]);
  }
}

__device__ __forceinline__ void transposers_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(TRANSPOSE_BARRIER), "n"(TRANSPOSERS) : "memory");
}

template <class Cfg, int ROWS>
__device__ __forceinline__ void transpose_stage(unsigned at, int t) {
  static_assert(sizeof(typename Cfg::TIn) == 4 && Cfg::BK == TRANSPOSE_BOX,
                "32-bit operands, one box's k rows a k-tile");
  constexpr int PER_THREAD = (TRANSPOSE_BOX_CHUNKS + TRANSPOSERS - 1) / TRANSPOSERS;
  constexpr int BOX_BYTES = TRANSPOSE_BOX * SWIZZLE_ROW_BYTES, BOXES = ROWS / TRANSPOSE_BOX;
  float4 v[PER_THREAD], next[PER_THREAD];
  transpose_read(at, t, v);
#pragma unroll 1
  for (int b = 0; b < BOXES; ++b) {
    transposers_sync();  // every transposer has read box b
    if (b + 1 < BOXES) transpose_read(at + (b + 1) * BOX_BYTES, t, next);
    transpose_write(at + b * BOX_BYTES, t, v);
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) v[i] = next[i];
  }
}

// The transposers' walk: every k-tile of every split of the CTA, as the issuer loads them.
template <class Cfg>
__device__ __forceinline__ void wgmma_transpose(const WgmmaSmem<Cfg>& sm, const int* table,
                                                const int* cta_offsets, int M, int N,
                                                int tile_order, int t) {
  using Sm = WgmmaSmem<Cfg>;
  RingCursor at;
  for_each_split_of<Cfg::BM, Cfg::BN, false, false, true>(
      blockIdx.x, table, cta_offsets, M, N, tile_order, [&](const Split& s) {
    const int ktiles = (s.k1 - s.k0 + Cfg::BK - 1) / Cfg::BK;
    for (int kt = 0; kt < ktiles; ++kt) {
      mbar_wait(&sm.full[at.stage], at.phase);
      const unsigned st = smem_addr(sm.stage(at.stage));
      if constexpr (Sm::A_TRANSPOSED) transpose_stage<Cfg, Cfg::BM>(st, t);
      if constexpr (Sm::B_TRANSPOSED) transpose_stage<Cfg, Cfg::BN>(st + Sm::OA::STAGE_BYTES, t);
      fence_async_shared();  // the stores, to the async proxy the wgmmas read through
      mbar_arrive(&sm.transposed[at.stage]);  // each releases its own stores
      at.template advance<Cfg::STAGES>();
    }
  }, FollowPreviousGrid<Cfg::REDUCTION>());
}

}  // namespace skc
