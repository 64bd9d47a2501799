// wgmma_smem.cuh: a Wgmma CTA's shared memory and the protocol of its ring of stages: the
// layout (WgmmaSmem: the ring, the epilogue's staging, the mbarriers, the fixup's flag), where
// a role is in the ring (RingCursor), how a consumer waits for a stage and frees it
// (wait_stage, release_stage), the consumers' named barrier (ConsumerSync), and whether a
// split is a HyTiS small row (small_row), whose stages load half of B.
#pragma once
#include "sk_scheduler.cuh"
#include "hopper.cuh"
#include "fixup.cuh"
#include "wgmma_tile.cuh"
#include "wgmma_epilogue.cuh"

namespace skc {

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

// Wait until the stage at `at` may be read: loaded and, where an operand is transposed in
// it, turned K-major (waiting on both: the loads' bytes are the consumers' own to see).
template <class Cfg>
__device__ __forceinline__ void wait_stage(const WgmmaSmem<Cfg>& sm, const RingCursor& at) {
  mbar_wait(&sm.full[at.stage], at.phase);
  if constexpr (WgmmaSmem<Cfg>::TRANSPOSES) mbar_wait(&sm.transposed[at.stage], at.phase);
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

}  // namespace skc
