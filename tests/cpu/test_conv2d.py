"""conv2d on the CPU against a float64 direct convolution (loops over the filter taps, no
strided windows), over random shapes and every argument form; every error."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcontract import conv2d
from skcontract.schedule import DeviceInfo
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import DlpackOnly, direct

RTOL = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13, "complex64": 2e-6,
        "complex128": 1e-13}


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


@pytest.mark.parametrize("groups", [1, 2])
def test_no_input_channels_give_the_bias(groups):
    """An empty sum over channels is zero (the GPU's bias-only route); torch returns an
    output with no channels here, which no einsum over the same operands would."""
    x = np.random.default_rng(4).standard_normal((2, 0, 5, 5))
    out = conv2d(x, np.ones((4, 0, 3, 3)), np.arange(4.0), padding=1, groups=groups)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(4.0)[:, None, None],
                                                       (2, 4, 5, 5)))


X, W = np.ones((2, 4, 6, 6)), np.ones((8, 4, 3, 3))


@pytest.mark.parametrize("kwargs,pair", [
    (dict(stride=(2,)), dict(stride=(2, 2))), (dict(padding=[1]), dict(padding=(1, 1))),
    (dict(dilation=(2,)), dict(dilation=(2, 2)))])
def test_one_value_in_a_sequence_serves_both_dimensions(kwargs, pair):
    """torch reads stride=(2,) as (2, 2)."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 2, 7, 7)), rng.standard_normal((3, 2, 3, 3))
    np.testing.assert_array_equal(conv2d(x, w, **kwargs), conv2d(x, w, **pair))


def test_non_native_byte_order_convolves():
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s) for s in ((2, 3, 6, 6), (4, 3, 3, 3), (4,)))
    want = direct(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    got = conv2d(x.astype(">f8"), w.astype(">f8"), b.astype(">f8"), padding=1)
    assert got.dtype == np.float64 and got.dtype.isnative
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kwargs,error,words", [
    (dict(input=np.ones((4, 6, 6, 1, 1))), ValueError, "input must be 3-D"),
    (dict(weight=np.ones((8, 4, 3))), ValueError, "weight must be 4-D"),
    (dict(weight=np.ones((8, 3, 3, 3))), ValueError, "expects 3 input channels"),
    (dict(groups=3), ValueError, "divisible by groups=3"),
    (dict(groups=0), ValueError, "groups must be positive"),
    (dict(groups=2.0), TypeError, "groups must be an int"),
    (dict(stride=0), ValueError, "stride must be positive"),
    (dict(stride=(1, 2, 3)), ValueError, "stride must be one int or two, got 3"),
    (dict(padding=(1, 1, 1, 1)), ValueError, "padding must be one int or two, got 4"),
    (dict(stride=(1, 2.0)), TypeError, "stride must be an int or a pair"),
    (dict(weight=np.ones((0, 4, 3, 3))), ValueError, "must be at least groups=1"),
    (dict(weight=np.ones((0, 2, 3, 3)), groups=2), ValueError, "at least groups=2"),
    (dict(input=np.ones((1, 4, 0, 6)), weight=np.ones((2, 4, 1, 1)), padding=1), ValueError,
     "height and width must be positive, got 0 x 6"),
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
    (dict(input=[[[[1.0]]]]), TypeError, "expected a NumPy, CuPy or torch array, got list"),
])
def test_errors_name_the_argument(kwargs, error, words):
    args = dict(input=X, weight=W)
    args.update(kwargs)
    with pytest.raises(error) as e:
        conv2d(**args)
    assert words in str(e.value)


class FakeGpuArray:
    """Stands in for a CuPy array: conv2d's checks run before anything touches the GPU."""
    __module__ = "cupy._core.core"

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


def test_dlpack_arrays_on_the_cpu_are_read_as_numpy_views():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 4, 7, 6)), rng.standard_normal((5, 4, 3, 3))
    got = conv2d(DlpackOnly(x), DlpackOnly(w), DlpackOnly(np.arange(5.0)), padding=1)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, conv2d(x, w, np.arange(5.0), padding=1), rtol=1e-12)
    with pytest.raises(TypeError, match="expected a NumPy, CuPy or torch array"):
        conv2d(object(), w)


def test_arrays_on_the_cpu_and_the_gpu_do_not_mix():
    with pytest.raises(TypeError, match="input FakeGpuArray on the GPU, weight ndarray on "
                                        "the CPU"):
        conv2d(FakeGpuArray((2, 4, 6, 6), np.float64), W)


def test_complex_convolutions_run_on_the_cpu_only():
    with pytest.raises(TypeError, match="GPU kernels take float16, bfloat16, float32, "
                                        "float64, not complex64"):
        conv2d(FakeGpuArray((2, 4, 6, 6), np.complex64),
               FakeGpuArray((8, 4, 3, 3), np.complex64))


def test_the_gpu_schedule_is_the_gemm_one_on_im2col_kernels():
    """What the GPU would run: the GEMM scheduler's choice over the entries whose family
    gathers A; the late layer splits its K (Stream-K, or on the Hopper family the aligned
    split summed in each cluster's shared memory), a big early layer does not."""
    from skcontract.kernels.conv import resolve_conv
    from skcontract.schedule import DeviceInfo
    h200 = DeviceInfo.h200()
    late = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    early = conv_geometry((32, 64, 56, 56), (64, 64, 3, 3), padding=1)
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        r = resolve_conv(late, dtype, h200)
        assert r.entry.IM2COL and r.schedule.problem.k == 4608
        assert str(r.schedule.mode) in ("stream_k", "hybrid", "split_k", "aligned"), \
            r.schedule.summary()
        assert (str(r.schedule.reduction) == "cluster") == (r.entry.FAMILY == "Wgmma")
        assert r.schedule.grid > 4 * late.problem().batch
    assert str(resolve_conv(early, "float16", h200).schedule.mode) != "split_k"
    # misaligned operands leave out the entries that need 16-byte vectors
    assert not resolve_conv(late, "float64", h200, vec16=False).entry.vec16_only
    # 16-bit, aligned, one group: the Wgmma family's TMA entry, k padded to 64-channel
    # blocks a tap; a forced tile only the gathering families have goes to them
    stem = conv_geometry((8, 3, 32, 32), (16, 3, 7, 7), stride=2, padding=3)
    odd = conv_geometry((1, 72, 6, 5), (40, 72, 3, 3), padding=1)
    assert resolve_conv(late, "float16", h200).entry.IM2COL == "tma"
    assert resolve_conv(odd, "bfloat16", h200).schedule.problem.k == 9 * 128
    assert resolve_conv(odd, "float16", h200, tile=(64, 256)).entry.tile == (64, 256, 64)
    assert resolve_conv(late, "float16", h200, tile=(128, 128, 32)).entry.IM2COL == "gather"
    assert resolve_conv(stem, "float16", h200).entry.IM2COL == "gather"  # 6-byte pixels
    assert resolve_conv(late, "float16", h200, vec16=False).entry.IM2COL == "gather"
    grouped = conv_geometry((1, 64, 7, 7), (64, 16, 3, 3), padding=1, groups=4)
    assert resolve_conv(grouped, "float16", h200).entry.IM2COL == "gather"
    with pytest.raises(ValueError, match="no float16 kernel with tile"):
        resolve_conv(late, "float16", h200, tile=(32, 32))


@pytest.mark.parametrize("c,groups,dtype,padded", [
    (3, 1, "float16", 8), (3, 1, "bfloat16", 8), (3, 1, "float32", 4), (3, 1, "float64", 4),
    (5, 1, "float64", 6), (16, 1, "float16", None), (12, 1, "float32", None),
    (12, 1, "float16", 16), (20, 1, "float16", None), (6, 3, "float16", None)])
def test_few_odd_channels_are_padded_to_whole_vectors(c, groups, dtype, padded):
    """One group of at most CHANNEL_PAD_MAX channels that do not fill 16-byte vectors is
    padded until they do; aligned, grouped or many channels are not."""
    from skcontract.kernels.conv import padded_channels
    g = conv_geometry((1, c, 9, 9), (6, c // groups, 3, 3), groups=groups)
    assert padded_channels(g, dtype) == padded


def test_channel_padding_stops_at_its_limit():
    from skcontract.kernels.conv import CHANNEL_PAD_MAX, padded_channels
    at = conv_geometry((1, CHANNEL_PAD_MAX - 1, 9, 9), (6, CHANNEL_PAD_MAX - 1, 3, 3))
    past = conv_geometry((1, CHANNEL_PAD_MAX + 1, 9, 9), (6, CHANNEL_PAD_MAX + 1, 3, 3))
    assert padded_channels(at, "float16") == -(-(CHANNEL_PAD_MAX - 1) // 8) * 8
    assert padded_channels(past, "float16") is None


# (N, C, H, W, K, R, S, stride, padding, dilation): few channels, so padded_channels applies
FOLD_CASES = [
    (2, 3, 23, 23, 16, 7, 7, 2, 3, 1),             # the stem's shape, small
    (1, 5, 11, 7, 6, 3, 2, (2, 1), (1, 0), 1),     # uneven stride and padding
    (2, 3, 9, 10, 8, 3, 11, 1, (1, 5), (2, 1)),    # a row past one 64-channel block
    (1, 4, 6, 8, 8, 2, 2, 3, 0, 1),                # stride past the taps: columns skipped
]


@pytest.mark.parametrize("case", FOLD_CASES, ids=lambda c: "x".join(map(str, c[:7])))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_folded_taps_compute_the_same_convolution(case, dtype):
    """The folded copies, read through the overlapping view the kernels are given (whole
    channel blocks a column, each column's channels past the fold's extent then zeroed, as
    the kernel zeros them in shared memory), make
    the folded geometry's convolution equal the original one, an infinite input pixel
    included (float64 NumPy stand-ins for the device arrays, the same copy code)."""
    from skcontract.kernels.conv import folded_taps
    from skcontract.ops.conv2d_gpu import _CupyOps, folded_copies
    n, c, h, w, k, r, s, stride, padding, dilation = case
    g = conv_geometry((n, c, h, w), (k, c, r, s), stride, padding, dilation)
    fold = folded_taps(g, dtype, DeviceInfo.h200())
    assert fold is not None and fold.geometry.s == 1 and fold.geometry.c % 64 == 0
    f = fold.geometry
    assert (f.p, f.q, f.k, f.n, f.h) == (g.p, g.q, g.k, g.n, g.h)
    rng = np.random.default_rng(7)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, r, s))
    x[-1, c - 1, h // 2, w // 2 - 1:w // 2 + 1] = np.inf  # two pixels: either column parity
    ops = _CupyOps(np)
    xs, ws = folded_copies(ops, ops, x, wt, g, fold)
    assert xs.shape == (n, h, fold.width, fold.channels) and ws.shape == (k, r, 1, f.c)
    assert fold.extent == s * fold.channels <= f.c
    item = xs.itemsize
    view = np.lib.stride_tricks.as_strided(
        xs, (n, f.h, f.w, f.c), tuple(v * item for v in fold.input_strides) + (item,))
    # every element the view reads lies inside the copy, and a column's row
    last = sum((e - 1) * st for e, st in zip(view.shape, view.strides)) // item
    assert last < xs.size
    assert (f.w - 1) * fold.step * fold.channels + f.c <= fold.width * fold.channels
    view = view.copy()
    view[..., fold.extent:] = 0
    with np.errstate(invalid="ignore"):  # inf - inf where a window holds both pixels
        got = direct(view.transpose(0, 3, 1, 2), ws.transpose(0, 3, 1, 2), None, f.stride,
                     f.padding, f.dilation, 1)
        want = direct(x, wt, None, g.stride, g.padding, g.dilation, 1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)  # NaN only where want's


def test_taps_are_not_folded_where_the_tma_entry_does_not_run():
    from skcontract.kernels.conv import folded_taps
    stem = conv_geometry((1, 3, 23, 23), (16, 3, 7, 7), stride=2, padding=3)
    ampere = dataclasses.replace(DeviceInfo.h200(), compute_capability=(8, 0))
    assert folded_taps(stem, "float32", DeviceInfo.h200()) is None   # no TMA entry
    assert folded_taps(stem._replace(dilation=(1, 2)), "float16", DeviceInfo.h200()) is None
    aligned = conv_geometry((1, 16, 9, 9), (8, 16, 3, 3))
    assert folded_taps(aligned, "float16", DeviceInfo.h200()) is None  # not padded
    assert folded_taps(stem, "float16", ampere) is None


def test_filters_copy_in_vectors_only_from_aligned_addresses():
    from skcontract.kernels.conv import InputView, vectors_fit
    g = conv_geometry((1, 64, 7, 7), (64, 64, 3, 3), padding=1)
    x = InputView(4096, 64 * 49, 64 * 7, 64)
    assert vectors_fit(g, "float16", x, 8192, 576) == (True, True)
    assert vectors_fit(g, "float16", x, 8192 + 2, 576) == (True, False)
    assert vectors_fit(g, "float16", x._replace(ptr=4098), 8192, 576) == (False, True)


def test_a_strided_convolution_counts_no_more_input_than_its_rows_read():
    """A 1 x 1 convolution of stride 2 reads a quarter of the input's pixels: the
    memory-bound rule counts those (M x K), not every pixel."""
    from skcontract.kernels.conv import operand_elems
    g = conv_geometry((1, 64, 56, 56), (128, 64, 1, 1), stride=2)
    p = g.problem()
    assert operand_elems(g) == (p.m + p.n) * p.k
    dense = conv_geometry((1, 64, 56, 56), (128, 64, 3, 3), padding=1)
    assert operand_elems(dense) == 56 * 56 * 64 + 128 * 64 * 9


def test_the_memory_bound_rule_sees_the_input_a_convolution_reads():
    """The batch-1 late layer reads its 2.4 M input and filter elements 97 times: the
    streaming tile; the early layer of batch 32 reads its 6.4 M input pixels 1150 times, so
    its 64 output channels go to the 128 x 64 tile by the cost model, not to the streaming
    tile that its M x K = 58 M would suggest."""
    from skcontract.kernels import catalogue
    from skcontract.kernels.conv import resolve_conv
    from skcontract.schedule import DeviceInfo
    h200 = DeviceInfo.h200()
    late = conv_geometry((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    early = conv_geometry((32, 64, 56, 56), (64, 64, 3, 3), padding=1)
    streaming = catalogue.gates.WGMMA_STREAMING_TILE
    assert resolve_conv(late, "float16", h200).entry.tile[:2] == streaming
    assert resolve_conv(early, "float16", h200).entry.tile[:2] == (128, 64)


def test_the_packed_geometry_matches_the_kernels_struct():
    """conv_shape packs conv_shape.cuh's ConvShape: same fields, order and size."""
    import re
    from skcontract.kernels import jit
    from skcontract.kernels.conv import CONV_SHAPE_DTYPE, InputView, conv_shape
    text = (jit.CUDA_DIR / "conv_shape.cuh").read_text()
    body = text[text.index("struct ConvShape {"):text.index("};", text.index("struct ConvShape"))]
    names, sizes = [], []
    for decl in re.findall(r"^\s*(long long|int) ([^;]+);", body, re.M):
        for name in decl[1].split(","):
            names.append(name.strip())
            sizes.append(8 if decl[0] == "long long" else 4)
    assert tuple(names) == CONV_SHAPE_DTYPE.names
    # C's layout: each field on its own size (long longs first, so no holes), the struct
    # padded to its widest field: what the kernel's parameter is, the host must pack
    assert sizes == sorted(sizes, reverse=True)
    assert -(-sum(sizes) // max(sizes)) * max(sizes) == CONV_SHAPE_DTYPE.itemsize
    g = conv_geometry((2, 6, 9, 11), (4, 3, 3, 2), stride=(2, 1), padding=(1, 0),
                      dilation=(1, 2), groups=2)
    rec = np.frombuffer(conv_shape(g, InputView(0, 594, 66, 6)).tobytes(), CONV_SHAPE_DTYPE)[0]
    assert (rec["stride_n"], rec["H"], rec["W"], rec["P"], rec["Q"], rec["Cg"]) == \
        (594, 9, 11, g.p, g.q, 3)
    assert (rec["stride_y"], rec["pad_x"], rec["dil_x"]) == (2, 0, 2)


def test_a_folded_convolution_runs_on_the_tma_entry_only():
    """The fold's padding taps are zeroed only by the TMA entries' consumers: resolve_conv's
    tma_only refuses what has no TMA entry (float32) rather than gather it, and a tile
    whose consumers cannot mask (64 x 256: 128 accumulators a thread, no registers traded)."""
    from skcontract.kernels.catalogue import entries_for
    from skcontract.kernels.conv import resolve_conv
    g = conv_geometry((1, 64, 9, 9), (8, 64, 3, 3))
    h200 = DeviceInfo.h200()
    assert resolve_conv(g, "float16", h200, tma_only=True).entry.FAMILY == "Wgmma"
    with pytest.raises(ValueError, match="no TMA convolution entry"):
        resolve_conv(g, "float32", h200, tma_only=True)
    wgmma = [b for b in entries_for("float16", None, 90, True) if b.FAMILY == "Wgmma"]
    assert [b.tile[:2] for b in wgmma if not b.masks_stages] == [(64, 256)]
    assert resolve_conv(g, "float16", h200, tile=(64, 256)).entry.tile[:2] == (64, 256)
    with pytest.raises(ValueError, match="no TMA convolution entry"):
        resolve_conv(g, "float16", h200, tile=(64, 256), tma_only=True)


def test_a_forced_tile_with_no_masking_entry_runs_the_convolution_unfolded():
    """conv2d folds a stem only where the forced tile (if any) has an entry that zeros the
    fold's padding taps; otherwise the padded copies run on that tile."""
    from skcontract.kernels.conv import fold_runs_tile, folded_taps
    stem = conv_geometry((32, 3, 224, 224), (64, 3, 7, 7), stride=2, padding=3)
    fold = folded_taps(stem, "float16", DeviceInfo.h200())
    assert fold is not None
    assert fold_runs_tile(fold, "float16", DeviceInfo.h200(), (128, 64))
    assert not fold_runs_tile(fold, "float16", DeviceInfo.h200(), (64, 256))


@pytest.mark.parametrize("shape,itemsize,channels,fits", [
    ((32, 224, 224, 3), 2, 8, True),      # the stem, fp16 / bf16
    ((2, 5, 7, 16), 2, 16, True),
    ((2, 5, 7, 3), 4, 8, False),          # float32: the library's pad
    ((2, 5, 7, 3), 2, 6, False),          # no kernel of 6 channels a pixel
    ((2, 5, 7, 9), 2, 8, False),          # more channels than the pixel holds
    ((5, 7, 3), 2, 8, False),             # not 4-D
])
def test_the_fold_copy_takes_4d_16bit_arrays_of_its_pixel_widths(shape, itemsize, channels,
                                                                  fits):
    from skcontract.kernels import fold_copy
    assert fold_copy.fits(shape, itemsize, channels) is fits
