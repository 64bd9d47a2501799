"""Per-(device, stream) pools of fixup memory.

Three buffers per (device, stream, accumulator dtype), grown on demand and kept:

* ``workspace``: partial tiles of the deterministic / arrival protocols (never needs init);
* ``staging``  : partial sums of the atomic protocol, allocated zeroed once and kept zeroed
  by the kernel (the last arrival re-zeroes its slot);
* ``locks``    : uint32 locks / arrival counters, allocated zeroed once; every protocol
  resets them to 0 before the launch ends, so no per-launch initialisation.

A pool is never shared across streams or devices: two launches in flight on different
streams must not share locks or slots (docs/design/stream_k.md).
If a kernel is aborted (a trap in a debug build) call :func:`reset` to re-zero.
"""
from __future__ import annotations

import threading

_POOLS: dict = {}
_LOCK = threading.Lock()


class Pool:
    """The three buffers of one (device, stream, accumulator dtype); ``ptrs`` holds their
    device addresses (updated when a buffer grows), what a launch passes."""

    __slots__ = ("workspace", "staging", "locks", "ptrs")

    def __init__(self):
        self.workspace = None
        self.staging = None
        self.locks = None
        self.ptrs = (0, 0, 0)


_GENERATION = [0]  # bumped by reset(): pools a caller kept are no longer valid


def generation() -> int:
    """Changes when :func:`reset` forgets the pools (a caller holding a Pool re-gets it)."""
    return _GENERATION[0]


def _grow(buf, n, dtype, zeroed):
    import cupy  # optional dependency: only the GPU path needs CuPy

    if buf is not None and buf.size >= n:
        return buf
    n = max(n, 1)
    if buf is not None:
        n = max(n, 2 * buf.size)  # amortise growth
    return cupy.zeros(n, dtype=dtype) if zeroed else cupy.empty(n, dtype=dtype)


def get(device_id: int, stream, accumulator_dtype: str, *, workspace_elems: int,
        staging_elems: int, num_locks: int):
    """Buffers big enough for one launch on ``stream``; the same objects on later calls when
    they fit. A buffer grows on ``stream`` itself, so its zeroing is ordered before the
    launch that needs it (a non-blocking stream does not wait for the default stream)."""
    key = (device_id, stream.ptr, accumulator_dtype)
    pool = _POOLS.get(key)
    if pool is None:
        with _LOCK:
            pool = _POOLS.setdefault(key, Pool())
    if _fits(pool.workspace, workspace_elems) and _fits(pool.staging, staging_elems) and \
            _fits(pool.locks, num_locks):
        return pool
    with stream:
        if not _fits(pool.workspace, workspace_elems):
            pool.workspace = _grow(pool.workspace, workspace_elems, accumulator_dtype, False)
        if not _fits(pool.staging, staging_elems):
            # Growing replaces the buffer: the old one was zero, the new one starts zero.
            pool.staging = _grow(pool.staging, staging_elems, accumulator_dtype, True)
        if not _fits(pool.locks, num_locks):
            pool.locks = _grow(pool.locks, num_locks, "uint32", True)
        pool.ptrs = (pool.workspace.data.ptr, pool.staging.data.ptr, pool.locks.data.ptr)
    return pool


def _fits(buf, n: int) -> bool:
    return buf is not None and buf.size >= n


def held_bytes() -> int:
    """The bytes every pool holds now (what fixup memory the process keeps)."""
    return sum(b.nbytes for p in list(_POOLS.values())
               for b in (p.workspace, p.staging, p.locks) if b is not None)


def reset() -> None:
    """Forget every pool (after an aborted launch left locks or staging dirty)."""
    with _LOCK:
        _POOLS.clear()
        _GENERATION[0] += 1
