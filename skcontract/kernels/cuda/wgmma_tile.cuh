// wgmma_tile.cuh: what every part of the Wgmma kernel (sk_wgmma.cuh) shares about a tile: the
// warpgroup and swizzle constants, the consumers' accumulator fragment (WgmmaTile), one k
// step of wgmma (wgmma_step), one operand's stage in shared memory (WgmmaOperand: its
// layout, its wgmma descriptors and its TMA loads, whole, in parts, or multicast), and the
// 16-byte shared-memory loads and stores that the passes over a stage or a staging use.
#pragma once
#include "sk_common.cuh"
#include "hopper.cuh"

namespace skc {

constexpr int WARPGROUP = 128;
constexpr int SWIZZLE_ROW_BYTES = 128;   // one row of a 128-byte-swizzled box
constexpr int SWIZZLE_ATOM_BYTES = 1024; // 8 rows: the swizzle pattern's period
constexpr int WGMMA_M = 64;              // rows of one wgmma: a consumer warpgroup's share
constexpr int WGMMA_K_BYTES = 32;        // one wgmma's K of a K-major row: 16 f16, 8 tf32, 32 s8
// One wgmma's K in elements of T, and the 16-bit rule: wgmma reads 32-bit (tf32) and 8-bit
// (s8) operands K-major only (it has transpose bits for f16 / bf16 alone).
template <class T>
constexpr int WGMMA_K = WGMMA_K_BYTES / (int)sizeof(T);
template <class T, bool KMAJOR>
constexpr bool WGMMA_READS = KMAJOR || sizeof(T) == 2;
// The calling thread's warpgroup, read from lane 0 so that the compiler knows the warp
// agrees on it and may keep what is derived from it (the wgmma descriptors) in uniform
// registers, as ptxas does on the 128 x 256 tile.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, (int)threadIdx.x / WARPGROUP, 0);
}

// The consumers' view of the tile, what the fixup and the epilogue use (sk_gemm.cuh lists
// the interface): one warpgroup per 64 rows; a thread's accumulators are wgmma's m64nBN
// fragment: accumulator i is row group_row + 8 ((i / 2) % 2), column 8 (i / 4) +
// group_col + i % 2 of its warpgroup's rows, so pairs (i, i + 1) are adjacent columns.
template <int BM, int BN, class AccT = float>
struct WgmmaTile {
  using Acc = AccT;  // float (f16, bf16, tf32 operands) or int (s8)
  static constexpr int CONSUMER_GROUPS = BM / WGMMA_M;
  static constexpr int THREADS = CONSUMER_GROUPS * WARPGROUP;
  static constexpr int NACC = BN / 2;
  static constexpr int PAIR = 2;
  static_assert(BM % WGMMA_M == 0 && BN % 64 == 0, "wgmma tiles are multiples of 64");
  // the first row and column of thread t's fragment inside its warpgroup's rows
  __device__ __forceinline__ static int group_row(int t) {
    return 16 * ((t >> 5) & 3) + ((t & 31) >> 2);
  }
  __device__ __forceinline__ static int group_col(int t) { return 2 * (t & 3); }
  __device__ __forceinline__ static void coord(unsigned t, int i, int& r, int& c) {
    r = WGMMA_M * (t / WARPGROUP) + group_row(t) + 8 * ((i >> 1) & 1);
    c = 8 * (i >> 2) + group_col(t) + (i & 1);
  }
};

// One k step (WGMMA_K<TIn> elements) of a consumer warpgroup: the transpose bits are
// template arguments of the instruction, so the four layout pairs dispatch here at compile
// time.
template <int BN, bool AK, bool BK_, class TIn, class Acc>
__device__ __forceinline__ void wgmma_step(Acc (&d)[BN / 2], unsigned long long da,
                                           unsigned long long db, int scale_d) {
  static_assert(WGMMA_READS<TIn, AK> && WGMMA_READS<TIn, BK_>,
                "wgmma reads 32- and 8-bit operands K-major only");
  constexpr int TA = AK ? 0 : 1, TB = BK_ ? 0 : 1;
  if constexpr (BN == 64) {
    wgmma_m64n64<TA, TB>(d, da, db, scale_d, TIn{});
  } else if constexpr (BN == 128) {
    wgmma_m64n128<TA, TB>(d, da, db, scale_d, TIn{});
  } else {
    static_assert(BN == 256, "Wgmma tiles are 64, 128 or 256 wide");
    wgmma_m64n256<TA, TB>(d, da, db, scale_d, TIn{});
  }
}

// Shared-memory layout of one operand's stage and its wgmma descriptors. K-major (k
// contiguous in memory): ROWS rows of BK elements, one 128-byte swizzled row each; a k step
// moves WGMMA_K_BYTES along the row; 8-row groups are SWIZZLE_ATOM_BYTES apart (the
// descriptor's stride offset; the leading offset is unused). MN-major: ROWS / MN_CHUNK
// boxes of BK rows of MN_CHUNK elements (128 bytes); wgmma reads it for 16-bit types (a k16
// step moves 16 rows, 2048 bytes; boxes are BK * 128 bytes apart, the leading offset, 8-k
// groups SWIZZLE_ATOM_BYTES apart, the stride offset); a 32-bit one is loaded so and turned
// K-major in place before the wgmmas read it (transpose_stage).
template <class TIn, int ROWS, int BK, bool KMAJOR>
struct WgmmaOperand {
  // elements of an M- or N-major box row (one 128-byte swizzle row)
  static constexpr int MN_CHUNK = SWIZZLE_ROW_BYTES / (int)sizeof(TIn);
  static constexpr int STAGE_BYTES = ROWS * BK * (int)sizeof(TIn);
  static constexpr int BOX_BYTES = MN_CHUNK * BK * (int)sizeof(TIn);  // one MN-major box
  static_assert(BK * (int)sizeof(TIn) == SWIZZLE_ROW_BYTES, "BK fills one swizzle row");
  // Bytes one load brings for an operand of `rows` rows: a K-major box stops at the operand's
  // rows rounded up to a swizzle atom when it is narrower than the tile (the host encodes the
  // same box: skcontract/kernels/tma.py, kmajor_box_rows); the rows it leaves stale feed only
  // outputs past the operand, which are never stored. An MN-major box is always whole.
  __device__ __forceinline__ static unsigned load_bytes(int rows) {
    if constexpr (KMAJOR) {
      constexpr int ATOM_ROWS = SWIZZLE_ATOM_BYTES / SWIZZLE_ROW_BYTES;
      if (rows >= ROWS) return STAGE_BYTES;  // (and no rounding of rows near 2^31)
      return (unsigned)((rows + ATOM_ROWS - 1) / ATOM_ROWS * ATOM_ROWS * SWIZZLE_ROW_BYTES);
    } else {
      return STAGE_BYTES;
    }
  }
  // Bytes from a stage's start to rows [row0, row0 + 64 or ROWS) at k step kk.
  __device__ __forceinline__ static int offset(int row0, int kk) {
    if constexpr (KMAJOR)
      return row0 * SWIZZLE_ROW_BYTES + kk * WGMMA_K_BYTES;
    else
      return (row0 / MN_CHUNK) * BOX_BYTES + kk * WGMMA_K<TIn> * SWIZZLE_ROW_BYTES;
  }
  // descriptor of rows [row0, row0 + 64 or ROWS) of the stage at k step kk
  __device__ __forceinline__ static unsigned long long desc(const unsigned char* stage, int row0,
                                                            int kk) {
    static_assert(WGMMA_READS<TIn, KMAJOR>, "wgmma reads 32- and 8-bit operands K-major only");
    return wgmma_desc(stage + offset(row0, kk), KMAJOR ? 16 : BOX_BYTES, SWIZZLE_ATOM_BYTES);
  }
  // The descriptor `bytes` further on (a multiple of 16, the address staying in shared
  // memory): the start address is the low field, in 16-byte units, and holds any address
  // under 2^18, so the sum never carries out of it and adds to the low word alone.
  __device__ __forceinline__ static unsigned long long advance(unsigned long long desc,
                                                               unsigned bytes) {
    return (desc >> 32 << 32) | ((unsigned)desc + (bytes >> 4));
  }
  // Part `part` of PARTS equal parts of the stage, multicast into the same offset of every
  // CTA of the cluster, each completing its bytes on its own `bar`: the operand a cluster
  // pair shares. A part is a block of rows (rows [x0 + part ROWS / PARTS, ..)), or, for an
  // MN-major stage of one box (ROWS = 64), a block of its k rows: either way whole swizzle
  // atoms at their own offset in the stage, so the swizzle, which follows the shared-memory
  // address, lays them out as one load of the whole stage would. The host encodes the
  // map's box as one part (skcontract/kernels/tma.py, load_box).
  template <int PARTS>
  __device__ __forceinline__ static void load_part(unsigned char* stage, const TmaMap& map,
                                                   unsigned long long* bar, int x0, int k,
                                                   int batch, int part) {
    constexpr int PART_ROWS = ROWS / PARTS;
    constexpr int ATOM_ROWS = SWIZZLE_ATOM_BYTES / SWIZZLE_ROW_BYTES;
    constexpr unsigned short ALL = (unsigned short)((1u << PARTS) - 1);
    const int r0 = part * PART_ROWS;
    if constexpr (KMAJOR) {
      static_assert(PART_ROWS % ATOM_ROWS == 0, "a K-major part is whole swizzle atoms");
      tma_load_3d_multicast(stage + r0 * SWIZZLE_ROW_BYTES, map, bar, k, x0 + r0, batch, ALL);
    } else if constexpr (PART_ROWS < MN_CHUNK) {
      constexpr int PART_K = BK / PARTS;
      static_assert(ROWS == MN_CHUNK && PART_K % ATOM_ROWS == 0,
                    "an MN-major part within one box is whole swizzle atoms of its k rows");
      tma_load_3d_multicast(stage + part * PART_K * SWIZZLE_ROW_BYTES, map, bar, x0,
                            k + part * PART_K, batch, ALL);
    } else {
      static_assert(PART_ROWS % MN_CHUNK == 0, "an MN-major part is whole boxes");
#pragma unroll
      for (int j = 0; j < PART_ROWS / MN_CHUNK; ++j)
        tma_load_3d_multicast(stage + (r0 / MN_CHUNK + j) * BOX_BYTES, map, bar,
                              x0 + r0 + j * MN_CHUNK, k, batch, ALL);
    }
  }
  // The first `count` of PARTS equal blocks of the stage's rows, each at its own offset
  // (whole swizzle atoms, or whole MN_CHUNK-element boxes MN-major), through a map whose box is
  // one block: a HyTiS small row loads one half of B, its full tiles both.
  template <int PARTS>
  __device__ __forceinline__ static void load_parts(unsigned char* stage, const TmaMap& map,
                                                    unsigned long long* bar, int x0, int k,
                                                    int batch, int count) {
    constexpr int PART_ROWS = ROWS / PARTS;
    if constexpr (KMAJOR) {
      static_assert(PART_ROWS % (SWIZZLE_ATOM_BYTES / SWIZZLE_ROW_BYTES) == 0,
                    "a K-major part is whole swizzle atoms");
#pragma unroll
      for (int p = 0; p < PARTS; ++p)
        if (p < count)
          tma_load_3d(stage + p * PART_ROWS * SWIZZLE_ROW_BYTES, map, bar, k, x0 + p * PART_ROWS,
                      batch);
    } else {
      static_assert(PART_ROWS % MN_CHUNK == 0, "an MN-major part is whole boxes");
#pragma unroll
      for (int j = 0; j < ROWS / MN_CHUNK; ++j)
        if (j < count * (PART_ROWS / MN_CHUNK))
          tma_load_3d(stage + j * BOX_BYTES, map, bar, x0 + j * MN_CHUNK, k, batch);
    }
  }
  // TMA loads of the stage: rows [x0, x0 + ROWS) at k; coordinates are innermost first.
  __device__ __forceinline__ static void load(unsigned char* stage, const TmaMap& map,
                                              unsigned long long* bar, int x0, int k, int batch) {
    if constexpr (KMAJOR) {
      tma_load_3d(stage, map, bar, k, x0, batch);
    } else {
#pragma unroll
      for (int j = 0; j < ROWS / MN_CHUNK; ++j)
        tma_load_3d(stage + j * BOX_BYTES, map, bar, x0 + j * MN_CHUNK, k, batch);
    }
  }
};

__device__ __forceinline__ float4 ld_shared_f4(unsigned at) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(at));
  return v;
}

__device__ __forceinline__ void st_shared_f4(unsigned at, float4 v) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n"
               ::"r"(at), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

}  // namespace skc
