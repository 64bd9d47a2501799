"""conv2d on the GPU: plans a call (:mod:`.conv_plan`: one plan for each device, dtype,
geometry, layout and alignment of the arrays, bias and schedule options, made once), arranges
the caller's arrays (CuPy, or CUDA torch tensors) as the plan says, launches the plan's
launch through the one cache of bound launches (:func:`skcontract.kernels.conv.bind`; the
resolver is entered when the plan is made, never at the launch) and returns the caller's
type. :func:`plan_of` gives the plan a call runs, :func:`run_plan` runs a given one.

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
  view, an NCHW one a contiguous NCHW copy (that copy and an NCHW input's NHWC one by the
  transpose kernel, :func:`_transposed`);
* a bias is written into the output first and added by the epilogue (``beta = 1``);
* a pointwise convolution (1 x 1 filters, stride 1, no padding, one group) of a dense NCHW
  or channels-last input is a matrix product of its channels: it runs on the GEMM kernels
  over views of the input and the output in their own layouts (:func:`_pointwise`), so
  an NCHW input is neither copied to NHWC nor its output back; a channels-last 16-bit one
  of short rows is read as rows of several pixels, against a block-diagonal copy of the
  filters, a fix-up launch after the product
  (:func:`~.conv_plan.pointwise_packed_pixels`);
* a grouped 16-bit convolution of few channels a group (ResNeXt's) runs with groups merged
  on the TMA entry (:func:`~skcontract.kernels.conv.merged_groups`): its filters are written
  merged first (:mod:`~skcontract.kernels.merged_groups`);
* a depthwise convolution (groups == C == K) runs on the direct kernel
  (:mod:`skcontract.kernels.depthwise`), which reads the input and the filters in place and
  writes the output in the input's format, the bias included (:func:`_depthwise`).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ..interop import is_torch
from ..kernels import bound, fold_copy, merged_groups, pointwise_packed, relayout, torch_cuda
from ..kernels.conv import bind
from ..kernels.depthwise import run_depthwise
from ..kernels.jit import RegisterCountError
from ..kernels.launch import CoResidencyError, sm_count
from ..kernels.operands import describe
from ..kernels.resolve import device_info
from ..kernels.specs import VEC16_BYTES
from .conv_plan import (BIAS_ONLY, DEPTHWISE, EMPTY, IMPLICIT_GEMM, POINTWISE, ConvOperands,
                        ConvPlan, plan_conv2d)


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
        return _as_caller(ops, out, self.channels_last, self.batched, self.dev, stream)


def conv2d_gpu(input, weight, bias, g, *, mode="auto", reduction="deterministic", tile=None,
               grid=None, warm_args=None):
    """The convolution ``g`` (a checked ConvGeometry) of GPU arrays; see the module.
    ``warm_args``: the call's plain arguments, under which a call that reads its operands in
    place is remembered for :func:`warm_conv2d` (None: not remembered)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    x = input if len(input.shape) == 4 else input[None]
    X, Wt = describe(x), describe(weight)
    dev = cupy.cuda.runtime.getDevice()
    _check_devices(X, Wt, bias, dev)
    operands = ConvOperands.of(X, Wt, bias is not None)
    key = (dev, X.dtype, g, operands, mode, reduction, None if tile is None else tuple(tile),
           grid)
    try:
        call = _CALLS.get(key)
    except TypeError:  # an unhashable argument: planned, not remembered (the resolver says)
        key, call = None, None
    if call is None:
        call = _Call(plan_conv2d(g, X.dtype, device_info(dev), operands, mode=mode,
                                 reduction=reduction, tile=tile, grid=grid))
        if key is not None:
            if len(_CALLS) >= PLANS:
                _CALLS.clear()
            _CALLS[key] = call
    return _run(call, input, x, X, weight, Wt, bias, dev, warm_args)


PLANS = 4096
"""Convolution plans remembered by call (device, dtype, geometry, the arrays' layouts and
alignment, bias, schedule options): a network's layers, a few layouts each."""
_CALLS: dict = {}


class _Call:
    """A call's plan (:class:`~.conv_plan.ConvPlan`) and, once it has launched, its launch
    bound to the device (:func:`skcontract.kernels.conv.bind`)."""

    __slots__ = ("plan", "launch")

    def __init__(self, plan: ConvPlan):
        self.plan, self.launch = plan, None


def plan_of(input, weight, bias, g, *, mode="auto", reduction="deterministic", tile=None,
            grid=None) -> ConvPlan:
    """The plan :func:`conv2d_gpu` launches for these arrays and arguments on the current
    device (made here, or the one it made before)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    x = input if len(input.shape) == 4 else input[None]
    X, Wt = describe(x), describe(weight)
    dev = cupy.cuda.runtime.getDevice()
    operands = ConvOperands.of(X, Wt, bias is not None)
    key = (dev, X.dtype, g, operands, mode, reduction, None if tile is None else tuple(tile),
           grid)
    call = _CALLS.get(key)
    if call is not None:
        return call.plan
    return plan_conv2d(g, X.dtype, device_info(dev), operands, mode=mode, reduction=reduction,
                       tile=tile, grid=grid)


def run_plan(plan: ConvPlan, input, weight, bias=None):
    """Run ``plan`` (made by :func:`~.conv_plan.plan_conv2d` or
    :func:`skcontract.explain_conv2d` for this device) on GPU arrays laid out as it says:
    its launch, bound through the one cache of LaunchPlans, without entering the resolver.
    ValueError for arrays of other shapes, dtype, layouts or alignment than the plan's, or
    for a plan made for no device (which has no launch)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    if plan.launch is None and plan.route in (POINTWISE, IMPLICIT_GEMM):
        raise ValueError("conv2d: the plan was made for no device: it has no launch to run "
                         "(plan with device='gpu')")
    x = input if len(input.shape) == 4 else input[None]
    X, Wt = describe(x), describe(weight)
    dev = cupy.cuda.runtime.getDevice()
    _check_devices(X, Wt, bias, dev)
    g = plan.geometry
    got = (tuple(X.shape), tuple(Wt.shape), X.dtype, ConvOperands.of(X, Wt, bias is not None))
    want = ((g.n, g.c, g.h, g.w), (g.k, g.c // g.groups, g.r, g.s), plan.dtype, plan.operands)
    if got != want:
        raise ValueError(f"conv2d: the plan is for {want}; the arrays are {got}")
    return _run(_Call(plan), input, x, X, weight, Wt, bias, dev, None)


def _check_devices(X, Wt, bias, dev: int) -> None:
    devices = {X.device_id, Wt.device_id} | ({describe(bias).device_id} if bias is not None
                                            else set())
    if devices != {dev}:
        raise ValueError(f"conv2d: arrays on devices {sorted(devices)}; the current device is "
                         f"{dev} (use cupy.cuda.Device)")


def _run(call: _Call, input, x, X, weight, Wt, bias, dev: int, warm_args):
    """Arrange the arrays as ``call``'s plan says, launch, and return the caller's result."""
    plan, g = call.plan, call.plan.geometry
    ops = _ops_for(input)
    batched = len(input.shape) == 4
    stream = ops.stream(dev)
    if plan.route == EMPTY:
        out = ops.empty((g.n, g.p, g.q, g.k), x)
        return _as_caller(ops, out, plan.channels_last, batched, dev, stream)
    if plan.route == POINTWISE:
        out = _pointwise(call, ops, x, X, weight, Wt, bias, dev, stream)
        return out if batched else out[0]
    if plan.route == DEPTHWISE:
        out = _depthwise(plan, ops, x, X, Wt, bias, dev, stream)
        return out if batched else out[0]
    if plan.route == BIAS_ONLY:  # nothing to sum: the output is the bias (or zeros)
        out = ops.empty((g.n, g.p, g.q, g.k), x)
        if bias is not None:
            ops.fill_rows(out, bias)
        else:
            ops.zero(out)
        return _as_caller(ops, out, plan.channels_last, batched, dev, stream)
    w_ops = _ops_for(weight)
    x_ptr, w_ptr = X.ptr, Wt.ptr
    if plan.input_copy == "folded":  # few channels, each filter row's taps folded
        xs, ws = folded_copies(ops, w_ops, x, weight, g, plan.fold)
    elif plan.input_copy == "padded":  # few channels: zero-padded copies of whole vectors
        xs, ws = padded_copies(ops, w_ops, x, weight, plan.run_geometry.c)
    else:
        xs = x if plan.input_copy is None else _nhwc(ops, x, X, dev, stream)
        if plan.filter_copy == "merged":  # groups merged: their filters, merged
            run = plan.run_geometry
            ws = ops.empty((g.k, g.r, g.s, run.c // run.groups), x)
            merged_groups.merged_filters(Wt, g, plan.merged, _fresh(ws), plan.dtype, stream,
                                         dev, sm_count(dev))
        else:
            ws = weight if plan.filter_copy is None else \
                w_ops.contiguous(w_ops.permute(weight, (0, 2, 3, 1)))
    if xs is not x:
        x_ptr = _fresh(xs)
    if ws is not weight:
        w_ptr = _fresh(ws)
    out = ops.empty((g.n, g.p, g.q, g.k), x)
    if bias is not None:
        ops.fill_rows(out, bias)
    launch = _bound(call, dev, stream)
    launch(x_ptr, w_ptr, ops.ptr(out), stream)
    key = None
    if warm_args is not None and xs is x and ws is weight and len(_WARM) < WARM_CALLS:
        key = warm_key(input, weight, bias, warm_args)
    if key is not None:
        _WARM[key] = _WarmCall(ops, launch, dev, (g.n, g.p, g.q, g.k), plan.channels_last,
                               batched)
    del xs, ws  # held until the launch is queued (the stream orders their reuse)
    return _as_caller(ops, out, plan.channels_last, batched, dev, stream)


def _fresh(a) -> int:
    """The address of a copy made for the launch, which the plan takes for a fresh
    allocation's (16-byte vectors; RuntimeError otherwise)."""
    ptr = describe(a).ptr
    if ptr % VEC16_BYTES:
        raise RuntimeError(f"conv2d: a copy at {ptr:#x} is not on 16 bytes, as the plan "
                           "assumed of a fresh allocation")
    return ptr


def _bound(call: _Call, dev: int, stream):
    """The call's launch bound to device ``dev`` (:func:`skcontract.kernels.conv.bind`),
    made once. A pointwise GEMM whose kernel this device cannot build as its entry declares
    (a register count this compiler misses; a cluster pair of which the device keeps fewer
    clusters resident than planned, where auto chose it) is planned again without that
    entry, as :func:`skcontract.kernels.gemm.gemm` does, and the call keeps that plan, whose
    ``fallback`` says so."""
    launch = call.launch
    if launch is not None:
        return launch
    plan = call.plan
    try:
        launch = call.launch = bind(plan.launch, plan.args, dev, stream)
    except (RegisterCountError, CoResidencyError) as e:
        entry = plan.launch.entry
        if plan.route != POINTWISE or plan.launch.form is not None or (
                isinstance(e, CoResidencyError) and not (plan.tile is None and
                                                         entry.CLUSTER > 1)):
            raise
        warnings.warn(f"{e}; planned again without {entry.name}", RuntimeWarning)
        call.plan = plan_conv2d(plan.geometry, plan.dtype, plan.device, plan.operands,
                                mode=plan.mode, reduction=plan.reduction, tile=plan.tile,
                                grid=plan.grid, exclude=plan.exclude | {entry},
                                fallback=f"{e}; planned without {entry.name}")
        return _bound(call, dev, stream)
    return launch


def clear_plans() -> None:
    """Forget the plans and launches made so far (this module's, the warm calls', and the
    one cache of LaunchPlans)."""
    _CALLS.clear()
    _WARM.clear()
    bound.clear_plans()


def padded_copies(ops, w_ops, x, weight, channels: int):
    """The copies a convolution whose input channels are zero-padded reads, made with ``ops``
    / ``w_ops``: the input (N, C, H, W) as dense (N, H, W, channels) and the filters (K, C,
    R, S) as dense (K, R, S, channels), zeros past C."""
    return (ops.pad(ops.permute(x, (0, 2, 3, 1)), channels),
            w_ops.pad(w_ops.permute(weight, (0, 2, 3, 1)), channels))


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


def _depthwise(plan: ConvPlan, ops, x, X, Wt, bias, dev: int, stream):
    """A depthwise convolution on the direct kernel (:mod:`skcontract.kernels.depthwise`):
    the input and the filters read in place, the (N, K, P, Q) output written in the input's
    memory format (channels-last, else NCHW), the bias added by the kernel."""
    g = plan.geometry
    if plan.channels_last:
        out = ops.permute(ops.empty((g.n, g.p, g.q, g.k), x), (0, 3, 1, 2))
    else:
        out = ops.empty((g.n, g.k, g.p, g.q), x)
    b = None if bias is None else describe(ops.contiguous(bias))
    run_depthwise(plan.direct, X, Wt, b, describe(out), dev, stream, sm_count(dev))
    return out


def _pointwise(call: _Call, ops, x, X, weight, Wt, bias, dev: int, stream):
    """A pointwise convolution as its plan's one product over views in the caller's layouts
    (:func:`~.conv_plan.plan_conv2d`): a channels-last input is (N H W) x C row-major and
    its output (N H W) x K; an NCHW one is, per image, C x (H W) read as its (H W) x C
    column-major transpose, and its output (H W) x K column-major, so the output is NCHW.
    The filters (K, C, 1, 1) are read as their C x K transpose, or from a contiguous copy
    where the plan says (made on their own library's stream); where the input's short rows
    are read as rows of P pixels, the filters are written down the
    diagonal of a (P K) x (P C) matrix first and, after the product, the tail's pixels and
    the rows holding a non-finite channel are computed again
    (:mod:`~skcontract.kernels.pointwise_packed`). Returns the (N, K, H, W)
    output in the input's memory format. A pointwise call is not remembered for the warm
    path (:func:`warm_conv2d`)."""
    g = call.plan.geometry
    n, c, k = g.n, g.c, g.k
    filters, w_ptr, x_ptr = weight, Wt.ptr, X.ptr
    packed = call.plan.packed
    if packed > 1:  # short rows read `packed` pixels a row: block-diagonal filters
        filters = ops.empty((packed * k, packed * c), x)
        w_ptr = _fresh(filters)
        pointwise_packed.block_diagonal(Wt, (k, c), packed, w_ptr, call.plan.dtype, stream,
                                        dev, sm_count(dev))
    elif call.plan.filter_copy is not None:
        w_ops = _ops_for(weight)
        filters = w_ops.contiguous(w_ops.permute(weight.reshape((k, c)), (1, 0)))
        w_ptr = _fresh(filters)
    channels_last = call.plan.channels_last
    out = ops.empty((n, g.h, g.w, k) if channels_last else (n, k, g.h, g.w), x)
    if bias is not None:
        ops.fill_rows(out if channels_last else ops.permute(out, (0, 2, 3, 1)), bias)
    launch = _bound(call, dev, stream)
    a_ptr, b_ptr = (w_ptr, x_ptr) if call.plan.swapped else (x_ptr, w_ptr)
    launch(a_ptr, b_ptr, ops.ptr(out), stream)
    if packed > 1:  # the tail's pixels, and the rows a non-finite channel turned NaN
        pixels = n * g.h * g.w
        pointwise_packed.packed_fix(X.ptr, Wt, None if bias is None else describe(bias),
                                    ops.ptr(out), pixels, pixels // packed, packed, (k, c),
                                    call.plan.dtype, stream, dev, sm_count(dev))
    del filters  # held until the launch is queued
    return ops.permute(out, (0, 3, 1, 2)) if channels_last else out


def _ops_for(a):
    """The array operations of ``a``'s library (torch or CuPy)."""
    return _TorchOps() if is_torch(a) else _CupyOps()


def _as_caller(ops, out, channels_last: bool, batched: bool, dev: int, stream):
    """The NHWC output as the caller's (N, K, P, Q) array: a view for a channels-last input,
    a dense NCHW copy otherwise (:func:`_transposed`)."""
    if channels_last:
        res = ops.permute(out, (0, 3, 1, 2))
    else:
        n, p, q, k = out.shape
        res = _transposed(ops, out, ops.ptr(out), (n, p * q, k), (p * q * k, k, 1), dev,
                          stream)
        res = ops.contiguous(ops.permute(out, (0, 3, 1, 2))) if res is None else \
            res.reshape((n, k, p, q))
    return res if batched else res[0]


def _nhwc(ops, x, X, dev: int, stream):
    """The dense (N, H, W, C) copy of the (N, C, H, W) input ``x`` (described: ``X``) by
    :func:`_transposed` where its H and W step as one axis."""
    n, c, h, w = X.shape
    sn, sc, sh, sw = X.strides
    step = sh if w == 1 else sw if h == 1 or sh == w * sw else None
    res = None if step is None else _transposed(ops, x, X.ptr, (n, c, h * w),
                                                (sn, sc, step), dev, stream)
    if res is None:
        return ops.contiguous(ops.permute(x, (0, 2, 3, 1)))
    return res.reshape((n, h, w, c))


def _transposed(ops, a, ptr: int, shape, strides, dev: int, stream):
    """The dense (N, B, A) copy of ``a`` (its element [0...] at ``ptr``) read as the (N, A,
    B) ``shape`` at ``strides`` (in elements), by the transpose kernel (:func:`~skcontract.kernels.relayout.transpose_into`,
    which moves blocks through shared memory: the array libraries' copy of a permuted array
    ran at a third to a half of its speed on the H100), or None where the kernel does not
    take it."""
    n, rows, cols = shape
    out = ops.empty((n, cols, rows), a)
    if 0 in shape:
        return out
    if not relayout.transpose_into(ptr, shape, strides, ops.itemsize(a), ops.ptr(out),
                                   dev, stream):
        return None
    return out


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

    def itemsize(self, a) -> int:
        return a.itemsize

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

    def itemsize(self, a) -> int:
        return a.element_size()

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
        return torch_cuda.current_stream(device)
