// sm_probe.cuh: where each CTA of a launch runs (tools/sm_placement.py). Thread 0 of every
// CTA writes its SM (%smid), its cluster's index (%clusterid.x) and its rank in the cluster
// (%cluster_ctarank; 0 and the CTA's own index without clusters), then spins `spin` clock
// cycles so that every CTA of the launch is resident at once, as the persistent kernels'
// CTAs are: the placement read is the one a one-wave launch gets.
#pragma once

extern "C" __global__ void sm_probe(int* out, long long spin) {
  if (threadIdx.x == 0) {
    unsigned sm, cluster, rank;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cluster));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    out[3 * blockIdx.x] = (int)sm;
    out[3 * blockIdx.x + 1] = (int)cluster;
    out[3 * blockIdx.x + 2] = (int)rank;
    const long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
  }
}
