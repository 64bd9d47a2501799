"""Depthwise convolutions on the GPU (``cuda/depthwise.cuh``): a convolution plan's direct launch.

A depthwise convolution (one filter a channel: groups == C == K) is memory-bound: each
output element is the sum of R x S taps of one channel. As an implicit GEMM it is one GEMM a
channel whose tiles hold one output column, all padding; the direct kernel computes each
output element from its taps, reading the input and writing the output in place in their
own layouts (NCHW or channels-last, any strides), the bias added before the one rounding;
where the channels lie on 16 bytes (channels-last, C a multiple of the vector) a thread
computes a strip of output columns of 16 bytes of channels, each tap one 16-byte load.
The convolution's plan carries a :class:`DepthwiseLaunch` (:func:`plan_depthwise`, pure
Python) and prints it; the GPU path runs it (:func:`run_depthwise`).

>>> from skcontract.ops.conv2d import conv_geometry
>>> g = conv_geometry((8, 144, 56, 56), (144, 1, 3, 3), padding=1, groups=144)
>>> plan_depthwise(g, "float16", channels_last=True).summary()
'depthwise kernel: 3 x 3 taps of 144 channels, 3,612,672 outputs, 8-channel vectors x 4 columns'
>>> plan_depthwise(g, "float16", channels_last=False).summary()
'depthwise kernel: 3 x 3 taps of 144 channels, 3,612,672 outputs, columns fastest'
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import jit
from .launch import record_direct
from .catalogue import CXX_TYPES

HEADER = "depthwise.cuh"
TYPES = {d: CXX_TYPES[d][0] for d in ("float16", "bfloat16", "float32", "float64")}
"""The dtypes the kernel takes -> its C++ element type."""
SCALAR_NAMES = tuple(f"skc::depthwise<{t}>" for t in TYPES.values())
"""The element-a-thread kernel's instantiations, in :data:`TYPES`' order."""
VECTOR_NAMES = tuple(f"skc::depthwise_vec<{t}>" for t in TYPES.values())
"""The channels-last vector kernel's instantiations, in :data:`TYPES`' order."""
NAMES = SCALAR_NAMES + VECTOR_NAMES
"""Every instantiation the module compiles."""
VECTOR_BYTES = 16
"""The vector kernel's loads and stores: 16 bytes of channels."""
STRIP = 4
"""Output columns a thread of the vector kernel computes (DEPTHWISE_STRIP)."""
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
    threads take consecutive channels (else consecutive columns); ``vector``: the
    channels lie on 16 bytes in the input and the output, and the vector kernel runs
    (``depthwise_vec``: a strip of :data:`STRIP` columns of 16 bytes of channels a
    thread)."""

    g: tuple
    dtype: str
    channels_last: bool
    vector: bool = False

    @property
    def outputs(self) -> int:
        g = self.g
        return g.n * g.k * g.p * g.q

    def summary(self) -> str:
        """The launch as a conv2d plan's row shows it."""
        g = self.g
        order = "channels fastest" if self.channels_last else "columns fastest"
        if self.vector:
            order = f"{VECTOR_BYTES // CXX_TYPES[self.dtype][1]}-channel vectors x {STRIP} columns"
        return (f"depthwise kernel: {g.r} x {g.s} taps of {g.c} channels, "
                f"{self.outputs:,} outputs, {order}")

    @property
    def items(self) -> int:
        """What the launch's threads take in turn: outputs, or strips of vectors."""
        g = self.g
        if not self.vector:
            return self.outputs
        return g.n * g.p * -(-g.q // STRIP) * (g.c * CXX_TYPES[self.dtype][1] // VECTOR_BYTES)


def is_depthwise(g) -> bool:
    """Whether convolution ``g`` is depthwise: one filter a channel (groups == C == K)."""
    return g.groups == g.c == g.k and g.c > 1


def plan_depthwise(g, dtype: str, channels_last: bool, input_strides=None,
                   input_offset: int = 0) -> DepthwiseLaunch | None:
    """The direct launch of depthwise convolution ``g``, or None where the kernel does not
    take it (not depthwise, another dtype, more outputs than its index). The input's
    (N, C, H, W) ``input_strides`` in elements (None: dense, in the output's format) and
    its address modulo 16 bytes (``input_offset``) say whether the vector kernel reads
    it."""
    if not is_depthwise(g) or dtype not in TYPES:
        return None
    vector = channels_last and _vector_input(g, dtype, input_strides, input_offset)
    launch = DepthwiseLaunch(g, dtype, channels_last, vector)
    return launch if launch.outputs <= MAX_OUTPUTS else None


def _vector_input(g, dtype: str, strides, offset: int) -> bool:
    """Whether a channels-last convolution's input and output lie as the vector kernel
    reads and writes them: C and every stride but the channels' (1; 0 for an axis of one
    element) a multiple of the vector, the input on 16 bytes (the output is allocated
    dense channels-last, hence on 16 bytes too)."""
    per = VECTOR_BYTES // CXX_TYPES[dtype][1]
    if strides is None:
        strides = (g.h * g.w * g.c, 1, g.w * g.c, g.c)
    sn, sc, sh, sw = strides
    return g.c % per == 0 and sc == 1 and offset % VECTOR_BYTES == 0 and \
        all(st % per == 0 for st in (sn, sh, sw))


def run_depthwise(launch: DepthwiseLaunch, x, w, bias, out, device_id: int, stream,
                  sms: int) -> None:
    """Launch ``launch`` on ``stream`` (a CuPy stream) on ``device_id`` (``sms`` SMs): ``x``
    (N, C, H, W), ``w`` (C, 1, R, S), ``bias`` (C,) or None and ``out`` (N, C, P, Q) are
    :class:`~.operands.Operand` descriptions (pointers, strides in elements) of any
    strides."""
    g = launch.g
    top, _, left, _ = g.padding
    names = VECTOR_NAMES if launch.vector else SCALAR_NAMES
    name = names[tuple(TYPES).index(launch.dtype)]
    fn = jit.get_module(HEADER, NAMES, device_id).get_function(name)
    blocks = max(1, min(-(-launch.items // THREADS), sms * BLOCKS_PER_SM))
    ints = (g.n, g.c, g.h, g.w, g.p, g.q, g.r, g.s, *g.stride, top, left, *g.dilation)
    swc, _, swr, sws = w.strides
    pointers = (x.ptr, w.ptr, w.ptr if bias is None else bias.ptr, out.ptr)
    if launch.vector:  # (the channels' strides are 1)
        sxn, _, sxh, sxw = x.strides
        son, _, sop, soq = out.strides
        longs = (sxn, sxh, sxw, swc, swr, sws, son, sop, soq)
        flags = (bias is not None,)
    else:
        longs = (*x.strides, swc, swr, sws, *out.strides)
        flags = (launch.channels_last, bias is not None)
    fn((blocks,), (THREADS,),
       (*map(np.uint64, pointers), *map(np.int32, ints), *map(np.int64, longs),
        *map(np.int32, flags)), stream=stream)
    record_direct(name, blocks)
