"""Slicing: a contraction kept under ``memory_limit`` by running it in slices.

A sliced label is fixed to one chunk of its range at a time: every operand holding it is
viewed at that chunk, the plan runs on the views, and the slices' results are summed (a
contracted label) or written into their chunk of the output (an output label). Each slice
runs the same steps on smaller operands, so its intermediates are smaller; steps that hold no
sliced label run once, before the slices, and their results stay resident.

:func:`budget_of` reads ``memory_limit``: an int keeps opt_einsum's meaning (elements of the
largest intermediate); a string with a unit ("512MiB", "8GB") bounds the peak working set in
bytes (the intermediates alive at once, the output and the resident results); "80%" or a
float in (0, 1] is that fraction of the device's memory (the host's for the NumPy backend).
:func:`choose_slicing` picks the labels: it prices the path's steps on label sets
(:func:`simulate`), slices contracted labels first, then output labels, each to chunks of
one, each time the label whose slicing costs the fewest FLOPs for how far it lowers what the
budget bounds (every label estimated at once, :mod:`.slice_costs`, the leading few priced
exactly), then widens each chunk as far as the budget allows; it also slices the paths the
optimiser finds for the sizes of the first labels chosen. The cheapest plan that fits wins.
Nothing fits: a ValueError naming the smallest peak reachable.

>>> s = choose_slicing([("i", "j"), ("j", "k"), ("k", "l")], ("i", "l"),
...                    dict(i=4, j=64, k=64, l=4), [(0, 1), (0, 1)], Budget(elements=64))
>>> s.labels, s.num_slices, s.largest_intermediate
(('k',), 4, 64)
"""
from __future__ import annotations

from collections import Counter

import os
import re
import time
from dataclasses import dataclass
from functools import partial
from itertools import chain, product as cartesian
from math import log, log1p, prod
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .slice_costs import NO_LIMIT, Excess, StepTable

__all__ = ["Budget", "Slicing", "budget_of", "choose_slicing", "simulate", "divisors"]

UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
"""The units a byte budget may name (case-insensitive)."""
PEAK_MODEL_SHARE = 0.85
"""The share of a byte budget the modelled peak may fill: the model counts the
intermediates, the resident results and the output, not the executor's own temporaries
(small views, the matrix product's buffers), which the margin leaves room for
(evidence: docs/benchmarks/networks-cpu.md, the peaks the runs keep)."""
EXACT_CANDIDATES = 4
"""How many labels a greedy step prices exactly where the estimates of every label's
slicing (:meth:`~.slice_costs.StepTable.price_each`) may round: the leading ones by them;
the next as many where none of them lowers what it must."""
EXACT_FLOAT = 2**53
"""Counts below this are exact in a float64 estimate: the estimates then rank the labels
as their exact prices do, and a greedy step prices only the leading one exactly."""
REPATH_TRIES = 32
"""How many of the greedy slicer's label prefixes have the optimiser find a path for
their sliced sizes (:func:`_repathed`): a path found for other sizes is a different
sample of the optimiser's, often far cheaper sliced."""
EXHAUSTIVE_REPATH_TRIES = 1
"""The prefixes an exhaustive search (:data:`EXHAUSTIVE_SEARCHES`) repaths: each repath
costs a whole search, which on 9 tensors is already a quarter second, so more would
multiply the planning time the caller chose the search for."""
EXHAUSTIVE_SEARCHES = frozenset({"optimal", "dp", "branch-all", "branch-2"})
"""opt_einsum's searches whose time grows exponentially with the operands."""
SLICING_HINT_OVERHEAD = 4.0
"""Slicing overhead (sliced FLOPs over unsliced) above which a printed plan says how to
find a cheaper one: the greedy path sliced after the search cost 4-200x on the benchmark's
PEPS and circuits under 1-8 GiB, where cotengra's search that slices as it goes found
1.0-1.9x on nine of the ten rows (docs/benchmarks/networks-cpu.md)."""
SLICING_HINT = ("the slices multiply the FLOPs: a path searched with the slices in mind may "
                "cost far less (optimize='hyper', cotengra: pip install 'skcontract[hyper]'; "
                "a larger max_time searches longer)")
"""The printed plan's line where the overhead passes :data:`SLICING_HINT_OVERHEAD`."""


def repath_tries(optimize) -> int:
    """How many label prefixes the slicer repaths with ``optimize`` (:func:`_prefixes`)."""
    exhaustive = isinstance(optimize, str) and optimize in EXHAUSTIVE_SEARCHES
    return EXHAUSTIVE_REPATH_TRIES if exhaustive else REPATH_TRIES


_BYTES = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]+)\s*$")
_PERCENT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*%\s*$")


@dataclass(frozen=True)
class Budget:
    """What a plan must keep under: ``elements`` of its largest intermediate (a slice's), or
    ``bytes`` of its peak working set; ``text`` says it as the caller gave it."""

    elements: int | None = None
    bytes: int | None = None
    text: str = ""

    def fits(self, largest: int, peak_bytes: int) -> bool:
        if self.elements is not None and largest > self.elements:
            return False
        return self.bytes is None or peak_bytes <= self.bytes * PEAK_MODEL_SHARE

    def used(self, largest: int, peak_bytes: int) -> int:
        """The quantity the budget bounds."""
        return largest if self.elements is not None else peak_bytes

    @property
    def bound(self) -> float:
        """The most :meth:`used` may be (:meth:`fits`)."""
        return self.elements if self.elements is not None else self.bytes * PEAK_MODEL_SHARE

    def describe(self, largest: int, peak_bytes: int) -> str:
        if self.elements is not None:
            return f"a largest intermediate of {largest:,} elements"
        return f"a peak of {peak_bytes:,} bytes"


def host_memory_bytes() -> int:
    """The host's physical memory in bytes (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def budget_of(memory_limit: Any, input_sizes: Sequence[int],
              memory_bytes: int = 0) -> Budget | None:
    """The :class:`Budget` ``memory_limit`` asks for (None: no limit). ``input_sizes``: the
    operands' element counts ("max_input"); ``memory_bytes``: the memory a fraction is of
    (the device's, or the host's). TypeError / ValueError naming the argument otherwise."""
    if memory_limit is None:
        return None
    text = repr(memory_limit)
    if isinstance(memory_limit, str):
        if memory_limit == "max_input":
            return Budget(elements=max(input_sizes, default=1), text=text)
        m = _PERCENT.match(memory_limit)
        if m:
            return _fraction(float(m.group(1)) / 100, memory_bytes, text)
        m = _BYTES.match(memory_limit)
        if m and m.group(2).lower() in UNITS:
            n = int(float(m.group(1)) * UNITS[m.group(2).lower()])
            if n < 1:
                raise ValueError(f"memory_limit {text} is less than a byte")
            return Budget(bytes=n, text=text)
        raise ValueError(f"memory_limit must be None, an int (elements), 'max_input', a "
                         f"size with a unit ('512MiB', '8GB'; units {', '.join(UNITS)}) "
                         f"or a percentage ('80%'), got {text}")
    if isinstance(memory_limit, float):
        return _fraction(memory_limit, memory_bytes, text)
    if isinstance(memory_limit, bool) or not hasattr(memory_limit, "__index__"):
        raise TypeError(f"memory_limit must be None, an int, a float in (0, 1] or a string, "
                        f"got {type(memory_limit).__name__} {text}")
    limit = int(memory_limit)
    if limit == -1:
        return None
    if limit < 1:
        raise ValueError(f"memory_limit must be larger than 0, or -1, got {limit}")
    return Budget(elements=limit, text=text)


def _fraction(share: float, memory_bytes: int, text: str) -> Budget:
    if not 0 < share <= 1:
        raise ValueError(f"memory_limit {text}: a fraction of the memory must lie in (0, 1]")
    if memory_bytes <= 0:
        raise ValueError(f"memory_limit {text}: this device's memory size is unknown; give a "
                         "size with a unit ('8GB') instead")
    return Budget(bytes=int(share * memory_bytes), text=text)


@dataclass(frozen=True)
class Estimates:
    """A greedy step's candidates: each label's estimated (FLOPs, what the budget bounds,
    excess over the budget) with it sliced too; ``exact``: whether every count is below
    :data:`EXACT_FLOAT` (so rounds nothing)."""

    prices: dict
    exact: bool


@dataclass(frozen=True)
class Cost:
    """A path priced on label sets (:func:`simulate`): total FLOPs (steps that hold no
    sliced label counted once, the others once a slice), the largest intermediate of a slice,
    the peak of elements alive at once and the elements of all its intermediates; the
    :class:`~.slice_costs.Excess` over the budget where the slicer asks for it."""

    flops: int
    largest: int
    peak: int
    total: int
    excess: float = 0.0


def simulate(terms: Sequence[frozenset], output: frozenset, sizes: Mapping[str, int],
             path: Sequence[Sequence[int]], sliced: frozenset = frozenset(),
             num_slices: int = 1, sources: Sequence | None = None) -> Cost:
    """Price ``path`` over ``terms`` (label sets) with ``sizes`` (a slice's, for sliced
    labels): each step's FLOPs (twice the product of its labels' sizes where it sums one),
    its result's elements, and the elements alive while it runs (the intermediates not yet
    consumed and its result; the operands are the caller's). A step is repeated for every
    slice when it holds a sliced label or consumes a result that does; a result of a step
    that is not, consumed by one that is, stays alive through the slices
    (:class:`~.slice_costs.StepTable` prices every label's slicing with the same model).
    ``sources``: for each term, the labels of the operand a sum made it from before the
    path (priced as a step, its result alive until the path consumes it), or None (an
    operand, or a view of one)."""
    live = [frozenset(t) for t in terms]
    varies = [bool(t & sliced) for t in live]
    held = [0] * len(live)  # elements of each live intermediate (0: an operand)
    holders = Counter(x for t in live for x in t)  # live terms holding each label
    flops = largest = peak = current = total = 0
    for i, source in enumerate(sources or ()):
        if source is None:
            continue
        source = frozenset(source)
        varies[i] = bool(source & sliced)
        held[i] = prod(sizes[x] for x in live[i])
        flops += prod(sizes[x] for x in source) * (2 if source - live[i] else 1) * \
            (num_slices if varies[i] else 1)
        peak = max(peak, current + held[i])
        current += held[i]
        largest = max(largest, held[i])
        total += held[i]
    for ids in path:
        vary = any(varies[i] for i in ids)
        # a result that runs once and feeds a step that runs each slice stays resident
        size_in = sum(held[i] for i in ids if varies[i] or not vary)
        union = frozenset().union(*(live[i] for i in ids))
        for i in sorted(ids, reverse=True):
            holders.subtract(live[i])
            del live[i], varies[i], held[i]
        out = frozenset(x for x in union if holders[x] > 0 or x in output)
        size_out = prod(sizes[x] for x in out)
        work = prod(sizes[x] for x in union) * (2 if union - out else 1)
        flops += work * (num_slices if vary else 1)
        peak = max(peak, current + size_out)
        current += size_out - size_in
        largest = max(largest, size_out)
        total += size_out
        live.append(out)
        holders.update(out)
        varies.append(vary)
        held.append(size_out)
    return Cost(flops, largest, peak, total)


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


@dataclass(frozen=True)
class Slicing:
    """The slices a plan runs in: ``chunks`` holds each sliced label and its chunk (a
    divisor of its size), ``sizes`` the labels' full sizes; a slice fixes each sliced label
    to one chunk. ``overhead``: the sliced plan's FLOPs over the unsliced one's;
    ``largest_intermediate``: a slice's largest intermediate in elements; ``peak_bytes``:
    the predicted peak working set (a slice's intermediates, the resident results and the
    output); ``flops``: every slice's FLOPs (steps that run once counted once), what two
    sliced plans of different paths compare by."""

    chunks: tuple[tuple[str, int], ...]
    sizes: Mapping[str, int]
    overhead: float
    largest_intermediate: int
    peak_bytes: int
    flops: int = 0

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(x for x, _ in self.chunks)

    @property
    def num_slices(self) -> int:
        return prod(self.sizes[x] // c for x, c in self.chunks)

    def slice_sizes(self) -> dict:
        """Every label's size within one slice."""
        sizes = dict(self.sizes)
        sizes.update(self.chunks)
        return sizes

    def ranges(self):
        """Each slice as a ``{label: (start, stop)}`` map, in a fixed order."""
        spans = [[(s, s + c) for s in range(0, self.sizes[x], c)] for x, c in self.chunks]
        for pick in cartesian(*spans):
            yield dict(zip(self.labels, pick))

    def describe(self) -> str:
        parts = [x if c == 1 else f"{x} in chunks of {c}" for x, c in self.chunks]
        line = (f"sliced over {', '.join(parts)}: {self.num_slices:,} slices, FLOPs x"
                f"{self.overhead:.3g}; a slice's largest intermediate "
                f"{self.largest_intermediate:,} elements; predicted peak "
                f"{self.peak_bytes:,} bytes")
        if self.overhead > SLICING_HINT_OVERHEAD:
            line += "\n" + SLICING_HINT
        return line


def choose_slicing(terms: Sequence[Sequence[str]], output: Sequence[str],
                   sizes: Mapping[str, int], path: Sequence[Sequence[int]], budget: Budget,
                   itemsize: int = 8, slicing: Any = True,
                   repath: Callable | None = None, out_units: int = 1,
                   beside_bytes: int | None = None) -> Slicing | None:
    """The slices that keep ``path`` (or the path ``repath(slice_sizes)`` finds) under
    ``budget``; None when the unsliced plan fits. ``slicing``: True (choose), False (refuse:
    ValueError when the plan does not fit), a sequence of labels or a ``{label: chunk}`` map
    (slice exactly those). :func:`choose_sliced_path` returns the path the slices run
    too."""
    return choose_sliced_path(terms, output, sizes, path, budget, itemsize, slicing,
                              repath, out_units=out_units, beside_bytes=beside_bytes)[0]


def choose_sliced_path(terms, output, sizes, path, budget: Budget, itemsize: int = 8,
                       slicing: Any = True, repath: Callable | None = None,
                       start: Sequence = (), optimize: Any = None, out_units: int = 1,
                       beside_bytes: int | None = None, sources: Sequence | None = None,
                       repath_until: float | None = None):
    """``(slicing, path)``: :func:`choose_slicing`'s slices and the path they run (``path``,
    or the one ``repath`` finds for the sliced sizes where it is cheaper; ``optimize``, the
    optimiser ``repath`` asks, says how many times: :func:`repath_tries`). ``start``:
    labels sliced (to chunks of one) before the greedy choice adds any (a search's
    slices), where the budget asks for slices. ``itemsize``: the bytes an element of the
    steps takes. ``out_units``: the output's bytes an element over ``itemsize``
    (:func:`output_units`); ``beside_bytes``, where given, replaces the output's bytes: what
    the executor holds beside the steps whatever the slices (the output, and operands cast
    to the dtype the steps compute in). ``sources``: for each term, the labels of the
    operand a sum made it from before the path (:func:`simulate`), or None; only the
    path's labels are sliced. ``repath_until``: a ``time.monotonic()`` after which no
    further prefix is repathed (None: every one :func:`repath_tries` allows)."""
    pricing = _Pricing([frozenset(t) for t in terms], frozenset(output), sizes, budget,
                       itemsize, out_units, beside_bytes, sources)
    price = pricing.price
    base = simulate(pricing.terms, pricing.out, sizes, path, sources=sources)
    if 0 in sizes.values():
        return None, path
    if slicing is not True and slicing is not False:
        chunks = _given_chunks(slicing, sizes)
        cost, peak = price(chunks, path)
        if not (budget is None or budget.fits(cost.largest, peak)):
            raise ValueError(f"memory_limit {budget.text}: slicing {sorted(chunks)} leaves "
                             f"{budget.describe(cost.largest, peak)}")
        return _slicing(chunks, sizes, cost, peak, base), path
    if budget is None:
        return None, path
    cost, peak = price({}, path)
    if budget.fits(cost.largest, peak):
        return None, path
    if slicing is False:
        raise ValueError(f"memory_limit {budget.text}: the plan needs "
                         f"{budget.describe(cost.largest, peak)} and slicing=False refuses "
                         "to slice it")
    chunks, cost, peak = pricing.slice_greedily(path, start)
    if repath is not None:
        trials = chain([(path, chunks, cost, peak)],
                       _repathed(repath, pricing, chunks, repath_tries(optimize),
                                 repath_until))
        path, chunks, cost, peak = min(trials, key=lambda trial: trial[2].flops)
    return (_slicing(chunks, sizes, cost, peak, base) if chunks else None), path


def _repathed(repath: Callable, pricing: _Pricing, chunks: dict, tries: int,
              until: float | None = None):
    """The paths ``repath`` finds for sliced sizes, as ``(path, chunks, cost, peak)`` where
    they keep the budget: for ``chunks``, sliced as they are, and for the first labels the
    greedy slicer chose (``tries`` :func:`_prefixes` of ``chunks``' order, those begun
    before ``until``, a ``time.monotonic()``), sliced greedily from them (unsliced where
    such a path fits as it is)."""
    sizes, fits = pricing.sizes, pricing.budget.fits
    other = repath(dict(sizes) | chunks)
    if other is not None:
        cost, peak = pricing.price(chunks, other)
        if fits(cost.largest, peak):
            yield other, chunks, cost, peak
    order = list(chunks)
    for n in _prefixes(len(order), tries):
        if until is not None and time.monotonic() > until:
            return
        first = dict.fromkeys(order[:n], 1)
        other = repath(dict(sizes) | first)
        if other is None:
            continue
        cost, peak = pricing.price({}, other)
        if fits(cost.largest, peak):
            yield other, {}, cost, peak
            continue
        try:
            yield other, *pricing.slice_greedily(other, first)
        except ValueError:  # no slicing of this path keeps the budget
            continue


def _prefixes(count: int, tries: int = REPATH_TRIES) -> list[int]:
    """How many of the greedy slicer's first labels each repath slices: 1 to ``count``, at
    most ``tries`` of them, evenly spread (the last always ``count``)."""
    tries = min(count, tries)
    return sorted({-(-i * count // tries) for i in range(1, tries + 1)})


def _slicing(chunks, sizes, cost: Cost, peak: int, base: Cost) -> Slicing:
    order = tuple((x, chunks[x]) for x in sorted(chunks, key=str))
    return Slicing(order, dict(sizes), cost.flops / max(base.flops, 1), cost.largest, peak,
                   cost.flops)


def _given_chunks(slicing: Any, sizes: Mapping[str, int]) -> dict:
    """The caller's slices: labels (chunks of one) or ``{label: chunk}``."""
    if isinstance(slicing, Mapping):
        chunks = dict(slicing)
    elif isinstance(slicing, str) or not hasattr(slicing, "__iter__"):
        raise TypeError(f"slicing must be True, False, a sequence of labels or a "
                        f"{{label: chunk}} map, got {slicing!r}")
    else:
        chunks = {x: 1 for x in slicing}
    for x, c in chunks.items():
        if x not in sizes:
            raise ValueError(f"slicing: {x!r} is not a label of the contraction")
        if isinstance(c, bool) or not hasattr(c, "__index__") or not 1 <= c <= sizes[x] \
                or sizes[x] % c:
            raise ValueError(f"slicing: the chunk of {x!r} must divide its size "
                             f"{sizes[x]}, got {c!r}")
    return {x: int(c) for x, c in chunks.items()}


def output_units(dtype) -> int:
    """The bytes a sliced plan's output takes an element, in its dtype's itemsizes: float16
    slices are summed in float32 (two) and the sum rounded to float16 once at the end (one
    more, alive beside it); other dtypes are summed in their own (one)."""
    return 3 if np.dtype(dtype) == np.float16 else 1


class _Pricing:
    """A contraction's paths priced under slicings: exactly (:meth:`price`), every label's
    slicing at once (:meth:`estimates`), and sliced greedily (:meth:`slice_greedily`); the
    table of the path priced last is kept."""

    def __init__(self, terms: list, out: frozenset, sizes: Mapping[str, int],
                 budget: Budget | None, itemsize: int, out_units: int = 1,
                 beside_bytes: int | None = None, sources: Sequence | None = None):
        self.terms, self.out, self.sizes, self.budget = terms, out, sizes, budget
        self.sources = sources
        self.candidates = frozenset().union(*terms, out)  # the labels a slicing may cut
        self.itemsize = itemsize
        # bytes held beside the steps whatever the slices: the output's, unless given
        self.beside = prod(sizes[x] for x in out) * out_units * itemsize \
            if beside_bytes is None else beside_bytes
        self.over = NO_LIMIT if budget is None else _excess(budget, itemsize, self.beside)
        self.tables = {}

    def table(self, path) -> StepTable:
        key = tuple(map(tuple, path))
        if key not in self.tables:
            self.tables = {key: StepTable(self.terms, self.out, path, self.sources)}
        return self.tables[key]

    def price(self, chunks: Mapping[str, int], path) -> tuple[Cost, int]:
        """``path``'s cost sliced at ``chunks``, and its peak in bytes."""
        cost = Cost(*self.table(path).price(_sliced_sizes(self.sizes, chunks),
                                            frozenset(chunks),
                                            _num_slices(self.sizes, chunks), self.over))
        return cost, cost.peak * self.itemsize + self.beside

    def estimates(self, path, chunks: Mapping[str, int]) -> Estimates:
        """Each label not in ``chunks``: estimates of ``path``'s (FLOPs, what the budget
        bounds, excess over the budget) with it sliced to chunks of one too."""
        table = self.table(path)
        each = table.price_each(_sliced_sizes(self.sizes, chunks), frozenset(chunks),
                                _num_slices(self.sizes, chunks), self.over)
        used = self.budget.used(each.largest, each.peak * self.itemsize + self.beside)
        exact = max(each.flops.max(), used.max(), each.total.max()) < EXACT_FLOAT
        return Estimates({x: e for x, *e in zip(table.labels, each.flops.tolist(),
                                                used.tolist(), each.excess.tolist())
                          if self.sizes[x] > 1 and x not in chunks and x in self.candidates},
                         bool(exact))

    def slice_greedily(self, path, first: Sequence) -> tuple[dict, Cost, int]:
        """``path`` sliced by :func:`_greedy` from the labels ``first``."""
        return _greedy(self.price, partial(self.estimates, path), path, self.sizes,
                       self.out, self.budget, dict.fromkeys(first, 1))


def _excess(budget: Budget, itemsize: int, beside: int) -> Excess:
    """The :class:`~.slice_costs.Excess` over ``budget``: over its largest intermediate,
    or over the working set its bytes leave beside the ``beside`` bytes (the output's)."""
    if budget.elements is not None:
        return Excess(budget.elements, alive=False)
    return Excess((budget.bound - beside) / itemsize, alive=True)


def _sliced_sizes(sizes: Mapping[str, int], chunks: Mapping[str, int]) -> dict:
    """A slice's sizes: each sliced label at its chunk."""
    sliced = dict(sizes)
    sliced.update(chunks)
    return sliced


def _num_slices(sizes: Mapping[str, int], chunks: Mapping[str, int]) -> int:
    """How many slices ``chunks`` cut the contraction in."""
    return prod(sizes[x] // c for x, c in chunks.items())


def _greedy(price, estimates, path, sizes, out: frozenset, budget: Budget, chunks: dict):
    """From ``chunks``, slice labels to chunks of one, contracted labels before output
    labels, each time the one that lowers what the budget bounds at the least cost
    (:func:`_order`), until the plan fits; then widen each chunk to the largest divisor that
    still fits."""
    chunks = dict(chunks)
    cost, peak = price(chunks, path)
    best_seen = budget.used(cost.largest, peak)
    while not budget.fits(cost.largest, peak):
        choice = _next_label(price, estimates(chunks), path, out, budget, chunks, cost, peak)
        if choice is None:
            raise ValueError(f"memory_limit {budget.text}: no slicing fits; the smallest "
                             f"peak reachable is {best_seen:,} "
                             f"{'elements' if budget.elements is not None else 'bytes'}")
        x, cost, peak = choice
        chunks[x] = 1
        best_seen = min(best_seen, budget.used(cost.largest, peak))
    for x in sorted(chunks, key=lambda y: -sizes[y]):
        for c in reversed(divisors(sizes[x])[:-1]):
            trial = chunks | {x: c}
            c_cost, c_peak = price(trial, path)
            if budget.fits(c_cost.largest, c_peak):
                chunks, cost, peak = trial, c_cost, c_peak
                break
    return chunks, cost, peak


def _next_label(price, estimates: Estimates, path, out: frozenset, budget: Budget,
                chunks: dict, cost: Cost, peak: int):
    """The label to slice next: ``(label, cost, peak bytes)`` once sliced, None when no
    label lowers anything. A label must lower what the budget bounds, contracted labels
    before output labels; where none does (steps tied at the peak), it must lower the excess over
    the budget. Of those, the best by :func:`_order`: the estimates rank the labels, and
    the leading one (the leading :data:`EXACT_CANDIDATES` where the estimates may round) is
    priced exactly."""
    now = (budget.used(cost.largest, peak), cost.excess)
    prices = estimates.prices
    contracted = sorted((x for x in prices if x not in out), key=str)
    kept = sorted((x for x in prices if x in out), key=str)
    batch = 1 if estimates.exact else EXACT_CANDIDATES
    for rank in range(2):
        for group in (contracted, kept):
            keys = (_order(rank, cost.flops, now, prices[x], budget.bound) for x in group)
            ranked = [x for *_, x in sorted((key, n, x) for n, (key, x)
                                            in enumerate(zip(keys, group)) if key is not None)]
            for first in range(0, len(ranked), batch):
                choice = _exact_best(price, path, ranked[first:first + batch], rank,
                                     cost.flops, now, budget, chunks)
                if choice is not None:
                    return choice
    return None


def _exact_best(price, path, labels, rank: int, flops: int, now: tuple, budget: Budget,
                chunks: dict):
    """The best of ``labels`` by :func:`_order` on their exact prices: ``(label, cost,
    peak bytes)``, None where none lowers what ``rank`` asks."""
    best = None
    for x in labels:
        c, p = price(chunks | {x: 1}, path)
        key = _order(rank, flops, now, (c.flops, budget.used(c.largest, p), c.excess),
                     budget.bound)
        if key is not None and (best is None or key < best[0]):
            best = (key, x, c, p)
    return None if best is None else best[1:]


def _order(rank: int, flops, now: tuple, priced: tuple, bound) -> tuple | None:
    """How slicing a label ranks, the smallest first: the growth of the FLOPs over the fall
    of what it lowers (both as logarithms), then its FLOPs, what the budget bounds and the
    excess; None where it lowers nothing ``rank`` counts. ``now``: what the budget bounds
    and the excess over it before; ``priced``: the FLOPs, what the budget bounds and the
    excess after. Rank 0 counts what the budget bounds, its fall only down to the budget's
    ``bound`` (where several labels reach the bound, the fewest FLOPs win); rank 1, the
    excess where what the budget bounds stays."""
    f, m, e = priced
    used, excess = now
    if rank == 0:
        fall = min(log(used) - log(m), log(used) - log(bound)) if 0 < m < used \
            else 0.0
    else:
        fall = log1p(excess) - log1p(e) if m <= used and e < excess else 0.0
    if fall <= 0:
        return None
    return (log1p(f) - log1p(flops)) / fall, f, m, e
