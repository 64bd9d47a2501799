"""conv2d on the CPU: BLAS products over chunks of the input, laid out so that no window is
gathered where the stride is one.

**Stride one.** A chunk (some images, a band of their output rows, one group or several
single-channel groups) lies in one plane a channel: the padded input rows, each row holding
the chunk's images side by side, every image followed by at least as many zeros as the
padding on either side. Over this flat row-major plane the output grid's point (p, i, q)
(row p, image i, column q) reads, at tap (r, t), the element ``(p + r dh) width + i slot +
q + t dw``: one offset a tap, so a tap's operand over the whole grid is one contiguous view
(the grid holds a few thrown-away columns after each image's Q). S - 1 copies of the
planes, shifted by ``t dw`` elements, lie after them, so that a group's S x C/G planes are
the rows of one matrix, which serves every filter column at once; each filter row is one
more offset of the grid width. The products run a group at a time on the planes as they
lie, in one of two forms (:func:`_rows_plan`):

- the filter rows in the product's rows: ``(R K/G x S C/G) @ (S C/G x grid + reach)``,
  one product (in blocks of :data:`PRODUCT_BLOCK` columns), then the R row sums, each
  read at its row's offset, added by one product with a row of ones: for narrow groups
  (depthwise, ResNeXt), whose per-row products would be too small;
- each filter row its own product on the planes offset by its row,
  ``(K/G x S C/G) @ (S C/G x grid)``, accumulated: for wide groups.

Chunks are cache-sized (:data:`GROUPED_CHUNK_BYTES`, :data:`DENSE_CHUNK_BYTES`), and the
views a chunk works through are made once for each chunk shape. Where column blocks of
at least :data:`CALLER_MIN_BLOCK` keep every product small enough that BLAS runs it on the
calling thread (grouped layers: depthwise, ResNeXt), the products run in such blocks:
BLAS's threads gain these short products nothing, and on a loaded machine a threaded call
waits on threads that are not running. The long products of one-group layers BLAS
threads.

**Strides above one** gather the taps' windows of a chunk into one (C/G R S) x (images P Q)
operand (im2col over the chunk only), from its padded input split into column phases
(column mod stride) so that each window row is a contiguous run, and run one product a
group and image, written into the output in place. **Pointwise** convolutions are one
product an image on the input as it lies.

Memory: besides the caller's input and the output, a chunk's buffers take at most
:data:`CHUNK_BYTES` (one output row of one image and one group where even that is larger).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

CHUNK_BYTES = 16 << 20
"""The buffers of one chunk at most: large enough that each product is a long BLAS call,
small enough to bound the memory a call takes beside its input and output."""
DENSE_CHUNK_BYTES = 4 << 20
"""The chunk size of one-group convolutions at stride one: products long enough for BLAS,
planes and sums near enough to cache for the copies and sums between them."""
GROUPED_CHUNK_BYTES = 1 << 20
"""The chunk size of grouped convolutions at stride one: their products are small, and the
planes, products and sums of a chunk stay in cache between passes."""
PRODUCT_BLOCK = 2048
"""Columns a BLAS call of the filter-rows-in-rows form at most: its few rows and inner
dimension make long calls slow (BLAS packs a long operand before a short product), blocks
of this width run at its small-matrix speed."""
NARROW_INNER = 64
"""C/G x S at or below which the filter rows run in the product's rows (one product and a
shifted sum) rather than one accumulated product a filter row."""
BLAS_CALLER_PRODUCT = 1 << 18
"""Multiply-adds up to which OpenBLAS (NumPy's BLAS) runs a matrix product on the calling
thread."""
COMPLEX_SHARE = 8
"""OpenBLAS threads complex products from this fraction of the real ones' size."""
BLAS_CALLER_VECTOR = 9216
"""Matrix elements below which OpenBLAS runs a matrix-vector product on the calling
thread."""
CALLER_MIN_BLOCK = 64
"""Columns a product call at least in blocks that keep it on the calling thread: shorter
calls spend more on each call than BLAS's threads would."""


class _Chunk(NamedTuple):
    """Images ``n0:n1``, output rows ``p0:p1`` and groups ``g0:g1``."""

    n0: int
    n1: int
    p0: int
    p1: int
    g0: int
    g1: int


class _Rows(NamedTuple):
    """A stride-one chunk's layout: the grid and the planes each channel lies in."""

    slot: int    # an image's columns: W and the zeros after it
    width: int   # a row: the chunk's images side by side
    grid: int    # output grid elements: output rows x width
    reach: int   # the last filter row's offset: (R - 1) dh x width
    block: int   # columns a product call
    summed: int  # columns of the result: the grid, in whole blocks of its calls
    sum_block: int  # columns a call of the row sums (filter rows in the product's rows)
    cols: int    # columns of the planes the products read
    length: int  # a plane: whole rows covering the input rows read and the shifted copies


def conv2d_cpu(x: np.ndarray, weight: np.ndarray, g) -> np.ndarray:
    """The (N, K, P, Q) convolution ``g`` (a checked ConvGeometry) of the (N, C, H, W)
    ``x`` with ``weight``, both of the compute dtype."""
    out = np.empty((g.n, g.k, g.p, g.q), x.dtype)
    if min(out.shape) == 0:
        return out
    if g.c == 0:  # nothing to sum: zeros, as the GPU's bias-only route gives
        out.fill(0)
    elif _pointwise(g):  # one product an image, on the input as it lies
        kg, cg = g.k // g.groups, g.c // g.groups
        np.matmul(weight.reshape(g.groups, kg, cg), x.reshape(g.n, g.groups, cg, -1),
                  out=out.reshape(g.n, g.groups, kg, -1))
    elif g.stride == (1, 1):
        _conv_rows(x, weight, g, out)
    else:
        _conv_gathered(x, weight, g, out)
    return out


def _pointwise(g) -> bool:
    """A 1 x 1 convolution reading every pixel (stride 1, no padding), not depthwise."""
    return (g.r, g.s, g.stride, g.padding) == (1, 1, (1, 1), (0, 0, 0, 0)) and g.c != g.groups


def _group_sizes(g) -> tuple[int, int]:
    """(C/G, K/G): input and output channels a group."""
    return g.c // g.groups, g.k // g.groups


# -- stride one: the planes ---------------------------------------------------------------

class _Plan(NamedTuple):
    """A stride-one convolution's choices."""

    taps_in_rows: bool  # the filter rows in the product's rows, else a product a row
    block: int          # columns a product call at most (0: the grid in one call)


def _rows_plan(g, dtype) -> _Plan:
    """The filter rows in the product's rows for narrow groups (C/G x S at most
    :data:`NARROW_INNER`); the products in blocks that keep every call on the calling
    thread where those have at least :data:`CALLER_MIN_BLOCK` columns, else the
    filter-rows-in-rows products in blocks of :data:`PRODUCT_BLOCK` columns and the
    accumulated ones over the whole grid."""
    cg, kg = _group_sizes(g)
    taps_in_rows = g.r > 1 and cg * g.s <= NARROW_INNER
    products = BLAS_CALLER_PRODUCT // (COMPLEX_SHARE if np.dtype(dtype).kind == "c" else 1)
    caller = min(PRODUCT_BLOCK, products // ((g.r if taps_in_rows else 1) * kg * g.s * cg))
    if taps_in_rows:  # and the row sums' products, R x block
        caller = min(caller, (BLAS_CALLER_VECTOR - 1) // g.r)
    if caller >= CALLER_MIN_BLOCK:
        return _Plan(taps_in_rows, caller)
    return _Plan(taps_in_rows, PRODUCT_BLOCK if taps_in_rows else 0)


def _rows_layout(g, plan: _Plan, images: int, rows: int) -> _Rows:
    """The layout of a chunk of ``images`` images and ``rows`` output rows."""
    _, _, left, right = g.padding
    dh, dw = g.dilation
    slot = g.w + max(left, right, g.q - g.w)
    width = images * slot
    grid, reach = rows * width, (g.r - 1) * dh * width
    sum_block = _even(grid, plan.block or grid)
    summed = _round_up(grid, sum_block)
    if plan.taps_in_rows:  # one product over the grid and its reach, then the row sums
        block = _even(summed + reach, plan.block)
        cols = _round_up(summed + reach, block)
    else:  # a product a filter row, each over the grid
        block, cols = sum_block, summed + reach
    in_rows = rows + (g.r - 1) * dh + 1  # and one the last row's thrown-away columns read
    length = max(in_rows * width, cols + (g.s - 1) * dw)
    return _Rows(slot, width, grid, reach, block, summed, sum_block, cols,
                 _round_up(length, width))


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def _rows_bytes(g, plan: _Plan, images: int, rows: int, itemsize: int) -> int:
    """The buffers of a chunk of one group: its planes, the products' sums and the
    chunk's result."""
    cg, kg = _group_sizes(g)
    lay = _rows_layout(g, plan, images, rows)
    return itemsize * (cg * g.s * lay.length + _sums_size(g, plan, lay) + kg * lay.summed)


def _rows_chunks(g, plan: _Plan, itemsize: int) -> list[_Chunk]:
    """Chunks whose buffers take at most the budget: groups of all the images and rows
    (one group where groups have several input channels: see :class:`_RowsPass`), else one
    group of some images, else one group of a band of one image's rows; the largest first,
    those of a shape together."""
    budget = min(CHUNK_BYTES, DENSE_CHUNK_BYTES if g.groups == 1 else GROUPED_CHUNK_BYTES)
    whole = _rows_bytes(g, plan, g.n, g.p, itemsize)
    step = _even(g.groups, budget // whole) if g.c == g.groups else 1
    images, rows = g.n, g.p
    if whole > budget:
        images = _even(g.n, max(i for i in range(1, g.n + 1)
                                if i == 1 or _rows_bytes(g, plan, i, g.p, itemsize) <= budget))
        if images == 1:
            rows = _even(g.p, max(r for r in range(1, g.p + 1)
                                  if r == 1 or _rows_bytes(g, plan, 1, r, itemsize) <= budget))
    chunks = [_Chunk(n0, min(g.n, n0 + images), p0, min(g.p, p0 + rows), g0,
                     min(g.groups, g0 + step))
              for n0 in range(0, g.n, images) for p0 in range(0, g.p, rows)
              for g0 in range(0, g.groups, step)]
    return sorted(chunks, key=_shape, reverse=True)  # each shape's chunks in one run


def _shape(chunk: _Chunk) -> tuple[int, int, int]:
    """(images, rows, groups): the chunks of one shape run through one pass."""
    return chunk.n1 - chunk.n0, chunk.p1 - chunk.p0, chunk.g1 - chunk.g0


def _even(total: int, most: int) -> int:
    """The size of the fewest near-equal parts of ``total`` of at most ``most`` each (at
    least one): no short last part (a chunk of its own shape, a block mostly padding)."""
    parts = -(-total // max(1, most))
    return -(-total // parts)


def _rows_filters(weight: np.ndarray, g, plan: _Plan) -> np.ndarray:
    """The filters as the products take them, contiguous, their inner index (t, c) as the
    planes' rows: (G, R K/G, S C/G) with the filter rows in the product's rows, else
    (R, G, K/G, S C/G)."""
    cg, kg = _group_sizes(g)
    w = weight.reshape(g.groups, kg, cg, g.r, g.s)
    if plan.taps_in_rows:
        return np.ascontiguousarray(w.transpose(0, 3, 1, 4, 2)).reshape(g.groups, -1, cg * g.s)
    return np.ascontiguousarray(w.transpose(3, 0, 1, 4, 2)).reshape(g.r, g.groups, kg, -1)


class _Buffers:
    """Flat buffers for the largest chunk, which every chunk's views share."""

    def __init__(self, g, plan: _Plan, dtype, chunk: _Chunk):
        images, rows, groups = chunk.n1 - chunk.n0, chunk.p1 - chunk.p0, chunk.g1 - chunk.g0
        cg, kg = _group_sizes(g)
        self.plan = plan
        lay = _rows_layout(g, plan, images, rows)
        self.planes = np.empty(groups * cg * g.s * lay.length, dtype)
        self.sums = np.empty(groups * _sums_size(g, plan, lay), dtype)
        self.result = np.empty(groups * kg * lay.summed, dtype)
        self.ones = np.ones((1, g.r), dtype)
        self.zeroed = None  # the pass whose padding zeros the first plane holds


def _sums_size(g, plan: _Plan, lay: _Rows) -> int:
    """A group's products before their sum: the R row sums (filter rows in the product's
    rows), or one filter row's product (accumulated ones)."""
    kg = g.k // g.groups
    return g.r * kg * lay.cols if plan.taps_in_rows else kg * lay.summed if g.r > 1 else 0


def _view(flat: np.ndarray, *shape: int) -> np.ndarray:
    return flat[:int(np.prod(shape))].reshape(shape)


def _blocks(a: np.ndarray, block: int) -> np.ndarray:
    """``a`` (..., m, n) as (..., n / block, m, block): its column blocks, a view."""
    *lead, m, n = a.shape
    return a.reshape(*lead, m, n // block, block).swapaxes(-3, -2)


def _shifted_rows(a: np.ndarray, step: int, length: int) -> np.ndarray:
    """``a`` (..., rows, n) as (..., rows, length), row i read from its element i step."""
    return as_strided(a, shape=a.shape[:-1] + (length,),
                      strides=a.strides[:-2] + (a.strides[-2] + step * a.itemsize,
                                                a.itemsize), writeable=False)


class _RowsPass:
    """The views through which the chunks of one shape (images, rows, groups) run: made
    once, over the shared buffers, for every chunk of that shape."""

    def __init__(self, g, buffers: _Buffers, images: int, rows: int, groups: int):
        cg, kg = _group_sizes(g)
        self.g, self.buffers, self.plan = g, buffers, buffers.plan
        self.lay = lay = _rows_layout(g, self.plan, images, rows)
        planes = _view(buffers.planes, g.s, groups * cg, lay.length)
        self.rows = planes[0].reshape(groups * cg, -1, images, lay.slot)
        if g.s > 1:
            self.shifts = self._shift_views(planes)
        # a group's rows (t, c): one stride where a chunk is one group or groups are single
        # channels
        self.planes = planes.reshape(g.s, groups, cg, lay.length).transpose(1, 0, 2, 3) \
            .reshape(groups, g.s * cg, lay.length)
        self.result = _view(buffers.result, groups, kg, lay.summed)
        sums = _view(buffers.sums, groups, _sums_size(g, self.plan, lay))
        if self.plan.taps_in_rows:
            self._sum_rows_views(sums)
        else:
            self._row_products_views(sums)
        self.store = self.result[:, :, :lay.grid].reshape(-1, rows, images, lay.slot) \
            [..., :g.q].transpose(2, 0, 1, 3)

    def _shift_views(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(source, destination) of the shifted copies: the first plane read at t dw, and
        the planes after it (a copy within one region would go through a temporary)."""
        first, dw = planes[0], self.g.dilation[1]
        source = as_strided(first[:, dw:], shape=(self.g.s - 1, first.shape[0], self.lay.cols),
                            strides=(dw * first.itemsize, *first.strides), writeable=False)
        return source, planes[1:, :, :self.lay.cols]

    def _sum_rows_views(self, sums: np.ndarray) -> None:
        """The views of the filter-rows-in-rows form, in column blocks: the product's
        operand and sums, and the R sums each read at its row's offset."""
        g, lay = self.g, self.lay
        groups, kg = self.result.shape[:2]
        self.operand = _blocks(self.planes[:, :, :lay.cols], lay.block)
        self.sums = _blocks(sums.reshape(groups, -1, lay.cols), lay.block)
        by_row = sums.reshape(groups, g.r, kg, lay.cols).transpose(0, 2, 1, 3)
        self.shifted = _blocks(_shifted_rows(by_row, lay.reach // (g.r - 1), lay.summed),
                               lay.sum_block)
        self.row_sums = _blocks(self.result[:, :, None], lay.sum_block)

    def _row_products_views(self, sums: np.ndarray) -> None:
        """The views of the accumulated form, in column blocks: each filter row's operand
        (the planes at its row's offset), the result and one row's product."""
        g, lay = self.g, self.lay
        step = lay.reach // (g.r - 1) if g.r > 1 else 0
        self.row_views = [_blocks(self.planes[:, :, r * step:r * step + lay.summed],
                                  lay.block) for r in range(g.r)]
        self.products = _blocks(self.result, lay.block)
        self.tmp = sums.reshape(self.result.shape) if g.r > 1 else None
        self.tmp_products = _blocks(self.tmp, lay.block) if g.r > 1 else None

    def run(self, x, out, chunk: _Chunk, filters: np.ndarray) -> None:
        """The chunk's planes filled, its products run and its result stored."""
        g = self.g
        if self.buffers.zeroed is not self:  # another pass's data lies in the padding
            self.rows[...] = 0
            self.buffers.zeroed = self
        self._fill(x, chunk)
        if g.s > 1:
            np.copyto(self.shifts[1], self.shifts[0])
        if self.plan.taps_in_rows:
            self._taps_in_rows_products(filters[chunk.g0:chunk.g1])
        else:
            self._row_products(filters[:, chunk.g0:chunk.g1])
        kg = g.k // g.groups
        out[chunk.n0:chunk.n1, chunk.g0 * kg:chunk.g1 * kg, chunk.p0:chunk.p1] = self.store

    def _fill(self, x, chunk: _Chunk) -> None:
        """The first plane: the chunk's input rows of each channel, the images side by
        side, the padding zero (the columns between images are never written)."""
        g = self.g
        cg = g.c // g.groups
        top, _, left, _ = g.padding
        first = chunk.p0 - top  # the input row of the plane's first row
        lo, hi = max(first, 0), min(first + self.rows.shape[1], g.h)
        if lo > first:
            self.rows[:, :lo - first] = 0
        if hi - first < self.rows.shape[1]:
            self.rows[:, max(hi - first, 0):] = 0
        if hi > lo:
            self.rows[:, lo - first:hi - first, :, left:left + g.w] = \
                x[chunk.n0:chunk.n1, chunk.g0 * cg:chunk.g1 * cg, lo:hi].transpose(1, 2, 0, 3)

    def _taps_in_rows_products(self, filters: np.ndarray) -> None:
        """One product a group (in column blocks) giving each filter row's sum over the
        grid and its reach, then the R sums, each read at its row's offset, added by a
        product with a row of ones."""
        np.matmul(filters[:, None], self.operand, out=self.sums)
        np.matmul(self.buffers.ones, self.shifted, out=self.row_sums)

    def _row_products(self, filters: np.ndarray) -> None:
        """Each filter row's product (in column blocks) on the planes offset by its row,
        accumulated (the first written in place)."""
        np.matmul(filters[0][:, None], self.row_views[0], out=self.products)
        for r in range(1, self.g.r):
            np.matmul(filters[r][:, None], self.row_views[r], out=self.tmp_products)
            self.result += self.tmp


def _conv_rows(x, weight, g, out) -> None:
    """Stride one: the chunks run through the passes of their shapes."""
    plan = _rows_plan(g, x.dtype)
    chunks = _rows_chunks(g, plan, x.itemsize)
    filters = _rows_filters(weight, g, plan)
    buffers = _Buffers(g, plan, x.dtype, chunks[0])
    passes = {}
    for chunk in chunks:
        shape = _shape(chunk)
        if shape not in passes:
            passes[shape] = _RowsPass(g, buffers, *shape)
        passes[shape].run(x, out, chunk, filters)


# -- strides above one: gathered windows --------------------------------------------------

class _Phases(NamedTuple):
    """A gathered chunk's padded input, its columns split by their remainder mod the column
    stride, so that each tap's windows are runs of Q contiguous elements."""

    in_rows: int  # input rows the chunk's output rows read
    width: int    # columns of a phase: those a tap reads, in whole strides


def _phases(g, rows: int) -> _Phases:
    (sh, sw), (dh, dw) = g.stride, g.dilation
    read = (g.q - 1) * sw + (g.s - 1) * dw + 1  # padded columns the taps read
    return _Phases((rows - 1) * sh + (g.r - 1) * dh + 1, -(-read // sw))


def _gathered_bytes(g, images: int, rows: int, itemsize: int) -> int:
    """A gathered chunk's buffers: its padded input and its windows."""
    lay = _phases(g, rows)
    return itemsize * images * g.c * (lay.in_rows * g.stride[1] * lay.width
                                      + g.r * g.s * rows * g.q)


def _gathered_chunks(g, itemsize: int) -> list[_Chunk]:
    """Chunks within :data:`CHUNK_BYTES`: several whole images, else bands of one image's
    output rows (one row at least); near-equal, the largest first."""
    whole = _gathered_bytes(g, 1, g.p, itemsize)
    images, rows = _even(g.n, CHUNK_BYTES // whole), g.p
    if whole > CHUNK_BYTES:
        rows = _even(g.p, max(r for r in range(1, g.p + 1)
                              if r == 1 or _gathered_bytes(g, 1, r, itemsize) <= CHUNK_BYTES))
    chunks = [_Chunk(n0, min(g.n, n0 + images), p0, min(g.p, p0 + rows), 0, g.groups)
              for n0 in range(0, g.n, images) for p0 in range(0, g.p, rows)]
    return sorted(chunks, key=_shape, reverse=True)


class _GatherBuffers:
    """A gathered chunk's buffers, made for the largest chunk and reused by the others."""

    def __init__(self, g, dtype, chunk: _Chunk):
        images, rows = chunk.n1 - chunk.n0, chunk.p1 - chunk.p0
        lay = _phases(g, rows)
        self.padded = np.zeros(images * g.c * lay.in_rows * g.stride[1] * lay.width, dtype)
        self.cols = np.empty(g.c * g.r * g.s * images * rows * g.q, dtype)
        self.zeroed = None  # the chunk shape whose padding zeros the padded input holds


def _conv_gathered(x, weight, g, out) -> None:
    """Strides above one: each chunk's padded input filled, its windows gathered, and one
    product a group and image written into the output in place."""
    chunks = _gathered_chunks(g, x.itemsize)
    buffers = _GatherBuffers(g, x.dtype, chunks[0])
    cg, kg = _group_sizes(g)
    filters = weight.reshape(1, g.groups, kg, cg * g.r * g.s)
    for chunk in chunks:
        padded = _fill_phases(buffers, x, g, chunk)
        images, rows = chunk.n1 - chunk.n0, chunk.p1 - chunk.p0
        cols = _view(buffers.cols, g.c, g.r, g.s, images, rows, g.q)
        for r in range(g.r):
            for t in range(g.s):
                cols[:, r, t] = _tap_windows(padded, g, rows, r, t).transpose(1, 0, 2, 3)
        by_image = cols.reshape(g.groups, -1, images, rows * g.q).transpose(2, 0, 1, 3)
        np.matmul(filters, by_image, out=out[chunk.n0:chunk.n1, :, chunk.p0:chunk.p1]
                  .reshape(images, g.groups, kg, rows * g.q))


def _fill_phases(buffers: _GatherBuffers, x, g, chunk: _Chunk) -> np.ndarray:
    """The chunk's input rows, zero-padded, as (images, C, rows, phase, column): padded
    column j at phase j mod sw, column j // sw."""
    (sh, sw), _ = g.stride, g.dilation
    top, _, left, _ = g.padding
    images, rows = chunk.n1 - chunk.n0, chunk.p1 - chunk.p0
    lay = _phases(g, rows)
    padded = _view(buffers.padded, images, g.c, lay.in_rows, sw, lay.width)
    if buffers.zeroed != (images, rows):  # another shape: its zeros lie elsewhere
        padded[...] = 0
        buffers.zeroed = (images, rows)
    first = chunk.p0 * sh - top  # the input row of the padded input's first row
    lo, hi = max(first, 0), min(first + lay.in_rows, g.h)
    padded[:, :, :max(lo - first, 0)] = 0
    padded[:, :, max(hi - first, 0):] = 0
    for phase in range(sw):
        w0 = (phase - left) % sw  # the first input column of this phase
        count = min(-(-(g.w - w0) // sw), lay.width - (w0 + left) // sw)
        if hi > lo and count > 0:
            start = (w0 + left) // sw
            padded[:, :, lo - first:hi - first, phase, start:start + count] = \
                x[chunk.n0:chunk.n1, :, lo:hi, w0:w0 + (count - 1) * sw + 1:sw]
    return padded


def _tap_windows(padded: np.ndarray, g, rows: int, r: int, t: int) -> np.ndarray:
    """Tap (r, t)'s windows over the chunk, (images, C, rows, Q): from the phase of its
    column offset, each window row a run of Q contiguous elements."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    phase, shift = (t * dw) % sw, (t * dw) // sw
    return padded[:, :, r * dh:r * dh + (rows - 1) * sh + 1:sh, phase, shift:shift + g.q]
