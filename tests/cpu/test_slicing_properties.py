"""Sliced and unsliced plans against numpy, on contractions Hypothesis draws: random
networks (opt_einsum's generator: shared, output and broadcast-free labels), some with a
repeated label in a term (a diagonal) and batch axes under an ellipsis, each planned whole
and under element and byte budgets it draws. Every plan computes numpy's result; a sliced
plan's every intermediate keeps an element budget, and the peak tracemalloc measures keeps
a byte budget; a budget no slicing keeps is refused with ValueError naming memory_limit."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from network_strategies import networks
from peak_helpers import warm_peak
from skcontract import contract_expression, contract_path, einsum
from skcontract.plan.slicing import budget_of

PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ref).max()))


@PROPERTY
@given(networks(), st.floats(0.05, 1.0))
def test_element_budgets_are_kept_and_the_result_is_numpys(net, share):
    eq, ops = net
    ref = np.einsum(eq, *ops, optimize=True)
    _close(einsum(eq, *ops), ref)
    _, whole = contract_path(eq, *ops)
    limit = max(1, int(whole.largest_intermediate * share))
    try:
        _, plan = contract_path(eq, *ops, memory_limit=limit)
    except ValueError as e:
        assert "memory_limit" in str(e)
        return
    assert plan.largest_intermediate <= limit
    if plan.slicing is not None:
        assert plan.slicing.largest_intermediate == plan.largest_intermediate
    _close(einsum(eq, *ops, memory_limit=limit), ref)


BYTES_FLOOR = 2 * 2**20
"""The least byte budget the property tries. NumPy's ufuncs may hold a buffer of up to
``np.getbufsize()`` elements for each of their three operands (a strided ``+=`` of a
slice's result into the output held three of the result's size): up to 192 KiB in
float64, which the peak model leaves room for in its margin (``PEAK_MODEL_SHARE``) only
from budgets of about 1.3 MB; tracemalloc also counts the arrays' Python objects."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks(tensors=(3, 5), d_min=10, d_max=20), st.floats(0.5, 3.0))
def test_byte_budgets_bound_the_peak_measured(net, share):
    """The budget: a share of the whole plan's largest intermediate's bytes plus the
    output's (which every slice sums into), :data:`BYTES_FLOOR` at least; the peak of a
    warm call under it."""
    eq, ops = net
    ref = np.einsum(eq, *ops, optimize=True)
    _, whole = contract_path(eq, *ops)
    limit = f"{max(BYTES_FLOOR, int((whole.largest_intermediate * share + ref.size) * ref.itemsize))}B"
    try:
        expr = contract_expression(eq, *[x.shape for x in ops], memory_limit=limit,
                                   backend="numpy")
    except ValueError as e:
        assert "memory_limit" in str(e)
        return
    got, peak = warm_peak(expr, ops)
    assert peak <= budget_of(limit, []).bytes, (eq, limit, peak)
    _close(got, ref)


@pytest.mark.parametrize("limit", ["1B", "60B"])  # the output alone holds 72 bytes
def test_a_byte_budget_below_every_slice_is_refused(limit):
    x = np.ones((3, 4))
    with pytest.raises(ValueError, match="memory_limit"):
        einsum("ij,jk->ik", x, x.T, memory_limit=limit)


def test_an_operands_sum_is_sliced_to_an_element_budget():
    """The operands' own sums (a label no other operand holds) make arrays the slices hold:
    under an element budget they are sliced too (``abc->ab`` of 20 elements, budget 4);
    their diagonals are views, which hold none (``aba->ab``)."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 4, 6)), rng.standard_normal((5, 4))
    _, plan = contract_path("abc,ab->", a, b, memory_limit=4)
    assert plan.slicing is not None and plan.largest_intermediate <= 4
    _close(einsum("abc,ab->", a, b, memory_limit=4), np.einsum("abc,ab->", a, b))
    d, e = rng.standard_normal((5, 3, 5)), rng.standard_normal((3, 5))
    _, plan = contract_path("aba,ba->", d, e, memory_limit=2)
    assert plan.slicing is None and plan.largest_intermediate == 1
