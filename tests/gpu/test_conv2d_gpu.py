"""conv2d on the GPU (implicit GEMM on the im2col kernels) against the float64 direct
convolution of the CPU tests, and against torch (cuDNN) where torch is installed: every
dtype, both layouts, strided inputs, groups and depthwise, bias, every schedule mode and
fixup, odd sizes, and the cases that launch nothing."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract import conv2d
from skcontract.kernels.conv import MERGED_MIN_GROUPS, folded_taps
from skcontract.kernels.depthwise import is_depthwise
from skcontract.kernels.launch import record_launches
from skcontract.kernels.resolve import device_info
from skcontract.kernels.operands import describe
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import DlpackOnly, direct

cupy = pytest.importorskip("cupy")

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 2e-5, "float64": 1e-12}
POISON_BYTES = 1 << 22

# (N, C, H, W, K, R, S, stride, padding, dilation, groups)
CASES = [
    (2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1),          # aligned channels: 16-byte vectors
    (1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1),          # a late layer: few tiles, long K
    (3, 5, 11, 7, 6, 3, 2, (2, 1), (1, 0), 1, 1),  # few odd channels: zero-padded copies
    (1, 20, 7, 7, 8, 3, 3, 1, 1, 1, 1),           # odd channels past CHANNEL_PAD_MAX:
                                                  # element copies
    (2, 8, 12, 10, 12, 3, 3, 2, 2, (2, 1), 1),    # stride, padding and dilation
    (2, 8, 9, 9, 12, 3, 3, 1, "same", 1, 4),      # groups
    (2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 16),         # depthwise
    (4, 32, 6, 6, 40, 1, 1, 1, 0, 1, 1),          # 1x1: a plain GEMM
    (1, 3, 23, 23, 16, 7, 7, 2, 3, 1, 1),         # the stem's shape, small
    (2, 16, 13, 11, 24, 3, 5, (2, 1), (1, 2), (1, 2), 1),  # every parameter uneven
    (1, 16, 10, 9, 8, 4, 2, 1, "same", 1, 1),     # "same" padding, uneven sides
    (1, 72, 6, 5, 40, 3, 3, 1, 1, 1, 1),          # channels past one 64-channel block
]


def _torch():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def _poison():
    """Leave NaN in the memory pool's free blocks, so an output element a kernel does not
    write reads as NaN."""
    junk = cupy.full(POISON_BYTES // 4, np.nan, np.float32)
    del junk


def _host(a) -> np.ndarray:
    if hasattr(a, "get"):
        return a.get().astype(np.float64)
    return a.float().cpu().numpy().astype(np.float64)


def _operands(case, dtype, seed=0):
    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((k, c // groups, r, s))
    b = rng.standard_normal(k)
    return x, wt, b


def _device(a, dtype, layout="NCHW"):
    """A CuPy array (a torch tensor for bfloat16) in ``layout``: NCHW, NHWC (channels-last),
    or strided (a channels-last window of a larger array)."""
    if dtype == "bfloat16":
        torch = _torch()
        if torch is None:
            pytest.skip("bfloat16 operands come from torch")
        d = torch.as_tensor(a, device="cuda").to(torch.bfloat16)
        zeros = lambda shape: torch.zeros(shape, dtype=d.dtype, device="cuda")  # noqa: E731
        dense = lambda t: t.contiguous()  # noqa: E731
    else:
        d = cupy.asarray(a.astype(dtype))
        zeros = lambda shape: cupy.zeros(shape, d.dtype)  # noqa: E731
        dense = cupy.ascontiguousarray
    if d.ndim != 4 or layout == "NCHW":
        return d
    nhwc = d.permute(0, 2, 3, 1) if dtype == "bfloat16" else d.transpose(0, 2, 3, 1)
    if layout == "NHWC":
        window = dense(nhwc)
    else:
        n, c, h, w = d.shape
        big = zeros((n, 2 * h, w + 3, c + 8))
        big[:, ::2, 1:w + 1, 4:c + 4] = nhwc
        window = big[:, ::2, 1:w + 1, 4:c + 4]
    return window.permute(0, 3, 1, 2) if dtype == "bfloat16" else window.transpose(0, 3, 1, 2)


def _check(got, ref, dtype):
    g = _host(got)
    assert g.shape == ref.shape
    assert np.isfinite(g).all(), "an output element was not written (NaN poison)"
    scale = max(np.abs(ref).max(), 1.0)
    err = np.abs(g - ref).max() / scale
    assert err <= TOL[dtype], f"max error {err:.3g} x {scale:.3g} (tolerance {TOL[dtype]})"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "strided"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_conv2d_matches_the_float64_convolution(case, layout, dtype):
    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, b = _operands(case, dtype)
    g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, groups)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, groups)
    # channels-last filters with a channels-last input (read in place), else KCRS (copied)
    wd = _device(wt, dtype, "NHWC" if layout == "NHWC" else "NCHW")
    xd, bd = _device(x, dtype, layout), _device(b, dtype)
    _poison()
    with record_launches() as launches:
        got = conv2d(xd, wd, bd, stride, padding, dilation, groups)
    # a pointwise convolution of a dense input whose rows (NCHW: H x W pixels, channels-last:
    # C channels) are whole 16-byte vectors is one GEMM over views; the rest im2col
    pointwise = (r, s, g.stride, g.padding, groups) == (1, 1, (1, 1), (0, 0, 0, 0), 1)
    row = (c if layout == "NHWC" else h * w) * ITEMSIZE[dtype]
    in_place = pointwise and layout != "strided" and row % 16 == 0
    assert len(launches) == 1
    if is_depthwise(g):  # the direct kernel, no GEMM
        assert launches[0].mode == "direct" and "depthwise" in launches[0].kernel
    else:
        assert launches[0].kernel.endswith("_im2col") != in_place
    assert type(got) is type(xd) and str(got.dtype).endswith(dtype)
    _check(got, ref, dtype)
    # channels-last in, channels-last out; NCHW and strided inputs give dense NCHW
    out = describe(got)
    dense_nchw = out.strides == (k * g.p * g.q, g.p * g.q, g.q, 1)
    assert dense_nchw != (layout == "NHWC") or k == 1 or g.p * g.q == 1


@pytest.mark.parametrize("mode,reduction", [
    ("data_parallel", "deterministic"), ("stream_k", "deterministic"),
    ("stream_k", "atomic"), ("stream_k", "arrival"), ("split_k", "deterministic"),
    ("hybrid", "deterministic"), ("auto", "deterministic")])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_every_mode_and_fixup(mode, reduction, dtype):
    # K = 128 x 9 taps: at least 2 x MIN_ITERS_PER_SPLIT k-iterations on every family's BK,
    # so split_k and aligned split rather than fall back to data_parallel
    got, ref, launches, plan = _same_padded((1, 128, 7, 7, 72, 3, 3, 1, 1, 1, 1), dtype, 1,
                                            mode=mode, reduction=reduction)
    if mode not in ("auto", "hybrid"):  # hybrid may fall back to a plain mode on one tile
        assert plan.mode == mode and str(plan.launch.schedule.mode) == mode
    # the launch runs the plan's kernel and split table (the Launch record's mode is that of
    # the LaunchPlan the one cache holds for an equal launch value: split_k's table here is
    # stream_k's)
    assert [(x.kernel, x.digest) for x in launches] == [(plan.launch.spec.name,
                                                         plan.launch.schedule.digest())]
    _check(got, ref, dtype)


def _same_padded(case, dtype, seed, **schedule):
    """conv2d of a channels-last ``case`` padded by 1 under ``schedule``: (result, the float64
    reference, the launches, the plan the call ran)."""
    from skcontract.ops.conv2d_gpu import plan_of
    x, wt, b = _operands(case, dtype, seed=seed)
    g = conv_geometry(x.shape, wt.shape, padding=1)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, 1)
    xd = _device(x, dtype, "NHWC")
    wd, bd = _device(wt, dtype), _device(b, dtype)
    _poison()
    with record_launches() as launches:
        got = conv2d(xd, wd, bd, padding=1, **schedule)
    return got, ref, launches, plan_of(xd, wd, bd, g, **schedule)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_cluster_reduction(dtype):
    """The batch-1 late layer on the Hopper family's cluster protocol: a tile's splits of
    K = 4608 summed in one cluster's shared memory."""
    got, ref, launches, _ = _same_padded((1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1), dtype, 2,
                                         mode="aligned", reduction="cluster")
    assert launches[-1].reduction == "cluster" and "_cluster_" in launches[-1].kernel
    _check(got, ref, dtype)


def test_a_forced_grid_is_the_launched_grid():
    case = (1, 128, 7, 7, 72, 3, 3, 1, 1, 1, 1)
    x, wt, b = _operands(case, "float32", seed=6)
    g = conv_geometry(x.shape, wt.shape, padding=1)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, 1)
    xd, wd, bd = _device(x, "float32", "NHWC"), _device(wt, "float32"), _device(b, "float32")
    for grid in (2, 4):  # splits of at least MIN_ITERS_PER_SPLIT of its 36 k-iterations
        _poison()
        with record_launches() as launches:
            got = conv2d(xd, wd, bd, padding=1, mode="stream_k", reduction="arrival",
                         grid=grid)
        assert (launches[0].mode, launches[0].grid) == ("stream_k", grid)
        _check(got, ref, "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_hopper_runs_aligned_channels_last_convolutions_with_tma(dtype):
    """On compute capability 9.0 the Wgmma entry takes 16-bit convolutions whose channels fill
    16-byte rows (A by TMA im2col loads; a few odd channels once zero-padded to fill them);
    grouped ones whose groups do not merge into whole channel blocks (merged_groups) and odd
    channels past CHANNEL_PAD_MAX stay on the gathering families."""
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the Wgmma family needs compute capability 9.0")
    for case, family in (((2, 16, 13, 11, 24, 3, 5, (2, 1), (1, 2), (1, 2), 1), "wgmma"),
                         ((3, 5, 11, 7, 6, 3, 2, (2, 1), (1, 0), 1, 1), "wgmma"),
                         ((1, 20, 7, 7, 8, 3, 3, 1, 1, 1, 1), "mma16"),
                         # a wave of 264 128 x 64 tiles: the paired entry (two CTAs an SM)
                         ((1, 64, 176, 192, 64, 3, 3, 1, 1, 1, 1), "wgmma_c2"),
                         ((2, 8, 9, 9, 12, 3, 3, 1, "same", 1, 4), "mma16")):
        n, c, h, w, k, r, s, stride, padding, dilation, groups = case
        x, wt, b = _operands(case, dtype, seed=4)
        g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, groups)
        ref = direct(x, wt, b, g.stride, g.padding, g.dilation, groups)
        xd, wd, bd = _device(x, dtype, "NHWC"), _device(wt, dtype, "NHWC"), _device(b, dtype)
        _poison()
        with record_launches() as launches:
            got = conv2d(xd, wd, bd, stride, padding, dilation, groups)
        name = launches[0].kernel
        assert name.startswith(family.split("_")[0]), (case, name)
        assert ("_c2_" in name) == family.endswith("_c2"), (case, name)
        _check(got, ref, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_hopper_folds_the_taps_of_few_channel_rows(layout, dtype):
    """On compute capability 9.0 a convolution of few channels (the stem's 3, 7 x 7 taps,
    stride 2; a row of 11 taps past one 64-channel block, with dilation along H) runs on the
    Wgmma entry with each filter row's taps folded into channels (kernels.conv.folded_taps),
    reading its copy through the overlapping view; infinite input pixels give the
    reference's infinities and NaNs (no zero weight meets them)."""
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the Wgmma family needs compute capability 9.0")
    for case in ((2, 3, 30, 27, 16, 7, 7, 2, 3, 1, 1),
                 (2, 3, 9, 10, 8, 3, 11, 1, (1, 5), (2, 1), 1)):
        n, c, h, w, k, r, s, stride, padding, dilation, groups = case
        x, wt, b = _operands(case, dtype, seed=5)
        g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, groups)
        assert folded_taps(g, dtype, device_info(cupy.cuda.runtime.getDevice())) is not None
        ref = direct(x, wt, b, g.stride, g.padding, g.dilation, groups)
        xd, wd, bd = _device(x, dtype, layout), _device(wt, dtype, layout), _device(b, dtype)
        _poison()
        with record_launches() as launches:
            got = conv2d(xd, wd, bd, stride, padding, dilation, groups)
        assert launches[0].kernel.startswith("wgmma"), (case, launches[0].kernel)
        _check(got, ref, dtype)
        x[-1, c - 1, h // 2, w // 2 - 1:w // 2 + 1] = np.inf  # either column parity
        with np.errstate(invalid="ignore"):
            ref = direct(x, wt, b, g.stride, g.padding, g.dilation, groups)
        got = _host(conv2d(_device(x, dtype, layout), wd, bd, stride, padding, dilation,
                           groups))
        assert np.isinf(ref).any()
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        assert np.array_equal(np.isinf(got), np.isinf(ref))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("cg,kg", [(4, 4), (8, 8), (16, 16), (32, 32), (8, 16), (64, 64)])
def test_hopper_merges_groups_of_few_channels(cg, kg, layout, dtype):
    """On compute capability 9.0 a grouped convolution of 4 - 16 channels a group (ResNeXt's)
    runs on the Wgmma entry with 64 / Cg groups merged (their filters copied merged first),
    one of 32 on the gathering family with its groups apart, and one of 64 channels a group
    on the Wgmma entry with its groups as the GEMM's batch: the float64
    result at strides 1 and 2 and with dilation, strided filters and bias; an infinity and a
    NaN in two groups' channels give the reference's infinities and NaNs at their own
    groups' outputs, while the other groups' outputs at those pixels, whose products met
    them through the merged filters' zeros, stay finite (the kernel recomputes them); an
    infinite filter tap gives the reference's NaN where it meets the padding."""
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the Wgmma family needs compute capability 9.0")
    groups = max(4, 2 * (64 // cg))  # two merged groups, or four of 64 channels
    for geometry in ((1, 1, 1), (2, 1, 1), (1, 2, 2)):
        stride, padding, dilation = geometry
        case = (2, groups * cg, 11, 9, groups * kg, 3, 3, stride, padding, dilation, groups)
        x, wt, b = _operands(case, dtype, seed=6)
        g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, groups)
        x[0, cg + 1, 4, 5] = np.inf  # group 1
        x[1, 2 * cg + cg // 2, 0, 0] = np.nan  # group 2
        wt[1, 0, 0, 0] = np.inf  # group 0's output channel 1, its top-left tap
        with np.errstate(invalid="ignore"):
            ref = direct(x, wt, b, g.stride, g.padding, g.dilation, groups)
        wide = np.repeat(wt, 2, axis=1)  # every other channel is wt's
        wide[:, 1::2] = np.nan
        xd, bd = _device(x, dtype, layout), _device(b, dtype)
        for wd in (_device(wt, dtype, layout), _device(wide, dtype, layout)[:, ::2]):
            _poison()
            with record_launches() as launches:
                got = conv2d(xd, wd, bd, stride, padding, dilation, groups)
            names = [launch.kernel for launch in launches]
            merged = 64 // cg >= MERGED_MIN_GROUPS
            assert any(name.startswith("wgmma") for name in names) == (merged or cg == 64)
            assert any(name.endswith("_merged") for name in names) == merged
            assert any(name.startswith("skc::merged_filters") for name in names) == merged
            _check_non_finite(got, ref, dtype, case)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_hopper_merged_groups_on_split_tiles(dtype):
    """A merged convolution of few output pixels, whose tiles auto splits: the merged kernel
    with the deterministic fixup (the recomputation after the tile's last split), its
    result, infinities and NaNs the reference's."""
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the Wgmma family needs compute capability 9.0")
    case = (2, 512, 4, 4, 512, 5, 5, 1, 2, 1, 64)
    x, wt, b = _operands(case, dtype, seed=9)
    x[1, 9, 2, 2] = np.inf  # group 1
    wt[0, 3, 0, 0] = np.nan  # group 0's output channel 0
    g = conv_geometry(x.shape, wt.shape, 1, 2, 1, 64)
    with np.errstate(invalid="ignore"):
        ref = direct(x, wt, b, g.stride, g.padding, g.dilation, 64)
    _poison()
    with record_launches() as launches:
        got = conv2d(_device(x, dtype, "NHWC"), _device(wt, dtype, "NHWC"), _device(b, dtype),
                     1, 2, 1, 64)
    merged = [launch for launch in launches if launch.kernel.endswith("_merged")]
    assert merged and "_deterministic_" in merged[0].kernel, launches
    _check_non_finite(got, ref, dtype, case)


def _check_non_finite(got, ref, dtype, case):
    """``got`` has ``ref``'s infinities and NaNs where it has them, and its values within
    the dtype's tolerance elsewhere."""
    got = _host(got)
    assert np.isinf(ref).any() and np.isnan(ref).any()
    assert np.array_equal(np.isnan(got), np.isnan(ref)), case
    assert np.array_equal(np.isinf(got), np.isinf(ref)), case
    finite = np.isfinite(ref)
    assert np.array_equal(got[~finite], ref[~finite], equal_nan=True)
    scale = max(np.abs(ref[finite]).max(), 1.0)
    assert np.abs(got[finite] - ref[finite]).max() / scale <= TOL[dtype], case


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pointwise_convolutions_run_as_one_gemm(layout, dtype):
    """A 1 x 1 convolution of a dense input is one GEMM over views (no im2col kernel), with
    filters of any strides (a sliced weight without a unit stride is copied first) and a
    forced tile naming (pixels, output channels) in both layouts (the NCHW product runs
    transposed: channels x pixels)."""
    case = (2, 32, 8, 8, 24, 1, 1, 1, 0, 1, 1)
    x, wt, b = _operands(case, dtype, seed=7)
    wide = np.repeat(wt, 2, axis=1)  # (K, 2C, 1, 1): every other channel is wt
    wide[:, 1::2] = np.nan
    g = conv_geometry(x.shape, wt.shape)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, 1)
    xd, bd = _device(x, dtype, layout), _device(b, dtype)
    wd = _device(wide, dtype)[:, ::2]
    assert 1 not in describe(wd).strides[:2]
    sixteen_bit = dtype in ("float16", "bfloat16")  # Wgmma has 128 x 64 and 64 x 128
    for tile in (None, (128, 64)) if sixteen_bit else (None,):
        _poison()
        with record_launches() as launches:
            got = conv2d(xd, wd, bd, tile=tile)
        assert len(launches) == 1 and not launches[0].kernel.endswith("_im2col")
        if tile is not None:
            want = tile if layout == "NHWC" else tile[::-1]
            assert launches[0].tile[:2] == want, launches[0]
        _check(got, ref, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("c", [8, 16, 24])
@pytest.mark.parametrize("n", [3, 4])
def test_short_pointwise_rows_run_as_rows_of_several_pixels(c, n, dtype):
    """A channels-last 16-bit pointwise input of 8 - 24 channels (2 MiB or more) is read as
    rows of several pixels against block-diagonal filters (the GEMM and the fix-up
    launch): the convolution's result, with an infinity and a NaN in two pixels giving
    numpy's infinities and NaNs and leaving the other pixels of their rows finite, and the
    pixels after the last whole row (n = 3: 3 x 191 x 229 pixels, an odd count) computed
    too; with dense filters and bias, and with every other channel of wider ones (the
    block-diagonal copy and the fix-up read them at their strides)."""
    case = (n, c, 191, 229, 40, 1, 1, 1, 0, 1, 1)
    x, wt, b = _operands(case, dtype, seed=11)
    x[1, 3, 4, 5] = np.inf
    x[2, c - 1, 0, 0] = np.nan
    g = conv_geometry(x.shape, wt.shape)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, 1)
    wide = np.repeat(wt, 2, axis=1)  # (K, 2C, 1, 1): every other channel is wt
    wide[:, 1::2] = np.nan
    xd = _device(x, dtype, "NHWC")
    for wd, bd in ((_device(wt, dtype), _device(b, dtype)),
                   (_device(wide, dtype)[:, ::2], _device(np.repeat(b, 2), dtype)[::2])):
        _poison()
        with record_launches() as launches:
            got = conv2d(xd, wd, bd)
        assert len(launches) == 2 and launches[0].tile is not None
        assert launches[1].kernel.startswith("skc::packed_fix")
        got = _host(got)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        finite = np.isfinite(ref)
        assert (~finite & ~np.isnan(ref)).any() and np.array_equal(got[~finite], ref[~finite],
                                                                    equal_nan=True)
        scale = np.abs(ref[finite]).max()
        assert np.abs(got[finite] - ref[finite]).max() / scale <= TOL[dtype]


def test_deterministic_fixups_are_bitwise_reproducible():
    case = (1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1)
    x, wt, _ = _operands(case, "float32", seed=2)
    xd, wd = _device(x, "float32", "NHWC"), _device(wt, "float32")
    runs = [conv2d(xd, wd, padding=1, mode="stream_k").get() for _ in range(10)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def test_matches_torch_cudnn():
    torch = _torch()
    if torch is None:
        pytest.skip("torch with CUDA is not installed")
    import torch.nn.functional as F
    for case in CASES:
        n, c, h, w, k, r, s, stride, padding, dilation, groups = case
        x, wt, b = _operands(case, "float32", seed=3)
        xt = torch.as_tensor(x, device="cuda", dtype=torch.float64)
        wt_t = torch.as_tensor(wt, device="cuda", dtype=torch.float64)
        bt = torch.as_tensor(b, device="cuda", dtype=torch.float64)
        want = F.conv2d(xt, wt_t, bt, stride, padding, dilation, groups)
        got = conv2d(xt, wt_t, bt, stride, padding, dilation, groups)
        assert isinstance(got, torch.Tensor) and got.shape == want.shape
        assert torch.allclose(got, want, rtol=1e-10, atol=1e-10), case


def test_unbatched_and_empty_calls():
    x, wt, b = _operands((1, 8, 6, 6, 4, 3, 3, 1, 1, 1, 1), "float32")
    xd, wd, bd = _device(x, "float32"), _device(wt, "float32"), _device(b, "float32")
    got = conv2d(xd[0], wd, bd, padding=1)
    assert got.shape == (4, 6, 6)
    _check(got, direct(x, wt, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)[0], "float32")
    with record_launches() as launches:
        empty = conv2d(cupy.ones((0, 8, 6, 6), cupy.float32), wd)
    assert empty.shape == (0, 4, 4, 4) and not launches


def test_errors_before_any_launch():
    xd = cupy.ones((2, 4, 6, 6), cupy.float32)
    with record_launches() as launches:
        with pytest.raises(ValueError, match="expects 3 input channels"):
            conv2d(xd, cupy.ones((8, 3, 3, 3), cupy.float32))
        with pytest.raises(TypeError, match="weight dtype float64 differs"):
            conv2d(xd, cupy.ones((8, 4, 3, 3), cupy.float64))
        with pytest.raises(TypeError, match="not complex64"):
            conv2d(xd.astype(cupy.complex64), cupy.ones((8, 4, 3, 3), cupy.complex64))
        with pytest.raises(TypeError, match="mixed"):
            conv2d(xd, np.ones((8, 4, 3, 3), np.float32))
    assert not launches


def test_a_warm_torch_call_replays_the_first_calls_launch(monkeypatch):
    """A second call on torch tensors laid out as a checked first call's (in place) replays
    its launch; new data, the bias and the result are still right. Another layout, no bias
    or filters at an address off 16 bytes take the checked path (and stay right)."""
    torch = _torch()
    if torch is None:
        pytest.skip("needs torch with CUDA")
    from skcontract.ops import conv2d_gpu as module
    replays = []
    replay = module._WarmCall.__call__
    monkeypatch.setattr(module._WarmCall, "__call__",
                        lambda self, *a: replays.append(1) or replay(self, *a))
    case = (2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1)
    ref_of = lambda x, wt, b: direct(x, wt, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)  # noqa: E731

    def run(x, wt, b, filters=None):
        xt = torch.from_numpy(x).cuda().half().to(memory_format=torch.channels_last)
        wtt = filters if filters is not None else \
            torch.from_numpy(wt).cuda().half().to(memory_format=torch.channels_last)
        bt = None if b is None else torch.from_numpy(b).cuda().half()
        torch.full((1 << 22,), float("nan"), device="cuda")  # poison torch's pool (freed)
        before = len(replays)
        got = conv2d(xt, wtt, bt, padding=1)
        assert got.is_contiguous(memory_format=torch.channels_last)
        _check(got, ref_of(x, wt, b), "float16")
        return len(replays) > before

    for seed in (5, 6, 7):
        x, wt, b = _operands(case, "float16", seed=seed)
        hit = run(x, wt, b)
        assert hit or seed == 5, seed  # the first may find an earlier test's entry
    run(x, wt, None)  # no bias: its own entry, made here or found
    assert run(x, wt, None)
    k, c, r, s = wt.shape
    flat = torch.empty(k * r * s * c + 1, dtype=torch.half, device="cuda")
    off = flat[1:].view(k, r, s, c).permute(0, 3, 1, 2)  # channels-last, 2 bytes off
    off.copy_(torch.from_numpy(wt).half())
    assert off.data_ptr() % 16 and not run(x, wt, b, filters=off)
def test_dlpack_gpu_arrays_run_on_the_gpu_as_cupy():
    """An array known only through DLPack on a CUDA device is read as a CuPy view; the
    result is a CuPy array."""
    case = (1, 16, 7, 7, 8, 3, 3, 1, 1, 1, 1)
    x, wt, b = _operands(case, "float32", seed=9)
    _poison()
    got = conv2d(DlpackOnly(_device(x, "float32", "NHWC")), DlpackOnly(_device(wt, "float32")),
                 DlpackOnly(_device(b, "float32")), padding=1)
    assert isinstance(got, cupy.ndarray)
    _check(got, direct(x, wt, b, (1, 1), (1, 1, 1, 1), (1, 1), 1), "float32")


@pytest.mark.parametrize("lib,dtype", [("cupy", "float16"), ("torch", "float16"),
                                       ("torch", "bfloat16")])
@pytest.mark.parametrize("channels,layout,left,right", [(8, "NCHW", 3, 2), (8, "NHWC", 3, 4),
                                                        (4, "NHWC", 0, 1), (16, "NCHW", 5, 0)])
def test_the_fold_copy_pads_rows_in_one_pass(lib, dtype, channels, layout, left, right):
    """The folded convolution's input copy (kernels/fold_copy.py): an (N, H, W, C) view of
    either layout into dense rows, zeros left and right of the image and past C, the same
    bits as the array library's pad."""
    from skcontract.ops.conv2d_gpu import _CupyOps, _TorchOps
    x = np.random.default_rng(17).standard_normal((2, 3, 5, 7)).astype(np.float32)
    want = np.zeros((2, 5, left + 7 + right, channels), np.float32)
    if lib == "cupy":
        ops, dev = _CupyOps(), cupy.asarray(x.astype(dtype))
        if layout == "NHWC":
            dev = cupy.ascontiguousarray(dev.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        host = lambda a: cupy.asnumpy(a).astype(np.float32)  # noqa: E731
    else:
        import torch
        ops = _TorchOps()
        dev = torch.as_tensor(x, device="cuda").to(getattr(torch, dtype))
        if layout == "NHWC":
            dev = dev.to(memory_format=torch.channels_last)
        host = lambda a: a.float().cpu().numpy()  # noqa: E731
    want[:, :, left:left + 7, :3] = host(dev).transpose(0, 2, 3, 1)
    got = ops.pad(ops.permute(dev, (0, 2, 3, 1)), channels, left, right)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case,tile", [
    ((4, 512, 14, 14, 512, 3, 3, 1, 1, 1, 32), (128, 32)),  # ResNeXt's 16, not merged
    ((2, 96, 9, 9, 96, 3, 3, 1, 1, 1, 4), (128, 32)),     # 24: a part-filled tile (RegNet's)
    ((1, 64, 8, 11, 96, 3, 3, 2, 1, 1, 2), (128, 32)),    # 48: a group over two tiles
])
def test_grouped_convolutions_run_the_narrow_tile(case, tile, dtype):
    """16-bit grouped convolutions whose channels a group fill 16-byte rows run the narrow
    convolution tile (128 x 32, several CTAs an SM) of the gathering family where it is
    forced (a forced tile runs the groups apart: no merged groups); each tile's output
    channels stay within its group."""
    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, b = _operands(case, dtype, seed=8)
    g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, groups)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, groups)
    for layout in ("NHWC", "NCHW"):
        xd = _device(x, dtype, layout)
        wd, bd = _device(wt, dtype, layout), _device(b, dtype)
        _poison()
        with record_launches() as launches:
            got = conv2d(xd, wd, bd, stride, padding, dilation, groups, tile=tile)
        assert launches[-1].tile[:2] == (128, 32), launches
        _check(got, ref, dtype)
