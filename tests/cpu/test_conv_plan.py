"""A convolution's GPU plan (ConvPlan), made from shapes on any machine: the route, the
copies, the launch value (StepLaunch) it carries and what it prints; explain_conv2d and its
command line. The reference below is the decision conv2d made at call time before it
planned: the plan's launch must be that one."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from skcontract import explain_conv2d
from skcontract.__main__ import main
from skcontract.kernels import specs
from skcontract.kernels.conv import (CONV_SHAPE_DTYPE, InputView, fold_runs_tile,
                                     folded_taps, merged_groups, padded_channels,
                                     resolve_conv, vectors_fit)
from skcontract.kernels.operands import Operand
from skcontract.kernels import depthwise, depthwise_mma
from skcontract.kernels.depthwise import DepthwiseLaunch, plan_depthwise
from skcontract.kernels.step_launch import StepLaunch
from skcontract.ops.conv2d import conv_geometry
from skcontract.ops.conv_plan import (BIAS_ONLY, DEPTHWISE, EMPTY, IMPLICIT_GEMM, POINTWISE,
                                      ConvOperands, plan_conv2d)
from skcontract.plan.plan import UNPRICED_HINT
from skcontract.schedule import DeviceInfo

DEVICES = {"h200": DeviceInfo.h200(), "h100": DeviceInfo.named("h100")}

# (name, input shape, weight shape, conv2d's keywords): layers of ResNet-50 and MobileNet
LAYERS = [
    ("resnet 3x3", (32, 64, 56, 56), (64, 64, 3, 3), dict(padding=1)),
    ("resnet late 3x3, batch 1", (1, 512, 7, 7), (512, 512, 3, 3), dict(padding=1)),
    ("resnet stride-2 3x3", (32, 128, 56, 56), (128, 128, 3, 3), dict(stride=2, padding=1)),
    ("resnet stride-2 1x1 downsample", (32, 256, 56, 56), (512, 256, 1, 1), dict(stride=2)),
    ("resnet stem", (32, 3, 224, 224), (64, 3, 7, 7), dict(stride=2, padding=3)),
    ("pointwise 1x1", (32, 256, 56, 56), (64, 256, 1, 1), {}),
    ("pointwise to one channel", (8, 256, 28, 28), (1, 256, 1, 1), {}),
    ("depthwise 3x3", (32, 128, 28, 28), (128, 1, 3, 3), dict(padding=1, groups=128)),
    ("grouped 3x3", (8, 256, 28, 28), (256, 8, 3, 3), dict(padding=1, groups=32)),
]


def _reference_launch(g, dtype, device, ops: ConvOperands, tile=None, **options):
    """The im2col launch conv2d resolved at call time before it planned (for fresh copies:
    addresses on 16 bytes)."""
    cp = padded_channels(g, dtype)
    fold = folded_taps(g, dtype, device) if cp is not None else None
    merged = merged_groups(g, dtype, device) if cp is None and tile is None else None
    if fold is not None and tile is not None and not fold_runs_tile(fold, dtype, device, tile):
        fold = None
    x_ptr, w_ptr = 0, 0
    if fold is not None:
        view, g = fold.input_strides, fold.geometry
        ldb = g.r * g.c
    elif cp is not None:
        g = g._replace(c=cp)
        view, ldb = (g.h * g.w * cp, g.w * cp, cp), g.r * g.s * cp
    else:
        xs = ops.input_strides
        if g.c <= 1 or xs[1] == 1:
            view = tuple(xs[a] if (g.n, g.c, g.h, g.w)[a] > 1 else 0 for a in (0, 2, 3))
            x_ptr = ops.input_offset
        else:
            view = (g.h * g.w * g.c, g.w * g.c, g.c)
        k, cg, r, s = g.k, g.c // g.groups, g.r, g.s
        sk, sc, sr, ss = ops.weight_strides
        if merged is not None:  # groups merged, from a copy of their filters
            g = g._replace(groups=g.groups // merged)
            ldb = merged * cg * r * s
        elif all(n <= 1 or st == want for n, st, want in ((cg, sc, 1), (s, ss, cg),
                                                           (r, sr, s * cg))):
            ldb, w_ptr = (sk if k > 1 else r * s * cg), ops.weight_offset
        else:
            ldb = cg * r * s
    a_vec, b_vec = vectors_fit(g, dtype, InputView(x_ptr, *view), w_ptr, ldb)
    schedule, entry = resolve_conv(g, dtype, device, tile=tile, vec16=a_vec and b_vec,
                                  tma_only=fold is not None, merged=merged is not None,
                                  **options)
    if merged is not None and schedule.protocol not in specs.MERGED_PROTOCOLS:
        schedule, entry = resolve_conv(g, dtype, device, tile=tile, merged=True,
                                      **{**options, "mode": "data_parallel"})
    spec = specs.specialise(entry, protocol=schedule.protocol, a_layout="row", b_layout="col",
                            a_vec16=a_vec, b_vec16=b_vec,
                            a_source="im2col" if merged is None else "merged")
    return schedule, spec, view, ldb


def _plan(layer, dtype="float16", device="h200", channels_last=False, bias=False, **kw):
    _, x, w, options = layer
    g = conv_geometry(x, w, **options)
    return plan_conv2d(g, dtype, DEVICES[device], ConvOperands.dense(g, channels_last, bias),
                       **kw)


@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("layer", LAYERS, ids=[x[0] for x in LAYERS])
def test_the_plan_launches_what_the_call_resolved(layer, channels_last, dtype, device):
    """Every layer's plan: the im2col ones carry the launch the call-time resolve chose
    (schedule, kernel, view strides, filter rows), the pointwise ones a GEMM or Dot launch;
    the plan prints its kernel and schedule."""
    plan = _plan(layer, dtype, device, channels_last)
    g = plan.geometry
    launch = plan.launch
    if plan.route == DEPTHWISE:
        assert g.groups == g.c == g.k and launch is None and plan.channels_last == \
            channels_last
        vector = channels_last and g.c * np.dtype(
            "float16" if dtype == "bfloat16" else dtype).itemsize % 16 == 0
        mma = vector and depthwise_mma.planned(g, dtype)  # (dense operands)
        square = channels_last and not mma and depthwise.fixed_filter(g) is not None and \
            g.c % depthwise.PACK_CHANNELS[dtype] == 0
        wide = square and vector and dtype in ("float16", "bfloat16") and \
            depthwise.fixed_filter(g) in depthwise.WIDE_PLANNED
        assert plan.direct == DepthwiseLaunch(g, dtype, channels_last, vector or square,
                                              square, mma, wide)
        assert plan.direct.summary() in str(plan) and plan.copied_elements == 0
        return
    assert isinstance(launch, StepLaunch) and plan.channels_last == channels_last
    if plan.route == POINTWISE:
        assert (g.r, g.s, g.stride, g.padding, g.groups) == (1, 1, (1, 1), (0, 0, 0, 0), 1)
        assert not launch.spec.im2col and launch.conv is None
        assert plan.input_copy is None and plan.filter_copy is None
    else:
        assert plan.route == IMPLICIT_GEMM and launch.spec.im2col
        schedule, spec, view, ldb = _reference_launch(g, dtype, DEVICES[device],
                                                      plan.operands)
        assert launch.spec == spec
        assert (launch.schedule.digest(), launch.schedule.grid, launch.schedule.tile) == \
            (schedule.digest(), schedule.grid, schedule.tile)
        assert launch.conv.strides == view and launch.conv.ldb == ldb
        assert launch.conv.geometry == plan.run_geometry
        assert (plan.input_copy is None) == (channels_last and padded_channels(g, dtype) is None)
        assert plan.args == launch.conv.gemm_args(launch.schedule.problem, 0.0)
    text = str(plan)
    assert launch.spec.name in text and launch.schedule.summary() in text
    assert DEVICES[device].name in text and UNPRICED_HINT not in text


def test_real_layers_take_the_routes_and_entries_expected_on_hopper():
    h200 = {x[0]: _plan(x) for x in LAYERS}
    resnet = h200["resnet 3x3"]
    assert resnet.route == IMPLICIT_GEMM and resnet.launch.entry.IM2COL == "tma"
    assert (resnet.input_copy, resnet.filter_copy) == ("nhwc", "krsc")
    late = h200["resnet late 3x3, batch 1"]
    assert str(late.launch.schedule.reduction) == "cluster"
    stem = h200["resnet stem"]
    assert stem.fold is not None and (stem.input_copy, stem.filter_copy) == ("folded",
                                                                             "folded")
    assert stem.launch.conv.extent == stem.fold.extent
    assert stem.launch.schedule.problem.k == 7 * 64
    grouped = h200["grouped 3x3"]  # 8 channels a group: 8 groups merged into 64 channels
    assert grouped.launch.entry.IM2COL == "tma" and grouped.merged == 8
    assert grouped.filter_copy == "merged" and grouped.run_geometry.groups == 4
    assert str(grouped.launch.schedule.mode) == "data_parallel"
    assert "8 groups' channels merged" in str(grouped)
    exact = _plan(LAYERS[-1], dtype="float32")  # no TMA entry: the groups gathered apart
    assert exact.launch.entry.IM2COL == "gather" and exact.merged == 1
    depthwise = h200["depthwise 3x3"]
    assert depthwise.route == DEPTHWISE and depthwise.launch is None
    forced = _plan(LAYERS[7], tile=(128, 128, 32))  # GEMM options: the implicit GEMM
    assert forced.route == IMPLICIT_GEMM and forced.launch.entry.IM2COL == "gather"
    down = h200["resnet stride-2 1x1 downsample"]  # stride 2: not pointwise
    assert down.route == IMPLICIT_GEMM
    pointwise = h200["pointwise 1x1"]
    # NCHW: the product runs transposed, out^T = w^T x^T: (N images) x K x (H W) over C
    p = pointwise.launch.schedule.problem
    assert pointwise.swapped and (p.batch, p.m, p.n, p.k) == (32, 64, 56 * 56, 256)
    assert (pointwise.launch.spec.a_layout, pointwise.launch.spec.b_layout) == ("row", "row")
    assert pointwise.launch.entry.FAMILY == "Wgmma"
    one = h200["pointwise to one channel"]
    assert one.launch.form is not None and one.launch.entry.FAMILY == "Dot"


def test_a_channels_last_pointwise_product_is_not_transposed():
    plan = _plan(LAYERS[5], channels_last=True, bias=True)
    p = plan.launch.schedule.problem
    assert plan.route == POINTWISE and not plan.swapped
    assert (p.batch, p.m, p.n, p.k) == (1, 32 * 56 * 56, 64, 256)
    assert plan.args[-1] == 1.0  # beta: the bias written first
    assert "bias into the NHWC (32, 56, 56, 64) output (beta = 1)" in str(plan)


@pytest.mark.parametrize("c,packed", [(8, 8), (16, 4), (24, 2), (32, None), (40, None),
                                      (56, None)])
def test_short_pointwise_rows_run_as_rows_of_several_pixels(c, packed):
    """A channels-last 16-bit pointwise input of 2 MiB or more whose pixels' rows hold at
    most 48 bytes is read in place as rows of as many pixels as fit a 128-byte k-tile,
    against the filters repeated down a block diagonal (the product's M / packed x N *
    packed x K * packed), and a fix-up launch follows (the plan shows both); longer rows,
    smaller inputs, NCHW, float32 and no device read one pixel a row."""
    def plan(channels_last=True, dtype="float16", device="h100", n=64):
        return explain_conv2d((n, c, 56, 56), (144, c, 1, 1), dtype=dtype, device=device,
                              channels_last=channels_last)

    p = plan()
    assert p.route == POINTWISE and p.input_copy is None
    if packed is None:
        assert p.packed == 1 and p.launch.schedule.problem.k == c
        return
    assert p.packed == packed and p.filter_copy == "block-diagonal"
    prob = p.launch.schedule.problem
    assert (prob.m, prob.n, prob.k) == (64 * 56 * 56 // packed, 144 * packed, c * packed)
    assert (p.launch.spec.a_layout, p.launch.spec.b_layout) == ("row", "col")
    text = str(p)
    assert f"in place as the (N H W / {packed}) x {packed} C matrix" in text
    assert f"zeros elsewhere {(packed * 144, packed * c)}" in text
    assert "packed_fix: the input read again" in text and "the 0 after the last whole" in text
    small = 2 * 2**20 // (2 * c * 56 * 56)  # images below 2 MiB
    for other in (plan(channels_last=False), plan(dtype="float32"), plan(device=None),
                  plan(n=small)):
        assert other.packed == 1 and other.filter_copy != "block-diagonal"
    assert plan(n=small + 1).packed == packed
    assert f"reads rows of {packed} pixels" in str(plan(device=None))  # what a GPU would do
    forced = explain_conv2d((64, c, 56, 56), (144, c, 1, 1), dtype="float16", device="h100",
                            channels_last=True, tile=(128, 64))
    assert forced.packed == 1  # a forced tile names the product of one pixel a row
    g = conv_geometry((64, c, 56, 56), (144, c, 1, 1))
    for offset, want in ((16, packed), (8, 1)):  # the input 16 or 8 bytes into a line
        ops = ConvOperands.dense(g, True)._replace(input_offset=offset)
        assert plan_conv2d(g, "float16", DeviceInfo.named("h100"), ops).packed == want
    assert f"the {5001 * 3 * 9 % packed} after" in str(explain_conv2d(
        (5001, c, 3, 9), (144, c, 1, 1), dtype="float16", device="h100", channels_last=True))


def test_a_forced_tile_names_pixels_then_channels_in_both_layouts():
    for channels_last, want in ((True, (128, 64)), (False, (64, 128))):
        plan = _plan(LAYERS[5], channels_last=channels_last, tile=(128, 64))
        assert tuple(plan.launch.schedule.tile[:2]) == want


def test_the_launch_key_holds_the_convolution():
    """Two convolutions of one GEMM (same M, N, K) launch one kernel on one table but read
    other inputs: their launch values differ, so each gets its own LaunchPlan (and TMA
    maps) from the one cache of them."""
    a = explain_conv2d((1, 64, 8, 16), (64, 64, 3, 3), padding=1, device="h200",
                       channels_last=True)
    b = explain_conv2d((1, 64, 16, 8), (64, 64, 3, 3), padding=1, device="h200",
                       channels_last=True)
    assert a.launch.schedule.digest() == b.launch.schedule.digest()
    assert a.launch.spec == b.launch.spec
    assert a.launch != b.launch and a.launch.key != b.launch.key
    again = explain_conv2d((1, 64, 8, 16), (64, 64, 3, 3), padding=1, device="h200",
                           channels_last=True)
    assert again.launch == a.launch and hash(again.launch) == hash(a.launch)


def test_a_call_on_fresh_dense_arrays_gets_the_plan_explain_prints():
    """What a call describes of its arrays (16-byte aligned fresh allocations, dense) is the
    layout explain_conv2d plans for: the same plan, the same launch."""
    g = conv_geometry((4, 64, 14, 14), (128, 64, 3, 3), padding=1)
    x = Operand(0x7F0000200, (4, 64, 14, 14), (64 * 196, 196, 14, 1), "float16", 0)
    w = Operand(0x7F0100000, (128, 64, 3, 3), (576, 9, 3, 1), "float16", 0)
    ops = ConvOperands.of(x, w, True)
    assert ops == ConvOperands.dense(g, bias=True)
    explained = explain_conv2d((4, 64, 14, 14), (128, 64, 3, 3), True, padding=1,
                               device="h200")
    assert plan_conv2d(g, "float16", DeviceInfo.h200(), ops).launch == explained.launch


def test_strides_of_axes_of_one_element_do_not_matter():
    """An axis of one element is never stepped over, so its stride is anything: CuPy's
    channels-last copy of (1, 64, 1, 1) filters has strides (64, 1, 1, 1), the dense
    channels-last layout (64, 1, 64, 64). Both are the layout explain_conv2d plans for, and
    a batch of one image the same whatever its image stride."""
    g = conv_geometry((2, 64, 8, 8), (1, 64, 1, 1))
    x = Operand(0x7F0000200, (2, 64, 8, 8), (4096, 1, 512, 64), "float32", 0)
    dense = Operand(0x7F0100000, (1, 64, 1, 1), (64, 1, 64, 64), "float32", 0)
    cupy_copy = Operand(0x7F0100000, (1, 64, 1, 1), (64, 1, 1, 1), "float32", 0)
    ops = ConvOperands.of(x, cupy_copy, True)
    assert ops == ConvOperands.of(x, dense, True) == ConvOperands.dense(g, True, True)
    explained = explain_conv2d((2, 64, 8, 8), (1, 64, 1, 1), True, dtype="float32",
                               device="h100", channels_last=True)
    planned = plan_conv2d(g, "float32", DEVICES["h100"], ops)
    assert planned.launch == explained.launch and planned == explained
    # operands given as they lie are planned as the arrays would describe them
    raw = ConvOperands.dense(g, True, True)._replace(weight_strides=(64, 1, 1, 1))
    assert plan_conv2d(g, "float32", DEVICES["h100"], raw) == explained
    one = conv_geometry((1, 16, 9, 9), (8, 16, 3, 3), padding=1)
    images = [Operand(0, (1, 16, 9, 9), (n, 1, 144, 16), "float16", 0) for n in (1296, 7)]
    w = Operand(0, (8, 16, 3, 3), (144, 1, 48, 16), "float16", 0)
    a, b = (ConvOperands.of(x, w, False) for x in images)
    assert a == b and plan_conv2d(one, "float16", DEVICES["h200"], a) == \
        plan_conv2d(one, "float16", DEVICES["h200"], b)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("mode", ["data_parallel", "stream_k", "split_k"])
def test_the_mode_asked_for_is_the_mode_planned(mode, dtype):
    """conv2d's ``mode`` reaches the launch's schedule (the GPU test's convolution: K = 128
    x 9 taps, long enough for every mode to split)."""
    g = conv_geometry((1, 128, 7, 7), (72, 128, 3, 3), padding=1)
    ops = ConvOperands.dense(g, True, True)._replace(weight_strides=(1152, 9, 3, 1))
    for device in DEVICES.values():
        plan = plan_conv2d(g, dtype, device, ops, mode=mode, reduction="deterministic")
        assert plan.mode == mode and str(plan.launch.schedule.mode) == mode
        assert f"forced {mode}" in str(plan)


def test_misaligned_inputs_are_gathered_an_element_at_a_time():
    g = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    ops = ConvOperands.dense(g, channels_last=True)._replace(input_offset=2)
    plan = plan_conv2d(g, "float16", DeviceInfo.h200(), ops)
    assert plan.input_copy is None and plan.launch.entry.IM2COL == "gather"
    assert plan.launch.spec.a_vec == 1
    assert "element copies" in str(plan)


@pytest.mark.parametrize("weight_strides", [(1, 64, 1, 1), (1, -64, 1, 1)])
def test_pointwise_filters_without_a_usable_stride_are_copied(weight_strides):
    """(K, C, 1, 1) filters read as C x K: with neither stride 1 (a sliced weight), or a
    negative one, the product reads a contiguous copy."""
    g = conv_geometry((2, 64, 8, 8), (32, 64, 1, 1))
    sliced = ConvOperands.dense(g)._replace(weight_strides=(128, 2, 1, 1))
    plan = plan_conv2d(g, "float32", DeviceInfo.h200(), sliced)
    assert plan.route == POINTWISE and plan.filter_copy == "contiguous"
    flipped = ConvOperands.dense(g)._replace(weight_strides=(-64, 1, 1, 1))
    plan = plan_conv2d(g, "float32", DeviceInfo.h200(), flipped)
    assert plan.filter_copy == "contiguous"
    assert "C x K contiguous (64, 32)" in str(plan)


def test_pointwise_products_read_any_layout_without_a_k_major_copy():
    """The pointwise plan takes gemm()'s exact entries, which read every layout: no dtype
    conv2d runs on the GPU asks for a K-major copy without a float32 precision."""
    from skcontract.kernels.resolve import reads_k_major
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        assert not reads_k_major(dtype, None, 256, 90, True, 10**9, 1.0)


def test_empty_and_channel_free_convolutions_launch_nothing():
    empty = explain_conv2d((0, 8, 6, 6), (4, 8, 3, 3), device="h200")
    assert empty.route == EMPTY and empty.launch is None and "nothing runs" in str(empty)
    bias_only = explain_conv2d((2, 0, 6, 6), (4, 0, 3, 3), True, device="h200")
    assert bias_only.route == BIAS_ONLY and bias_only.launch is None
    assert "the output is the bias" in str(bias_only)


def test_without_a_device_nothing_is_priced(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", None)  # as on a machine without CuPy
    plan = explain_conv2d((32, 64, 56, 56), (64, 64, 3, 3), padding=1)
    assert plan.device is None and plan.launch is None
    text = str(plan)
    assert UNPRICED_HINT in text and "NCHW -> NHWC (32, 56, 56, 64)" in text
    stem = explain_conv2d((32, 3, 224, 224), (64, 3, 7, 7), stride=2, padding=3)
    assert stem.input_copy == "padded or folded" and "the GPU decides" in str(stem)


def test_explain_conv2d_prints_the_kernel_and_the_schedule(capsys):
    plan = explain_conv2d((32, 64, 56, 56), (64, 64, 3, 3), True, padding=1, device="h100",
                          dtype="bfloat16", channels_last=True)
    text = str(plan)
    assert text == plan.summary() == repr(plan)
    assert plan.launch.spec.name in text and "_im2col" in text
    assert plan.launch.schedule.summary() in text and "H100" in text
    assert main(["explain-conv2d", "32x64x56x56", "64x64x3x3", "--padding", "1", "--bias",
                 "--dtype", "bfloat16", "--device", "h100", "--channels-last"]) == 0
    assert capsys.readouterr().out.strip() == text
    assert main(["explain-conv2d", "8x3x32x32", "16x3x7x7", "--stride", "2", "--padding",
                 "3x3", "--dilation", "1"]) == 0
    assert "folded into channels" in capsys.readouterr().out


@pytest.mark.parametrize("args,kwargs,error,needle", [
    (((2, 4, 6, 6), (8, 3, 3, 3)), {}, ValueError, "expects 3 input channels"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(groups=0), ValueError, "groups must be positive"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(groups=1.0), TypeError, "groups must be an int"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(stride=0), ValueError, "stride must be positive"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(stride=1.5), TypeError, "stride must be an int"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(dilation=(1, 2, 3)), ValueError, "dilation must be"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(padding=-1), ValueError, "padding must be non-neg"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(padding="same", stride=2), ValueError,
     "padding='same' needs stride 1"),
    (((2, 4, 6, 6), (8, 4, 9, 9)), {}, ValueError, "larger than the padded input"),
    (((4, 6), (8, 4, 3, 3)), {}, ValueError, "input must be 3-D"),
    (((2, 4, 6, 6), (8, 4, 3)), {}, ValueError, "weight must be 4-D"),
    (((2, -4, 6, 6), (8, 4, 3, 3)), {}, ValueError, "input_shape must not be negative"),
    (((2, 4.0, 6, 6), (8, 4, 3, 3)), {}, TypeError, "input_shape must be a tuple of ints"),
    ((np.zeros((2, 4, 6, 6)), (8, 4, 3, 3)), {}, TypeError, "pass its .shape"),
    (((2, 4, 6, 6), 8), {}, TypeError, "weight_shape must be a tuple of ints"),
    (((2, 4, 6, 6), (8, 4, 3, 3), "yes"), {}, TypeError, "bias must be True or False"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(dtype="int8"), TypeError,
     "GPU kernels take float16, bfloat16, float32, float64, not int8"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(dtype=np.complex64), TypeError, "not complex64"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(dtype="nope"), TypeError, "not nope"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(mode="fast"), ValueError, "mode must be"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(reduction="sum"), ValueError, "reduction must be"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(tile=64), TypeError, "tile must be a tuple"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(tile=(64,)), ValueError, "tile must have 2 to 5"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(grid=0), ValueError, "grid must be a positive int"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(grid="8"), TypeError, "grid must be a positive int"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(device="a100"), ValueError, "unknown device"),
    (((2, 4, 6, 6), (8, 4, 3, 3)), dict(channels_last="yes"), TypeError, "channels_last"),
    (((2, 64, 6, 6), (8, 64, 3, 3)), dict(device="h200", tile=(32, 32)), ValueError,
     "no float16 kernel with tile"),
])
def test_bad_arguments_raise_before_planning(args, kwargs, error, needle):
    with pytest.raises(error, match=re.escape(needle)):
        explain_conv2d(*args, **kwargs)


@pytest.mark.parametrize("argv,needle", [
    (["explain-conv2d", "2x4x6x6", "8x3x3x3"], "expects 3 input channels"),
    (["explain-conv2d", "2x4x6x6", "8x4x3x3", "--dtype", "int8"], "not int8"),
    (["explain-conv2d", "2x4x6x6", "8x4x3x3", "--stride", "2,1"], "not an int or like 2x1"),
    (["explain-conv2d", "2x4x6x6", "8x4x3x3", "--padding", "same", "--stride", "2"],
     "needs stride 1"),
])
def test_the_command_line_says_what_is_wrong_in_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_the_command_line_help_describes_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["explain-conv2d", "--help"])
    text = capsys.readouterr().out
    for option in ("--bias", "--stride", "--padding", "--dilation", "--groups", "--dtype",
                   "--device", "--channels-last"):
        assert option in text


@pytest.mark.parametrize("strides,offset,channels,square,vector", [
    (None, 0, 144, True, True),                           # dense channels-last
    (None, 8, 144, True, False),                          # the input on 8 bytes, not 16
    (None, 4, 144, False, False),                         # the input off 8 bytes
    (None, 0, 140, True, False),                          # packs of 4 channels, not vectors of 8
    (None, 0, 142, False, False),                         # channels off the pack
    ((56 * 56 * 288, 2, 56 * 288, 288), 0, 144, False, False),  # every other channel
    ((56 * 64 * 144, 1, 64 * 144, 144), 0, 144, True, True),    # a crop of wider rows
])
def test_the_depthwise_vector_kernels_read_channels_on_their_vectors(strides, offset,
                                                                     channels, square, vector):
    """The square kernel (3 x 3 at steps 1 and 2 here) reads packs of 8 float16 channels (16
    bytes) where the channels lie on 16 bytes, else packs of 4 (8 bytes); the vector kernel
    (dilated filters here) and the tensor-core kernel (7 x 7 here) vectors of 8 (16 bytes); a
    7 x 7 filter off them runs the square kernel."""
    for step, columns in ((1, 4), (2, 2)):
        g = conv_geometry((4, channels, 56, 56), (channels, 1, 3, 3), stride=step,
                          padding=1, groups=channels)
        launch = plan_depthwise(g, "float16", True, strides, offset)
        assert launch.square == square and launch.vector == square and not launch.mma
        pack = 8 if vector else 4
        assert launch.wide == (square and vector)
        assert (f"{pack}-channel vectors x {columns} columns" in launch.summary()) == square
    wide = conv_geometry((4, channels, 56, 56), (channels, 1, 7, 7), padding=3,
                         groups=channels)
    launch = plan_depthwise(wide, "float16", True, strides, offset)
    assert launch.mma == vector and launch.square == (square and not vector)
    assert ("tensor cores" in launch.summary()) == vector
    dilated = conv_geometry((4, channels, 56, 56), (channels, 1, 3, 3), padding=2,
                            dilation=2, groups=channels)
    launch = plan_depthwise(dilated, "float16", True, strides, offset)
    assert launch.vector == vector and not launch.square
    assert ("8-channel vectors x 4 columns" in launch.summary()) == vector
    assert plan_depthwise(g, "float16", False, strides, offset).vector is False


@pytest.mark.parametrize("dtype,kernel,taps", [("float32", "square", 3), ("float16", "mma", 7)])
def test_the_square_kernel_takes_images_whose_offsets_fit_32_bits(dtype, kernel, taps):
    """The square and tensor-core kernels' offsets inside an image are 32-bit: an input
    view whose rows lie 2^29 elements apart runs the vector kernel instead."""
    g = conv_geometry((2, 16, 32, 32), (16, 1, taps, taps), padding=taps // 2, groups=16)
    near = plan_depthwise(g, dtype, True, (32 * 32 * 16, 1, 32 * 16, 16), 0)
    far = plan_depthwise(g, dtype, True, (32 * 2**29, 1, 2**29, 16), 0)
    assert getattr(near, kernel) and near.vector
    assert far.vector and not far.square and not far.mma and "depthwise_vec" in far.kernel


@pytest.mark.parametrize("channels,dtype,taps,slices,slice_", [
    (144, "float16", 5, 1, 18),     # 18 wide packs of 8 (the square kernel's): one slice
    (144, "float32", 3, 2, 18),     # 36 packs of 4: two even slices, not 32 + 4
    (512, "float32", 5, 4, 32),     # 128 packs: slices of MAX_SLICE
    (512, "float16", 3, 2, 32),     # 64 wide packs of 8: slices of MAX_SLICE
    (512, "float16", 13, 4, 16),    # 13 x 13 (the vector kernel's): 18 vectors fit SLICE_SMEM
    (96, "float64", 7, 2, 24),      # 2 doubles a pack
])
def test_the_depthwise_vector_kernel_slices_channels(channels, dtype, taps, slices, slice_):
    g = conv_geometry((2, channels, 28, 28), (channels, 1, taps, taps), padding=taps // 2,
                      groups=channels)
    launch = plan_depthwise(g, dtype, True)
    assert launch.vector and (launch.slices, launch.slice) == (slices, slice_)
    assert launch.slices * launch.slice >= launch.vectors > (launch.slices - 1) * launch.slice
    assert launch.smem_bytes == taps * taps * slice_ * launch.weight_bytes <= depthwise.SLICE_SMEM
    blocks, ys = launch.grid(132)
    assert ys == slices and 1 <= blocks * slices <= 132 * depthwise.VECTOR_BLOCKS_PER_SM + slices


@pytest.mark.parametrize("taps,stride,dilation,form", [
    (3, 1, 1, (3, 1)), (3, 2, 1, (3, 2)), (5, 2, 1, (5, 2)), (7, 1, 1, (7, 1)),
    (3, 1, 2, None),                # dilated: the vector kernel for any filter
    (9, 1, 1, None),                # no instantiation of its size
    (3, (1, 3), 1, None),           # column step 3
    (3, (2, 1), 1, None),           # steps that differ
])
def test_the_depthwise_square_kernel_takes_the_common_square_filters(taps, stride, dilation,
                                                                     form):
    g = conv_geometry((2, 64, 40, 40), (64, 1, taps, taps), stride=stride, dilation=dilation,
                      groups=64)
    launch = plan_depthwise(g, "float32", True)
    assert depthwise.fixed_filter(g) == form and launch.square == (form is not None)
    if form is None:
        assert launch.kernel == "skc::depthwise_vec<float>"
    else:
        assert launch.kernel == f"skc::depthwise_square<float, {form[0]}, {form[1]}, 4>"
        assert "inputs loaded once a strip" in launch.summary()
        # strips of two columns at step 2
        assert f"x {4 if form[1] == 1 else 2} columns" in launch.summary()
    assert launch.kernel in depthwise.NAMES
    assert plan_depthwise(g, "float32", False).kernel == "skc::depthwise<float>"


@pytest.mark.parametrize("dtype,taps,stride,dilation,channels,mma", [
    ("bfloat16", (3, 3), 1, 1, 64, True),
    ("float16", (7, 7), 1, 1, 96, True),
    ("float16", (9, 9), 1, 1, 64, True),     # the widest band B holds
    ("float16", (3, 5), 1, 1, 64, True),     # any rows and columns up to it
    ("float16", (1, 9), 1, 1, 24, True),     # 24 channels: the last tile's second vector absent
    ("float16", (11, 11), 1, 1, 64, False),  # wider than the band
    ("float16", (3, 3), 2, 1, 64, True),     # step 2: two GEMMs a filter row
    ("bfloat16", (7, 7), 2, 1, 24, True),    # step 2's largest window in 48 KB
    ("float16", (9, 9), 2, 1, 64, False),    # ... past it
    ("float16", (3, 3), (2, 1), 1, 64, False),  # steps that differ
    ("float16", (3, 3), 3, 1, 64, False),    # step 3
    ("float16", (3, 3), 1, 2, 64, False),    # dilated
    ("float32", (3, 3), 1, 1, 64, False),    # 16-bit data only
])
def test_the_tensor_core_kernel_takes_16_bit_steps_of_1_and_2(dtype, taps, stride, dilation,
                                                              channels, mma):
    """16-bit channels-last depthwise convolutions at steps of 1 or 2, undilated, filters of
    at most 9 x 9 (7 x 7 at step 2: its window in 48 KB), channels on 16 bytes, run on the
    tensor-core kernel: a CTA a tile of 16 x 32 pixels of 16 channels (8 at step 2), its
    input window staged as a plane a channel and column parity."""
    g = conv_geometry((3, channels, 37, 70), (channels, 1, *taps), stride=stride,
                      padding=(taps[0] // 2, taps[1] // 2), dilation=dilation,
                      groups=channels)
    assert depthwise_mma.takes(g, dtype) == mma
    if mma:
        launch = DepthwiseLaunch(g, dtype, True, True, False, True)
        assert launch.kernel == depthwise_mma.NAMES[2 * depthwise_mma.TYPES.index(dtype) +
                                                    stride - 1]
        assert not launch.square and "tensor cores" in launch.summary()
        chans, tiles = (16, 3 * 3 * 3) if stride == 1 else (8, 3 * 2 * 2)  # (37 x 70 out)
        assert launch.grid(132) == (-(-channels // chans) * tiles, 1)
        rows = stride * 15 + taps[0]
        filters = -(-chans * taps[0] * taps[1] * 2 // 16) * 16
        assert launch.smem_bytes == chans * stride * rows * 40 * 2 + filters <= 48 * 1024
    assert not plan_depthwise(g, dtype, False).mma


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("step", [1, 2])
def test_the_square_kernel_has_wide_16_bit_packs_for_3_by_3(monkeypatch, dtype, step):
    """The square kernel's 3 x 3 instantiations on packs of 8 16-bit channels (16 bytes):
    their staged weights take 32 bytes a tap; the planner runs them for the filters of
    WIDE_PLANNED only (both), and only where the channels lie on 16 bytes."""
    g = conv_geometry((4, 144, 56, 56), (144, 1, 3, 3), stride=step, padding=1, groups=144)
    launch = DepthwiseLaunch(g, dtype, True, True, True, wide=True)
    cxx = depthwise.TYPES[dtype]
    assert launch.kernel == f"skc::depthwise_square<{cxx}, 3, {step}, 8>" and \
        launch.kernel in depthwise.NAMES
    assert (launch.per_vector, launch.weight_bytes, launch.vectors) == (8, 32, 18)
    assert launch.smem_bytes == 9 * launch.slice * 32 and "8-channel vectors" in \
        launch.summary()
    assert plan_depthwise(g, dtype, True).wide
    monkeypatch.setattr(depthwise, "WIDE_PLANNED", ())
    assert not plan_depthwise(g, dtype, True).wide
    monkeypatch.setattr(depthwise, "WIDE_PLANNED", ((3, step),))
    assert not plan_depthwise(g, dtype, True, (56 * 56 * 144, 1, 56 * 144, 144), 8).wide


@pytest.mark.parametrize("shape,taps,stride,planned", [
    ((8, 96, 56, 56), 7, 1, True),      # ConvNeXt's 7 x 7: faster than the square kernel
    ((8, 64, 40, 40), 9, 1, True),
    ((8, 384, 14, 14), 7, 1, True),     # 196 of a tile's 512 pixels
    ((64, 960, 7, 7), 7, 1, False),     # 49 of 512: the square kernel
    ((8, 144, 56, 56), 3, 1, False),    # 3 x 3, 5 x 5: the square kernel is faster
    ((8, 240, 28, 28), 5, 1, False),
    ((8, 96, 112, 112), 7, 2, False),   # step 2: the square kernel was faster
])
def test_the_planner_runs_wide_filters_on_tensor_cores(shape, taps, stride, planned):
    """The planner runs a 16-bit depthwise convolution on the tensor-core kernel where it
    measured faster than the square kernel: filters of 7 or more at unit step, on outputs
    that fill a quarter of their tiles at least."""
    g = conv_geometry(shape, (shape[1], 1, taps, taps), stride=stride, padding=taps // 2,
                      groups=shape[1])
    assert depthwise_mma.takes(g, "float16")
    assert plan_depthwise(g, "float16", True).mma == planned == depthwise_mma.planned(
        g, "float16")


def test_a_filter_too_big_for_a_slice_runs_the_scalar_kernel():
    g = conv_geometry((1, 64, 80, 80), (64, 1, 57, 57), groups=64)
    assert 57 * 57 * 16 > depthwise.SLICE_SMEM
    assert plan_depthwise(g, "float16", True).vector is False


def test_merged_groups_run_the_kernels_that_recompute_non_finite_outputs():
    """Groups merged run the TMA entry's merged-groups kernels, which exist only for the
    fixups that leave a tile's sum in registers: auto's schedule of another fixup runs
    data-parallel, a forced one runs the groups apart, and a forced schedule of such a
    fixup keeps them merged; groups of 1 or 2 channels are not merged."""
    merged = [s for s in specs.im2col_specs() if s.merged]
    assert merged and all(s.entry.merges_groups and s.protocol in specs.MERGED_PROTOCOLS
                          for s in merged)
    with pytest.raises(ValueError, match="merged-groups"):
        specs.specialise(merged[0].entry, protocol="arrival", a_layout="row", b_layout="col",
                         a_source="merged")
    grouped = LAYERS[-1]
    auto = _plan(grouped, channels_last=True)
    assert auto.merged == 8 and auto.launch.spec.merged
    assert auto.launch.conv.shape().view(CONV_SHAPE_DTYPE)["merged"] == 8
    for mode, reduction in itertools.product(("auto", "stream_k", "split_k", "hybrid"),
                                             ("deterministic", "arrival", "atomic")):
        plan = _plan(grouped, channels_last=True, mode=mode, reduction=reduction)
        assert plan.launch.spec.merged == (plan.merged > 1)
        assert not plan.launch.spec.merged or plan.launch.spec.protocol in \
            specs.MERGED_PROTOCOLS
    few = ("64 groups of 8, 4 x 4 pixels", (2, 512, 4, 4), (512, 8, 5, 5),
           dict(padding=2, groups=64))  # few tiles: auto splits them
    split = _plan(few, channels_last=True)
    assert split.merged == 8 and split.launch.spec.protocol == "deterministic"
    clustered = _plan(few, channels_last=True, reduction="cluster")
    assert clustered.merged == 8 and str(clustered.launch.schedule.mode) == "data_parallel"
    forced = _plan(few, channels_last=True, mode="stream_k", reduction="arrival")
    assert forced.merged == 1 and forced.launch.entry.IM2COL == "gather"
    multiplier = ("two filters a channel", (2, 64, 9, 9), (128, 1, 3, 3),
                  dict(padding=1, groups=64))
    assert _plan(multiplier, channels_last=True).merged == 1
    apart = _plan(grouped, channels_last=True, tile=(128, 32))  # a forced tile: apart
    assert apart.merged == 1 and not apart.launch.spec.merged
    assert apart.launch.conv.shape().view(CONV_SHAPE_DTYPE)["merged"] == 1
