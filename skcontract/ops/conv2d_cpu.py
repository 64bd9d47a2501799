"""conv2d on the CPU: BLAS products over chunks of the input, each tap's operand one
contiguous run of a plane the chunk's input is copied into, so that no window is gathered
element by element.

**Planes.** A chunk (some images, a band of their output rows, some groups) lies in planes
of its padded input rows, each row holding the chunk's images side by side, every image
followed by at least as many zeros as the taps read past it. Over such a flat row-major
plane the output grid's point (p, i, q) (row p, image i, column q) reads, at tap (r, t),
the element ``(p + r dh) width + i slot + q + t dw``: one offset a tap, so a tap's
operand over the whole grid is one contiguous view (the grid holds a few thrown-away
columns after each image's Q, which the store leaves out).

**Stride one, narrow filters** (:func:`_conv_rows`). S - 1 copies of a chunk's planes,
shifted by ``t dw`` elements, lie after them, so that a group's S x C/G planes are the rows
of one matrix, which serves every filter column at once; each filter row is one more
offset of the grid width. The products run a group at a time on the planes as they lie,
in one of two forms (:func:`_rows_plan`):

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
threads. Chunks do not run on threads of their own: their NumPy calls are short, each
thread waits for the interpreter after every call the other holds it through, and a
waiting thread's core sleeps and wakes slowly on a virtual machine.

**Gathered taps** (:func:`_conv_gathered`): strides above one, and stride-one layers whose
filters outweigh their input (:func:`gathers`). A chunk's padded input is split into
phases (row mod stride, column mod stride), each a plane as above, so that every tap reads
one phase at one offset; the R S taps' runs are copied into one (C R S) x grid operand
and multiplied, one product a group, by the filters as they lie (no reordered copy, no
sums of partial products). Where output rows are long (:data:`INPLACE_MIN_Q`) the taps
are copied as each image's windows instead and each image's product is written into the
output in place. **Pointwise** convolutions are one product an image on the input as it
lies. **Depthwise** and other **grouped** convolutions in float32 and float64, and the
one-group layers where it measured faster (:func:`skcontract.host.grouped.kernel_takes`),
run the direct C kernels (:mod:`skcontract.host.depthwise`, :mod:`skcontract.host.grouped`)
where the host can build them; the forms above are theirs otherwise.

Memory: besides the caller's input and the output, a chunk's buffers take at most
:data:`~.cpu_buffers.CHUNK_BYTES` (one output row of one image and one group where even
that is larger, one row of one image for the tap regions), kept for the next call on the
same thread (:func:`~.cpu_buffers.scratch`); the planes and the tap regions also hold the
filters reordered, one copy of the weight a call.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..host.depthwise import depthwise_cpu
from ..host.grouped import grouped_cpu
from .conv_regions import conv_regions
from .cpu_buffers import CHUNK_BYTES, even, scratch

EMPTY = "empty"
ZEROS = "zeros"
POINTWISE = "pointwise product"
DEPTHWISE = "depthwise kernel"
DIRECT = "direct kernel"
GATHERED = "gathered taps"
PLANES = "shifted planes"
REGIONS = "tap regions"
"""The routes a CPU plan (:mod:`.conv_cpu_plan`) names and :func:`conv2d_cpu` runs."""

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
GATHER_EXTRA_COPIES = 2
"""Elements the gathered form may copy beyond the planes' copies for each element of the
passes it spares them (:func:`gathers`): its copies are contiguous runs and its one
product a group is longer than their R, so it stays ahead until its extra copies are about
twice those passes (ResNet-50's stage-3 3x3 gathers faster; its stage-2 3x3 and the
grouped and depthwise layers run faster on the planes)."""
INPLACE_MIN_Q = 64
"""Output row length from which the gathered form copies each image's windows (runs of Q,
long enough to copy near a contiguous copy's speed) and writes its products into the
output in place, sparing the store; shorter rows are gathered as runs over the whole grid
and stored (a stem on full-size images goes in place, a strided 3x3 on its feature maps
through the grid)."""


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


def conv2d_cpu(x: np.ndarray, weight: np.ndarray, g, plan) -> np.ndarray:
    """The (N, K, P, Q) convolution ``g`` (a checked ConvGeometry) of the (N, C, H, W)
    ``x`` with ``weight``, both of the compute dtype, by the route ``plan`` (a
    :class:`~.conv_cpu_plan.CpuConvPlan` of them) names."""
    if plan.route == DEPTHWISE:
        return depthwise_cpu(x, weight, g, plan.run)
    if plan.route == DIRECT:
        return grouped_cpu(x, weight, g, plan.run)
    out = np.empty((g.n, g.k, g.p, g.q), x.dtype)
    if plan.route == EMPTY:
        return out
    if plan.route == ZEROS:  # nothing to sum: zeros, as the GPU's bias-only route gives
        out.fill(0)
    elif plan.route == POINTWISE:  # one product an image, on the input as it lies
        kg, cg = g.k // g.groups, g.c // g.groups
        np.matmul(weight.reshape(g.groups, kg, cg), x.reshape(g.n, g.groups, cg, -1),
                  out=out.reshape(g.n, g.groups, kg, -1))
    elif plan.route == GATHERED:
        _conv_gathered(x, weight, g, out)
    elif plan.route == REGIONS:
        conv_regions(x, weight, g, out)
    else:
        _conv_rows(x, weight, g, out)
    return out


def is_pointwise(g) -> bool:
    """A 1 x 1 convolution reading every pixel (stride 1, no padding), not depthwise."""
    return (g.r, g.s, g.stride, g.padding) == (1, 1, (1, 1), (0, 0, 0, 0)) and g.c != g.groups


def gathers(g) -> bool:
    """Strides above one; at stride one, layers where gathering every tap (R S C planes over
    the output grid, (R - 1) S C more than the planes of :func:`_conv_rows`) copies less
    than :data:`GATHER_EXTRA_COPIES` times that form's extra passes: the filters reordered
    (K C/G R S elements) and the R - 1 products or row sums added over the output (K x grid
    each). Deep layers on small images (ResNet-50's stages 3 and 4) gather."""
    if g.stride != (1, 1):
        return True
    _, _, left, right = g.padding
    grid = g.n * g.p * (g.w + max(left, right, g.q - g.w))
    extra = (g.r - 1) * g.s * g.c * grid
    saved = g.k * (g.c // g.groups) * g.r * g.s + (g.r - 1) * g.k * grid
    return extra < GATHER_EXTRA_COPIES * saved


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
    sum_block = even(grid, plan.block or grid)
    summed = _round_up(grid, sum_block)
    if plan.taps_in_rows:  # one product over the grid and its reach, then the row sums
        block = even(summed + reach, plan.block)
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
    """Chunks whose buffers take at most the budget: groups of all the images and rows,
    else one group of some images, else one group of a band of one image's rows; the
    largest first, those of a shape together."""
    budget = min(CHUNK_BYTES, DENSE_CHUNK_BYTES if g.groups == 1 else GROUPED_CHUNK_BYTES)
    whole = _rows_bytes(g, plan, g.n, g.p, itemsize)
    step = even(g.groups, budget // whole)
    images, rows = g.n, g.p
    if whole > budget:
        images = even(g.n, max(i for i in range(1, g.n + 1)
                                if i == 1 or _rows_bytes(g, plan, i, g.p, itemsize) <= budget))
        if images == 1:
            rows = even(g.p, max(r for r in range(1, g.p + 1)
                                  if r == 1 or _rows_bytes(g, plan, 1, r, itemsize) <= budget))
    chunks = [_Chunk(n0, min(g.n, n0 + images), p0, min(g.p, p0 + rows), g0,
                     min(g.groups, g0 + step))
              for n0 in range(0, g.n, images) for p0 in range(0, g.p, rows)
              for g0 in range(0, g.groups, step)]
    return sorted(chunks, key=_shape, reverse=True)  # each shape's chunks in one run


def _shape(chunk: _Chunk) -> tuple[int, int, int]:
    """(images, rows, groups): the chunks of one shape run through one pass."""
    return chunk.n1 - chunk.n0, chunk.p1 - chunk.p0, chunk.g1 - chunk.g0


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
        self.planes, self.sums, self.result = scratch(
            dtype, groups * cg * g.s * lay.length, groups * _sums_size(g, plan, lay),
            groups * kg * lay.summed)
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
        self.band = None  # the plane rows the last chunk's input rows filled
        planes = _view(buffers.planes, groups, g.s, cg, lay.length)
        self.rows = planes[:, 0].reshape(groups, cg, -1, images, lay.slot)
        if g.s > 1:
            self.shifts = self._shift_views(planes)
        self.planes = planes.reshape(groups, g.s * cg, lay.length)  # a group's rows (t, c)
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
        first, dw = planes[:, 0], self.g.dilation[1]
        groups, cg = first.shape[:2]
        source = as_strided(first[..., dw:], shape=(groups, self.g.s - 1, cg, self.lay.cols),
                            strides=(first.strides[0], dw * first.itemsize, *first.strides[1:]),
                            writeable=False)
        return source, planes[:, 1:, :, :self.lay.cols]

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
            self.buffers.zeroed, self.band = self, None
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
        """The first plane of each group: the chunk's input rows of each channel, the
        images side by side, the padding zero (the columns between images are never
        written)."""
        g = self.g
        cg = g.c // g.groups
        top, _, left, _ = g.padding
        first = chunk.p0 - top  # the input row of the plane's first row
        lo, hi = max(first, 0), min(first + self.rows.shape[2], g.h)
        groups, images = chunk.g1 - chunk.g0, chunk.n1 - chunk.n0
        band = (lo - first, max(hi - first, 0))  # the plane rows this chunk's input fills
        if band != self.band:  # rows the last chunk filled may be padding here
            self.rows[:, :, :band[0]] = 0
            self.rows[:, :, band[1]:] = 0
            self.band = band
        if hi > lo:
            self.rows[:, :, lo - first:hi - first, :, left:left + g.w] = \
                x[chunk.n0:chunk.n1, chunk.g0 * cg:chunk.g1 * cg, lo:hi] \
                .reshape(images, groups, cg, hi - lo, g.w).transpose(1, 2, 3, 0, 4)

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


# -- gathered taps: strides above one, and stride-one layers whose filters are wide -------

class _Phases(NamedTuple):
    """A gathered chunk's layout: its padded input split into (row mod stride, column mod
    stride) phases, each a plane holding the chunk's images side by side, so that a tap's
    operand over the whole output grid is one contiguous run of one phase plane."""

    slot: int    # an image's columns in a phase plane
    width: int   # a phase row: the chunk's images side by side
    rows: int    # phase rows: those the taps read, and one the last row's spill reads
    grid: int    # output grid elements: output rows x width


def _phases(g, images: int, rows: int) -> _Phases:
    """The layout of a gathered chunk of ``images`` images and ``rows`` output rows. An
    image's slot holds its phase columns and its output columns; where the taps run over
    the whole grid (:class:`_GatherPass`), a tap's reads past an image's output columns may
    end in the zero columns that lead the next image's."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    left = g.padding[2]
    lead = min(-((b - left) // sw) for b in range(sw))  # zero columns an image's phases lead
    spill = 0 if _inplace(g) else lead
    slot = max(g.q + max((g.s - 1) * dw // sw - spill, 0), (g.w - 1 + left) // sw + 1)
    width = images * slot
    return _Phases(slot, width, rows + (g.r - 1) * dh // sh + 1, rows * width)


def _inplace(g) -> bool:
    """Whether the gathered form writes its products into the output in place
    (:data:`INPLACE_MIN_Q`)."""
    return g.q >= INPLACE_MIN_Q


def _gathered_bytes(g, images: int, rows: int, itemsize: int) -> int:
    """A gathered chunk's buffers: its phase planes, its taps' operand and its result."""
    lay = _phases(g, images, rows)
    sh, sw = g.stride
    return itemsize * (g.c * sh * sw * lay.rows * lay.width
                       + (g.c * g.r * g.s + g.k) * lay.grid)


def _gathered_chunks(g, itemsize: int) -> list[_Chunk]:
    """Chunks within :data:`~.cpu_buffers.CHUNK_BYTES`: several whole images, else bands of
    one image's output rows (one row at least); near-equal, the largest first."""
    images, rows = g.n, g.p
    if _gathered_bytes(g, g.n, g.p, itemsize) > CHUNK_BYTES:
        images = even(g.n, max(i for i in range(1, g.n + 1) if i == 1 or
                                _gathered_bytes(g, i, g.p, itemsize) <= CHUNK_BYTES))
        if images == 1:
            rows = even(g.p, max(r for r in range(1, g.p + 1) if r == 1 or
                                  _gathered_bytes(g, 1, r, itemsize) <= CHUNK_BYTES))
    chunks = [_Chunk(n0, min(g.n, n0 + images), p0, min(g.p, p0 + rows), 0, g.groups)
              for n0 in range(0, g.n, images) for p0 in range(0, g.p, rows)]
    return sorted(chunks, key=_shape, reverse=True)  # each shape's chunks in one run


class _GatherBuffers:
    """Flat buffers for the largest gathered chunk, which every chunk's views share."""

    def __init__(self, g, dtype, chunk: _Chunk):
        images, rows = chunk.n1 - chunk.n0, chunk.p1 - chunk.p0
        lay = _phases(g, images, rows)
        sh, sw = g.stride
        self.planes, self.taps, self.result = scratch(
            dtype, g.c * sh * sw * lay.rows * lay.width, g.c * g.r * g.s * lay.grid,
            g.k * lay.grid)
        self.zeroed = None  # the pass whose padding zeros the phase planes hold


class _GatherPass:
    """The views through which the gathered chunks of one shape (images, rows) run: their
    taps as runs of the phase planes over the whole grid, one product a group and a store;
    or, where output rows are at least :data:`INPLACE_MIN_Q` long, as each image's windows,
    one product a group and image written into the output in place."""

    def __init__(self, g, buffers: _GatherBuffers, images: int, rows: int):
        (sh, sw), (dh, dw) = g.stride, g.dilation
        self.g, self.buffers, self.inplace = g, buffers, _inplace(g)
        self.lay = lay = _phases(g, images, rows)
        self.planes = _view(buffers.planes, g.c, sh, sw, lay.rows, images, lay.slot)
        if self.inplace:  # each image's (rows, Q) windows
            taps = _view(buffers.taps, g.c, g.r, g.s, images, rows, g.q)
        else:  # one run over the grid
            taps = _view(buffers.taps, g.c, g.r, g.s, lay.grid)
        self.runs = []  # (destination, source): each tap's operand rows, from its phase
        for r in range(g.r):
            for t in range(g.s):
                phase = self.planes[:, r * dh % sh, t * dw % sw]
                row, col = r * dh // sh, t * dw // sw
                if self.inplace:
                    source = phase[:, row:row + rows, :, col:col + g.q].transpose(0, 2, 1, 3)
                else:
                    start = row * lay.width + col
                    source = phase.reshape(g.c, -1)[:, start:start + lay.grid]
                self.runs.append((taps[:, r, t], source))
        cg, kg = _group_sizes(g)
        inner = cg * g.r * g.s
        if self.inplace:
            self.operand = _view(buffers.taps, g.groups, inner, images, rows * g.q) \
                .transpose(2, 0, 1, 3)
        else:
            self.operand = _view(buffers.taps, g.groups, inner, lay.grid)
            result = _view(buffers.result, g.k, lay.grid)
            self.result = result.reshape(g.groups, kg, lay.grid)
            self.store = result.reshape(g.k, rows, images, lay.slot)[..., :g.q] \
                .transpose(2, 0, 1, 3)

    def run(self, x, filters, out, chunk: _Chunk) -> None:
        """The chunk's phase planes filled, its taps copied into the operand and its
        products run."""
        if self.buffers.zeroed is not self:  # another pass's data lies in the padding
            self.planes[...] = 0
            self.buffers.zeroed = self
        self._fill(x, chunk)
        for taps, source in self.runs:
            taps[...] = source
        g = self.g
        if self.inplace:
            images, rows = chunk.n1 - chunk.n0, chunk.p1 - chunk.p0
            np.matmul(filters, self.operand, out=out[chunk.n0:chunk.n1, :, chunk.p0:chunk.p1]
                      .reshape(images, g.groups, g.k // g.groups, rows * g.q))
        else:
            np.matmul(filters, self.operand, out=self.result)
            out[chunk.n0:chunk.n1, :, chunk.p0:chunk.p1] = self.store

    def _fill(self, x, chunk: _Chunk) -> None:
        """Each phase plane: the chunk's input rows and columns of that phase, the padding
        rows zero (the columns beside each image's are never written)."""
        g = self.g
        (sh, sw), top, left = g.stride, g.padding[0], g.padding[2]
        first = chunk.p0 * sh - top  # the input row of the chunk's padded row 0
        for a in range(sh):
            i0 = max(0, -((first + a) // sh))  # the first phase row on an input row
            i1 = max(i0, min(self.lay.rows, -(-(g.h - first - a) // sh)))
            rows = self.planes[:, a]
            rows[:, :, :i0] = 0
            rows[:, :, i1:] = 0
            h0 = first + a + i0 * sh
            for b in range(sw):
                c0 = -((b - left) // sw)  # the first phase column on an input column
                w0 = c0 * sw + b - left
                count = -(-(g.w - w0) // sw)  # the slot holds them all (_phases)
                if i1 > i0 and count > 0:
                    rows[:, b, i0:i1, :, c0:c0 + count] = \
                        x[chunk.n0:chunk.n1, :, h0:h0 + (i1 - i0 - 1) * sh + 1:sh,
                          w0:w0 + (count - 1) * sw + 1:sw].transpose(1, 2, 0, 3)


def _conv_gathered(x, weight, g, out) -> None:
    """Gathered taps: the chunks run through the passes of their shapes, the filters as
    they lie ((G, K/G, C/G R S), the taps' order)."""
    chunks = _gathered_chunks(g, x.itemsize)
    cg, kg = _group_sizes(g)
    filters = weight.reshape(g.groups, kg, cg * g.r * g.s)
    buffers = _GatherBuffers(g, x.dtype, chunks[0])
    passes = {}
    for chunk in chunks:
        shape = _shape(chunk)[:2]
        if shape not in passes:
            passes[shape] = _GatherPass(g, buffers, *shape)
        passes[shape].run(x, filters, out, chunk)
