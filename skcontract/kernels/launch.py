"""Launch a compiled KernelSpec over a Schedule's split table.

:class:`LaunchPlan` is everything fixed for one (problem, layout, schedule): the compiled
kernel, the table and CTA offsets on the device (uploaded once), buffer sizes. ``plan.launch``
binds pointers and launches; that is the whole warm path. The plan launches the schedule it
is given and nothing else; :func:`record_launches` lets a caller see what ran.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from ..schedule.table import NUM_COLUMNS
from . import workspace
from .jit import CompiledKernel

_ACC_NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32}
_RECORDERS: list[list] = []
_SMS: dict = {}


class Launch(NamedTuple):
    """What one launch ran (see :func:`record_launches`)."""

    kernel: str
    grid: int
    tile: tuple
    mode: str
    reduction: str
    digest: str


@contextmanager
def record_launches():
    """Collect a :class:`Launch` for every kernel launched inside the ``with`` block.

    >>> with record_launches() as launches:
    ...     pass
    >>> launches
    []
    """
    log: list = []
    _RECORDERS.append(log)
    try:
        yield log
    finally:
        _RECORDERS.remove(log)


class LaunchPlan:
    __slots__ = ("kernel", "schedule", "table", "offsets", "grid", "ws_elems", "staging_elems",
                 "num_locks", "acc_np", "device_id", "tile_order")

    def __init__(self, kernel: CompiledKernel, schedule, device_id: int, stream=None):
        import cupy  # optional dependency: only the GPU path needs CuPy

        spec = kernel.spec
        if spec.protocol != schedule.protocol:
            raise ValueError(f"kernel {spec.name} runs the {spec.protocol!r} protocol; the "
                             f"schedule needs {schedule.protocol!r}")
        if tuple(schedule.tile) != (spec.bm, spec.bn, spec.bk):
            raise ValueError(f"kernel {spec.name} has tile {(spec.bm, spec.bn, spec.bk)}; the "
                             f"schedule's is {tuple(schedule.tile)}")
        self.kernel, self.schedule, self.device_id = kernel, schedule, device_id
        table = schedule.table if len(schedule.table) else np.zeros((1, NUM_COLUMNS), np.int32)
        # uploaded once, then read by launches on any stream: wait for the copies to land
        # (unless the stream is being captured, where the copy is ordered in the graph)
        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        with stream:
            self.table = cupy.asarray(table)
            self.offsets = cupy.asarray(schedule.cta_offsets)
        if not stream.is_capturing():
            stream.synchronize()
        self.grid = int(schedule.grid)
        self.tile_order = np.int32(schedule.tile_order)
        slot = spec.slot_elems
        self.ws_elems = schedule.workspace_slots * slot
        self.staging_elems = schedule.staging_slots * slot
        self.num_locks = schedule.num_locks
        self.acc_np = _ACC_NP[spec.dtype_acc]
        resident = kernel.occupancy * _sm_count(device_id)
        if schedule.waits and self.grid > resident:
            raise RuntimeError(
                f"co-residency: {self.grid} CTAs but only {kernel.occupancy} x SMs resident "
                f"for {spec.name}; waiting splits could deadlock")

    def launch(self, a_ptr, b_ptr, c_ptr, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta,
               stream) -> None:
        spec = self.kernel.spec
        pool = workspace.get(self.device_id, stream, spec.dtype_acc,
                             workspace_elems=self.ws_elems, staging_elems=self.staging_elems,
                             num_locks=self.num_locks)
        acc = self.acc_np
        args = (np.uint64(a_ptr), np.uint64(b_ptr), np.uint64(c_ptr), self.table, self.offsets,
                pool.workspace, pool.staging, pool.locks, np.int32(m), np.int32(n), np.int32(k),
                self.tile_order, np.int64(lda), np.int64(ldb), np.int64(ldc), np.int64(sa),
                np.int64(sb), np.int64(sc), acc(alpha), acc(beta))
        self.kernel.function((self.grid,), (spec.threads,), args, shared_mem=spec.smem_bytes,
                             stream=stream)
        if _RECORDERS:
            s = self.schedule
            rec = Launch(spec.name, self.grid, tuple(s.tile), str(s.mode), str(s.reduction),
                         s.digest())
            for log in _RECORDERS:
                log.append(rec)


def _sm_count(device_id: int) -> int:
    n = _SMS.get(device_id)
    if n is None:
        import cupy  # optional dependency: only the GPU path needs CuPy
        n = _SMS[device_id] = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
    return n
