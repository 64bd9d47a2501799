"""Copies into the layout a kernel reads (``cuda/transpose.cuh``), on the GPU.

The tf32 and int8 Wgmma entries read both operands K-major (wgmma has no transpose for
32-bit and 8-bit operands), so ``gemm`` copies a row-major B (k x n) into column-major order first
(:func:`col_major`), and a column-major A into row-major order (:func:`row_major`); the
convolutions copy an NCHW input into NHWC order and their NHWC result back
(:func:`transpose_into`, on CuPy arrays and torch tensors alike). Through the array library
such a copy is an element-wise kernel whose reads or writes are strided; the kernel moves
blocks through shared memory instead, so both sides are coalesced: 64 x 64 blocks in
16-byte vectors where the rows allow them (2- and 4-byte elements, contiguous rows on 16
bytes), 32 x 32 blocks an element at a time otherwise.
"""
from __future__ import annotations

import numpy as np

from . import jit
from .operands import matrix_layout
from .pad_rows import pad_rows

HEADER = "transpose.cuh"
TILE = 32
"""Rows and columns of the block a CTA moves (the kernel's TRANSPOSE_TILE)."""
THREADS = 256
"""Threads of a CTA (TRANSPOSE_TILE x TRANSPOSE_ROWS)."""
MAX_GRID_Y = 65535
"""The batch is the grid's y extent, at most this."""
MAX_GRID_X = 2**31 - 1
"""The blocks of one matrix are the grid's x extent, at most this."""
MAX_EXTENT = 2**31 - 1 - 64
"""Rows and columns the kernels count in 32-bit ints (a block's last index steps up to a
64-element tile past its first)."""
TYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""Element bytes the kernel is instantiated for -> the C++ type it moves them as (their bits:
any dtype)."""
ELEMENT_NAMES = tuple(f"skc::transpose_copy<{t}>" for t in TYPES.values())
"""The element copy's instantiations, by element size (:data:`TYPES`)."""
VEC_NAMES = {size: f"skc::transpose_copy_vec<{TYPES[size]}>" for size in (2, 4)}
"""The copy in 16-byte vectors, by element size (the kernel's transpose_copy_vec)."""
NAMES = ELEMENT_NAMES + tuple(VEC_NAMES.values())
"""Every kernel of the header (one module)."""
VEC_TILE = 64
"""Rows and columns of the block a CTA of the vector copy moves (TRANSPOSE_VEC_TILE)."""
VEC_THREADS = 256
"""Threads of a CTA of the vector copy (TRANSPOSE_VEC_THREADS)."""
VEC16 = 16
"""Bytes of one vector (its alignment); rows, columns and the row stride must be multiples
of its elements for the vector copy."""


def col_major(x):
    """A copy of the CuPy array ``x`` whose matrices (the last two axes) are column-major
    and dense: the kernel for batches up to :data:`MAX_GRID_Y` whose batch axes step as
    one, CuPy's copy otherwise; ``x`` is any GPU array CuPy takes.

    >>> import cupy                                               # doctest: +SKIP
    >>> b = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)      # doctest: +SKIP
    >>> col_major(b).strides                                      # doctest: +SKIP
    (4, 8)
    """
    import cupy  # optional dependency: only the GPU path needs CuPy

    x = cupy.asarray(x)  # a view of a torch tensor or any __cuda_array_interface__ array
    *lead, rows, cols = x.shape
    out = cupy.empty(tuple(lead) + (cols, rows), dtype=x.dtype).swapaxes(-1, -2)
    if x.size == 0:
        return out
    if len(lead) > 1 and not _flat(x):
        out[...] = x
        return out
    batch = int(np.prod(lead)) if lead else 1
    strides = [s // x.itemsize for s in x.strides]
    sb = strides[-3] if lead else 0  # the step of the flat batch: its innermost axis's
    if not transpose_into(x.data.ptr, (batch, rows, cols), (sb, strides[-2], strides[-1]),
                          x.itemsize, out.data.ptr, x.device.id,
                          cupy.cuda.get_current_stream()):
        out[...] = x
    return out


def transpose_into(ptr: int, shape: tuple, strides: tuple, itemsize: int, out_ptr: int,
                   device_id: int, stream) -> bool:
    """Copy the batch of matrices at ``ptr`` (``shape`` (batch, rows, cols), ``strides`` in
    elements) into dense column-major matrices at ``out_ptr`` (out[b][c * rows + r] =
    x[b][r][c]) on the CuPy ``stream``. True where there is nothing to copy. False, copying
    nothing, where the kernel does not take it (an element size it has no type for, a
    batch over :data:`MAX_GRID_Y`, rows or columns past its 32-bit counts, too many
    blocks): the caller copies it."""
    batch, rows, cols = shape
    sb, sr, sc = strides
    if itemsize not in TYPES or batch > MAX_GRID_Y or max(rows, cols) > MAX_EXTENT or \
            -(-rows // TILE) * -(-cols // TILE) > MAX_GRID_X:
        return False
    if 0 in shape:
        return True
    module = jit.get_module(HEADER, NAMES, device_id)
    if _vector_copy(ptr, rows, cols, sb, sr, sc, itemsize) and out_ptr % VEC16 == 0:
        vec_blocks = -(-rows // VEC_TILE) * -(-cols // VEC_TILE)
        module.get_function(VEC_NAMES[itemsize])(
            (vec_blocks, batch), (VEC_THREADS,),
            (np.uint64(ptr), np.uint64(out_ptr), np.int32(rows), np.int32(cols),
             np.int64(sb), np.int64(sr)), stream=stream)
        return True
    fn = module.get_function(ELEMENT_NAMES[tuple(TYPES).index(itemsize)])
    fn((-(-rows // TILE) * -(-cols // TILE), batch), (THREADS,),
       (np.uint64(ptr), np.uint64(out_ptr), np.int32(rows), np.int32(cols), np.int64(sb),
        np.int64(sr), np.int64(sc)), stream=stream)
    return True


def _vector_copy(ptr: int, rows: int, cols: int, sb: int, sr: int, sc: int,
                 itemsize: int) -> bool:
    """Whether the 16-byte vector copy takes a batch of matrices: 2- or 4-byte elements in
    contiguous rows whose starts, like the batches', fall on 16 bytes, and rows and columns
    in whole vectors (so that every vector of the output's columns is whole too; the output
    must also start on 16 bytes, which :func:`transpose_into` checks)."""
    vec = VEC16 // itemsize
    return itemsize in VEC_NAMES and ptr % VEC16 == 0 and sc == 1 and \
        all(v % vec == 0 for v in (rows, cols, sr, sb))


def _vectors(x) -> bool:
    """:func:`_vector_copy` of the CuPy array ``x`` (one batch stride, as :func:`col_major`
    checks first)."""
    if x.ndim < 2:
        return False
    *_, rows, cols = x.shape
    strides = [s // x.itemsize for s in x.strides]
    sb = strides[-3] if x.ndim > 2 else 0
    return _vector_copy(x.data.ptr, rows, cols, sb, strides[-2], strides[-1], x.itemsize)


def row_major(x):
    """A copy of the GPU array ``x`` whose matrices are row-major and dense (the transpose
    of :func:`col_major` of their transposes)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    return col_major(cupy.asarray(x).swapaxes(-1, -2)).swapaxes(-1, -2)


def _flat(x) -> bool:
    """Whether the leading axes of ``x`` step through memory as one axis (one batch stride)."""
    *lead, _, _ = x.shape
    st = x.strides[:len(lead)]
    return all(st[i] == st[i + 1] * lead[i + 1] for i in range(len(lead) - 1))


def one_copy(x, copy, broadcast: bool):
    """``copy(x)``; of one matrix where ``x``'s batch repeats it (``broadcast``), read back
    with a batch stride of 0, so a broadcast operand is not materialised."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    if not broadcast or len(x.shape) < 3:
        return copy(x)
    return cupy.broadcast_to(copy(x[0]), tuple(x.shape))


def aligned(x, vec_bytes: int = VEC16):
    """A copy of the CuPy array ``x`` in its own layout (row-major matrices stay row-major,
    column-major ones column-major) whose rows (columns) are padded to ``vec_bytes``: a
    view of the first columns (rows) of a buffer with that leading dimension, for the
    kernels that read rows on 16 bytes. A batch that repeats one matrix (stride 0) is
    copied once and read back with a batch stride of 0."""
    if type(x).__module__.split(".")[0] == "torch":  # bfloat16, or a tensor needing grad
        return _aligned_tensor(x.detach(), vec_bytes)
    import cupy  # optional dependency: only the GPU path needs CuPy

    x = cupy.asarray(x)
    if len(x.shape) >= 3 and x.strides[-3] == 0:
        return cupy.broadcast_to(aligned(x[..., 0, :, :], vec_bytes), x.shape)
    col_major = _column_major(x.shape, [s // x.itemsize for s in x.strides])
    m = x.swapaxes(-1, -2) if col_major else x
    cols = m.shape[-1]
    buf = cupy.empty(m.shape[:-1] + (_padded(cols, x.itemsize, vec_bytes),), dtype=x.dtype)
    view = buf[..., :cols]
    if not pad_rows(m, buf):
        view[...] = m
    return view.swapaxes(-1, -2) if col_major else view


def _aligned_tensor(t, vec_bytes: int):
    """:func:`aligned` of a torch tensor, by torch (CuPy has no bfloat16 arrays)."""
    import torch  # optional dependency: only torch callers reach this

    if t.dim() >= 3 and t.stride()[-3] == 0:
        return _aligned_tensor(t[..., 0, :, :], vec_bytes).expand(t.shape)
    col_major = _column_major(tuple(t.shape), t.stride())
    m = t.transpose(-1, -2) if col_major else t
    cols = m.shape[-1]
    buf = torch.empty((*m.shape[:-1], _padded(cols, t.element_size(), vec_bytes)),
                      dtype=t.dtype, device=t.device)
    view = buf[..., :cols]
    view.copy_(m)
    return view.transpose(-1, -2) if col_major else view


def _column_major(shape, strides) -> bool:
    """Whether a matrix (the last two axes) of these element strides is column-major."""
    lay = matrix_layout(shape[-2], shape[-1], strides[-2], strides[-1])
    return lay is not None and lay[0] == "col"


def _padded(cols: int, itemsize: int, vec_bytes: int) -> int:
    """``cols`` rounded up to whole ``vec_bytes`` vectors of ``itemsize`` elements."""
    step = max(1, vec_bytes // itemsize)
    return -(-cols // step) * step
