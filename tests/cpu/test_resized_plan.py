"""Plans of two operands re-sized for new sizes of the same size classes (plan.plan.resized,
through planning.make_plan) are the plans build_plan makes for those sizes."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract import planning, warm
from skcontract.backends.steps import resizable_run
from skcontract.contract import contract_path, einsum
from skcontract.parse import parse_equation
from skcontract.plan import build_plan
from skcontract.plan.plan import resizable, resized
from skcontract.schedule.device import DeviceInfo

# (subscripts, label sizes of the template): products of every kind, transposed operands
# and outputs, batches one operand lacks, sizes of 1 and 0, an ellipsis
EQUATIONS = [
    ("ij,jk->ik", dict(i=5, j=6, k=7)),
    ("ij,kj->ki", dict(i=5, j=6, k=7)),
    ("ji,jk->ik", dict(i=5, j=6, k=7)),
    ("bij,bjk->bik", dict(b=3, i=4, j=5, k=6)),
    ("bij,jk->bki", dict(b=3, i=4, j=5, k=6)),
    ("ij,j->i", dict(i=9, j=8)),
    ("i,i->", dict(i=11)),
    ("bi,bj->bij", dict(b=2, i=3, j=4)),
    ("ij,ij->ji", dict(i=3, j=4)),
    ("ij,jk->ik", dict(i=1, j=6, k=7)),
    ("ij,jk->ik", dict(i=5, j=0, k=7)),
    ("...ij,...jk->...ik", dict(i=3, j=4, k=5)),
]


def _shapes(subscripts, sizes, lead=(2,)):
    terms = subscripts.split("->")[0].split(",")
    return tuple(tuple(list(lead if t.startswith("...") else ()) +
                       [sizes[x] for x in t.replace("...", "")]) for t in terms)


def _same_class(sizes, rng):
    """Other sizes of each label's class (0, 1, more)."""
    return {x: d if d < 2 else int(rng.integers(2, 40)) for x, d in sizes.items()}


@pytest.mark.parametrize("subscripts,sizes", EQUATIONS)
@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_a_resized_plan_is_the_plan_of_its_sizes(subscripts, sizes, dtype):
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    template = build_plan(parse_equation(subscripts, _shapes(subscripts, sizes)), dt)
    form = resizable(template)
    assert form is not None
    for _ in range(20):
        shapes = _shapes(subscripts, _same_class(sizes, rng), lead=(int(rng.integers(2, 5)),))
        want = build_plan(parse_equation(subscripts, shapes), dt)
        got = resized(template, form, shapes)
        assert got == want and got.steps == want.steps
        assert got.equation.sizes == want.equation.sizes


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 6)]),   # three operands: a path
    ("iij,jk->ik", [(3, 3, 4), (4, 5)]),          # a diagonal first: a unary step
    ("ij,k->ik", [(3, 4), (5,)]),                 # j summed alone first
])
def test_plans_of_other_forms_are_not_resized(subscripts, shapes):
    eq = parse_equation(subscripts, shapes)
    assert resizable(build_plan(eq, np.float64)) is None


def test_einsum_and_contract_path_on_resized_plans(monkeypatch):
    monkeypatch.setattr(planning, "RESIZABLE", {})
    rng = np.random.default_rng(1)
    for i in range(30):
        m, k, n = rng.integers(2, 30, 3)
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        np.testing.assert_allclose(einsum("ij,jk->ik", a, b), a @ b, rtol=1e-12, atol=1e-12)
        _, plan = contract_path("ij,jk->ik", (m, k), (k, n), shapes=True, device="h100")
        want = build_plan(parse_equation("ij,jk->ik", ((m, k), (k, n))), np.float64,
                          device=DeviceInfo.named("h100"))
        assert plan.steps[0].problem == want.steps[0].problem == (m, n, k, 1)
    assert len(planning.RESIZABLE) == 2  # one template a device


def test_a_misfit_after_a_template_is_the_parse_error():
    einsum("ij,jk->ik", np.ones((3, 4)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="size of label 'j'"):
        einsum("ij,jk->ik", np.ones((3, 4)), np.ones((6, 5)))
    with pytest.raises(ValueError):
        contract_path("ij,jk->ik", (3, 4), (6, 5), shapes=True)


@pytest.mark.parametrize("subscripts,sizes", EQUATIONS)
def test_einsum_on_resized_plans_runs_one_run_for_every_size(subscripts, sizes, monkeypatch):
    # the first call of each new size runs the template's run for any sizes; a repeat swaps
    # it for the plan's own: both give numpy's result
    monkeypatch.setattr(planning, "RESIZABLE", {})
    monkeypatch.setattr(warm, "WARM", {})
    planning.prepare_cached.cache_clear()
    rng = np.random.default_rng(2)
    runs = set()
    for i in range(12):
        shapes = _shapes(subscripts, _same_class(sizes, rng), lead=(int(rng.integers(2, 5)),))
        ops = [rng.standard_normal(s) for s in shapes]
        want = np.einsum(subscripts, *ops)
        for _ in range(2):  # the first call, then the warm one
            np.testing.assert_allclose(einsum(subscripts, *ops), want, rtol=1e-12, atol=1e-12)
        if i:
            runs.add(id(planning.prepare("".join(subscripts), shapes, np.dtype("float64"),
                                          "adaptive", None, "numpy", None)[1]))
    kind_is_product = resizable_run(planning.make_plan(subscripts, shapes, np.dtype("float64"),
                                                        "adaptive", None, None))
    assert len(runs) == (1 if kind_is_product else 11)


def test_a_batch_one_operand_holds_is_not_re_sized(monkeypatch):
    # the broadcast batch is offered by the rows' sizes (64 or more), not their classes
    monkeypatch.setattr(planning, "RESIZABLE", {})
    for shapes in (((2, 3, 70), (3, 4)), ((3, 5, 80), (5, 6)), ((2, 3, 5), (3, 4))):
        _, plan = contract_path("bji,jk->bik", *shapes, shapes=True)
        want = build_plan(parse_equation("bji,jk->bik", shapes), np.float64)
        assert plan.steps == want.steps


def test_explicit_paths_of_other_values_are_still_refused(monkeypatch):
    monkeypatch.setattr(planning, "RESIZABLE", {})
    for n in (5, 6):
        einsum("ij,jk->ik", np.ones((n, 4)), np.ones((4, n + 1)), optimize=[(0, 1)])
    with pytest.raises(ValueError, match="path"):
        einsum("ij,jk->ik", np.ones((9, 4)), np.ones((4, 11)), optimize=((0.0, 1.0),))
    # a path of lists, as contract_path takes it
    assert contract_path("ij,jk->ik", (3, 4), (4, 5), shapes=True,
                         optimize=([0, 1],))[0] == [(0, 1)]
