"""optimize='hyper': cotengra's hyper-optimiser behind the planner (an optional extra)."""
import sys

import numpy as np
import pytest
from opt_einsum.testing import rand_equation

import skcontract

pytest.importorskip("cotengra")


def _network(n, seed, d_max=4):
    eq, shapes = rand_equation(n, 3, seed=seed, d_min=2, d_max=d_max)[:2]
    rng = np.random.default_rng(seed)
    return eq, [rng.standard_normal(s) for s in shapes]


def test_hyper_matches_numpy():
    eq, ops = _network(12, 3)
    got = skcontract.einsum(eq, *ops, optimize="hyper")
    np.testing.assert_allclose(got, np.einsum(eq, *ops, optimize="greedy"), rtol=1e-10,
                               atol=1e-12)


def test_hyper_finds_a_cheaper_path_than_greedy():
    """On a 60-tensor random network a one-second search beats opt_einsum's greedy."""
    eq, ops = _network(60, 1)
    shapes = [o.shape for o in ops]
    greedy = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")[1]
    searched = skcontract.contract_path(eq, *shapes, shapes=True,
                                        optimize=skcontract.hyper(max_time=1))[1]
    assert searched.flops < greedy.flops


def test_hyper_keeps_a_memory_limit_by_slicing():
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    free = skcontract.contract_path(eq, *shapes, shapes=True, optimize="hyper")[1]
    limit = max(8, free.largest_intermediate // 8)
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize="hyper",
                                    memory_limit=limit)[1]
    assert plan.slicing is not None and plan.largest_intermediate <= limit
    got = skcontract.einsum(eq, *ops, optimize="hyper", memory_limit=limit)
    np.testing.assert_allclose(got, np.einsum(eq, *ops, optimize="greedy"), rtol=1e-10,
                               atol=1e-12)


def test_without_cotengra_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cotengra", None)  # import cotengra raises ImportError
    with pytest.raises(ImportError, match=r"skcontract\[hyper\]"):
        skcontract.contract_path("ij,jk,kl->il", (2, 3), (3, 4), (4, 5), shapes=True,
                                 optimize="hyper")
