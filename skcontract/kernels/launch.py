"""Launch a compiled KernelSpec over a Schedule's split table.

:class:`LaunchPlan` is everything fixed for one (problem, layout, schedule): the compiled
kernel, the table and CTA offsets on the device (uploaded once), buffer sizes. ``plan.launch``
binds pointers and launches; that is the whole warm path.
"""
from __future__ import annotations

import numpy as np

from . import workspace
from .jit import CompiledKernel

_REDUCTION_TO_FIXUP = {"deterministic": "deterministic", "atomic": "atomic",
                       "arrival": "aligned", "aligned": "aligned"}

_ACC_NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32}


def fixup_for(schedule) -> str:
    """The kernel fixup a schedule's table needs ('none' when every tile has one split)."""
    tiles = schedule.table[:, 8]  # TILE column
    if len(tiles) == 0 or int(tiles.max()) < 0:
        return "none"
    return _REDUCTION_TO_FIXUP[schedule.reduction]


class LaunchPlan:
    __slots__ = ("kernel", "schedule", "table", "offsets", "grid", "ws_elems", "staging_elems",
                 "num_locks", "acc_np", "device_id")

    def __init__(self, kernel: CompiledKernel, schedule, device_id: int):
        import cupy

        self.kernel = kernel
        self.schedule = schedule
        self.device_id = device_id
        table = np.ascontiguousarray(schedule.table, dtype=np.int32)
        offsets = np.ascontiguousarray(schedule.cta_offsets, dtype=np.int32)
        if table.ndim != 2 or table.shape[1] != 12:
            raise ValueError("split table must be (rows, 12) int32")
        self.table = cupy.asarray(table if len(table) else np.zeros((1, 12), np.int32))
        self.offsets = cupy.asarray(offsets)
        self.grid = int(schedule.grid)
        spec = kernel.spec
        slots = int(table[:, 9].max()) + 1 if len(table) and table[:, 9].max() >= 0 else 0
        tiles = int(table[:, 8].max()) + 1 if len(table) and table[:, 8].max() >= 0 else 0
        slot = spec.bm * spec.bn
        self.ws_elems = slots * slot if spec.fixup in ("deterministic", "aligned") else 0
        self.staging_elems = tiles * slot if spec.fixup == "atomic" else 0
        self.num_locks = tiles
        self.acc_np = _ACC_NP[spec.dtype_acc]
        waits = getattr(schedule, "waits", spec.fixup == "deterministic")
        if waits and self.grid > kernel.occupancy * _sm_count(device_id):
            raise RuntimeError(
                f"co-residency: {self.grid} CTAs but only {kernel.occupancy} x SMs resident "
                f"for {spec.name}; waiting splits could deadlock")

    def launch(self, a_ptr, b_ptr, c_ptr, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta,
               stream) -> None:
        spec = self.kernel.spec
        pool = workspace.get(self.device_id, stream.ptr, spec.dtype_acc,
                             workspace_elems=self.ws_elems, staging_elems=self.staging_elems,
                             num_locks=self.num_locks)
        acc = self.acc_np
        args = (np.uint64(a_ptr), np.uint64(b_ptr), np.uint64(c_ptr), self.table, self.offsets,
                pool.workspace, pool.staging, pool.locks, np.int32(m), np.int32(n), np.int32(k),
                np.int64(lda), np.int64(ldb), np.int64(ldc), np.int64(sa), np.int64(sb),
                np.int64(sc), acc(alpha), acc(beta))
        self.kernel.function((self.grid,), (spec.threads,), args, shared_mem=spec.smem_bytes,
                             stream=stream)


_SMS: dict = {}


def _sm_count(device_id: int) -> int:
    n = _SMS.get(device_id)
    if n is None:
        import cupy
        n = _SMS[device_id] = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
    return n
