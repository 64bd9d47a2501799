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
>>> out = depthwise_cpu(x, w, conv_geometry(x.shape, w.shape, padding=1))
>>> out is None or out[0, 0, 0].tolist() == [10.0, 18.0, 24.0, 18.0]
True
"""
from __future__ import annotations

import ctypes

import numpy as np

from .cc import load
from .call import element_strides, geometry_args, run_planar
from .parallel import VECTOR_BYTES, run_split

__all__ = ["depthwise_cpu", "is_depthwise", "form_of"]

LIBRARY = "conv"
KERNELS = {np.dtype(np.float32): "depthwise_f32", np.dtype(np.float64): "depthwise_f64"}
"""The library's kernel for each dtype it sums in (the planes form; ``<name>_lanes`` the
lanes form)."""
PLANES_BLOCK_VECTORS = 4
"""Vectors a block of the planes form's grid (c/conv.c's NB)."""
PLANES_MIN_KEPT = 0.7
"""The share of the planes form's grid kept as output below which the lanes form runs: the
grid computes the taps' reach of columns after each row and whole blocks of vectors, most
of the work on small maps with wide filters, where the lanes form's copies into and out of
its channel-interleaved buffer cost less (docs/benchmarks/log.md, twelfth session)."""
_IDX = ctypes.c_ssize_t


def is_depthwise(g) -> bool:
    """One filter a channel: groups == C == K (a single-channel convolution included)."""
    return g.groups == g.c == g.k


def depthwise_cpu(x: np.ndarray, weight: np.ndarray, g, form: str | None = None
                  ) -> np.ndarray | None:
    """The (N, K, P, Q) depthwise convolution ``g`` (a checked ConvGeometry with
    :func:`is_depthwise`) of the (N, C, H, W) ``x`` (any strides) with the (K, 1, R, S)
    ``weight``, both of one dtype; None where the host has no library for it (no C
    compiler, a dtype the library does not sum, or planes whose buffer would pass
    :data:`~.parallel.MAX_SCRATCH_BYTES`: the caller's NumPy form runs).
    ``form``: "planes" or "lanes" (None: :func:`form_of`); an input whose channels are
    contiguous (channels-last) takes the "nhwc" form whatever ``form`` says, its output
    channels-last too."""
    itemsize = x.dtype.itemsize
    if x.strides[1] == itemsize and g.c > 1 and not any(s % itemsize for s in x.strides):
        return _channels_last(x, weight, g)
    form = form or form_of(g, itemsize)
    kernel = _kernel(x.dtype, form)
    if kernel is None:
        return None
    units = g.n * (g.c if form == "planes" else -(-g.c // (VECTOR_BYTES // itemsize)))
    return run_planar(kernel, x, weight, g, _scratch_elems(g, itemsize, form), units,
                      g.n * g.c * g.p * g.q * g.r * g.s)


def _channels_last(x: np.ndarray, weight: np.ndarray, g) -> np.ndarray | None:
    """The "nhwc" form: the input read as it lies, the output written (N, P, Q, K) and
    returned as its (N, K, P, Q) view; None where the host has no library for the dtype."""
    kernel = _kernel(x.dtype, "nhwc")
    if kernel is None:
        return None
    w = np.ascontiguousarray(weight.reshape(g.c, g.r * g.s).T, dtype=x.dtype)  # (R S, C)
    out = np.empty((g.n, g.p, g.q, g.k), x.dtype)
    geometry = geometry_args(g) + element_strides(x, (0, 2, 3))

    def run(first: int, last: int) -> None:
        kernel(x.ctypes.data, w.ctypes.data, out.ctypes.data, *geometry, first, last)

    if out.size:
        run_split(run, g.n * g.p, g.n * g.c * g.p * g.q * g.r * g.s)
    return out.transpose(0, 3, 1, 2)


def form_of(g, itemsize: int = 4) -> str:
    """"lanes" where the planes form would keep less than :data:`PLANES_MIN_KEPT` of the
    grid it computes, else "planes"."""
    width = g.q + (g.s - 1) * g.dilation[1] // g.stride[1]
    block = PLANES_BLOCK_VECTORS * VECTOR_BYTES // itemsize
    computed = -(-g.p * width // block) * block
    return "lanes" if g.p * g.q < PLANES_MIN_KEPT * computed else "planes"


def _kernel(dtype, form: str):
    """The library's function for ``dtype`` in ``form``, its arguments declared; None
    where none."""
    name = KERNELS.get(np.dtype(dtype))
    lib = None if name is None else load(LIBRARY)
    if lib is None:
        return None
    if form == "nhwc":
        fn = getattr(lib, name.replace("depthwise", "depthwise_nhwc"))
        if fn.argtypes is None:
            fn.argtypes, fn.restype = [ctypes.c_void_p] * 3 + [_IDX] * 18, None
        return fn
    fn = getattr(lib, name if form == "planes" else f"{name}_lanes")
    if fn.argtypes is None:
        fn.argtypes = [ctypes.c_void_p] * 3 + [_IDX] * 19 + [ctypes.c_void_p]
        fn.restype = None
    return fn


def _scratch_elems(g, itemsize: int, form: str) -> int:
    """Elements of one thread's buffer: the planes form's phase planes and grid, the lanes
    form's padded block and weights."""
    lib = load(LIBRARY)
    size = lib.dw_scratch_elems if form == "planes" else lib.dw_lanes_scratch_elems
    size.argtypes, size.restype = [_IDX] * 9, _IDX
    (sh, sw), (dh, dw) = g.stride, g.dilation
    return size(g.p, g.q, g.r, g.s, sh, sw, dh, dw, itemsize)
