"""The line copy's host side (skcontract/kernels/pad_rows.py) declines what its kernel cannot
count: extents past 32-bit ints go back to the caller's copy before any launch (the GPU
tests run the kernel: tests/gpu/test_pad_rows.py)."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

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
