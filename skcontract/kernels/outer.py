"""Outer products on the GPU (``cuda/outer.cuh``): an OUTER plan step's launch.

An OUTER step ``C[b, i, j] = x[b, i] * y[b, j]`` reads its operands once and writes C: it is
bound by C's bytes. Through the array library it is a broadcast multiply, whose generic
indexing divides by the shape at every element; :func:`run_outer` writes each row in
16-byte stores where the rows allow. The plan carries an :class:`OuterLaunch` on the step
(:func:`plan_outer`; pure Python) and prints it; the CuPy backend runs it.

>>> OuterLaunch("float32", 1, 4096, 16384).summary()
'outer-product kernel, 1 x 4096 x 16384 float32, 16-byte stores'
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import jit
from .launch import record_direct

HEADER = "outer.cuh"
TYPES = {"float16": "skc::half_t", "float32": "float", "float64": "double"}
"""The dtypes the kernel takes -> its C++ element type."""
VEC_BYTES = 16
"""Bytes of one vector store."""
NAMES = tuple(f"skc::outer<{t}, {v}>" for name, t in TYPES.items()
              for v in (VEC_BYTES // np.dtype(name).itemsize, 1))
"""The kernel's instantiations: each dtype's 16-byte stores, then its element stores."""
MIN_ROW = 64
"""The shortest row the kernel writes: shorter rows (an elementwise product, a batch of
small outer products) stay on the array library, whose broadcast multiply is then as fast."""
MAX_CHUNKS = 2**31 - 1
"""The kernel's (row, chunk) pairs fit a 32-bit index."""
THREADS = 256
"""Threads of a block (OUTER_THREADS)."""
BLOCKS_PER_SM = 8
"""Blocks a launch gives each SM at most (the grid strides over the rest)."""


@dataclass(frozen=True)
class OuterLaunch:
    """The launch of an OUTER step: ``batch`` outer products of ``m`` x ``n`` ``dtype``
    elements. ``schedule`` is None: the kernel has no split table."""

    dtype: str
    batch: int
    m: int
    n: int
    schedule = None

    @property
    def vec(self) -> int:
        """Elements a thread stores at once: a 16-byte vector where the rows are whole
        vectors, else one."""
        per = VEC_BYTES // np.dtype(self.dtype).itemsize
        return per if self.n % per == 0 else 1

    def summary(self, conj: tuple[bool, ...] = ()) -> str:
        """The launch as a plan's row shows it (``conj``, the step's conjugated inputs: the
        step copies them, the kernel is the same)."""
        stores = f"{VEC_BYTES}-byte stores" if self.vec > 1 else "element stores"
        return (f"outer-product kernel, {self.batch} x {self.m} x {self.n} {self.dtype}, "
                f"{stores}")


def plan_outer(dtype: str, batch: int, m: int, n: int) -> OuterLaunch | None:
    """The launch of an outer product of these sizes, or None where the array library
    runs it (another dtype, rows shorter than :data:`MIN_ROW`, too many chunks)."""
    if dtype not in TYPES or n < MIN_ROW or min(batch, m) < 1:
        return None
    launch = OuterLaunch(dtype, batch, m, n)
    if batch * m * (n // launch.vec) > MAX_CHUNKS:
        return None
    return launch


def run_outer(launch: OuterLaunch, x, y):
    """``x[b, i] * y[b, j]`` of the CuPy (batch, m) and (batch, n) arrays (a batch of 1
    broadcast) on ``launch``: a dense (batch, m, n) array; None where the operands are not
    the launch's (another dtype or size: the caller multiplies them)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    if x.dtype != y.dtype or x.dtype.name != launch.dtype or \
            x.shape[-1] != launch.m or y.shape[-1] != launch.n:
        return None
    batch = max(x.shape[0], y.shape[0])
    if batch != launch.batch:
        return None
    out = cupy.empty((batch, launch.m, launch.n), dtype=x.dtype)
    item = x.itemsize
    sx = (x.strides[0] // item if x.shape[0] > 1 else 0, x.strides[1] // item)
    sy = (y.strides[0] // item if y.shape[0] > 1 else 0, y.strides[1] // item)
    vec = launch.vec
    names = NAMES[2 * tuple(TYPES).index(launch.dtype):][:2]
    name = names[0 if vec > 1 else 1]
    fn = jit.get_module(HEADER, NAMES, x.device.id).get_function(name)
    rows = batch * launch.m
    sms = cupy.cuda.Device(x.device.id).attributes["MultiProcessorCount"]
    blocks = min(-(-rows * (launch.n // vec) // THREADS), sms * BLOCKS_PER_SM)
    fn((blocks,), (THREADS,), (x, y, out, np.int32(launch.m), np.int32(launch.n),
                               np.int32(rows), np.int64(sx[0]), np.int64(sx[1]),
                               np.int64(sy[0]), np.int64(sy[1])))
    record_direct(name, blocks)
    return out
