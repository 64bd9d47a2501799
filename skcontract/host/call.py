"""Calling a convolution kernel of ``c/conv.c`` on NumPy arrays: its geometry arguments,
its input's element strides, and the run over threads with a buffer each.

>>> from skcontract.ops.conv2d import conv_geometry
>>> geometry_args(conv_geometry((1, 2, 5, 6), (2, 1, 3, 3), padding=1, groups=2))
(2, 5, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1)
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import parallel
from .parallel import aligned, run_split

__all__ = ["geometry_args", "element_strides", "run_planar"]


def geometry_args(g) -> tuple[int, ...]:
    """The kernels' leading geometry: C, H, W, P, Q, R, S, the strides, the dilations and
    the top and left padding (the bottom and right are where the input ends)."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    top, _, left, _ = g.padding
    return (g.c, g.h, g.w, g.p, g.q, g.r, g.s, sh, sw, dh, dw, top, left)


def element_strides(x: np.ndarray, axes=(0, 1, 2, 3)) -> tuple[int, ...]:
    """``x``'s strides along ``axes``, in elements."""
    return tuple(x.strides[a] // x.itemsize for a in axes)


def run_planar(kernel: Callable, x: np.ndarray, weight: np.ndarray, g, scratch: int,
               units: int, taps: int, extra: tuple = ()) -> np.ndarray | None:
    """The (N, K, P, Q) output of ``kernel`` (an NCHW-output kernel taking ``x`` at its
    element strides, the dense ``weight`` as it lies, ``extra`` after the strides, the
    range of ``units`` and a thread's buffer of ``scratch`` elements), run over the
    threads for ``taps`` multiply-adds; None where the buffer would pass
    :data:`~.parallel.MAX_SCRATCH_BYTES` (the caller's NumPy form runs)."""
    if scratch * x.itemsize > parallel.MAX_SCRATCH_BYTES:
        return None
    if any(s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(weight, dtype=x.dtype)
    out = np.empty((g.n, g.k, g.p, g.q), x.dtype)
    if out.size == 0:
        return out
    args = geometry_args(g) + element_strides(x) + tuple(extra)

    def run(first: int, last: int) -> None:
        buffer = aligned(scratch, x.dtype)
        kernel(x.ctypes.data, w.ctypes.data, out.ctypes.data, *args, first, last,
               buffer.ctypes.data)

    run_split(run, units, taps)
    return out
