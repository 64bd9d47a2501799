"""The line copy's host side (skcontract/kernels/pad_rows.py): the lines, extents and strides
it passes the kernel, checked by a NumPy stand-in for the kernel, and what it declines (batch
axes that do not step as one, extents past 32-bit ints) before any launch (the GPU tests run
the kernel itself: tests/gpu/test_pad_rows.py)."""
import types

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from skcontract.kernels import jit
from skcontract.kernels.pad_rows import MAX_EXTENT, pad_rows


def _huge(shape, strides):
    """A view claiming ``shape`` over one element (never read: pad_rows declines first)."""
    return as_strided(np.zeros(1, np.float16), shape=shape, strides=strides)


@pytest.mark.parametrize("shape,strides,ld", [
    ((3, MAX_EXTENT + 1), (0, 2), MAX_EXTENT + 8),        # columns
    ((MAX_EXTENT + 1, 3), (0, 2), 8),                     # rows
    ((2, MAX_EXTENT + 1, 3), (0, 0, 2), 8),               # rows of a batch
])
def test_extents_past_32_bits_are_declined(shape, strides, ld):
    x = _huge(shape, strides)
    out = _huge(shape[:-1] + (ld,), (0,) * (len(shape) - 1) + (2,))
    assert pad_rows(x, out) is False


class _OnDevice(np.ndarray):
    """A NumPy array standing in for a CuPy one (pad_rows asks for its device and address)."""

    device = types.SimpleNamespace(id=0)

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def _emulated_module(header, names, device_id):
    """jit.get_module standing in for the GPU: its kernel is pad_rows_copy in NumPy, reading
    the arguments the host passes (lines, rows, cols, ld, batch and row strides)."""
    def kernel(grid, block, args):
        x, out, lines, rows, cols, ld, sb, sr, vector = args
        assert int(vector) == (out.data.ptr % 16 == 0 and int(ld) * out.itemsize % 16 == 0)
        lines, rows, cols, ld, sb, sr = (int(v) for v in (lines, rows, cols, ld, sb, sr))
        last = (lines // rows - 1) * sb + (rows - 1) * sr + cols
        flat = as_strided(x, shape=(last,), strides=(x.itemsize,))
        dst = out.reshape(-1)
        for line in range(lines):
            b, r = divmod(line, rows)
            dst[line * ld:line * ld + cols] = flat[b * sb + r * sr:b * sb + r * sr + cols]
    return types.SimpleNamespace(get_function=lambda name: kernel)


def _views():
    base = np.arange(6 * 5 * 7 * 13, dtype=np.float16).reshape(6, 5, 7, 13).view(_OnDevice)
    return {
        "dense 4-D": base,
        "every other matrix": base.reshape(30, 7, 13)[::2],
        "a batch axis of one entry at any stride": base[:, 1:2],
        "lines of a wider buffer": base[1:4, :, 2:6, 3:12],
        "2-D": base[0, 0],
        "3-D": base[2],
    }


@pytest.mark.parametrize("name", list(_views()))
def test_the_host_passes_the_lines_the_kernel_copies(monkeypatch, name):
    monkeypatch.setattr(jit, "get_module", _emulated_module)
    x = _views()[name]
    ld = x.shape[-1] + 8
    out = np.full(x.shape[:-1] + (ld,), -1, np.float16).view(_OnDevice)
    assert pad_rows(x, out)
    np.testing.assert_array_equal(out[..., :x.shape[-1]], x)
    assert (out[..., x.shape[-1]:] == -1).all()


def test_batch_axes_that_do_not_step_as_one_are_declined(monkeypatch):
    monkeypatch.setattr(jit, "get_module", _emulated_module)
    x = _views()["dense 4-D"].transpose(1, 0, 2, 3)
    assert pad_rows(x, np.zeros(x.shape[:-1] + (16,), np.float16).view(_OnDevice)) is False
