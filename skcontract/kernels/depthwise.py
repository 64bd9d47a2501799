"""Depthwise convolutions on the GPU (``cuda/depthwise.cuh``): a convolution plan's direct launch.

A depthwise convolution (one filter a channel: groups == C == K) is memory-bound: each
output element is the sum of R x S taps of one channel. As an implicit GEMM it is one GEMM a
channel whose tiles hold one output column, all padding; the direct kernel computes each
output element from its taps, reading the input and writing the output in place in their
own layouts (NCHW or channels-last, any strides), the bias added before the one rounding.
The convolution's plan carries a :class:`DepthwiseLaunch` (:func:`plan_depthwise`, pure
Python) and prints it; the GPU path runs it (:func:`run_depthwise`).

>>> from skcontract.ops.conv2d import conv_geometry
>>> g = conv_geometry((8, 144, 56, 56), (144, 1, 3, 3), padding=1, groups=144)
>>> plan_depthwise(g, "float16", channels_last=True).summary()
'depthwise kernel: 3 x 3 taps of 144 channels, 3,612,672 outputs, channels fastest'
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import jit

HEADER = "depthwise.cuh"
TYPES = {"float16": "skc::half_t", "bfloat16": "skc::bfloat16_t", "float32": "float",
         "float64": "double"}
"""The dtypes the kernel takes -> its C++ element type."""
NAMES = tuple(f"skc::depthwise<{t}>" for t in TYPES.values())
"""The kernel's instantiations, in :data:`TYPES`' order."""
MAX_OUTPUTS = 2**31 - 1
"""The kernel's output index is 32 bits."""
THREADS = 256
"""Threads of a block (DEPTHWISE_THREADS)."""
BLOCKS_PER_SM = 8
"""Blocks a launch gives each SM at most (the grid strides over the rest)."""


@dataclass(frozen=True)
class DepthwiseLaunch:
    """The direct launch of a depthwise convolution of ``dtype`` arrays (geometry ``g``,
    a ConvGeometry); ``channels_last``: the output is channels-last, so consecutive
    threads take consecutive channels (else consecutive columns)."""

    g: tuple
    dtype: str
    channels_last: bool

    @property
    def outputs(self) -> int:
        g = self.g
        return g.n * g.k * g.p * g.q

    def summary(self) -> str:
        """The launch as a conv2d plan's row shows it."""
        g = self.g
        order = "channels fastest" if self.channels_last else "columns fastest"
        return (f"depthwise kernel: {g.r} x {g.s} taps of {g.c} channels, "
                f"{self.outputs:,} outputs, {order}")


def is_depthwise(g) -> bool:
    """Whether convolution ``g`` is depthwise: one filter a channel (groups == C == K)."""
    return g.groups == g.c == g.k and g.c > 1


def plan_depthwise(g, dtype: str, channels_last: bool) -> DepthwiseLaunch | None:
    """The direct launch of depthwise convolution ``g``, or None where the kernel does not
    take it (not depthwise, another dtype, more outputs than its index)."""
    if not is_depthwise(g) or dtype not in TYPES:
        return None
    launch = DepthwiseLaunch(g, dtype, channels_last)
    return launch if launch.outputs <= MAX_OUTPUTS else None


def run_depthwise(launch: DepthwiseLaunch, x, w, bias, out, device_id: int, stream,
                  sms: int) -> None:
    """Launch ``launch`` on ``stream`` (a CuPy stream) on ``device_id`` (``sms`` SMs): ``x``
    (N, C, H, W), ``w`` (C, 1, R, S), ``bias`` (C,) or None and ``out`` (N, C, P, Q) are
    :class:`~.operands.Operand` descriptions (pointers, strides in elements) of any
    strides."""
    g = launch.g
    top, _, left, _ = g.padding
    fn = jit.get_module(HEADER, NAMES, device_id).get_function(
        NAMES[tuple(TYPES).index(launch.dtype)])
    blocks = max(1, min(-(-launch.outputs // THREADS), sms * BLOCKS_PER_SM))
    ints = (g.n, g.c, g.h, g.w, g.p, g.q, g.r, g.s, *g.stride, top, left, *g.dilation)
    swc, _, swr, sws = w.strides
    longs = (*x.strides, swc, swr, sws, *out.strides)
    pointers = (x.ptr, w.ptr, w.ptr if bias is None else bias.ptr, out.ptr)
    fn((blocks,), (THREADS,),
       (*map(np.uint64, pointers), *map(np.int32, ints), *map(np.int64, longs),
        np.int32(launch.channels_last), np.int32(bias is not None)), stream=stream)
