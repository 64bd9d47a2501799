"""conv2d on the GPU: arranges the caller's arrays (CuPy, or CUDA torch tensors) for the
implicit-GEMM kernels (:mod:`skcontract.kernels.conv`) and returns the caller's type.

What is read in place and what is copied:

* the input is read in place when its channels are contiguous (channels-last, torch's
  ``channels_last``, any image / row / column strides); an NCHW input is copied to NHWC once;
* an input of few channels that do not fill 16-byte vectors (a stem's 3) is copied, with
  its filters, to NHWC with the channels zero-padded until they do
  (:func:`~skcontract.kernels.conv.padded_channels`), so that the kernels load 16 bytes at a
  time instead of gathering elements; where the TMA entry takes it, the copy's rows also
  carry the left and right padding as zeros and the filters' rows are folded into channels
  (:func:`~skcontract.kernels.conv.folded_taps`);
* the filters are read in place when each filter's (R, S, C / groups) is dense with the
  channels fastest (``channels_last`` weights); otherwise they are copied to that layout;
* the kernels write a dense NHWC output: a channels-last input gets it as its (N, K, P, Q)
  view, an NCHW one a contiguous NCHW copy;
* a bias is written into the output first and added by the epilogue (``beta = 1``);
* a pointwise convolution (1 x 1 filters, stride 1, no padding, one group) of a dense NCHW
  or channels-last input is a matrix product of its channels: it runs on the GEMM kernels
  over views of the input and the output in their own layouts (:func:`_pointwise`), so
  an NCHW input is neither copied to NHWC nor its output back.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..interop import is_torch
from ..kernels import fold_copy
from ..kernels.conv import (InputView, conv_launch, fold_runs_tile, folded_taps,
                             padded_channels)
from ..kernels.launch import sm_count
from ..kernels.gemm import gemm
from ..kernels.specs import VEC16_BYTES
from ..kernels.operands import describe
from ..kernels.resolve import device_info


WARM_CALLS = 4096
"""Warm calls remembered (:func:`warm_conv2d`): a network's layers, a few shapes each."""
_WARM: dict = {}
_TORCH_TENSOR: list = []
"""torch.Tensor once a torch call has imported torch (the warm path tests types with it)."""


def warm_conv2d(input, weight, bias, args: tuple):
    """A checked earlier call's launch replayed, or None: for torch tensors laid out as an
    earlier call's (shapes, strides, dtypes, devices, 16-byte alignment) that read both in
    place, with the same arguments ``args`` (stride, padding, dilation, groups, mode,
    reduction, tile, grid), which the caller has checked are plain values (ints, strings,
    tuples of ints: equal values mean the same call). Skips what the first call checked and
    arranged: one key, one allocation, one launch. CuPy arrays take the checked path every
    call."""
    key = warm_key(input, weight, bias, args)
    hit = _WARM.get(key) if key is not None else None
    return None if hit is None else hit(input, weight, bias)


def warm_key(input, weight, bias, args):
    """The key of a warm call (:func:`warm_conv2d`), or None for arrays it does not take."""
    tensor = _TORCH_TENSOR[0] if _TORCH_TENSOR else None
    # CUDA tensors (nn.Parameter filters included); get_device() alone does not tell CUDA
    # from other accelerators
    if tensor is None or not (isinstance(input, tensor) and input.is_cuda and
                              isinstance(weight, tensor) and weight.is_cuda) or (
            bias is not None and not (isinstance(bias, tensor) and bias.is_cuda)):
        return None
    import cupy  # optional dependency: only the GPU path needs CuPy
    bias_key = None if bias is None else (
        tuple(bias.shape), bias.stride(), bias.dtype, bias.get_device())
    return (tuple(input.shape), input.stride(), input.dtype, input.get_device(),
            input.data_ptr() & 15, tuple(weight.shape), weight.stride(), weight.dtype,
            weight.get_device(), weight.data_ptr() & 15, bias_key, args,
            cupy.cuda.runtime.getDevice())


class _WarmCall(NamedTuple):
    """What a warm call redoes: allocate the output, write the bias, launch, view."""

    ops: object
    launch: object
    dev: int
    out_shape: tuple
    channels_last: bool
    batched: bool

    def __call__(self, input, weight, bias):
        ops = self.ops
        stream = ops.stream(self.dev)
        out = ops.empty(self.out_shape, input)
        if bias is not None:
            ops.fill_rows(out, bias)
        self.launch(input.data_ptr(), weight.data_ptr(), out.data_ptr(), stream)
        return _as_caller(ops, out, self.channels_last, self.batched)


def conv2d_gpu(input, weight, bias, g, *, mode="auto", reduction="deterministic", tile=None,
               grid=None, warm_args=None):
    """The convolution ``g`` (a checked ConvGeometry) of GPU arrays; see the module.
    ``warm_args``: the call's plain arguments, under which a call that reads its operands in
    place is remembered for :func:`warm_conv2d` (None: not remembered)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    ops = _ops_for(input)
    batched = len(input.shape) == 4
    x = input if batched else input[None]
    X, Wt = describe(x), describe(weight)
    channels_last = _dense_nhwc(X)
    dev = cupy.cuda.runtime.getDevice()
    devices = {X.device_id, Wt.device_id} | ({describe(bias).device_id} if bias is not None
                                            else set())
    if devices != {dev}:
        raise ValueError(f"conv2d: arrays on devices {sorted(devices)}; the current device is "
                         f"{dev} (use cupy.cuda.Device)")
    shape_out = (g.n, g.k, g.p, g.q)
    if 0 in shape_out:
        out = ops.empty((g.n, g.p, g.q, g.k), x)
        return _as_caller(ops, out, channels_last, batched)
    stream = ops.stream(dev)
    if _is_pointwise(g) and _pointwise_rows_fit(X, g, channels_last):
        out = _pointwise(ops, x, weight, bias, g, channels_last, stream, mode=mode,
                         reduction=reduction, tile=tile, grid=grid)
        return out if batched else out[0]
    device = device_info(dev)
    cp = padded_channels(g, X.dtype)
    fold = folded_taps(g, X.dtype, device) if cp is not None else None
    if fold is not None and tile is not None and not fold_runs_tile(fold, X.dtype, device, tile):
        fold = None
    if fold is not None:  # few channels, each filter row's taps folded into channels
        xs, ws = folded_copies(ops, _ops_for(weight), x, weight, g, fold)
        view = InputView(describe(xs).ptr, *fold.input_strides)
        g = fold.geometry
        Wt, ldb = describe(ws), g.r * g.c
    elif cp is not None:  # few channels: zero-padded copies that fill 16-byte vectors
        xs = ops.pad(ops.permute(x, (0, 2, 3, 1)), cp)
        w_ops = _ops_for(weight)
        ws = w_ops.pad(w_ops.permute(weight, (0, 2, 3, 1)), cp)
        g = g._replace(c=cp)
        view = InputView(describe(xs).ptr, g.h * g.w * cp, g.w * cp, cp)
        Wt, ldb = describe(ws), g.r * g.s * cp
    elif _channels_contiguous(X):
        xs = x
        view = InputView(X.ptr, _stride(X, 0), _stride(X, 2), _stride(X, 3))
    else:  # NCHW: one NHWC copy
        xs = ops.contiguous(ops.permute(x, (0, 2, 3, 1)))
        view = InputView(describe(xs).ptr, g.h * g.w * g.c, g.w * g.c, g.c)
    if cp is None:
        ldb = _filter_rows(Wt, g)
        ws = weight
        if ldb is None:
            w_ops = _ops_for(weight)
            ws = w_ops.contiguous(w_ops.permute(weight, (0, 2, 3, 1)))
            Wt, ldb = describe(ws), (g.c // g.groups) * g.r * g.s
    out = ops.empty((g.n, g.p, g.q, g.k), x)
    beta = 0.0
    if bias is not None:
        ops.fill_rows(out, bias)
        beta = 1.0
    if g.c // g.groups == 0:  # nothing to sum: the output is the bias (or zeros)
        if bias is None:
            ops.zero(out)
    else:
        launch = conv_launch(g, X.dtype, view, Wt.ptr, ldb, beta=beta, dev=dev,
                             device=device, stream=stream, mode=mode,
                             reduction=reduction, tile=tile, grid=grid,
                             extent=None if fold is None else fold.extent)
        launch(view.ptr, Wt.ptr, ops.ptr(out), stream)
        key = None
        if warm_args is not None and xs is x and ws is weight and len(_WARM) < WARM_CALLS:
            key = warm_key(input, weight, bias, warm_args)
        if key is not None:
            _WARM[key] = _WarmCall(ops, launch, dev, (g.n, g.p, g.q, g.k), channels_last,
                                   batched)
    del xs, ws  # held until the launch is queued (the stream orders their reuse)
    return _as_caller(ops, out, channels_last, batched)


def folded_copies(ops, w_ops, x, weight, g, fold):
    """The copies a folded convolution (:func:`~skcontract.kernels.conv.folded_taps`) reads,
    made with ``ops`` / ``w_ops`` (the input's and the filters' array operations): the input
    (N, C, H, W) as (N, H, width, channels) rows, zeros left and right of the image and past
    its channels; the filters (K, C, R, S) as (K, R, 1, taps * channels), a row's taps then
    channels, zeros past S taps and C channels."""
    xs = ops.pad(ops.permute(x, (0, 2, 3, 1)), fold.channels, fold.left,
                 fold.width - fold.left - g.w)
    ws = w_ops.pad(w_ops.permute(weight, (0, 2, 3, 1)), fold.channels, 0, fold.taps - g.s)
    return xs, ws.reshape((g.k, g.r, 1, fold.geometry.c))


def _pointwise_rows_fit(X, g, channels_last: bool) -> bool:
    """Whether a pointwise convolution's input is read in place as the GEMM's A with rows
    of whole 16-byte vectors (as the im2col path's NHWC copy would give them): a dense
    channels-last input of C channels a pixel, or a dense NCHW one of H x W pixels a
    channel."""
    elem = X.itemsize()
    if channels_last:
        return (g.c * elem) % VEC16_BYTES == 0
    return _dense_nchw(X) and (g.h * g.w * elem) % VEC16_BYTES == 0


def _is_pointwise(g) -> bool:
    """1 x 1 filters, stride 1, no padding, one group: each output pixel is the filters'
    product with that input pixel's channels."""
    return (g.r, g.s, g.stride, g.padding, g.groups) == (1, 1, (1, 1), (0, 0, 0, 0), 1)


def _pointwise(ops, x, weight, bias, g, channels_last, stream, **schedule):
    """A pointwise convolution as one GEMM, out[pixels, k] = x[pixels, c] @ w[c, k], over
    views in the caller's layouts: a channels-last input is (N H W) x C row-major and its
    output (N H W) x K; an NCHW one is, per image, C x (H W) read as its (H W) x C
    column-major transpose, and its output (H W) x K column-major, so the output is NCHW.
    The filters (K, C, 1, 1) are read as their C x K transpose. Returns the (N, K, H, W)
    output in the input's memory format. Filters without a unit stride along K or C are
    copied first, on their own library's stream (the GEMM would copy them on CuPy's). A
    forced ``tile`` names (pixels, output channels), as the im2col path's; the NCHW product
    is computed transposed (its output is column-major), so the tile is swapped to match.
    A pointwise call is not remembered for the warm path (:func:`warm_conv2d`)."""
    n, c, hw, k = g.n, g.c, g.h * g.w, g.k
    w_ops = _ops_for(weight)
    filters = w_ops.permute(weight.reshape((k, c)), (1, 0))
    if c > 1 and k > 1 and 1 not in describe(filters).strides:
        filters = w_ops.contiguous(filters)
    tile = schedule.get("tile")
    if tile is not None and not channels_last:
        schedule["tile"] = (tile[1], tile[0], *tile[2:])
    if channels_last:
        out = ops.empty((n, g.h, g.w, k), x)
        a = ops.permute(x, (0, 2, 3, 1)).reshape((n * hw, c))
        product = out.reshape((n * hw, k))
    else:
        out = ops.empty((n, k, g.h, g.w), x)
        a = ops.permute(x.reshape((n, c, hw)), (0, 2, 1))
        product = ops.permute(out.reshape((n, k, hw)), (0, 2, 1))
    beta = 0.0
    if bias is not None:
        if channels_last:
            ops.fill_rows(out, bias)
        else:
            ops.fill_rows(ops.permute(out, (0, 2, 3, 1)), bias)
        beta = 1.0
    gemm(a, filters, product, beta=beta, stream=stream, **schedule)
    return ops.permute(out, (0, 3, 1, 2)) if channels_last else out


def _dense_nchw(x) -> bool:
    """The input's (N, C, H, W) dense in that order."""
    n, c, h, w = x.shape
    return all(size <= 1 or st == want for size, st, want in zip(
        (n, c, h, w), x.strides, (c * h * w, h * w, w, 1)))


def _ops_for(a):
    """The array operations of ``a``'s library (torch or CuPy)."""
    return _TorchOps() if is_torch(a) else _CupyOps()


def _stride(op, axis: int) -> int:
    """An axis' stride in elements, 0 for an axis of one element (never stepped over)."""
    return op.strides[axis] if op.shape[axis] > 1 else 0


def _channels_contiguous(x) -> bool:
    return x.shape[1] <= 1 or x.strides[1] == 1


def _dense_nhwc(x) -> bool:
    """A dense NHWC layout that is not also dense NCHW (as the CPU path's rule)."""
    n, c, h, w = x.shape
    sn, sc, sh, sw = x.strides
    nhwc = all(size <= 1 or st == want for size, st, want in (
        (c, sc, 1), (w, sw, c), (h, sh, w * c), (n, sn, h * w * c)))
    nchw = all(size <= 1 or st == want for size, st, want in (
        (w, sw, 1), (h, sh, w), (c, sc, h * w), (n, sn, c * h * w)))
    return nhwc and not nchw


def _filter_rows(w, g) -> int | None:
    """The elements between two output channels' filters when each filter's (R, S, C/groups)
    is dense with the channels fastest (read in place); None when the filters need a copy."""
    k, cg, r, s = w.shape
    sk, sc, sr, ss = w.strides
    dense = all(size <= 1 or st == want for size, st, want in (
        (cg, sc, 1), (s, ss, cg), (r, sr, s * cg)))
    if not dense:
        return None
    return sk if k > 1 else r * s * cg


def _as_caller(ops, out, channels_last: bool, batched: bool):
    """The NHWC output as the caller's (N, K, P, Q) array: a view for a channels-last input,
    a contiguous NCHW copy otherwise."""
    res = ops.permute(out, (0, 3, 1, 2))
    if not channels_last:
        res = ops.contiguous(res)
    return res if batched else res[0]


class _CupyOps:
    """The few array operations the GPU path needs, on CuPy arrays (or on NumPy's, which
    share the API: ``xp``, for the CPU tests of the copies)."""

    def __init__(self, xp=None):
        if xp is None:
            import cupy as xp  # optional dependency: only the GPU path needs CuPy
        self.xp = xp

    def permute(self, a, axes):
        return a.transpose(axes)

    def contiguous(self, a):
        return self.xp.ascontiguousarray(a)

    def empty(self, shape, like):
        return self.xp.empty(shape, like.dtype)

    def fill_rows(self, out, row):
        out[...] = row

    def ptr(self, a) -> int:
        return a.data.ptr

    def pad(self, a, channels, left=0, right=0):
        """A dense copy of ``a`` (..., W, C) with zeros past its C channels up to
        ``channels`` and ``left`` / ``right`` columns of zeros around its W (on the GPU, a
        4-D array of 16-bit elements in one pass: :mod:`~skcontract.kernels.fold_copy`)."""
        *outer, w, c = a.shape
        width = left + w + right
        if self.xp is not np and fold_copy.fits(a.shape, a.itemsize, channels):
            out = self.xp.empty((*outer, width, channels), a.dtype)
            dev = a.device.id
            fold_copy.fold_copy(a.data.ptr, a.shape, tuple(s // a.itemsize for s in a.strides),
                                out.data.ptr, channels, left, width, self.stream(dev), dev,
                                sm_count(dev))
            return out
        out = self.xp.zeros((*outer, width, channels), a.dtype)
        out[..., left:left + w, :c] = a
        return out

    def zero(self, out):
        out.fill(0)

    def stream(self, device: int):
        return self.xp.cuda.get_current_stream()


class _TorchOps:
    """The same on CUDA torch tensors (bfloat16 included), on torch's current stream."""

    def __init__(self):
        import torch  # optional dependency: only torch callers reach this
        self.torch = torch
        if not _TORCH_TENSOR:
            _TORCH_TENSOR.append(torch.Tensor)

    def permute(self, a, axes):
        return a.permute(*axes)

    def contiguous(self, a):
        return a.contiguous()

    def empty(self, shape, like):
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def fill_rows(self, out, row):
        out.copy_(row.expand(out.shape))

    def ptr(self, a) -> int:
        return a.data_ptr()

    def pad(self, a, channels, left=0, right=0):
        """A dense copy of ``a`` (..., W, C) with zeros past its C channels up to
        ``channels`` and ``left`` / ``right`` columns of zeros around its W (a 4-D tensor of
        16-bit elements in one pass: :mod:`~skcontract.kernels.fold_copy`)."""
        *outer, w, c = a.shape
        width = left + w + right
        if fold_copy.fits(tuple(a.shape), a.element_size(), channels):
            out = self.torch.empty((*outer, width, channels), dtype=a.dtype, device=a.device)
            dev = a.device.index
            fold_copy.fold_copy(a.data_ptr(), tuple(a.shape), tuple(a.stride()),
                                out.data_ptr(), channels, left, width, self.stream(dev), dev,
                                sm_count(dev))
            return out
        return self.torch.nn.functional.pad(
            a, (0, channels - c, left, right)).contiguous()

    def zero(self, out):
        out.zero_()

    def stream(self, device: int):
        key = (_current_raw_stream(self.torch, device), device)
        stream = _TORCH_STREAMS.get(key)
        if stream is None:
            stream = _TORCH_STREAMS[key] = _cupy_stream(*key)
        return stream


def _current_raw_stream(torch, device: int) -> int:
    """The handle of torch's current stream on ``device``: through torch's own accessor of
    the raw handle where it has one (a few microseconds less a call than building the
    ``torch.cuda.Stream`` object), else through that object."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


class _StreamHandle:
    """A stream handle as the CUDA stream protocol presents one (``__cuda_stream__``)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return 0, self.handle


def _cupy_stream(handle: int, device: int):
    """A CuPy stream object over a torch stream's handle: through the CUDA stream protocol
    where CuPy has it (``Stream.from_external``), else CuPy 13's ``ExternalStream``."""
    import cupy  # optional dependency: only the GPU path needs CuPy
    if hasattr(cupy.cuda.Stream, "from_external"):
        return cupy.cuda.Stream.from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle, device)


_TORCH_STREAMS: dict = {}
"""(torch stream handle, device) -> a CuPy stream object over it, made once: making one per
call costs more host time than the launch. The object only names the handle, so it stays
right for as long as the handle names a stream."""
