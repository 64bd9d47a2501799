"""Operand lines padded to 16 bytes (``cuda/pad_rows.cuh``), launched on the GPU.

The kernels that read their operands by TMA need every line (a row of a row-major matrix,
a column of a column-major one) to start on 16 bytes. An operand whose lines miss them
(attention's probabilities times values: K = 197 float16 elements, 394 bytes a line) is
copied into lines padded to 16 bytes first (:func:`.relayout.aligned`). Through the array
library that copy is an element-wise kernel that works out every element's place from its
index, at about a third of copy bandwidth; :func:`pad_rows` moves 16-byte vectors of the
padded lines, a source vector funnelled out of the two aligned chunks it straddles.
"""
from __future__ import annotations

import numpy as np

from . import jit

HEADER = "pad_rows.cuh"
TYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""Element bytes -> the C++ type the kernel moves them as (their bits: any dtype)."""
NAMES = tuple(f"skc::pad_rows_copy<{t}>" for t in TYPES.values())
THREADS = 256
"""Threads of a CTA (PAD_THREADS)."""
VECS = 4
"""16-byte vectors a thread moves a grid stride (PAD_VECS)."""
VEC_BYTES = 16
MAX_GRID = 2**31 - 1
MAX_EXTENT = 2**31 - 33
"""Rows, columns and padded lines the kernel counts in 32-bit ints (a lane's column steps
by 32 past the last)."""


def pad_rows(x, out) -> bool:
    """Copy the CuPy array ``x`` (..., rows, cols), whose lines (last axis) are contiguous
    and whose batch axes (those before the rows) step as one, into the first ``cols``
    columns of the dense CuPy array ``out`` (..., rows, ld) on the current stream. False, copying nothing, where the
    kernel does not take ``x`` (another element size, strided lines, batch axes that do not
    step as one, extents over :data:`MAX_EXTENT`): the caller copies it."""
    if x.itemsize not in TYPES or x.ndim < 1 or x.size == 0 or \
            (x.shape[-1] > 1 and x.strides[-1] != x.itemsize):
        return False
    *lead, cols = x.shape
    rows = lead[-1] if lead else 1
    strides = [s // x.itemsize for s in x.strides]
    sr = strides[-2] if lead else 0
    # the batch axes, less those of one entry (whose stride is never stepped), as one axis
    batch = [(n, st) for n, st in zip(lead[:-1], strides[:-2]) if n > 1]
    if any(st != inner_st * inner_n for (_, st), (inner_n, inner_st) in zip(batch, batch[1:])):
        return False
    if max(rows, cols, out.shape[-1]) > MAX_EXTENT:
        return False
    sb = batch[-1][1] if batch else 0
    lines = int(np.prod(lead)) if lead else 1
    ld = out.shape[-1]
    # whole vectors only where every padded line starts on 16 bytes
    vector = out.data.ptr % VEC_BYTES == 0 and ld * x.itemsize % VEC_BYTES == 0
    vectors = lines * -(-cols // (VEC_BYTES // x.itemsize))
    name = NAMES[tuple(TYPES).index(x.itemsize)]
    fn = jit.get_module(HEADER, NAMES, x.device.id).get_function(name)
    blocks = min(-(-vectors // (THREADS * VECS)), MAX_GRID)
    fn((blocks,), (THREADS,), (x, out, np.int64(lines), np.int32(rows), np.int32(cols),
                               np.int32(ld), np.int64(sb), np.int64(sr), np.int32(vector)))
    return True
