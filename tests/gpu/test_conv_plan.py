"""A convolution's plan launches as planned: the plan explain_conv2d prints for dense arrays
is the one conv2d runs on them (the same launch value), and running a plan enters neither
the resolver nor the catalogue; its result is the convolution's."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conv_reference import direct

cupy = pytest.importorskip("cupy")

TOL = {"float16": 4e-3, "float32": 2e-5, "float64": 1e-12}

# (input shape, weight shape, conv2d's keywords, dtype, channels-last): the im2col entries
# (TMA im2col on Hopper, the gathering families), a grouped one, the folded stem, a pointwise
# product (NCHW: computed transposed) and a pointwise one on the Dot family
CASES = [
    ((2, 64, 14, 14), (64, 64, 3, 3), dict(padding=1), "float16", False),
    ((1, 128, 7, 7), (128, 128, 3, 3), dict(padding=1), "float16", True),
    ((2, 32, 12, 12), (48, 32, 3, 3), dict(stride=2, padding=1), "float32", False),
    ((2, 32, 10, 10), (64, 8, 3, 3), dict(padding=1, groups=4), "float64", True),
    ((2, 3, 30, 27), (16, 3, 7, 7), dict(stride=2, padding=3), "float16", False),
    ((2, 32, 8, 8), (24, 32, 1, 1), {}, "float32", False),
    ((2, 64, 8, 8), (1, 64, 1, 1), {}, "float32", True),
]


def _arrays(case, seed):
    x_shape, w_shape, options, dtype, channels_last = case
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])
    xd, wd, bd = (cupy.asarray(a.astype(dtype)) for a in (x, w, b))
    if channels_last:
        xd = cupy.ascontiguousarray(xd.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        wd = cupy.ascontiguousarray(wd.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    return (x, w, b), (xd, wd, bd)


def _check(got, host, case):
    from skcontract.ops.conv2d import conv_geometry
    x_shape, w_shape, options, dtype, _ = case
    x, w, b = host
    g = conv_geometry(x_shape, w_shape, **options)
    ref = direct(x, w, b, g.stride, g.padding, g.dilation, g.groups)
    err = np.abs(cupy.asnumpy(got).astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1)
    assert err <= TOL[dtype], err


def _no_resolver(monkeypatch):
    """Make every way into the resolver or the catalogue fail."""
    from skcontract.kernels import catalogue, conv, gemm, resolve
    from skcontract.ops import conv2d_gpu, conv_plan

    def entered(*args, **kwargs):
        raise AssertionError("the launch path entered the resolver or the catalogue")
    for module, name in ((resolve, "resolve_gemm"), (resolve, "resolve_dot"),
                         (resolve, "resolve_step"), (resolve, "resolve_product"),
                         (resolve, "entry_for"),
                         (catalogue.offer, "entries_for"), (conv, "resolve_conv"),
                         (conv, "resolve_gemm"), (conv, "conv_step_launch"),
                         (conv_plan, "resolve_product"),
                         (conv_plan, "conv_step_launch"), (conv_plan, "plan_conv2d"),
                         (conv2d_gpu, "plan_conv2d"),
                         (gemm, "resolve_product"), (gemm, "plan_launch")):
        monkeypatch.setattr(module, name, entered)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_running_a_plan_does_not_enter_the_resolver(case, monkeypatch):
    import skcontract
    from skcontract.kernels import bound
    from skcontract.kernels.launch import record_launches
    from skcontract.ops import conv2d_gpu
    x_shape, w_shape, options, dtype, channels_last = case
    plan = skcontract.explain_conv2d(x_shape, w_shape, True, dtype=dtype, device="gpu",
                                     channels_last=channels_last, **options)
    assert plan.launch is not None
    conv2d_gpu.clear_plans()  # the launch compiles and uploads it here, not at planning
    _no_resolver(monkeypatch)
    host, (xd, wd, bd) = _arrays(case, 3)
    with record_launches() as launches:
        got = conv2d_gpu.run_plan(plan, xd, wd, bd)
    assert [x.kernel for x in launches] == [plan.launch.spec.name]
    assert launches[0].digest == plan.launch.schedule.digest()
    _check(got, host, case)
    assert bound._PLANS and all(key[0] == plan.launch for key in bound._PLANS)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0] + c[1])))
def test_conv2d_runs_the_plan_explain_prints(case, monkeypatch):
    """The plan a call makes for fresh dense arrays is explain_conv2d's (the same launch
    value); the calls after it bind and launch that plan without the resolver."""
    import skcontract
    from skcontract.kernels import bound
    from skcontract.kernels.launch import record_launches
    from skcontract.ops import conv2d_gpu
    from skcontract.ops.conv2d import conv_geometry
    x_shape, w_shape, options, dtype, channels_last = case
    explained = skcontract.explain_conv2d(x_shape, w_shape, True, dtype=dtype, device="gpu",
                                          channels_last=channels_last, **options)
    host, (xd, wd, bd) = _arrays(case, 4)
    skcontract.conv2d(xd, wd, bd, **options)  # plans the call (and launches it)
    g = conv_geometry(x_shape, w_shape, **options)
    planned = conv2d_gpu.plan_of(xd, wd, bd, g)
    assert planned.launch == explained.launch and planned == explained
    bound.clear_plans()
    for call in conv2d_gpu._CALLS.values():  # bind again, through the one cache
        call.launch = None
    _no_resolver(monkeypatch)
    host, (xd, wd, bd) = _arrays(case, 5)
    with record_launches() as launches:
        got = skcontract.conv2d(xd, wd, bd, **options)
    assert [x.kernel for x in launches] == [explained.launch.spec.name]
    assert launches[0].digest == explained.launch.schedule.digest()
    _check(got, host, case)


def test_a_plan_refuses_arrays_it_was_not_made_for():
    import skcontract
    from skcontract.ops import conv2d_gpu
    case = CASES[0]
    plan = skcontract.explain_conv2d(case[0], case[1], True, dtype="float16", device="gpu",
                                     **case[2])
    _, (xd, wd, bd) = _arrays(case, 6)
    with pytest.raises(ValueError, match="the plan is for"):
        conv2d_gpu.run_plan(plan, xd, wd)  # no bias: another plan
    with pytest.raises(ValueError, match="the plan is for"):
        conv2d_gpu.run_plan(plan, xd.astype(cupy.float32), wd.astype(cupy.float32), bd)
