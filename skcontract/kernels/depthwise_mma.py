"""Depthwise convolutions of 16-bit channels-last data on tensor cores
(``cuda/depthwise_mma.cuh``), the direct launch :mod:`.depthwise` plans where it takes one.

A filter row of one channel is a GEMM of 16 output rows by 8 output columns over 16 input
columns, its B the banded (Toeplitz) matrix of the row's taps: one mma.sync m16n8k16 makes
128 outputs of a filter row. A CTA takes a tile of :data:`TILE` (rows, columns, channels),
stages its input window in shared memory channel-major for ldmatrix, and writes each output
pixel's channels as 16-byte vectors. Pure Python: the plan is made anywhere.

>>> from skcontract.ops.conv2d import conv_geometry
>>> g = conv_geometry((64, 240, 28, 28), (240, 1, 5, 5), padding=2, groups=240)
>>> takes(g, "float16"), takes(g, "float32"), tiles(g), smem_bytes(g.r)
(True, False, 1920, 25600)
"""
from __future__ import annotations

from .catalogue import CXX_TYPES

HEADER = "depthwise_mma.cuh"
TYPES = ("float16", "bfloat16")
"""The dtypes of the tensor-core kernel (mma.sync m16n8k16 with fp32 accumulators)."""
NAMES = tuple(f"skc::depthwise_mma<{CXX_TYPES[d][0]}>" for d in TYPES)
"""The tensor-core kernel's instantiations, in :data:`TYPES`' order."""
MAX_TAPS = 9
"""The widest (and tallest) filter the tensor-core kernel takes: the banded B of a filter
row holds 8 + S - 1 of the mma's 16 input columns."""
TILE = (16, 32, 16)
"""Output rows, columns and channels of a tile of the tensor-core kernel (DWMMA_ROWS,
DWMMA_COLS, DWMMA_CHANNELS): one CTA a tile."""
PITCH = 40
"""Columns of the tensor-core kernel's shared channel planes (DWMMA_PITCH)."""
THREADS = 256
"""Threads of a tensor-core kernel's CTA (DWMMA_THREADS)."""
MAX_GRID = 2**31 - 1
"""CTAs one launch of the tensor-core kernel may have (a one-dimensional grid)."""


def smem_bytes(r: int) -> int:
    """The tensor-core kernel's shared memory for filters of ``r`` rows: a tile's input
    window (its rows and :data:`PITCH` columns) of 16-bit channel planes."""
    rows, _, chans = TILE
    return chans * (rows + r - 1) * PITCH * 2


def tiles(g) -> int:
    """The tensor-core kernel's CTAs: one a (channel group, tile column, tile row, image),
    in that order, the channel groups fastest."""
    rows, cols, chans = TILE
    return -(-g.c // chans) * g.n * -(-g.p // rows) * -(-g.q // cols)


def takes(g, dtype: str) -> bool:
    """Whether the tensor-core kernel computes convolution ``g`` of ``dtype`` (its layout
    and alignment are the caller's to check): 16-bit, unit steps, undilated, filters of at
    most :data:`MAX_TAPS`, one launch's CTAs."""
    return dtype in TYPES and tuple(g.stride) == (1, 1) and \
        tuple(g.dilation) == (1, 1) and max(g.r, g.s) <= MAX_TAPS and \
        tiles(g) <= MAX_GRID
