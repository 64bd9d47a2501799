"""The default optimiser, 'adaptive': greedy where the contraction is too cheap to be worth
opt_einsum's 'auto' search, the cheaper of the two above; every other ``optimize=`` value
as before (explicit 'auto' exactly opt_einsum's)."""
import numpy as np
import opt_einsum
import pytest
from opt_einsum.testing import rand_equation

from skcontract import contract_expression, contract_path, einsum
from skcontract.plan import path as P

CHAIN = "ab,bc,cd,de,ef,fg->ag"
# dimensions where the greedy path (15,460 FLOPs) costs 3.4x the branch search's (4,588)
DIMS = [9, 14, 21, 19, 4, 2, 28]


def _chain(scale):
    return [(DIMS[i] * scale, DIMS[i + 1] * scale) for i in range(6)]


def _oe_path(shapes, optimize, eq=CHAIN):
    return opt_einsum.contract_path(eq, *shapes, shapes=True, optimize=optimize)[0]


def test_the_chain_paths_differ_so_the_tests_below_can_fail():
    for scale in (1, 16):
        assert _oe_path(_chain(scale), "greedy") != _oe_path(_chain(scale), "auto")


def test_a_cheap_chain_plans_with_greedy_by_default():
    shapes = _chain(1)
    greedy = _oe_path(shapes, "greedy")
    assert P.path_flops(*_terms(CHAIN, shapes), greedy) < P.ADAPTIVE_SEARCH_FLOPS
    assert contract_path(CHAIN, *shapes, shapes=True)[0] == greedy
    assert contract_path(CHAIN, *shapes, shapes=True, optimize="adaptive")[0] == greedy
    assert list(contract_expression(CHAIN, *shapes).plan.path) == greedy


def test_a_costly_chain_gets_the_branch_search_path_by_default():
    shapes = _chain(16)
    auto = _oe_path(shapes, "auto")
    assert P.path_flops(*_terms(CHAIN, shapes), _oe_path(shapes, "greedy")) >= \
        P.ADAPTIVE_SEARCH_FLOPS
    assert contract_path(CHAIN, *shapes, shapes=True)[0] == auto


@pytest.mark.parametrize("scale", [1, 16])
def test_explicit_names_are_opt_einsums(scale):
    """'auto' is opt_einsum's at any cost; True is 'greedy' (numpy's); numpy's own path
    for True is the greedy one too."""
    shapes = _chain(scale)
    for optimize in ("auto", "greedy", "optimal", "branch-2"):
        assert contract_path(CHAIN, *shapes, shapes=True, optimize=optimize)[0] == \
            _oe_path(shapes, optimize), optimize
    assert contract_path(CHAIN, *shapes, shapes=True, optimize=True)[0] == \
        _oe_path(shapes, "greedy")
    ops = [np.ones(s) for s in shapes] if scale == 1 else None
    if ops is not None:
        numpy_path = np.einsum_path(CHAIN, *ops, optimize="greedy")[0]
        assert contract_path(CHAIN, *ops, optimize=numpy_path)[0] == _oe_path(shapes, "greedy")


def test_numpy_values_of_optimize_still_work():
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in _chain(1)]
    ref = np.einsum(CHAIN, *ops)
    path = np.einsum_path(CHAIN, *ops, optimize="optimal")[0]
    for optimize in (False, True, "greedy", "optimal", path, "adaptive", "auto"):
        np.testing.assert_allclose(einsum(CHAIN, *ops, optimize=optimize), ref, rtol=1e-9,
                                   err_msg=repr(optimize))


def _terms(eq, shapes):
    inputs, output = eq.split("->")
    inputs = inputs.split(",")
    sizes = {c: d for t, s in zip(inputs, shapes) for c, d in zip(t, s)}
    return inputs, output, sizes


def _networks():
    rng = np.random.default_rng(5)
    for seed in range(60):
        n = int(rng.integers(3, 17))
        yield rand_equation(n, 3, n_out=int(rng.integers(0, 3)), d_min=2,
                            d_max=int(rng.integers(3, 10)), seed=seed)[:2]


def test_adaptive_is_greedy_below_the_threshold_and_never_costlier_than_auto_above():
    below = above = 0
    for eq, shapes in _networks():
        inputs, output, sizes = _terms(eq, shapes)
        greedy, auto = _oe_path(shapes, "greedy", eq), _oe_path(shapes, "auto", eq)
        ours = P.adaptive([frozenset(t) for t in inputs], frozenset(output), sizes)
        greedy_flops = P.path_flops(inputs, output, sizes, greedy)
        auto_flops = P.path_flops(inputs, output, sizes, auto)
        if len(inputs) not in P.AUTO_SEARCH_OPERANDS:
            assert ours == auto
        elif greedy_flops < P.ADAPTIVE_SEARCH_FLOPS:
            assert ours == greedy
            below += 1
        else:
            assert ours == (greedy if greedy_flops < auto_flops else auto)
            above += 1
    assert below and above


def test_path_flops_is_opt_einsums_count():
    for eq, shapes in _networks():
        path, info = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize="greedy")
        assert P.path_flops(*_terms(eq, shapes), path) == int(info.opt_cost), eq


def test_the_operand_counts_searched_are_those_auto_searches():
    choices = getattr(opt_einsum.paths, "_AUTO_CHOICES", None)
    if choices is None:
        pytest.skip("opt_einsum's table of 'auto' choices is not where it was")
    searched = {n for n, fn in choices.items()
                if getattr(fn, "func", fn) is opt_einsum.paths.branch}
    assert searched == set(P.AUTO_SEARCH_OPERANDS)
