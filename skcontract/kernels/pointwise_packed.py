"""The kernels around a pointwise convolution whose GEMM reads rows of several pixels
(``cuda/pointwise_packed.cuh``), launched on the GPU.

A channels-last 16-bit pointwise input whose pixels' rows are short of a k-tile is read as
rows of P pixels against the filters repeated P times down a diagonal
(:func:`skcontract.ops.conv_plan.pointwise_packed_pixels`). :func:`block_diagonal` writes
that filter matrix; :func:`packed_fix`, after the GEMM, recomputes the pixels of every row
with a non-finite input channel (whose infinities and NaNs met the other pixels' zeros) and
the pixels after the last whole row.
"""
from __future__ import annotations

import numpy as np

from . import jit
from .catalogue import CXX_TYPES
from .launch import record_direct

HEADER = "pointwise_packed.cuh"
TYPES = {d: CXX_TYPES[d][0] for d in ("float16", "bfloat16")}
"""The dtypes the kernels take -> their C++ element type."""
DIAGONAL_NAMES = tuple(f"skc::block_diagonal<{t}>" for t in TYPES.values())
"""The block-diagonal copy's instantiations, in :data:`TYPES`' order."""
FIX_NAMES = tuple(f"skc::packed_fix<{t}>" for t in TYPES.values())
"""The fix-up's instantiations, in :data:`TYPES`' order."""
NAMES = DIAGONAL_NAMES + FIX_NAMES
"""Every instantiation the module compiles."""
THREADS = 256
"""Threads of a block (the kernels stride over the work by their grid's threads)."""
BLOCKS_PER_SM = 8
"""Blocks a launch gives each SM at most (the kernels stride over the rest)."""
ELEMENT_BYTES = 2
"""Bytes of an element (16-bit dtypes only)."""
VECTOR_BYTES = 16
"""packed_fix reads the input a 16-byte vector a thread."""


def _launch(names, dtype: str, device_id: int, work: int, sms: int, args, stream) -> int:
    """Launch ``names``' instantiation for ``dtype``; returns its blocks."""
    fn = jit.get_module(HEADER, NAMES, device_id).get_function(
        names[tuple(TYPES).index(dtype)])
    blocks = max(1, min(-(-work // THREADS), sms * BLOCKS_PER_SM))
    fn((blocks,), (THREADS,), args, stream=stream)
    return blocks


def block_diagonal(w, shape: tuple, copies: int, out_ptr: int, dtype: str, stream,
                   device_id: int, sms: int) -> None:
    """Write the dense (``copies`` K) x (``copies`` C) matrix of ``copies`` copies of the
    K x C filters ``w`` (an :class:`~.operands.Operand` whose first two axes are K and C)
    down its diagonal, zeros elsewhere, at ``out_ptr``."""
    k, c = shape
    _launch(DIAGONAL_NAMES, dtype, device_id, copies * k * copies * c, sms,
            (np.uint64(w.ptr), np.uint64(out_ptr), np.int32(k), np.int32(c),
             np.int32(copies), np.int64(w.strides[0]), np.int64(w.strides[1])), stream)


def packed_fix(x_ptr: int, w, bias, out_ptr: int, pixels: int, rows: int, copies: int,
               shape: tuple, dtype: str, stream, device_id: int, sms: int) -> None:
    """After the GEMM of ``rows`` rows of ``copies`` pixels of the dense channels-last input
    at ``x_ptr`` (``pixels`` pixels of C channels) wrote the dense (``pixels``, K) output at
    ``out_ptr``: recompute the pixels of each row holding a non-finite channel, and those
    after ``rows`` whole rows, from the filters ``w`` and the ``bias`` (Operands; bias may be
    None). A direct launch for :func:`~.launch.record_launches`."""
    k, c = shape
    vectors = rows * copies * c * ELEMENT_BYTES // VECTOR_BYTES
    b_ptr, sb = (0, 0) if bias is None else (bias.ptr, bias.strides[0])
    args = (np.uint64(x_ptr), np.uint64(w.ptr), np.uint64(b_ptr), np.int64(sb),
            np.uint64(out_ptr), np.int64(pixels), np.int64(rows), np.int32(copies),
            np.int32(c), np.int32(k), np.int64(w.strides[0]), np.int64(w.strides[1]))
    blocks = _launch(FIX_NAMES, dtype, device_id, vectors + pixels - rows * copies, sms,
                     args, stream)
    record_direct(FIX_NAMES[tuple(TYPES).index(dtype)], blocks)
