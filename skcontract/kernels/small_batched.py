"""Many small matrix products on the GPU (``cuda/small_batched.cuh``): a plan step's launch.

A batch of products of at most :data:`MAX_DIM` rows, columns and k (3 x 3 rotations, 8-state
filters, 16 x 16 transfer matrices) is memory-bound, and the GEMM kernels' tiles of 64
rows or more compute mostly padding on it, one product a tile. The small-batched kernel
stages whole products in a CTA's shared memory and computes them there, the operands read
and the products written in coalesced runs. The plan carries a :class:`SmallLaunch` on the
step (:func:`plan_small`; pure Python) and prints it; the CuPy backend runs it
(:func:`run_small`). float32 runs exactly (FFMA), whatever the precision asked.

A tall product (M rows of at most :data:`MAX_DIM` columns and K, one B: a tensor network's
bond-2 contractions of 2^22 x 8 x 8) is such a batch too: A's rows taken :data:`FOLD_ROWS`
at a time, each block a product with the one B (:func:`plan_folded`). The GEMM kernels'
tiles of 64 columns and 32 k would compute mostly padding on it.

>>> plan_small("float32", 100000, 3, 3, 3).summary()
'small-batched kernel, 100000 x 3 x 3 x 3 float32, 224 products a CTA'
>>> SmallLaunch("float32", 131072, 32, 8, 8, 13, shared_b=True, folded=True).summary()
'small-batched kernel, 131072 x 32 x 8 x 8 float32 (4194304 rows folded, one B), 13 products a CTA'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import jit
from .launch import Binding, DirectBound

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
(docs/benchmarks/log.md); here one launch. Off until its GPU tests and memcheck have run on
the kernel as it is now (tools/device_cliffs.sh's ``smallcomplex`` step); the peak model's
:data:`skcontract.plan.peak.SMALL_COMPLEX_DTYPES` goes on and off with it."""
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
FOLD = False
"""Whether tall products fold into batches of small ones (:func:`plan_folded`). Off until
the folded launches' GPU tests (tests/gpu/test_small_batched.py's ``folding`` cases) and
memcheck have run on a device (tools/device_cliffs.sh's ``fold`` step); the peak model's
:data:`skcontract.plan.peak.SMALL_FOLDS` goes on and off with it."""
FOLD_ROWS = MAX_DIM
"""Rows of A a folded product takes at most (:func:`plan_folded`): the most the kernel's
products have; fewer where they do not divide M."""
FOLD_MIN_ROWS = 8
"""Rows of A a folded product takes at least: fewer would stage a little of A for each
product's multiply-adds and leave a tall product to the GEMM kernels."""


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
    shared_b: bool = False
    """B is one matrix for every product (a 2-D B, or a batch stride of 0): a CTA stages it
    once. A launch without it stages B for each product, whatever B's batch stride."""
    folded: bool = False
    """The launch is a tall product's (:func:`plan_folded`): A's (batch * m) x k rows, m at a
    time, by the one (k x n) B."""
    schedule = None
    entry = None

    @property
    def smem_bytes(self) -> int:
        """Shared memory a CTA stages its products in (the kernel's layout)."""
        return _stage_bytes(self.dtype, self.per_cta, self.m, self.n, self.k, self.shared_b)

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
        shape = f"{self.batch} x {self.m} x {self.n} x {self.k} {self.dtype}"
        if self.folded:
            shape += f" ({self.batch * self.m} rows folded, one B)"
        elif self.shared_b:
            shape += " (one B)"
        return f"small-batched kernel, {shape}, {self.per_cta} products a CTA"


def plan_small(dtype: str, batch: int, m: int, n: int, k: int,
               shared_b: bool = False) -> SmallLaunch | None:
    """The launch of a batch of small products (``shared_b``: of one B, see
    :attr:`SmallLaunch.shared_b`), or None where the kernel does not take it (another
    dtype, a dimension over :data:`MAX_DIM`, fewer than :data:`MIN_BATCH` or more than
    :data:`MAX_BATCH` products)."""
    single = SINGLE_COMPLEX and dtype in COMPLEX_TYPES
    least = 1 if single else MIN_BATCH
    if (dtype not in TYPES and not single) or max(m, n, k) > MAX_DIM or min(m, n, k) < 1 or \
            not least <= batch <= MAX_BATCH:
        return None
    # A's stage rounds up to 16 bytes: leaving them out keeps the stage within STAGE_BYTES
    item = np.dtype(dtype).itemsize
    per_product = (m * (k | 1) + (0 if shared_b else k * n)) * item
    room = STAGE_BYTES - VECTOR_BYTES - (k * n * item if shared_b else 0)
    per_cta = max(1, min(MAX_PER_CTA, room // per_product))
    # every CTA's run of a dense operand starts on 16 bytes (the vector staging) where a
    # CTA holds enough products to round to
    runs = ((m, k),) if shared_b else ((m, k), (k, n))
    step = math.lcm(*(VECTOR_BYTES // math.gcd(VECTOR_BYTES, rows * cols * item)
                      for rows, cols in runs))
    if per_cta >= step:
        per_cta -= per_cta % step
    if -(-batch // per_cta) > MAX_GRID:
        return None
    return SmallLaunch(dtype, batch, m, n, k, per_cta, shared_b)


def plan_folded(dtype: str, m: int, n: int, k: int) -> SmallLaunch | None:
    """The launch of a tall (m x k) by (k x n) product: A's rows
    :data:`FOLD_ROWS` (or the most from :data:`FOLD_MIN_ROWS` that divide ``m``) at a time,
    a batch of products with the one B; None where :data:`FOLD` is off, n or k exceeds
    :data:`MAX_DIM`, no such count of rows divides ``m``, or the kernel takes no batch of
    that many (:func:`plan_small`)."""
    if not FOLD or max(n, k) > MAX_DIM or m <= FOLD_ROWS:
        return None
    rows = next((r for r in range(FOLD_ROWS, FOLD_MIN_ROWS - 1, -1) if m % r == 0), None)
    launch = None if rows is None else plan_small(dtype, m // rows, rows, n, k, shared_b=True)
    return None if launch is None else replace(launch, folded=True)


def _stage_bytes(dtype: str, per_cta: int, m: int, n: int, k: int,
                 shared_b: bool = False) -> int:
    """Shared memory of the kernel's stage of ``per_cta`` products: A's rows ``k | 1``
    elements apart (an odd stride: no two of a warp's rows share banks), B's stage (one
    matrix where ``shared_b``) from the next 16 bytes."""
    item = np.dtype(dtype).itemsize
    a_bytes = -(-per_cta * m * (k | 1) * item // VECTOR_BYTES) * VECTOR_BYTES
    return a_bytes + (1 if shared_b else per_cta) * k * n * item


def _matrices(x, rows: int, cols: int):
    """The (batch, row, column) element strides of the CuPy array ``x`` (2-D: one matrix
    for every product, a batch stride of 0), or None where it is not (batch?, rows, cols)."""
    if x.ndim not in (2, 3) or x.shape[-2:] != (rows, cols):
        return None
    strides = [s // x.itemsize for s in x.strides]
    return (0 if x.ndim == 2 or x.shape[0] == 1 else strides[0]), strides[-2], strides[-1]


def run_small(launch: SmallLaunch, x, y):
    """The (batch, m, n) products of the CuPy (batch, m, k) and (batch, k, n) arrays (a 2-D
    or single-matrix operand repeated over the batch; of two 2-D ones, the (m, n) product,
    as matmul's) on ``launch``; a folded launch's, of (M, k) by (k, n) arrays, (M, n). None
    where the operands are not the launch's (:func:`bind_small`: the caller runs them)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    binding = bind_small(launch, x, y)
    return None if binding is None else binding(x, y, cupy.cuda.get_current_stream())


def bind_small(launch: SmallLaunch, x, y) -> Binding | None:
    """``launch`` bound to operands laid out as the CuPy arrays ``x`` and ``y`` (shapes,
    strides, dtype): a :class:`~.launch.Binding` that allocates the result (the shape
    :func:`run_small` gives) and launches on the operands' addresses, for these operands
    and any laid out alike. None where they are not the launch's (another dtype or size, a
    batch of B where the launch stages one)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    # the result's shape where it is matmul's, not the kernel's (batch, m, n)
    shape = (launch.m, launch.n) if x.ndim == y.ndim == 2 else None
    if launch.folded:
        shape = x.shape[:-1] + (launch.n,)
        x = _fold(x, launch.m)
        if x is None or (y.ndim == 3 and y.shape[0] != 1):  # one B, or matmul's shape
            return None                                       # is not (M, n)
    sa = _matrices(x, launch.m, launch.k)
    sb = _matrices(y, launch.k, launch.n)
    batches = (x.shape[0] if x.ndim == 3 else 1, y.shape[0] if y.ndim == 3 else 1)
    batch = max(batches)
    if sa is None or sb is None or x.dtype != y.dtype or x.dtype.name != launch.dtype or \
            batch != launch.batch or any(b not in (1, batch) for b in batches) or \
            (launch.shared_b and sb[0] != 0):
        return None
    name = launch.kernel
    device = x.device.id
    function = jit.get_module(HEADER, NAMES, device).get_function(name)
    bound = DirectBound(jit.function_pointer(function, device), name,
                        -(-batch // launch.per_cta), THREADS, launch.smem_bytes,
                        kernel_arguments(launch, sa, sb), device)
    return Binding(bound, False, shape or (batch, launch.m, launch.n), x.dtype, cupy.empty)


def kernel_arguments(launch: SmallLaunch, sa, sb) -> tuple:
    """The kernel's arguments after its three pointers, typed as its signature reads them:
    the problem, A's and B's (batch, row, column) element strides ``sa`` and ``sb``, the
    products a CTA stages and B's stage stride (0: staged once)."""
    return (np.int32(launch.batch), np.int32(launch.m), np.int32(launch.n),
            np.int32(launch.k), *map(np.int64, sa), *map(np.int64, sb),
            np.int32(launch.per_cta), np.int32(0 if launch.shared_b else launch.k * launch.n))


def _fold(x, rows: int):
    """The (M, k) CuPy array ``x`` (or a batch of one such) as (M / rows, rows, k) (a view:
    it splits an axis); None where it is no such array."""
    if x.ndim == 3 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 2 or x.shape[0] % rows:
        return None
    return x.reshape(x.shape[0] // rows, rows, x.shape[1])
