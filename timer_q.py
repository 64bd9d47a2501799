import cupy, numpy as np
src = r'''
extern "C" __global__ void t(unsigned long long* out, int n) {
  for (int i = 0; i < n; ++i) {
    unsigned long long c, g;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    out[2 * i] = c; out[2 * i + 1] = g;
    for (int j = 0; j < 20; ++j) asm volatile("nanosleep.u32 1;");
  }
}'''
k = cupy.RawKernel(src, "t")
n = 4000
out = cupy.zeros(2 * n, dtype=cupy.uint64)
k((1,), (1,), (out, np.int32(n)))
o = cupy.asnumpy(out).reshape(n, 2).astype(np.int64)
dc, dg = np.diff(o[:, 0]), np.diff(o[:, 1])
print("clock64 deltas: distinct", np.unique(dc)[:12], "median", np.median(dc))
print("globaltimer deltas: distinct", np.unique(dg)[:12], "median", np.median(dg))
print("total clk", o[-1,0]-o[0,0], "ns", o[-1,1]-o[0,1])
