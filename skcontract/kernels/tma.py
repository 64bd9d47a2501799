"""TMA descriptors (``CUtensorMap``) of the Wgmma family's operands, encoded on the host.

A descriptor names an operand's base address, its extents and strides, and the box one TMA
load brings into shared memory (128-byte swizzle, zero fill past the edges). The kernel takes
it by value as a ``const __grid_constant__`` parameter (``hopper.cuh``, ``TmaMap``), so a
launch passes its 128 bytes. Encoding costs host time (a driver call through cuda.bindings),
and an expression's operands are often the same buffers call after call: descriptors are
cached by everything they encode (:func:`operand_map`).

A GEMM operand is a 3-D tensor, innermost dimension first:
K-major (A row-major, B column-major): (K, rows, batch), box (BK, rows of the tile, 1), or
fewer rows for an operand narrower than the tile (:func:`kmajor_box_rows`);
M- / N-major: (rows, K, batch), box (64, BK, 1), loaded once per 64 rows of the tile.
A cluster pair's CTAs each load half of B's stage (:func:`load_box`): half its rows, or,
for a 64-column N-major B, half the box's k rows.
A batch stride of 0 (a broadcast operand) is a batch extent of 1: the kernel reads batch 0.
The epilogue stores C through a map of the same form, (N, M, batch) (:func:`output_map`).
A convolution (:func:`conv_maps`) reads its input through an im2col map, whose loads gather
a tile of output pixels' windows at one filter tap, and its filters through a 4-D tiled map.
"""
from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

try:  # the driver's encoder (cuda-bindings is a dependency of the GPU extra)
    from cuda.bindings import driver as _driver
except ImportError:  # pragma: no cover - the CPU-only install encodes nothing
    _driver = None

TMA_MAP_BYTES = 128
"""Size of a CUtensorMap."""
SWIZZLE_ROW_BYTES = 128
"""Bytes of an M- / N-major box's row: one 128-byte swizzle row (64 16-bit elements, 32
32-bit ones, which the tf32 kernels turn K-major in their stages)."""
ROW_ALIGN_BYTES = 16
"""TMA strides are multiples of 16 bytes (so is a made-up stride of a size-1 dimension)."""
MAP_CACHE_SIZE = 4096
"""Descriptors kept (an entry is 128 bytes and its key)."""

_TMA_DTYPES = {"float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
               "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
               # the tf32 entries' float32 operands: the TMA unit rounds each element to tf32
               # (to nearest, as cuBLAS's tf32 products do; the tensor cores would truncate
               # the raw float)
               "tf32": "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32",
               # the 3xTF32 entries': the raw floats, which their consumers split
               "float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
               "int8": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}  # the bytes as they are
"""A map's element type (an entry's ``tma_dtype``) -> the driver's name of it."""
TMA_MAP_DTYPE = np.dtype((np.void, TMA_MAP_BYTES))
"""A descriptor as a NumPy scalar, the form a CuPy kernel call passes by value."""


SWIZZLE_ATOM_ROWS = 8
"""Rows of one 128-byte swizzle atom (1024 bytes)."""


class NoContext(RuntimeError):
    """The driver refused to encode a map because this thread has no current CUDA context
    (its first CUDA call: a Dask worker's thread, say); the caller binds one and encodes
    again (:func:`skcontract.kernels.jit.bind_context`)."""


def _check_encoded(err, driver, what: str) -> None:
    """RuntimeError (NoContext for a thread without a context) where the driver refused to
    encode a map."""
    if err == driver.CUresult.CUDA_ERROR_INVALID_CONTEXT:
        raise NoContext(f"{what} failed: {err!r}")
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err!r}")


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to


def kmajor_box_rows(rows: int, tile_rows: int) -> int:
    """Rows of a K-major box: the tile's, or the operand's rounded up to a swizzle atom when
    the operand is narrower than one tile (decode: 16 rows of A against 64-row tiles). The
    rows not loaded keep stale shared memory, which feeds only output rows (columns) past
    the operand's, which are never stored; the bytes a load brings are what the kernel
    expects (``WgmmaOperand::load_bytes`` computes the same rule)."""
    return min(tile_rows, _round_up(rows, SWIZZLE_ATOM_ROWS))


def operand_dims(rows: int, k: int, ld: int, batch: int, batch_stride: int, kmajor: bool,
                 elem: int) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """Extents (innermost first) and the two outer strides in bytes of an operand with
    ``rows`` rows (M of A, N of B) and ``k`` columns. ``ld`` 0 (one row or column) and a
    batch stride of 0 become valid strides of size-1 dimensions."""
    inner, outer = (k, rows) if kmajor else (rows, k)
    ld_bytes = ld * elem if outer > 1 else _round_up(inner * elem, ROW_ALIGN_BYTES)
    if batch <= 1 or batch_stride == 0:
        batch, bs_bytes = 1, _round_up(ld_bytes * outer, ROW_ALIGN_BYTES)
    else:
        bs_bytes = batch_stride * elem
    return (inner, outer, batch), (ld_bytes, bs_bytes)


@lru_cache(maxsize=MAP_CACHE_SIZE)
def operand_map(ptr: int, dtype: str, dims: tuple, strides: tuple, box: tuple) -> np.void:
    """The 128-byte descriptor of a tensor at ``ptr`` (a GEMM operand's three dimensions,
    :func:`operand_dims`, or a convolution's four filter ones) with ``box`` (innermost
    first), as a :data:`TMA_MAP_DTYPE` scalar; RuntimeError when the driver refuses it."""
    driver = _driver
    if driver is None:
        raise RuntimeError("TMA descriptors need cuda-bindings (the GPU extra)")
    err, tmap = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, _TMA_DTYPES[dtype]), len(dims), ptr,
        [driver.cuuint64_t(d) for d in dims], [driver.cuuint64_t(s) for s in strides],
        [driver.cuuint32_t(b) for b in box], [driver.cuuint32_t(1)] * len(dims),
        *_layout_options(driver, strides[0]))
    _check_encoded(err, driver, f"cuTensorMapEncodeTiled({dtype}, dims={dims}, "
                                f"strides={strides}, box={box})")
    return _as_scalar(tmap)


@lru_cache(maxsize=MAP_CACHE_SIZE)
def im2col_map(ptr: int, dtype: str, dims: tuple, strides: tuple, lower: tuple, upper: tuple,
               channels: int, pixels: int, steps: tuple) -> np.void:
    """The 128-byte im2col descriptor of a channels-last 4-D tensor at ``ptr``: ``dims``
    (C, W, H, N) and the three outer strides in bytes; a load brings ``pixels`` pixels of
    ``channels`` channels, walking the bounding box whose (W, H) corners are ``lower`` and
    ``dims + upper - 1`` by ``steps`` (W, H); RuntimeError when the driver refuses it."""
    driver = _driver
    if driver is None:
        raise RuntimeError("TMA descriptors need cuda-bindings (the GPU extra)")
    err, tmap = driver.cuTensorMapEncodeIm2col(
        getattr(driver.CUtensorMapDataType, _TMA_DTYPES[dtype]), len(dims), ptr,
        [driver.cuuint64_t(d) for d in dims], [driver.cuuint64_t(s) for s in strides],
        list(lower), list(upper), channels, pixels,
        [driver.cuuint32_t(e) for e in (1, *steps, 1)], *_layout_options(driver, strides[0]))
    _check_encoded(err, driver, f"cuTensorMapEncodeIm2col({dtype}, dims={dims}, "
                                f"strides={strides}, corners={lower}, {upper}, {channels} x "
                                f"{pixels}, steps={steps})")
    return _as_scalar(tmap)


def _layout_options(driver, row_bytes: int) -> tuple:
    """Interleave, swizzle, L2 promotion and out-of-bounds fill of a map whose rows are
    ``row_bytes`` apart: the 128-byte swizzle the wgmma descriptors read, zeros past the
    edges, and :func:`l2_promotion_bytes`."""
    promotion = {128: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                 256: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B}
    return (driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            promotion[l2_promotion_bytes(row_bytes)],
            driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


L2_SECTOR_BYTES = 32
"""The L2's sector: a row that starts inside one reads a sector more than its bytes fill."""


def l2_promotion_bytes(row_bytes: int) -> int:
    """The L2 promotion of a map whose rows are ``row_bytes`` apart: 256 bytes where every
    row starts on an L2 sector, 128 where rows start mid-sector (an odd multiple of 16
    bytes, e.g. 1000 or 5000 16-bit elements), where a 256-byte promotion fetches more that
    no box uses and slows the product; products whose rows are sector-aligned run the same
    at either."""
    return 256 if row_bytes % L2_SECTOR_BYTES == 0 else 128


def _as_scalar(tmap) -> np.void:
    raw = ctypes.string_at(tmap.getPtr(), TMA_MAP_BYTES)
    return np.frombuffer(raw, TMA_MAP_DTYPE)[0]


def gemm_maps(spec, a_ptr: int, b_ptr: int, batch: int, m: int, n: int, k: int, lda: int,
              ldb: int, sa: int, sb: int) -> tuple[np.void, np.void]:
    """The descriptors of a Wgmma launch's A (m x k) and B (k x n) operands."""
    elem = spec.elem_bytes

    def one(ptr, rows, tile_rows, ld, bs, kmajor, parts=1):
        dims, strides = operand_dims(rows, k, ld, batch, bs, kmajor, elem)
        box = load_box(kmajor, rows, tile_rows, spec.bk, parts, elem)
        return operand_map(ptr, spec.entry.tma_dtype, dims, strides, box)

    # a cluster pair's CTAs each load one part of B's stage and multicast it to both; a
    # kernel with HyTiS's small tile loads B's stage in halves (Wgmma.b_parts)
    return (one(a_ptr, m, spec.bm, lda, sa, spec.a_kcontig),
            one(b_ptr, n, spec.bn, ldb, sb, spec.b_kcontig, spec.entry.b_parts(spec)))


def load_box(kmajor: bool, rows: int, tile_rows: int, bk: int, parts: int = 1,
             elem: int = 2) -> tuple[int, int, int]:
    """The box (innermost first) of one load of an operand of ``rows`` rows of ``elem``
    -byte elements into a stage of ``tile_rows`` rows, or of one of ``parts`` equal parts
    of it (sk_wgmma.cuh, ``load_part``): K-major, the part's rows (:func:`kmajor_box_rows`);
    MN-major, whole boxes of one swizzle row of elements, or, where a part is narrower than
    one box (a pair's 64-column B), the box's k rows split in parts."""
    part_rows = tile_rows // parts
    if kmajor:
        return bk, kmajor_box_rows(rows, part_rows), 1
    mn_box = SWIZZLE_ROW_BYTES // elem
    return (mn_box, bk // parts, 1) if part_rows < mn_box else (mn_box, bk, 1)


STORE_BOX_ROWS = 64
"""Rows of the epilogue's store box: one consumer warpgroup's (``WgmmaEpilogue::run_tma``)."""
STORE_MIN_OUTPUTS = 0
"""Outputs (over the batch) from which the epilogue stores C by TMA; a smaller launch keeps
the per-thread stores and does not look up C's descriptor."""
NO_MAP = np.zeros((), TMA_MAP_DTYPE)[()]
"""The descriptor argument of a launch that does not store by TMA (the kernel never reads it)."""


def output_map(spec, c_ptr: int, batch: int, m: int, n: int, ldc: int, sc: int,
               beta: float) -> np.void | None:
    """The descriptor through which a Wgmma epilogue stores C (``m`` x ``n``, row-major,
    ``ldc`` apart, batches ``sc`` apart), in boxes of :data:`STORE_BOX_ROWS` rows and one
    128-byte swizzle row of columns; None where the epilogue stores C itself: ``beta`` != 0
    (C is read), C's base or strides not on 16 bytes (TMA's rule), strides that are not
    positive (a map's strides are unsigned; a batch stride of 0 would collapse the batches
    the store must write), fewer than :data:`STORE_MIN_OUTPUTS` outputs, or an entry whose
    epilogue stores no such output by TMA (``tma_store``: 16-bit outputs)."""
    elem = spec.elem_bytes
    if (not spec.entry.tma_store or beta != 0 or batch * m * n < STORE_MIN_OUTPUTS
            or c_ptr % ROW_ALIGN_BYTES
            or (m > 1 and (ldc <= 0 or ldc * elem % ROW_ALIGN_BYTES))
            or (batch > 1 and (sc <= 0 or sc * elem % ROW_ALIGN_BYTES))):
        return None
    dims, strides = operand_dims(m, n, ldc, batch, sc, True, elem)
    box = (SWIZZLE_ROW_BYTES // elem, STORE_BOX_ROWS, 1)
    return operand_map(c_ptr, spec.dtype_out, dims, strides, box)


IM2COL_CORNER = 128
"""A 4-D im2col map's bounding-box corners lie in [-128, 127] (the driver's range)."""
IM2COL_MAX_STEP = 8
"""Traversal strides (the convolution's) of at most 8."""


def conv_geometry_fits(g, elem: int) -> bool:
    """Whether the im2col maps express convolution ``g`` (a ConvGeometry) of ``elem``-byte
    elements: one group or groups of whole k-tiles of channels (a swizzle row's, which a
    batch's loads start on), 16-byte channel rows (TMA strides), corners and strides in the
    driver's ranges. Alignment of the addresses and outer strides is the caller's check."""
    top, bottom, left, right = g.padding
    corners = (-top, -left, bottom - g.dilation[0] * (g.r - 1),
               right - g.dilation[1] * (g.s - 1))
    whole_groups = g.groups == 1 or (g.c // g.groups * elem) % SWIZZLE_ROW_BYTES == 0
    return (whole_groups and (g.c * elem) % ROW_ALIGN_BYTES == 0
            and all(-IM2COL_CORNER <= c < IM2COL_CORNER for c in corners)
            and max(g.stride) <= IM2COL_MAX_STEP)


def conv_maps(spec, g, x_strides: tuple, ldb: int, m: int, a_ptr: int,
              w_ptr: int) -> tuple[np.void, np.void]:
    """The descriptors of a Wgmma convolution launch (``sk_wgmma_conv.cuh``): the input at
    ``a_ptr`` (channels-last; ``x_strides``: its image, row and column strides in elements,
    0 for an axis of one) as an im2col map whose loads are one k-tile of the GEMM's ``m``
    output pixels, and the filters at ``w_ptr`` ((K, R, S, C) with the channels dense, output
    channels ``ldb`` apart) as a tiled (C / groups, S, R, K) map."""
    elem, bk = spec.elem_bytes, spec.bk
    top, bottom, left, right = g.padding
    sn, sh, sw = x_strides
    row = _round_up(g.c * elem, ROW_ALIGN_BYTES)  # made-up strides of axes of one
    sw = sw * elem if g.w > 1 else row
    sh = sh * elem if g.h > 1 else sw * g.w
    sn = sn * elem if g.n > 1 else sh * g.h
    a = im2col_map(a_ptr, spec.dtype_in, (g.c, g.w, g.h, g.n), (sw, sh, sn), (-left, -top),
                   (right - g.dilation[1] * (g.s - 1), bottom - g.dilation[0] * (g.r - 1)),
                   bk, kmajor_box_rows(m, spec.bm), (g.stride[1], g.stride[0]))
    cg = g.c // g.groups
    b = operand_map(w_ptr, spec.dtype_in, (cg, g.s, g.r, g.k),
                    (cg * elem, g.s * cg * elem, ldb * elem),
                    (bk, 1, 1, kmajor_box_rows(g.k, spec.bn)))
    return a, b
