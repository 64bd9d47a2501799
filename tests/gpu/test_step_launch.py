"""A plan step's launch (StepLaunch) runs as planned: the resolver is entered when the plan
is made and never when it launches; operands laid out otherwise still compute right."""
import numpy as np
import pytest

from tests.gpu.helpers import TOL

# (subscripts, shapes, dtype, precision): a 16-bit GEMM, a batched one, a memory-bound
# product on the Dot family, K-major copies for tf32, 3xTF32 turning B in its stages, int8
CASES = [
    ("ij,jk->ik", [(1000, 1024), (1024, 768)], "float16", None),
    ("bij,bkj->bik", [(6, 256, 512), (6, 384, 512)], "float16", None),
    ("ij,j->i", [(3000, 4096), (4096,)], "float32", None),
    ("ji,jk->ik", [(512, 640), (512, 768)], "float32", "tf32"),
    ("ij,jk->ik", [(256, 4096), (4096, 3584)], "float32", "3xtf32"),
    ("ij,jk->ik", [(512, 512), (512, 640)], "float64", None),
]


def _operands(shapes, dtype, seed):
    import cupy
    rs = cupy.random.RandomState(seed)
    return [rs.standard_normal(s, dtype=cupy.float32).astype(dtype) for s in shapes]


TF32_TOL = 2e-3
"""tf32 operands keep a 10-bit mantissa: errors near 3e-4 of the product's norm."""


def _check(r, subscripts, ops, dtype, tol=None):
    import cupy
    ref = cupy.einsum(subscripts, *[x.astype(cupy.float64) for x in ops]).ravel()
    err = float(cupy.linalg.norm(r.astype(cupy.float64).ravel() - ref) / cupy.linalg.norm(ref))
    assert err <= (tol or TOL[dtype]), err


@pytest.mark.parametrize("subscripts,shapes,dtype,precision", CASES)
def test_launching_a_plan_does_not_enter_the_resolver(subscripts, shapes, dtype, precision,
                                                      monkeypatch):
    import skcontract
    from skcontract import replan
    from skcontract.kernels import bound, catalogue, gemm, resolve
    from skcontract.kernels.launch import record_launches
    expr = skcontract.contract_expression(subscripts, *shapes, dtype=dtype, backend="cupy",
                                          precision=precision)
    step = expr.plan.steps[0]
    assert step.launch is not None
    bound.clear_plans()  # the first launch compiles and uploads it here, not at planning

    def entered(*args, **kwargs):
        raise AssertionError("the launch path entered the resolver or the catalogue")
    for module, name in ((resolve, "resolve_gemm"), (resolve, "resolve_dot"),
                         (resolve, "resolve_step"), (resolve, "resolve_product"),
                         (resolve, "entry_for"), (resolve, "reads_k_major"),
                         (catalogue.offer, "entries_for"), (gemm, "resolve_product"),
                         (replan, "resolve_step")):
        monkeypatch.setattr(module, name, entered)
    ops = _operands(shapes, dtype, 7)
    with record_launches() as launches:
        first = expr(*ops)
        again = expr(*_operands(shapes, dtype, 8))
    assert launches and {x.kernel for x in launches} == {step.launch.spec.name}
    assert {x.digest for x in launches} == {step.schedule.digest()}
    _check(first, subscripts, ops, dtype, TF32_TOL if precision == "tf32" else None)
    assert again.shape == first.shape


def test_operands_laid_out_otherwise_are_planned_again_visibly():
    """A transposed view where the plan assumed a contiguous operand is not the launch's
    operand: the step is planned again for it at the plan layer, once, the result is right,
    and the expression's repr names the step, the operands and the kernel that ran."""
    import skcontract
    from skcontract.kernels.launch import record_launches
    expr = skcontract.contract_expression("ij,jk->ik", (512, 384), (384, 256),
                                          dtype="float16", backend="cupy")
    a, b = _operands([(384, 512), (384, 256)], "float16", 9)
    assert "planned again" not in repr(expr)
    with record_launches() as launches:
        r = expr(a.T, b)
        expr(a.T, b)
    _check(r, "ij,jk->ik", [a.T, b], "float16")
    shown = [line for line in repr(expr).splitlines() if "planned again" in line]
    assert len(shown) == 1, repr(expr)
    assert "step 1" in shown[0] and "A col-major" in shown[0]
    assert launches[0].kernel in shown[0] and launches[1].kernel == launches[0].kernel
    assert launches[0].kernel != expr.plan.steps[0].launch.spec.name


def test_int8_steps_launch_as_planned_and_wrap_like_numpy():
    import cupy
    import skcontract
    expr = skcontract.contract_expression("ij,jk->ik", (256, 512), (512, 384), dtype="int8",
                                          backend="cupy")
    rs = np.random.default_rng(3)
    a = rs.integers(-128, 128, (256, 512), dtype=np.int8)
    b = rs.integers(-128, 128, (512, 384), dtype=np.int8)
    r = expr(cupy.asarray(a), cupy.asarray(b))
    assert r.dtype == cupy.int8
    assert (cupy.asnumpy(r) == np.einsum("ij,jk->ik", a, b)).all()


def test_constants_stay_resident_on_the_gpu():
    """A NumPy constant of contract_expression is copied to the GPU once, at the first CuPy
    call, and reused; the result is the product's."""
    import cupy
    import skcontract
    w = np.random.default_rng(5).standard_normal((512, 384)).astype(np.float32)
    expr = skcontract.contract_expression("ab,bc->ac", (256, 512), w, constants=[1],
                                          dtype="float32")
    (x,) = _operands([(256, 512)], "float32", 11)
    first = expr(x)
    resident = expr._resident["cupy"][1]
    assert isinstance(resident, cupy.ndarray)
    second = expr(x)
    assert expr._resident["cupy"][1] is resident
    _check(first, "ab,bc->ac", [x, cupy.asarray(w)], "float32")
    assert bool((first == second).all())
