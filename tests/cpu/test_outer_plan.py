"""OUTER steps planned for the outer-product kernel (skcontract/kernels/outer.py): the plan
carries and prints the launch where the kernel takes the step, and says nothing launches
where it does not (the GPU tests run it: tests/gpu/test_outer.py)."""
import numpy as np
import pytest

import skcontract
from skcontract.kernels.outer import MIN_ROW, OuterLaunch, plan_outer


def _step(subscripts, shapes, dtype, **kw):
    ops = [np.zeros(s, dtype) for s in shapes]
    _, plan = skcontract.contract_path(subscripts, *ops, **kw)
    return plan, plan.steps[0]


@pytest.mark.parametrize("subscripts,shapes,dtype,vec", [
    ("i,j->ij", [(4096,), (16384,)], np.float32, 4),
    ("bi,bj->bij", [(64, 512), (64, 512)], np.float16, 8),
    ("i,j->ij", [(300,), (333,)], np.float64, 1),       # rows off 16 bytes: element stores
    ("ab,cd->abcd", [(3, 4), (8, 16)], np.float32, 4)])
def test_an_outer_step_carries_its_launch(subscripts, shapes, dtype, vec):
    plan, step = _step(subscripts, shapes, dtype, device="h100")
    launch = step.launch
    assert isinstance(launch, OuterLaunch) and launch.vec == vec
    assert (launch.batch, launch.m, launch.n) == (step.batch, step.m, step.n)
    assert launch.summary() in str(plan)


@pytest.mark.parametrize("subscripts,shapes,dtype", [
    ("i,j->ij", [(4096,), (MIN_ROW - 1,)], np.float32),   # short rows
    ("i,j->ij", [(4096,), (4096,)], np.int32),            # no kernel for the dtype
    ("i,j->ij", [(4096,), (4096,)], np.complex64)])
def test_outer_steps_the_kernel_does_not_take(subscripts, shapes, dtype):
    _, step = _step(subscripts, shapes, dtype, device="h100")
    assert step.launch is None


def test_no_device_no_launch():
    _, step = _step("i,j->ij", [(4096,), (4096,)], np.float32)
    assert step.launch is None


def test_the_kernel_s_index_stays_32_bits():
    assert plan_outer("float32", 1, 2**20, 2**13) is None
    assert plan_outer("float32", 1, 2**16, 2**13) is not None


def test_numpy_runs_outer_steps_as_before():
    """A plan made for a device, run on NumPy operands: the broadcast multiply."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(100), rng.standard_normal(200)
    expr = skcontract.contract_expression("i,j->ij", x.shape, y.shape, device="h100")
    np.testing.assert_array_equal(expr(x, y), np.multiply.outer(x, y))
