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
>>> out = grouped_cpu(x, w, conv_geometry(x.shape, w.shape, groups=2))
>>> out is None or out[0, :, 0, 0].tolist() == [2.0, 2.0, 2.0, 2.0]
True
"""
from __future__ import annotations

import ctypes

import numpy as np

from .cc import load
from .call import run_planar

__all__ = ["grouped_cpu", "takes_grouped"]

LIBRARY = "conv"
KERNELS = {np.dtype(np.float32): "grouped_f32", np.dtype(np.float64): "grouped_f64"}
"""The library's kernel for each dtype it sums in."""
_IDX = ctypes.c_ssize_t


def takes_grouped(g) -> bool:
    """Layers of more than one group: the direct kernel ran every grouped layer measured
    1.3-2.7x faster than the BLAS products (ResNeXt's, 4 to 128 channels a group;
    docs/benchmarks/log.md, twelfth session). One-group layers stay on BLAS."""
    return g.groups > 1


def grouped_cpu(x: np.ndarray, weight: np.ndarray, g) -> np.ndarray | None:
    """The (N, K, P, Q) convolution ``g`` (a checked ConvGeometry) of the (N, C, H, W)
    ``x`` (any strides) with the (K, C/G, R, S) ``weight``, both of one dtype; None where
    the host has no library for it (no C compiler, a dtype the library does not sum, or
    planes whose buffer would pass :data:`~.parallel.MAX_SCRATCH_BYTES`: the caller's NumPy
    form runs)."""
    kernel = _kernel(x.dtype)
    if kernel is None:
        return None
    return run_planar(kernel, x, weight, g, _scratch_elems(g, x.itemsize), g.n * g.groups,
                      g.n * g.k * g.p * g.q * (g.c // g.groups) * g.r * g.s,
                      (g.groups, g.k))


def _kernel(dtype):
    """The library's function for ``dtype``, its arguments declared; None where none."""
    name = KERNELS.get(np.dtype(dtype))
    lib = None if name is None else load(LIBRARY)
    if lib is None:
        return None
    fn = getattr(lib, name)
    if fn.argtypes is None:
        fn.argtypes = [ctypes.c_void_p] * 3 + [_IDX] * 21 + [ctypes.c_void_p]
        fn.restype = None
    return fn


def _scratch_elems(g, itemsize: int) -> int:
    """Elements of one thread's buffer: a group's phase planes and KB grids."""
    size = load(LIBRARY).grouped_scratch_elems
    size.argtypes, size.restype = [_IDX] * 10, _IDX
    (sh, sw), (dh, dw) = g.stride, g.dilation
    return size(g.c // g.groups, g.p, g.q, g.r, g.s, sh, sw, dh, dw, itemsize)
