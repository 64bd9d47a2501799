"""numpy.einsum's behaviour where it is not arithmetic (issue 49): object arrays sum from
the int 0, and floating-point errors neither warn nor raise."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import skcontract
from skcontract import conv2d

S = np.array(["a", "bb"], dtype=object)
TWO_THREE = np.array([2, 3], dtype=object)


def _outcome(fn):
    """(result, None) or (None, the exception's type and message)."""
    try:
        return fn(), None
    except Exception as e:  # the comparison is the point
        return None, (type(e), str(e))


@pytest.mark.parametrize("subscripts,operands", [
    ("i,i->", (S, TWO_THREE)),                                           # 'aabbb' before
    ("ij,jk->ik", (S[None, :], TWO_THREE[:, None])),
    ("bij,bjk->bik", (S[None, None, :], TWO_THREE[None, :, None])),
    ("ij,jk->ik", (S[None, :1], TWO_THREE[:1, None])),                  # K = 1: no sum
    ("i,i->i", (S, TWO_THREE)),                                          # elementwise
    ("i,->i", (S, np.array(2, dtype=object))),
    (",->", (np.array("a", dtype=object), np.array(3, dtype=object))),
    ("i->", (S,)),
    ("ij->i", (S[:, None],)),
])
def test_object_strings_raise_as_numpy(subscripts, operands):
    """numpy.einsum starts every element of an object result from the int 0: a product or
    sum of strings is a TypeError, not a concatenation."""
    want = _outcome(lambda: np.einsum(subscripts, *operands))
    assert want[0] is None and want[1][0] is TypeError
    assert _outcome(lambda: skcontract.einsum(subscripts, *operands)) == want
    expr = skcontract.contract_expression(subscripts, *[o.shape for o in operands])
    assert _outcome(lambda: expr(*operands)) == want


@pytest.mark.parametrize("subscripts,operands", [
    ("i->i", (S,)),
    ("ii->i", (np.array([["a", "b"], ["c", "d"]], dtype=object),)),
    ("ij->ji", (np.array([["a", "b"], ["c", "d"]], dtype=object),)),
])
def test_object_views_are_views_as_in_numpy(subscripts, operands):
    """A single operand only viewed adds nothing: strings come back, as in numpy."""
    got = skcontract.einsum(subscripts, *operands)
    np.testing.assert_array_equal(got, np.einsum(subscripts, *operands))
    assert np.shares_memory(got, operands[0])


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk->ik", [(2, 1), (1, 4)]), ("i,i->", [(5,), (5,)]),
    ("i,i->i", [(4,), (4,)]), ("i,j->ij", [(2,), (3,)]), ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    (",->", [(), ()]), ("ij->", [(2, 3)]), ("ij,jk->ik", [(2, 0), (0, 3)]),
])
@pytest.mark.parametrize("kind", ["int", "bool", "fraction"])
def test_object_numbers_match_numpy_value_and_type(subscripts, shapes, kind):
    """Sums of Python numbers start from 0 too: bools sum to ints (0 + True is 1), as numpy's
    do."""
    from fractions import Fraction
    rng = np.random.default_rng(3)
    make = {"int": lambda v: int(v), "bool": lambda v: bool(v % 2),
            "fraction": lambda v: Fraction(int(v), 3)}[kind]
    ops = [np.array([make(v) for v in rng.integers(0, 5, size=int(np.prod(s)))],
                    dtype=object).reshape(s) for s in shapes]
    want = np.einsum(subscripts, *ops)
    got = skcontract.einsum(subscripts, *ops)
    np.testing.assert_array_equal(got, want)
    assert [type(v) for v in np.ravel(got)] == [type(v) for v in np.ravel(want)]


INF = np.inf


def _values(values, shape, dtype):
    with np.errstate(all="ignore"):
        return np.resize(np.array(values), int(np.prod(shape))).reshape(shape).astype(dtype)


FP_CASES = [  # (subscripts, operand shapes, values, dtype, keywords)
    ("ij,jk->ik", [(3, 4), (4, 5)], [0.0, INF], np.float64, {}),         # inf * 0 in matmul
    ("ij,jk->ik", [(3, 4), (4, 5)], [1e300, -1e300], np.float64, {}),    # overflow
    ("ij,j->i", [(3, 4), (4,)], [INF, -INF], np.float64, {}),
    ("i,i->", [(6,), (6,)], [INF, -INF], np.float32, {}),
    ("i->", [(4,)], [INF, -INF], np.float64, {}),                        # inf - inf in a sum
    ("i,->i", [(3,), ()], [0.0, INF], np.float64, {}),                   # elementwise
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], [1e30], np.float32, {}),
    ("ij,ij->", [(3, 4), (3, 4)], [INF, 0.0], np.complex128, {}),
    ("i,i->", [(4,), (4,)], [300.0], np.float16, {}),                   # inf in the cast back
    ("i,i->i", [(4,), (4,)], [300.0], np.float16, {}),
    ("i->", [(2,)], [1e300, 1.0], np.float64, dict(dtype=np.float32, casting="unsafe")),
    ("i,i->i", [(2,), (2,)], [1e300, 1.0], np.float64,
     dict(dtype=np.float32, casting="unsafe")),
    ("i,i->i", [(2,), (2,)], [np.nan, 1e300], np.float64,
     dict(dtype=np.int64, casting="unsafe")),
    ("i,i->", [(1,), (1,)], [1e10], np.float64,
     dict(out=np.empty((), np.float16), casting="unsafe")),
]


@pytest.mark.parametrize("subscripts,shapes,values,dtype,kwargs", FP_CASES)
def test_no_floating_point_warning_numpy_does_not_emit(subscripts, shapes, values, dtype,
                                                       kwargs):
    """numpy.einsum's loops neither warn of nor raise floating-point errors (an inf times
    zero, an overflow, a cast to inf), whatever np.seterr says; the NumPy backend computes
    the same way."""
    ops = [_values(values, s, dtype) for s in shapes]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            want = np.einsum(subscripts, *ops, **kwargs)
            got = skcontract.einsum(subscripts, *ops, **kwargs)
            if not kwargs:
                expr = skcontract.contract_expression(subscripts, *shapes)
                np.testing.assert_array_equal(expr(*ops), want)
    np.testing.assert_array_equal(got, want)


def test_the_error_state_is_the_caller_s_again_after_a_call():
    a = _values([0.0, INF], (3, 3), np.float64)
    with np.errstate(all="raise"):
        skcontract.einsum("ij,jk->ik", a, a)
        assert np.geterr()["invalid"] == "raise"
        with pytest.raises(FloatingPointError):
            np.matmul(a, a)


def test_conv2d_on_the_cpu_warns_of_no_floating_point_error():
    """torch's conv2d warns of no inf or overflow; neither does conv2d's CPU path."""
    x = _values([INF, 0.0, 1.0], (1, 2, 5, 5), np.float64)
    w = _values([0.0, 1e300], (3, 2, 3, 3), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            out = conv2d(x, w, padding=1)
    assert out.shape == (1, 3, 5, 5) and np.isnan(out).any()
