"""conv2d on the CPU where padding holds a large share of the taps: the output split into
rectangles over which the same taps read the input, each rectangle's in-bounds taps
gathered into one operand, one BLAS product a group. The taps that read only padding are
never copied or multiplied.

A dilated 3 x 3 on a small map (DeepLab's ASPP branch, dilation 12 on 33 x 33) reads
padding at 43% of its (output point, tap) pairs; a dense form multiplies those zeros too.
Along each dimension a tap reads the input over one interval of output positions; the
intervals' ends cut the output rows into bands and the columns into bands, each band with
its own taps (contiguous in r, and in s), and each rectangle (a row band by a column band)
with their product::

    output rows   taps r read in bounds        (ASPP: 33 rows, d = 12, padding 12)
    0 .. 11       r = 1, 2
    12 .. 20      r = 0, 1, 2
    21 .. 32      r = 0, 1

A rectangle's operand is ``(G, T C/G, images x rows x columns)`` for its T taps in (r, s)
order, each tap's block one strided copy of the input. The filters are reordered once a
call to ``(G, K/G, R, S, C/G)``, so that a rectangle with every column tap takes its
filters as one view, one product a group; any other rectangle runs one product a filter
row (each a view), accumulated. Its result is stored into the output's rectangle.
Rectangles larger than :data:`~.cpu_buffers.CHUNK_BYTES` of buffers run in chunks of
images, then of rows.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .cpu_buffers import CHUNK_BYTES, even, scratch

__all__ = ["REGIONS_MAX_VALID_SHARE", "REGIONS_MIN_RUN", "REGIONS_MIN_SKIPPED", "Band", "bands",
           "layer_bands", "valid_share", "takes", "conv_regions"]

REGIONS_MAX_VALID_SHARE = 0.7
"""The share of (output point, tap) pairs reading the input in bounds at or below which a
layer may run by regions: the other forms multiply every tap, padding included, but copy
longer runs (at 0.77, DeepLab's dilation-6 branch, the regions measured slower)."""
REGIONS_MIN_RUN = 4096
"""Elements a tap's copy into a rectangle's operand moves at least, on average over the
rectangles, for a layer to run by regions: each copy is one NumPy call (C images x rows x
columns elements), and a filter wider than a small map cuts it into so many rectangles
that the calls cost more than the taps skipped (a 65 x 65 filter on a one-channel 40 x 40
map: 7 s against 2 ms)."""
REGIONS_MIN_SKIPPED = 384
"""The multiply-adds the regions skip a filter element (images x output points x the
share of taps out of bounds) from which they run: they reorder the filters first, a copy
of the filters that costs about as much as a few hundred multiply-adds an element (on
7 x 7 maps, 16 images, dilation 2, 267 a filter element skipped did not pay for it)."""


class Band(NamedTuple):
    """Output positions ``lo:hi`` along one dimension and the taps ``t0:t1`` that read the
    input in bounds at every one of them."""

    lo: int
    hi: int
    t0: int
    t1: int


def _interval(tap: int, out: int, size: int, stride: int, dilation: int,
              pad: int) -> tuple[int, int]:
    """The output positions ``[lo, hi)`` at which ``tap`` reads within ``size`` inputs."""
    first = tap * dilation - pad  # the input position output 0 reads
    lo = max(0, -(first // stride)) if first < 0 else 0
    hi = min(out, (size - 1 - first) // stride + 1) if size - 1 >= first else 0
    return lo, max(lo, hi)


def bands(out: int, size: int, taps: int, stride: int, dilation: int,
          pad: int) -> list[Band]:
    """The bands of ``out`` output positions along a dimension of ``size`` inputs, each with
    the contiguous taps that read in bounds all over it (a band no tap reads in is left out:
    its outputs are zeros)."""
    spans = [_interval(t, out, size, stride, dilation, pad) for t in range(taps)]
    cuts = sorted({0, out, *(x for span in spans for x in span if 0 < x < out)})
    result = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        inside = [t for t, (a, b) in enumerate(spans) if a <= lo and hi <= b]
        if inside:
            result.append(Band(lo, hi, inside[0], inside[-1] + 1))
    return result


def layer_bands(g) -> tuple[list[Band], list[Band]]:
    """The layer's row bands and column bands (:func:`bands`)."""
    (sh, sw), (dh, dw), (top, _, left, _) = g.stride, g.dilation, g.padding
    return bands(g.p, g.h, g.r, sh, dh, top), bands(g.q, g.w, g.s, sw, dw, left)


def valid_share(g) -> float:
    """The share of the layer's (output point, tap) pairs that read the input in bounds."""
    return _pairs_in_bounds(*layer_bands(g)) / max(1, g.p * g.q * g.r * g.s)


def _pairs_in_bounds(row_bands: list[Band], col_bands: list[Band]) -> int:
    """The (output point, tap) pairs reading in bounds: each band's positions times taps."""
    rows = sum((b.hi - b.lo) * (b.t1 - b.t0) for b in row_bands)
    return rows * sum((b.hi - b.lo) * (b.t1 - b.t0) for b in col_bands)


def takes(g) -> bool:
    """Whether the layer runs by regions: one group (grouped layers' products a group are
    too small to pay for the rectangles' calls), padding holding enough of its taps
    (:data:`REGIONS_MAX_VALID_SHARE`, :data:`REGIONS_MIN_SKIPPED`), and copies long enough
    (:data:`REGIONS_MIN_RUN`): a tap's copy into a rectangle's operand moves, on average,
    the pairs in bounds times the channels and images over the (rectangle, tap) copies."""
    if g.groups != 1:
        return False
    row_bands, col_bands = layer_bands(g)
    pairs = _pairs_in_bounds(row_bands, col_bands)
    share = pairs / max(1, g.p * g.q * g.r * g.s)
    copies = sum(b.t1 - b.t0 for b in row_bands) * sum(b.t1 - b.t0 for b in col_bands)
    return share <= REGIONS_MAX_VALID_SHARE and \
        g.n * g.p * g.q * (1 - share) >= REGIONS_MIN_SKIPPED and \
        pairs * g.c * g.n >= REGIONS_MIN_RUN * copies


def conv_regions(x: np.ndarray, weight: np.ndarray, g, out: np.ndarray) -> None:
    """Write the convolution ``g`` of the (N, C, H, W) ``x`` with ``weight`` into the
    (N, K, P, Q) ``out``, one rectangle of taps at a time (see the module)."""
    row_bands, col_bands = layer_bands(g)
    _zero_outside(out, row_bands, col_bands)
    filters = _Filters(weight, g)
    for rb in row_bands:
        for cb in col_bands:
            for n0, n1, p0, p1 in _chunks(g, rb, cb, x.itemsize):
                _rectangle(x, filters, g, out, rb._replace(lo=p0, hi=p1), cb, n0, n1)


class _Filters:
    """The filters with each group's taps and channels as a product's inner index, in
    (r, s, c) order: the taps of a rectangle with every column tap are one contiguous run,
    a filter row's of any rectangle too."""

    def __init__(self, weight: np.ndarray, g):
        cg, kg = g.c // g.groups, g.k // g.groups
        self.g = g
        self.rs = np.ascontiguousarray(
            weight.reshape(g.groups, kg, cg, g.r, g.s).transpose(0, 1, 3, 4, 2))

    def runs(self, rb: Band, cb: Band) -> list[np.ndarray]:
        """The filters of a rectangle's products, each (G, K/G, taps C/G), a view: one
        product where it has every column tap, else one a filter row, accumulated."""
        groups, kg = self.rs.shape[:2]
        if (cb.t0, cb.t1) == (0, self.g.s):
            return [self.rs[:, :, rb.t0:rb.t1].reshape(groups, kg, -1)]
        return [self.rs[:, :, r, cb.t0:cb.t1].reshape(groups, kg, -1)
                for r in range(rb.t0, rb.t1)]


def _zero_outside(out: np.ndarray, row_bands: list[Band], col_bands: list[Band]) -> None:
    """Zeros where no tap reads the input: the rows and columns outside every band."""
    rows = np.ones(out.shape[2], bool)
    cols = np.ones(out.shape[3], bool)
    for b in row_bands:
        rows[b.lo:b.hi] = False
    for b in col_bands:
        cols[b.lo:b.hi] = False
    out[:, :, rows] = 0
    out[:, :, :, cols] = 0


def _chunk_bytes(g, taps: int, images: int, rows: int, cols: int, itemsize: int) -> int:
    """A chunk's buffers: its operand, its result and one filter row's product."""
    return itemsize * images * rows * cols * (taps * (g.c // g.groups) * g.groups + 2 * g.k)


def _chunks(g, rb: Band, cb: Band, itemsize: int):
    """``(n0, n1, p0, p1)``: the rectangle's chunks of images and rows whose buffers take at
    most :data:`~.cpu_buffers.CHUNK_BYTES` (one row of one image at least)."""
    taps, rows, cols = (rb.t1 - rb.t0) * (cb.t1 - cb.t0), rb.hi - rb.lo, cb.hi - cb.lo
    images = g.n
    if _chunk_bytes(g, taps, g.n, rows, cols, itemsize) > CHUNK_BYTES:
        per_image = _chunk_bytes(g, taps, 1, rows, cols, itemsize)
        images = even(g.n, CHUNK_BYTES // per_image)
        if per_image > CHUNK_BYTES:
            rows = even(rows, CHUNK_BYTES // _chunk_bytes(g, taps, 1, 1, cols, itemsize))
    for n0 in range(0, g.n, images):
        for p0 in range(rb.lo, rb.hi, rows):
            yield n0, min(g.n, n0 + images), p0, min(rb.hi, p0 + rows)


def _rectangle(x, filters: _Filters, g, out, rb: Band, cb: Band, n0: int, n1: int) -> None:
    """The output rectangle ``rb`` x ``cb`` of images ``n0:n1``: its taps' operand copied,
    its products run (:meth:`_Filters.runs`), the result stored."""
    (sh, sw), (dh, dw), (top, _, left, _) = g.stride, g.dilation, g.padding
    cg, kg = g.c // g.groups, g.k // g.groups
    images, rows, cols = n1 - n0, rb.hi - rb.lo, cb.hi - cb.lo
    count, grid = (rb.t1 - rb.t0) * (cb.t1 - cb.t0), images * rows * cols
    runs = filters.runs(rb, cb)
    operand, result, partial = scratch(x.dtype, g.groups * count * cg * grid, g.k * grid,
                                       g.k * grid if len(runs) > 1 else 0)
    operand = operand.reshape(g.groups, count, cg, images, rows, cols)
    taps = [(r, s) for r in range(rb.t0, rb.t1) for s in range(cb.t0, cb.t1)]
    for tap, (r, s) in enumerate(taps):
        y0, x0 = rb.lo * sh + r * dh - top, cb.lo * sw + s * dw - left
        window = x[n0:n1, :, y0:y0 + (rows - 1) * sh + 1:sh, x0:x0 + (cols - 1) * sw + 1:sw]
        operand[:, tap] = window.reshape(images, g.groups, cg, rows, cols) \
            .transpose(1, 2, 0, 3, 4)
    operand = operand.reshape(g.groups, len(runs), -1, grid)
    result = result.reshape(g.groups, kg, grid)
    partial = partial.reshape(result.shape) if len(runs) > 1 else None
    np.matmul(runs[0], operand[:, 0], out=result)
    for block, run in enumerate(runs[1:], 1):
        np.matmul(run, operand[:, block], out=partial)
        result += partial
    out[n0:n1, :, rb.lo:rb.hi, cb.lo:cb.hi] = \
        result.reshape(g.k, images, rows, cols).transpose(1, 0, 2, 3)
