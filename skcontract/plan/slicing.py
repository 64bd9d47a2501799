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
one, then widens each chunk as far as the budget allows, and tries the path the optimiser
finds for the sliced sizes too; the cheapest plan that fits wins. Nothing fits: a ValueError
naming the smallest peak reachable.

>>> s = choose_slicing([("i", "j"), ("j", "k"), ("k", "l")], ("i", "l"),
...                    dict(i=4, j=64, k=64, l=4), [(0, 1), (0, 1)], Budget(elements=64))
>>> s.labels, s.num_slices, s.largest_intermediate
(('k',), 4, 64)
"""
from __future__ import annotations

from collections import Counter

import os
import re
from dataclasses import dataclass
from itertools import product as cartesian
from math import prod
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Budget", "Slicing", "budget_of", "choose_slicing", "simulate", "divisors"]

UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
"""The units a byte budget may name (case-insensitive)."""
PEAK_MODEL_SHARE = 0.85
"""The share of a byte budget the modelled peak may fill: the model counts the
intermediates, the resident results and the output, not the executor's own temporaries
(small views, the matrix product's buffers), which measured up to 10% above it on the
CPU (docs/benchmarks/log.md)."""
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

    def measure(self, largest: int, peak_bytes: int) -> int:
        """The quantity the budget bounds."""
        return largest if self.elements is not None else peak_bytes

    def progress(self, cost: "Cost", peak_bytes: int) -> tuple[int, int]:
        """What slicing a label must lower: the bounded quantity, then the elements of all
        a slice's intermediates (a label that shrinks one of two largest intermediates
        leaves the largest as it is but is progress)."""
        return self.measure(cost.largest, peak_bytes), cost.total

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
class Cost:
    """A path priced on label sets (:func:`simulate`): total FLOPs (steps that hold no
    sliced label counted once, the others once a slice), the largest intermediate of a slice,
    the peak of elements alive at once and the elements of all its intermediates; the labels
    of the largest intermediate and of the intermediates alive at the peak (the only labels
    whose slicing can lower either)."""

    flops: int
    largest: int
    peak: int
    total: int
    largest_labels: frozenset = frozenset()
    peak_labels: frozenset = frozenset()


def simulate(terms: Sequence[frozenset], output: frozenset, sizes: Mapping[str, int],
             path: Sequence[Sequence[int]], sliced: frozenset = frozenset(),
             num_slices: int = 1) -> Cost:
    """Price ``path`` over ``terms`` (label sets) with ``sizes`` (a slice's, for sliced
    labels): each step's FLOPs (twice the product of its labels' sizes where it sums one),
    its result's elements, and the elements alive while it runs (the intermediates not yet
    consumed and its result; the operands are the caller's). A step is repeated for every
    slice when it holds a sliced label or consumes a result that does; a result of a step
    that is not, consumed by one that is, stays alive through the slices."""
    live = [frozenset(t) for t in terms]
    origin = [(t, ()) for t in live]  # (labels its step held, its inputs' origins): a tree
    varies = [bool(t & sliced) for t in live]
    held = [0] * len(live)  # elements of each live intermediate (0: an operand)
    holders = Counter(x for t in live for x in t)  # live terms holding each label
    flops = largest = peak = current = total = 0
    largest_labels = resident = frozenset()  # resident: results kept across the slices
    at_peak = ()  # the labels' sets alive at the peak, joined once at the end
    for ids in path:
        picked = [live[i] for i in ids]
        vary = any(varies[i] for i in ids)
        # a result that runs once and feeds a step that runs each slice stays resident
        size_in = sum(held[i] for i in ids if varies[i] or not vary)
        held_in = {i: held[i] for i in ids}
        # a resident result stays by its whole lineage: slicing any of it makes it vary
        resident = resident.union(*(_lineage(origin[i]) for i in ids
                                    if vary and held[i] and not varies[i]))
        union = frozenset().union(*picked)
        node = (union, tuple(origin[i] for i in ids))
        for i in sorted(ids, reverse=True):
            holders.subtract(live[i])
            del live[i], varies[i], held[i], origin[i]
        out = frozenset(x for x in union if holders[x] > 0 or x in output)
        size_out = prod(sizes[x] for x in out)
        work = prod(sizes[x] for x in union) * (2 if union - out else 1)
        flops += work * (num_slices if vary else 1)
        if current + size_out > peak:
            peak = current + size_out
            at_peak = (out, resident, *(t for t, h in zip(live, held) if h),
                       *(p for i, p in zip(ids, picked) if held_in.get(i)))
        current += size_out - size_in
        if size_out > largest:
            largest, largest_labels = size_out, out
        total += size_out
        live.append(out)
        holders.update(out)
        origin.append(node)
        varies.append(vary)
        held.append(size_out)
    return Cost(flops, largest, peak, total, largest_labels, frozenset().union(*at_peak))


def _lineage(node) -> frozenset:
    """Every label the steps that made a result held (its origin tree, :func:`simulate`)."""
    labels, stack = set(), [node]
    while stack:
        held, parents = stack.pop()
        labels |= held
        stack.extend(parents)
    return frozenset(labels)


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
        return (f"sliced over {', '.join(parts)}: {self.num_slices:,} slices, FLOPs x"
                f"{self.overhead:.3g}; a slice's largest intermediate "
                f"{self.largest_intermediate:,} elements; predicted peak "
                f"{self.peak_bytes:,} bytes")


def choose_slicing(terms: Sequence[Sequence[str]], output: Sequence[str],
                   sizes: Mapping[str, int], path: Sequence[Sequence[int]], budget: Budget,
                   itemsize: int = 8, slicing: Any = True,
                   repath: Callable | None = None) -> Slicing | None:
    """The slices that keep ``path`` (or the path ``repath(slice_sizes)`` finds) under
    ``budget``; None when the unsliced plan fits. ``slicing``: True (choose), False (refuse:
    ValueError when the plan does not fit), a sequence of labels or a ``{label: chunk}`` map
    (slice exactly those). :func:`choose_sliced_path` returns the path the slices run
    too."""
    return choose_sliced_path(terms, output, sizes, path, budget, itemsize, slicing,
                              repath)[0]


def choose_sliced_path(terms, output, sizes, path, budget: Budget, itemsize: int = 8,
                       slicing: Any = True, repath: Callable | None = None,
                       start: Sequence = ()):
    """``(slicing, path)``: :func:`choose_slicing`'s slices and the path they run (``path``,
    or the one ``repath`` finds for the sliced sizes where it is cheaper). ``start``:
    labels sliced (to chunks of one) before the greedy choice adds any (a search's
    slices), where the budget asks for slices."""
    label_sets = [frozenset(t) for t in terms]
    out = frozenset(output)
    out_elems = prod(sizes[x] for x in out)
    base = simulate(label_sets, out, sizes, path)

    def price(chunks: Mapping[str, int], p) -> tuple[Cost, int]:
        sliced = dict(sizes)
        sliced.update(chunks)
        n = prod(sizes[x] // c for x, c in chunks.items())
        cost = simulate(label_sets, out, sliced, p, frozenset(chunks), n)
        return cost, (cost.peak + out_elems) * itemsize

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
    chunks, cost, peak = _greedy(price, path, sizes, out, budget, dict.fromkeys(start, 1))
    if repath is not None:
        other = repath(dict(sizes) | chunks)
        if other is not None:
            o_cost, o_peak = price(chunks, other)
            if budget.fits(o_cost.largest, o_peak) and o_cost.flops < cost.flops:
                path, cost, peak = other, o_cost, o_peak
    return _slicing(chunks, sizes, cost, peak, base), path


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


def _greedy(price, path, sizes, out: frozenset, budget: Budget, chunks: dict):
    """From ``chunks``, slice labels to chunks of one, contracted labels before output
    labels, each time the one that lowers the budget's measure at the least total cost,
    until the plan fits; then widen each chunk to the largest divisor that still fits."""
    chunks = dict(chunks)
    cost, peak = price(chunks, path)
    best_seen = budget.measure(cost.largest, peak)
    while not budget.fits(cost.largest, peak):
        choice = _next_label(price, path, sizes, out, budget, chunks, cost, peak)
        if choice is None:
            raise ValueError(f"memory_limit {budget.text}: no slicing fits; the smallest "
                             f"peak reachable is {best_seen:,} "
                             f"{'elements' if budget.elements is not None else 'bytes'}")
        x, cost, peak = choice
        chunks[x] = 1
        best_seen = min(best_seen, budget.measure(cost.largest, peak))
    for x in sorted(chunks, key=lambda y: -sizes[y]):
        for c in reversed(divisors(sizes[x])[:-1]):
            trial = chunks | {x: c}
            c_cost, c_peak = price(trial, path)
            if budget.fits(c_cost.largest, c_peak):
                chunks, cost, peak = trial, c_cost, c_peak
                break
    return chunks, cost, peak


def _next_label(price, path, sizes, out: frozenset, budget: Budget, chunks: dict, cost: Cost,
                peak: int):
    """The label to slice next: ``(label, cost, peak bytes)`` once sliced, None when no
    label lowers anything. A label must lower the budget's measure, contracted labels
    before output labels, the least total FLOPs first; where none does, one that lowers
    the elements of all intermediates (progress towards a largest that several steps
    share)."""
    now = (budget.measure(cost.largest, peak), budget.progress(cost, peak))
    critical = cost.largest_labels if budget.elements is not None else cost.peak_labels
    for rank in range(2):
        # the measure falls only by slicing a label of what sets it; progress, by any
        labels = critical if rank == 0 else sizes
        groups = (sorted(set(labels) - out, key=str), sorted(out & set(labels), key=str))
        for group in groups:
            best = None
            for x in group:
                if sizes[x] <= 1 or chunks.get(x) == 1:
                    continue
                c, p = price(chunks | {x: 1}, path)
                m = (budget.measure(c.largest, p), budget.progress(c, p))
                if m[rank] < now[rank] and (best is None or (c.flops, m) < best[0]):
                    best = ((c.flops, m), x, c, p)
            if best is not None:
                return best[1:]
    return None
