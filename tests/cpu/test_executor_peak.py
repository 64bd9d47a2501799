"""The peak a sliced plan predicts (``plan.slicing.peak_bytes``, skcontract/plan/peak.py)
against what the NumPy executor allocates, measured by tracemalloc (NumPy's buffers are
traced): float32, complex64 and float16 networks at several byte budgets, an operand whose
chunk no reshape views, and a GPU complex product's real-form buffers against the
kernels' choice; and what GPU launches (and CuPy's fallbacks) hold beside a step's result,
counted by hand for small plans made without a GPU."""
from dataclasses import replace
from math import prod

import numpy as np
import pytest

from peak_helpers import warm_peak
from skcontract import contract_expression, contract_path, einsum
from skcontract.bench.networks import lattice, peps_norm
from skcontract.kernels.embed import embedding
from skcontract.kernels.resolve import step_product
from skcontract.parse import parse_equation
from skcontract.plan import build_plan, peak
from skcontract.plan.peak import EMBEDDED_KINDS, _copies, _embedded, view_copies
from skcontract.plan.plan import executor_bytes
from skcontract.plan.slicing import budget_of
from skcontract.schedule.device import DeviceInfo

OBJECTS_SLACK = 16 * 1024
"""Bytes a call holds in Python objects (array views, shapes, the slice loop's own), which
tracemalloc counts and the model does not: a few hundred bytes a live array, and these
networks hold a few dozen (docs/benchmarks/log.md)."""
SHARES = (1 / 2, 1 / 4)
"""The byte budgets tried, as shares of the unsliced plan's predicted peak."""


def _operands(net, dtype, rng):
    ops = [0.5 * rng.standard_normal(s) for s in net.shapes()]
    if np.dtype(dtype).kind == "c":
        ops = [x + 0.5j * rng.standard_normal(x.shape) for x in ops]
    return [x.astype(dtype) for x in ops]


@pytest.mark.parametrize("net,dtype", [
    (lattice(4, 4, bond=12), "float32"), (lattice(4, 4, bond=12), "float16"),
    (peps_norm(3, 3, bond=8), "float32"), (peps_norm(3, 3, bond=8), "complex64"),
    (lattice(5, 5, bond=6), "float16")], ids=lambda x: getattr(x, "name", x))
def test_the_measured_peak_keeps_the_predicted_one(net, dtype):
    """Each budget's plan is sliced, its predicted peak keeps the budget, and the peak
    tracemalloc measures keeps the prediction (float16 runs in float32 on the CPU: its
    operands' float32 copies are counted; its sums overflow float16, so only the other
    dtypes' results are compared)."""
    rng = np.random.default_rng(0)
    ops = _operands(net, dtype, rng)
    ref = einsum(net.subscripts(), *[x.astype(np.complex128) for x in ops])
    whole = executor_bytes(contract_expression(net.subscripts(), *net.shapes(),
                                               dtype=dtype).plan)
    for share in SHARES:
        limit = f"{int(whole * share)}B"
        expr = contract_expression(net.subscripts(), *net.shapes(), dtype=dtype,
                                   memory_limit=limit)
        sliced = expr.plan.slicing
        got, peak = warm_peak(expr, ops)
        assert sliced is not None and sliced.peak_bytes <= budget_of(limit, []).bytes
        assert peak <= sliced.peak_bytes + OBJECTS_SLACK, (limit, peak, sliced.peak_bytes)
        if dtype != "float16":
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_an_operand_chunk_no_reshape_views_is_counted_as_copied():
    """``n`` sliced to chunks of one lies between ``h`` and ``p``, which the step merges
    into K: the slice's view of the operand keeps ``h``'s whole stride, so its reshape
    copies it, though the step's plan (made for a contiguous slice) copies nothing."""
    shapes = [(24, 8, 24, 24), (24, 24, 16)]
    expr = contract_expression("hnpq,hpx->nqx", *shapes, slicing={"n": 1})
    plan = expr.plan
    (j, step), = [(j, s) for j, s in enumerate(plan.steps) if s.kind.name == "GEMM"]
    assert not step.needs_copy[0]
    assert (j, 0) in view_copies(plan.steps, plan.equation.inputs, plan.equation.shapes)
    rng = np.random.default_rng(1)
    ops = [rng.standard_normal(s) for s in shapes]
    got, peak = warm_peak(expr, ops)
    assert peak <= plan.slicing.peak_bytes + OBJECTS_SLACK, (peak, plan.slicing.peak_bytes)
    assert peak >= prod(step.input_shapes[0]) * 8  # the copy ran
    np.testing.assert_allclose(got, np.einsum("hnpq,hpx->nqx", *ops), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ab,bc->ac", [(30, 40), (40, 50)]),       # A row-major: B embedded
    ("ba,bc->ac", [(40, 30), (40, 50)]),       # A column-major, B row-major: A copied too
    ("ab,cb->ac", [(300, 40), (5, 40)]),       # B column-major, the smaller: A^T embedded
    ("xab,xbc->xac", [(6, 30, 7), (6, 7, 50)]),  # batched, K odd: rows padded
    ("ab,xbc->xac", [(30, 40), (6, 40, 50)]),  # A broadcast over the batch
])
def test_complex_real_form_buffers_are_those_the_kernels_choose(subscripts, shapes):
    """The real-form room the model counts for a GPU complex product is the embedded
    operand's (each element a 2 x 2 real block, rows padded to 16 bytes) and the row-major
    copy of the other where the form copies it, as :func:`~skcontract.kernels.embed.
    embedding` chooses them."""
    expr = contract_expression(subscripts, *shapes, dtype="complex64", device="h100")
    for step in expr.plan.steps:
        if step.kind not in EMBEDDED_KINDS:
            continue
        product = step_product(step)
        form = embedding(product)
        held = product.matrices
        if form.side == "B":
            want = held[1] * product.n * form.ld + (held[0] * product.m * product.k
                                                    if form.copy else 0)
        else:
            want = held[0] * product.m * form.ld
        assert _embedded(step, step.needs_copy) == want


def _beside_result(step) -> tuple[int, int]:
    """The elements the GPU model counts a step holding beside its result and its plan's
    copies: as the step is scheduled (its launch), and as the plan was sliced (no launch
    yet)."""
    unscheduled = replace(step, launch=None, unscheduled=None)
    return (_copies(0, step, True, frozenset()),
            _copies(0, unscheduled, True, frozenset()))


@pytest.mark.parametrize("subscripts,shapes,dtype,scheduled,unscheduled", [
    # float32 rows of K = 5 (20 bytes) padded to 8; the exact kernel reads them as they lie
    ("ab,bc->ac", [(6, 5), (5, 8)], "float32", 0, 6 * 8),
    # 16-bit rows of 197 tokens padded to 200 for the Wgmma kernel, each of 96 matrices
    ("bqk,bkd->bqd", [(96, 197, 197), (96, 197, 64)], "float16", 96 * 197 * 200,
     96 * 197 * 200),
    # int8: B copied K-major (the launch) or its rows of 20 padded to 32 (the larger, before
    # it is scheduled), and the int32 output beside the int8 result
    ("ij,jk->ik", [(32, 48), (48, 20)], "int8", 48 * 20 + 4 * 32 * 20,
     48 * 32 + 4 * 32 * 20),
    # a complex64 product: B embedded (50 columns of 2 x 7 reals padded to 16, each of 6
    # matrices) and A's rows of 7 pairs padded to 8
    ("xab,xbc->xac", [(6, 30, 7), (6, 7, 50)], "complex64", 6 * 50 * 16 + 6 * 30 * 8,
     6 * 50 * 16 + 6 * 30 * 8),
    # CuPy's integer matmul copies the F-contiguous B (2-D)
    ("ij,kj->ik", [(30, 20), (40, 20)], "int16", 20 * 40, 20 * 40),
    # CuPy's batched matmul: A's column-major view made contiguous, B broadcast over the
    # batch made whole
    ("akb,kc->abc", [(4, 30, 100), (30, 100)], "int32", 2 * 4 * 30 * 100,
     2 * 4 * 30 * 100),
    # a float16 sum: CuPy's float32 buffer where no Dot launch sums it
    ("ijk->i", [(30, 20, 10)], "float16", 0, 2 * 30),
    # an OUTER launch reads A as (b, i) rows: A (i, b) copied
    ("ib,bj->bij", [(30, 8), (8, 100)], "float32", 30 * 8, 30 * 8),
    # rows off 16 bytes the small-batched kernel and the Dot family read as they lie
    ("xab,xbc->xac", [(1000, 3, 5), (1000, 5, 3)], "float32", 0, 0),
    ("ij,j->i", [(100, 37), (37,)], "float16", 0, 0),
])
def test_gpu_launches_hold_what_the_model_counts(subscripts, shapes, dtype, scheduled,
                                                 unscheduled):
    """What a GPU step holds beside its result, counted by hand: the kernels' copies into
    rows on 16 bytes and K-major copies, an int8 product's int32 output, a complex
    product's real form, CuPy's matmul's contiguous copies, a float16 sum's float32
    buffer, an OUTER launch's rows; as the launch names them, and before the plan is
    scheduled the larger case."""
    _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=dtype, device="h100")
    step, = plan.steps
    assert _beside_result(step) == (scheduled, unscheduled)


def test_the_launch_names_the_copies_the_hand_counts_assume():
    """The launches behind the counts above: the float16 rows and the complex product's A
    padded, int8's B copied K-major, exact float32 reading rows of 5 as they lie."""
    def launch(subscripts, *shapes, dtype):
        _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=dtype,
                                device="h100")
        return plan.steps[0].launch
    assert launch("bqk,bkd->bqd", (96, 197, 197), (96, 197, 64),
                  dtype="float16").aligned_copies == (True, False)
    assert launch("xab,xbc->xac", (6, 30, 7), (6, 7, 50),
                  dtype="complex64").aligned_copies == (True, False)
    int8 = launch("ij,jk->ik", (32, 48), (48, 20), dtype="int8")
    assert int8.copies == (False, True) and int8.spec.dtype_out == "int32"
    exact = launch("ab,bc->ac", (6, 5), (5, 8), dtype="float32")
    assert exact.copies == exact.aligned_copies == (False, False)


def test_a_gpu_plan_s_peak_counts_its_padded_rows():
    """A float16 product sliced into chunks of 2000 rows of A, whose rows of 197 are padded
    to 200: a slice holds its result chunk and the padded chunk, beside the output summed
    in float32 and rounded (3 units of 2 bytes); a budget that holds the plan without the
    padded copy (992,000 bytes) but not with it is refused."""
    shapes = [(20000, 197), (197, 8)]
    _, plan = contract_path("ab,bc->ac", *shapes, shapes=True, dtype="float16",
                            device="h100", slicing={"a": 2000}, memory_limit="1GB")
    slice_bytes = (2000 * 8 + 2000 * 200) * 2
    output = 20000 * 8 * 3 * 2
    assert plan.slicing.peak_bytes == slice_bytes + output == executor_bytes(plan)
    with pytest.raises(ValueError, match=r"slicing \['a'\] leaves it"):
        contract_path("ab,bc->ac", *shapes, shapes=True, dtype="float16", device="h100",
                      slicing={"a": 2000}, memory_limit="1800000B")


def test_the_model_s_kernel_facts_are_the_kernels():
    """The kernels' rules the model repeats (the plan layer imports no kernel module)."""
    from skcontract.kernels import outer, relayout, small_batched
    from skcontract.kernels.catalogue import DOT_CATALOGUE, INPUT_DTYPES
    assert peak.KERNEL_DTYPES == set(INPUT_DTYPES)
    assert peak.DOT_DTYPES == set(DOT_CATALOGUE)
    assert peak.DIRECT_DTYPES == set(small_batched.TYPES) == set(outer.TYPES)
    assert peak.SMALL_COMPLEX_DTYPES == (set(small_batched.COMPLEX_TYPES)
                                         if small_batched.SINGLE_COMPLEX else set())
    assert (peak.SMALL_MAX_DIM, peak.SMALL_MIN_BATCH, peak.OUTER_MIN_ROW) == (
        small_batched.MAX_DIM, small_batched.MIN_BATCH, outer.MIN_ROW)
    assert (peak.SMALL_FOLDS, peak.SMALL_FOLD_ROWS, peak.SMALL_FOLD_MIN_ROWS) == (
        small_batched.FOLD, small_batched.FOLD_ROWS, small_batched.FOLD_MIN_ROWS)
    assert peak.ALIGNED_ROW_BYTES == relayout.VEC16
    assert peak.WIDE_OUTPUTS == {dt: np.dtype(out).itemsize
                                 for dt, out in INPUT_DTYPES.items() if out != dt}


@pytest.mark.parametrize("limit", ["64KiB", "256KiB"])
def test_a_scheduled_plan_shows_the_peak_of_its_own_launches(limit):
    """Planned, each GEMM-class step counts the larger of the copies a launch might make;
    scheduled for a device, the plan shows the copies its launches make: the same walk
    over its steps, below the planned bound on a PEPS (odd bonds: padded rows or K-major
    copies) and within the limit."""
    net = peps_norm(4, 4, 5)
    _, plan = contract_path(net.subscripts(), *net.shapes(), shapes=True, dtype=net.dtype,
                            memory_limit=limit, device="h100")
    assert plan.slicing is not None and all(s.launch is not None for s in plan.steps
                                            if s.is_gemm_class and s.unscheduled is None)
    bare = replace(plan, steps=tuple(replace(s, launch=None, unscheduled=None)
                                     for s in plan.steps))
    shown = plan.slicing.peak_bytes
    assert shown == executor_bytes(plan) < executor_bytes(bare)
    assert shown <= budget_of(limit, []).bytes
    expr = contract_expression(net.subscripts(), *net.shapes(), dtype=net.dtype,
                               memory_limit=limit, device="h100")
    assert expr.plan.slicing.peak_bytes == executor_bytes(expr.plan)


def test_a_gpu_plan_is_sliced_by_its_launches_copies_not_by_their_bound():
    """Before the schedule a step's copies are bounded by the larger a launch might make
    (K-major or padded lines); a plan made for a GPU counts them as the launches it is
    scheduled with make them. A float32 product whose A's rows (999 elements) miss 16 bytes:
    the bound holds a padded copy of A, which the exact kernel that runs it does not make;
    under 9 MB the plan made for the GPU takes half the bound's slices, its launches' peak
    under the limit. (A copy the plan names lies on 16-byte lines as the executor makes it:
    no padded copy of it is bounded.)"""
    subscripts, shapes, limit = "ij,jk->ik", [(1000, 999), (999, 1000)], "9MB"
    _, plan = contract_path(subscripts, *shapes, shapes=True, dtype="float32",
                            memory_limit=limit, device="h100")
    assert plan.steps[0].launch.aligned_copies == (False, False)
    assert executor_bytes(plan) <= budget_of(limit, []).bytes  # as the launches hold it
    eq = parse_equation(subscripts, shapes)
    bound = build_plan(eq, "float32", memory_limit=limit, device=DeviceInfo.named("h100"))
    assert bound.slicing.num_slices == 2 * plan.slicing.num_slices


def test_a_complex_matrix_vector_product_holds_no_real_form():
    """A complex GEMV runs on the Dot kernel, which reads both operands as they lie: the
    step holds its result alone, no embedded operand (twice B in padded real rows)."""
    _, plan = contract_path("j,jk->k", (512,), (512, 4096), shapes=True, dtype="complex64",
                            device="h100")
    step = plan.steps[0]
    assert step.launch.form is not None and step.launch.embed is None
    assert executor_bytes(plan) == 4096 * np.dtype(np.complex64).itemsize
