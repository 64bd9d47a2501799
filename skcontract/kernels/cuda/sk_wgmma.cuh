// sk_wgmma.cuh: the Wgmma family's persistent Stream-K GEMM kernel for sm_90a (the entry
// header of skcontract/kernels/catalogue.py's Wgmma entries; jit.py inlines its includes).
//
// The CTA is BM / 64 consumer warpgroups (the first threads) and one producer warpgroup
// (the last). One producer thread walks the CTA's rows of the split table (for_each_split,
// as every family does) and, for each k-tile, waits for a free stage of the shared-memory
// ring and loads the A and B boxes into it with TMA (128-byte swizzle, zero fill past the
// operands' edges), completing on the stage's `full` mbarrier. The consumers walk the same
// rows in the same order, so both sides derive the same k-tile sequence from the table and
// the ring's phases agree with no other communication. Each consumer warpgroup multiplies
// its 64 rows of the tile with wgmma.mma_async m64nBNkK straight from shared memory, keeps
// one k-tile's wgmmas in flight, and frees a stage (one arrival per warp on its `empty`
// mbarrier) once the wgmmas that read it are done. The fixup (fixup.cuh) and the epilogue
// run on the consumers only, synchronising through named barriers 1 (all consumers) and
// 2, 3 (one warpgroup's epilogue); the producer never waits on a fixup, so the
// deadlock-freedom argument of docs/design/stream_k.md is unchanged. Where an operand is
// MN-major and wgmma reads its type K-major only (3xTF32's, WgmmaSmem::TRANSPOSES), the
// producer warpgroup's other warps turn each landed stage K-major (wgmma_transpose; named
// barrier 4) and mark it on the stage's `transposed` mbarrier, which the consumers wait on
// after `full`.
//
// Cfg (skcontract/kernels/catalogue.py, Wgmma.cfg_lines): TIn, TOut, Acc, BM (64 or 128),
// BN (64, 128 or 256), BK (one 128-byte swizzle row: 64 16-bit, 32 tf32 or 128 s8), STAGES,
// THREADS (BM / 64 + 1 warpgroups), MIN_BLOCKS, REDUCTION, A_KMAJOR, B_KMAJOR, EPI_PITCH
// (the epilogue staging's row pitch in floats), SPLIT_REGS (registers a thread of a launch
// whose warpgroups trade registers; 0: no trade) with PRODUCER_REGS and CONSUMER_REGS (the
// setmaxnreg targets of the trade: the producer keeps what issuing TMA needs, the consumers
// take the rest), STORE_COLS (WgmmaEpilogue), TF32X3 (float32 operands at float32 accuracy:
// split_stage and wgmma_consume_x3 below), ML (WgmmaTile below), SMALL_BN (HyTiS: the
// columns of the small tile the table's FLAG_SMALL rows name, BM x SMALL_BN = BN / 2; 0 for
// a kernel that runs the one tile). Shared memory: WgmmaSmem.
//
// HyTiS (SMALL_BN > 0): a small row's k-tile loads A's box and the first half of B's stage
// (B's map box is one half: the full tile loads two), its wgmmas are m64nSMALL_BN on the
// first half of the accumulators (m64nN's fragment for N = BN / 2 is the first half of
// N = BN's, and the stage's layout, 64-column boxes or K-major rows, is the same), and the
// epilogue stores SMALL_BN columns. Whole tiles only: such a kernel runs no fixup.
//
// Probe builds (jit.py's PROBES; tools/time_gemm.py --probe) time one half of the mainloop,
// their outputs wrong: SKCONTRACT_PROBE_LOADS_ONLY, the loads alone (the consumers wait for
// each stage and free it, issuing no wgmma); SKCONTRACT_PROBE_MMA_ONLY, the wgmmas alone (the
// producer loads the ring once, then marks each freed stage full without loading it).
// 3xTF32's mainloop has no probe.
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "fixup.cuh"
#include "epilogue.cuh"

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
// registers, as ptxas does on the 128 x 256 tile (docs/benchmarks/log.md).
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, (int)threadIdx.x / WARPGROUP, 0);
}
// Loads in flight a consumer thread keeps in the shared sum's pass (Fixup::finish_shared): its
// accumulators are dead by then, and fewer dependent L2 round trips shorten the pass that
// ends the kernel (the portable families keep the Fixup's default).
constexpr int SHARED_SUM_BATCH = 8;

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

// ---- 3xTF32 (Cfg::TF32X3) ---------------------------------------------------------------
// A float x is big + small: big is what tf32 wgmma reads of x itself (its 10-bit mantissa,
// the low 13 bits ignored), small = x - big (exact in fp32), rounded here to tf32 so that
// wgmma reads it whole. The k step sums small x big, big x small and big x big; the
// dropped small x small is below 2^-20 of the product. A non-finite x has small 0 (its big
// carries the inf or nan).
constexpr unsigned TF32_BIG_MASK = 0xffffe000u;  // sign, exponent and 10 mantissa bits
constexpr unsigned TF32_RNA_HALF = 0x1000u;      // half of tf32's last place, in fp32 bits

// small is rounded to nearest, ties away, by adding half a tf32 place to its bit pattern:
// on a finite float the carry runs into the exponent as rounding up in magnitude does, and
// the low 13 bits left behind are the ones wgmma ignores (cvt.rna.tf32.f32 leaves them too).
// Five instructions an element, half of what cvt.rna.tf32.f32 with its own non-finite guard
// compiles to: the split runs on the consumers between one k-tile's wgmmas and the next's.
__device__ __forceinline__ float tf32_small(float x) {
  const float small = x - __uint_as_float(__float_as_uint(x) & TF32_BIG_MASK);
  const float rounded = __uint_as_float(__float_as_uint(small) + TF32_RNA_HALF);
  return __finitef(x) ? rounded : 0.0f;
}

// The tile's store, through shared memory, by one of two paths (the host picks per launch:
// the kernel's store_tma argument, skcontract/kernels/tma.py's output_map).
//
// run_tma (beta == 0, C addressable by TMA): each consumer warpgroup converts its WGMMA_M
// rows to TOut (alpha applied in fp32) into a 128-byte-swizzled staging of STORE_COLS
// columns, 64-column boxes of WGMMA_M rows (fragment writes land on distinct banks: the
// swizzle moves a row's 16-byte chunks by the row), and one thread stores the boxes with TMA
// through C's map, whose swizzle undoes the staging's; past C's extents nothing is written.
// That thread waits only until its stores have read the staging, before the staging is
// rewritten (the next pass of a wide tile, or the next tile): the global writes drain while
// the warpgroup runs its next tile's mainloop, instead of stalling every thread on them.
//
// run (the other launches): wgmma's fragments put a warp's pairs of columns on 8 rows at
// once (16 useful bytes per 32-byte sector), so each consumer warpgroup stages its WGMMA_M
// rows EPI_COLS columns at a time in fp32 (fragment pairs in, conflict-free with the padded
// pitch), then writes them out a row segment per 8 lanes, 4 elements a lane, with alpha /
// beta applied in fp32 as the portable epilogue does (epilogue.cuh). Rows and columns past
// the split's tile are not stored; an unaligned row falls back to element stores.
// READS > 1: the staged rows are read back by ld.shared (through a generic pointer into the
// dynamic shared memory they are generic loads, with a global load's latency, and each
// store waits for its own), READS of them before they are stored, so that the reads
// overlap. READS == 1 keeps the generic reads: the shared address costs a register the
// tightest entries lack.
constexpr int EPI_COLS = 32;
constexpr int EPI_VEC = 4;               // output elements a lane stores at once
constexpr int EPI_BARRIER0 = 2;          // named barriers 2, 3: one per consumer warpgroup

template <class TOut> struct alignas(EPI_VEC * sizeof(TOut)) OutVec { TOut v[EPI_VEC]; };

// PITCH (floats a staging row, Cfg::EPI_PITCH): 8 more than a multiple of 32, so the 4 rows
// of a half-warp's 8-byte fragment writes land on distinct banks.
// READS: staged rows a lane reads before it stores them (EpiReads).
// STORE_COLS: columns of a run_tma pass (Cfg::STORE_COLS: BN, or less where the staging of
// the whole tile does not fit beside the ring).
template <int BN, class TOut, int PITCH, int READS, int STORE_COLS>
struct WgmmaEpilogue {
  static_assert(PITCH >= EPI_COLS && PITCH % 32 == 8, "conflict-free staging rows");
  static_assert((WGMMA_M * EPI_COLS / EPI_VEC / WARPGROUP) % READS == 0, "whole read batches");
  using Tile = WgmmaTile<WGMMA_M, BN>;
  static constexpr int NACC = BN / 2;
  static constexpr int GROUP_FLOATS = WGMMA_M * PITCH;  // run's staging of one warpgroup
  static constexpr int BOX_COLS = SWIZZLE_ROW_BYTES / (int)sizeof(TOut);  // a TMA store box
  static constexpr int BOX_BYTES = WGMMA_M * SWIZZLE_ROW_BYTES;
  static_assert(STORE_COLS % BOX_COLS == 0 && BN % STORE_COLS == 0, "whole boxes, whole passes");
  // run_tma packs a fragment's column pairs into 32-bit words: 16-bit outputs only (the host
  // encodes no output map for others: skcontract/kernels/tma.py, output_map).
  static constexpr bool TMA_STORE = sizeof(TOut) == 2;
  static constexpr int TMA_STAGING_BYTES = TMA_STORE ? STORE_COLS / BOX_COLS * BOX_BYTES : 0;
  // one warpgroup's staging, either path's; a swizzle atom's multiple keeps every box on one
  static constexpr int BYTES_PER_GROUP =
      GROUP_FLOATS * 4 > TMA_STAGING_BYTES ? GROUP_FLOATS * 4 : TMA_STAGING_BYTES;
  static_assert(BYTES_PER_GROUP % SWIZZLE_ATOM_BYTES == 0, "boxes on swizzle atoms");

  __device__ __forceinline__ static void group_sync(int wg) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(EPI_BARRIER0 + wg), "n"(WARPGROUP) : "memory");
  }

  // The thread of a warpgroup that issues its TMA stores (and alone waits for them).
  __device__ __forceinline__ static bool store_issuer() { return threadIdx.x % WARPGROUP == 0; }

  // cols: the tile's columns from s.n0 (BN, or a HyTiS small row's); none past them is
  // stored (a TMA box would write the next tile's).
  __device__ __forceinline__ static void run_tma(const Split& s, const float (&acc)[NACC],
                                                 float* staging, const TmaMap& map_c,
                                                 float alpha, int cols = BN) {
    if constexpr (!TMA_STORE) {
      __trap();
    } else {
      run_tma_16(s, acc, staging, map_c, alpha, cols);
    }
  }

  __device__ __forceinline__ static void run_tma_16(const Split& s, const float (&acc)[NACC],
                                                    float* staging, const TmaMap& map_c,
                                                    float alpha, int cols) {
    const int t = threadIdx.x, wg = t / WARPGROUP, lt = t % WARPGROUP;
    unsigned char* buf = reinterpret_cast<unsigned char*>(staging) + wg * BYTES_PER_GROUP;
    const unsigned base = smem_addr(buf);
    const int fr = Tile::group_row(lt), fc = Tile::group_col(lt);
    // a fragment row's 16-byte chunks are XORed by its row within the swizzle atom (fr and
    // fr + 8 share it); its pair of columns is 2 elements into the chunk
    const unsigned row_at = base + fr * SWIZZLE_ROW_BYTES + fc * (int)sizeof(TOut);
    const int swz = fr & 7;
#pragma unroll
    for (int pass = 0; pass < BN / STORE_COLS; ++pass) {
      if (pass * STORE_COLS >= cols) break;
      if (store_issuer()) bulk_wait_read<0>();  // the last stores have read the staging
      group_sync(wg);
#pragma unroll
      for (int g = 0; g < STORE_COLS / 8; ++g) {  // 8-column groups: accumulators 4 G .. 4 G + 3
        const int i = 4 * (pass * (STORE_COLS / 8) + g);
        const int box = g / (BOX_COLS / 8), chunk = g % (BOX_COLS / 8);
        const unsigned at = row_at + box * BOX_BYTES + ((chunk ^ swz) << 4);
        st_shared_b32(at, pack2(alpha * acc[i], alpha * acc[i + 1]));
        st_shared_b32(at + 8 * SWIZZLE_ROW_BYTES, pack2(alpha * acc[i + 2], alpha * acc[i + 3]));
      }
      fence_async_shared();
      group_sync(wg);
      if (store_issuer()) {
#pragma unroll
        for (int box = 0; box < STORE_COLS / BOX_COLS; ++box)
          if (pass * STORE_COLS + box * BOX_COLS < cols)
            tma_store_3d(map_c, buf + box * BOX_BYTES,
                         s.n0 + pass * STORE_COLS + box * BOX_COLS, s.m0 + WGMMA_M * wg,
                         s.batch);
        bulk_commit();
      }
    }
  }

  // Before the CTA exits: its stores have finished reading the staging.
  __device__ __forceinline__ static void drain_tma() {
    if (store_issuer()) bulk_wait<0>();
  }

  __device__ __forceinline__ static unsigned pack2(float lo, float hi) {
    return (unsigned)Cvt<TOut>::from_f32(lo).x | ((unsigned)Cvt<TOut>::from_f32(hi).x << 16);
  }

  __device__ __forceinline__ static void st_shared_b32(unsigned at, unsigned v) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(v) : "memory");
  }

  __device__ __forceinline__ static void run(const Split& s, const float (&acc)[NACC],
                                             float* staging, TOut* __restrict__ C,
                                             long long ldc, float alpha, float beta,
                                             int cols = BN) {
    const int t = threadIdx.x, wg = t / WARPGROUP, lt = t % WARPGROUP;
    float* buf = staging + wg * (BYTES_PER_GROUP / 4);
    const int fr = Tile::group_row(lt), fc = Tile::group_col(lt);
    const int row0 = s.m0 + WGMMA_M * wg;
    // copy-out position: 8 lanes a row, EPI_VEC columns a lane
    const int lanes_per_row = EPI_COLS / EPI_VEC, rows_per_pass = WARPGROUP / lanes_per_row;
    const int orow = lt / lanes_per_row, ocol = (lt % lanes_per_row) * EPI_VEC;
    constexpr int PASSES = WGMMA_M / rows_per_pass;
#pragma unroll
    for (int chunk = 0; chunk < BN / EPI_COLS; ++chunk) {
      if (chunk * EPI_COLS >= cols) break;  // (the same for the whole warpgroup)
#pragma unroll
      for (int j = 0; j < EPI_COLS / 8; ++j) {  // 8-column groups of the chunk: i = 4 g .. 4 g + 3
        const int i = 4 * (chunk * (EPI_COLS / 8) + j);
        float* p = buf + fr * PITCH + 8 * j + fc;
        *reinterpret_cast<float2*>(p) = make_float2(acc[i], acc[i + 1]);
        *reinterpret_cast<float2*>(p + 8 * PITCH) = make_float2(acc[i + 2], acc[i + 3]);
      }
      group_sync(wg);
      const int gc = s.n0 + chunk * EPI_COLS + ocol;
      if constexpr (READS == 1) {
#pragma unroll
        for (int pass = 0; pass < PASSES; ++pass) {
          const int r = pass * rows_per_pass + orow, gr = row0 + r;
          if (gr < s.m_end && gc < s.n_end) {
            const float4 v = *reinterpret_cast<const float4*>(buf + r * PITCH + ocol);
            store(C + gr * ldc + gc, v, s.n_end - gc, alpha, beta);
          }
        }
      } else {
        const unsigned out_at = smem_addr(buf + orow * PITCH + ocol);
#pragma unroll
        for (int pass0 = 0; pass0 < PASSES; pass0 += READS) {
          float4 v[READS];
#pragma unroll
          for (int j = 0; j < READS; ++j)
            v[j] = ld_shared_f4(out_at + 4 * (pass0 + j) * rows_per_pass * PITCH);
#pragma unroll
          for (int j = 0; j < READS; ++j) {
            const int gr = row0 + (pass0 + j) * rows_per_pass + orow;
            if (gr < s.m_end && gc < s.n_end)
              store(C + gr * ldc + gc, v[j], s.n_end - gc, alpha, beta);
          }
        }
      }
      group_sync(wg);  // the buffer is rewritten by the next chunk
    }
  }

  // EPI_VEC outputs at p (those of them before the tile's end: `left` of them)
  __device__ __forceinline__ static void store(TOut* p, float4 v, int left, float alpha,
                                               float beta) {
    float o[EPI_VEC] = {alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w};
    const bool whole = left >= EPI_VEC &&
        (reinterpret_cast<unsigned long long>(p) & (sizeof(OutVec<TOut>) - 1)) == 0;
    if (whole) {
      if (beta != 0.0f) {
        const OutVec<TOut> old = *reinterpret_cast<const OutVec<TOut>*>(p);
#pragma unroll
        for (int e = 0; e < EPI_VEC; ++e) o[e] += beta * Cvt<TOut>::to_f32(old.v[e]);
      }
      OutVec<TOut> out;
#pragma unroll
      for (int e = 0; e < EPI_VEC; ++e) out.v[e] = Cvt<TOut>::from_f32(o[e]);
      *reinterpret_cast<OutVec<TOut>*>(p) = out;
    } else {
#pragma unroll
      for (int e = 0; e < EPI_VEC; ++e) {
        if (e < left) {
          float x = o[e];
          if (beta != 0.0f) x += beta * Cvt<TOut>::to_f32(p[e]);
          p[e] = Cvt<TOut>::from_f32(x);
        }
      }
    }
  }
};

// WgmmaEpilogue stages and converts fp32 accumulators; int32 ones (s8 operands) go out from
// the fragment through the portable epilogue (epilogue.cuh: a pair of columns a store, alpha
// and beta in int32, wrapping), as the shared sums of every entry do.
template <class Acc> constexpr bool WGMMA_STAGED_EPILOGUE = false;
template <> constexpr bool WGMMA_STAGED_EPILOGUE<float> = true;

// Rows a lane of the epilogue reads before storing them (WgmmaEpilogue): all four of a
// chunk where the accumulators leave registers to spare (two consumer warpgroups, at most
// 128 columns: the many-tile entries, whose short tiles the epilogue dominates), else one
// (the 64-row and 256-column tiles use every register a thread has, and the 3xTF32 tiles'
// partial sums double their mainloop's accumulators).
template <class Cfg>
struct EpiReads {
  static constexpr int value = (Cfg::BM == 128 && Cfg::BN <= 128 && !Cfg::TF32X3) ? 4 : 1;
};

// Named barrier 1 over the consumer warpgroups (barrier 0 is __syncthreads).
template <int THREADS>
struct ConsumerSync {
  __device__ __forceinline__ static void sync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
  }
};

// Where a role is in the ring: the stage it uses next and that stage's mbarrier phase.
// The producer and the consumers each keep one and advance it once per k-tile.
struct RingCursor {
  int stage = 0;
  unsigned phase = 0;
  int taken = 0;  // stages taken so far (read only by the trace build; otherwise dead)
  __device__ __forceinline__ bool at_start() const { return taken == 0; }
  template <int STAGES>
  __device__ __forceinline__ void advance() {
    ++taken;
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The shared-memory layout of a Wgmma CTA (KernelSpec.smem_bytes is its size): the ring on
// a swizzle atom, the epilogue's staging, the full / empty (and, TRANSPOSES, transposed)
// mbarriers, the fixup's flag. In the cluster protocol the staging is also where the peers'
// shares of the tile arrive (cluster_push), at least the tile's fp32 bytes: no CTA of a
// split tile stages its output.
template <class Cfg>
struct WgmmaSmem {
  using ML = typename Cfg::ML;
  using TIn = typename Cfg::TIn;
  // An MN-major operand of a type wgmma reads K-major only (tf32) is loaded MN-major and
  // turned K-major in the stage (transpose_stage) before the consumers read it.
  static constexpr bool A_TRANSPOSED = !WGMMA_READS<TIn, Cfg::A_KMAJOR>;
  static constexpr bool B_TRANSPOSED = !WGMMA_READS<TIn, Cfg::B_KMAJOR>;
  static constexpr bool TRANSPOSES = A_TRANSPOSED || B_TRANSPOSED;
  static constexpr bool A_READ_KMAJOR = Cfg::A_KMAJOR || A_TRANSPOSED;
  static constexpr bool B_READ_KMAJOR = Cfg::B_KMAJOR || B_TRANSPOSED;
  // The operands as the wgmmas read them, and as the TMA loads them.
  using OA = WgmmaOperand<TIn, Cfg::BM, Cfg::BK, A_READ_KMAJOR>;
  using OB = WgmmaOperand<TIn, Cfg::BN, Cfg::BK, B_READ_KMAJOR>;
  using OALoad = WgmmaOperand<TIn, Cfg::BM, Cfg::BK, Cfg::A_KMAJOR>;
  using OBLoad = WgmmaOperand<TIn, Cfg::BN, Cfg::BK, Cfg::B_KMAJOR>;
  static_assert(Cfg::SMALL_BN == 0 || (Cfg::SMALL_BN * 2 == Cfg::BN && Cfg::CLUSTER == 1),
                "HyTiS's small tile is half the columns, on single CTAs");
  static_assert(!TRANSPOSES || (Cfg::SMALL_BN == 0 && Cfg::CLUSTER == 1),
                "a transposed operand's stage is loaded whole, by one CTA");
  // B's stage in parts: a pair's CTAs load one each, a HyTiS small row the first of two
  static constexpr int B_PARTS = Cfg::SMALL_BN > 0 ? 2 : Cfg::CLUSTER;
  using OBPart = WgmmaOperand<TIn, Cfg::BN / B_PARTS, Cfg::BK, Cfg::B_KMAJOR>;
  using Store = WgmmaEpilogue<Cfg::BN, typename Cfg::TOut, Cfg::EPI_PITCH, EpiReads<Cfg>::value,
                              Cfg::STORE_COLS>;
  // the bytes of a stage's A and B boxes; a 3xTF32 stage holds their small parts after
  // them, in the same layout (split_stage)
  static constexpr int LOADED_BYTES = OA::STAGE_BYTES + OB::STAGE_BYTES;
  static constexpr int STAGE_BYTES = LOADED_BYTES * (Cfg::TF32X3 ? 2 : 1);
  // Bytes a stage's loads bring this CTA: its A box and every part of B (a small row's
  // one part).
  __device__ __forceinline__ static unsigned stage_tx(int M, int N, bool small = false) {
    return OALoad::load_bytes(M) + (small ? 1 : B_PARTS) * OBPart::load_bytes(N);
  }
  static constexpr int FLAG_WORDS = 2;  // the fixup flag's 16 bytes (WGMMA_FLAG_BYTES)
  static constexpr int STAGING_BYTES = ML::CONSUMER_GROUPS * Store::BYTES_PER_GROUP;
  static constexpr int RECEIVE_BYTES = Cfg::BM * Cfg::BN * 4;
  static constexpr int EPI_BYTES =
      Cfg::REDUCTION == REDUCTION_CLUSTER && RECEIVE_BYTES > STAGING_BYTES ? RECEIVE_BYTES
                                                                          : STAGING_BYTES;
  unsigned char* ring;
  float* epi;
  unsigned long long* full;
  unsigned long long* empty;
  unsigned long long* transposed;  // (TRANSPOSES) a landed stage is K-major: consumers may read
  int* flag;
  // The cluster protocol's barrier (cluster_push), after the flag; the host allocates it for
  // its specs only.
  unsigned long long* ready;
  __device__ __forceinline__ explicit WgmmaSmem(unsigned char* raw) {
    ring = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<unsigned long long>(raw) + SWIZZLE_ATOM_BYTES - 1) &
        ~(unsigned long long)(SWIZZLE_ATOM_BYTES - 1));
    epi = reinterpret_cast<float*>(ring + Cfg::STAGES * STAGE_BYTES);
    full = reinterpret_cast<unsigned long long*>(ring + Cfg::STAGES * STAGE_BYTES + EPI_BYTES);
    empty = full + Cfg::STAGES;
    transposed = empty + Cfg::STAGES;
    flag = reinterpret_cast<int*>(transposed + (TRANSPOSES ? Cfg::STAGES : 0));
    ready = reinterpret_cast<unsigned long long*>(flag) + FLAG_WORDS;
  }
  // One past the last byte the kernel uses.
  __device__ __forceinline__ const unsigned char* end() const {
    return Cfg::REDUCTION == REDUCTION_CLUSTER ? reinterpret_cast<unsigned char*>(ready + 1)
                                               : reinterpret_cast<unsigned char*>(flag + 1);
  }
  __device__ __forceinline__ unsigned char* stage(int s) const {
    return ring + s * STAGE_BYTES;
  }
};

// Whether split s is a HyTiS small row (only a kernel with the small tile has them).
template <class Cfg>
__device__ __forceinline__ bool small_row(const Split& s) {
  return Cfg::SMALL_BN > 0 && (s.flags & FLAG_SMALL);
}

// Where the producer's boxes come from. A Loads has prefetch() (the maps' descriptors),
// split(s) (a split's coordinates, once per split) and load(stage, bar, kt) (k-tile kt of
// the split: A's box, then B's, completing on bar; called for kt = 0, 1, ... in turn).
// MASKS: whether a landed stage may need a touch-up before the wgmmas read it (then
// masks() says whether this launch's do, and masked_from(t), of K's t-th k-tile, and
// mask() make it: mask_stage). DenseTmaLoads reads a GEMM's strided operands through tiled
// maps over (k, rows, batch); sk_wgmma_conv.cuh's Im2colTmaLoads reads a convolution's
// input through an im2col map.
template <class Cfg>
struct DenseTmaLoads {
  using Sm = WgmmaSmem<Cfg>;
  static constexpr bool MASKS = false;  // the stages are used as loaded
  const TmaMap& map_a;
  const TmaMap& map_b;
  bool batched_a, batched_b;
  int part = 0;  // a pair's cluster rank: the part of B this CTA loads for both
  int m0 = 0, n0 = 0, k0 = 0, ba = 0, bb = 0;
  bool small = false;  // a HyTiS small row: the first half of B
  __device__ __forceinline__ void prefetch() const {
    tma_prefetch(map_a);
    tma_prefetch(map_b);
  }
  __device__ __forceinline__ void split(const Split& s) {
    m0 = s.m0;
    n0 = s.n0;
    k0 = s.k0;
    ba = batched_a ? s.batch : 0;
    bb = batched_b ? s.batch : 0;
    small = small_row<Cfg>(s);
  }
  __device__ __forceinline__ void load(unsigned char* st, unsigned long long* bar, int kt) const {
    const int k = k0 + kt * Cfg::BK;
    Sm::OALoad::load(st, map_a, bar, m0, k, ba);
    if constexpr (Cfg::CLUSTER > 1)
      Sm::OBLoad::template load_part<Cfg::CLUSTER>(st + Sm::OA::STAGE_BYTES, map_b, bar, n0, k,
                                                   bb, part);
    else if constexpr (Cfg::SMALL_BN > 0)
      Sm::OBLoad::template load_parts<Sm::B_PARTS>(st + Sm::OA::STAGE_BYTES, map_b, bar, n0, k,
                                                   bb, small ? 1 : Sm::B_PARTS);
    else
      Sm::OBLoad::load(st + Sm::OA::STAGE_BYTES, map_b, bar, n0, k, bb);
  }
};

// A cluster pair's work unit is a tile of CLUSTER * BM rows: its CTAs walk the unit's rows
// of the table together, each computing BM of the rows (by cluster rank) with the same k
// range, so they load the same B k-tiles, which they share by multicast. Each keeps its own
// fixup: CLUSTER locks and slots a tile (the host allocates them), a tile's arrival slots
// still consecutive in SPLIT order for each CTA. A CTA whose rows lie past M computes
// zeros and stores nothing, but still runs every k-tile: its peer's loads and stage
// releases wait on it.
template <class Cfg>
__device__ __forceinline__ Split cluster_part(Split s, int rank) {
  if constexpr (Cfg::CLUSTER > 1) {
    s.m0 += rank * Cfg::BM;
    s.mw = s.m0;
    s.m_end = max(s.m0, min(s.m_end, s.m0 + Cfg::BM));
    if (s.tile >= 0) {
      if (Cfg::REDUCTION == REDUCTION_ARRIVAL)
        s.slot = Cfg::CLUSTER * (s.slot - s.split) + rank * s.peers + s.split;
      else if (s.slot >= 0)
        s.slot = Cfg::CLUSTER * s.slot + rank;
      s.tile = Cfg::CLUSTER * s.tile + rank;
    }
  }
  return s;
}

// The producer's thread: every k-tile of every split of the CTA, into the ring.
template <class Cfg, class Loads>
__device__ __forceinline__ void wgmma_produce(const WgmmaSmem<Cfg>& sm, Loads& loads,
                                              const int* table, const int* cta_offsets, int M,
                                              int N, int tile_order) {
  using Sm = WgmmaSmem<Cfg>;
  const int rank = loads.part;
  RingCursor at;
#ifdef SKCONTRACT_PROBE_MMA_ONLY
  int loaded = 0;  // the probe build loads the ring once, then marks its stages full
#endif
  for_each_split_of<Cfg::BM * Cfg::CLUSTER, Cfg::BN, false, false, true>(
      blockIdx.x / Cfg::CLUSTER, table, cta_offsets, M, N, tile_order, [&](const Split& us) {
    const Split s = cluster_part<Cfg>(us, rank);
    if (at.at_start()) trace(TRACE_FIRST_SPLIT);
    const int ktiles = (s.k1 - s.k0 + Cfg::BK - 1) / Cfg::BK;
    const unsigned stage_tx = Sm::stage_tx(M, N, small_row<Cfg>(s));
    loads.split(s);
    for (int kt = 0; kt < ktiles; ++kt) {
      mbar_wait(&sm.empty[at.stage], at.phase ^ 1);  // a fresh barrier's previous phase is done
#ifdef SKCONTRACT_PROBE_MMA_ONLY
      if (loaded++ >= Cfg::STAGES) {
        mbar_arrive(&sm.full[at.stage]);
        at.template advance<Cfg::STAGES>();
        continue;
      }
#endif
      trace_ktile(KTILE_ISSUED, at.taken);
      mbar_arrive_expect_tx(&sm.full[at.stage], stage_tx);
      loads.load(sm.stage(at.stage), &sm.full[at.stage], kt);
      if (at.at_start()) trace(TRACE_FIRST_LOAD);
      at.template advance<Cfg::STAGES>();
    }
  }, FollowPreviousGrid<Cfg::REDUCTION>());
  trace(TRACE_LAST_LOAD);
  if constexpr (Cfg::CLUSTER > 1) {
    // Stay until every consumer of the cluster has released every stage: the peer's
    // consumers arrive on this CTA's barriers, which must outlive their arrivals.
    for (int i = 0; i < Cfg::STAGES; ++i) {
      mbar_wait(&sm.empty[at.stage], at.phase ^ 1);
      at.template advance<Cfg::STAGES>();
    }
  }
}

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

// Wait until the stage at `at` may be read: loaded and, where an operand is transposed in
// it, turned K-major (waiting on both: the loads' bytes are the consumers' own to see).
template <class Cfg>
__device__ __forceinline__ void wait_stage(const WgmmaSmem<Cfg>& sm, const RingCursor& at) {
  mbar_wait(&sm.full[at.stage], at.phase);
  if constexpr (WgmmaSmem<Cfg>::TRANSPOSES) mbar_wait(&sm.transposed[at.stage], at.phase);
}

// A consumer warpgroup's touch-up of its 64 rows of a landed A box before its wgmmas read
// them (a Loads with MASKS: Im2colTmaLoads, whose folded convolutions read whole channel
// blocks): a row a thread of the first 64 zeros what Loads::mask names for K's k-tile t,
// fences it to the async proxy (the wgmmas read through it), and the warpgroup meets.
template <class Loads>
__device__ __forceinline__ void mask_stage(const Loads& loads, const unsigned char* sa, int row0,
                                           int t) {
  const int from = loads.masked_from(t);
  if (from >= Loads::CHUNKS) return;  // the same for the whole warpgroup
  const int lt = threadIdx.x % WARPGROUP;
  if (lt < WGMMA_M) Loads::mask(smem_addr(sa), row0 + lt, from);
  fence_async_shared();
  asm volatile("bar.sync %0, %1;\n" ::"r"(EPI_BARRIER0 + (int)(threadIdx.x / WARPGROUP)),
               "n"(WARPGROUP) : "memory");
}

// 3xTF32: the small parts (tf32_small) of a landed stage's boxes, written LOADED_BYTES on.
// The swizzle permutes whole 16-byte chunks, so an element-wise pass keeps each box's
// layout, and the small parts' descriptors differ from the boxes' only in their base. Every
// consumer thread takes its share of both boxes (B's is common to the warpgroups); the
// pass is fenced to the async proxy, which the wgmmas read through, and the consumers meet
// before any of them reads the stage. It runs while the previous k-tile's wgmmas are in
// flight (wgmma_consume_x3).
template <class Cfg>
__device__ __forceinline__ void split_stage(const unsigned char* st) {
  using Sm = WgmmaSmem<Cfg>;
  constexpr int CONSUMERS = Cfg::ML::THREADS;
  constexpr int CHUNKS = Sm::LOADED_BYTES / 16;
  static_assert(CHUNKS % CONSUMERS == 0, "whole 16-byte chunks a consumer thread");
  const unsigned at = smem_addr(st) + 16 * threadIdx.x;
#pragma unroll
  for (int i = 0; i < CHUNKS / CONSUMERS; ++i) {
    const unsigned x_at = at + 16 * CONSUMERS * i;
    const float4 x = ld_shared_f4(x_at);
    st_shared_f4(x_at + Sm::LOADED_BYTES, make_float4(tf32_small(x.x), tf32_small(x.y),
                                                      tf32_small(x.z), tf32_small(x.w)));
  }
  fence_async_shared();
  ConsumerSync<CONSUMERS>::sync();
}

// One k-tile of 3xTF32 products into d, from zero (a consumer warpgroup's rows): a k step
// is small x big, big x small, big x big (the small parts LOADED_BYTES after the boxes).
template <class Cfg>
__device__ __forceinline__ void wgmma_x3_ktile(typename Cfg::Acc (&d)[Cfg::ML::NACC],
                                               const unsigned char* sa, const unsigned char* sb,
                                               int row0) {
  using Sm = WgmmaSmem<Cfg>;
  constexpr int SMALL = Sm::LOADED_BYTES;
#pragma unroll
  for (int kk = 0; kk < Cfg::BK / WGMMA_K<typename Cfg::TIn>; ++kk) {
    const unsigned long long da = Sm::OA::desc(sa, row0, kk), db = Sm::OB::desc(sb, 0, kk);
    wgmma_step<Cfg::BN, Sm::A_READ_KMAJOR, Sm::B_READ_KMAJOR, typename Cfg::TIn>(
        d, Sm::OA::desc(sa + SMALL, row0, kk), db, kk == 0 ? 0 : 1);
    wgmma_step<Cfg::BN, Sm::A_READ_KMAJOR, Sm::B_READ_KMAJOR, typename Cfg::TIn>(
        d, da, Sm::OB::desc(sb + SMALL, 0, kk), 1);
    wgmma_step<Cfg::BN, Sm::A_READ_KMAJOR, Sm::B_READ_KMAJOR, typename Cfg::TIn>(d, da, db, 1);
  }
}

// Consumer threads a stage's release counts as one arrival: a warp (its lanes met in
// __syncwarp), or each thread where the transposers rewrite the stages with generic stores
// after the consumers' generic reads of them (3xTF32's split pass): every reader's own
// release orders its reads before the next k-tile's stores, which is what racecheck
// follows, not a warp's meeting.
template <class Cfg>
constexpr int RELEASE_GROUP = WgmmaSmem<Cfg>::TRANSPOSES ? 1 : 32;

// Free the stage whose wgmmas have finished (one arrival per RELEASE_GROUP); a pair's stage
// holds data from every CTA of the cluster, so it is freed in each.
template <class Cfg>
__device__ __forceinline__ void release_stage(const WgmmaSmem<Cfg>& sm, int stage) {
  if constexpr (RELEASE_GROUP<Cfg> == 1) {  // each thread releases its own reads
    mbar_arrive(&sm.empty[stage]);
    return;
  }
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    if constexpr (Cfg::CLUSTER == 1) {
      mbar_arrive(&sm.empty[stage]);
    } else {
#pragma unroll
      for (int r = 0; r < Cfg::CLUSTER; ++r) mbar_arrive_cluster(&sm.empty[stage], r);
    }
  }
}

// 3xTF32's mainloop (wgmma_consume's for Cfg::TF32X3). Each k-tile's products sum from zero
// into a partial accumulator, which the consumer adds to the tile's in fp32 (rounded to
// nearest) once they are done: the tensor cores truncate the sums they make, an error that
// grows with the sums made into one accumulator, so a k-tile's twelve keep 3xTF32 at
// float32's accuracy where a K-long chain of them would not. While a k-tile's wgmmas run,
// the consumers split the next stage (split_stage), which has landed by then or lands
// while they wait: the ring has a stage for it, the one the k-tile before freed.
template <class Cfg>
__device__ __forceinline__ void wgmma_consume_x3(const WgmmaSmem<Cfg>& sm, RingCursor& at,
                                                 const Split& s,
                                                 float (&acc)[Cfg::ML::NACC]) {
  static_assert(Cfg::CLUSTER == 1 && Cfg::STAGES >= 2, "3xTF32: no pairs, a stage ahead");
  using Sm = WgmmaSmem<Cfg>;
  constexpr int NACC = Cfg::ML::NACC;
  const int row0 = WGMMA_M * (threadIdx.x / WARPGROUP);
#pragma unroll
  for (int i = 0; i < NACC; ++i) acc[i] = 0.0f;
  const int ktiles = (s.k1 - s.k0 + Cfg::BK - 1) / Cfg::BK;
  float part[NACC];
  if (ktiles > 0) {
    wait_stage(sm, at);
    if (threadIdx.x == 0 && at.at_start()) trace(TRACE_FIRST_LANDED);
    split_stage<Cfg>(sm.stage(at.stage));
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    const unsigned char* sa = sm.stage(at.stage);
    fence_accumulators(part);
    wgmma_fence();
    wgmma_x3_ktile<Cfg>(part, sa, sa + Sm::OA::STAGE_BYTES, row0);
    wgmma_commit();
    if (kt + 1 < ktiles) {  // the next stage, split while this k-tile's wgmmas run
      RingCursor next = at;
      next.template advance<Cfg::STAGES>();
      wait_stage(sm, next);
      split_stage<Cfg>(sm.stage(next.stage));
    }
    wgmma_wait<0>();
    fence_accumulators(part);
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] += part[i];
    release_stage(sm, at.stage);
    at.template advance<Cfg::STAGES>();
  }
}

// A consumer warpgroup's mainloop over one split's k-tiles, N columns of the stage's B into
// d (the split's tile, or a HyTiS small row's first half of it). One k-tile's wgmmas stay
// in flight; a stage is freed (one arrival per warp) once the wgmmas that read it are done.
template <int N, class Cfg, class Loads>
__device__ __forceinline__ void wgmma_mainloop(const WgmmaSmem<Cfg>& sm, RingCursor& at,
                                               const Split& s, const Loads& loads,
                                               typename Cfg::Acc (&d)[N / 2]) {
  using Sm = WgmmaSmem<Cfg>;
  const int row0 = WGMMA_M * warpgroup_index();  // this warpgroup's rows of the tile
  const int ktiles = (s.k1 - s.k0 + Cfg::BK - 1) / Cfg::BK;
  int held = -1;  // the stage whose wgmmas may still be in flight
  auto release = [&]() {
    if (held >= 0) release_stage(sm, held);
  };
  for (int kt = 0; kt < ktiles; ++kt) {
    wait_stage(sm, at);
    if (threadIdx.x == 0) {
      if (at.at_start()) trace(TRACE_FIRST_LANDED);
      trace_ktile(KTILE_LANDED, at.taken);
    }
    if constexpr (Loads::MASKS) {
      if (loads.masks()) mask_stage(loads, sm.stage(at.stage), row0, s.k0 / Cfg::BK + kt);
    }
    fence_accumulators(d);
    wgmma_fence();
#ifndef SKCONTRACT_PROBE_LOADS_ONLY  // (the probe build that times the loads alone)
    // the k-tile's first descriptors; each k step's are these advanced by the step's offset
    const unsigned char* sa = sm.stage(at.stage);
    const unsigned long long da = Sm::OA::desc(sa, row0, 0);
    const unsigned long long db = Sm::OB::desc(sa + Sm::OA::STAGE_BYTES, 0, 0);
#pragma unroll
    for (int kk = 0; kk < Cfg::BK / WGMMA_K<typename Cfg::TIn>; ++kk)
      wgmma_step<N, Sm::A_READ_KMAJOR, Sm::B_READ_KMAJOR, typename Cfg::TIn>(
          d, Sm::OA::advance(da, Sm::OA::offset(0, kk)),
          Sm::OB::advance(db, Sm::OB::offset(0, kk)), 1);
#endif
    wgmma_commit();
    wgmma_wait<1>();  // the previous k-tile's wgmmas are done: free its stage
    fence_accumulators(d);
    release();
    held = at.stage;
    at.template advance<Cfg::STAGES>();
  }
  wgmma_wait<0>();
  fence_accumulators(d);
  release();
}

// A consumer warpgroup's split: acc = its 64 rows of the split's product (of a HyTiS small
// row, the first half of acc; the rest stays zero and is not stored).
template <class Cfg, class Loads>
__device__ __forceinline__ void wgmma_consume(const WgmmaSmem<Cfg>& sm, RingCursor& at,
                                              const Split& s, const Loads& loads,
                                              typename Cfg::Acc (&acc)[Cfg::ML::NACC]) {
  using Acc = typename Cfg::Acc;
  if constexpr (Cfg::TF32X3) {
    static_assert(!Loads::MASKS, "3xTF32 splits the stages as loaded");
    wgmma_consume_x3<Cfg>(sm, at, s, acc);
    return;
  }
#pragma unroll
  for (int i = 0; i < Cfg::ML::NACC; ++i) acc[i] = Acc(0);
  if constexpr (Cfg::SMALL_BN > 0) {
    if (small_row<Cfg>(s)) {
      wgmma_mainloop<Cfg::SMALL_BN, Cfg>(sm, at, s, loads,
                                         reinterpret_cast<Acc(&)[Cfg::SMALL_BN / 2]>(acc));
      return;
    }
  }
  wgmma_mainloop<Cfg::BN, Cfg>(sm, at, s, loads, acc);
}

// The cluster protocol (REDUCTION_CLUSTER): the split's tile is shared by the CTAs of its
// cluster, PEERS of them, the CTA of rank r computing split r (the aligned split); the tile's
// 16-byte vectors of fp32 accumulators (fragment order, as a workspace slot) are cut into
// PEERS shares as equal as they come, share r summed and stored by the CTA of rank r.
// cluster_push, where the split is computed: the CTA puts its partial tile in its idle ring
// and copies each peer's share of it, one bulk copy a peer, into slot r of that peer's
// receive buffer (WgmmaSmem.epi), completing the bytes on the peer's `ready` barrier.
// cluster_finish, after the split walk: once `ready` has every peer's bytes (it expects them
// from the start: cluster_expect), the CTA sums its share over the slots (its own in its
// ring) in split order (bitwise reproducible) and passes each sum to store(t, i, v) as the
// shared sum does; each CTA reads only its own shared memory. A copy reads its source after
// it is issued, so no CTA exits before every peer has its bytes: each arrives on the cluster
// barrier once its own have come, and waits on it last. No deadlock: a cluster's CTAs are
// resident together, and each sends its shares before it waits on anything but its own
// loads, and arrives on the cluster barrier before it waits on it.
template <class Cfg>
struct ClusterShares {
  static constexpr int V = Vec16<float>::V;  // the fixups' 16-byte vectors of accumulators
  static constexpr int NVEC = Cfg::ML::NACC * Cfg::ML::THREADS / V;
  // share r of `peers`: vectors [first(r), first(r + 1))
  __device__ __forceinline__ static int first(int r, int peers) { return NVEC * r / peers; }
  // the bytes the CTA of rank r receives from its peers
  __device__ __forceinline__ static unsigned received_bytes(int r, int peers) {
    return (peers - 1) * (first(r + 1, peers) - first(r, peers)) * V * 4;
  }
};

// Before the cluster's first sync: `ready`'s one arrival, which expects the peers' bytes.
template <class Cfg>
__device__ __forceinline__ void cluster_expect(const WgmmaSmem<Cfg>& sm) {
  mbar_init(sm.ready, 1);
  mbar_arrive_expect_tx(sm.ready, ClusterShares<Cfg>::received_bytes(
                                      (int)cluster_ctarank(), (int)cluster_nctarank()));
}

template <class Cfg>
__device__ __forceinline__ void cluster_push(const WgmmaSmem<Cfg>& sm, const Split& s,
                                             const float (&acc)[Cfg::ML::NACC]) {
  using ML = typename Cfg::ML;
  using Sh = ClusterShares<Cfg>;
  using Sync = ConsumerSync<ML::THREADS>;
  constexpr int V = Sh::V;
  static_assert(Cfg::CLUSTER == 1, "a pair's cluster is its work unit, not a tile's splits");
  static_assert(WgmmaSmem<Cfg>::EPI_BYTES >= Sh::NVEC * V * 4, "the tile fits the receiver");
  static_assert(Cfg::STAGES * WgmmaSmem<Cfg>::STAGE_BYTES >= Sh::NVEC * V * 4,
                "the partial tile fits the ring");
  if (threadIdx.x == 0 && (cluster_ctarank() != (unsigned)s.split ||
                           cluster_nctarank() != (unsigned)s.peers))
    __trap();  // the launch's clusters are not the table's tiles
  float* out = reinterpret_cast<float*>(sm.ring);
  Sync::sync();  // the other warpgroup's wgmmas may still read the ring
#pragma unroll
  for (int g = 0; g < ML::NACC / V; ++g)
    *reinterpret_cast<float4*>(out + (g * ML::THREADS + threadIdx.x) * V) =
        make_float4(acc[g * V], acc[g * V + 1], acc[g * V + 2], acc[g * V + 3]);
  fence_async_shared();  // the copies read through the async proxy
  Sync::sync();
  const int r = (int)threadIdx.x;  // thread r sends share r
  if (r < s.peers && r != s.split) {
    const int lo = Sh::first(r, s.peers), count = Sh::first(r + 1, s.peers) - lo;
    bulk_copy_to_peer(sm.epi + s.split * count * V, out + lo * V, count * V * 4, sm.ready,
                      (unsigned)r);
  }
}

template <class Cfg, class Store>
__device__ __forceinline__ void cluster_finish(const WgmmaSmem<Cfg>& sm, const Split& s,
                                               Store&& store) {
  using ML = typename Cfg::ML;
  using Sh = ClusterShares<Cfg>;
  constexpr int V = Sh::V;
  mbar_wait_acquire_cluster(sm.ready, 0);
  cluster_arrive_relaxed();  // every copy to this CTA is done (its sources may go)
  if (threadIdx.x == 0) trace(TRACE_SHARED_WAITED);
  const int lo = Sh::first(s.split, s.peers), share = Sh::first(s.split + 1, s.peers) - lo;
  const float* own = reinterpret_cast<const float*>(sm.ring) + lo * V;
  for (int i = (int)threadIdx.x; i < share; i += ML::THREADS) {
    float4 acc = s.split == 0 ? *reinterpret_cast<const float4*>(own + i * V)
                              : *reinterpret_cast<const float4*>(sm.epi + i * V);
    for (int p = 1; p < s.peers; ++p) {
      const float* at = p == s.split ? own + i * V : sm.epi + (p * share + i) * V;
      const float4 part = *reinterpret_cast<const float4*>(at);
      acc.x += part.x;
      acc.y += part.y;
      acc.z += part.z;
      acc.w += part.w;
    }
    const float sum[V] = {acc.x, acc.y, acc.z, acc.w};
    store((unsigned)((lo + i) % ML::THREADS), (lo + i) / ML::THREADS * V, sum);
  }
  cluster_wait();  // every peer has every copy, so this CTA's ring is read
}

// The kernel body: the ring's barriers, the producer walking `loads`, the consumers'
// mainloop, fixup and epilogue (the entries below and sk_wgmma_conv.cuh's).
template <class Cfg, class Loads>
__device__ __forceinline__ void wgmma_gemm(Loads& loads, typename Cfg::TOut* __restrict__ C,
                                           const int* __restrict__ table,
                                           const int* __restrict__ cta_offsets,
                                           typename Cfg::Acc* ws, typename Cfg::Acc* staging,
                                           unsigned* locks, int M, int N, int tile_order,
                                           long long ldc, long long batch_c,
                                           typename Cfg::Acc alpha, typename Cfg::Acc beta,
                                           const TmaMap& map_c, bool store_tma) {
  using Acc = typename Cfg::Acc;
  using ML = typename Cfg::ML;
  using Sm = WgmmaSmem<Cfg>;
  using Fx = Fixup<ML, Cfg::REDUCTION, ConsumerSync<ML::THREADS>>;
  constexpr int CONSUMERS = ML::THREADS;
  static_assert(Cfg::THREADS == CONSUMERS + WARPGROUP, "consumers and one producer warpgroup");
  static_assert(Cfg::SMALL_BN == 0 || (Cfg::REDUCTION == REDUCTION_NONE && !Cfg::TF32X3 &&
                                       WGMMA_STAGED_EPILOGUE<Acc>),
                "HyTiS's tables split no tile; its small rows run the 16-bit staged mainloop");
  static_assert(Cfg::STAGES * Sm::STAGE_BYTES >= CONSUMERS * Fx::V * (int)sizeof(Acc),
                "the shared sum's scratch lives in the ring");
  // The register split (Cfg::SPLIT_REGS: the registers a thread the launch allocates, 0 for
  // none): the producer gives registers back and the consumers take them; both sums equal
  // the launch's, which the compile check and the loader verify, so an increase never waits
  // for registers that no one frees.
  constexpr bool SPLIT = Cfg::SPLIT_REGS > 0;
  static_assert(!SPLIT || (Cfg::THREADS == 3 * WARPGROUP &&
                           Cfg::PRODUCER_REGS + 2 * Cfg::CONSUMER_REGS == 3 * Cfg::SPLIT_REGS),
                "the register split is for two consumer warpgroups");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const Sm sm(smem_raw);
  {  // The host computes the shared-memory size from the spec: check it agrees.
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (smem_raw + dyn < sm.end()) __trap();
  }
  constexpr bool IN_CLUSTERS = Cfg::CLUSTER > 1 || Cfg::REDUCTION == REDUCTION_CLUSTER;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::STAGES; ++s) {
      mbar_init(&sm.full[s], 1);                    // the producer's arrive.expect_tx
      mbar_init(&sm.empty[s], Cfg::CLUSTER * CONSUMERS / RELEASE_GROUP<Cfg>);
      if constexpr (Sm::TRANSPOSES) mbar_init(&sm.transposed[s], TRANSPOSERS);
    }
    if constexpr (Cfg::REDUCTION == REDUCTION_CLUSTER) cluster_expect<Cfg>(sm);
    mbar_fence_init();
  }
  if (threadIdx.x == CONSUMERS) loads.prefetch();
  if (threadIdx.x == 0 && store_tma) tma_prefetch(map_c);
  if constexpr (IN_CLUSTERS)
    cluster_sync();  // the peers' barriers are initialised before their loads or arrivals
  else
    __syncthreads();
  // The set-up above reads only shared memory and the parameters, and each walk below reads its
  // first row before it waits (FollowPreviousGrid): both overlap the previous kernel.
  if (threadIdx.x == 0) trace(TRACE_START);

  if (threadIdx.x >= CONSUMERS) {  // the producer warpgroup: one thread issues every load
    if constexpr (SPLIT) setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    if (threadIdx.x == CONSUMERS)
      wgmma_produce<Cfg>(sm, loads, table, cta_offsets, M, N, tile_order);
    else if constexpr (Sm::TRANSPOSES) {
      if (threadIdx.x >= CONSUMERS + 32)  // the other warps transpose what it loads
        wgmma_transpose<Cfg>(sm, table, cta_offsets, M, N, tile_order,
                             threadIdx.x - CONSUMERS - 32);
    }
    return;
  }

  if constexpr (SPLIT) setmaxnreg_inc<Cfg::CONSUMER_REGS>();
  RingCursor at;
  const int unit = blockIdx.x / Cfg::CLUSTER, rank = loads.part;
  for_each_split_of<Cfg::BM * Cfg::CLUSTER, Cfg::BN>(unit, table, cta_offsets, M, N, tile_order,
                                                     [&](const Split& us) {
    const Split s = cluster_part<Cfg>(us, rank);
    Acc acc[ML::NACC];
    wgmma_consume<Cfg>(sm, at, s, loads, acc);
    if (threadIdx.x == 0) trace(TRACE_MAINLOOP_DONE);
    bool owns = true;
    if constexpr (Cfg::REDUCTION == REDUCTION_CLUSTER) {
      if (!s.owns_tile()) {  // the sum comes after the split walk (cluster_finish)
        cluster_push<Cfg>(sm, s, acc);
        return;
      }
    } else {
      owns = Fx::run(s, acc, ws, staging, locks, sm.flag);
    }
    if (threadIdx.x == 0) trace(TRACE_FIXUP_DONE);
    if (owns) {
      const int cols = small_row<Cfg>(s) ? Cfg::SMALL_BN : Cfg::BN;
      if constexpr (!WGMMA_STAGED_EPILOGUE<Acc>)
        Epilogue<ML, typename Cfg::TOut, false, false>::run(
            s, acc, C + (long long)s.batch * batch_c, ldc, alpha, beta);
      else if (store_tma)
        Sm::Store::run_tma(s, acc, sm.epi, map_c, alpha, cols);
      else
        Sm::Store::run(s, acc, sm.epi, C + (long long)s.batch * batch_c, ldc, alpha, beta,
                       cols);
    }
  }, FollowPreviousGrid<Cfg::REDUCTION>());
  if (store_tma) Sm::Store::drain_tma();
  if (threadIdx.x == 0) trace(TRACE_EPILOGUE_DONE);
  if constexpr (Cfg::REDUCTION == REDUCTION_ARRIVAL) {
    // Shared sums, after the CTA's last split: the ring is idle (every load was consumed).
    using Epi = Epilogue<ML, typename Cfg::TOut, false, false>;
    for_each_split_of<Cfg::BM * Cfg::CLUSTER, Cfg::BN, false, true>(
        unit, table, cta_offsets, M, N, tile_order, [&](const Split& us) {
      if (!us.shared_sum()) return;
      const Split s = cluster_part<Cfg>(us, rank);
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      Fx::template finish_shared<SHARED_SUM_BATCH>(
          s, ws, locks, reinterpret_cast<Acc*>(sm.ring),
          [&](unsigned t, int i, const Acc (&v)[Fx::V]) {
            Epi::store_group(s, t, i, v, Cb, ldc, alpha, beta);
          });
    });
    if (threadIdx.x == 0) trace(TRACE_SHARED_DONE);
  }
  if constexpr (Cfg::REDUCTION == REDUCTION_CLUSTER) {
    using Epi = Epilogue<ML, typename Cfg::TOut, false, false>;
    for_each_split_of<Cfg::BM, Cfg::BN, false, true>(
        unit, table, cta_offsets, M, N, tile_order, [&](const Split& s) {
      if (s.owns_tile()) return;
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      cluster_finish<Cfg>(sm, s, [&](unsigned t, int i, const Acc (&v)[4]) {
        Epi::store_group(s, t, i, v, Cb, ldc, alpha, beta);
      });
    });
    if (threadIdx.x == 0) trace(TRACE_SHARED_DONE);
  }
  if (threadIdx.x == 0) trace(TRACE_END);
}

// The Wgmma kernels' parameters: the arguments every family's kernel takes (launch.py fills
// them in this order), then A's, B's and C's tensor maps and whether the epilogue stores
// through C's (WgmmaEpilogue::run_tma; when not, C's map is not read).
#define SKC_WGMMA_KERNEL_PARAMS                                                                \
  const typename Cfg::TIn *__restrict__ A, const typename Cfg::TIn *__restrict__ B,           \
      typename Cfg::TOut *__restrict__ C, const int *__restrict__ table,                      \
      const int *__restrict__ cta_offsets, typename Cfg::Acc *ws, typename Cfg::Acc *staging, \
      unsigned *locks, int M, int N, int K, int tile_order, long long lda, long long ldb,     \
      long long ldc, long long batch_a, long long batch_b, long long batch_c,                 \
      typename Cfg::Acc alpha, typename Cfg::Acc beta, const __grid_constant__ TmaMap map_a,  \
      const __grid_constant__ TmaMap map_b, const __grid_constant__ TmaMap map_c, int store_tma

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma(SKC_WGMMA_KERNEL_PARAMS) {
  static_assert(Cfg::CLUSTER == 1, "pairs launch sk_wgmma_pair");
  DenseTmaLoads<Cfg> loads{map_a, map_b, batch_a != 0, batch_b != 0};
  wgmma_gemm<Cfg>(loads, C, table, cta_offsets, ws, staging, locks, M, N, tile_order, ldc,
                  batch_c, alpha, beta, map_c, store_tma != 0);
}

// The same over clusters of two CTAs (the launch's grid counts CTAs: twice the table's work
// units), which share B's k-tiles by multicast (cluster_part).
template <class Cfg>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma_pair(SKC_WGMMA_KERNEL_PARAMS) {
  static_assert(Cfg::CLUSTER == 2, "sk_wgmma_pair runs clusters of two");
  DenseTmaLoads<Cfg> loads{map_a, map_b, batch_a != 0, batch_b != 0, (int)cluster_ctarank()};
  wgmma_gemm<Cfg>(loads, C, table, cta_offsets, ws, staging, locks, M, N, tile_order, ldc,
                  batch_c, alpha, beta, map_c, store_tma != 0);
}

}  // namespace skc
