"""optimize='hyper': cotengra's hyper-optimiser behind the planner (an optional extra)."""
import sys
import time

import numpy as np
import pytest
from opt_einsum.testing import rand_equation

import skcontract
from skcontract.plan import path as path_module

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


def test_a_limit_under_hyper_keeps_the_cheaper_of_both_slicings(monkeypatch):
    """Under a memory limit, 'hyper' plans the path sliced after the search and cotengra's
    search that slices as it goes, and keeps the one of fewer FLOPs that fits; a search
    whose slices miss a byte budget is run again aiming lower."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    free = skcontract.contract_path(eq, *shapes, shapes=True, optimize="hyper")[1]
    limit = max(8, free.largest_intermediate // 8)
    calls = []

    def fake(result):
        def search(optimize, inputs, output, sizes, target, seconds=None):
            calls.append(target)
            return result(inputs, sizes)
        return search

    def everything_sliced(inputs, sizes):  # a left-to-right path, every label sliced
        return [(0, 1)] * (len(inputs) - 1), tuple(sizes)
    monkeypatch.setattr(plan_module, "sliced_search", fake(everything_sliced))
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.2),
                                    memory_limit=limit)[1]
    assert calls == [limit]  # an element budget is the target itself
    n, labels = len(shapes), set(eq.split("->")[0]) - {","}
    fake_plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=[(0, 1)] * (n - 1),
                                         slicing=sorted(labels))[1]
    assert plan.slicing.flops <= fake_plan.slicing.flops  # never the dearer of the two
    assert plan.largest_intermediate <= limit
    np.testing.assert_allclose(skcontract.einsum(eq, *ops, optimize=skcontract.hyper(0.2),
                                                 memory_limit=limit),
                               np.einsum(eq, *ops, optimize="greedy"), rtol=1e-9, atol=1e-12)

    calls.clear()
    monkeypatch.setattr(plan_module, "sliced_search", fake(lambda i, s: ([(0, 1)] * (len(i) - 1),
                                                                         ())))
    skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.2),
                             memory_limit=limit)
    assert len(calls) == 1  # nothing sliced: the search's answer is not a sliced plan


def test_reconfigured_slices_keep_their_target():
    """cotengra's slicing of a given path's tree, its subtrees reconfigured, returns a path
    of the network and labels whose slices hold no intermediate above the target."""
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    free = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")[1]
    target = max(8, free.largest_intermediate // 8)
    inputs = eq.split("->")[0].split(",")
    sizes = {x: d for t, s in zip(inputs, shapes) for x, d in zip(t, s)}
    path, labels = path_module.reconfigured_slices(inputs, eq.split("->")[1], sizes,
                                                   free.path, target)
    assert labels and set(labels) <= set(sizes)
    sliced = skcontract.contract_path(eq, *shapes, shapes=True, optimize=path,
                                      slicing=list(labels))[1]
    assert sliced.largest_intermediate <= target
    np.testing.assert_allclose(skcontract.einsum(eq, *ops, optimize=path, slicing=list(labels)),
                               np.einsum(eq, *ops, optimize="greedy"), rtol=1e-9, atol=1e-12)


def test_a_limit_under_hyper_weighs_the_first_paths_reconfigured_slices(monkeypatch):
    """Under a limit that slices, 'hyper' also has cotengra slice the first path's tree
    and reconfigure it (before the sliced search), and keeps the cheapest plan that fits:
    never dearer than that candidate."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    free = skcontract.contract_path(eq, *shapes, shapes=True, optimize="hyper")[1]
    limit = max(8, free.largest_intermediate // 8)
    found = []

    def recording(inputs, output, sizes, path, target):
        found.append(path_module.reconfigured_slices(inputs, output, sizes, path, target))
        return found[-1]
    monkeypatch.setattr(plan_module, "reconfigured_slices", recording)
    monkeypatch.setattr(plan_module, "sliced_search", lambda *a, **k: None)
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.2),
                                    memory_limit=limit)[1]
    assert len(found) == 1
    path, labels = found[0]
    candidate = skcontract.contract_path(eq, *shapes, shapes=True, optimize=path,
                                         memory_limit=limit, slicing=list(labels))[1]
    assert plan.slicing.flops <= candidate.slicing.flops
    assert plan.largest_intermediate <= limit


def test_a_retry_under_a_tighter_budget_weighs_the_reconfigured_slices_without_a_search(
        monkeypatch):
    """A plan sliced again because its steps' copies push it over the budget (no search:
    ``reconfigure=False``) still has cotengra slice its path's tree with reconfiguration,
    a second's work, and never runs the sliced search, which takes seconds; on networks of
    more than RECONFIGURE_MAX_TERMS operands it slices greedily only."""
    from skcontract.parse import parse_equation
    from skcontract.plan import plan as plan_module
    from skcontract.plan.slicing import Budget
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    free = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")[1]
    parsed = parse_equation(eq, shapes)
    budget = Budget(elements=max(8, free.largest_intermediate // 8))
    calls = []
    monkeypatch.setattr(plan_module, "sliced_search",
                        lambda *a, **k: calls.append("search"))
    real = plan_module.reconfigured_slices
    monkeypatch.setattr(plan_module, "reconfigured_slices",
                        lambda *a: calls.append("reconfigured") or real(*a))
    sliced, path = plan_module._sliced(parsed.inputs, parsed, free.path, budget, np.float64,
                                       None, True, skcontract.hyper(0.2), reconfigure=False)
    assert calls == ["reconfigured"]
    assert sliced is not None and sliced.largest_intermediate <= budget.elements
    plan_module._sliced(parsed.inputs, parsed, free.path, budget, np.float64, None, True,
                        skcontract.hyper(0.2))
    assert calls == ["reconfigured", "reconfigured", "search"]
    # past RECONFIGURE_MAX_TERMS operands a retry slices greedily only, and the first try
    # runs the search alone
    monkeypatch.setattr(plan_module, "RECONFIGURE_MAX_TERMS", len(shapes) - 1)
    plan_module._sliced(parsed.inputs, parsed, free.path, budget, np.float64, None, True,
                        skcontract.hyper(0.2), reconfigure=False)
    assert calls == ["reconfigured", "reconfigured", "search"]
    plan_module._sliced(parsed.inputs, parsed, free.path, budget, np.float64, None, True,
                        skcontract.hyper(0.2))
    assert calls == ["reconfigured", "reconfigured", "search", "search"]


class _SlowSearch:
    """A stand-in for cotengra's HyperOptimizer: each search runs one trial of ``trial_s``
    on the pool it is given, as cotengra's trials run there, and keeps its tree."""

    def __init__(self, trial_s, best=None):
        self.parallel, self.max_time, self.trial_s = "auto", 60.0, trial_s
        self.best = {} if best is None else {"tree": best}
        self.pools = []

    def search(self, inputs, output, sizes):
        self.pools.append(self.parallel)
        self.parallel.submit(time.sleep, self.trial_s).result()
        self.best = {"tree": "found"}


TERMS = ([("i", "j"), ("j", "k")], ("i", "k"), {"i": 2, "j": 3, "k": 4})


def test_a_timed_search_ends_its_running_trials_when_the_time_is_up():
    """cotengra checks its time only as trials finish; where a trial has found a tree, the
    search's own pool is stopped at the time, the trial still running included, and the
    optimiser's settings are restored."""
    from concurrent.futures import ProcessPoolExecutor

    opt = _SlowSearch(trial_s=60, best="earlier")
    t0 = time.monotonic()
    assert path_module.timed_search(opt, *TERMS, seconds=0.5) == "earlier"
    assert time.monotonic() - t0 < 10
    assert isinstance(opt.pools[0], ProcessPoolExecutor)
    assert (opt.parallel, opt.max_time) == ("auto", 60.0)


def test_a_timed_search_without_a_tree_at_the_time_waits_for_its_first_trial():
    opt = _SlowSearch(trial_s=1.0)
    t0 = time.monotonic()
    assert path_module.timed_search(opt, *TERMS, seconds=0.1) == "found"
    assert time.monotonic() - t0 >= 1.0


def test_a_search_with_no_trial_in_time_leaves_the_greedy_path(monkeypatch):
    monkeypatch.setattr(path_module, "timed_search", lambda *a, **k: None)
    eq, ops = _network(12, 3)
    shapes = [o.shape for o in ops]
    greedy = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")[0]
    assert skcontract.contract_path(eq, *shapes, shapes=True,
                                    optimize=skcontract.hyper(0.2))[0] == greedy


def test_max_time_bounds_the_whole_search_under_a_limit(monkeypatch):
    """Under a limit that may call for slices, the unsliced search takes a share of
    max_time and the search that slices as it goes what is left of it."""
    from skcontract.plan import plan as plan_module
    asked = {}
    find_path = plan_module.find_path

    def unsliced(*args, **kwargs):
        if not path_module.is_hyper(args[3]):  # the default optimiser's plan, a candidate
            return find_path(*args, **kwargs)
        asked["unsliced"] = args[4] if len(args) > 4 else kwargs.get("seconds")
        asked["start"] = time.monotonic()
        return find_path(*args, **kwargs)

    def sliced(optimize, inputs, output, sizes, target, seconds=None):
        asked["sliced"], asked["at"] = seconds, time.monotonic()
        return None
    monkeypatch.setattr(plan_module, "find_path", unsliced)
    monkeypatch.setattr(plan_module, "sliced_search", sliced)
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(2.0),
                             memory_limit=64)
    assert asked["unsliced"] == pytest.approx(2.0 * path_module.HYPER_UNSLICED_SHARE)
    assert 0 < asked["sliced"] <= 2.0 - (asked["at"] - asked["start"]) + 0.01  # what is left
    asked.clear()
    skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(2.0))
    assert asked["unsliced"] == 2.0 and "sliced" not in asked  # no limit: the whole time


@pytest.mark.parametrize("memory_limit", [None, 64, "1GiB"])
def test_a_hyper_plan_costs_no_more_than_the_default_optimisers(monkeypatch, memory_limit):
    """A search of few trials may find a far costlier path than the default optimiser's;
    the default's plan, sliced and repathed as its own plans are, is kept then."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(14, 5, d_max=6)
    shapes = [o.shape for o in ops]
    n = len(shapes)
    default = skcontract.contract_path(eq, *shapes, shapes=True, memory_limit=memory_limit)[1]
    find_path = plan_module.find_path
    monkeypatch.setattr(plan_module, "find_path", lambda *a, **k: [(0, 1)] * (n - 1)
                        if path_module.is_hyper(a[3]) else find_path(*a, **k))
    monkeypatch.setattr(plan_module, "sliced_search", lambda *a, **k: None)
    bad = skcontract.contract_path(eq, *shapes, shapes=True, optimize=[(0, 1)] * (n - 1),
                                   memory_limit=memory_limit)[1]
    # max_time bounds the default plan's repaths (half of it, HYPER_DEFAULT_SHARE): enough
    # for them to finish on a loaded machine, as the default's own plan does unbounded
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(5.0),
                                    memory_limit=memory_limit)[1]
    flops = [p.flops if p.slicing is None else p.slicing.flops for p in (default, bad, plan)]
    assert flops[0] < flops[1]  # the searched path is the costlier one
    assert flops[2] <= flops[0]
    ops_out = skcontract.einsum(eq, *ops, optimize=plan.path)
    np.testing.assert_allclose(ops_out, np.einsum(eq, *ops, optimize=True), rtol=1e-10)


def test_under_a_limit_the_first_path_keeps_the_sliced_search_still_runs(monkeypatch):
    """A limit the first path keeps whole (a safety net) does not cut the search short: the
    rest of the time goes to the search that slices as it goes, and its path, unsliced
    too, is kept where it costs fewer FLOPs."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(12, 3)
    shapes = [o.shape for o in ops]
    n = len(shapes)
    greedy = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")
    worse = skcontract.contract_path(eq, *shapes, shapes=True, optimize=[(0, 1)] * (n - 1))
    assert greedy[1].flops < worse[1].flops
    monkeypatch.setattr(plan_module, "find_path", lambda *a, **k: [(0, 1)] * (n - 1))
    asked = []

    def sliced(optimize, inputs, output, sizes, target, seconds=None):
        asked.append(seconds)
        return greedy[0], ()
    monkeypatch.setattr(plan_module, "sliced_search", sliced)
    path, plan = skcontract.contract_path(eq, *shapes, shapes=True,
                                          optimize=skcontract.hyper(2.0), memory_limit="1GiB")
    assert len(asked) == 1 and 0 < asked[0] <= 2.0
    assert plan.slicing is None and [tuple(p) for p in path] == [tuple(p) for p in greedy[0]]


@pytest.mark.parametrize("first_cheaper", [True, False])
def test_the_first_path_is_fitted_too_where_the_sliced_search_gives_the_path(monkeypatch,
                                                                              first_cheaper):
    """The two searches' plans are compared before the retries that count the steps'
    copies: where the sliced search's path is kept, the first path is fitted too (without
    the searches) and the plan of fewer FLOPs kept."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(10, 4)
    shapes = [o.shape for o in ops]
    n = len(shapes)
    cheap = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")[1]
    dear = skcontract.contract_path(eq, *shapes, shapes=True, optimize=[(0, 1)] * (n - 1))[1]
    assert cheap.flops < dear.flops and cheap.path != dear.path
    searched, first = (dear, cheap) if first_cheaper else (cheap, dear)
    calls = []

    def fitted(eq_, dtype, unary, path, fit, optimize, deadline=None, search=True,
               repath_until=None):
        calls.append(search)
        return searched if search else first
    monkeypatch.setattr(plan_module, "_fitted", fitted)
    monkeypatch.setattr(plan_module, "_default_plan", lambda *a, **k: None)  # _kept's alone
    monkeypatch.setattr(plan_module, "find_path", lambda *a, **k: list(first.path))
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.2),
                                    memory_limit="1GiB")[1]
    assert calls == [True, False]
    assert plan is cheap


def test_a_sliced_search_runs_to_its_first_trial_when_the_unsliced_one_took_the_time(
        monkeypatch):
    """On hundreds of tensors one trial may outlast max_time: where the first path must be
    sliced and no time is left, the search that slices as it goes still runs (0 s: to its
    first trial), and its path is kept where cheaper; where the first path fits whole, it
    does not run."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(12, 3)
    shapes = [o.shape for o in ops]
    n = len(shapes)
    greedy = skcontract.contract_path(eq, *shapes, shapes=True, optimize="greedy")
    find_path = plan_module.find_path

    def slow(*a, **k):  # the unsliced search overruns its time; the default's does not
        if path_module.is_hyper(a[3]):
            time.sleep(0.3)
            return [(0, 1)] * (n - 1)
        return find_path(*a, **k)
    asked = []

    def sliced(optimize, inputs, output, sizes, target, seconds=None):
        asked.append(seconds)
        return greedy[0], ()
    monkeypatch.setattr(plan_module, "find_path", slow)
    monkeypatch.setattr(plan_module, "sliced_search", sliced)
    monkeypatch.setattr(plan_module, "_default_plan", lambda *a, **k: None)  # the search's
    skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.1),
                             memory_limit=64)
    assert asked == [0.0]
    asked.clear()
    skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.1),
                             memory_limit="1GiB")
    assert asked == []


def test_a_search_for_another_objective_keeps_its_own_plan(monkeypatch):
    """The default optimiser's plan is a candidate only where the search minimises FLOPs:
    a search asked to minimise the largest intermediate keeps its path even where the
    default's costs fewer FLOPs."""
    from skcontract.plan import plan as plan_module
    eq, shapes = "ebf,cda,fcd,be->a", [(3, 3, 32), (32, 16, 2), (32, 32, 16), (3, 3)]
    small = [(1, 2), (0, 2), (0, 1)]
    default = skcontract.contract_path(eq, *shapes, shapes=True)[1]
    searched = skcontract.contract_path(eq, *shapes, shapes=True, optimize=small)[1]
    assert default.flops < searched.flops
    assert default.largest_intermediate > searched.largest_intermediate
    find_path = plan_module.find_path
    monkeypatch.setattr(plan_module, "find_path", lambda *a, **k: small
                        if path_module.is_hyper(a[3]) else find_path(*a, **k))
    by_size = skcontract.hyper(0.2, minimize="size", parallel=False)
    assert not path_module.minimizes_flops(by_size)
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=by_size)[1]
    assert [tuple(p) for p in plan.path] == small
    by_flops = skcontract.hyper(0.2, parallel=False)
    assert path_module.minimizes_flops(by_flops) and path_module.minimizes_flops("hyper")
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=by_flops)[1]
    assert plan.flops == default.flops


def test_where_the_searched_path_cannot_keep_the_limit_the_defaults_plan_may(monkeypatch):
    """A searched path no slicing keeps under the limit is not the end: the default's
    plan is kept where it fits, and the refusal stands where neither does."""
    from skcontract.plan import plan as plan_module
    eq, ops = _network(12, 3)
    shapes = [o.shape for o in ops]
    kept = plan_module._kept

    def refusing(eq_, dtype, unary, path, fit, optimize, deadline=None, repath_until=None):
        if path_module.is_hyper(optimize):
            raise ValueError("memory_limit 64: the searched path does not fit")
        return kept(eq_, dtype, unary, path, fit, optimize, deadline, repath_until)
    monkeypatch.setattr(plan_module, "_kept", refusing)
    plan = skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.2),
                                    memory_limit=64)[1]
    default = skcontract.contract_path(eq, *shapes, shapes=True, memory_limit=64)[1]
    assert plan.path == default.path
    monkeypatch.setattr(plan_module, "_default_plan", lambda *a, **k: None)
    with pytest.raises(ValueError, match="searched path does not fit"):
        skcontract.contract_path(eq, *shapes, shapes=True, optimize=skcontract.hyper(0.2),
                                 memory_limit=64)
