"""conv2d on the CPU: one BLAS product a filter tap, over chunks of the input.

The padded input of a chunk (a few images, or a band of one image's rows) is laid out as
(C, rows x Wp): each channel's padded rows one after another. At stride 1 the output
grid's point (p, q) reads, at tap (r, t), the element p * Wp + q + (r * dh * Wp + t * dw)
of its channel: so over a grid of P rows of Wp columns (the Q columns wanted and Wp - Q
thrown away), every tap's operand is one contiguous view of the chunk, (C, P * Wp), and no
window is gathered. Each tap is then one product (K/groups x C/groups) @ (C/groups x
P * Wp) per group, accumulated in the chunk's (K, P * Wp) sum, whose first Q columns of
each row are the output's. Strided convolutions, and those with too few channels a group
for a tap's product to run well (:data:`VIEW_MIN_CHANNELS`), gather the taps' (P, Q)
windows into one (C/groups x R x S) x (P x Q) operand of the chunk instead and run one
product (BLAS reads no strided columns). A pointwise convolution is one product an image
on the input as it lies.

Depthwise convolutions (one input channel a group) are not products: each tap adds its
filter values times its view, channel by channel, over chunks small enough to stay in
cache.

Memory: besides the caller's input and the output, a chunk's buffers (its padded input,
the sum and one tap's product) take at most :data:`CHUNK_BYTES`, or one output row band
of one image where even that is larger.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

CHUNK_BYTES = 16 << 20
"""The buffers of one chunk of a product convolution (its padded input, its sum and one
tap's product): large enough that each tap's product is a long BLAS call, small enough to
bound the memory a call takes beside its input and output."""
VIEW_MIN_CHANNELS = 32
"""Channels a group from which each tap runs as its own product on a view of the input;
below it the product's inner dimension is too short for BLAS to run well, and the taps'
windows are gathered into one product with R x S times the inner dimension."""
DEPTHWISE_CHUNK_BYTES = 1 << 20
"""The same for depthwise convolutions, whose taps are elementwise passes over the chunk:
small enough that the passes run in cache."""


class _Chunk(NamedTuple):
    """Images ``n0:n1`` and output rows ``p0:p1`` (all of them where ``n1 - n0 > 1``)."""

    n0: int
    n1: int
    p0: int
    p1: int


def conv2d_cpu(x: np.ndarray, weight: np.ndarray, g) -> np.ndarray:
    """The (N, K, P, Q) convolution ``g`` (a checked ConvGeometry) of the (N, C, H, W)
    ``x`` with ``weight``, both of the compute dtype."""
    out = np.empty((g.n, g.k, g.p, g.q), x.dtype)
    if min(out.shape) == 0:
        return out
    if _pointwise(g):  # one product an image, on the input as it lies
        kg, cg = g.k // g.groups, g.c // g.groups
        np.matmul(weight.reshape(g.groups, kg, cg), x.reshape(g.n, g.groups, cg, -1),
                  out=out.reshape(g.n, g.groups, kg, -1))
        return out
    depthwise = g.c == g.groups
    budget = DEPTHWISE_CHUNK_BYTES if depthwise else CHUNK_BYTES
    for chunk in _chunks(g, x.itemsize, budget):
        padded = _padded_chunk(x, g, chunk)
        out[chunk.n0:chunk.n1, :, chunk.p0:chunk.p1] = _chunk_sum(padded, weight, g, chunk,
                                                                   depthwise)
    return out


def _pointwise(g) -> bool:
    """A 1 x 1 convolution reading every pixel (stride 1, no padding), not depthwise."""
    return (g.r, g.s, g.stride, g.padding) == (1, 1, (1, 1), (0, 0, 0, 0)) and g.c != g.groups


def _padded_width(g) -> int:
    """Wp: the padded input's row length."""
    return g.w + g.padding[2] + g.padding[3]


def _viewed(g) -> bool:
    """Whether each tap is a view of the padded input (stride 1, and depthwise or enough
    channels a group that a tap's product is a long BLAS call); else the taps' windows are
    gathered, into one (C/groups x R x S) x grid operand for products."""
    return g.stride == (1, 1) and (g.c == g.groups or g.c // g.groups >= VIEW_MIN_CHANNELS)


def _grid_width(g) -> int:
    """The output grid's row length: Wp where the taps are views (the columns past Q
    thrown away), Q where they are gathered."""
    return _padded_width(g) if _viewed(g) else g.q


def _in_rows(g, rows: int) -> int:
    """Input rows (padded) that ``rows`` output rows read, plus one that the last row's
    thrown-away columns run into."""
    (sh, _), (dh, _) = g.stride, g.dilation
    return (rows - 1) * sh + (g.r - 1) * dh + 2


def _chunk_bytes(g, images: int, rows: int, itemsize: int) -> int:
    grid = rows * _grid_width(g)
    gathered = 0 if _viewed(g) else g.c * grid * (1 if g.c == g.groups else g.r * g.s) \
        + g.k * grid
    return itemsize * images * (g.c * _in_rows(g, rows) * _padded_width(g) + 2 * g.k * grid
                                + gathered)


def _chunks(g, itemsize: int, budget: int):
    """Chunks whose buffers take at most ``budget`` bytes: several whole images, else bands
    of one image's output rows (one row at least)."""
    whole = _chunk_bytes(g, 1, g.p, itemsize)
    if whole <= budget:
        step = max(1, budget // whole)
        for n0 in range(0, g.n, step):
            yield _Chunk(n0, min(g.n, n0 + step), 0, g.p)
        return
    rows = max(1, max(r for r in range(1, g.p + 1)
                      if r == 1 or _chunk_bytes(g, 1, r, itemsize) <= budget))
    for n in range(g.n):
        for p0 in range(0, g.p, rows):
            yield _Chunk(n, n + 1, p0, min(g.p, p0 + rows))


def _padded_chunk(x: np.ndarray, g, chunk: _Chunk) -> np.ndarray:
    """The chunk's input rows, zero-padded, as (images, C, rows, Wp)."""
    top, _, left, _ = g.padding
    (sh, _), _ = g.stride, g.dilation
    rows = _in_rows(g, chunk.p1 - chunk.p0)
    buf = np.zeros((chunk.n1 - chunk.n0, g.c, rows, _padded_width(g)), x.dtype)
    first = chunk.p0 * sh - top  # the first padded row's input row
    lo, hi = max(first, 0), min(first + rows, g.h)
    if hi > lo:
        buf[:, :, lo - first:hi - first, left:left + g.w] = x[chunk.n0:chunk.n1, :, lo:hi]
    return buf


def _tap_view(padded: np.ndarray, g, rows: int, r: int, t: int) -> np.ndarray:
    """Tap (r, t)'s operand over the chunk, (images, C, rows x Wp): the view whose element
    (p, q) is p * Wp + q + r * dh * Wp + t * dw of each channel's padded rows."""
    _, (dh, dw) = g.stride, g.dilation
    wp = _padded_width(g)
    n, c = padded.shape[:2]
    start = r * dh * wp + t * dw
    return padded.reshape(n, c, -1)[:, :, start:start + rows * wp]


def _tap_windows(padded: np.ndarray, g, rows: int, r: int, t: int) -> np.ndarray:
    """Tap (r, t)'s windows over the chunk, (images, C, rows, Q), a strided view."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    wp = _padded_width(g)
    n, c = padded.shape[:2]
    flat = padded.reshape(n, c, -1)
    return as_strided(flat[:, :, r * dh * wp + t * dw:], shape=(n, c, rows, g.q),
                      strides=(*flat.strides[:2], sh * wp * flat.itemsize,
                               sw * flat.itemsize), writeable=False)


def _chunk_sum(padded: np.ndarray, weight: np.ndarray, g, chunk: _Chunk,
               depthwise: bool) -> np.ndarray:
    """The chunk's (images, K, rows, Q) output: every tap's contribution summed."""
    rows = chunk.p1 - chunk.p0
    width = _grid_width(g)
    n = chunk.n1 - chunk.n0
    acc = np.empty((n, g.k, rows * width), padded.dtype)
    if depthwise:
        _depthwise_taps(acc, padded, weight, g, rows)
    elif _viewed(g):
        _viewed_products(acc, padded, weight, g, rows)
    else:
        _gathered_product(acc, padded, weight, g, rows)
    return acc.reshape(n, g.k, rows, width)[:, :, :, :g.q]


def _taps(g):
    return [(r, t) for r in range(g.r) for t in range(g.s)]


def _viewed_products(acc, padded, weight, g, rows: int) -> None:
    """acc = the sum of each tap's (K/G x C/G) @ (C/G x rows * Wp) product, group by
    group (the first tap's written in place)."""
    groups = g.groups
    cg, kg = g.c // groups, g.k // groups
    n = acc.shape[0]
    sums = acc.reshape(n, groups, kg, -1)
    tmp = None
    # each tap's (groups, K/G, C/G) filters contiguous: BLAS takes no strided matrix
    filters = np.ascontiguousarray(
        weight.reshape(groups, kg, cg, g.r * g.s).transpose(3, 0, 1, 2))
    for i, (r, t) in enumerate(_taps(g)):
        view = _tap_view(padded, g, rows, r, t).reshape(n, groups, cg, -1)
        if i == 0:
            np.matmul(filters[i], view, out=sums)
            continue
        if tmp is None:
            tmp = np.empty_like(sums)
        np.matmul(filters[i], view, out=tmp)
        sums += tmp


def _gathered_product(acc, padded, weight, g, rows: int) -> None:
    """acc = (K/G x C/G*R*S) @ (C/G*R*S x images * rows * Q) a group: the taps' windows
    gathered into one operand (im2col over the chunk), one product a group over all the
    chunk's images (the fewer, longer BLAS calls)."""
    groups = g.groups
    n = acc.shape[0]
    cols = np.empty((g.c, g.r, g.s, n, rows, g.q), padded.dtype)
    for r, t in _taps(g):
        cols[:, r, t] = _tap_windows(padded, g, rows, r, t).transpose(1, 0, 2, 3)
    kg, inner = g.k // groups, (g.c // groups) * g.r * g.s
    sums = np.matmul(weight.reshape(groups, kg, inner), cols.reshape(groups, inner, -1))
    acc.reshape(n, groups, kg, -1)[...] = sums.reshape(groups, kg, n, -1).transpose(2, 0, 1, 3)


def _depthwise_taps(acc, padded, weight, g, rows: int) -> None:
    """acc = the sum of each tap's filter values times its view (or windows), channel by
    channel (K/C outputs an input channel, in order)."""
    per = g.k // g.c
    n = acc.shape[0]
    sums = acc.reshape(n, g.c, per, -1)
    tmp = np.empty_like(sums)
    filters = weight.reshape(g.c, per, g.r, g.s)
    viewed = _viewed(g)
    for i, (r, t) in enumerate(_taps(g)):
        view = _tap_view(padded, g, rows, r, t) if viewed else \
            _tap_windows(padded, g, rows, r, t).reshape(n, g.c, -1)
        np.multiply(view[:, :, None, :], filters[None, :, :, r, t, None],
                    out=sums if i == 0 else tmp)
        if i:
            sums += tmp
