// sk_common.cuh: types, conversions and PTX helpers shared by every skcontract kernel:
// half_t / bfloat16_t / int8_t storage types, Cvt / AccCvt conversions, acc_add / acc_mul
// (wrapping for int32), cp.async, GPU-scope acquire / release, and NoLoads (the default
// `between` of a mainloop's compute, sk_gemm.cuh).
// No CUDA toolkit header is included: NVRTC compiles this with only its built-in headers,
// so fp16 / bf16 are our own 16-bit storage types converted through PTX cvt.
#pragma once

#ifdef SKCONTRACT_TRACE
// Phase stamps of tools/trace_kernel.py (a build with SKCONTRACT_TRACE=1): per CTA, the
// globaltimer at its start and end (slots 0, 1) and SM clocks (slots 2..) at the TracePoint
// events. Global scope: the host reads it by this unmangled name.
#define SKC_TRACE_CTAS 1024
#define SKC_TRACE_SLOTS 16
__device__ unsigned long long skc_trace[SKC_TRACE_CTAS * SKC_TRACE_SLOTS];
// Per k-tile of a CTA's first SKC_KTRACE_TILES (the Wgmma ring's): the SM clock where the
// producer issues its loads (side 0) and where the consumers find it landed (side 1).
#define SKC_KTRACE_TILES 256
__device__ unsigned long long skc_ktrace[SKC_TRACE_CTAS * SKC_KTRACE_TILES * 2];
#endif

namespace skc {

// The events a traced kernel stamps (tools/trace_kernel.py names them in this order).
enum TracePoint : int {
  TRACE_START = 2, TRACE_END, TRACE_FIRST_LOAD, TRACE_FIRST_LANDED, TRACE_LAST_LOAD,
  TRACE_MAINLOOP_DONE, TRACE_FIXUP_DONE, TRACE_EPILOGUE_DONE, TRACE_SHARED_WAITED,
  TRACE_SHARED_DONE, TRACE_FIRST_SPLIT
};

#ifdef SKCONTRACT_TRACE
__device__ __forceinline__ unsigned long long sm_clock() {
  long long clk;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(clk));
  return (unsigned long long)clk;
}
#endif

// Stamp `point` for this CTA (the caller picks the one thread); nothing without
// SKCONTRACT_TRACE. TRACE_START and TRACE_END also record the globaltimer, which aligns the
// CTAs' clocks on the host. TRACE_START is the CTA's start, before it waits for the previous
// kernel: a traced kernel is timed alone (tools.trace_kernel), its buffer its own.
__device__ __forceinline__ void trace(int point) {
#ifdef SKCONTRACT_TRACE
  if (blockIdx.x >= SKC_TRACE_CTAS) return;
  unsigned long long* row = skc_trace + blockIdx.x * SKC_TRACE_SLOTS;
  row[point] = sm_clock();
  if (point == TRACE_START || point == TRACE_END) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    row[point - TRACE_START] = t;
  }
#endif
}

// The ring's k-tile stamps of a traced build: `side` 0 where the producer issues the CTA's
// k-tile `taken` (its count of k-tiles so far, over its splits), 1 where the consumers
// find it landed; nothing without SKCONTRACT_TRACE.
enum KtileSide : int { KTILE_ISSUED = 0, KTILE_LANDED = 1 };
__device__ __forceinline__ void trace_ktile(int side, int taken) {
#ifdef SKCONTRACT_TRACE
  if (blockIdx.x >= SKC_TRACE_CTAS || taken >= SKC_KTRACE_TILES) return;
  skc_ktrace[(blockIdx.x * SKC_KTRACE_TILES + taken) * 2 + side] = sm_clock();
#endif
}

// ---- Programmatic dependent launch ----------------------------------------------------------
// A kernel launched with programmatic stream serialization (launch.py does, on sm_90 and
// later) may start while the kernel before it in the stream still runs: it waits here, before
// any global access but the read of its first split-table row (sk_scheduler.cuh,
// for_each_split_of), until that kernel has finished and its writes are visible. Without
// the launch attribute the wait returns at once; before sm_90 both are no-ops (the host
// launches plainly there).
__device__ __forceinline__ void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// Let the next kernel in the stream (if launched with the attribute) start its CTAs once every
// CTA of this grid has signalled or exited: they set up on the SMs this grid leaves free, then
// wait in grid_dependency_wait. A grid whose CTAs wait on each other is then wholly resident.
__device__ __forceinline__ void launch_dependent_grids() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// A mainloop's compute(As, Bs, acc, between) calls between(step) once per k step; sk_gemm
// issues the next k-tile's copies there (SPREADS_LOADS). The plain compute passes this.
struct NoLoads {
  __device__ __forceinline__ void operator()(int) const {}
};

// Conditional<B, T, F>::type is T when B, else F (NVRTC compiles without <type_traits>).
template <bool B, class T, class F> struct Conditional { using type = T; };
template <class T, class F> struct Conditional<false, T, F> { using type = F; };

struct half_t { unsigned short x; };
struct bfloat16_t { unsigned short x; };
typedef signed char int8_t;  // int8 operands (mma m16n8k32 .s8); int32 accumulators / output

// ---- conversions -----------------------------------------------------------------------
template <class T> struct Cvt;
template <> struct Cvt<float> {
  __device__ __forceinline__ static float to_f32(float v) { return v; }
  __device__ __forceinline__ static double to_f64(float v) { return (double)v; }
  __device__ __forceinline__ static float from_f32(float v) { return v; }
  __device__ __forceinline__ static float from_f64(double v) { return (float)v; }
};
template <> struct Cvt<double> {
  __device__ __forceinline__ static float to_f32(double v) { return (float)v; }
  __device__ __forceinline__ static double to_f64(double v) { return v; }
  __device__ __forceinline__ static double from_f32(float v) { return (double)v; }
  __device__ __forceinline__ static double from_f64(double v) { return v; }
};
template <> struct Cvt<half_t> {
  __device__ __forceinline__ static float to_f32(half_t h) {
    float f;
    asm("{.reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t;}" : "=f"(f) : "h"(h.x));
    return f;
  }
  __device__ __forceinline__ static double to_f64(half_t h) { return (double)to_f32(h); }
  __device__ __forceinline__ static half_t from_f32(float f) {
    half_t h;
    asm("{.reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t;}" : "=h"(h.x) : "f"(f));
    return h;
  }
  __device__ __forceinline__ static half_t from_f64(double d) {
    half_t h;
    asm("{.reg .f16 t; cvt.rn.f16.f64 t, %1; mov.b16 %0, t;}" : "=h"(h.x) : "d"(d));
    return h;
  }
};
template <> struct Cvt<bfloat16_t> {
  __device__ __forceinline__ static float to_f32(bfloat16_t h) {
    return __uint_as_float(((unsigned)h.x) << 16);
  }
  __device__ __forceinline__ static double to_f64(bfloat16_t h) { return (double)to_f32(h); }
  __device__ __forceinline__ static bfloat16_t from_f32(float f) {
    bfloat16_t h;
    asm("{.reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t;}" : "=h"(h.x) : "f"(f));
    return h;
  }
  __device__ __forceinline__ static bfloat16_t from_f64(double d) {
    return from_f32((float)d);  // double rounding; only reached with an fp64 accumulator
  }
};

// Accumulator -> value of type T, and T -> accumulator.
template <class T, class Acc> struct AccCvt;
template <class T> struct AccCvt<T, float> {
  __device__ __forceinline__ static T from_acc(float v) { return Cvt<T>::from_f32(v); }
  __device__ __forceinline__ static float to_acc(T v) { return Cvt<T>::to_f32(v); }
};
template <class T> struct AccCvt<T, double> {
  __device__ __forceinline__ static T from_acc(double v) { return Cvt<T>::from_f64(v); }
  __device__ __forceinline__ static double to_acc(T v) { return Cvt<T>::to_f64(v); }
};
template <> struct AccCvt<int, int> {
  __device__ __forceinline__ static int from_acc(int v) { return v; }
  __device__ __forceinline__ static int to_acc(int v) { return v; }
};

// Accumulator arithmetic of the fixup and the epilogue. Integers wrap modulo 2^32 (done in
// unsigned arithmetic: signed overflow would be undefined behaviour), as the s32 mma does.
__device__ __forceinline__ float acc_add(float a, float b) { return a + b; }
__device__ __forceinline__ double acc_add(double a, double b) { return a + b; }
__device__ __forceinline__ int acc_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ float acc_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double acc_mul(double a, double b) { return a * b; }
__device__ __forceinline__ int acc_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }

// ---- shared memory / async copy ------------------------------------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// cp.async of BYTES (4, 8 or 16) with zero fill of everything past src_bytes.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, int src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async size");
  if (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "n"(BYTES), "r"(src_bytes));
  }
}
// A whole 16-byte chunk, no zero-fill (the caller knows it lies inside the operand).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- GPU-scope synchronisation (docs/design/stream_k.md) -----------------------------------
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// *p += v, returning the old value, ordered as a release and an acquire at GPU scope: the
// CTA's writes before its barrier are visible before the add, and the peers' writes released
// by the adds this one follows are visible after it. One MEMBAR.ALL, where a
// __threadfence() (fence.sc) on each side costs two MEMBAR.SC.
__device__ __forceinline__ unsigned atom_add_acq_rel_gpu(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v)
               : "memory");
  return old;
}
// *p += v as a release at GPU scope, where the old value is not needed.
__device__ __forceinline__ void red_add_release_gpu(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

}  // namespace skc
