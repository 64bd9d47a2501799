// hopper.cuh: the sm_90a building blocks of the Wgmma family (sk_wgmma.cuh), as PTX wrappers:
// the TMA descriptor parameter, mbarriers, cp.async.bulk.tensor loads completing on them, the
// wgmma shared-memory matrix descriptor, wgmma.mma_async m64nNkK (f16, bf16 and tf32 with
// fp32 accumulators, s8 with int32 ones), its fences, and setmaxnreg. Everything here needs
// sm_90a (the compile check builds the family for that target only).
#pragma once
#include "sk_common.cuh"

namespace skc {

// A CUtensorMap's 128 bytes (NVRTC cannot include cuda.h): encoded on the host by
// cuTensorMapEncodeTiled (skcontract/kernels/tma.py) and passed by value as a
// `const __grid_constant__` kernel parameter, so the TMA unit reads it from parameter space.
struct alignas(64) TmaMap {
  unsigned long long v[16];
};

// ---- mbarriers (shared memory, CTA scope) ---------------------------------------------
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
// Make initialised barriers visible to the async (TMA) proxy before any copy uses them.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Arrive and announce `bytes` of TMA transactions that complete the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes) : "memory");
}
// Wait until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}

// ---- TMA ------------------------------------------------------------------------------------
__device__ __forceinline__ void tma_prefetch(const TmaMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map))
               : "memory");
}
// The box of `map` at coordinates (c0 innermost, c1, c2) into shared memory at dst; the
// bytes complete a transaction on bar. Out-of-bounds elements are zero-filled.
__device__ __forceinline__ void tma_load_3d(void* dst, const TmaMap& map, unsigned long long* bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1),
      "r"(c2)
      : "memory");
}

// The box of a 4-D tiled map at (c0 innermost, .., c3).
__device__ __forceinline__ void tma_load_4d(void* dst, const TmaMap& map, unsigned long long* bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1),
      "r"(c2), "r"(c3)
      : "memory");
}
// An im2col load of a 4-D (C, W, H, N) map: the map's pixels-per-column pixels from the one
// at (w, h, image), walking W, then H, then N by the map's traversal strides inside its
// bounding box, each shifted by (off_w, off_h) (a filter tap), its channels [c, c +
// channels-per-pixel); pixels in the padding read as zeros.
__device__ __forceinline__ void tma_load_im2col_4d(void* dst, const TmaMap& map,
                                                   unsigned long long* bar, int c, int w, int h,
                                                   int image, unsigned short off_w,
                                                   unsigned short off_h) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(smem_addr(bar)), "r"(c), "r"(w),
      "r"(h), "r"(image), "h"(off_w), "h"(off_h)
      : "memory");
}

// ---- TMA stores (sk_wgmma.cuh's epilogue) ---------------------------------------------
// Make this thread's generic writes to shared memory visible to the async proxy (a TMA
// store that reads them, issued after a barrier).
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// The box of `map` at coordinates (c0 innermost, c1, c2) from shared memory at src, as a
// bulk async-group of the issuing thread; elements past the tensor's extents are not written.
__device__ __forceinline__ void tma_store_3d(const TmaMap& map, const void* src, int c0, int c1,
                                             int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<unsigned long long>(&map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// Close the thread's bulk async-group of the stores issued since the last commit.
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Wait until at most N of the thread's bulk groups are still reading shared memory (their
// source buffers may be rewritten); bulk_wait: until at most N are still running at all.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- clusters (sk_wgmma.cuh's pairs) -----------------------------------------------------
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster meets here; shared-memory writes before it (the
// mbarriers' initialisation) are visible to the cluster after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_nctarank() {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// mbar_wait that acquires at cluster scope what was released to the barrier (the peers'
// bulk copies into this CTA).
__device__ __forceinline__ void mbar_wait_acquire_cluster(unsigned long long* bar,
                                                          unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}
// Copy `bytes` (a multiple of 16) from this CTA's shared memory at `src` to `dst`'s offset in
// cluster CTA `rank`'s (distributed shared memory) by the bulk-copy unit, completing the
// bytes on the mbarrier at `bar`'s offset in that CTA. The copy reads `src` after the
// instruction: the CTA keeps it until the receiver has the bytes (cluster_arrive_relaxed /
// cluster_wait).
__device__ __forceinline__ void bulk_copy_to_peer(void* dst, const void* src, unsigned bytes,
                                                  unsigned long long* bar, unsigned rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote, remote_bar;\n"
      "mapa.shared::cluster.u32 remote, %0, %3;\n"
      "mapa.shared::cluster.u32 remote_bar, %2, %3;\n"
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [remote], [%1], "
      "%4, [remote_bar];\n"
      "}\n" ::"r"(smem_addr(dst)), "r"(smem_addr(src)), "r"(smem_addr(bar)), "r"(rank),
      "r"(bytes) : "memory");
}
// The cluster barrier in two halves: every non-exited thread of the cluster arrives (no
// ordering of its memory accesses), and a wait returns once all have.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}
// Arrive on the mbarrier at the same shared-memory offset as `bar` in cluster CTA `rank`,
// with the default (CTA-scope) release: a consumer's arrival only says that its wgmmas
// have finished reading a stage, which needs no cluster-wide fence (one would stall every
// warp on a membar each k-tile).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)), "r"(rank) : "memory");
}
// tma_load_3d into the same shared-memory offset of every cluster CTA in `mask`, each
// completing its bytes on its own mbarrier at bar's offset.
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const TmaMap& map,
                                                      unsigned long long* bar, int c0, int c1,
                                                      int c2, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1),
      "r"(c2), "h"(mask)
      : "memory");
}

// ---- wgmma --------------------------------------------------------------------------------
// The shared-memory matrix descriptor of a 128-byte-swizzled operand: start address, leading
// and stride byte offsets (all >> 4), layout type 1 (128-byte swizzle) in bits 62-63. Tiles
// start on 1024-byte boundaries (the swizzle atom), so the base offset field stays 0.
__device__ __forceinline__ unsigned long long wgmma_desc(const void* smem, unsigned lbo_bytes,
                                                        unsigned sbo_bytes) {
  const unsigned long long addr = smem_addr(smem);
  return ((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo_bytes >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo_bytes >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The compiler must not move accumulator reads or writes across an in-flight wgmma.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_accumulators(int (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// ---- registers and barriers of warp-specialised CTAs ----------------------------------------
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// Eight accumulator operands d[i] .. d[i + 7] of a wgmma wrapper below (RC: their register
// constraint).
#define SKC_ACC8(RC, i)                                                                       \
  "+" RC(d[i]), "+" RC(d[i + 1]), "+" RC(d[i + 2]), "+" RC(d[i + 3]), "+" RC(d[i + 4]),        \
      "+" RC(d[i + 5]), "+" RC(d[i + 6]), "+" RC(d[i + 7])

// wgmma.mma_async m64nNkK, d += A (64 x K) B (K x N), both operands in shared memory
// (descriptors); K is 32 bytes of the operand type (16 f16 / bf16, 8 tf32, 32 s8); ACC the
// accumulators' type (RC their register constraint). TA / TB: 1 when the operand is M- /
// N-major (transposed from wgmma's K-major default). scale_d == 0 ignores the accumulators'
// old values. The storage type tag picks f16, bf16, tf32 (float operands, whose low 13
// mantissa bits the tensor cores ignore) or s8 (int8_t, int32 accumulators).
#define SKC_WGMMA_M64N64(TAG, ACC, RC, K, TYPES, TAIL)                                                     \
  template <int TA, int TB>                                                                  \
  __device__ __forceinline__ void wgmma_m64n64(ACC (&d)[32], unsigned long long da,      \
                                                 unsigned long long db, int scale_d, TAG) {   \
    asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"  \
      "wgmma.mma_async.sync.aligned.m64n64" K TYPES " "  \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "\
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
      "%32, %33, p" TAIL ";\n}\n"  \
      : SKC_ACC8(RC, 0), SKC_ACC8(RC, 8), SKC_ACC8(RC, 16), SKC_ACC8(RC, 24)  \
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));                                   \
  }

#define SKC_WGMMA_M64N128(TAG, ACC, RC, K, TYPES, TAIL)                                                    \
  template <int TA, int TB>                                                                  \
  __device__ __forceinline__ void wgmma_m64n128(ACC (&d)[64], unsigned long long da,     \
                                                  unsigned long long db, int scale_d, TAG) {  \
    asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"  \
      "wgmma.mma_async.sync.aligned.m64n128" K TYPES " "  \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "\
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "\
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "\
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
      "%64, %65, p" TAIL ";\n}\n"  \
      : SKC_ACC8(RC, 0), SKC_ACC8(RC, 8), SKC_ACC8(RC, 16), SKC_ACC8(RC, 24), SKC_ACC8(RC, 32), SKC_ACC8(RC, 40), SKC_ACC8(RC, 48), SKC_ACC8(RC, 56)  \
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));                                   \
  }

#define SKC_WGMMA_M64N256(TAG, ACC, RC, K, TYPES, TAIL)                                                    \
  template <int TA, int TB>                                                                  \
  __device__ __forceinline__ void wgmma_m64n256(ACC (&d)[128], unsigned long long da,     \
                                                  unsigned long long db, int scale_d, TAG) {  \
    asm volatile(                                                                            \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"  \
      "wgmma.mma_async.sync.aligned.m64n256" K TYPES " "  \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "\
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "\
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "\
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "\
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "\
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "\
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "\
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
      "%128, %129, p" TAIL ";\n}\n"  \
      : SKC_ACC8(RC, 0), SKC_ACC8(RC, 8), SKC_ACC8(RC, 16), SKC_ACC8(RC, 24), SKC_ACC8(RC, 32), SKC_ACC8(RC, 40), SKC_ACC8(RC, 48), SKC_ACC8(RC, 56), SKC_ACC8(RC, 64), SKC_ACC8(RC, 72), SKC_ACC8(RC, 80), SKC_ACC8(RC, 88), SKC_ACC8(RC, 96), SKC_ACC8(RC, 104), SKC_ACC8(RC, 112), SKC_ACC8(RC, 120)  \
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));                                   \
  }

// f16 / bf16: k16, fp32 accumulators, the operand scales and transpose bits (%35, %36 or
// their 128- / 256-wide counterparts); tf32: k8, the scales, no transpose bits (32-bit
// operands are read K-major; TA and TB are then unused and 0); s8: k32, int32 accumulators,
// neither. Each K is 32 bytes of a K-major row.
#define SKC_F16_TAIL(A, B) ", 1, 1, %" #A ", %" #B
SKC_WGMMA_M64N64(half_t, float, "f", "k16", ".f32.f16.f16", SKC_F16_TAIL(35, 36))
SKC_WGMMA_M64N64(bfloat16_t, float, "f", "k16", ".f32.bf16.bf16", SKC_F16_TAIL(35, 36))
SKC_WGMMA_M64N64(float, float, "f", "k8", ".f32.tf32.tf32", ", 1, 1")
SKC_WGMMA_M64N64(int8_t, int, "r", "k32", ".s32.s8.s8", "")
SKC_WGMMA_M64N128(half_t, float, "f", "k16", ".f32.f16.f16", SKC_F16_TAIL(67, 68))
SKC_WGMMA_M64N128(bfloat16_t, float, "f", "k16", ".f32.bf16.bf16", SKC_F16_TAIL(67, 68))
SKC_WGMMA_M64N128(float, float, "f", "k8", ".f32.tf32.tf32", ", 1, 1")
SKC_WGMMA_M64N128(int8_t, int, "r", "k32", ".s32.s8.s8", "")
SKC_WGMMA_M64N256(half_t, float, "f", "k16", ".f32.f16.f16", SKC_F16_TAIL(131, 132))
SKC_WGMMA_M64N256(bfloat16_t, float, "f", "k16", ".f32.bf16.bf16", SKC_F16_TAIL(131, 132))
SKC_WGMMA_M64N256(float, float, "f", "k8", ".f32.tf32.tf32", ", 1, 1")
SKC_WGMMA_M64N256(int8_t, int, "r", "k32", ".s32.s8.s8", "")
#undef SKC_F16_TAIL
#undef SKC_ACC8
#undef SKC_WGMMA_M64N64
#undef SKC_WGMMA_M64N128
#undef SKC_WGMMA_M64N256

}  // namespace skc
