"""The GPU side of ``conv2d``: the implicit GEMM on the families' convolution entries
(``sk_conv.cuh``, ``sk_wgmma_conv.cuh``).

A convolution is the GEMM (N*P*Q) x (K/groups) x (C/groups*R*S), one batch entry per group
(:meth:`skcontract.ops.conv2d.ConvGeometry.problem`), with k ordered (r, s, c) so that a
channels-last input gives k-contiguous rows of A. The scheduler plans it like any GEMM
(:func:`resolve_conv`: the catalogue's entries with a convolution entry); the kernel reads
A's rows from the input in its load stage (a gather, or TMA im2col; padding is zero-fill),
reads the filters as (K, R, S, C/groups) rows and writes the NHWC output.
:func:`conv_step_launch` makes a convolution's launch value when it is planned
(:mod:`skcontract.ops.conv_plan`), :func:`bind` binds it to a device through the one cache of
LaunchPlans (:mod:`.bound`); :mod:`skcontract.ops.conv2d_gpu` arranges the arrays.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..kinds import Kind
from ..schedule import DeviceInfo
from ..schedule.types import CLUSTER
from . import bound, specs, tma
from .catalogue import INPUT_DTYPES, entries_for
from .catalogue.wgmma import MERGED_DTYPES, WGMMA_SWIZZLE_BYTES
from .launch import LaunchPlan
from .resolve import DEFAULT_REDUCTION, Resolved, compute_capability, resolve_gemm
from .step_launch import StepLaunch

CONV_SHAPE_FIELDS = (("stride_n", "<i8"), ("stride_h", "<i8"), ("stride_w", "<i8")) + tuple(
    (name, "<i4") for name in ("H", "W", "P", "Q", "R", "S", "Cg", "stride_y", "stride_x",
                               "pad_y", "pad_x", "dil_y", "dil_x", "extent", "merged"))
"""The fields of ``sk_conv.cuh``'s ConvShape, in its order and layout."""
CONV_SHAPE_DTYPE = np.dtype(list(CONV_SHAPE_FIELDS), align=True)
CONV_SHAPE_ARG = np.dtype((np.void, CONV_SHAPE_DTYPE.itemsize))
"""A packed ConvShape as the kernel argument CuPy passes by value."""

class InputView(NamedTuple):
    """A channels-last input on the device: its address and its image, row and column
    strides in elements (channels are contiguous)."""

    ptr: int
    stride_n: int
    stride_h: int
    stride_w: int


def conv_shape(g, x: InputView, extent: int = 0, merged: int = 1) -> np.void:
    """The packed ConvShape of geometry ``g`` (a ConvGeometry) over input ``x``; ``extent``:
    a folded convolution's elements of a pixel that hold data (0: all of them); ``merged``:
    the caller's groups merged into one of ``g``'s (:func:`merged_groups`; 1: none)."""
    rec = np.zeros((), CONV_SHAPE_DTYPE)
    values = dict(stride_n=x.stride_n, stride_h=x.stride_h, stride_w=x.stride_w, H=g.h, W=g.w,
                  P=g.p, Q=g.q, R=g.r, S=g.s, Cg=g.c // g.groups, stride_y=g.stride[0],
                  stride_x=g.stride[1], pad_y=g.padding[0], pad_x=g.padding[2],
                  dil_y=g.dilation[0], dil_x=g.dilation[1], extent=extent, merged=merged)
    for name, v in values.items():
        rec[name] = v
    return np.frombuffer(rec.tobytes(), CONV_SHAPE_ARG)[0]


def vectors_fit(g, dtype: str, x: InputView, w_ptr: int, ldb: int) -> tuple[bool, bool]:
    """Whether the input (A) and the filters at ``w_ptr`` (B) copy in 16-byte vectors: a
    vector of the input's channels never straddles two taps (C/groups a multiple of it; a
    filter's (r, s, c) are dense, so its vectors may), and every base address and stride is
    a multiple of 16 bytes."""
    elem = specs.CXX_TYPES[dtype][1]
    v = specs.VEC16_BYTES
    cg, kg = g.c // g.groups, g.k // g.groups
    a = (cg * elem) % v == 0 and x.ptr % v == 0 and all(
        (s * elem) % v == 0 for s in (x.stride_n, x.stride_h, x.stride_w))
    b = w_ptr % v == 0 and (ldb * elem) % v == 0 and (
        g.groups == 1 or (kg * ldb * elem) % v == 0)
    return a, b


def resolve_conv(g, dtype: str, device: DeviceInfo, *, mode: str = "auto",
                 reduction: str = DEFAULT_REDUCTION, tile=None, vec16: bool = True,
                 tma_only: bool = False, merged: bool = False, **options) -> Resolved:
    """The schedule and entry the GPU runs convolution ``g`` (a ConvGeometry) with.

    ``vec16``: the input and the filters are 16-byte aligned (addresses and strides) and
    C / groups fills 16-byte vectors. Then, on compute capability 9.0 and where the im2col
    maps express the geometry (:func:`.tma.conv_geometry_fits`), the Wgmma family runs it
    (A by TMA im2col loads, k padded to whole channel blocks a tap); otherwise, or for a
    forced ``tile`` only they have, the families that gather A. ``tma_only``: a TMA entry
    that zeros a folded convolution's padding taps (:func:`folded_taps`), or ValueError;
    ``merged``: groups merged (:func:`merged_groups`), on a TMA entry (whose kernel recomputes
    the outputs an infinite input turns NaN), or ValueError.

    >>> from skcontract.ops.conv2d import conv_geometry
    >>> g = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    >>> r = resolve_conv(g, "float16", DeviceInfo.h200())
    >>> r.entry.FAMILY, r.schedule.problem.k, str(r.schedule.mode), str(r.schedule.reduction)
    ('Wgmma', 4608, 'aligned', 'cluster')
    >>> resolve_conv(g, "float16", DeviceInfo.h200(), vec16=False).entry.FAMILY
    'Mma16'
    """
    if dtype not in INPUT_DTYPES or dtype == "int8":
        raise TypeError(f"conv2d: no GPU kernel takes {dtype} (have float16, bfloat16, "
                        "float32, float64)")
    args = dict(mode=mode, reduction=reduction, tile=tile, vec16=vec16, kind=Kind.CONV,
                operand_elems=operand_elems(g), **options)
    tma_r = None
    if vec16 and uses_tma(g, dtype, device):
        try:
            tma_r = resolve_gemm(g.problem(dtype, tma_channel_block(dtype)), device,
                                 im2col="tma", masked=tma_only and not merged,
                                 merged=merged, **args)
        except ValueError:
            if tile is None:
                raise
        if tma_r is not None and tile is not None:
            return tma_r
    if reduction == CLUSTER and tma_r is not None:
        return tma_r  # the Hopper family alone sums in a cluster's shared memory
    if tma_only or merged:
        if tma_r is None:
            raise ValueError(f"conv2d: no TMA convolution entry runs {dtype} {tuple(g)}")
        return tma_r
    gather_r = resolve_gemm(g.problem(dtype), device, im2col="gather", **args)
    if tma_r is None:
        return gather_r
    # the TMA entry's k runs over whole 64-channel blocks a tap: few channels pay for
    # the padding, which the predicted times weigh against the gather's slower mainloop
    return min((tma_r, gather_r), key=lambda r: r.schedule.predicted_time_us)


CHANNEL_PAD_MAX = 16
"""Input channels up to which a convolution whose channels do not fill 16-byte vectors is
run on a zero-padded copy of its input and filters (16-byte copies) rather than gathered an
element at a time: the stem's 3 channels padded to 8 (fp16) cost one pass over the input.
Above it, the copy's pass weighs more and the element gather less."""


def padded_channels(g, dtype: str) -> int | None:
    """The channel count a convolution's input and filters are copied to (zeros beyond C) so
    that each pixel's channels fill whole 16-byte vectors, or None: one group whose few
    channels (at most :data:`CHANNEL_PAD_MAX`, a network's stem) do not fill them."""
    vec = specs.VEC16_BYTES // specs.CXX_TYPES[dtype][1]
    if g.groups != 1 or g.c % vec == 0 or g.c > CHANNEL_PAD_MAX:
        return None
    return -(-g.c // vec) * vec


MERGED_MIN_GROUPS = 4
"""The fewest groups merged into one (:func:`merged_groups`): on the H100, ResNeXt's 16
channels a group ran 19.0 us merged four to one against 26.9 us apart, its 32 channels 15.2
merged two to one against 14.4 apart (docs/benchmarks/log.md, sixteenth session)."""
MERGED_MAX_GROUPS = 16
"""The most groups merged into one (:func:`merged_groups`: groups of 4 channels): merging
multiplies the multiply-adds by the groups merged, and groups of 1 or 2 channels (a channel
multiplier's) would pay 64 or 32 times theirs."""
MERGED_FALLBACK_MODE = "data_parallel"
"""The mode a merged convolution runs in where auto's schedule plans a fixup the merged
kernels lack (:data:`.specs.MERGED_PROTOCOLS`)."""


def merged_groups(g, dtype: str, device: DeviceInfo | None) -> int | None:
    """F, the groups of a grouped convolution run merged into one on the TMA entry, or None.

    The TMA entry reads a group's channels in whole k-tiles of
    :func:`tma_channel_block` channels, so groups of fewer channels (ResNeXt's 4, 8 and
    16) would read other groups' channels or leave most of each k-tile zero. F = block / Cg
    groups run as one of F Cg channels and F K/groups output channels against their filters
    merged (``merged_groups.cuh``: each output channel's at its group's place, zeros at the
    others'), at F times the multiply-adds, which these layers, bound by their bytes, have to
    spare; the kernel recomputes the outputs an infinite or NaN input turns NaN through
    those zeros from their own group's channels. Taken for a 16-bit grouped convolution
    whose channels a group divide the block into :data:`MERGED_MIN_GROUPS` to
    :data:`MERGED_MAX_GROUPS` groups dividing ``groups``, on a device with the TMA entry
    whose maps express the merged convolution.

    >>> from skcontract.ops.conv2d import conv_geometry
    >>> g = conv_geometry((32, 256, 28, 28), (256, 8, 3, 3), padding=1, groups=32)
    >>> merged_groups(g, "float16", DeviceInfo.h200())
    8
    >>> merged_groups(g._replace(groups=4, k=256), "float16", DeviceInfo.h200()) is None
    True
    """
    if device is None or g.groups == 1 or g.c < g.groups or dtype not in MERGED_DTYPES:
        return None
    cg, block = g.c // g.groups, tma_channel_block(dtype)
    merged = block // cg if block % cg == 0 else 0
    if not MERGED_MIN_GROUPS <= merged <= MERGED_MAX_GROUPS or g.groups % merged:
        return None
    return merged if uses_tma(g._replace(groups=g.groups // merged), dtype, device) else None


class FoldedTaps(NamedTuple):
    """A convolution of few channels run with each filter row's taps folded into channels
    (:func:`folded_taps`): ``geometry`` is the convolution the kernels run, over a copy of
    the input with ``channels`` channels a pixel (zeros past C) and rows ``width`` pixels
    wide whose first ``left`` are zeros (the left padding, then the image, then zeros); the
    view's column q starts at pixel q x ``step`` of a row (the stride along W), and its first
    ``extent`` elements (S taps of ``channels``) hold its data: the loads read whole channel
    blocks (the rest of a column's block is the next column's pixels), and the kernel zeros
    each block's elements past the extent in shared memory before it multiplies them
    (``Im2colTmaLoads::mask``), so that no zero weight meets an input pixel (zero times an
    infinite input would be NaN)."""

    geometry: tuple
    channels: int
    width: int
    left: int
    step: int
    extent: int

    @property
    def taps(self) -> int:
        """Taps of a folded filter row: S, then zero taps up to whole channel blocks."""
        return self.geometry.c // self.channels

    @property
    def input_strides(self) -> tuple[int, int, int]:
        """The image, row and column strides in elements of the view the kernels read: a
        column is ``step`` pixels of the copy, so consecutive columns' channels overlap."""
        row = self.width * self.channels
        return self.geometry.h * row, row, self.step * self.channels


@functools.lru_cache(maxsize=256)
def folded_taps(g, dtype: str, device: DeviceInfo) -> FoldedTaps | None:
    """How a convolution of few channels (:func:`padded_channels`) runs on the TMA entry, or
    None where it does not pay.

    With its input copied to rows of zero-padded pixels (the left and right padding written
    as zeros), the S taps of one filter row read consecutive pixels: ``S * channels``
    contiguous elements. So the kernels run a convolution with one tap a row (S = 1) over a
    view of that copy whose column q holds the channels of pixels q x stride, q x stride +
    1, ... (the view's columns overlap), the filters copied to match (a row's taps then
    channels, zero taps up to whole 64-channel blocks, which read as zeros). A k-tile is
    then a filter row of one block (the stem, 7 x 7 taps of 3 channels: 7 k-tiles of 64,
    K = 448) where the plain TMA entry pays a block for each of the 49 taps (K = 3136) and
    the gathering entry loads 16 bytes at a time on the portable mainloop. The copy's pixels
    take the fewest channels that keep the view's strides and extent TMA-aligned
    (:func:`_fold_channels`; the stem: 8). Taken where the TMA entry has the dtype and the
    folded convolution's predicted time is below the padded one's; dilation along W
    spreads a row's taps, so it is not folded.

    >>> from skcontract.ops.conv2d import conv_geometry
    >>> stem = conv_geometry((32, 3, 224, 224), (64, 3, 7, 7), stride=2, padding=3)
    >>> f = folded_taps(stem, "float16", DeviceInfo.h200())
    >>> f.geometry.c, f.geometry.s, f.geometry.w, f.geometry.stride, f.channels, f.extent
    (64, 1, 112, (2, 1), 8, 56)
    >>> f.geometry.problem().k, (f.geometry.p, f.geometry.q) == (stem.p, stem.q)
    (448, True)
    """
    if padded_channels(g, dtype) is None or g.dilation[1] != 1:
        return None
    elem = specs.CXX_TYPES[dtype][1]
    block = tma_channel_block(dtype)
    channels, step = _fold_channels(g, elem, block), g.stride[1]
    taps = -(-g.s * channels // block) * block // channels
    top, bottom, left, _ = g.padding
    width = max(left + g.w, (g.q - 1) * step + taps)
    while (width * channels * elem) % tma.ROW_ALIGN_BYTES:  # rows start 16 bytes apart
        width += 1
    folded = g._replace(c=taps * channels, w=g.q, s=1, stride=(g.stride[0], 1),
                        padding=(top, bottom, 0, 0), dilation=(g.dilation[0], 1))
    if not uses_tma(folded, dtype, device) or (g.s * channels * elem) % tma.ROW_ALIGN_BYTES:
        return None  # (the kernels zero whole 16-byte chunks past the taps' extent)
    folded_us = resolve_conv(folded, dtype, device, tma_only=True).schedule.predicted_time_us
    padded = g._replace(c=padded_channels(g, dtype))
    padded_us = resolve_conv(padded, dtype, device).schedule.predicted_time_us
    if folded_us >= padded_us:
        return None
    return FoldedTaps(folded, channels, width, left, step, g.s * channels)


def fold_runs_tile(fold: FoldedTaps, dtype: str, device: DeviceInfo, tile) -> bool:
    """Whether a forced ``tile`` has an entry that runs folded convolution ``fold`` (one
    whose kernel zeros the padding taps, :attr:`.catalogue.Wgmma.masks_stages`); where it
    has none, the convolution runs unfolded, on the padded copies."""
    try:
        resolve_conv(fold.geometry, dtype, device, tile=tile, tma_only=True)
    except ValueError:
        return False
    return True


def _fold_channels(g, elem: int, block: int) -> int:
    """The fewest channels, at least C, with which the folded view's columns (stride-x
    pixels apart) and a row's S taps (the map's channel extent) are whole 16-byte units, as
    TMA's strides and extents are, and which divide a ``block`` of channels (a k-tile holds
    whole pixels)."""
    channels = g.c
    while any(x % tma.ROW_ALIGN_BYTES for x in (g.stride[1] * channels * elem,
                                                 g.s * channels * elem)) or block % channels:
        channels += 1
    return channels


def operand_elems(g) -> int:
    """The elements one group's implicit GEMM reads: its input channels of every pixel (A,
    each read up to R x S times; no more than A's M x K when strides skip pixels) and its
    filters (B)."""
    cg, kg = g.c // g.groups, g.k // g.groups
    taps = cg * g.r * g.s
    return min(g.n * g.h * g.w * cg, g.n * g.p * g.q * taps) + kg * taps


def uses_tma(g, dtype: str, device: DeviceInfo) -> bool:
    """Whether the device and the dtype have a TMA convolution entry whose maps express
    ``g`` (alignment aside)."""
    cc = compute_capability(device)
    return (any(b.IM2COL == "tma" for b in entries_for(dtype, None, cc))
            and tma.conv_geometry_fits(g, specs.CXX_TYPES[dtype][1]))


def tma_channel_block(dtype: str) -> int:
    """Channels of one k-tile of the TMA convolution entry: one 128-byte swizzle row."""
    return WGMMA_SWIZZLE_BYTES // specs.CXX_TYPES[dtype][1]


class ConvArgs(NamedTuple):
    """What a convolution's launch needs beyond its kernel and schedule
    (:attr:`.step_launch.StepLaunch.conv`): ``geometry``, the convolution the im2col kernel
    runs (a ConvGeometry: after channel padding or folding); ``strides``, the image, row and
    column strides in elements of the channels-last input view it reads (0 for an axis of
    one); ``ldb``, the elements between two output channels' filters; ``extent``, a folded
    convolution's elements of a pixel that hold data (:class:`FoldedTaps`; None: not
    folded); ``merged``, the caller's groups merged into one of ``geometry``'s
    (:func:`merged_groups`; 1: none)."""

    geometry: tuple
    strides: tuple[int, int, int]
    ldb: int
    extent: int | None = None
    merged: int = 1

    def shape(self) -> np.void:
        """The packed ConvShape argument (:func:`conv_shape`)."""
        return conv_shape(self.geometry, InputView(0, *self.strides), self.extent or 0,
                          self.merged)

    def gemm_args(self, problem, beta: float) -> tuple:
        """The arguments an im2col launch takes after the three pointers and before the
        ConvShape, for the schedule's ``problem`` (whose k the TMA entry pads)."""
        g = self.geometry
        cg, kg = g.c // g.groups, g.k // g.groups
        return (problem.m, problem.n, problem.k, 0, self.ldb, g.k, cg, kg * self.ldb, kg,
                1.0, beta)


def conv_step_launch(g, dtype: str, device: DeviceInfo, *, strides: tuple, ldb: int,
                     a_vec16: bool, b_vec16: bool, extent: int | None = None,
                     merged: int = 1, mode: str = "auto", reduction: str = DEFAULT_REDUCTION,
                     tile=None, grid=None) -> StepLaunch:
    """The launch of convolution ``g`` (a ConvGeometry) over a channels-last input view of
    ``strides`` and filters whose output channels are ``ldb`` elements apart, whose input
    (A) and filters (B) copy in 16-byte vectors or not (:func:`vectors_fit`): the schedule and
    entry of :func:`resolve_conv`, the im2col kernel of that entry, and the convolution's
    :class:`ConvArgs`. ``extent``: a folded convolution's (:class:`FoldedTaps`), which the
    TMA entry runs, zeroing the rest of each channel block it loads; ``merged``: the
    caller's groups merged into one of ``g``'s (:func:`merged_groups`), which the TMA entry
    runs with a fixup of :data:`.specs.MERGED_PROTOCOLS` (auto's schedule, else
    :data:`MERGED_FALLBACK_MODE`'s; ValueError for a forced mode that plans another).
    Pure Python: made when
    a convolution is planned (:func:`skcontract.ops.conv_plan.plan_conv2d`).

    >>> from skcontract.ops.conv2d import conv_geometry
    >>> g = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    >>> launch = conv_step_launch(g, "float16", DeviceInfo.h200(), strides=(0, 3584, 512),
    ...                           ldb=4608, a_vec16=True, b_vec16=True)
    >>> launch.spec.im2col, launch.entry.IM2COL, launch.conv.ldb
    (True, 'tma', 4608)
    """
    options = {} if grid is None else {"grid": grid}
    resolve = functools.partial(resolve_conv, g, dtype, device, reduction=reduction, tile=tile,
                                vec16=a_vec16 and b_vec16, tma_only=extent is not None,
                                merged=merged > 1, **options)
    schedule, entry = resolve(mode=mode)
    if merged > 1 and schedule.protocol not in specs.MERGED_PROTOCOLS:
        if mode != "auto":
            raise ValueError(f"conv2d: merged groups run a fixup of {specs.MERGED_PROTOCOLS}, not "
                             f"{schedule.protocol!r} (mode={mode!r}, reduction={reduction!r})")
        schedule, entry = resolve(mode=MERGED_FALLBACK_MODE)
    spec = specs.specialise(entry, protocol=schedule.protocol, a_layout="row", b_layout="col",
                            a_vec16=a_vec16, b_vec16=b_vec16,
                            a_source="merged" if merged > 1 else "im2col")
    return StepLaunch(schedule, spec, conv=ConvArgs(g, tuple(strides), ldb, extent, merged))


class BoundConv(NamedTuple):
    """A convolution plan's launch bound to a device (:func:`bind`): the LaunchPlan, its
    bound launch (None without cuda.bindings' launch) and the launch's arguments after the
    pointers (an im2col kernel's ConvShape last). Calling it launches on new pointers (the
    kernel's A, B and C)."""

    plan: LaunchPlan
    bound: object
    args: tuple
    im2col: bool

    def __call__(self, a_ptr: int, b_ptr: int, c_ptr: int, stream) -> None:
        if self.bound is not None:
            self.bound(a_ptr, b_ptr, c_ptr, stream)
        elif self.im2col:
            self.plan.launch(a_ptr, b_ptr, c_ptr, *self.args[:-1], stream,
                             conv=self.args[-1])
        else:
            self.plan.launch(a_ptr, b_ptr, c_ptr, *self.args, stream)


def bind(launch: StepLaunch, args: tuple, dev: int, stream) -> BoundConv:
    """``launch`` (a convolution plan's: im2col, or the GEMM or Dot launch of a pointwise
    convolution) on device ``dev`` with ``args``, the arguments after the pointers (an im2col
    launch's ConvShape excluded: it comes from :attr:`~.step_launch.StepLaunch.conv`). The
    LaunchPlan comes from the one cache of them (:func:`.bound.launch_plan`, compiled and
    uploaded once); an im2col launch on the TMA entry gets its maps from the convolution's
    facts, which the launch value's key holds."""
    plan = bound.launch_plan(launch, dev, stream)
    conv = launch.conv
    if conv is None:
        return BoundConv(plan, plan.bind(*args), tuple(args), False)
    if plan.tensor_maps and plan.map_source is None:
        plan.map_source = functools.partial(tma.conv_maps, launch.spec, conv.geometry,
                                            conv.strides, conv.ldb, launch.schedule.problem.m)
    shape = conv.shape()
    return BoundConv(plan, plan.bind(*args, conv=shape), (*args, shape), True)
