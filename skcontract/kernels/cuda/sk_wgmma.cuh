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
// its 64 rows of the tile with wgmma.mma_async m64nBNk16 straight from shared memory, keeps
// one k-tile's wgmmas in flight, and frees a stage (one arrival per warp on its `empty`
// mbarrier) once the wgmmas that read it are done. The fixup (fixup.cuh) and the epilogue
// run on the consumers only, synchronising through named barriers 1 (all consumers) and
// 2, 3 (one warpgroup's epilogue); the producer never waits on a fixup, so the
// deadlock-freedom argument of docs/design/stream_k.md is unchanged.
//
// Cfg (skcontract/kernels/catalogue.py, Wgmma.cfg_lines): TIn, TOut, Acc, BM (64 or 128),
// BN (128 or 256), BK (64: one 128-byte swizzle row of 16-bit elements), STAGES, THREADS
// (BM / 64 + 1 warpgroups), MIN_BLOCKS, REDUCTION, A_KMAJOR, B_KMAJOR, EPI_PITCH and
// SPLIT_REGS (the catalogue's copies of EPI_PITCH and of the register split below, checked
// against them), ML (WgmmaTile below). Shared memory: the ring, the epilogue's staging
// buffers (WgmmaEpilogue), the mbarriers and the fixup's flag.
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
constexpr int MN_CHUNK = 64;             // elements of an M- or N-major box row (128 bytes)
constexpr int WGMMA_K = 16;
// Register split of a 384-thread CTA whose consumers hold 128 accumulators each: the
// producer gives registers back, the consumers take them (setmaxnreg). Both sums equal the
// 168 registers a thread the launch allocates (65536 / 384, in units of 8), which the
// compile check verifies, so an increase can never wait for registers no one frees.
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;

// The consumers' view of the tile, what the fixup and the epilogue use (sk_gemm.cuh lists
// the interface): one warpgroup per 64 rows; a thread's accumulators are wgmma's m64nBN
// fragment, pairs of adjacent columns.
template <int BM, int BN>
struct WgmmaTile {
  using Acc = float;
  static constexpr int CONSUMER_GROUPS = BM / 64;
  static constexpr int THREADS = CONSUMER_GROUPS * WARPGROUP;
  static constexpr int NACC = BN / 2;
  static constexpr int PAIR = 2;
  static_assert(BM % 64 == 0 && BN % 64 == 0, "wgmma tiles are multiples of 64");
  // fragment i of m64nNk16: rows lane / 4 (+ 8), columns 8 (i / 4) + 2 (lane % 4) (+ 1)
  __device__ __forceinline__ static void coord(int i, int& r, int& c) {
    const int t = threadIdx.x, lane = t & 31;
    r = 64 * (t / WARPGROUP) + 16 * ((t >> 5) & 3) + (lane >> 2) + 8 * ((i >> 1) & 1);
    c = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
  }
};

// One k16 step of a consumer warpgroup: the transpose bits are template arguments of the
// instruction, so the four layout pairs dispatch here at compile time.
template <int BN, bool AK, bool BK_, class TIn>
__device__ __forceinline__ void wgmma_k16(float (&d)[BN / 2], unsigned long long da,
                                          unsigned long long db, int scale_d) {
  constexpr int TA = AK ? 0 : 1, TB = BK_ ? 0 : 1;
  if constexpr (BN == 128) {
    wgmma_m64n128k16<TA, TB>(d, da, db, scale_d, TIn{});
  } else {
    static_assert(BN == 256, "Wgmma tiles are 128 or 256 wide");
    wgmma_m64n256k16<TA, TB>(d, da, db, scale_d, TIn{});
  }
}

// Shared-memory layout of one operand's stage and its wgmma descriptors. K-major (k
// contiguous in memory): ROWS rows of BK elements, one 128-byte swizzled row each; a k16
// step moves 32 bytes along the row; 8-row groups are SWIZZLE_ATOM_BYTES apart (the
// descriptor's stride offset; the leading offset is unused). MN-major: ROWS / 64 boxes of
// BK rows of 64 elements; a k16 step moves 16 rows (2048 bytes); boxes are BK * 128 bytes
// apart (leading offset), 8-k groups SWIZZLE_ATOM_BYTES apart (stride offset).
template <class TIn, int ROWS, int BK, bool KMAJOR>
struct WgmmaOperand {
  static constexpr int STAGE_BYTES = ROWS * BK * (int)sizeof(TIn);
  static constexpr int BOX_BYTES = MN_CHUNK * BK * (int)sizeof(TIn);  // one MN-major box
  static_assert(BK * (int)sizeof(TIn) == SWIZZLE_ROW_BYTES, "BK fills one swizzle row");
  // descriptor of rows [row0, row0 + 64 or ROWS) of the stage at k16 step kk
  __device__ __forceinline__ static unsigned long long desc(const unsigned char* stage, int row0,
                                                            int kk) {
    if constexpr (KMAJOR) {
      return wgmma_desc(stage + row0 * SWIZZLE_ROW_BYTES + kk * WGMMA_K * (int)sizeof(TIn),
                        16, SWIZZLE_ATOM_BYTES);
    } else {
      return wgmma_desc(stage + (row0 / MN_CHUNK) * BOX_BYTES + kk * WGMMA_K * SWIZZLE_ROW_BYTES,
                        BOX_BYTES, SWIZZLE_ATOM_BYTES);
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

// The tile's store, through shared memory: wgmma's fragments put a warp's pairs of columns
// on 8 rows at once (16 useful bytes per 32-byte sector), so each consumer warpgroup stages
// its 64 rows EPI_COLS columns at a time in fp32 (fragment pairs in, conflict-free with the
// padded pitch), then writes them out a row segment per 8 lanes, 4 elements a lane, with
// alpha / beta applied in fp32 as the portable epilogue does (epilogue.cuh). Rows and columns
// past the split's tile are not stored; an unaligned row falls back to element stores.
constexpr int EPI_COLS = 32;
constexpr int EPI_PITCH = EPI_COLS + 8;  // floats: 4 rows of a half-warp's 8-byte writes
                                         // land on distinct banks
constexpr int EPI_VEC = 4;               // output elements a lane stores at once
constexpr int EPI_BARRIER0 = 2;          // named barriers 2, 3: one per consumer warpgroup

template <class TOut> struct alignas(EPI_VEC * sizeof(TOut)) OutVec { TOut v[EPI_VEC]; };

template <int BN, class TOut>
struct WgmmaEpilogue {
  static constexpr int NACC = BN / 2;
  static constexpr int GROUP_FLOATS = 64 * EPI_PITCH;  // one warpgroup's staging buffer
  static constexpr int BYTES_PER_GROUP = GROUP_FLOATS * 4;

  __device__ __forceinline__ static void group_sync(int wg) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(EPI_BARRIER0 + wg), "n"(WARPGROUP) : "memory");
  }

  __device__ __forceinline__ static void run(const Split& s, const float (&acc)[NACC],
                                             float* staging, TOut* __restrict__ C,
                                             long long ldc, float alpha, float beta) {
    const int t = threadIdx.x, wg = t / WARPGROUP, lt = t % WARPGROUP, lane = t & 31;
    float* buf = staging + wg * GROUP_FLOATS;
    // fragment rows of this thread inside the warpgroup's 64 (coord() less the 64 * wg)
    const int fr = 16 * (lt >> 5) + (lane >> 2), fc = 2 * (lane & 3);
    const int row0 = s.m0 + 64 * wg;
    // copy-out position: 8 lanes a row, EPI_VEC columns a lane
    const int lanes_per_row = EPI_COLS / EPI_VEC, rows_per_pass = WARPGROUP / lanes_per_row;
    const int orow = lt / lanes_per_row, ocol = (lt % lanes_per_row) * EPI_VEC;
#pragma unroll
    for (int chunk = 0; chunk < BN / EPI_COLS; ++chunk) {
#pragma unroll
      for (int j = 0; j < EPI_COLS / 8; ++j) {  // 8-column groups of the chunk: i = 4 g .. 4 g + 3
        const int i = 4 * (chunk * (EPI_COLS / 8) + j);
        float* p = buf + fr * EPI_PITCH + 8 * j + fc;
        *reinterpret_cast<float2*>(p) = make_float2(acc[i], acc[i + 1]);
        *reinterpret_cast<float2*>(p + 8 * EPI_PITCH) = make_float2(acc[i + 2], acc[i + 3]);
      }
      group_sync(wg);
      const int gc = s.n0 + chunk * EPI_COLS + ocol;
#pragma unroll
      for (int pass = 0; pass < 64 / rows_per_pass; ++pass) {
        const int r = pass * rows_per_pass + orow, gr = row0 + r;
        if (gr < s.m_end && gc < s.n_end) {
          const float4 v = *reinterpret_cast<const float4*>(buf + r * EPI_PITCH + ocol);
          store(C + gr * ldc + gc, v, s.n_end - gc, alpha, beta);
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

// Named barrier 1 over the consumer warpgroups (barrier 0 is __syncthreads).
template <int THREADS>
struct ConsumerSync {
  __device__ __forceinline__ static void sync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sk_wgmma(const typename Cfg::TIn* __restrict__ A, const typename Cfg::TIn* __restrict__ B,
         typename Cfg::TOut* __restrict__ C, const int* __restrict__ table,
         const int* __restrict__ cta_offsets, typename Cfg::Acc* ws, typename Cfg::Acc* staging,
         unsigned* locks, int M, int N, int K, int tile_order, long long lda, long long ldb,
         long long ldc, long long batch_a, long long batch_b, long long batch_c,
         typename Cfg::Acc alpha, typename Cfg::Acc beta, const __grid_constant__ TmaMap map_a,
         const __grid_constant__ TmaMap map_b) {
  using TIn = typename Cfg::TIn;
  using Acc = typename Cfg::Acc;
  using ML = typename Cfg::ML;
  using OA = WgmmaOperand<TIn, Cfg::BM, Cfg::BK, Cfg::A_KMAJOR>;
  using OB = WgmmaOperand<TIn, Cfg::BN, Cfg::BK, Cfg::B_KMAJOR>;
  using Sync = ConsumerSync<ML::THREADS>;
  constexpr int STAGES = Cfg::STAGES, BK = Cfg::BK;
  constexpr int STAGE_BYTES = OA::STAGE_BYTES + OB::STAGE_BYTES;
  constexpr int CONSUMERS = ML::THREADS, CONSUMER_WARPS = CONSUMERS / 32;
  static_assert(Cfg::THREADS == CONSUMERS + WARPGROUP, "consumers and one producer warpgroup");
  static_assert(STAGES * STAGE_BYTES >= CONSUMERS * 16, "the shared sum's scratch");

  // The ring must start on a swizzle atom: align the dynamic shared memory by hand
  // (KernelSpec.smem_bytes includes the slack), then the mbarriers and the fixup's flag.
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + SWIZZLE_ATOM_BYTES - 1) &
      ~(unsigned long long)(SWIZZLE_ATOM_BYTES - 1));
  using Store = WgmmaEpilogue<Cfg::BN, typename Cfg::TOut>;
  float* epi_staging = reinterpret_cast<float*>(ring + STAGES * STAGE_BYTES);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(
      ring + STAGES * STAGE_BYTES + ML::CONSUMER_GROUPS * Store::BYTES_PER_GROUP);
  unsigned long long* empty = full + STAGES;
  int* flag = reinterpret_cast<int*>(empty + STAGES);
  {  // The host computes the shared-memory size from the spec: check it agrees.
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (smem_raw + dyn < reinterpret_cast<unsigned char*>(flag + 1)) __trap();
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                // the producer's arrive.expect_tx
      mbar_init(&empty[s], CONSUMER_WARPS);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  if (threadIdx.x == CONSUMERS) {
    tma_prefetch(map_a);
    tma_prefetch(map_b);
  }
  __syncthreads();

  // The split is for two consumer warpgroups of 128 accumulators; a 256-thread CTA (one
  // consumer warpgroup) fits its accumulators without one.
  constexpr bool SPLIT_REGISTERS = ML::NACC >= 128 && Cfg::THREADS == 3 * WARPGROUP;
  static_assert(!SPLIT_REGISTERS || PRODUCER_REGS + 2 * CONSUMER_REGS == 3 * 168,
                "the register split assumes two consumer warpgroups at 168 registers");
  static_assert(Cfg::SPLIT_REGS == (SPLIT_REGISTERS ? 168 : 0) && Cfg::EPI_PITCH == EPI_PITCH,
                "the catalogue's register split and staging pitch are the kernel's");
  if (threadIdx.x >= CONSUMERS) {  // the producer warpgroup: one thread issues every load
    if constexpr (SPLIT_REGISTERS) setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x != CONSUMERS) return;
    int stage = 0;
    unsigned phase = 0;
    for_each_split<Cfg::BM, Cfg::BN>(table, cta_offsets, M, N, tile_order,
                                     [&](const Split& s) {
      const int ktiles = (s.k1 - s.k0 + BK - 1) / BK;
      const int ba = batch_a ? s.batch : 0, bb = batch_b ? s.batch : 0;
      for (int kt = 0; kt < ktiles; ++kt) {
        mbar_wait(&empty[stage], phase ^ 1);  // a fresh barrier's "previous" phase is done
        mbar_arrive_expect_tx(&full[stage], STAGE_BYTES);
        unsigned char* sa = ring + stage * STAGE_BYTES;
        const int k = s.k0 + kt * BK;
        OA::load(sa, map_a, &full[stage], s.m0, k, ba);
        OB::load(sa + OA::STAGE_BYTES, map_b, &full[stage], s.n0, k, bb);
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
    });
    return;
  }

  // the consumer warpgroups
  if constexpr (SPLIT_REGISTERS) setmaxnreg_inc<CONSUMER_REGS>();
  using Epi = Epilogue<ML, typename Cfg::TOut, false, false>;
  using Fx = Fixup<ML, Cfg::REDUCTION, Sync>;
  const int row0 = 64 * (threadIdx.x / WARPGROUP);  // this warpgroup's rows of the tile
  const bool warp_leader = (threadIdx.x & 31) == 0;
  int stage = 0;
  unsigned phase = 0;
  for_each_split<Cfg::BM, Cfg::BN>(table, cta_offsets, M, N, tile_order, [&](const Split& s) {
    Acc acc[ML::NACC];
#pragma unroll
    for (int i = 0; i < ML::NACC; ++i) acc[i] = Acc(0);
    const int ktiles = (s.k1 - s.k0 + BK - 1) / BK;
    int held = -1;  // the stage whose wgmmas may still be in flight
    for (int kt = 0; kt < ktiles; ++kt) {
      mbar_wait(&full[stage], phase);
      const unsigned char* sa = ring + stage * STAGE_BYTES;
      const unsigned char* sb = sa + OA::STAGE_BYTES;
      fence_accumulators(acc);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / WGMMA_K; ++kk)
        wgmma_k16<Cfg::BN, Cfg::A_KMAJOR, Cfg::B_KMAJOR, TIn>(acc, OA::desc(sa, row0, kk),
                                                            OB::desc(sb, 0, kk), 1);
      wgmma_commit();
      wgmma_wait<1>();  // the previous k-tile's wgmmas are done: free its stage
      fence_accumulators(acc);
      if (held >= 0) {
        __syncwarp();
        if (warp_leader) mbar_arrive(&empty[held]);
      }
      held = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
    if (held >= 0) {
      __syncwarp();
      if (warp_leader) mbar_arrive(&empty[held]);
    }
    if (Fx::run(s, acc, ws, staging, locks, flag))
      Store::run(s, acc, epi_staging, C + (long long)s.batch * batch_c, ldc, alpha, beta);
  });
  if constexpr (Cfg::REDUCTION == REDUCTION_ARRIVAL) {
    // Shared sums, after the CTA's last split: the ring is idle (every load was consumed).
    for_each_split<Cfg::BM, Cfg::BN, false, true>(table, cta_offsets, M, N, tile_order,
                                                  [&](const Split& s) {
      if (!s.shared_sum()) return;
      typename Cfg::TOut* Cb = C + (long long)s.batch * batch_c;
      Fx::finish_shared(s, ws, locks, flag, reinterpret_cast<Acc*>(ring),
                        [&](int i, Acc v) { Epi::store_one(s, i, v, Cb, ldc, alpha, beta); });
    });
  }
}

}  // namespace skc
