"""skcontract as an opt_einsum backend: opt_einsum imports the module and calls its
tensordot, transpose and einsum."""
from __future__ import annotations

import numpy as np
import opt_einsum
import pytest

import skcontract

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk,kl->il", [(5, 6), (6, 7), (7, 3)]),
    ("abc,bcd,de->ae", [(3, 4, 5), (4, 5, 6), (6, 2)]),
    ("bij,bjk->bik", [(4, 5, 6), (4, 6, 3)]),
    ("ij,ij->", [(5, 6), (5, 6)]),
    ("i,j->ij", [(4,), (3,)]),
])
def test_opt_einsum_contract_with_the_skcontract_backend(subscripts, shapes):
    ops = [RNG.standard_normal(s) for s in shapes]
    got = opt_einsum.contract(subscripts, *ops, backend="skcontract")
    np.testing.assert_allclose(got, np.einsum(subscripts, *ops), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sa,sb,axes", [
    ((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (4, 5), 0),
    ((2, 3, 4), (4, 3), ([1, 2], [1, 0])), ((2, 3, 4), (4, 3), ([-1], [0])),
])
def test_tensordot_matches_numpy(sa, sb, axes):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    np.testing.assert_allclose(skcontract.tensordot(a, b, axes), np.tensordot(a, b, axes),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sa,sb,axes", [
    ((2, 3), (3, 4), 3),                   # IndexError: more axes than a has
    ((2, 3), (3, 4), ([3], [0])),          # IndexError: out of range
    ((2, 3), (3, 4), ([-3], [0])),
    ((2, 3), (3, 4), ([1], [0, 1])),       # ValueError: lengths differ
    ((2, 1), (3, 4), 1),                   # ValueError: 1 against 3 is not broadcast
    ((3, 3), (3, 3), ([0, 0], [0, 1])),    # ValueError: an axis twice
])
def test_tensordot_refuses_what_numpy_refuses(sa, sb, axes):
    a, b = np.ones(sa), np.ones(sb)
    with pytest.raises(Exception) as theirs:
        np.tensordot(a, b, axes)
    with pytest.raises(theirs.type):
        skcontract.tensordot(a, b, axes)


@pytest.mark.parametrize("axes", [np.int64(1), (np.int64(1), np.int64(0)), -1, 0,
                                  ([1], 0), (1, [0])])
def test_tensordot_axes_as_numpy_reads_them(axes):
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
    want = np.tensordot(a, b, axes)
    got = skcontract.tensordot(a, b, axes)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_tensordot_full_contraction_and_lists():
    a = RNG.standard_normal((2, 3))
    got = skcontract.tensordot(a, a, 2)
    assert isinstance(got, np.ndarray) and got.shape == ()   # numpy's 0-d array
    np.testing.assert_allclose(got, np.tensordot(a, a, 2), rtol=1e-12)
    np.testing.assert_array_equal(skcontract.tensordot([[1.0, 2.0]], [[1.0], [2.0]], 1),
                                  [[5.0]])


def test_transpose():
    a = RNG.standard_normal((2, 3, 4))
    assert skcontract.transpose(a, (2, 0, 1)).shape == (4, 2, 3)
    assert skcontract.transpose(a).shape == (4, 3, 2)
