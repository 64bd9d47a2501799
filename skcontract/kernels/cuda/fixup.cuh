// fixup.cuh: merging the partial tiles of Stream-K splits. One protocol per reduction mode,
// the same steps the CPU emulator runs (skcontract/schedule/table.py lists them; the design
// and the deadlock-freedom argument are in docs/design/stream_k.md).
//
// Accumulators are moved in the mainloop's own register order ("fragment order"): element
// group g of thread t of a slot lives at slot * SLOT + (g * THREADS + t) * V, V = 16 bytes of
// accumulators. Every split of one tile runs the same kernel, so no coordinates are needed and
// every access is a coalesced 16-byte load or store. Workspace accesses bypass L1 (.cg).
//
// REDUCTION_NONE          : every row owns its tile (data-parallel tables).
// REDUCTION_ATOMIC        : each split red.adds into staging[TILE] (kept zeroed), then bumps
//                           counter[TILE]; the last arrival reads the sum, re-zeroes the
//                           staging slot, resets the counter and runs the epilogue. Nobody
//                           waits; the order of the adds varies, so results may differ run to
//                           run.
// REDUCTION_DETERMINISTIC : lock[TILE] counts K elements folded in; a non-first split waits
//                           for lock == K0; non-final splits store / add into workspace[SLOT]
//                           and publish lock = K1; the final split adds the workspace and
//                           resets the lock.
// REDUCTION_ARRIVAL       : each split stores its own workspace[SLOT] and bumps counter[TILE];
//                           the last arrival sums the PEERS slots SLOT - SPLIT ... in SPLIT
//                           order (a tile's slots are consecutive in SPLIT order).
//   + SHARED_SUM rows     : the peers share that sum (all CTAs resident): each stores its slot
//                           and arrives where it is computed; after its last split the CTA
//                           walks its shared rows again: waits for counter >= PEERS, sums its
//                           1/PEERS share of the slot vectors over the peers (fixed order)
//                           and stores that share of the output itself, bumps the counter
//                           again; the split that sees 2 PEERS - 1 resets it.
// REDUCTION_CLUSTER       : a tile's PEERS splits are the PEERS CTAs of one cluster, one split
//                           each (the aligned split launched in clusters of PEERS); they sum
//                           through distributed shared memory, not the workspace: the Wgmma
//                           family's cluster_push / cluster_finish (wgmma_cluster.cuh), which
//                           only it runs.
// Each protocol's synchronisation is written once (FixupSteps); Fixup runs it on a mainloop's
// fragments (the GEMM, convolution and Wgmma kernels), DotMerge on the Dot family's output sums
// (sk_dot.cuh). docs/design/stream_k.md ("One protocol, its implementations") says why the
// order of the steps is written in each of the two.
// Ordering: the waiter spins in one thread with ld.acquire.gpu then the group's barrier
// (Sync: __syncthreads, or the consumers' named barrier); the publisher meets the group's
// barrier, then one thread releases (st.release, red.release or atom.acq_rel: a release is
// cumulative over what the barrier showed that thread).
#pragma once
// protocol.cuh (REDUCTION_<NAME>) is generated from skcontract.schedule.Protocol by jit.py
#include "protocol.cuh"
#include "sk_common.cuh"
#include "sk_scheduler.cuh"

#ifndef SKCONTRACT_SPIN_LIMIT
#define SKCONTRACT_SPIN_LIMIT (1ll << 26)
#endif

namespace skc {

// Every kernel's entry into the stream: wait for the previous kernel (grid_dependency_wait,
// before any global access but the reads of the CTA's first split-table row), then, where
// SIGNAL_EARLY, let the next one start its CTAs; else the signal is the grid's exit. The
// deterministic fixup keeps it to the exit: its ordered waits run slower with the next grid's
// CTAs arriving during them. So do kernels of which an SM holds several CTAs while their
// schedule counts one (the portable GEMM families): the next grid's CTAs, placed while this
// grid holds the SMs, pile onto the few free ones.
template <int REDUCTION, bool SIGNAL_EARLY = true>
__device__ __forceinline__ void follow_previous_grid() {
  grid_dependency_wait();
  if constexpr (SIGNAL_EARLY && REDUCTION != REDUCTION_DETERMINISTIC) launch_dependent_grids();
}
// The same as a split walk's entry (sk_scheduler.cuh, for_each_split_of): every thread that
// walks the table passes it once, after its first row's loads (AT_FIRST_ROW: the Dot and
// Wgmma kernels, which gain the row's round trips for a few registers) or before the walk
// with that row prefetched (the portable GEMM kernels, where the later wait keeps the row and
// a flag live through the loop, takes many more registers and runs exact float32 slower).
template <int REDUCTION, bool SIGNAL_EARLY = true, bool AT_FIRST_ROW_ = true>
struct FollowPreviousGrid {
  static constexpr bool AT_FIRST_ROW = AT_FIRST_ROW_;
  __device__ __forceinline__ void operator()() const {
    follow_previous_grid<REDUCTION, SIGNAL_EARLY>();
  }
};

// 16-byte L2 (.cg) vector access to accumulators (fp32, fp64, int32).
template <class Acc> struct Vec16;
template <> struct Vec16<float> {
  static constexpr int V = 4;
  __device__ __forceinline__ static void load(const float* p, float* v) {
    asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                 : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"(p));
  }
  __device__ __forceinline__ static void store(float* p, const float* v) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1,%2,%3,%4};\n"
                 ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3]) : "memory");
  }
};
template <> struct Vec16<double> {
  static constexpr int V = 2;
  __device__ __forceinline__ static void load(const double* p, double* v) {
    asm volatile("ld.global.cg.v2.f64 {%0,%1}, [%2];\n" : "=d"(v[0]), "=d"(v[1]) : "l"(p));
  }
  __device__ __forceinline__ static void store(double* p, const double* v) {
    asm volatile("st.global.cg.v2.f64 [%0], {%1,%2};\n" ::"l"(p), "d"(v[0]), "d"(v[1]) : "memory");
  }
};

template <> struct Vec16<int> {  // int32 accumulators of the int8 mainloop
  static constexpr int V = 4;
  __device__ __forceinline__ static void load(const int* p, int* v) {
    asm volatile("ld.global.cg.v4.s32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(p));
  }
  __device__ __forceinline__ static void store(int* p, const int* v) {
    asm volatile("st.global.cg.v4.s32 [%0], {%1,%2,%3,%4};\n"
                 ::"l"(p), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
  }
};

// Which threads run a fixup and how they meet: the whole CTA (__syncthreads), or, in a
// warp-specialised kernel, its first ML::THREADS threads through a named barrier (the Wgmma
// family's consumers, sk_wgmma.cuh). Slots are indexed by threadIdx.x either way.
struct CtaSync {
  __device__ __forceinline__ static void sync() { __syncthreads(); }
};

// Spin (thread 0) until *p == want (AT_LEAST: *p >= want), then synchronise the group.
template <class Sync = CtaSync, bool AT_LEAST = false>
__device__ __forceinline__ void spin_until(const unsigned* p, unsigned want, int tile) {
  if (threadIdx.x == 0) {
#ifdef SKCONTRACT_DEBUG_SPIN
    long long n = 0;
#endif
    for (unsigned v = ld_acquire_gpu(p); AT_LEAST ? v < want : v != want; v = ld_acquire_gpu(p)) {
#ifdef SKCONTRACT_DEBUG_SPIN
      if (++n > SKCONTRACT_SPIN_LIMIT) {
        printf("skcontract: CTA %d gave up waiting on tile %d (lock %u, want %u)\n",
               (int)blockIdx.x, tile, ld_acquire_gpu(p), want);
        __trap();
      }
#endif
      __nanosleep(20);
    }
  }
  Sync::sync();
}

// The protocols' synchronisation, one implementation of each step: the locks and counters,
// the waits, the group's barriers and the release / acquire operations above. A merge runs the
// steps in its protocol's order, around its own loads and stores of the partial: Fixup::run
// (below) on a mainloop's accumulator fragment, DotMerge::run (sk_dot.cuh) on a Dot split's
// output sums. A step that its caller runs next to another on the same tile takes the tile's
// lock or counter (locks + TILE: wait_turn, pass_turn, end_turns, wait_peers, leave); the
// others take the split and the locks.
template <class Sync = CtaSync>
struct FixupSteps {
  // REDUCTION_DETERMINISTIC: lock[TILE] counts the K elements folded into the slot.
  // A non-first split waits for its turn (lock == K0), the previous splits' sum in the slot.
  __device__ __forceinline__ static void wait_turn(const Split& s, unsigned* lock) {
    if (!s.first()) spin_until<Sync>(lock, (unsigned)s.k0, s.tile);
  }
  // A non-final split, its sum stored: the group's barrier, then lock = K1 (release).
  __device__ __forceinline__ static void pass_turn(const Split& s, unsigned* lock) {
    Sync::sync();
    if (threadIdx.x == 0) st_release_gpu(lock, (unsigned)s.k1);
  }
  // The final split, the slot read: the group's barrier (every thread has read the workspace
  // before the lock is reset), then lock = 0.
  __device__ __forceinline__ static void end_turns(unsigned* lock) {
    Sync::sync();
    if (threadIdx.x == 0) atomicExch(lock, 0u);
  }

  // REDUCTION_ARRIVAL and REDUCTION_ATOMIC: counter[TILE] counts the splits that arrived.
  // Arrive, the partial stored; true in every thread of the group whose arrival is number
  // `last_arrival` (acquiring the earlier arrivals' partials).
  __device__ __forceinline__ static bool arrive_last(const Split& s, unsigned* locks,
                                                     int* flag) {
    unsigned* counter = locks + s.tile;
    const int last_arrival = s.peers - 1;
    Sync::sync();
    if (threadIdx.x == 0)  // releases this CTA's partials, acquires the earlier arrivals'
      *flag = atom_add_acq_rel_gpu(counter, 1u) == (unsigned)last_arrival;
    Sync::sync();
    return *flag != 0;
  }
  // The last arrival, done with the partials: counter = 0 (every peer has arrived).
  __device__ __forceinline__ static void reset(const Split& s, unsigned* locks) {
    if (threadIdx.x == 0) atomicExch(locks + s.tile, 0u);
  }
  // A shared sum's first arrival (FLAG_SHARED_SUM rows), the slot stored: never waits.
  __device__ __forceinline__ static void arrive(const Split& s, unsigned* locks) {
    Sync::sync();
    if (threadIdx.x == 0) red_add_release_gpu(locks + s.tile, 1u);
  }
  // A shared sum's wait, after the CTA's last split: every peer has arrived once.
  __device__ __forceinline__ static void wait_peers(const Split& s, unsigned* counter) {
    spin_until<Sync, true>(counter, (unsigned)s.peers, s.tile);
    if (threadIdx.x == 0) trace(TRACE_SHARED_WAITED);
  }
  // A shared sum's second arrival, its share stored; the split that arrives last (when every
  // peer has passed its wait) resets the counter.
  __device__ __forceinline__ static void leave(const Split& s, unsigned* counter) {
    if (threadIdx.x == 0 && atomicAdd(counter, 1u) == 2u * s.peers - 1) atomicExch(counter, 0u);
  }
};

// The fixup of a split's accumulator fragment (the GEMM, convolution and Wgmma kernels): the
// protocols' steps around the fragment's workspace and staging traffic.
template <class ML, int REDUCTION, class Sync = CtaSync>
struct Fixup {
  using Acc = typename ML::Acc;
  using Steps = FixupSteps<Sync>;
  static constexpr int NACC = ML::NACC, THREADS = ML::THREADS;
  static constexpr int V = Vec16<Acc>::V;
  static constexpr long long SLOT = (long long)NACC * THREADS;  // accumulators per slot
  static_assert(NACC % V == 0, "accumulators per thread must fill 16-byte vectors");
  // Loads in flight a thread in a shared sum's pass (512 threads have a 128-register cap); a
  // kernel with registers to spare asks for more (finish_shared's BATCH).
  static constexpr int SUM_BATCH = THREADS > 256 ? 1 : 4;

  __device__ __forceinline__ static Acc* at(Acc* base, long long slot, int g) {
    return base + slot * SLOT + ((long long)g * THREADS + threadIdx.x) * V;
  }
  __device__ __forceinline__ static void store(Acc* base, long long slot, const Acc (&acc)[NACC]) {
#pragma unroll
    for (int g = 0; g < NACC / V; ++g) Vec16<Acc>::store(at(base, slot, g), &acc[g * V]);
  }
  // acc = slot + acc (the addition order is fixed: slot value first)
  __device__ __forceinline__ static void add_from(Acc* base, long long slot, Acc (&acc)[NACC]) {
#pragma unroll
    for (int g = 0; g < NACC / V; ++g) {
      Acc v[V];
      Vec16<Acc>::load(at(base, slot, g), v);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[g * V + e] = acc_add(v[e], acc[g * V + e]);
    }
  }
  __device__ __forceinline__ static void load_to(Acc* base, long long slot, Acc (&acc)[NACC]) {
#pragma unroll
    for (int g = 0; g < NACC / V; ++g) Vec16<Acc>::load(at(base, slot, g), &acc[g * V]);
  }
  // SHARED_SUM rows of the arrival protocol, in two parts. arrive_shared runs where the split
  // is computed (store the slot, arrive; never waits). finish_shared runs after the CTA has
  // arrived on every one of its tiles, so every wait is for arrivals that need no waiting:
  // with every CTA resident, no cycle is possible whatever order CTAs visit tiles in.
  __device__ __forceinline__ static void arrive_shared(const Split& s, const Acc (&acc)[NACC],
                                                       Acc* ws, unsigned* locks) {
    store(ws, s.slot, acc);
    Steps::arrive(s, locks);
  }

  // Wait for every peer, sum this split's share of the tile and pass it to
  // store(t, i, v): accumulators i .. i + V - 1 of thread t's fragment (any thread's: the
  // caller maps them to output coordinates), then arrive again; the split that arrives last
  // resets the counter, when every peer has passed its wait. No peer waits for another's
  // sum, and the tile's stores are spread over its peers. `scratch`: at least THREADS * V
  // accumulators of shared memory (the pipeline stages, idle by now).
  template <int BATCH = SUM_BATCH, class Store>
  __device__ __forceinline__ static void finish_shared(const Split& s, Acc* ws, unsigned* locks,
                                                       Acc* scratch, Store&& store) {
    unsigned* counter = locks + s.tile;
    Steps::wait_peers(s, counter);
    sum_share<BATCH>(s, ws + ((long long)s.slot - s.split) * SLOT, scratch,
                     [&](int vec, const Acc (&sum)[V]) {
                       store((unsigned)(vec % THREADS), vec / THREADS * V, sum);
                     });
    Steps::leave(s, counter);
  }

  // This split's share [lo, hi) of the slot's 16-byte vectors, summed over the PEERS slots
  // starting at `first`, each passed to sink(vector, sum). A share narrower than the CTA splits
  // the peers into GROUPS consecutive runs (one thread per vector and run, BATCH loads
  // in flight each), then adds the runs in order through shared memory: a fixed order, so
  // results are bitwise reproducible, with PEERS / GROUPS dependent L2 round trips instead
  // of PEERS.
  template <int BATCH, class Sink>
  __device__ __forceinline__ static void sum_share(const Split& s, const Acc* first, Acc* scratch,
                                                   Sink&& sink) {
    constexpr int NVEC = (int)(SLOT / V);
    const int lo = (int)((long long)NVEC * s.split / s.peers);
    const int share = (int)((long long)NVEC * (s.split + 1) / s.peers) - lo;
    if (share <= 0) return;
    const int groups = share >= THREADS ? 1 : min(s.peers, THREADS / share);
    for (int idx = threadIdx.x; idx < share * groups; idx += THREADS) {
      const int i = idx % share, g = idx / share;
      const int p0 = s.peers * g / groups, p1 = s.peers * (g + 1) / groups;
      const Acc* at_v = first + (long long)(lo + i) * V;
      Acc sum[V];
      Vec16<Acc>::load(at_v + (long long)p0 * SLOT, sum);
      for (int p = p0 + 1; p < p1; p += BATCH) {
        Acc part[BATCH][V];
#pragma unroll
        for (int j = 0; j < BATCH; ++j)
          if (p + j < p1) Vec16<Acc>::load(at_v + (long long)(p + j) * SLOT, part[j]);
#pragma unroll
        for (int j = 0; j < BATCH; ++j)
          if (p + j < p1)
#pragma unroll
            for (int e = 0; e < V; ++e) sum[e] = acc_add(sum[e], part[j][e]);
      }
      if (groups == 1) {
        sink(lo + i, sum);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) scratch[idx * V + e] = sum[e];
      }
    }
    if (groups == 1) return;
    Sync::sync();
    for (int i = threadIdx.x; i < share; i += THREADS) {
      Acc sum[V];
#pragma unroll
      for (int e = 0; e < V; ++e) sum[e] = scratch[i * V + e];
      for (int g = 1; g < groups; ++g)
#pragma unroll
        for (int e = 0; e < V; ++e) sum[e] = acc_add(sum[e], scratch[(g * share + i) * V + e]);
      sink(lo + i, sum);
    }
  }

  // Returns true when this CTA holds the complete tile in acc and must run the epilogue.
  __device__ __forceinline__ static bool run(const Split& s, Acc (&acc)[NACC], Acc* ws,
                                             Acc* staging, unsigned* locks, int* flag) {
    static_assert(REDUCTION != REDUCTION_CLUSTER, "the cluster protocol is cluster_push's");
    if (REDUCTION == REDUCTION_NONE || s.owns_tile()) return true;
    if (REDUCTION == REDUCTION_DETERMINISTIC) {
      unsigned* lock = locks + s.tile;
      Steps::wait_turn(s, lock);
      if (!s.final_()) {
        if (!s.first()) add_from(ws, s.slot, acc);
        store(ws, s.slot, acc);
        Steps::pass_turn(s, lock);
        return false;
      }
      add_from(ws, s.slot, acc);
      Steps::end_turns(lock);
      return true;
    } else if (REDUCTION == REDUCTION_ARRIVAL) {
      if (s.shared_sum()) {  // the sum comes after the CTA's last split (finish_shared)
        arrive_shared(s, acc, ws, locks);
        return false;
      }
      store(ws, s.slot, acc);
      if (!Steps::arrive_last(s, locks, flag)) return false;
      const long long base = (long long)s.slot - s.split;
      load_to(ws, base, acc);
      for (int p = 1; p < s.peers; ++p) {
#pragma unroll
        for (int g = 0; g < NACC / V; ++g) {
          Acc v[V];
          Vec16<Acc>::load(at(ws, base + p, g), v);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[g * V + e] = acc_add(acc[g * V + e], v[e]);
        }
      }
      Steps::reset(s, locks);
      return true;
    } else {  // REDUCTION_ATOMIC
#pragma unroll
      for (int g = 0; g < NACC / V; ++g) {
        Acc* p = at(staging, s.tile, g);
#pragma unroll
        for (int e = 0; e < V; ++e) atomicAdd(p + e, acc[g * V + e]);
      }
      if (!Steps::arrive_last(s, locks, flag)) return false;
      Acc zero[V];
#pragma unroll
      for (int e = 0; e < V; ++e) zero[e] = Acc(0);
#pragma unroll
      for (int g = 0; g < NACC / V; ++g) {
        Vec16<Acc>::load(at(staging, s.tile, g), &acc[g * V]);
        Vec16<Acc>::store(at(staging, s.tile, g), zero);  // keep staging zeroed for next time
      }
      Steps::reset(s, locks);
      return true;
    }
  }
};

}  // namespace skc
