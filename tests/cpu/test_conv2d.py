"""conv2d on the CPU against a float64 direct convolution (loops over the filter taps, no
strided windows), over random shapes and every argument form; every error."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcontract import conv2d
from skcontract.ops.conv2d import conv_geometry

RTOL = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13, "complex64": 2e-6,
        "complex128": 1e-13}


def direct(x, w, bias, stride, pad, dilation, groups):
    """The definition, in float64 / complex128: out[n, k, p, q] = bias[k] + sum over c, r, s
    of x_padded[n, g*Cg + c, p*sh + r*dh, q*sw + s*dw] * w[k, c, r, s], g = k // Kg."""
    wide = np.complex128 if np.iscomplexobj(x) else np.float64
    x, w = x.astype(wide), w.astype(wide)
    top, bottom, left, right = pad
    xp = np.zeros(x.shape[:2] + (x.shape[2] + top + bottom, x.shape[3] + left + right), wide)
    xp[:, :, top:top + x.shape[2], left:left + x.shape[3]] = x
    n, c = x.shape[:2]
    k, cg, r, s = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    p = (xp.shape[2] - dh * (r - 1) - 1) // sh + 1
    q = (xp.shape[3] - dw * (s - 1) - 1) // sw + 1
    out = np.zeros((n, k, p, q), wide)
    kg = k // groups
    for kk in range(k):
        g = kk // kg
        for ri in range(r):
            for si in range(s):
                patch = xp[:, g * cg:(g + 1) * cg, ri * dh:ri * dh + sh * (p - 1) + 1:sh,
                           si * dw:si * dw + sw * (q - 1) + 1:sw]
                out[:, kk] += np.einsum("ncpq,c->npq", patch, w[kk, :, ri, si])
        if bias is not None:
            out[:, kk] += bias[kk]
    return out


def _check(got, want, dtype, x, w):
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    scale = np.abs(x).astype(np.float64).max(initial=0) * np.abs(w).astype(np.float64).max(
        initial=0) * max(w[0].size, 1) + 1
    np.testing.assert_allclose(got.astype(want.dtype), want, rtol=0,
                               atol=RTOL[dtype] * scale)


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 3))
    depthwise = draw(st.integers(0, 4)) == 0
    if depthwise:
        groups, cg = draw(st.integers(1, 4)), 1
    kg = draw(st.integers(1, 3))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = draw(st.sampled_from([1, 2, (1, 2), (3, 1)]))
    dilation = draw(st.sampled_from([1, 2, (2, 1)]))
    padding = draw(st.sampled_from([0, 1, (2, 0), "valid", "same"]))
    if padding == "same":
        stride = 1
    st_ = (stride, stride) if isinstance(stride, int) else stride
    dl = (dilation, dilation) if isinstance(dilation, int) else dilation
    h = draw(st.integers(dl[0] * (r - 1) + 1, dl[0] * (r - 1) + 9))
    w = draw(st.integers(dl[1] * (s - 1) + 1, dl[1] * (s - 1) + 9))
    n = draw(st.sampled_from([1, 2, 3, 0]))
    dtype = draw(st.sampled_from(["float32", "float64", "float16", "complex64"]))
    layout = draw(st.sampled_from(["NCHW", "NHWC", "strided", "unbatched"]))
    bias = draw(st.booleans())
    return (n, groups * cg, h, w, groups * kg, cg, r, s, stride, padding, dilation, groups,
            dtype, layout, bias, draw(st.integers(0, 2**31)))


def _operand(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_conv2d_matches_the_direct_convolution(case):
    (n, c, h, w, k, cg, r, s, stride, padding, dilation, groups, dtype, layout, use_bias,
     seed) = case
    rng = np.random.default_rng(seed)
    x = _operand(rng, (n, c, h, w), dtype)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    elif layout == "strided":
        big = _operand(rng, (n, c, 2 * h, w + 3), dtype)
        big[:, :, ::2, 1:w + 1] = x
        x = big[:, :, ::2, 1:w + 1]
    wt = _operand(rng, (k, cg, r, s), dtype)
    bias = _operand(rng, (k,), dtype) if use_bias else None
    g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, groups)
    ref = direct(x, wt, bias, g.stride, g.padding, g.dilation, groups)
    if layout == "unbatched" and n == 1:
        got = conv2d(x[0], wt, bias, stride, padding, dilation, groups)
        _check(got, ref[0], dtype, x, wt)
        return
    got = conv2d(x, wt, bias, stride, padding, dilation, groups)
    _check(got, ref, dtype, x, wt)
    # dense in the input's memory format: channels-last in, channels-last out (an input
    # that is dense both ways, C or H and W of 1, counts as NCHW)
    nhwc = layout == "NHWC" and not x.flags.c_contiguous
    dense = got.transpose(0, 2, 3, 1) if nhwc else got
    assert dense.flags.c_contiguous


def test_same_padding_pads_the_odd_one_at_the_bottom_right():
    g = conv_geometry((1, 1, 5, 5), (1, 1, 4, 2), padding="same", dilation=(1, 3))
    assert g.padding == (1, 2, 1, 2) and (g.p, g.q) == (5, 5)


def test_a_late_layer_is_a_long_k_problem():
    g = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    p = g.problem("float16")
    assert (p.m, p.n, p.k, p.batch) == (49, 512, 4608, 1)
    depthwise = conv_geometry((8, 32, 10, 10), (64, 1, 3, 3), groups=32).problem()
    assert (depthwise.m, depthwise.n, depthwise.k, depthwise.batch) == (512, 2, 9, 32)


def test_zero_batch_gives_an_empty_output():
    out = conv2d(np.ones((0, 3, 5, 5)), np.ones((4, 3, 3, 3)))
    assert out.shape == (0, 4, 3, 3)


X, W = np.ones((2, 4, 6, 6)), np.ones((8, 4, 3, 3))


@pytest.mark.parametrize("kwargs,error,words", [
    (dict(input=np.ones((4, 6, 6, 1, 1))), ValueError, "input must be 3-D"),
    (dict(weight=np.ones((8, 4, 3))), ValueError, "weight must be 4-D"),
    (dict(weight=np.ones((8, 3, 3, 3))), ValueError, "expects 3 input channels"),
    (dict(groups=3), ValueError, "divisible by groups=3"),
    (dict(groups=0), ValueError, "groups must be positive"),
    (dict(groups=2.0), TypeError, "groups must be an int"),
    (dict(stride=0), ValueError, "stride must be positive"),
    (dict(stride=(1, 2, 3)), TypeError, "stride must be an int or a pair"),
    (dict(dilation=-1), ValueError, "dilation must be positive"),
    (dict(padding=-1), ValueError, "padding must be non-negative"),
    (dict(padding="full"), ValueError, "padding must be 'valid', 'same'"),
    (dict(padding="same", stride=2), ValueError, "padding='same' needs stride 1"),
    (dict(weight=np.ones((8, 4, 7, 3))), ValueError, "larger than the padded input"),
    (dict(dilation=4), ValueError, "larger than the padded input"),
    (dict(bias=np.ones(7)), ValueError, "bias must have shape (8,)"),
    (dict(weight=np.ones((8, 4, 3, 3), np.float32)), TypeError, "weight dtype float32"),
    (dict(input=np.ones((2, 4, 6, 6), np.int64), weight=np.ones((8, 4, 3, 3), np.int64)),
     TypeError, "not a floating or complex type"),
    (dict(input=[[[[1.0]]]]), TypeError, "input must be a NumPy array"),
])
def test_errors_name_the_argument(kwargs, error, words):
    args = dict(input=X, weight=W)
    args.update(kwargs)
    with pytest.raises(error) as e:
        conv2d(**args)
    assert words in str(e.value)


def test_gpu_arrays_are_not_run_yet():
    class FakeCupy:
        __module__ = "cupy._core.core"
        shape = (1, 1, 3, 3)
    with pytest.raises(NotImplementedError, match="GPU array"):
        conv2d(FakeCupy(), W)
