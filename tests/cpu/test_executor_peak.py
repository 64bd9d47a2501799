"""The peak a sliced plan predicts (``plan.slicing.peak_bytes``, skcontract/plan/peak.py)
against what the NumPy executor allocates, measured by tracemalloc (NumPy's buffers are
traced): float32, complex64 and float16 networks at several byte budgets, an operand whose
chunk no reshape views, and a GPU complex product's real-form buffers against the
kernels' choice."""
from math import prod

import numpy as np
import pytest

from peak_helpers import warm_peak
from skcontract import contract_expression, einsum
from skcontract.bench.networks import lattice, peps_norm
from skcontract.kernels.embed import embedding
from skcontract.kernels.resolve import step_product
from skcontract.plan.peak import EMBEDDED_KINDS, _embedded, view_copies
from skcontract.plan.plan import executor_bytes
from skcontract.plan.slicing import budget_of

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
