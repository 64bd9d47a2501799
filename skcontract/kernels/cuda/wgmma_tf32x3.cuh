// wgmma_tf32x3.cuh: 3xTF32 (Cfg::TF32X3), float32 operands at float32 accuracy on tf32 wgmma:
// the split of a float into a big and a small part (tf32_small), the split of a landed stage
// (split_stage), one k-tile's three products a k step (wgmma_x3_ktile), and 3xTF32's
// mainloop (wgmma_consume_x3), which sums each k-tile's products apart.
#pragma once
#include "hopper.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_smem.cuh"

namespace skc {

// A float x is big + small: big is what tf32 wgmma reads of x itself (its 10-bit mantissa,
// the low 13 bits ignored), small = x - big (exact in fp32), rounded here to tf32 so that
// wgmma reads it whole. The k step sums small x big, big x small and big x big; the
// dropped small x small is below 2^-20 of the product.
//
// A non-finite x is carried by its small part (small = x; a NaN as the canonical NaN, since
// one whose payload lies in the ignored low bits would read as an infinity), and its big part
// is rewritten in the stage as the largest tf32 of x's sign (0 for a NaN): its products are
// then IEEE's. x = inf times a finite y: small x big(y) is the infinity (or NaN where y is
// 0, as inf x 0 is), and the big x terms are finite or an infinity of the same sign. Were
// big(x) the infinity itself, big(x) x small(y) would be inf x 0 = NaN wherever y is
// tf32-exact (small(y) = 0). The exception: a denormal y below 2^-136 reads as zero in both
// parts, so inf x y is NaN where IEEE's is an infinity.
constexpr unsigned TF32_BIG_MASK = 0xffffe000u;  // sign, exponent and 10 mantissa bits
constexpr unsigned TF32_RNA_HALF = 0x1000u;      // half of tf32's last place, in fp32 bits
constexpr unsigned TF32_MAX_BITS = 0x7f7fe000u;  // the largest finite tf32
constexpr unsigned F32_SIGN_BIT = 0x80000000u;
constexpr unsigned F32_CANONICAL_NAN = 0x7fffffffu;

// small is rounded to nearest, ties away, by adding half a tf32 place to its bit pattern:
// on a finite float the carry runs into the exponent as rounding up in magnitude does, and
// the low 13 bits left behind are the ones wgmma ignores (cvt.rna.tf32.f32 leaves them too).
// Five instructions an element, half of what cvt.rna.tf32.f32 with its own non-finite guard
// compiles to: the split runs on the consumers between one k-tile's wgmmas and the next's.
__device__ __forceinline__ float tf32_small(float x) {
  const float small = x - __uint_as_float(__float_as_uint(x) & TF32_BIG_MASK);
  const float rounded = __uint_as_float(__float_as_uint(small) + TF32_RNA_HALF);
  return __finitef(x) ? rounded : (x != x ? __uint_as_float(F32_CANONICAL_NAN) : x);
}

// The big part a non-finite x is read as (tf32_small): the largest tf32 of its sign for an
// infinity, 0 for a NaN.
__device__ __forceinline__ float tf32_big_of_non_finite(float x) {
  return __isinff(x) ? __uint_as_float((__float_as_uint(x) & F32_SIGN_BIT) | TF32_MAX_BITS)
                     : 0.0f;
}

// 3xTF32: the small parts (tf32_small) of a landed stage's boxes, written LOADED_BYTES on.
// The swizzle permutes whole 16-byte chunks, so an element-wise pass keeps each box's
// layout, and the small parts' descriptors differ from the boxes' only in their base. A
// chunk holding a non-finite element has its big parts rewritten in place (rare: the
// branch costs the finite chunks a test). Every consumer thread takes its share of both
// boxes (B's is common to the warpgroups); the pass is fenced to the async proxy, which the
// wgmmas read through, and the consumers meet before any of them reads the stage. It runs
// while the previous k-tile's wgmmas are in flight (wgmma_consume_x3), which read another
// stage.
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
    if (!(__finitef(x.x) && __finitef(x.y) && __finitef(x.z) && __finitef(x.w)))
      st_shared_f4(x_at, make_float4(
          __finitef(x.x) ? x.x : tf32_big_of_non_finite(x.x),
          __finitef(x.y) ? x.y : tf32_big_of_non_finite(x.y),
          __finitef(x.z) ? x.z : tf32_big_of_non_finite(x.z),
          __finitef(x.w) ? x.w : tf32_big_of_non_finite(x.w)));
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

}  // namespace skc
