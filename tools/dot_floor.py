"""The floor of one long dot product (``i,i->``) on this GPU: a minimal one-pass kernel
(grid-stride 16-byte loads, a block sum, the last block to arrive sums the blocks' partials
in block order; and a variant whose blocks read contiguous chunks, as Stream-K splits do)
timed against ``skcontract.einsum``, ``torch.dot`` and the copy of the same
bytes, all by CUDA-graph replay in one run.

``python -m tools.dot_floor [--n 16777216] [--reps 7]``

It measures what the Dot family's split-and-shared-sum costs over the least a dot needs;
the kernel here is a yardstick, not part of the library.
"""
from __future__ import annotations

import argparse

import cupy
import numpy as np
from cuda.bindings import driver

import skcontract
from skcontract.bench.timing import device_time_us, torch_graph_us

SOURCE = r"""
#include <cuda_fp16.h>
template <class T> __device__ __forceinline__ void fma16(float& s, const uint4& a, const uint4& b);
template <> __device__ __forceinline__ void fma16<float>(float& s, const uint4& a, const uint4& b) {
  const float* x = reinterpret_cast<const float*>(&a);
  const float* y = reinterpret_cast<const float*>(&b);
#pragma unroll
  for (int e = 0; e < 4; ++e) s = fmaf(x[e], y[e], s);
}
template <> __device__ __forceinline__ void fma16<__half>(float& s, const uint4& a, const uint4& b) {
  const __half2* x = reinterpret_cast<const __half2*>(&a);
  const __half2* y = reinterpret_cast<const __half2*>(&b);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 u = __half22float2(x[e]), v = __half22float2(y[e]);
    s = fmaf(u.x, v.x, s);
    s = fmaf(u.y, v.y, s);
  }
}
// CHUNK: each block reads its own contiguous 1/gridDim of the vectors (threads striding by
// the block), as a Stream-K split does; else the grid strides over them together. TABLE: the
// chunk's bounds come from a split-table-like row (the CTA's row index, then the row's
// k0 / k1: two dependent loads before the first operand load). PDL: the kernel waits for the
// previous grid in the stream (griddepcontrol.wait) before its first global access and lets
// the next one launch at once (launched with programmatic stream serialization).
template <class T, int U, bool FINISH, bool CHUNK = false, bool TABLE = false, bool PDL = false>
__device__ void dot(const uint4* x, const uint4* y, long long nv, float* partial,
                    unsigned* counter, float* out, const int* table) {
  if (PDL) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  }
  float s[U];
#pragma unroll
  for (int u = 0; u < U; ++u) s[u] = 0.f;
  long long step = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (CHUNK) {
    const long long per = (nv + gridDim.x - 1) / gridDim.x;
    long long lo = per * blockIdx.x;
    step = blockDim.x;
    nv = min(nv, lo + per);
    if (TABLE) {
      const int row = __ldg(table + blockIdx.x);
      lo = __ldg(table + gridDim.x + row * 12 + 5);
      nv = min((long long)__ldg(table + gridDim.x + row * 12 + 6), nv);
    }
    i = lo + threadIdx.x;
  }
  for (; i + (U - 1) * step < nv; i += U * step) {
    uint4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { a[u] = __ldg(x + i + u * step); b[u] = __ldg(y + i + u * step); }
#pragma unroll
    for (int u = 0; u < U; ++u) fma16<T>(s[u], a[u], b[u]);
  }
  for (; i < nv; i += step) fma16<T>(s[0], __ldg(x + i), __ldg(y + i));
  float v = s[0];
#pragma unroll
  for (int u = 1; u < U; ++u) v += s[u];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __shared__ float red[32];
  __shared__ int last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) t += red[w];
    partial[blockIdx.x] = t;
    if (FINISH) {
      __threadfence();
      last = atomicAdd(counter, 1u) == gridDim.x - 1;
      if (last) __threadfence();
    }
  }
  if (!FINISH) return;
  __syncthreads();
  if (!last) return;
  if (warp == 0) {  // the block partials in a fixed order: lane l sums l, l + 32, ...
    float t = 0.f;
    for (int b = lane; b < (int)gridDim.x; b += 32) t += __ldcg(partial + b);
    for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(0xffffffffu, t, o);
    if (lane == 0) { *out = t; *counter = 0u; }
  }
}
#define KERNEL(name, T, ...)                                                                \
  extern "C" __global__ void name(const uint4* x, const uint4* y, long long nv, float* p,   \
                                  unsigned* c, float* o, const int* t) {                   \
    dot<T, __VA_ARGS__>(x, y, nv, p, c, o, t);                                              \
  }
#define KERNELS(tag, T)                                       \
  KERNEL(dot_##tag, T, 4, true)                               \
  KERNEL(dot8_##tag, T, 8, true)                              \
  KERNEL(chunk_##tag, T, 4, true, true)                       \
  KERNEL(table_##tag, T, 4, true, true, true)                 \
  KERNEL(part_##tag, T, 4, false)                             \
  KERNEL(pdl_dot_##tag, T, 4, true, false, false, true)       \
  KERNEL(pdl_chunk_##tag, T, 4, true, true, false, true)      \
  KERNEL(pdl_table_##tag, T, 4, true, true, true, true)
KERNELS(f32, float)
KERNELS(f16, __half)
"""
GRIDS = (264, 528, 1056)
THREADS = (256, 512)
CALLS = 20
VARIANTS = ("dot", "dot8", "chunk", "table", "part", "pdl_dot", "pdl_chunk", "pdl_table")
"""Kernels of SOURCE timed at every grid and block size (the pdl_ ones through
cuLaunchKernelEx with programmatic stream serialization)."""


def _table(grid: int, nv: int):
    """The CTAs' row indices, then one 12-column row each whose columns 5 and 6 are its chunk."""
    per = -(-nv // grid)
    rows = np.zeros((grid, 12), np.int32)
    rows[:, 5] = np.arange(grid) * per
    rows[:, 6] = np.minimum(nv, (np.arange(grid) + 1) * per)
    return cupy.asarray(np.concatenate([np.arange(grid, dtype=np.int32), rows.ravel()]))


def _pdl_launcher(kernel, grid: int, threads: int, args):
    """A call launching ``kernel`` (a CuPy RawKernel) with programmatic stream serialization;
    ``args``: device pointers and integers, 8 bytes each."""
    buf = np.array([int(a) for a in args], np.uint64)
    ptrs = np.array([buf.ctypes.data + 8 * i for i in range(len(args))], np.uint64)
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    config.attrs, config.numAttrs = [attr], 1
    func = driver.CUfunction(kernel.kernel.ptr)

    def call():
        config.hStream = driver.CUstream(cupy.cuda.get_current_stream().ptr)
        (err,) = driver.cuLaunchKernelEx(config, func, int(ptrs.ctypes.data), 0)
        assert err == driver.CUresult.CUDA_SUCCESS, err
    call.keep = (buf, ptrs)
    return call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args(argv)
    import torch  # the peer

    module = cupy.RawModule(code=SOURCE, options=("-std=c++17",))
    stream = cupy.cuda.Stream(non_blocking=True)
    for dtype, tag in (("float32", "f32"), ("float16", "f16")):
        rs = cupy.random.RandomState(0)
        x = rs.standard_normal(args.n, dtype=cupy.float32).astype(dtype)
        y = rs.standard_normal(args.n, dtype=cupy.float32).astype(dtype)
        nbytes = x.nbytes + y.nbytes
        ref = float(cupy.dot(x.astype(cupy.float64), y.astype(cupy.float64)))
        src = cupy.empty(nbytes // 4, cupy.float32)
        dst = cupy.empty_like(src)
        rows = {"copy (read + write)": device_time_us(lambda: cupy.copyto(dst, src), stream,
                                                      CALLS, args.reps),
                "skcontract.einsum": device_time_us(lambda: skcontract.einsum("i,i->", x, y),
                                                    stream, CALLS, args.reps)}
        tx, ty = torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")
        rows["torch.dot"] = torch_graph_us(lambda: torch.dot(tx, ty), CALLS, args.reps)
        nv = args.n * x.itemsize // 16
        partial = cupy.empty(max(GRIDS), cupy.float32)
        counter = cupy.zeros(1, cupy.uint32)
        out = cupy.empty(1, cupy.float32)
        errors = []
        for name in args.variants.split(","):
            kernel = module.get_function(f"{name}_{tag}")
            for threads in THREADS:
                for grid in GRIDS:
                    table = _table(grid, nv)
                    kargs = (x.data.ptr, y.data.ptr, nv, partial.data.ptr, counter.data.ptr,
                             out.data.ptr, table.data.ptr)
                    if name.startswith("pdl_"):
                        call = _pdl_launcher(kernel, grid, threads, kargs)
                    else:
                        def call(kernel=kernel, grid=grid, threads=threads, table=table):
                            kernel((grid,), (threads,), (x, y, cupy.int64(nv), partial,
                                                         counter, out, table))
                    rows[f"{name} grid={grid} threads={threads}"] = device_time_us(
                        call, stream, CALLS, args.reps)
                    if name != "part":
                        out.fill(float("nan"))
                        with stream:
                            call()
                        stream.synchronize()
                        errors.append(abs(float(out[0]) - ref) / max(1.0, abs(ref)))
        print(f"{dtype}: {args.n} elements, {nbytes / 1e6:.0f} MB read; floor kernels' worst "
              f"rel. error {max(errors, default=0.0):.1e}", flush=True)
        for name, us in rows.items():
            moved = 2 * nbytes if name.startswith("copy") else nbytes
            print(f"  {name:34} {us:8.2f} us {moved / us / 1e3:6.0f} GB/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
