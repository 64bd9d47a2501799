"""A step that copies an operand anyway orders its result's labels as the step reading the
result views it (skcontract.plan.arrange, switched on here: ARRANGE waits for a GPU run):
copies go, results stay numpy's."""
import contextlib

import numpy as np
import opt_einsum
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from network_strategies import networks

import skcontract
import skcontract.plan.plan as plan_module
from skcontract import contract, contract_expression, contract_path
from skcontract.bench.networks import circuit, random_regular
from skcontract.plan import arrange
from skcontract.plan.arrange import Hint, arranged, reader_hints


SIZES = dict(zip("abcdefghijkl", (2, 3, 4, 5, 6, 7, 8, 9, 3, 4, 5, 6)))


def _copied(plan) -> int:
    """The elements a plan's pairwise steps copy."""
    return sum(int(np.prod(shape)) for s in plan.steps if len(s.inputs) == 2
               for shape, c in zip(s.input_shapes, s.needs_copy) if c)


def _forget():
    """Clear the skeletons and plans kept for reuse (made with ARRANGE as it was)."""
    plan_module._SKELETONS.clear()
    contract._PATHS.clear()


@pytest.fixture
def unarranged(monkeypatch):
    """Plans arranged (:data:`skcontract.plan.arrange.ARRANGE` on) until ``off()`` turns
    it off (the kept skeletons and plans cleared before, between and after)."""
    def off():
        monkeypatch.setattr(arrange, "ARRANGE", False)
        _forget()
    monkeypatch.setattr(arrange, "ARRANGE", True)
    _forget()
    yield off
    _forget()


def test_the_reader_views_the_result_the_first_step_was_free_to_order(unarranged):
    # 'ajb,jc' copies A (j between a and b): its result's M labels (a, b) are free, and
    # 'bd' sums b, which goes first
    shapes = [(3, 4, 5), (4, 6), (5, 7)]
    expr = skcontract.contract_expression("ajb,jc,bd->acd", *shapes,
                                          optimize=[(0, 1), (0, 1)])
    first, second = expr.plan.steps
    assert first.needs_copy == (True, False) and first.output == ("b", "a", "c")
    assert second.needs_copy == (False, False)
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(expr(*ops), np.einsum("ajb,jc,bd->acd", *ops), rtol=1e-12)
    unarranged()
    plain = skcontract.contract_expression("ajb,jc,bd->acd", *shapes,
                                           optimize=[(0, 1), (0, 1)])
    assert plain.plan.steps[0].output == ("a", "b", "c")
    assert plain.plan.steps[1].needs_copy == (False, True)


def test_a_group_read_as_it_lies_keeps_its_order():
    hint = Hint(summed=("b",), batch=())
    assert arranged((), ("a", "b"), ("c",), (False, False), hint) is None
    assert arranged((), ("a", "b"), ("c",), (True, False), hint) == (("b", "a"), ("c",))


def test_the_summed_labels_take_the_order_the_readers_other_operand_holds():
    # the reader sums (c, a) in that order: where M and N are both free, the two lie
    # together (a before c: N follows M), and the reader copies its other operand
    hint = Hint(summed=("c", "a"), batch=())
    assert arranged((), ("a", "x"), ("c",), (True, True), hint) == (("x", "a"), ("c",))
    got = arranged((), ("a", "x", "y"), (), (True, False), Hint(("y", "a"), ()))
    assert got == (("x", "y", "a"), ())


def test_hints_name_what_the_reader_sums_in_its_fixed_operands_order(unarranged):
    shapes = [(3, 4, 5), (4, 6), (5, 7)]
    expr = skcontract.contract_expression("ajb,jc,bd->acd", *shapes,
                                          optimize=[(0, 1), (0, 1)])
    forms = [plan_module._PairForm(s.args, s.result, s.inputs,
                                   (s.batch_labels, s.m_labels, s.n_labels, s.k_labels),
                                   s.output, s.needs_copy, s.layouts)
             for s in expr.plan.steps]
    hints = reader_hints(forms, plan_module._PairForm)
    assert hints == {expr.plan.steps[0].result: Hint(("b",), ())}


@pytest.mark.parametrize("subscripts,shapes,path", [
    # the last step reads lfb from a step that copies nothing (its order is fixed): a hint
    # that sorted its labels would copy lfb there
    ("lfkd,kb,lfg,gb->lfd", [(3, 4, 5, 6), (5, 7), (3, 4, 8), (8, 7)],
     [(0, 1), (0, 1), (0, 1)]),
    ("eghbg,j,gea,jlcj,lfikd,glfgh,kb->fcd",
     [tuple(SIZES[x] for x in t) for t in "eghbg j gea jlcj lfikd glfgh kb".split()],
     "greedy"),
])
def test_hints_never_copy_more(subscripts, shapes, path, unarranged):
    rng = np.random.default_rng(2)
    ops = [rng.standard_normal(s) for s in shapes]
    expr = skcontract.contract_expression(subscripts, *shapes, optimize=path)
    np.testing.assert_allclose(expr(*ops), np.einsum(subscripts, *ops), rtol=1e-10)
    copied = _copied(expr.plan)
    unarranged()
    plain = skcontract.contract_expression(subscripts, *shapes, optimize=path)
    assert copied <= _copied(plain.plan)


@pytest.mark.parametrize("net", [random_regular(40, 3, 2, seed=3), circuit(3, 3, 6)],
                         ids=lambda n: n.name)
def test_networks_copy_less_and_match_numpy(net, unarranged):
    rng = np.random.default_rng(1)
    ops = [(rng.standard_normal(s) + (1j * rng.standard_normal(s)
                                      if net.dtype.startswith("complex") else 0)) * 0.6
           for s in net.shapes()]
    dtype = ops[0].dtype
    expr = skcontract.contract_expression(net.subscripts(), *net.shapes(), dtype=dtype,
                                          optimize="greedy")
    want = opt_einsum.contract(net.subscripts(), *ops, optimize="greedy")  # past 52 labels
    np.testing.assert_allclose(expr(*ops), want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    arranged_copies = _copied(expr.plan)
    unarranged()
    plain = skcontract.contract_expression(net.subscripts(), *net.shapes(), dtype=dtype,
                                           optimize="greedy")
    assert arranged_copies < _copied(plain.plan)


@contextlib.contextmanager
def _arranging(on: bool):
    """Plans made with :data:`~skcontract.plan.arrange.ARRANGE` set to ``on`` (the kept
    skeletons and plans cleared around them)."""
    saved = arrange.ARRANGE
    arrange.ARRANGE = on
    _forget()
    try:
        yield
    finally:
        arrange.ARRANGE = saved
        _forget()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks(tensors=(4, 10)), st.sampled_from([None, 0.3]))
def test_arranged_plans_are_numpys_and_never_copy_more(net, share):
    """Random networks (diagonals, ellipsis batches, sliced under a drawn share of the
    largest intermediate): the arranged plan computes numpy's result and copies no more
    elements than the plain one (fewer on most networks of six tensors or more)."""
    eq, ops = net
    shapes, optimize = [o.shape for o in ops], "greedy"
    limit = None
    if share is not None:
        _, whole = contract_path(eq, *shapes, shapes=True, optimize=optimize)
        limit = max(1, int(whole.largest_intermediate * share))
    with _arranging(True):
        expr = contract_expression(eq, *shapes, optimize=optimize, memory_limit=limit)
        got = expr(*ops)
    with _arranging(False):
        plain = contract_expression(eq, *shapes, optimize=optimize, memory_limit=limit)
    ref = np.einsum(eq, *ops, optimize=True)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ref).max()))
    assert _copied(expr.plan) <= _copied(plain.plan)
