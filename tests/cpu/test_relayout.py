"""The transpose kernel's dispatch (skcontract/kernels/relayout.py), decided on the host:
which batches of matrices the 16-byte vector copy takes, and which the kernel refuses (the
caller then copies through its array library). The copies themselves run in
tests/gpu/test_tf32_int8.py."""
import pytest

from skcontract.kernels import relayout


@pytest.mark.parametrize("ptr,rows,cols,sb,sr,sc,itemsize,vector", [
    (0, 64, 64, 0, 64, 1, 2, True),          # fp16, whole vectors of 8
    (0, 64, 64, 4096, 64, 1, 4, True),       # fp32, a batch
    (16, 128, 200, 0, 200, 1, 4, True),
    (8, 64, 64, 0, 64, 1, 2, False),         # rows start off 16 bytes
    (0, 132, 200, 0, 200, 1, 2, False),      # 132 rows: not whole vectors of 8
    (0, 64, 60, 0, 64, 1, 2, False),         # 60 columns
    (0, 64, 64, 0, 68, 1, 2, False),         # a row stride off whole vectors
    (0, 64, 64, 4100, 64, 1, 2, False),      # a batch stride off whole vectors
    (0, 64, 64, 0, 1, 64, 4, False),         # columns strided
    (0, 64, 64, 0, 64, 1, 8, False),         # float64: the element copy
    (0, 64, 64, 0, 64, 1, 1, False),         # int8: the element copy
])
def test_the_vector_copy_takes_16_byte_rows_of_whole_vectors(ptr, rows, cols, sb, sr, sc,
                                                             itemsize, vector):
    assert relayout._vector_copy(ptr, rows, cols, sb, sr, sc, itemsize) is vector


@pytest.mark.parametrize("shape,itemsize", [
    ((2, 8, 8), 16),                          # complex128: no kernel type
    ((2, 8, 8), 3),
    ((relayout.MAX_GRID_Y + 1, 8, 8), 4),    # a batch past the grid's y extent
    ((1, relayout.MAX_EXTENT + 1, 8), 4),    # rows past the kernel's 32-bit counts
])
def test_the_kernel_refuses_what_it_has_no_launch_for(shape, itemsize):
    """False before anything is compiled or launched: the caller copies."""
    assert relayout.transpose_into(0, shape, (64, 8, 1), itemsize, 0, 0, None) is False
