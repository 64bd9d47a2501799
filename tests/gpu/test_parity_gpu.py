"""The CPU parity suite (tests/cpu/test_parity.py) on CuPy arrays: the same test bodies,
with the ``xp`` fixture returning CuPy, so every einsum the CPU accepts is checked on the GPU
against numpy.einsum (results as CuPy arrays, 0-d where numpy returns a scalar). Tests that
only make sense for NumPy (object dtype, Python lists, host-memory accounting) stay there."""
import pytest

from tests.cpu.test_parity import (  # noqa: F401 - collected here with the CuPy fixture
    test_a_wider_out_widens_the_sums,
    test_bool_is_or_of_and, test_broadcast_operands_match_numpy, test_dtype_like_numpy,
    test_dtype_upcast_int_to_float, test_float16_accumulates_in_float32,
    test_integer_overflow_wraps_like_numpy, test_order, test_out_casting_like_numpy,
    test_out_is_returned_and_filled, test_out_non_contiguous_and_0d, test_parity_dtype_optimize_grid,
    test_parity_fixed, test_parity_random,
    test_single_operand_copy_when_a_view_cannot_be_what_was_asked,
    test_single_operand_result_is_a_view_as_in_numpy,
    test_summed_single_operand_is_not_a_view,
    test_broadcast_single_operand_is_a_view_as_in_numpy, test_zero_size_operands,
    test_conj_reads_operands_conjugated, test_conj_is_checked_like_an_axis_argument)


@pytest.fixture(scope="module")
def xp():
    import cupy
    return cupy
