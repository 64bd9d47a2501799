"""einsum steps that copy an operand whose lines miss 16 bytes: the copy's lines are padded
(skcontract.layout.copy_line), the launch the plan names reads it as it is (no second copy
onto aligned lines, no replan), and the result matches a float64 reference."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract.kernels.launch import record_launches

from .helpers import TOL

CASES = [
    # float32 at K = 47 x 47 = 2209 (>= 2048: 3xTF32 by default), lines of 8836 bytes
    ("bac,bcd->ad", [(47, 256, 47), (47, 47, 320)], "float32"),
    ("xbac,xbcd->xad", [(3, 47, 96, 47), (3, 47, 47, 128)], "float32"),
    # float16 at K = 3 x 67 = 201 (402 bytes); B copied onto lines of N = 5 x 41 = 205
    ("bac,bcd->ad", [(3, 512, 67), (3, 67, 640)], "float16"),
    ("ab,dbe->ade", [(384, 256), (5, 256, 41)], "float16"),
]


@pytest.mark.parametrize("eq,shapes,dtype", CASES)
def test_padded_copies_run_the_planned_launch(eq, shapes, dtype):
    import cupy

    from skcontract import contract_path, einsum

    rng = np.random.default_rng(len(eq))
    host = [rng.standard_normal(s) for s in shapes]
    arrays = [cupy.asarray(h.astype(dtype)) for h in host]
    _, plan = contract_path(eq, *arrays)
    (step,) = [s for s in plan.steps if s.launch is not None]
    assert any(step.needs_copy) and step.launch.aligned_copies == (False, False)
    with record_launches() as launched:
        got = einsum(eq, *arrays)
    assert [x.kernel for x in launched] == [step.launch.spec.name]
    want = np.einsum(eq, *[h.astype(dtype).astype(np.float64) for h in host])
    err = np.linalg.norm(cupy.asnumpy(got).astype(np.float64) - want) / np.linalg.norm(want)
    assert err <= TOL[dtype], (eq, dtype, err)
    assert bool((einsum(eq, *arrays) == got).all())  # warm: the same launch, the same sums


@pytest.mark.parametrize("eq,shapes", [
    ("ijb,jkb->bik", [(30, 20, 8), (20, 65, 8)]),   # both copied, the batch label last
    ("dbc,adc->cab", [(7, 7, 7), (65, 7, 7)]),
])
def test_copies_keep_the_planned_launch(eq, shapes):
    """Steps whose copies the plan names run the launch planned for them, nothing planned
    again (a copy that is a strided view, made contiguous with its padded partner, once
    took both onto lines the launch was not planned for)."""
    import cupy

    from skcontract import contract_expression

    rng = np.random.default_rng(5)
    host = [rng.standard_normal(s) for s in shapes]
    expr = contract_expression(eq, *shapes, dtype="float64")
    got = expr(*[cupy.asarray(h) for h in host])
    np.testing.assert_allclose(cupy.asnumpy(got), np.einsum(eq, *host), rtol=1e-12, atol=1e-12)
    assert "planned again" not in repr(expr), repr(expr)
