"""Lines copied into dense lines padded to 16 bytes (skcontract/kernels/pad_rows.py), the copy
of operands whose rows miss 16 bytes: every element size, batches dense or strided, lines
of a wider buffer, and the layouts the kernel leaves to the caller."""
import numpy as np
import pytest

from skcontract.kernels.pad_rows import pad_rows
from skcontract.kernels.relayout import aligned

cupy = pytest.importorskip("cupy")


def _padded_out(x, ld):
    out = cupy.full(x.shape[:-1] + (ld,), 77, dtype=x.dtype)   # poisoned
    return out


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(197, 197), (3, 130, 99), (4, 3, 197, 197), (1, 1), (5, 33)])
def test_dense_lines_land_in_padded_lines(dtype, shape):
    rng = np.random.default_rng(3)
    x = cupy.asarray((rng.standard_normal(shape) * 50).astype(dtype))
    ld = shape[-1] + (-shape[-1] % 16) + 16
    out = _padded_out(x, ld)
    assert pad_rows(x, out)
    cols = shape[-1]
    assert cupy.array_equal(out[..., :cols], x)
    assert bool((out[..., cols:] == 77).all())   # the padding is not written


def test_a_strided_batch_and_lines_of_a_wider_buffer():
    big = cupy.asarray(np.random.default_rng(4).standard_normal((6, 50, 80)).astype(np.float16))
    x = big[::2, 3:43, 5:66]           # batch stride 2 matrices, lines 80 apart, 61 of them
    out = _padded_out(x, 64)
    assert pad_rows(x, out)
    assert cupy.array_equal(out[..., :61], x)


@pytest.mark.parametrize("dtype", ["int8", "float16", "float64"])
def test_lines_off_16_bytes_in_the_output_move_an_element_at_a_time(dtype):
    rng = np.random.default_rng(6)
    x = cupy.asarray((rng.standard_normal((3, 41, 300)) * 50).astype(dtype))[:, :, 1:]
    out = _padded_out(x, 301)          # lines 301 elements apart: not on 16 bytes
    assert pad_rows(x, out)
    assert cupy.array_equal(out[..., :299], x)
    assert bool((out[..., 299:] == 77).all())


def test_layouts_the_kernel_leaves_to_the_caller():
    x = cupy.zeros((40, 30), cupy.float16)
    assert not pad_rows(x[:, ::2], _padded_out(x[:, ::2], 16))                # strided lines
    y = cupy.zeros((4, 5, 6, 7), cupy.float32)[:, ::2]
    z = y.transpose(1, 0, 2, 3)                                             # batch axes not one
    assert not pad_rows(z, cupy.zeros(z.shape[:-1] + (8,), cupy.float32))
    assert not pad_rows(cupy.zeros((3, 5), cupy.complex128), cupy.zeros((3, 8), cupy.complex128))


@pytest.mark.parametrize("order", ["C", "F"])
def test_aligned_copies_keep_the_layout_and_values(order):
    x = cupy.asarray(np.random.default_rng(5).standard_normal((8, 197, 99)).astype(np.float16))
    if order == "F":
        x = cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    got = aligned(x)
    assert cupy.array_equal(got, x)
    line = got.strides[-2] if order == "C" else got.strides[-1]
    assert line % 16 == 0 and got.data.ptr % 16 == 0
