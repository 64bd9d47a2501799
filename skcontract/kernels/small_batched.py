"""Many small matrix products on the GPU (``cuda/small_batched.cuh``): a plan step's launch.

A batch of products of at most :data:`MAX_DIM` rows, columns and k (3 x 3 rotations, 8-state
filters, 16 x 16 transfer matrices) is memory-bound, and the GEMM kernels' tiles of 64
rows or more compute mostly padding on it, one product a tile. The small-batched kernel
stages whole products in a CTA's shared memory and computes them there, the operands read
and the products written in coalesced runs. The plan carries a :class:`SmallLaunch` on the
step (:func:`plan_small`; pure Python) and prints it; the CuPy backend runs it
(:func:`run_small`). float32 runs exactly (FFMA), whatever the precision asked.

>>> plan_small("float32", 100000, 3, 3, 3).summary()
'small-batched kernel, 100000 x 3 x 3 x 3 float32, 224 products a CTA'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import jit
from .launch import record_direct

HEADER = "small_batched.cuh"
TYPES = {"float16": ("skc::half_t", "float"), "float32": ("float", "float"),
         "float64": ("double", "double")}
"""The dtypes the kernel takes -> its C++ element and accumulator types."""
COMPLEX_TYPES = {"complex64": ("skc::complex64_t", "skc::complex64_t"),
                 "complex128": ("skc::complex128_t", "skc::complex128_t")}
"""The complex dtypes it is built for (complex.cuh), taken where :data:`SINGLE_COMPLEX`."""
SINGLE_COMPLEX = False
"""Whether the kernel takes complex products (:data:`COMPLEX_TYPES`), of any batch down to
one product. The alternative for a few small complex products is their real form
(skcontract/kernels/embed.py): an embedding, aligned and K-major copies and a tile launch,
each call, about 200-300 us of host time a step on the random circuits' 2 x 2 x 2 products
(docs/benchmarks/log.md, twenty-first session); here one launch. Off until its GPU tests
(tests/gpu/test_small_batched.py's complex cases) and memcheck have run on a device; the
peak model's :data:`skcontract.plan.peak.SMALL_COMPLEX_DTYPES` goes on with it."""
ROW_OUTPUTS = (4, 1)
"""Outputs of a row a thread computes (the kernel's JB), the first that divides n: each k
step then reads one A element and one vector of B for that many multiply-adds."""
BUILT = {**TYPES, **COMPLEX_TYPES}
NAMES = tuple(f"skc::small_batched<{t}, {acc}, {jb}>" for t, acc in BUILT.values()
              for jb in ROW_OUTPUTS)
"""The kernel's instantiations, (dtype, JB) in :data:`TYPES`' then :data:`COMPLEX_TYPES`'
and :data:`ROW_OUTPUTS`' order."""
MAX_DIM = 32
"""The largest rows, columns or k of a product the kernel takes: beyond it the products
reuse enough of their operands for the GEMM kernels' tiles."""
MIN_BATCH = 256
"""The fewest products a launch takes: fewer fill too few CTAs to be worth a kernel of their
own (the GEMM and Dot kernels run them)."""
STAGE_BYTES = 16 * 1024
"""Shared memory a CTA stages products in, at most. A CTA reads, computes and writes its
products one after the other, so that many small CTAs an SM (five at the kernel's 40-48
registers a thread) keep the memory system busier than a few large ones."""
VECTOR_BYTES = 16
"""The kernel's staging vectors (SMALL_VECTOR_BYTES): B's stage starts on a multiple."""
MAX_PER_CTA = 256
"""Products a CTA stages at most (one a thread)."""
THREADS = 256
"""Threads of a CTA (SMALL_THREADS)."""
MAX_GRID = 2**31 - 1
"""CTAs one launch may have."""
MAX_BATCH = 2**31 - 1
"""Products one launch takes at most: the kernel counts them in 32-bit ints."""


@dataclass(frozen=True)
class SmallLaunch:
    """The launch of ``batch`` products of (m x k) by (k x n) ``dtype`` matrices, ``per_cta``
    of them a CTA. ``schedule`` and ``entry`` are None: the kernel has no split table and is
    no catalogue entry."""

    dtype: str
    batch: int
    m: int
    n: int
    k: int
    per_cta: int
    schedule = None
    entry = None

    @property
    def smem_bytes(self) -> int:
        """Shared memory a CTA stages its products in (the kernel's layout)."""
        return _stage_bytes(self.dtype, self.per_cta, self.m, self.n, self.k)

    @property
    def row_outputs(self) -> int:
        """The kernel's JB: outputs of a row a thread computes."""
        return next(jb for jb in ROW_OUTPUTS if self.n % jb == 0)

    @property
    def kernel(self) -> str:
        """The instantiation that runs the launch."""
        return NAMES[tuple(BUILT).index(self.dtype) * len(ROW_OUTPUTS) +
                     ROW_OUTPUTS.index(self.row_outputs)]

    def summary(self, conj: tuple[bool, ...] = ()) -> str:
        """The launch as a plan's row shows it (``conj``, the step's conjugated inputs: the
        step copies them, the kernel is the same)."""
        return (f"small-batched kernel, {self.batch} x {self.m} x {self.n} x {self.k} "
                f"{self.dtype}, {self.per_cta} products a CTA")


def plan_small(dtype: str, batch: int, m: int, n: int, k: int) -> SmallLaunch | None:
    """The launch of a batch of small products, or None where the kernel does not take it
    (another dtype, a dimension over :data:`MAX_DIM`, fewer than :data:`MIN_BATCH` or more
    than :data:`MAX_BATCH` products)."""
    single = SINGLE_COMPLEX and dtype in COMPLEX_TYPES
    least = 1 if single else MIN_BATCH
    if (dtype not in TYPES and not single) or max(m, n, k) > MAX_DIM or min(m, n, k) < 1 or \
            not least <= batch <= MAX_BATCH:
        return None
    # A's stage rounds up to 16 bytes: leaving them out keeps the stage within STAGE_BYTES
    item = np.dtype(dtype).itemsize
    per_product = (m * (k | 1) + k * n) * item
    per_cta = max(1, min(MAX_PER_CTA, (STAGE_BYTES - VECTOR_BYTES) // per_product))
    # every CTA's run of a dense operand starts on 16 bytes (the vector staging) where a
    # CTA holds enough products to round to
    step = math.lcm(*(VECTOR_BYTES // math.gcd(VECTOR_BYTES, rows * cols * item)
                      for rows, cols in ((m, k), (k, n))))
    if per_cta >= step:
        per_cta -= per_cta % step
    if -(-batch // per_cta) > MAX_GRID:
        return None
    return SmallLaunch(dtype, batch, m, n, k, per_cta)


def _stage_bytes(dtype: str, per_cta: int, m: int, n: int, k: int) -> int:
    """Shared memory of the kernel's stage of ``per_cta`` products: A's rows ``k | 1``
    elements apart (an odd stride: no two of a warp's rows share banks), B's stage from the
    next 16 bytes."""
    item = np.dtype(dtype).itemsize
    a_bytes = -(-per_cta * m * (k | 1) * item // VECTOR_BYTES) * VECTOR_BYTES
    return a_bytes + per_cta * k * n * item


def _matrices(x, rows: int, cols: int):
    """The (batch, row, column) element strides of the CuPy array ``x`` (2-D: one matrix
    for every product, a batch stride of 0), or None where it is not (batch?, rows, cols)."""
    if x.ndim not in (2, 3) or x.shape[-2:] != (rows, cols):
        return None
    strides = [s // x.itemsize for s in x.strides]
    return (0 if x.ndim == 2 or x.shape[0] == 1 else strides[0]), strides[-2], strides[-1]


def run_small(launch: SmallLaunch, x, y):
    """The (batch, m, n) products of the CuPy (batch, m, k) and (batch, k, n) arrays (a 2-D
    or single-matrix operand repeated over the batch) on ``launch``; None where the
    operands are not the launch's (another dtype or size: the caller runs them)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    sa = _matrices(x, launch.m, launch.k)
    sb = _matrices(y, launch.k, launch.n)
    batches = (x.shape[0] if x.ndim == 3 else 1, y.shape[0] if y.ndim == 3 else 1)
    batch = max(batches)
    if sa is None or sb is None or x.dtype != y.dtype or x.dtype.name != launch.dtype or \
            batch != launch.batch or any(b not in (1, batch) for b in batches):
        return None
    out = cupy.empty((batch, launch.m, launch.n), dtype=x.dtype)
    name = launch.kernel
    fn = jit.get_module(HEADER, NAMES, x.device.id).get_function(name)
    blocks = -(-batch // launch.per_cta)
    fn((blocks,), (THREADS,),
       (x, y, out, np.int32(batch), np.int32(launch.m), np.int32(launch.n),
        np.int32(launch.k), *map(np.int64, sa), *map(np.int64, sb),
        np.int32(launch.per_cta)), shared_mem=launch.smem_bytes)
    record_direct(name, blocks)
    return out
