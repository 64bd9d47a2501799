"""The grouped convolution on the CPU (a few channels a group, as ResNeXt's and RegNet's):
``c/conv.c``'s ``grouped_*`` over the (image, group) pairs, split evenly over the CPU's
threads.

As BLAS products a group's are small (16 x 144 by a few hundred columns in ResNeXt-50),
and the copies and calls around them cost more than the products
(:mod:`skcontract.ops.conv2d_cpu`); the direct loop fills a group's padded planes once and
sums KB output channels of a block of pixels in registers over the group's channels and
taps. Sums are in the dtype (float32 as torch's CPU convolution, float64), each output's in
channel-then-tap order, so that any split over threads gives the same bits.

>>> import numpy as np
>>> from skcontract.ops.conv2d import conv_geometry
>>> x = np.ones((1, 4, 3, 3)); w = np.ones((4, 2, 1, 1))
>>> g = conv_geometry(x.shape, w.shape, groups=2)
>>> run = grouped_run(g, x.dtype)
>>> isinstance(run, str) or grouped_cpu(x, w, g, run)[0, :, 0, 0].tolist() == [2.0] * 4
True
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .call import (HostRun, output_strides, over_buffer, run_planar, scratch_size,
                   too_many_taps, unavailable)

__all__ = ["grouped_cpu", "grouped_run", "kernel_takes", "band_rows"]

KERNELS = {np.dtype(np.float32): "grouped_f32", np.dtype(np.float64): "grouped_f64"}
"""The library's kernel for each dtype it sums in."""
BAND_BYTES = 1 << 19
"""A thread's buffer at most where bands of output rows can keep it there: a group's padded
planes of a band's input rows stay in a core's L2 cache while each block of output channels
reads them again."""


DENSE_MAX_CHANNELS = 64
"""Input channels up to which a one-group layer runs on the kernel whatever its map."""
STRIDED_MAX_CHANNELS = 128
"""Input channels up to which a strided one-group layer runs on the kernel (the BLAS form
gathers its taps)."""
DENSE_PIXELS_PER_CHANNEL = 49
"""Output pixels an input channel from which a wider one-group layer runs on the kernel:
on smaller maps the BLAS form's products (C R S deep) outrun it."""


def kernel_takes(g) -> bool:
    """Layers of more than one group (the kernel ran every grouped layer measured 1.3-2.9x
    faster than the BLAS form: ResNeXt's, 4 to 128 channels a group), and one-group layers
    of few channels, strided ones of a few more, or large maps for their channels: the
    measured layers where it beat the BLAS form (docs/benchmarks/log.md, twelfth session:
    1.2-2.4x on ResNet's 56x56x64, VGG's 112x112x128 and 224x224x64, the stem and the
    strided 3x3s; 0.6-0.7x on 28x28x128, 14x14x256 and 7x7x512, which stay on BLAS)."""
    if g.groups > 1:
        return True
    strided = g.stride != (1, 1)
    return g.c <= DENSE_MAX_CHANNELS or (strided and g.c <= STRIDED_MAX_CHANNELS) or \
        g.p * g.q >= DENSE_PIXELS_PER_CHANNEL * g.c


def grouped_run(g, dtype, channels_last: bool = False) -> HostRun | str:
    """What :func:`grouped_cpu` runs for the convolution ``g`` (a checked ConvGeometry) in
    ``dtype``: bands of :func:`band_rows` output rows a unit of (group, image, band), the
    output channels-last beside an input whose channels are contiguous
    (``channels_last``); or why the host runs none (the caller's NumPy form runs)."""
    dtype = np.dtype(dtype)
    reason = unavailable(dtype, KERNELS) or too_many_taps(g)
    if reason:
        return reason
    band = band_rows(g, dtype.itemsize)
    scratch = _scratch_elems(g, dtype.itemsize, band)
    layout = "NHWC" if channels_last else "NCHW"
    form = f"bands of {band} output rows" + (", channels-last output" if channels_last else "")
    return over_buffer(scratch, dtype.itemsize) or HostRun(
        KERNELS[dtype], form, g.n * g.groups * -(-g.p // band),
        g.n * g.k * g.p * g.q * (g.c // g.groups) * g.r * g.s, scratch,
        (g.groups, g.k, band, g.n) + output_strides(g, layout), layout)


def grouped_cpu(x: np.ndarray, weight: np.ndarray, g, run: HostRun) -> np.ndarray:
    """The (N, K, P, Q) convolution ``g`` of the (N, C, H, W) ``x`` (any strides) with the
    (K, C/G, R, S) ``weight``, both of one dtype, as ``run`` (:func:`grouped_run`) says."""
    return run_planar(run, x, weight, g)


def band_rows(g, itemsize: int) -> int:
    """Output rows a unit of work: the most whose buffer (a group's phase planes of their
    rows, and the grids) stays within :data:`BAND_BYTES`; one at least."""
    return _band_rows(g, itemsize, BAND_BYTES)


@lru_cache(maxsize=1024)
def _band_rows(g, itemsize: int, budget: int) -> int:
    """:func:`band_rows` for a budget, kept: a binary search of the library's size
    function, each call of a layer asks it again."""
    lo, hi = 1, g.p
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _scratch_elems(g, itemsize, mid) * itemsize <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _scratch_elems(g, itemsize: int, band: int) -> int:
    """Elements of one thread's buffer: a group's phase planes for ``band`` output rows and
    KB grids."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    return scratch_size("grouped_scratch_elems", g.c // g.groups, band, g.q, g.r, g.s, sh,
                        sw, dh, dw, itemsize)
