"""Options that choose only what the GPU runs are checked on the CPU too (issue 49): an
invalid value raises there the error the GPU raises; a valid one is ignored there."""
from __future__ import annotations

import re

import numpy as np
import pytest

import skcontract
from skcontract import conv2d, explain_conv2d
from skcontract.__main__ import main

RNG = np.random.default_rng(49)
X_SHAPE, W_SHAPE = (2, 8, 10, 10), (16, 8, 3, 3)


def _arrays(dtype=np.float32, x_shape=X_SHAPE, w_shape=W_SHAPE):
    return (RNG.standard_normal(x_shape).astype(dtype),
            RNG.standard_normal(w_shape).astype(dtype))


def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.type, str(info.value)


@pytest.mark.parametrize("options,name", [
    (dict(mode="fast", tile=(7, 7, 7)), "mode"),
    (dict(tile=(7, 7, 7)), "tile"),
    (dict(mode="fast"), "mode"),
    (dict(mode="STREAM_K"), "mode"),
    (dict(mode=None), "mode"),
    (dict(reduction="sum"), "reduction"),
    (dict(reduction="cluster"), "reduction"),   # no float32 kernel sums in a cluster
    (dict(mode="stream_k", reduction="cluster"), "reduction"),
    (dict(mode="hytis"), "mode"),               # a convolution runs one tile shape
    (dict(tile=(128, 64)), "tile"),             # no float32 kernel has it
    (dict(tile=(64,)), "tile"),
    (dict(tile=64), "tile"),
    (dict(tile=(-1, 64)), "tile"),
    (dict(grid=0), "grid"),
    (dict(grid=-3), "grid"),
    (dict(grid=2.5), "grid"),
    (dict(grid=True), "grid"),
    (dict(grid="8"), "grid"),
])
def test_an_invalid_gpu_option_raises_on_the_cpu_as_on_the_gpu(options, name):
    """conv2d on NumPy arrays raises the error (type and message) that the GPU plan of the
    same convolution raises, naming the option: what fails on a GPU fails on a laptop."""
    x, w = _arrays()
    cpu = _raised(lambda: conv2d(x, w, padding=1, **options))
    gpu = _raised(lambda: explain_conv2d(x.shape, w.shape, padding=1, dtype="float32",
                                         device="h200", **options))
    assert cpu == gpu
    assert cpu[0] in (ValueError, TypeError)
    assert name in cpu[1]


def test_the_issue_s_call_names_the_argument():
    x, w = _arrays()
    with pytest.raises(ValueError, match="mode must be 'auto' or one of .* got 'fast'"):
        conv2d(x, w, mode="fast", tile=(7, 7, 7))
    with pytest.raises(ValueError, match=re.escape("no float32 kernel with tile (7, 7, 7)")):
        conv2d(x, w, tile=(7, 7, 7))


@pytest.mark.parametrize("dtype,tile", [(np.float64, (7, 7, 7)), (np.float16, (7, 7, 7)),
                                        (np.float64, (256, 64, 32))])
def test_the_tile_is_checked_against_the_dtype_s_kernels(dtype, tile):
    x, w = _arrays(dtype)
    name = np.dtype(dtype).name
    gpu = _raised(lambda: explain_conv2d(x.shape, w.shape, dtype=name, device="h200",
                                         tile=tile))
    assert _raised(lambda: conv2d(x, w, tile=tile)) == gpu


def test_complex_convolutions_check_the_options_as_the_gpu_dtypes_would():
    """Complex arrays run on the CPU only; their options are checked against the GPU
    dtypes' kernels (complex128 as float64 first)."""
    x, w = _arrays(np.complex128)
    with pytest.raises(ValueError, match=re.escape("no float64 kernel with tile (7, 7, 7)")):
        conv2d(x, w, tile=(7, 7, 7))
    np.testing.assert_array_equal(conv2d(x, w, tile=(128, 64, 32)), conv2d(x, w))


@pytest.mark.parametrize("options", [
    dict(mode="stream_k"), dict(mode="data_parallel", reduction="atomic"),
    dict(tile=(128, 128, 32)), dict(tile=[128, 128, 32]), dict(mode="stream_k", grid=4),
    dict(mode="split_k", reduction="arrival"), dict(tile=(np.int64(128), 128, 32)),
])
def test_a_valid_gpu_option_is_ignored_on_the_cpu(options):
    x, w = _arrays()
    np.testing.assert_array_equal(conv2d(x, w, padding=1, **options), conv2d(x, w, padding=1))


def test_options_are_checked_for_the_arrays_layout():
    """A channels-last input is checked as the GPU plans channels-last arrays."""
    x, w = _arrays()
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    for options in (dict(tile=(7, 7, 7)), dict(mode="hytis")):
        gpu = _raised(lambda: explain_conv2d(x.shape, w.shape, dtype="float32", device="h200",
                                             channels_last=True, **options))
        assert _raised(lambda: conv2d(xl, w, **options)) == gpu
    np.testing.assert_allclose(conv2d(xl, w, mode="stream_k"), conv2d(x, w), rtol=1e-5)


def test_option_errors_never_print_an_array():
    x, w = _arrays()
    for options in (dict(tile=np.full((40, 40), 128)), dict(grid=np.ones(1000)),
                    dict(mode=np.ones(1000)), dict(reduction=np.ones(1000))):
        with pytest.raises(TypeError) as info:
            conv2d(x, w, **options)
        message = str(info.value)
        assert "numpy.ndarray of shape" in message and len(message) < 200
        assert "1." not in message and "128 128" not in message


def test_a_valid_precision_is_ignored_for_float64_on_the_gpu_as_on_the_cpu():
    """precision= is float32's: on float64 operands the GPU plans the exact launches it
    plans without it, and the CPU's result is the exact one (torch's float32 matmul
    precision leaves float64 alone too)."""
    a, b = RNG.standard_normal((256, 512)), RNG.standard_normal((512, 384))
    for precision in ("tf32", "3xtf32"):
        _, plain = skcontract.contract_path("ij,jk->ik", a, b, device="h200")
        _, asked = skcontract.contract_path("ij,jk->ik", a, b, device="h200",
                                            precision=precision)
        assert [s.launch for s in asked.steps] == [s.launch for s in plain.steps]
        assert plain.table().splitlines()[1:] == asked.table().splitlines()[1:]
        np.testing.assert_array_equal(skcontract.einsum("ij,jk->ik", a, b, precision=precision),
                                      skcontract.einsum("ij,jk->ik", a, b))
        expr = skcontract.contract_expression("ij,jk->ik", a.shape, b.shape,
                                              precision=precision)
        np.testing.assert_array_equal(expr(a, b), a @ b)


@pytest.mark.parametrize("call", [
    lambda a: skcontract.einsum("ij,jk->ik", a, a, precision="tf16"),
    lambda a: skcontract.contract_path("ij,jk->ik", a, a, precision="tf16"),
    lambda a: skcontract.contract_expression("ij,jk->ik", a.shape, a.shape, precision="tf16"),
    lambda a: skcontract.explain("ij,jk->ik", a, a, precision="tf16"),
    lambda a: skcontract.einsum("ij,jk->ik", a, a, precision="TF32"),
])
def test_an_invalid_precision_is_an_error_on_the_cpu(call):
    with pytest.raises(ValueError, match="precision must be None"):
        call(np.ones((4, 4)))


def test_explain_says_a_float32_precision_leaves_other_dtypes_exact(capsys):
    assert main(["explain", "ij,jk->ik", "64x64", "64x64", "--precision", "tf32"]) == 0
    out, err = capsys.readouterr()
    assert "tf32:" not in out
    assert "--precision tf32 is for float32 steps; float64 steps run exactly" in err
    assert main(["explain", "ij,jk->ik", "64x64", "64x64", "--precision", "tf32",
                 "--dtype", "float32"]) == 0
    out, err = capsys.readouterr()
    assert "tf32:" in out and err == ""
