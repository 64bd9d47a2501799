"""Calling a convolution kernel of ``c/conv.c`` on NumPy arrays: what a call runs, as a
value made from the geometry and dtype before any array is touched (:class:`HostRun`, which
the CPU plan shows), its geometry arguments and its run over the threads.

>>> from skcontract.ops.conv2d import conv_geometry
>>> geometry_args(conv_geometry((1, 2, 5, 6), (2, 1, 3, 3), padding=1, groups=2))
(2, 5, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1)
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

from . import parallel
from .cc import load, why_not
from .parallel import aligned, run_split, threads_for

__all__ = ["HostRun", "geometry_args", "element_strides", "output_strides", "kernel_function",
           "pointer_args", "scratch_size", "run_planar", "unavailable", "too_many_taps",
           "over_buffer", "LIBRARY", "MAX_TAPS"]

LIBRARY = "conv"
"""The library of the convolution kernels (``c/conv.c``)."""
_IDX = ctypes.c_ssize_t


class HostRun(NamedTuple):
    """A kernel call: the library's ``function``, the ``form`` a plan prints, the ``units``
    the threads split, the ``taps`` (multiply-adds) the split weighs, a thread's buffer of
    ``scratch`` elements (0: none), the ``extra`` arguments after the input's strides, and
    the output's layout ("NCHW", or "NHWC": the (N, P, Q, K) array returned as its
    (N, K, P, Q) view)."""

    function: str
    form: str
    units: int
    taps: int
    scratch: int
    extra: tuple = ()
    out_layout: str = "NCHW"

    @property
    def threads(self) -> int:
        """The threads the call runs on (:func:`~.parallel.threads_for`)."""
        return threads_for(self.units, self.taps)


def unavailable(dtype, kernels: dict) -> str | None:
    """Why no kernel of ``kernels`` (dtype -> function) runs ``dtype`` here; None where one
    can."""
    if np.dtype(dtype) not in kernels:
        return f"no C kernel sums {np.dtype(dtype).name}"
    if load(LIBRARY) is None:
        return why_not(LIBRARY)
    return None


MAX_TAPS = 4096
"""Filter taps (R x S) a kernel takes at most: the planes forms keep an offset a tap on the
thread's stack (32 KiB at this bound); wider filters take the NumPy form."""


def too_many_taps(g) -> str | None:
    """Why filters of ``g``'s R x S are refused; None where the kernels take them."""
    if g.r * g.s > MAX_TAPS:
        return f"filters of {g.r * g.s:,} taps, over the kernels' {MAX_TAPS:,}"
    return None


def over_buffer(scratch: int, itemsize: int) -> str | None:
    """Why a thread's buffer of ``scratch`` elements is refused; None where it fits."""
    if scratch * itemsize > parallel.MAX_SCRATCH_BYTES:
        return (f"a thread's buffer would take {scratch * itemsize:,} bytes, over "
                f"{parallel.MAX_SCRATCH_BYTES:,}")
    return None


def kernel_function(name: str, argtypes: list):
    """The library's function ``name``, its ``argtypes`` (:func:`pointer_args`) declared
    once."""
    fn = getattr(load(LIBRARY), name)
    if fn.argtypes is None:
        fn.argtypes, fn.restype = argtypes, None
    return fn


def scratch_size(name: str, *sizes: int) -> int:
    """The library's buffer size function ``name`` at ``sizes``."""
    fn = getattr(load(LIBRARY), name)
    if fn.argtypes is None:
        fn.argtypes, fn.restype = [_IDX] * len(sizes), _IDX
    return fn(*sizes)


def geometry_args(g) -> tuple[int, ...]:
    """The kernels' leading geometry: C, H, W, P, Q, R, S, the strides, the dilations and
    the top and left padding (the bottom and right are where the input ends)."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    top, _, left, _ = g.padding
    return (g.c, g.h, g.w, g.p, g.q, g.r, g.s, sh, sw, dh, dw, top, left)


def output_strides(g, layout: str) -> tuple[int, ...]:
    """The (N, K, P, Q) output's element strides, dense in ``layout`` ("NCHW" or "NHWC")."""
    if layout == "NHWC":
        return (g.p * g.q * g.k, 1, g.q * g.k, g.k)
    return (g.k * g.p * g.q, g.p * g.q, g.q, 1)


def element_strides(x: np.ndarray, axes=(0, 1, 2, 3)) -> tuple[int, ...]:
    """``x``'s strides along ``axes``, in elements."""
    return tuple(x.strides[a] // x.itemsize for a in axes)


def pointer_args(count: int, buffer: bool = True) -> list:
    """ctypes argument types: three pointers, ``count`` sizes, and a buffer pointer."""
    return [ctypes.c_void_p] * 3 + [_IDX] * count + ([ctypes.c_void_p] if buffer else [])


def run_planar(run: HostRun, x: np.ndarray, weight: np.ndarray, g) -> np.ndarray:
    """The (N, K, P, Q) output, in ``run.out_layout``, of the planes kernel ``run`` names
    (``x`` at its element strides, the dense ``weight`` as it lies, a thread's buffer
    each)."""
    if any(s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(weight, dtype=x.dtype)
    out = np.empty((g.n, g.p, g.q, g.k), x.dtype).transpose(0, 3, 1, 2) \
        if run.out_layout == "NHWC" else np.empty((g.n, g.k, g.p, g.q), x.dtype)
    if out.size == 0:
        return out
    args = geometry_args(g) + element_strides(x) + tuple(run.extra)
    kernel = kernel_function(run.function, pointer_args(len(args) + 2))

    def part(first: int, last: int) -> None:
        buffer = aligned(run.scratch, x.dtype)
        kernel(x.ctypes.data, w.ctypes.data, out.ctypes.data, *args, first, last,
               buffer.ctypes.data)

    run_split(part, run.units, run.taps)
    return out
