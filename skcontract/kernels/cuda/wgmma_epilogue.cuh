// wgmma_epilogue.cuh: the Wgmma family's store of a tile (WgmmaEpilogue): each consumer
// warpgroup stages its rows in shared memory, then stores them by TMA or by its threads;
// how many staged rows a lane reads at once (EpiReads); and which accumulators take the
// portable epilogue instead (WGMMA_STAGED_EPILOGUE: int32 ones go out from the fragment).
#pragma once
#include "sk_common.cuh"
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "wgmma_tile.cuh"

namespace skc {

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

}  // namespace skc
