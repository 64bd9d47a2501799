"""Depthwise convolutions of 16-bit channels-last data on tensor cores
(``cuda/depthwise_mma.cuh``), the direct launch :mod:`.depthwise` plans where it takes one.

A filter row of one channel is a GEMM of 16 output rows by 8 output columns over 16 input
columns, its B the banded (Toeplitz) matrix of the row's taps: one mma.sync m16n8k16 makes
128 outputs of a filter row (two at step 2: the input's columns staged split by parity, a
GEMM of each parity's taps). A CTA takes a tile of :data:`ROWS` x :data:`COLS` output pixels
of :data:`CHANNELS` (by step), stages its input window in shared memory channel-major for
ldmatrix, and writes each output pixel's channels as 16-byte vectors. Pure Python: the plan
is made anywhere.

>>> from skcontract.ops.conv2d import conv_geometry
>>> g = conv_geometry((64, 240, 28, 28), (240, 1, 5, 5), padding=2, groups=240)
>>> takes(g, "float16"), takes(g, "float32"), tiles(g), smem_bytes(g)
(True, False, 1920, 26400)
"""
from __future__ import annotations

from .catalogue import CXX_TYPES

HEADER = "depthwise_mma.cuh"
TYPES = ("float16", "bfloat16")
"""The dtypes of the tensor-core kernel (mma.sync m16n8k16 with fp32 accumulators)."""
STEPS = (1, 2)
"""The steps (the same both ways) the tensor-core kernel has instantiations for."""
NAMES = tuple(f"skc::depthwise_mma<{CXX_TYPES[d][0]}, {step}>" for d in TYPES for step in STEPS)
"""The tensor-core kernel's instantiations, dtype-major in :data:`TYPES`' order, then
:data:`STEPS`'."""
MAX_TAPS = 9
"""The widest (and tallest) filter the tensor-core kernel takes: the banded B of a filter
row holds 8 + S - 1 of the mma's 16 input columns."""
ROWS, COLS = 16, 32
"""Output rows and columns of a tile of the tensor-core kernel (DWMMA_ROWS, DWMMA_COLS):
one CTA a tile."""
CHANNELS = {1: 16, 2: 8}
"""A tile's channels by step (DwMma::CH): 32 bytes of a pixel at unit step; 8 at step 2,
whose input window is twice as wide and tall."""
PITCH = 40
"""Columns of the tensor-core kernel's shared planes (DWMMA_PITCH)."""
SMEM_LIMIT = 48 * 1024
"""Dynamic shared memory a launch takes without an opt-in attribute: step 2's window of
filters of 9 rows would need more (it runs the square kernel's way)."""
THREADS = 256
"""Threads of a tensor-core kernel's CTA (DWMMA_THREADS)."""
PLANNED_STEPS = (1,)
"""The steps the planner runs on the tensor-core kernel: at step 2 the square kernel was
faster on both layers measured (H100, docs/benchmarks/log.md, eighteenth session)."""
MIN_PLANNED_TAPS = 7
"""The narrowest filter the planner runs on the tensor-core kernel: the square kernel was
faster at 3 x 3 and 5 x 5, this one at 7 x 7 (same measurements)."""
MIN_TILE_USE = 0.25
"""The least share of its tiles' 16 x 32 pixels an output must fill to be planned on the
tensor-core kernel (a 7 x 7 image fills a tenth, and ran 6x slower than the square
kernel)."""
MAX_GRID = 2**31 - 1
"""CTAs one launch of the tensor-core kernel may have (a one-dimensional grid)."""


def step_of(g) -> int:
    """Convolution ``g``'s step (the same both ways), 0 where they differ."""
    sh, sw = g.stride
    return sh if sh == sw else 0


def smem_bytes(g) -> int:
    """The tensor-core kernel's shared memory for convolution ``g`` (depthwise_mma_smem):
    a tile's input window (its rows and :data:`PITCH` columns a column parity) of 16-bit
    planes, then the tile's channels' filters (16 bits a tap, padded to 16 bytes)."""
    step = step_of(g)
    rows = step * (ROWS - 1) + g.r
    chans = CHANNELS[step]
    return chans * step * rows * PITCH * 2 + -(-chans * g.r * g.s * 2 // 16) * 16


def tiles(g) -> int:
    """The tensor-core kernel's CTAs: one a (channel group, tile column, tile row, image),
    in that order, the channel groups fastest."""
    return -(-g.c // CHANNELS[step_of(g)]) * g.n * -(-g.p // ROWS) * -(-g.q // COLS)


def name(g, dtype: str) -> str:
    """The instantiation that runs convolution ``g`` of ``dtype``."""
    return NAMES[TYPES.index(dtype) * len(STEPS) + STEPS.index(step_of(g))]


def planned(g, dtype: str) -> bool:
    """Whether :func:`.depthwise.plan_depthwise` runs convolution ``g`` of ``dtype`` on the
    tensor-core kernel where its layout allows: the kernel :func:`takes` it, at a step of
    :data:`PLANNED_STEPS`, with filters of at least :data:`MIN_PLANNED_TAPS` rows or columns,
    and its output fills at least :data:`MIN_TILE_USE` of its tiles."""
    if not takes(g, dtype) or step_of(g) not in PLANNED_STEPS or \
            max(g.r, g.s) < MIN_PLANNED_TAPS:
        return False
    tiled = -(-g.p // ROWS) * ROWS * -(-g.q // COLS) * COLS
    return g.p * g.q >= MIN_TILE_USE * tiled


def takes(g, dtype: str) -> bool:
    """Whether the tensor-core kernel computes convolution ``g`` of ``dtype`` (its layout
    and alignment are the caller's to check): 16-bit, a step of :data:`STEPS` both ways,
    undilated, filters of at most :data:`MAX_TAPS`, a window in :data:`SMEM_LIMIT`, one
    launch's CTAs."""
    return dtype in TYPES and step_of(g) in STEPS and tuple(g.dilation) == (1, 1) and \
        max(g.r, g.s) <= MAX_TAPS and smem_bytes(g) <= SMEM_LIMIT and tiles(g) <= MAX_GRID
