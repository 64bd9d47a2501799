"""contract_expression: plan once, call many times."""
from __future__ import annotations

import numpy as np
import opt_einsum as oe
import pytest

from skcontract.contract import ContractExpression, contract_expression, contract_path


def test_call_many_times():
    expr = contract_expression("ij,jk,kl->il", (3, 4), (4, 5), (5, 6))
    assert isinstance(expr, ContractExpression)
    rng = np.random.default_rng(0)
    for _ in range(3):
        ops = [rng.standard_normal(s) for s in [(3, 4), (4, 5), (5, 6)]]
        np.testing.assert_allclose(expr(*ops), ops[0] @ ops[1] @ ops[2], rtol=1e-12)
    assert "GEMM" in repr(expr)


def test_dtype_none_accepts_any_dtype():
    expr = contract_expression("ij,jk->ik", (2, 3), (3, 4))
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(12, dtype=np.int32).reshape(3, 4)
    r = expr(a, b)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, a @ b)
    h = expr(a.astype(np.float16), b.astype(np.float16))
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h, (a @ b).astype(np.float16))


def test_fixed_dtype_casts_safely():
    expr = contract_expression("ij,jk->ik", (2, 3), (3, 4), dtype=np.float64)
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 4), np.int16)
    r = expr(a, b)
    assert r.dtype == np.float64 and np.all(r == 3)


def test_out_and_scalar_result():
    expr = contract_expression("i,i->", (5,), (5,))
    x = np.arange(5.0)
    assert expr(x, x) == 30.0
    out = np.zeros(())
    assert expr(x, x, out=out) is out and out == 30.0
    m = contract_expression("ij,jk->ik", (2, 2), (2, 2))
    o = np.zeros((4, 4))[::2, ::2]
    assert m(np.eye(2), np.eye(2), out=o) is o
    np.testing.assert_array_equal(o, np.eye(2))


def test_non_contiguous_inputs():
    expr = contract_expression("ij,jk->ik", (3, 4), (4, 5))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 3)).T
    b = np.asfortranarray(rng.standard_normal((4, 5)))
    np.testing.assert_allclose(expr(a, b), a @ b, rtol=1e-12)
    c = np.broadcast_to(rng.standard_normal((1, 5)), (4, 5))
    np.testing.assert_allclose(expr(a, c), a @ c, rtol=1e-12)


def test_lists_are_accepted():
    expr = contract_expression("i,i->", (2,), (2,))
    assert expr([1.0, 2.0], [3.0, 4.0]) == 11.0


def test_optimize_and_plan():
    expr = contract_expression("ab,bc,cd->ad", (2, 30), (30, 40), (40, 3),
                               optimize="optimal")
    assert len(expr.plan.steps) == 2
    with pytest.raises(KeyError):
        contract_expression("ab,bc,cd->ad", (2, 30), (30, 40), (40, 3), optimize="nope")


def test_the_numpy_backend_plans_no_gpu_schedule_unless_asked():
    import time

    from skcontract import contract_expression
    t0 = time.perf_counter()
    expr = contract_expression("ij,jk->ik", (10**6, 10**6), (10**6, 10**6))
    assert time.perf_counter() - t0 < 0.5
    assert expr.plan.steps[0].schedule is None
    shown = contract_expression("ij,jk->ik", (256, 512), (512, 128), device="h200")
    assert shown.plan.steps[0].schedule is not None


def test_an_expression_without_a_backend_plans_each_on_first_use():
    import numpy as np

    from skcontract import contract_expression
    expr = contract_expression("ij,jk->ik", (30, 20), (20, 10))
    a, b = np.ones((30, 20)), np.ones((20, 10))
    assert np.array_equal(expr(a, b), a @ b)
    assert expr.plan is expr.plan_for("numpy") and expr.plan.steps[0].schedule is None
    fixed = contract_expression("ij,jk->ik", (30, 20), (20, 10), backend="numpy",
                                device="h100")
    assert fixed.plan.steps[0].schedule is not None
    assert "H100" in repr(fixed)


def test_a_wider_out_widens_the_sums_as_in_einsum():
    expr = contract_expression("i->", (100,))
    x = np.full(100, 100, np.int8)
    out = np.zeros((), np.int64)
    assert expr(x, out=out) is out and int(out) == 10000
    assert expr(x) == np.einsum("i->", x)  # without out, int8 wraps as numpy's does


def test_a_single_operand_path_is_one_step():
    """opt_einsum reads [] as 'nothing to do': one operand's path is [(0,)], as its own."""
    path, _ = contract_path("ii->i", (3, 3), shapes=True)
    assert path == oe.contract_path("ii->i", np.eye(3))[0] == [(0,)]
    x = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(oe.contract("ii->i", x, optimize=path), np.diag(x))


def test_a_bad_mode_or_reduction_is_refused_at_once():
    with pytest.raises(ValueError, match="mode must be"):
        contract_expression("ij,jk->ik", (2, 3), (3, 4), mode="bogus")
    with pytest.raises(ValueError, match="reduction must be"):
        contract_expression("ij,jk->ik", (2, 3), (3, 4), reduction="nope")


def test_constants_are_given_once_and_the_call_takes_the_others():
    """contract_expression(constants=[...]) as opt_einsum's: the constant operands are arrays
    given at build, a call takes the others in order; results match numpy and opt_einsum."""
    import opt_einsum as oe
    rng = np.random.default_rng(4)
    w1, w2 = rng.standard_normal((5, 6)), rng.standard_normal((7, 6))
    x = rng.standard_normal((4, 5))
    expr = contract_expression("ab,bc,cd->ad", x.shape, w1, (6, 7), constants=[1])
    y = rng.standard_normal((6, 7))
    want = np.einsum("ab,bc,cd->ad", x, w1, y)
    np.testing.assert_allclose(expr(x, y), want, rtol=1e-12)
    theirs = oe.contract_expression("ab,bc,cd->ad", x.shape, w1, (6, 7), constants=[1])
    np.testing.assert_allclose(expr(x, y), theirs(x, y), rtol=1e-12)
    both = contract_expression("ab,bc,cd->ad", (4, 5), w1, w2.T, constants=[1, 2])
    np.testing.assert_allclose(both(x), np.einsum("ab,bc,cd->ad", x, w1, w2.T), rtol=1e-12)
    out = np.empty((4, 7))
    assert expr(x, y, out=out) is out and np.allclose(out, want)


def test_constants_mistakes_name_the_operand():
    w = np.ones((5, 6))
    expr = contract_expression("ab,bc->ac", (4, 5), w, constants=[1])
    with pytest.raises(ValueError, match=r"takes 1 operands \(operands \[1\] are constants"):
        expr(np.ones((4, 5)), w)
    with pytest.raises(TypeError, match="operand 1 must be given as an array"):
        contract_expression("ab,bc->ac", (4, 5), (5, 6), constants=[1])
    with pytest.raises(ValueError, match="operand 2 is out of range"):
        contract_expression("ab,bc->ac", (4, 5), w, constants=[2])
    with pytest.raises(TypeError, match="operand indices"):
        contract_expression("ab,bc->ac", (4, 5), w, constants=["1"])


def test_a_conjugated_result_sums_slices():
    """An expression whose result is a conjugated operand's (a sum of one operand) runs
    its slices as partial sums too: the conjugates' partial sums add up to the result."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 5, 6)) + 1j * rng.standard_normal((4, 5, 6))
    expr = contract_expression("ijk->k", (4, 5, 6), slicing=["i"], conj=(0,))
    assert expr.plan.conj_result and expr.plan.slicing.num_slices == 4
    want = np.conj(x).sum((0, 1))
    np.testing.assert_allclose(expr(x), want)
    parts = [expr(x, slices=[i]) for i in range(4)]
    np.testing.assert_allclose(sum(parts), want)
