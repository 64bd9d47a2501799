"""The depthwise convolution on the CPU (one filter a channel: groups == C == K, as in
MobileNet, EfficientNet and ConvNeXt): ``c/conv.c`` over the (image, channel) planes,
the planes split evenly over the CPU's threads.

As an implicit GEMM a depthwise layer is one product a channel with one output column, and
as BLAS products over shifted copies (:mod:`skcontract.ops.conv2d_cpu`) it spends its time
in NumPy passes and calls; the direct loop reads each plane once into cache and adds its
R x S taps there, in registers, at about memory speed. float32 sums in float32 (as torch's
CPU convolution does) and float64 in float64; other dtypes take the NumPy form.

>>> import numpy as np
>>> from skcontract.ops.conv2d import conv_geometry
>>> x = np.arange(16.0).reshape(1, 1, 4, 4); w = np.ones((1, 1, 3, 3))
>>> g = conv_geometry(x.shape, w.shape, padding=1)
>>> run = depthwise_run(g, x.dtype)
>>> isinstance(run, str) or depthwise_cpu(x, w, g, run)[0, 0, 0].tolist() == [10., 18., 24., 18.]
True
"""
from __future__ import annotations

import numpy as np

from .call import (HostRun, element_strides, geometry_args, kernel_function, over_buffer,
                   pointer_args, run_planar, scratch_size, too_many_taps, unavailable)
from .parallel import VECTOR_BYTES, run_split

__all__ = ["depthwise_cpu", "depthwise_run", "is_depthwise", "channels_contiguous",
           "form_of"]

KERNELS = {np.dtype(np.float32): "depthwise_f32", np.dtype(np.float64): "depthwise_f64"}
"""The library's planes-form kernel for each dtype it sums in (``<name>_lanes`` the lanes
form, ``depthwise_nhwc_<type>`` the channels-last one)."""
PLANES_BLOCK_VECTORS = 4
"""Vectors a block of the planes form's grid (c/conv.c's NB)."""
PLANES_MIN_KEPT = 0.7
"""The share of the planes form's grid kept as output below which the lanes form runs: the
grid computes the taps' reach of columns after each row and whole blocks of vectors, most
of the work on small maps with wide filters, where the lanes form's copies into and out of
its channel-interleaved buffer cost less (docs/benchmarks/log.md, twelfth session)."""


def is_depthwise(g) -> bool:
    """One filter a channel: groups == C == K (a single-channel convolution included)."""
    return g.groups == g.c == g.k


def channels_contiguous(x: np.ndarray) -> bool:
    """An input the channels-last form reads as it lies: its channels one element apart
    (and more than one of them), every stride whole elements."""
    return x.shape[1] > 1 and x.strides[1] == x.itemsize and \
        not any(s % x.itemsize for s in x.strides)


def depthwise_run(g, dtype, channels_last: bool = False, form: str | None = None
                  ) -> HostRun | str:
    """What :func:`depthwise_cpu` runs for the depthwise convolution ``g`` (a checked
    ConvGeometry with :func:`is_depthwise`) in ``dtype``: the channels-last form for an input
    whose channels are contiguous, else ``form`` ("planes" or "lanes"; None:
    :func:`form_of`); or why the host runs none (the caller's NumPy form runs)."""
    dtype = np.dtype(dtype)
    reason = unavailable(dtype, KERNELS) or too_many_taps(g)
    if reason:
        return reason
    name, taps = KERNELS[dtype], g.n * g.c * g.p * g.q * g.r * g.s
    if channels_last:
        return HostRun(name.replace("depthwise", "depthwise_nhwc"), "channels-last",
                       g.n * g.p, taps, 0, out_layout="NHWC")
    form = form or form_of(g, dtype.itemsize)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    sizes = (g.p, g.q, g.r, g.s, sh, sw, dh, dw, dtype.itemsize)
    if form == "planes":
        scratch = scratch_size("dw_scratch_elems", *sizes)
        units, function = g.n * g.c, name
    else:
        scratch = scratch_size("dw_lanes_scratch_elems", *sizes)
        units, function = g.n * -(-g.c // (VECTOR_BYTES // dtype.itemsize)), f"{name}_lanes"
    return over_buffer(scratch, dtype.itemsize) or HostRun(function, form, units, taps,
                                                           scratch)


def depthwise_cpu(x: np.ndarray, weight: np.ndarray, g, run: HostRun) -> np.ndarray:
    """The (N, K, P, Q) depthwise convolution ``g`` of the (N, C, H, W) ``x`` (any strides;
    channels-last where ``run`` is that form, whose output is channels-last too) with the
    (K, 1, R, S) ``weight``, both of one dtype, as ``run`` (:func:`depthwise_run`) says."""
    if run.form == "channels-last":
        return _channels_last(run, x, weight, g)
    return run_planar(run, x, weight, g)


def _channels_last(run: HostRun, x: np.ndarray, weight: np.ndarray, g) -> np.ndarray:
    """The channels-last form: the input read as it lies, the output written (N, P, Q, K)
    and returned as its (N, K, P, Q) view."""
    w = np.ascontiguousarray(weight.reshape(g.c, g.r * g.s).T, dtype=x.dtype)  # (R S, C)
    out = np.empty((g.n, g.p, g.q, g.k), x.dtype)
    args = geometry_args(g) + element_strides(x, (0, 2, 3))
    kernel = kernel_function(run.function, pointer_args(len(args) + 2, buffer=False))

    def part(first: int, last: int) -> None:
        kernel(x.ctypes.data, w.ctypes.data, out.ctypes.data, *args, first, last)

    if out.size:
        run_split(part, run.units, run.taps)
    return out.transpose(0, 3, 1, 2)


def form_of(g, itemsize: int = 4) -> str:
    """"lanes" where the planes form would keep less than :data:`PLANES_MIN_KEPT` of the
    grid it computes, else "planes"."""
    width = g.q + (g.s - 1) * g.dilation[1] // g.stride[1]
    block = PLANES_BLOCK_VECTORS * VECTOR_BYTES // itemsize
    computed = -(-g.p * width // block) * block
    return "lanes" if g.p * g.q < PLANES_MIN_KEPT * computed else "planes"
