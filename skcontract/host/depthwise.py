"""The depthwise convolution on the CPU (one filter a channel: groups == C == K, as in
MobileNet, EfficientNet and ConvNeXt): ``c/depthwise.c`` over the (image, channel) planes,
the planes split evenly over the CPU's threads.

As an implicit GEMM a depthwise layer is one product a channel with one output column, and
as BLAS products over shifted copies (:mod:`skcontract.ops.conv2d_cpu`) it spends its time
in NumPy passes and calls; the direct loop reads each plane once into cache and adds its
R x S taps there, in registers, at about memory speed. float32 sums in float32 (as torch's
CPU convolution does) and float64 in float64; other dtypes take the NumPy form.

>>> import numpy as np
>>> from skcontract.ops.conv2d import conv_geometry
>>> x = np.arange(16.0).reshape(1, 1, 4, 4); w = np.ones((1, 1, 3, 3))
>>> out = depthwise_cpu(x, w, conv_geometry(x.shape, w.shape, padding=1))
>>> out is None or out[0, 0, 0].tolist() == [10.0, 18.0, 24.0, 18.0]
True
"""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .cc import load

__all__ = ["depthwise_cpu", "is_depthwise", "host_threads"]

LIBRARY = "depthwise"
KERNELS = {np.dtype(np.float32): "depthwise_f32", np.dtype(np.float64): "depthwise_f64"}
"""The library's kernel for each dtype it sums in (the planes form; ``<name>_lanes`` the
lanes form)."""
VECTOR_BYTES = 64
"""The kernels' vector (c/depthwise.c's VEC_BYTES): the lanes form's channels a block."""
PLANES_BLOCK_VECTORS = 4
"""Vectors a block of the planes form's grid (c/depthwise.c's NB)."""
PLANES_MIN_KEPT = 0.7
"""The share of the planes form's grid kept as output below which the lanes form runs: the
grid computes the taps' reach of columns after each row and whole blocks of vectors, most
of the work on small maps with wide filters, where the lanes form's copies into and out of
its channel-interleaved buffer cost less (docs/benchmarks/log.md, twelfth session)."""
THREAD_MIN_TAPS = 1 << 19
"""Multiply-adds a thread is given at least: a smaller share gains less than handing it to
a thread costs (tens of microseconds)."""
THREADS_ENV = "SKCONTRACT_NUM_THREADS"
"""Caps the threads the CPU kernels use (default: the CPUs this process may run on)."""

_IDX = ctypes.c_ssize_t
_POOL: dict[int, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def is_depthwise(g) -> bool:
    """One filter a channel: groups == C == K (a single-channel convolution included)."""
    return g.groups == g.c == g.k


def host_threads() -> int:
    """The threads the CPU kernels spread over: :data:`THREADS_ENV` where set, else the
    CPUs this process may run on."""
    named = os.environ.get(THREADS_ENV, "").strip()
    if named.isdigit() and int(named) > 0:
        return int(named)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def depthwise_cpu(x: np.ndarray, weight: np.ndarray, g, form: str | None = None
                  ) -> np.ndarray | None:
    """The (N, K, P, Q) depthwise convolution ``g`` (a checked ConvGeometry with
    :func:`is_depthwise`) of the (N, C, H, W) ``x`` (any strides) with the (K, 1, R, S)
    ``weight``, both of one dtype; None where the host has no library for it (no C
    compiler, or a dtype the library does not sum: the caller's NumPy form runs).
    ``form``: "planes" or "lanes" (None: :func:`form_of`)."""
    form = form or form_of(g, x.dtype.itemsize)
    kernel = _kernel(x.dtype, form)
    if kernel is None:
        return None
    itemsize = x.dtype.itemsize
    if any(s % itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(weight, dtype=x.dtype)
    out = np.empty((g.n, g.k, g.p, g.q), x.dtype)
    if out.size == 0:
        return out
    (sh, sw), (dh, dw) = g.stride, g.dilation
    top, _, left, _ = g.padding
    geometry = (g.c, g.h, g.w, g.p, g.q, g.r, g.s, sh, sw, dh, dw, top, left,
                *(s // itemsize for s in x.strides))
    scratch = _scratch_elems(g, itemsize, form)
    units = g.n * (g.c if form == "planes" else -(-g.c // (VECTOR_BYTES // itemsize)))
    ranges = _ranges(units, _threads(g.n * g.c * g.p * g.q * g.r * g.s))

    def run(first: int, last: int) -> None:
        buffer = _aligned(scratch, x.dtype)
        kernel(x.ctypes.data, w.ctypes.data, out.ctypes.data, *geometry, first, last,
               buffer.ctypes.data)

    futures = [_pool().submit(run, *span) for span in ranges[1:]]
    run(*ranges[0])
    for f in futures:
        f.result()
    return out


def form_of(g, itemsize: int = 4) -> str:
    """"lanes" where the planes form would keep less than :data:`PLANES_MIN_KEPT` of the
    grid it computes, else "planes"."""
    width = g.q + (g.s - 1) * g.dilation[1] // g.stride[1]
    block = PLANES_BLOCK_VECTORS * VECTOR_BYTES // itemsize
    computed = -(-g.p * width // block) * block
    return "lanes" if g.p * g.q < PLANES_MIN_KEPT * computed else "planes"


def _kernel(dtype, form: str):
    """The library's function for ``dtype`` in ``form``, its arguments declared; None
    where none."""
    name = KERNELS.get(np.dtype(dtype))
    lib = None if name is None else load(LIBRARY)
    if lib is None:
        return None
    fn = getattr(lib, name if form == "planes" else f"{name}_lanes")
    if fn.argtypes is None:
        fn.argtypes = [ctypes.c_void_p] * 3 + [_IDX] * 19 + [ctypes.c_void_p]
        fn.restype = None
    return fn


def _scratch_elems(g, itemsize: int, form: str) -> int:
    """Elements of one thread's buffer: the planes form's phase planes and grid, the lanes
    form's padded block and weights."""
    lib = load(LIBRARY)
    size = lib.dw_scratch_elems if form == "planes" else lib.dw_lanes_scratch_elems
    size.argtypes, size.restype = [_IDX] * 9, _IDX
    (sh, sw), (dh, dw) = g.stride, g.dilation
    return size(g.p, g.q, g.r, g.s, sh, sw, dh, dw, itemsize)


def _aligned(elems: int, dtype) -> np.ndarray:
    """``elems`` elements of ``dtype`` starting on a :data:`VECTOR_BYTES` boundary."""
    raw = np.empty(elems * np.dtype(dtype).itemsize + VECTOR_BYTES, np.uint8)
    start = -raw.ctypes.data % VECTOR_BYTES
    return raw[start:start + elems * np.dtype(dtype).itemsize].view(dtype)


def _threads(taps: int) -> int:
    """Threads for ``taps`` multiply-adds: each given :data:`THREAD_MIN_TAPS` at least."""
    return max(1, min(host_threads(), taps // THREAD_MIN_TAPS))


def _ranges(planes: int, threads: int) -> list[tuple[int, int]]:
    """``planes`` split into ``threads`` near-equal ranges (the first the caller's)."""
    threads = min(threads, planes)
    bounds = [planes * i // threads for i in range(threads + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _pool() -> ThreadPoolExecutor:
    """This process's worker threads (a forked child makes its own)."""
    pid = os.getpid()
    with _POOL_LOCK:
        if pid not in _POOL:
            _POOL.clear()
            _POOL[pid] = ThreadPoolExecutor(max(1, host_threads() - 1),
                                            thread_name_prefix="skcontract-host")
        return _POOL[pid]
