"""Which SM each CTA of a one-CTA-an-SM launch runs on, and the SMs' GPCs (GPU).

    python -m tools.sm_placement [--grids 132,81] [--clusters 2,4,8,16] [--repeats 3]

The persistent kernels map CTA ``c`` to the table's rows of CTA ``c``; which SM runs it is
the hardware's choice, and which SM runs which tile moves a wave's time by up to 35% on
the H200 (docs/benchmarks/log.md, "which SM runs which tile"). This launches a probe
kernel (``tools/cuda/sm_probe.cuh``) with the shared memory of one CTA an SM and prints,
as JSON lines: for each grid, the SM of each CTA and whether repeats agree; for each
cluster size, the SMs of each cluster (clusters never straddle a GPC) and whether repeats
agree; and the GPCs that the clusters imply (SMs that shared a cluster in any launch,
joined: a GPC whose SMs never shared one stays split, so the groups are at most the GPCs).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from skcontract.kernels import jit, nvrtc

PROBE_SOURCE = Path(__file__).with_name("cuda") / "sm_probe.cuh"
ONE_CTA_SMEM = 200 * 1024
"""Dynamic shared memory a probe CTA takes: more than half an H200 SM's 228 KB, so one CTA
an SM, as the Wgmma kernels run."""
THREADS = 384
"""Threads a probe CTA (the 128 x 128 Wgmma kernel's: two consumer warpgroups, a producer)."""
SPIN_CYCLES = 2_000_000
"""Clock cycles each CTA stays resident (about 1 ms): longer than a launch takes to place
every CTA of one wave."""


def compile_probe(arch: str) -> bytes:
    """The probe's cubin for ``arch`` (NVRTC; no GPU needed)."""
    return nvrtc.compile_cubin(PROBE_SOURCE.read_text(), "sm_probe", ["sm_probe"],
                               jit.compile_options(arch)).cubin


def gpc_groups(clusters) -> list[list[int]]:
    """SMs joined when they ran CTAs of one cluster (``clusters``: lists of SMs), sorted."""
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for sms in clusters:
        for sm in sms:
            parent[find(sm)] = find(sms[0])
    groups: dict = {}
    for sm in parent:
        groups.setdefault(find(sm), []).append(sm)
    return sorted(sorted(g) for g in groups.values())


def _launch(function: int, grid: int, cluster: int, out, stream) -> np.ndarray:
    """One probe launch of the CUfunction ``function``; (grid, 3) of SM, cluster index, rank
    in the cluster."""
    from cuda.bindings import driver as cu  # optional dependency: the GPU path's

    spin = np.array([SPIN_CYCLES], np.int64)
    ptr = np.array([out.data.ptr], np.uint64)
    params = np.array([ptr.ctypes.data, spin.ctypes.data], np.uint64)
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = THREADS, 1, 1
    config.sharedMemBytes = ONE_CTA_SMEM
    config.hStream = cu.CUstream(stream.ptr)
    attrs = []
    if cluster > 1:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
        attrs.append(attr)
    config.attrs, config.numAttrs = attrs, len(attrs)
    (err,) = cu.cuLaunchKernelEx(config, function, params.ctypes.data, 0)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"probe launch (grid {grid}, cluster {cluster}): {err}")
    stream.synchronize()
    return out[:3 * grid].get().reshape(grid, 3)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grids", default="132,81")
    p.add_argument("--clusters", default="2,4,8,16")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    import cupy  # optional dependency: this tool runs on the GPU

    dev = cupy.cuda.Device()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sm_probe.cubin"
        path.write_bytes(compile_probe(jit.device_arch(dev.id)))
        function = cupy.RawModule(path=str(path)).get_function("sm_probe")
    function.max_dynamic_shared_size_bytes = ONE_CTA_SMEM
    # a RawKernel holds its CUfunction in .kernel (as jit.get_kernel reads it)
    handle = getattr(function, "kernel", function).ptr
    jit.allow_large_clusters(handle)
    sms = dev.attributes["MultiProcessorCount"]
    grids = [int(g) for g in args.grids.split(",")]
    out = cupy.full(3 * max(grids + [sms]), -1, cupy.int32)
    stream = cupy.cuda.Stream(non_blocking=True)
    for grid in grids:
        runs = [_launch(handle, grid, 1, out, stream)[:, 0].tolist()
                for _ in range(args.repeats)]
        print(json.dumps({"grid": grid, "cluster": 1, "smid": runs[0],
                          "repeats_agree": all(r == runs[0] for r in runs)}), flush=True)
    seen = []
    for cluster in (int(c) for c in args.clusters.split(",")):
        grid = sms // cluster * cluster
        try:
            runs = []
            for _ in range(args.repeats):
                got = _launch(handle, grid, cluster, out, stream)
                members: dict = {}
                for sm, cid, _rank in got.tolist():
                    members.setdefault(cid, []).append(sm)
                runs.append([members[c] for c in sorted(members)])
                seen.extend(members.values())
            print(json.dumps({"grid": grid, "cluster": cluster, "clusters": runs[0],
                              "repeats_agree": all(r == runs[0] for r in runs)}), flush=True)
        except RuntimeError as e:  # a cluster size the device does not launch
            print(json.dumps({"grid": grid, "cluster": cluster, "error": str(e)}), flush=True)
    print(json.dumps({"gpcs": gpc_groups(seen)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
