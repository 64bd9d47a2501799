"""The launch a plan step carries (StepLaunch): made with the plan, shown by it, and what
the backend binds (no GPU needed to make or read one)."""
import numpy as np
import pytest

from skcontract import contract_path
from skcontract.kernels.catalogue import LAYOUT_PAIRS
from skcontract.kernels.resolve import step_operands
from skcontract.kernels.step_launch import StepLaunch
from skcontract.schedule import DeviceInfo

H200 = DeviceInfo.h200()


def _plan(subscripts, *shapes, dtype=np.float16, **kw):
    operands = [np.zeros(s, dtype) for s in shapes]
    return contract_path(subscripts, *operands, device="h200", **kw)[1]


@pytest.mark.parametrize("subscripts,shapes,dtype", [
    ("ij,jk->ik", [(512, 1024), (1024, 768)], np.float16),
    ("ij,kj->ik", [(512, 1024), (768, 1024)], np.float16),
    ("bij,bjk->bik", [(4, 256, 128), (4, 128, 64)], np.float32),
    ("ji,jk->ik", [(1000, 500), (1000, 300)], np.float64),
    ("ij,jk->ik", [(256, 256), (256, 256)], np.int8),
])
def test_a_gemm_step_carries_the_launch_of_its_schedule(subscripts, shapes, dtype):
    step = _plan(subscripts, *shapes, dtype=dtype).steps[0]
    launch = step.launch
    assert isinstance(launch, StepLaunch) and launch.form is None
    assert launch.schedule is step.schedule
    assert launch.entry.tile == tuple(step.schedule.tile)
    assert launch.spec.protocol == step.schedule.protocol
    assert launch.entry.dtype == np.dtype(dtype).name
    assert (launch.spec.a_layout, launch.spec.b_layout) in launch.entry.layouts()
    assert (launch.spec.a_layout, launch.spec.b_layout) == step_operands(step, 90)[0]
    assert launch.copies == (False, False)


def test_a_memory_bound_step_carries_its_dot_form():
    step = _plan("ij,j->i", (8192, 4096), (4096,)).steps[0]
    assert step.launch.form is not None and step.launch.entry.FAMILY == "Dot"
    assert step.launch.form.shape == "rows" and step.launch.form.outputs == 8192


@pytest.mark.parametrize("precision,subscripts,copies", [
    ("tf32", "ij,jk->ik", (False, True)),
    ("tf32", "ji,jk->ik", (True, True)),
    ("3xtf32", "ij,kj->ik", (False, False)),
])
def test_the_k_major_copies_are_part_of_the_launch(precision, subscripts, copies):
    step = _plan(subscripts, (1024, 1024), (1024, 1024), dtype=np.float32,
                 precision=precision).steps[0]
    assert step.launch.copies == copies
    if any(copies):
        assert (step.launch.spec.a_layout, step.launch.spec.b_layout) == ("row", "col")


def test_the_plan_table_shows_the_kernel_that_launches():
    plan = _plan("ij,jk->ik", (512, 1024), (1024, 768))
    assert f"kernel {plan.steps[0].launch.spec.name}" in plan.table()


def test_equal_launches_share_a_key_and_the_step_shows_its_launchs_schedule():
    a = _plan("ij,jk->ik", (512, 1024), (1024, 768)).steps[0]
    b = _plan("ik,kj->ij", (512, 1024), (1024, 768)).steps[0]
    assert a.launch == b.launch and hash(a.launch) == hash(b.launch)
    other = _plan("ij,jk->ik", (512, 2048), (2048, 768)).steps[0]
    assert a.launch != other.launch
    from dataclasses import replace
    moved = replace(a, launch=other.launch)
    assert moved.schedule is other.launch.schedule and a.schedule is a.launch.schedule
    assert replace(a, launch=None).schedule is None


def test_every_layout_pair_of_a_16_bit_gemm_launches_as_planned():
    """The launch's layouts are the views' as the kernels read them, for the four
    orientations of a product's operands."""
    for sub in ("ij,jk->ik", "ij,kj->ik", "ji,jk->ik", "ji,kj->ik"):
        launch = _plan(sub, (640, 640), (640, 640)).steps[0].launch
        assert (launch.spec.a_layout, launch.spec.b_layout) in LAYOUT_PAIRS
        assert launch.spec.a_vec > 1 and launch.spec.b_vec > 1
