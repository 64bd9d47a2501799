"""einsum's warm path: a repeated call (same subscripts, operand types, shapes, strides,
dtypes and keywords) skips the checks and the plan lookup and gives what the first call
gave, as numpy does."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract import contract, einsum


def _calls(rng):
    a = rng.standard_normal((6, 5))
    b = rng.standard_normal((5, 4))
    sq = rng.standard_normal((4, 4))
    return [
        ("ij,jk->ik", (a, b), {}),
        ("ij,jk->ik", (np.asfortranarray(a), b), {}),          # same shapes, other strides
        ("ij,jk->ik", (a[:, ::-1], b), {}),                      # negative strides
        ("ij,jk->ik", (a.astype(np.float32), b.astype(np.float32)), {}),
        ("ij,jk->ik", (a.astype(np.float16), b.astype(np.float16)), {"dtype": np.float32}),
        ("ij,jk", (a, b), {"order": "F"}),
        ("ii->i", (sq,), {}),                                   # a view
        ("ij->ji", (a,), {"order": "C"}),                        # a view only if C: a copy
        ("ii", (sq,), {}),                                      # a 0-d result
        ("i,i->", (a[0], a[1]), {"optimize": False}),
        ("ij,j->i", (a, np.broadcast_to(a[0], (6, 5))[0]), {}),
        ("ij,ij->i", (a, np.broadcast_to(a[0], (6, 5))), {}),   # a broadcast operand
    ]


@pytest.mark.parametrize("case", range(12))
def test_a_warm_call_gives_what_the_first_gave(case):
    sub, ops, kw = _calls(np.random.default_rng(case))[case]
    want = np.einsum(sub, *ops, **kw)
    first = einsum(sub, *ops, **kw)
    second = einsum(sub, *ops, **kw)
    for got in (first, second):
        assert type(got) is type(want) and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-3 if want.dtype == np.float16 else 1e-6)
    if isinstance(want, np.ndarray):  # the same layout and the same view, or copy, as before
        assert second.strides == first.strides
        assert np.shares_memory(second, ops[0]) == np.shares_memory(first, ops[0])


def test_warm_calls_skip_the_plan_lookup(monkeypatch):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 3)), rng.standard_normal((3, 2))
    einsum("ab,bc->ac", a, b)
    looked_up = []
    monkeypatch.setattr(contract, "prepare_cached",
                        lambda *args: looked_up.append(args))  # fails if called
    np.testing.assert_allclose(einsum("ab,bc->ac", a + 1, b), (a + 1) @ b)
    assert not looked_up
    # other calls still take the full path: out=, lists, another optimize value
    with pytest.raises(TypeError):
        einsum("ab,bc->ac", a, b, out=np.empty((7, 2)))


def test_errors_are_raised_every_time():
    a = np.ones((3, 3))
    for _ in range(2):
        with pytest.raises(ValueError):
            einsum("ij,jk->ik", a, np.ones((4, 4)))
        with pytest.raises(ValueError):
            einsum("ij->ij", a, order="X")
        with pytest.raises(TypeError):
            einsum("ij->ij", a, dtype=np.int32)  # float64 to int32 is not 'safe'


def test_an_unhashable_keyword_takes_the_full_path():
    a = np.ones((3, 3))
    for _ in range(2):  # a list (unhashable) is no dtype einsum takes, every time
        with pytest.raises(TypeError, match="dtype"):
            einsum("ij->i", a, dtype=[])
    np.testing.assert_array_equal(einsum("ij->i", a), np.full(3, 3.0))


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_the_numpy_backend_is_exact_at_any_precision(precision):
    """precision= opts GPU float32 products into tensor cores; NumPy computes exactly, so
    its results are numpy's to the bit, cold and warm, and an exact call after it too."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 48), dtype=np.float32)
    b = rng.standard_normal((48, 40), dtype=np.float32)
    want = einsum("ij,jk->ik", a, b)
    for _ in range(2):
        np.testing.assert_array_equal(einsum("ij,jk->ik", a, b, precision=precision), want)
    expr = contract.contract_expression("ij,jk->ik", a.shape, b.shape, precision=precision)
    np.testing.assert_array_equal(expr(a, b), want)
    np.testing.assert_array_equal(einsum("ij,jk->ik", a, b), want)
