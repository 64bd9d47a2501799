"""Contraction order: opt_einsum's optimisers, or a path the caller gives.

A path is opt_einsum's: a list of tuples of positions into the list of operands still
alive; each step removes those operands and appends their contraction at the end.

>>> find_path([('i', 'j'), ('j', 'k'), ('k', 'l')], ('i', 'l'), dict(i=2, j=50, k=50, l=2),
...           optimize=False)
[(0, 1), (0, 1)]
>>> find_path([('i', 'j'), ('j', 'k')], ('i', 'k'), dict(i=2, j=3, k=4),
...           optimize=['einsum_path', (0, 1)])
[(0, 1)]

The default optimiser is ``'adaptive'`` (:func:`adaptive`): numpy's greedy path where it is
cheap, opt_einsum's ``'auto'`` search where the contraction is worth it.
"""
from __future__ import annotations

import importlib.util
import operator
import os
import threading
from concurrent.futures import BrokenExecutor, CancelledError, ProcessPoolExecutor
from typing import Any, Mapping, Sequence

from opt_einsum import paths as _oe_paths

__all__ = ["find_path", "validate_path", "left_to_right", "hyper", "adaptive", "path_flops",
           "minimizes_flops", "reconfigured_slices"]

HYPER = "hyper"
"""The ``optimize=`` name of cotengra's hyper-optimiser with :func:`hyper`'s defaults."""
HYPER_SECONDS = 5.0
"""How long ``optimize='hyper'`` searches at most (cotengra's ``max_time``); it stops sooner
after cotengra's default number of trials, which small networks reach in well under that."""


def hyper(max_time: float = HYPER_SECONDS, **options):
    """cotengra's hyper-optimiser as an ``optimize=`` value: it samples greedy and
    graph-partitioning paths (kahypar's where installed, else cotengra's label propagation)
    for up to ``max_time`` seconds and keeps the cheapest. ``options`` go to
    ``cotengra.HyperOptimizer`` (e.g. ``max_repeats=``, ``minimize=``). ImportError where
    cotengra is not installed (``pip install 'skcontract[hyper]'``, which also brings
    cotengrust, whose compiled path finders cotengra runs its trials on where installed).

    ``optimize="hyper"`` is ``hyper()``. A memory limit is kept by slicing the path the
    search finds, as for every optimiser; the default optimiser's plan is kept instead
    where it costs fewer FLOPs."""
    try:
        import cotengra  # optional dependency: the hyper-optimiser's extra
    except ImportError:
        raise ImportError("optimize='hyper' needs cotengra: pip install 'skcontract[hyper]' "
                          "(or pip install cotengra)") from None
    options.setdefault("methods", ("greedy", "kahypar") if importlib.util.find_spec("kahypar")
                       else ("greedy", "labels"))
    options.setdefault("progbar", False)
    return cotengra.HyperOptimizer(max_time=max_time, **options)


ADAPTIVE = "adaptive"
"""The ``optimize=`` name of :func:`adaptive`, the default optimiser."""
ADAPTIVE_SEARCH_FLOPS = 1 << 20
"""The FLOP count (opt_einsum's, :func:`path_flops`) of the greedy path below which
:func:`adaptive` keeps it without running opt_einsum's ``'auto'`` search.

The reasoning: a better path can save at most the greedy path's whole cost, and a
contraction runs at about 1 GFLOP/s or faster on the CPU even when its operands are tiny
(a conservative rate: BLAS and numpy's loops run well above it at any size worth a path
search), so a contraction of F FLOPs can gain at most about F nanoseconds from a search.
opt_einsum's 'auto' search for 5 to 14 operands (a branch-and-bound search, in Python)
takes at most about as long as 2**20 FLOPs do at that rate on the networks that reach it
(evidence: docs/benchmarks/planning-cpu.md): below the threshold the search costs more
than it could save; above it, it runs, and the cheaper of its path and greedy's is kept.
The threshold is the
same on every device: a GPU runs faster, but a contraction this small is bound by its
launches there, not its FLOPs."""
AUTO_SEARCH_OPERANDS = range(5, 15)
"""The operand counts for which opt_einsum's ``'auto'`` runs a branch search (``'branch-all'``
for 5-6, ``'branch-2'`` for 7-8, ``'branch-1'`` for 9-14). With fewer, 'auto' is the
exhaustive ``'optimal'`` search, which costs about what the greedy one does for up to 4
operands; with more, 'auto' is the greedy search itself: :func:`adaptive` is 'auto' for
both."""


def path_flops(inputs: Sequence[Sequence[str]], output: Sequence[str],
               sizes: Mapping[str, int], path: Sequence[Sequence[int]]) -> int:
    """The FLOP count of ``path`` as ``opt_einsum.contract_path`` reports it (its
    ``opt_cost``): each step's product of the sizes of all its labels, times its number of
    operands less one (at least one), plus one where the step sums a label away.

    >>> path_flops([('i', 'j'), ('j', 'k')], ('i', 'k'), dict(i=2, j=3, k=4), [(0, 1)])
    48
    """
    terms = [frozenset(t) for t in inputs]
    out = frozenset(output)
    total = 0
    for step in path:
        picked = [terms[i] for i in step]
        for i in sorted(step, reverse=True):
            del terms[i]
        labels = frozenset().union(*picked)
        result = labels & out.union(*terms)
        size = 1
        for x in labels:
            size *= sizes[x]
        total += size * (max(1, len(step) - 1) + (len(result) < len(labels)))
        terms.append(result)
    return total


def adaptive(inputs, output, size_dict, memory_limit=None) -> list[tuple[int, ...]]:
    """The default optimiser (``optimize='adaptive'``): a search that spends no more than
    the contraction is worth. For 5 to 14 operands (:data:`AUTO_SEARCH_OPERANDS`) it finds
    the greedy path (numpy's, ``optimize=True``) first and keeps it where its FLOP count is
    below :data:`ADAPTIVE_SEARCH_FLOPS`; otherwise it runs opt_einsum's ``'auto'`` search as
    well and keeps the path of fewer FLOPs (opt_einsum's on a tie). For other operand
    counts it is opt_einsum's ``'auto'``. So the path of every contraction above the
    threshold is opt_einsum's 'auto' one or a cheaper one, and below it the greedy one.

    Its arguments are an opt_einsum path function's (it can be given as ``optimize=``
    itself)."""
    if len(inputs) not in AUTO_SEARCH_OPERANDS:
        return _oe_paths.auto(inputs, output, size_dict, memory_limit)
    greedy = _oe_paths.greedy(inputs, output, size_dict, memory_limit)
    greedy_flops = path_flops(inputs, output, size_dict, greedy)
    if greedy_flops < ADAPTIVE_SEARCH_FLOPS:
        return greedy
    searched = _oe_paths.auto(inputs, output, size_dict, memory_limit)
    if list(searched) != list(greedy) and \
            greedy_flops < path_flops(inputs, output, size_dict, searched):
        return greedy
    return searched


def left_to_right(n: int) -> list[tuple[int, ...]]:
    """The path that contracts operand 0 with 1, the result with 2, and so on."""
    # opt_einsum appends each result at the end, so after the first step the running
    # result is always the last operand and the next original operand is at position 0.
    if n <= 1:
        return []
    return [(0, 1)] + [(0, n - 2 - i) for i in range(n - 2)]


def validate_path(path: Sequence[Any], n: int) -> list[tuple[int, ...]]:
    """Check an explicit path over ``n`` operands; raise ValueError naming the bad step."""
    steps = list(path)
    if steps and isinstance(steps[0], str):
        if steps[0] != "einsum_path":
            raise ValueError(f"an explicit path must start with 'einsum_path' or be a list of "
                             f"tuples; got {steps[0]!r} as its first element")
        steps = steps[1:]
    alive = n
    out = []
    for s, step in enumerate(steps):
        try:
            ids = tuple(operator.index(i) for i in step)
            if any(isinstance(i, bool) for i in step):
                raise TypeError
        except TypeError:
            raise ValueError(f"invalid contraction path: step {s} ({step!r}) is not a tuple "
                             "of operand positions") from None
        if not ids:
            raise ValueError(f"invalid contraction path: step {s} is empty")
        if len(set(ids)) != len(ids):
            raise ValueError(f"invalid contraction path: step {s} {ids} names an operand "
                             "twice")
        bad = [i for i in ids if not 0 <= i < alive]
        if bad:
            raise ValueError(f"invalid contraction path: step {s} {ids} refers to operand "
                             f"{bad[0]}, but only {alive} operand(s) remain at that step")
        alive -= len(ids) - 1
        out.append(ids)
    if alive != 1:
        raise ValueError(f"invalid contraction path: after its {len(out)} step(s) {alive} "
                         "operands remain uncontracted (a path must end with one)")
    return out


RECONF_TARGET_SHARE = 4
"""A byte budget's share the largest intermediate of cotengra's sliced search aims at (a
quarter: the peak holds a step's operands and result, and the results kept across
slices)."""


def is_hyper(optimize: Any) -> bool:
    """Whether ``optimize`` asks for cotengra's hyper-optimiser ('hyper' or one of its
    optimisers)."""
    if isinstance(optimize, str):
        return optimize == HYPER
    return type(optimize).__module__.split(".")[0] == "cotengra"


RECONF_STEP = 4
"""The size reduction (a factor) each round of the sliced search's slicing reaches before it
reconfigures the tree (cotengra's ``step_size``, 2 by default): fewer rounds a trial."""
RECONF_SUBTREE = 6
"""The subtrees the sliced search reconfigures (cotengra's ``subtree_size``, 8 by default):
smaller ones make a round cheaper."""


def sliced_search(optimize: Any, inputs: Sequence[Sequence[str]], output: Sequence[str],
                  sizes: Mapping[str, int], target_size: int, seconds: float | None = None):
    """cotengra's hyper-search with slicing and reconfiguration (``slicing_reconf_opts``)
    to a largest intermediate of ``target_size`` elements, for ``seconds`` (None: as long
    as ``optimize``, :func:`hyper`'s or a cotengra optimiser's ``max_time``, searches):
    ``(path, sliced labels)``; None where no trial finished in time."""
    if seconds is None:
        seconds = search_seconds(optimize) or HYPER_SECONDS
    opt = hyper(max_time=seconds, slicing_reconf_opts={
        "target_size": int(target_size), "step_size": RECONF_STEP,
        "reconf_opts": {"subtree_size": RECONF_SUBTREE}})
    tree = timed_search(opt, inputs, output, sizes, seconds)
    if tree is None:
        return None
    return validate_path(tree.get_path(), len(inputs)), tuple(tree.sliced_inds)


def reconfigured_slices(inputs: Sequence[Sequence[str]], output: Sequence[str],
                        sizes: Mapping[str, int], path: Sequence[Sequence[int]],
                        target_size: int):
    """The tree of ``path`` sliced by cotengra to a largest intermediate of ``target_size``
    elements, its subtrees reconfigured after each round of slices
    (``ContractionTree.slice_and_reconfigure``, the rounds the sliced search's trials run):
    ``(path, sliced labels)``. One trial's work on one tree, not a search: about a second
    on the random regular graph of 250 tensors, where a trial of the sliced search, which
    also builds its tree, takes two to three."""
    import cotengra  # optional dependency (the hyper extra): only hyper plans come here
    tree = cotengra.ContractionTree.from_path([tuple(t) for t in inputs], tuple(output),
                                              dict(sizes), path=[tuple(p) for p in path])
    tree = tree.slice_and_reconfigure(target_size=int(target_size), step_size=RECONF_STEP,
                                      reconf_opts={"subtree_size": RECONF_SUBTREE})
    return validate_path(tree.get_path(), len(inputs)), tuple(tree.sliced_inds)


HYPER_UNSLICED_SHARE = 0.25
"""The share of a hyper optimiser's ``max_time`` its unsliced search takes where a memory
budget may call for slices; cotengra's search that slices as it goes
(:func:`sliced_search`) takes what is left, so that ``max_time`` bounds a plan's cotengra
searches (the default optimiser's plan, its other candidate, comes after them). The larger
share is the sliced search's: its trials take longer, and its plan is the one kept on most
of the benchmark's networks (docs/benchmarks/log.md, eleventh session)."""


HYPER_DEFAULT_SHARE = 0.5
"""The share of a hyper optimiser's ``max_time`` the default optimiser's plan (its other
candidate, planned after the searches) may spend repathing at sliced sizes: its repaths
take half a second each on the random regular graph of 250 tensors, and all of them took
15 s after 10 s of searching (docs/benchmarks/log.md, seventeenth session); once the share
is spent it keeps the best plan found, so that ``max_time`` bounds the planning time up to
this factor and the searches' last trials."""


def minimizes_flops(optimize: Any) -> bool:
    """Whether a hyper optimiser's objective is FLOPs ('hyper', and cotengra's optimisers
    without another ``minimize``): only then is a plan of fewer FLOPs a better answer to
    it."""
    return getattr(optimize, "minimize", "flops") == "flops"


def search_seconds(optimize: Any) -> float | None:
    """The seconds a hyper optimiser searches: :data:`HYPER_SECONDS` for 'hyper', a
    ``cotengra.HyperOptimizer``'s numeric ``max_time``; None for other optimisers (the
    others of cotengra's included) and for a ``max_time`` that is a rule ('rate:...',
    'equil:...') or absent."""
    if not is_hyper(optimize):
        return None
    if isinstance(optimize, str):
        return HYPER_SECONDS
    import cotengra  # optional dependency (is_hyper: it is installed)
    seconds = getattr(optimize, "max_time", None)
    if not isinstance(optimize, cotengra.HyperOptimizer) or isinstance(seconds, bool) or \
            not isinstance(seconds, (int, float)):
        return None
    return float(seconds)


def timed_search(opt: Any, inputs: Sequence[Sequence[str]], output: Sequence[str],
                 sizes: Mapping[str, int], seconds: float):
    """cotengra optimiser ``opt``'s best tree after ``seconds`` of search, or after its
    first trial where none has finished by then; None where the search fails.

    cotengra checks its ``max_time`` only as trials finish, and leaves the trials still
    running to its shared process pool, where the next search queues behind them (10 s
    searches took 13-37 s on a 2-core machine, docs/benchmarks/log.md). So the trials run
    on a pool of this search's own, stopped when the time is up (where a trial has
    finished) or the search ends, running trials included. An optimiser that searches in
    this process (``parallel=False``) or on a pool of the caller's (a dask client) keeps
    it, under the same ``max_time``."""
    inputs, output, sizes = [tuple(t) for t in inputs], tuple(output), dict(sizes)
    parallel, max_time = opt.parallel, opt.max_time
    workers = _local_workers(parallel)
    pool = None if workers is None else ProcessPoolExecutor(max_workers=workers)
    timer = None if pool is None else threading.Timer(seconds, _stop_if_found, (opt, pool))
    try:
        opt.max_time = seconds
        if pool is not None:
            opt.parallel = pool
            timer.start()
        opt.search(inputs, output, sizes)
    except (BrokenExecutor, CancelledError):  # the time ran out with trials running
        if pool is None:
            raise
    finally:
        if pool is not None:
            timer.cancel()
            _stop(pool)
            opt.parallel = parallel
        opt.max_time = max_time
    return opt.best.get("tree")


def _local_workers(parallel: Any) -> int | None:
    """The workers of the local process pool a cotengra ``parallel=`` value asks for
    ('auto', True: one a CPU; an int: that many); None for none (False) or a pool of the
    caller's."""
    if isinstance(parallel, bool):
        return (os.cpu_count() or 1) if parallel else None
    if isinstance(parallel, int):
        return parallel
    if isinstance(parallel, str) and parallel == "auto":
        return os.cpu_count() or 1
    return None


STOP_JOIN_S = 1.0
"""Seconds :func:`_stop` waits for each terminated worker to exit."""


def _stop_if_found(opt: Any, pool: ProcessPoolExecutor) -> None:
    """At the search's time: stop ``pool`` where a trial has found a tree; else the search
    goes on to its first finished trial (cotengra's loop stops there, its time being up)."""
    if "tree" in opt.best:
        _stop(pool)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool``: its queued trials cancelled, its running ones ended (the executor has
    no public way to end a running task: its worker processes are terminated)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        w.terminate()
    for w in workers:
        w.join(STOP_JOIN_S)


def find_path(inputs: Sequence[Sequence[str]], output: Sequence[str],
              sizes: Mapping[str, int], optimize: Any = ADAPTIVE,
              seconds: float | None = None) -> list[tuple[int, ...]]:
    """The contraction path for these terms, as chosen by ``optimize``.

    ``optimize``: 'adaptive' (the default, :func:`adaptive`: greedy where the contraction
    is too cheap to be worth opt_einsum's 'auto' search, else the cheaper of the two),
    False (left to right), True (= 'greedy', numpy's choice), any opt_einsum
    optimiser name ('auto', 'greedy', 'optimal', 'dp', 'branch-2', 'random-greedy', ...,
    each exactly opt_einsum's; unknown names raise KeyError), 'hyper' (cotengra's
    hyper-optimiser, :func:`hyper`), an
    ``opt_einsum.paths.PathOptimizer`` (cotengra's included), or an explicit
    path in numpy's (``['einsum_path', (0, 1), ...]``) or opt_einsum's form. The search
    is unconstrained: a ``memory_limit`` is kept by slicing the path found
    (:mod:`.slicing`). ``seconds``: how long a hyper optimiser searches (None: its
    ``max_time``; :func:`timed_search`); where its search fails, the path is
    opt_einsum's greedy one. Other optimisers take no time bound.
    """
    n = len(inputs)
    if optimize is False or optimize is None:
        return left_to_right(n)
    if optimize is True:
        optimize = "greedy"
    if isinstance(optimize, str) and optimize == HYPER:
        optimize = hyper()
    if isinstance(optimize, str) and optimize == ADAPTIVE:
        fn = adaptive
    elif isinstance(optimize, str):
        fn = _oe_paths.get_path_fn(optimize)  # KeyError for unknown names
    elif isinstance(optimize, _oe_paths.PathOptimizer) or (
            callable(optimize) and not isinstance(optimize, (list, tuple))):
        fn = optimize
    elif isinstance(optimize, (list, tuple)):
        return validate_path(optimize, n)
    else:
        raise TypeError(f"optimize must be a bool, an optimiser name, a PathOptimizer or an "
                        f"explicit path, got {type(optimize).__name__}")
    if n <= 2 or 0 in sizes.values():
        # a zero-size problem costs nothing in any order (and confuses some optimisers)
        return left_to_right(n)
    own = search_seconds(optimize)
    if own is not None:
        tree = timed_search(optimize, inputs, output, sizes, own if seconds is None else seconds)
        if tree is not None:
            return validate_path(tree.get_path(), n)
        fn = _oe_paths.greedy
    path = fn([frozenset(t) for t in inputs], frozenset(output), dict(sizes), None)
    return validate_path(path, n)

