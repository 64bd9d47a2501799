"""Depthwise convolutions on the direct kernel (skcontract/kernels/depthwise.py) against the
float64 definition: every dtype, NCHW and channels-last inputs (the output in the input's
format, no copy), strided views, stride, dilation, asymmetric padding, bias, unbatched input,
torch tensors (bfloat16 included)."""
import numpy as np
import pytest

from skcontract import conv2d
from skcontract.kernels import depthwise, depthwise_mma, torch_cuda
from skcontract.kernels.launch import sm_count
from skcontract.kernels.operands import describe
from skcontract.ops.conv2d import conv_geometry
from skcontract.ops.conv2d_gpu import plan_of
from skcontract.ops.conv_plan import DEPTHWISE
from tests.conv_reference import direct

cupy = pytest.importorskip("cupy")

TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2}

CASES = [  # (N, C, H, W), (R, S), stride, padding, dilation
    ((2, 32, 14, 14), (3, 3), 1, 1, 1),
    ((1, 96, 28, 28), (7, 7), 1, 3, 1),          # ConvNeXt's 7 x 7
    ((3, 24, 17, 19), (5, 5), 2, 2, 1),          # EfficientNet's strided 5 x 5
    ((2, 16, 20, 20), (3, 3), 1, 2, 2),          # dilated
    ((2, 8, 9, 11), (3, 1), (2, 1), (1, 0), 1),  # asymmetric
    ((2, 12, 10, 13), (3, 3), 1, 1, 1),          # channels off 16 bytes in float16
    ((2, 20, 11, 9), (5, 5), 2, 2, 1),           # ... and a strided 5 x 5 on them
    ((1, 6, 8, 30), (3, 3), 1, 1, 1),            # packs of 2 in float64 only
    ((2, 64, 15, 17), (3, 3), 2, 1, 1),          # MobileNet's strided 3 x 3
    ((1, 32, 13, 14), (5, 5), 1, 2, 1),          # 5 x 5, unit step
    ((1, 16, 15, 15), (7, 7), 2, 3, 1),          # 7 x 7, step 2
    ((2, 288, 9, 10), (3, 3), 1, 1, 1),          # several channel slices
    ((1, 512, 16, 16), (13, 13), 1, 6, 1),       # slices narrowed by the filters' size
]


def _operands(case, dtype, channels_last, seed=0):
    (n, c, h, w), (r, s), *_ = case
    rng = np.random.default_rng(seed)
    x, wt, b = rng.standard_normal((n, c, h, w)), rng.standard_normal((c, 1, r, s)), \
        rng.standard_normal(c)
    xd, wd, bd = (cupy.asarray(a.astype(dtype)) for a in (x, wt, b))
    if channels_last:
        xd = cupy.ascontiguousarray(xd.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    return (x.astype(dtype), wt.astype(dtype), b.astype(dtype)), (xd, wd, bd)


def _err(got, ref):
    return np.linalg.norm(cupy.asnumpy(got).astype(np.float64) - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_depthwise_matches_the_definition(case, dtype, channels_last, bias):
    (x, wt, b), (xd, wd, bd) = _operands(case, dtype, channels_last)
    _, _, stride, padding, dilation = case
    c = x.shape[1]
    g = conv_geometry(x.shape, wt.shape, stride, padding, dilation, c)
    plan = plan_of(xd, wd, bd if bias else None, g)
    assert plan.route == DEPTHWISE
    vector = channels_last and c * xd.itemsize % 16 == 0
    mma = vector and depthwise_mma.planned(g, dtype)
    square = channels_last and not mma and depthwise.fixed_filter(g) is not None and \
        c % depthwise.PACK_CHANNELS[dtype] == 0
    assert plan.direct.square == square and plan.direct.mma == mma
    assert plan.direct.vector == (square or vector)
    assert plan.direct.wide == (square and vector and dtype in ("float16", "bfloat16") and
                                depthwise.fixed_filter(g) in depthwise.WIDE_PLANNED)
    got = conv2d(xd, wd, bd if bias else None, stride, padding, dilation, c)
    ref = direct(x, wt, b if bias else None, g.stride, g.padding, g.dilation, c)
    assert got.shape == ref.shape and got.dtype == xd.dtype
    assert _err(got, ref) <= TOL[dtype]
    # the output in the input's format, as a view of what the kernel wrote
    assert (got.strides[1] == got.itemsize) == channels_last


def test_strided_views_and_an_unbatched_input():
    (x, wt, b), (xd, wd, bd) = _operands(((2, 16, 12, 12), (3, 3)), "float32", False)
    big = cupy.zeros((2, 32, 12, 24), cupy.float32)
    big[:, ::2, :, ::2] = xd
    view = big[:, ::2, :, ::2]
    got = conv2d(view, wd, bd, 1, 1, 1, 16)
    ref = direct(x, wt, b, (1, 1), (1, 1, 1, 1), (1, 1), 16)
    assert _err(got, ref) <= TOL["float32"]
    one = conv2d(xd[0], wd, None, 1, 1, 1, 16)
    assert one.shape == ref.shape[1:]
    assert _err(one, direct(x[:1], wt, None, (1, 1), (1, 1, 1, 1), (1, 1), 16)[0]) <= 1e-5


@pytest.mark.parametrize("size,step", [(3, 1), (5, 2)])
def test_the_square_kernel_reads_an_input_on_8_bytes(size, step):
    """A channels-last float16 input 8 bytes past a 16-byte boundary, 12 channels (packs
    of 4, not vectors of 8): the square kernel reads it in place."""
    (x, wt, b), _ = _operands(((2, 12, 11, 13), (size, size)), "float16", True)
    flat = cupy.empty(x.size + 4, cupy.float16)
    xd = flat[4:].reshape(2, 11, 13, 12)
    xd[...] = cupy.asarray(x.transpose(0, 2, 3, 1))
    xd = xd.transpose(0, 3, 1, 2)
    wd, bd = cupy.asarray(wt), cupy.asarray(b)
    assert xd.data.ptr % 16 == 8
    g = conv_geometry(x.shape, wt.shape, step, size // 2, 1, 12)
    plan = plan_of(xd, wd, bd, g)
    assert plan.route == DEPTHWISE and plan.direct.square
    got = conv2d(xd, wd, bd, step, size // 2, 1, 12)
    ref = direct(x, wt, b, g.stride, g.padding, g.dilation, 12)
    assert _err(got, ref) <= TOL["float16"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_torch_tensors(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, wt, b = rng.standard_normal((2, 64, 16, 16)), rng.standard_normal((64, 1, 3, 3)), \
        rng.standard_normal(64)
    tdt = getattr(torch, dtype)
    xt = torch.tensor(x).to(tdt).cuda().to(memory_format=torch.channels_last)
    wt_t, bt = torch.tensor(wt).to(tdt).cuda(), torch.tensor(b).to(tdt).cuda()
    got = conv2d(xt, wt_t, bt, 1, 1, 1, 64)
    want = torch.nn.functional.conv2d(xt.double(), wt_t.double(), bt.double(), 1, 1, 1, 64)
    assert isinstance(got, torch.Tensor) and got.dtype == tdt
    err = float((got.double() - want).norm() / want.norm())
    assert err <= TOL[dtype]


SQUARE_CASES = [  # (N, C, H, W), size, step, padding: strips cut short at the edges
    ((2, 32, 13, 14), 3, 1, 1),
    ((1, 48, 17, 11), 3, 2, 1),
    ((2, 16, 15, 13), 5, 1, 2),
    ((1, 24, 19, 18), 5, 2, 2),
    ((1, 40, 11, 15), 7, 1, 3),
    ((2, 16, 16, 17), 7, 2, 3),
]


@pytest.mark.parametrize("one_sm", [False, True])
@pytest.mark.parametrize("square", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("case", SQUARE_CASES)
def test_the_square_and_any_filter_vector_kernels_match_the_definition(case, dtype, square,
                                                                       one_sm):
    """The square kernel of each of its filters, and the vector kernel for any filter forced
    on the same layers, against float64: columns past the image's in the last strip, the
    bias, a NaN-poisoned output; ``one_sm``: the grid of a one-SM device (one or two blocks a
    slice), so that a block walks a run of several rounds of its lanes where the layer has
    more strips than a block has lanes (on a whole GPU these layers give each block one
    round)."""
    (n, c, h, w), size, step, pad = case
    xt, wt_t, bt = _torch_operands((n, c, h, w), (size, size), dtype, 7)
    g = conv_geometry(xt.shape, wt_t.shape, step, pad, 1, c)
    launch = depthwise.plan_depthwise(g, dtype, True, tuple(xt.stride()), 0)
    assert (launch.square or launch.mma) and launch.kernel.startswith("skc::depthwise_")
    # the 16-bit layers plan the tensor-core kernel: the square one is forced
    launch = depthwise.DepthwiseLaunch(g, dtype, True, True, square)
    _check_run(launch, xt, wt_t, bt, dtype, 1 if one_sm else None)


def _torch_operands(shape, taps, dtype, seed):
    """Random channels-last input, filters and bias of ``dtype`` as CUDA torch tensors."""
    torch = pytest.importorskip("torch")
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    x, wt, b = rng.standard_normal(shape), rng.standard_normal((c, 1, *taps)), \
        rng.standard_normal(c)
    tdt = getattr(torch, dtype)
    xt = torch.tensor(x).to(tdt).cuda().to(memory_format=torch.channels_last)
    return xt, torch.tensor(wt).to(tdt).cuda(), torch.tensor(b).to(tdt).cuda()


def _check_run(launch, xt, wt_t, bt, dtype, sms=None):
    """``launch`` run on the torch operands (``bt`` None: no bias; ``sms``: the grid of a
    device of that many SMs, else this one's) into a NaN-poisoned channels-last output,
    against float64: every element written, the error within TOL."""
    import torch
    g = launch.g
    out = torch.full((g.n, g.p, g.q, g.k), float("nan"), dtype=xt.dtype, device="cuda")
    out = out.permute(0, 3, 1, 2)
    dev = torch.cuda.current_device()
    depthwise.run_depthwise(launch, describe(xt), describe(wt_t),
                            None if bt is None else describe(bt), describe(out), dev,
                            torch_cuda.current_stream(dev), sms or sm_count(dev))
    top, bottom, left, right = g.padding
    padded = torch.nn.functional.pad(xt.double(), (left, right, top, bottom))
    want = torch.nn.functional.conv2d(padded, wt_t.double(), None if bt is None else
                                      bt.double(), g.stride, 0, 1, g.groups)
    assert not bool(out.isnan().any()), "an output element was not written"
    err = float((out.double() - want).norm() / want.norm())
    assert err <= TOL[dtype]


WIDE_CASES = [  # (N, C, H, W), filter size, step; padding size // 2
    ((2, 32, 13, 14), 3, 1),
    ((1, 48, 17, 11), 3, 2),
    ((3, 24, 19, 18), 3, 1),     # three packs of 8
    ((2, 144, 16, 17), 3, 2),
    ((2, 40, 15, 13), 5, 1),     # five packs of 8
    ((1, 16, 23, 21), 5, 2),
]


@pytest.mark.parametrize("one_sm", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", WIDE_CASES)
def test_the_square_kernel_on_wide_packs_matches_the_definition(case, dtype, one_sm):
    """The square kernel's 3 x 3 and 5 x 5 instantiations on packs of 8 16-bit channels
    (forced: the planner runs them for WIDE_PLANNED only) against float64, NaN-poisoned
    output, on a whole GPU and on a one-SM grid (a block walking several rounds of its
    lanes)."""
    shape, size, step = case
    xt, wt_t, bt = _torch_operands(shape, (size, size), dtype, 5)
    g = conv_geometry(xt.shape, wt_t.shape, step, size // 2, 1, shape[1])
    launch = depthwise.DepthwiseLaunch(g, dtype, True, True, True, wide=True)
    assert launch.kernel.endswith(f"{size}, {step}, 8>")
    _check_run(launch, xt, wt_t, bt, dtype, 1 if one_sm else None)


MMA_CASES = [  # (N, C, H, W), (R, S), step, padding
    ((2, 32, 13, 14), (3, 3), 1, 1),
    ((3, 24, 37, 70), (5, 5), 1, 2),         # 24 channels: a tile's second vector absent
    ((1, 16, 40, 33), (7, 7), 1, 3),         # a column tile of one pixel
    ((2, 48, 17, 19), (9, 9), 1, 4),         # the widest band
    ((1, 32, 20, 50), (4, 6), 1, "same"),    # rows and columns apart, asymmetric padding
    ((2, 16, 9, 41), (1, 9), 1, (0, 4)),     # one filter row
    ((1, 64, 31, 30), (3, 3), 1, (5, 6)),    # padding wider than the filter
    ((2, 8, 16, 32), (5, 3), 1, (2, 1)),     # 8 channels: one vector a tile
    ((2, 32, 29, 31), (3, 3), 2, 1),         # step 2: MobileNet's 3 x 3, odd sizes
    ((1, 24, 40, 70), (5, 5), 2, 2),         # EfficientNet's 5 x 5, two column tiles
    ((2, 16, 33, 20), (7, 7), 2, 3),         # the largest step-2 window
    ((1, 8, 18, 66), (4, 6), 2, (1, 2)),     # even filters, rows and columns apart
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", MMA_CASES)
def test_the_tensor_core_kernel_matches_the_definition(case, dtype, bias):
    """The tensor-core kernel (planned for each case) against float64: tiles cut short by
    the output's rows and columns, channels of one vector in the last tile, filters of any
    rows and columns up to 9, padding past the filter, steps of 1 and 2, the bias; the
    output NaN-poisoned, so an element it does not write fails."""
    shape, taps, step, padding = case
    xt, wt_t, bt = _torch_operands(shape, taps, dtype, 11)
    g = conv_geometry(xt.shape, wt_t.shape, step, padding, 1, shape[1])
    # the planner runs wide filters on it (depthwise_mma.planned); every case is forced
    assert depthwise_mma.takes(g, dtype)
    launch = depthwise.DepthwiseLaunch(g, dtype, True, True, False, True)
    assert launch.kernel == depthwise_mma.name(g, dtype)
    _check_run(launch, xt, wt_t, bt if bias else None, dtype)


def test_the_tensor_core_kernel_reads_a_crop_and_runs_through_conv2d():
    """The tensor-core kernel reads a channels-last crop of wider rows in place (the input's
    row stride is not W x C), and conv2d plans it for a dense channels-last input, its
    output channels-last."""
    (x, wt, b), (xd, wd, bd) = _operands(((2, 32, 20, 40), (7, 7)), "float16", True)
    crop = xd[:, :, 2:18, 3:35]
    g = conv_geometry(crop.shape, wt.shape, 1, 3, 1, 32)
    launch = depthwise.plan_depthwise(g, "float16", True, describe(crop).strides,
                                      crop.data.ptr % 16)
    assert launch.mma
    out = cupy.full((2, g.p, g.q, 32), cupy.nan, cupy.float16).transpose(0, 3, 1, 2)
    dev = cupy.cuda.runtime.getDevice()
    depthwise.run_depthwise(launch, describe(crop), describe(wd), describe(bd), describe(out),
                            dev, cupy.cuda.get_current_stream(), sm_count(dev))
    ref = direct(x[:, :, 2:18, 3:35], wt, b, (1, 1), (3, 3, 3, 3), (1, 1), 32)
    assert _err(out, ref) <= TOL["float16"]
    g = conv_geometry(xd.shape, wt.shape, 1, 3, 1, 32)
    assert plan_of(xd, wd, bd, g).direct.mma
    got = conv2d(xd, wd, bd, 1, 3, 1, 32)
    ref = direct(x, wt, b, (1, 1), (3, 3, 3, 3), (1, 1), 32)
    assert got.strides[1] == got.itemsize and _err(got, ref) <= TOL["float16"]
