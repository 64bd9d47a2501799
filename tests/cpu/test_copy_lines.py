"""The GPU executor's operand copies on 16-byte lines (skcontract.layout): what the planner
assumes of a copied operand (its product, the launch it gets, the peak it holds) is what
the executor's copy makes. The copy itself runs here on NumPy arrays (the CuPy backend runs
the same function on CuPy's)."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract import contract_path
from skcontract.backends import numpy_backend
from skcontract.backends.steps import compile_plan, lined_copy
from skcontract.kernels.resolve import step_product
from skcontract.layout import COPY_PAD_MIN_LINE_BYTES, copy_line
from skcontract.parse import parse_equation
from skcontract.plan.plan import build_plan, executor_bytes
from skcontract.schedule import DeviceInfo

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("length,itemsize,dtype,kind,line", [
    (15625, 4, "float32", "GEMM", 15628),      # a PEPS bond of 5, six times: padded
    (125, 4, "float32", "BATCHED_GEMM", 128),
    (197, 2, "float16", "GEMM", 200),           # attention's 197 tokens
    (63, 4, "float32", "GEMM", 63),             # under COPY_PAD_MIN_LINE_BYTES
    (4096, 4, "float32", "GEMM", 4096),         # already on 16 bytes
    (15625, 4, "float32", "GEMV", 15625),       # the Dot family reads it as it lies
    (15625, 1, "int8", "GEMM", 15625),          # int8 copies K-major in its launch
    (15625, 8, "complex64", "GEMM", 15625),     # complex products embed their operands
])
def test_copy_line(length, itemsize, dtype, kind, line):
    assert copy_line(length, itemsize, dtype, kind) == line
    if line != length:
        assert line * itemsize % 16 == 0 and length * itemsize >= COPY_PAD_MIN_LINE_BYTES


@pytest.mark.parametrize("perm,shape,line", [
    ((1, 0, 3, 2), (35, 27), 28),        # rows of two axes, columns of two
    ((1, 0, 3, 2), (7, 5, 27), 32),      # with a batch axis
    ((3, 2, 1, 0), (27, 35), 36),
    ((0, 1, 2, 3), (5, 7, 27), 27),      # no padding: the reshape itself
])
def test_the_lined_copy_is_the_reshape_on_padded_lines(perm, shape, line):
    x = RNG.standard_normal((5, 7, 3, 9))
    view = x.transpose(perm)
    got = lined_copy(np)(view, shape, line)
    assert got.shape == shape and np.array_equal(got, view.reshape(shape))
    assert got.strides[-2] == line * x.itemsize and got.strides[-1] == x.itemsize
    if line != shape[-1]:
        assert not np.shares_memory(got, x)


def _pepsish():
    """``bac,bcd->ad`` (A's K labels b, c apart: copied) at K = 125 x 125 = 15625 float32:
    lines of 62,500 bytes, off 16 (B's lines of 640 on them)."""
    shapes = [(125, 625, 125), (125, 125, 640)]
    return "bac,bcd->ad", shapes


def test_a_copied_operand_is_planned_on_its_padded_lines():
    """The step copies A; its product reads A on lines of 15628 (16-byte aligned), so the
    default float32 precision runs it on 3xTF32's tensor-core kernels without another copy
    onto aligned lines; the peak model holds the padded copy."""
    eq, shapes = _pepsish()
    _, plan = contract_path(eq, *shapes, shapes=True, dtype="float32", device="h100")
    (step,) = plan.steps
    assert step.needs_copy == (True, False) and step.k == 15625
    product = step_product(step)
    assert product.vec16 == (True, True)
    assert step.launch.aligned_copies == (False, False)
    assert "3xtf32" in step.schedule.reason
    on_cpu = contract_path(eq, *shapes, shapes=True, dtype="float32")[1]
    # the GPU plan holds A's copy on padded lines: 625 rows of 15628, not 15625
    assert executor_bytes(plan) - executor_bytes(on_cpu) >= 625 * 3 * 4
    # before the schedule, the bound holds that one copy, not a padded copy of it besides
    bound = build_plan(parse_equation(eq, shapes), "float32", device=DeviceInfo.named("h100"))
    assert bound.steps[0].launch is None
    assert executor_bytes(bound) == executor_bytes(plan)


@pytest.mark.parametrize("eq,shapes", [
    ("bac,bcd->ad", [(5, 9, 25), (5, 25, 7)]),          # K = 125: lines of 128
    ("xbac,xbcd->xad", [(3, 5, 9, 25), (3, 5, 25, 7)]),  # batched
    ("abc,dcb->ad", [(6, 25, 5), (7, 5, 25)]),          # B copied too
])
def test_steps_on_padded_copies_match_numpy(eq, shapes):
    """The NumPy backend with the GPU's copies (``copy_into``): the same results."""
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    _, plan = contract_path(eq, *arrays, device="h100")
    assert any(any(s.needs_copy) for s in plan.steps)
    run = compile_plan(plan, numpy_backend.OPS._replace(copy_into=lined_copy(np)))
    want = np.einsum(eq, *[a.astype(np.float64) for a in arrays])
    np.testing.assert_allclose(run(arrays), want, rtol=1e-5, atol=1e-5)
