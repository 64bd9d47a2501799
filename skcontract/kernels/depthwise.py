"""Depthwise convolutions on the GPU (``cuda/depthwise.cuh``): a convolution plan's direct launch.

A depthwise convolution (one filter a channel: groups == C == K) is memory-bound: each
output element is the sum of R x S taps of one channel. As an implicit GEMM it is one GEMM a
channel whose tiles hold one output column, all padding; the direct kernel computes each
output element from its taps, reading the input and writing the output in place in their
own layouts (NCHW or channels-last, any strides), the bias added before the one rounding;
where the channels lie on 16 bytes (channels-last, C a multiple of the vector) a thread
computes a strip of output columns of 16 bytes of channels, each tap one 16-byte load, and
for the common square filters (:data:`FIXED_FILTERS`) each input vector a strip's filter row
reads loaded and converted once. 16-bit channels-last data on 16-byte vectors with wide
filters (7 x 7 and up, unit step: :func:`.depthwise_mma.planned`) runs on tensor cores
instead (:mod:`.depthwise_mma`): a filter row of a channel is a GEMM of 16 output rows by 8
columns over 16 input columns, its B the banded matrix of the row's taps, one mma.sync for
128 outputs of a filter row.
The convolution's plan carries a :class:`DepthwiseLaunch` (:func:`plan_depthwise`, pure
Python) and prints it; the GPU path runs it (:func:`run_depthwise`).

>>> from skcontract.ops.conv2d import conv_geometry
>>> g = conv_geometry((8, 144, 56, 56), (144, 1, 3, 3), padding=1, groups=144)
>>> print(*plan_depthwise(g, "float16", channels_last=True).summary().split(", "), sep="\\n")
depthwise kernel: 3 x 3 taps of 144 channels
3,612,672 outputs
8-channel vectors x 4 columns
a filter row's inputs loaded once a strip
>>> g7 = conv_geometry((8, 96, 56, 56), (96, 1, 7, 7), padding=3, groups=96)
>>> print(*plan_depthwise(g7, "float16", channels_last=True).summary().split(", "), sep="\\n")
depthwise kernel: 7 x 7 taps of 96 channels
2,408,448 outputs
tensor cores
16 x 32 pixels of 16 channels a CTA
>>> plan_depthwise(g, "float16", channels_last=False).summary()
'depthwise kernel: 3 x 3 taps of 144 channels, 3,612,672 outputs, columns fastest'
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import depthwise_mma as mma, jit
from .launch import record_direct
from .operands import canonical_strides
from .catalogue import CXX_TYPES

HEADER = "depthwise.cuh"
TYPES = {d: CXX_TYPES[d][0] for d in ("float16", "bfloat16", "float32", "float64")}
"""The dtypes the kernel takes -> its C++ element type."""
SCALAR_NAMES = tuple(f"skc::depthwise<{t}>" for t in TYPES.values())
"""The element-a-thread kernel's instantiations, in :data:`TYPES`' order."""
VECTOR_NAMES = tuple(f"skc::depthwise_vec<{t}>" for t in TYPES.values())
"""The channels-last vector kernel's instantiations (any filter), in :data:`TYPES`' order."""
FIXED_FILTERS = ((3, 1), (3, 2), (5, 1), (5, 2), (7, 1), (7, 2))
"""The (size, step) pairs of square undilated filters stepping the same both ways that the
square kernel (``depthwise_square``) has instantiations for: MobileNet's, EfficientNet's and
ConvNeXt's depthwise layers."""
PACK_CHANNELS = {"float16": 4, "bfloat16": 4, "float32": 4, "float64": 2}
"""Channels a thread of the square kernel takes (DepthwisePack): 8 bytes of 16-bit channels,
16 bytes of float32 or float64 ones; their staged weights are 16 bytes of accumulators."""
WIDE_PACK_CHANNELS = 8
"""The square kernel's wide 16-bit packs: 16 bytes of channels (:data:`WIDE_FILTERS`)."""
WIDE_FILTERS = ((3, 1), (3, 2), (5, 1), (5, 2))
"""The (size, step) pairs the square kernel has wide 16-bit instantiations for: the 3 x 3
and 5 x 5 filters, whose strips' inputs and accumulators fit two blocks an SM at 8 channels
(at most 119 registers a thread)."""
WIDE_PLANNED = WIDE_FILTERS
"""The :data:`WIDE_FILTERS` the planner runs on wide packs: every one, each measured faster
than on packs of 4 where the channels lie on 16 bytes (docs/benchmarks/log.md, nineteenth
session); an input on 8 bytes takes the packs of 4."""
SQUARE_NAMES = tuple(f"skc::depthwise_square<{t}, {ks}, {step}, {PACK_CHANNELS[d]}>"
                     for d, t in TYPES.items() for ks, step in FIXED_FILTERS)
"""The square kernel's instantiations, dtype-major in :data:`TYPES`' order, then
:data:`FIXED_FILTERS`'."""
WIDE_NAMES = tuple(f"skc::depthwise_square<{TYPES[d]}, {ks}, {step}, {WIDE_PACK_CHANNELS}>"
                   for d in ("float16", "bfloat16") for ks, step in WIDE_FILTERS)
"""The square kernel's wide 16-bit instantiations, float16's then bfloat16's, each in
:data:`WIDE_FILTERS`' order."""
NAMES = SCALAR_NAMES + VECTOR_NAMES + SQUARE_NAMES + WIDE_NAMES
"""Every instantiation the module compiles."""
VECTOR_BYTES = 16
"""The vector kernel's loads and stores: 16 bytes of channels."""
MAX_IMAGE_OFFSET = 2**31 - 1
"""The square kernel's offsets inside an image (rows, columns, channels) are 32-bit."""
STRIP = 4
"""Output columns a thread of the vector kernels computes (DEPTHWISE_STRIP); the square
kernel's at steps above one, half as many (depthwise_square_strip)."""
MAX_OUTPUTS = 2**31 - 1
"""The kernel's output index is 32 bits."""
THREADS = 256
"""Threads of a block (DEPTHWISE_THREADS)."""
BLOCKS_PER_SM = 8
"""Blocks a launch of the scalar kernel gives each SM at most (the grid strides over the
rest)."""
VECTOR_BLOCKS_PER_SM = 2
"""Blocks a launch of the vector kernels gives each SM at most: those resident at once
(``__launch_bounds__``), so each block stages its filters once and walks its own run of
strips."""
MAX_SLICE = 32
"""Channel vectors (packs) a block of the vector kernels takes at most: a warp's loads of a
pixel's channels are then 512 contiguous bytes (the square kernel's 16-bit packs: 256), and
a block has 8 lanes or more."""
SLICE_SMEM = 48 * 1024
"""Shared memory for a block's staged filters at most (no opt-in attribute needed): taps x
slice vectors of 16 bytes (the square kernel's: a pack's in the accumulator type); a filter
of more taps than one vector's fit runs the scalar kernel."""


@dataclass(frozen=True)
class DepthwiseLaunch:
    """The direct launch of a depthwise convolution of ``dtype`` arrays (geometry ``g``,
    a ConvGeometry); ``channels_last``: the output is channels-last, so consecutive
    threads take consecutive channels (else consecutive columns); ``vector``: a vector
    kernel runs (a strip of columns of a vector of channels a thread, the channels lying
    on whole vectors in the input and the output); ``square``: the filter is one of
    :data:`FIXED_FILTERS`, and the vector kernel is the square kernel of its size and
    step (packs of :data:`PACK_CHANNELS`; else 16-byte vectors); ``mma``: the tensor-core
    kernel runs it (16-bit data on 16-byte vectors; :func:`.depthwise_mma.takes`);
    ``wide``: the square kernel takes packs of :data:`WIDE_PACK_CHANNELS` 16-bit channels
    (:data:`WIDE_FILTERS`)."""

    g: tuple
    dtype: str
    channels_last: bool
    vector: bool = False
    square: bool = False
    mma: bool = False
    wide: bool = False

    @property
    def outputs(self) -> int:
        g = self.g
        return g.n * g.k * g.p * g.q

    def summary(self) -> str:
        """The launch as a conv2d plan's row shows it."""
        g = self.g
        order = "channels fastest" if self.channels_last else "columns fastest"
        if self.mma:
            chans = mma.CHANNELS[mma.step_of(g)]
            order = f"tensor cores, {mma.ROWS} x {mma.COLS} pixels of {chans} channels a CTA"
        elif self.vector:
            order = f"{self.per_vector}-channel vectors x {self.strip} columns"
            if self.square:
                order += ", a filter row's inputs loaded once a strip"
        return (f"depthwise kernel: {g.r} x {g.s} taps of {g.c} channels, "
                f"{self.outputs:,} outputs, {order}")

    @property
    def strip(self) -> int:
        """Output columns a thread computes (the vector kernels')."""
        if self.square and self.g.stride[1] > 1:
            return STRIP // 2
        return STRIP

    @property
    def per_vector(self) -> int:
        """Channels a thread loads at once: a 16-byte vector's (the vector kernel's), or a
        pack's (the square kernel's, :data:`PACK_CHANNELS`)."""
        if self.square:
            return WIDE_PACK_CHANNELS if self.wide else PACK_CHANNELS[self.dtype]
        return VECTOR_BYTES // CXX_TYPES[self.dtype][1]

    @property
    def vectors(self) -> int:
        """Channel vectors of a pixel (the vector kernels')."""
        return self.g.c // self.per_vector

    @property
    def weight_bytes(self) -> int:
        """Shared memory a tap of a channel vector takes: the filters as stored (the vector
        kernel's), or a pack's in the accumulator type (the square kernel's): 16 bytes
        either way, 32 for a wide pack."""
        return 2 * VECTOR_BYTES if self.square and self.wide else VECTOR_BYTES

    @property
    def slices(self) -> int:
        """Blocks' channel slices (the vector kernels' grid.y): as few as hold
        :data:`MAX_SLICE` vectors and their filters in :data:`SLICE_SMEM`."""
        g = self.g
        most = min(MAX_SLICE, SLICE_SMEM // (g.r * g.s * self.weight_bytes))
        return -(-self.vectors // most)

    @property
    def slice(self) -> int:
        """Channel vectors of a block's slice (the slices even, the last one may be
        short)."""
        return -(-self.vectors // self.slices)

    @property
    def smem_bytes(self) -> int:
        """The vector kernels' dynamic shared memory: a slice's filters; the tensor-core
        kernel's: its tile's input window as 16-bit channel planes
        (depthwise_mma_smem)."""
        if self.mma:
            return mma.smem_bytes(self.g)
        return self.g.r * self.g.s * self.slice * self.weight_bytes

    @property
    def kernel(self) -> str:
        """The instantiation the launch runs."""
        if self.mma:
            return mma.name(self.g, self.dtype)
        index = tuple(TYPES).index(self.dtype)
        if not self.vector:
            return SCALAR_NAMES[index]
        if not self.square:
            return VECTOR_NAMES[index]
        form = fixed_filter(self.g)
        if self.wide:
            return WIDE_NAMES[index * len(WIDE_FILTERS) + WIDE_FILTERS.index(form)]
        return SQUARE_NAMES[index * len(FIXED_FILTERS) + FIXED_FILTERS.index(form)]

    def grid(self, sms: int) -> tuple:
        """The launch's grid on a device of ``sms`` SMs: the scalar kernel's blocks, or the
        vector kernels' (blocks a slice, slices), each block a contiguous run of the
        strips."""
        g = self.g
        if self.mma:
            return (mma.tiles(g), 1)
        if not self.vector:
            return (max(1, min(-(-self.outputs // THREADS), sms * BLOCKS_PER_SM)), 1)
        lanes = THREADS // self.slice
        strips = g.n * g.p * -(-g.q // self.strip)
        budget = -(-sms * VECTOR_BLOCKS_PER_SM // self.slices)
        return (max(1, min(-(-strips // lanes), budget)), self.slices)


def fixed_filter(g) -> tuple | None:
    """The (size, step) of :data:`FIXED_FILTERS` convolution ``g`` has (a square filter,
    the same step both ways, undilated), or None."""
    (sh, sw), (dh, dw) = g.stride, g.dilation
    form = (g.s, sw)
    if g.r != g.s or sh != sw or dh != 1 or dw != 1 or form not in FIXED_FILTERS:
        return None
    return form


def is_depthwise(g) -> bool:
    """Whether convolution ``g`` is depthwise: one filter a channel (groups == C == K)."""
    return g.groups == g.c == g.k and g.c > 1


def plan_depthwise(g, dtype: str, channels_last: bool, input_strides=None,
                   input_offset: int = 0) -> DepthwiseLaunch | None:
    """The direct launch of depthwise convolution ``g``, or None where the kernel does not
    take it (not depthwise, another dtype, more outputs than its index). The input's
    (N, C, H, W) ``input_strides`` in elements (None: dense, in the output's format) and
    its address modulo 16 bytes (``input_offset``) say whether a vector kernel reads it."""
    if not is_depthwise(g) or dtype not in TYPES:
        return None
    if input_strides is None:
        input_strides = (g.h * g.w * g.c, 1, g.w * g.c, g.c)
    itemsize = CXX_TYPES[dtype][1]
    vector = channels_last and _lies_on(g, input_strides, input_offset,
                                        VECTOR_BYTES // itemsize, itemsize)
    fits = _image_offsets_fit(g, input_strides)
    if vector and fits and mma.planned(g, dtype):
        return DepthwiseLaunch(g, dtype, channels_last, True, False, True)
    square = channels_last and fixed_filter(g) is not None and \
        _lies_on(g, input_strides, input_offset, PACK_CHANNELS[dtype], itemsize) and fits
    wide = square and vector and dtype in ("float16", "bfloat16") and \
        fixed_filter(g) in WIDE_PLANNED
    launch = DepthwiseLaunch(g, dtype, channels_last, vector or square, square, wide=wide)
    if launch.vector and g.r * g.s * launch.weight_bytes > SLICE_SMEM:
        launch = DepthwiseLaunch(g, dtype, channels_last)
    return launch if launch.outputs <= MAX_OUTPUTS else None


def _lies_on(g, strides, offset: int, per: int, itemsize: int) -> bool:
    """Whether a channels-last convolution's input and output lie on vectors of ``per``
    channels: C and every stride but the channels' (1; 0 for an axis of one element) a
    multiple of ``per``, the input's address too (the output is allocated dense
    channels-last, hence on the vector too)."""
    sn, sc, sh, sw = strides
    return g.c % per == 0 and sc == 1 and offset % (per * itemsize) == 0 and \
        all(st % per == 0 for st in (sn, sh, sw))


def _image_offsets_fit(g, strides) -> bool:
    """Whether the square kernel's 32-bit offsets inside an image reach every element it
    reads (padding and a strip's overhang included) and writes (dense channels-last)."""
    _, _, sh, sw = strides
    (step, _), top, left = g.stride, g.padding[0], g.padding[2]
    rows = max(top, (g.p - 1) * step) + g.r  # a window's first row, then its rows
    cols = max(left, (g.q - 1) * step) + g.s + STRIP * step  # a strip's first column, span
    reach = abs(sh) * rows + abs(sw) * cols + g.c
    return max(reach, g.p * g.q * g.c) <= MAX_IMAGE_OFFSET


def run_depthwise(launch: DepthwiseLaunch, x, w, bias, out, device_id: int, stream,
                  sms: int) -> None:
    """Launch ``launch`` on ``stream`` (a CuPy stream) on ``device_id`` (``sms`` SMs): ``x``
    (N, C, H, W), ``w`` (C, 1, R, S), ``bias`` (C,) or None and ``out`` (N, C, P, Q) are
    :class:`~.operands.Operand` descriptions (pointers, strides in elements) of any
    strides."""
    g = launch.g
    top, _, left, _ = g.padding
    name = launch.kernel
    header, names = (mma.HEADER, mma.NAMES) if launch.mma else (HEADER, NAMES)
    fn = jit.get_module(header, names, device_id).get_function(name)
    swc, _, swr, sws = w.strides
    pointers = tuple(map(np.uint64, (x.ptr, w.ptr, w.ptr if bias is None else bias.ptr,
                                     out.ptr)))
    i32, i64 = np.int32, np.int64
    sizes = tuple(map(i32, (g.n, g.c, g.h, g.w, g.p, g.q)))
    if launch.mma:  # the step is the kernel's own, undilated; channels' strides 1, offsets 32-bit
        sxn, _, sxh, sxw = canonical_strides((g.n, g.c, g.h, g.w), x.strides)
        son, _, sop, soq = canonical_strides((g.n, g.k, g.p, g.q), out.strides)
        args = (*sizes, *map(i32, (g.r, g.s, top, left)), i64(sxn), i32(sxh), i32(sxw),
                *map(i64, (swc, swr, sws, son)), i32(sop), i32(soq), i32(bias is not None))
    elif launch.square:  # the filter's size and steps are the kernel's own; channels' strides 1
        # the strides the plan checked (a size-1 axis's may be any, and these are 32-bit)
        sxn, _, sxh, sxw = canonical_strides((g.n, g.c, g.h, g.w), x.strides)
        son, _, sop, soq = canonical_strides((g.n, g.k, g.p, g.q), out.strides)
        args = (*sizes, i32(top), i32(left), i64(sxn), i32(sxh), i32(sxw),
                *map(i64, (swc, swr, sws, son)), i32(sop), i32(soq),
                i32(bias is not None), i32(launch.slice))
    elif launch.vector:
        sxn, _, sxh, sxw = x.strides
        son, _, sop, soq = out.strides
        args = (*sizes, *map(i32, (g.r, g.s, *g.stride, top, left, *g.dilation)),
                *map(i64, (sxn, sxh, sxw, swc, swr, sws, son, sop, soq)),
                i32(bias is not None), i32(launch.slice))
    else:
        args = (*sizes, *map(i32, (g.r, g.s, *g.stride, top, left, *g.dilation)),
                *map(i64, (*x.strides, swc, swr, sws, *out.strides)),
                i32(launch.channels_last), i32(bias is not None))
    smem = launch.smem_bytes if launch.vector else 0
    grid = launch.grid(sms)
    threads = mma.THREADS if launch.mma else THREADS
    fn(grid, (threads,), (*pointers, *args), stream=stream, shared_mem=smem)
    record_direct(name, grid[0] * grid[1])
