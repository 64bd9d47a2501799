"""The CPU plan of conv2d (skcontract/ops/conv_cpu_plan.py): what explain_conv2d(device="cpu")
prints is what conv2d runs on NumPy arrays of those shapes, and it says why a NumPy form runs
where a C kernel's rule would take the layer."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract import conv2d, explain_conv2d
from skcontract.host import cc
from skcontract.ops import conv2d as conv2d_module
from skcontract.ops import conv2d_cpu

LAYERS = [  # (x shape, w shape, stride, padding, groups, channels-last, route)
    ((2, 16, 12, 12), (16, 1, 3, 3), 1, 1, 16, False, conv2d_cpu.DEPTHWISE),
    ((2, 16, 12, 12), (16, 1, 3, 3), 1, 1, 16, True, conv2d_cpu.DEPTHWISE),
    ((2, 16, 9, 9), (16, 4, 3, 3), 1, 1, 4, False, conv2d_cpu.DIRECT),
    ((2, 128, 4, 4), (8, 128, 3, 3), 1, 1, 1, False, None),  # BLAS: planes or gathered
    ((2, 8, 5, 5), (6, 8, 1, 1), 1, 0, 1, False, conv2d_cpu.POINTWISE),
    ((2, 0, 5, 5), (6, 0, 3, 3), 1, 1, 1, False, conv2d_cpu.ZEROS),
]


@pytest.mark.parametrize("xs,ws,stride,padding,groups,last,route", LAYERS)
def test_conv2d_runs_the_plan_explain_prints(monkeypatch, xs, ws, stride, padding, groups,
                                             last, route):
    plans = []
    run = conv2d_module.conv2d_cpu
    monkeypatch.setattr(conv2d_module, "conv2d_cpu",
                        lambda x, w, g, plan: plans.append(plan) or run(x, w, g, plan))
    x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    if last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    conv2d(x, np.ones(ws, np.float32), None, stride, padding, 1, groups)
    shown = explain_conv2d(xs, ws, False, stride, padding, 1, groups, "float32", "cpu",
                           channels_last=last)
    assert plans == [shown]
    kernels = cc.load("conv") is not None
    if route in (conv2d_cpu.DEPTHWISE, conv2d_cpu.DIRECT) and not kernels:
        assert shown.fallback and shown.run is None
    elif route is not None:
        assert shown.route == route
    else:
        assert shown.route in (conv2d_cpu.GATHERED, conv2d_cpu.PLANES)
    assert shown.route in str(shown)


@pytest.mark.skipif(cc.load("conv") is None, reason="no host library")
def test_the_plan_shows_the_kernel_its_form_and_threads():
    text = str(explain_conv2d((8, 16, 20, 20), (16, 1, 3, 3), padding=1, groups=16,
                              dtype="float64", device="cpu", channels_last=True))
    assert "depthwise_nhwc_f64, channels-last" in text and "threads" in text
    plan = explain_conv2d((4, 8, 7, 7), (8, 1, 7, 7), padding=3, groups=8, dtype="float32",
                          device="cpu")
    assert plan.run.form == "lanes" and plan.run.function == "depthwise_f32_lanes"


def test_where_the_kernels_cannot_run_the_plan_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(cc, "_LOADED", {})
    monkeypatch.setattr(cc, "_REASONS", {})
    monkeypatch.setenv(cc.ENV_SWITCH, "0")
    plan = explain_conv2d((2, 8, 9, 9), (8, 1, 3, 3), padding=1, groups=8, dtype="float32",
                          device="cpu")
    assert plan.run is None and cc.ENV_SWITCH in plan.fallback
    assert f"no C kernel: {plan.fallback}" in str(plan)
    complex_plan = explain_conv2d((2, 8, 9, 9), (8, 1, 3, 3), padding=1, groups=8,
                                  dtype="complex64", device="cpu")
    assert complex_plan.fallback


def test_the_cpu_plan_takes_the_cpu_dtypes_only():
    assert explain_conv2d((1, 2, 5, 5), (2, 2, 3, 3), dtype="float16", device="cpu").dtype \
        == "float32"  # float16 computes in float32
    with pytest.raises(TypeError, match="floating and complex"):
        explain_conv2d((1, 2, 5, 5), (2, 2, 3, 3), dtype="int32", device="cpu")
