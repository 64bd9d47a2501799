"""Running a host kernel over units of work on the CPU's threads: the units split into
near-equal ranges, one a thread, the caller's thread taking the first (ctypes releases the
GIL for the call, so the ranges run at once), each thread with a scratch buffer of its own.

>>> ranges(10, 3)
[(0, 3), (3, 6), (6, 10)]
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

__all__ = ["host_threads", "threads_for", "ranges", "run_split", "aligned", "VECTOR_BYTES",
           "MAX_SCRATCH_BYTES"]

THREAD_MIN_TAPS = 1 << 19
"""Multiply-adds a thread is given at least: a smaller share gains less than handing it to
a thread costs (tens of microseconds)."""
THREADS_ENV = "SKCONTRACT_NUM_THREADS"
"""Caps the threads the CPU kernels use (default: ``OMP_NUM_THREADS`` where set, as a
process that caps OpenMP's and BLAS's threads expects of a library; else the CPUs this
process may run on)."""
OMP_ENV = "OMP_NUM_THREADS"
VECTOR_BYTES = 64
"""The kernels' vector (c/conv.c's VEC_BYTES): buffers start on its boundary."""
MAX_SCRATCH_BYTES = 16 << 20
"""A thread's buffer at most (the NumPy form's chunk, ``conv2d_cpu.CHUNK_BYTES``): a layer
whose planes need more (one huge image) takes the NumPy form, whose chunks are bounded."""

_POOL: dict[str, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads: a lock held by one of them at the
    fork would never be released, and the pool's threads are gone."""
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    _POOL.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def host_threads() -> int:
    """The threads the CPU kernels spread over: :data:`THREADS_ENV` where set, else
    ``OMP_NUM_THREADS`` (its first number, a list's outer level), else the CPUs this process
    may run on."""
    for name in (THREADS_ENV, OMP_ENV):
        named = os.environ.get(name, "").split(",")[0].strip()
        if named.isdigit() and int(named) > 0:
            return int(named)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ranges(units: int, threads: int) -> list[tuple[int, int]]:
    """``units`` split into ``threads`` near-equal ranges (at most one a unit)."""
    threads = max(1, min(threads, units))
    bounds = [units * i // threads for i in range(threads + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def threads_for(units: int, taps: int) -> int:
    """The threads ``units`` of work of ``taps`` multiply-adds in all run on: each given
    :data:`THREAD_MIN_TAPS` at least, at most one a unit."""
    return max(1, min(host_threads(), taps // THREAD_MIN_TAPS, units))


def run_split(run: Callable[[int, int], None], units: int, taps: int) -> None:
    """``run(first, last)`` over ``units`` split across :func:`threads_for` threads, the
    first range on the calling thread (and any range no thread can take: at interpreter
    shutdown). An exception in any range is raised here, after all have ended."""
    spans = ranges(units, threads_for(units, taps))
    mine, futures = [spans[0]], []
    for span in spans[1:]:
        try:
            futures.append(_pool().submit(run, *span))
        except RuntimeError:  # the interpreter is shutting down: no thread starts now
            mine.append(span)
    try:
        for span in mine:
            run(*span)
    finally:
        for f in futures:
            f.exception()  # wait for every range before the buffers go
    for f in futures:
        f.result()


def aligned(elems: int, dtype) -> np.ndarray:
    """``elems`` elements of ``dtype`` starting on a :data:`VECTOR_BYTES` boundary."""
    size = elems * np.dtype(dtype).itemsize
    raw = np.empty(size + VECTOR_BYTES, np.uint8)
    start = -raw.ctypes.data % VECTOR_BYTES
    return raw[start:start + size].view(dtype)


def _pool() -> ThreadPoolExecutor:
    """This process's worker threads (a forked child makes its own)."""
    with _POOL_LOCK:
        if "pool" not in _POOL:
            _POOL["pool"] = ThreadPoolExecutor(max(1, host_threads() - 1),
                                               thread_name_prefix="skcontract-host")
        return _POOL["pool"]
