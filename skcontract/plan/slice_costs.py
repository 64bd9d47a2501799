"""A path's slicings priced from a table of its steps: one slicing exactly
(:meth:`StepTable.price`, in integers, as :func:`~.slicing.simulate` prices it without
walking the label sets again), or what slicing one more label to chunks of one does to
the path's FLOPs, largest intermediate, peak, total elements and :class:`Excess`, for
every label at once (:meth:`StepTable.price_each`, NumPy vectors over the labels in
floating point: estimates, exact while the counts stay below 2**53, that the greedy
slicer ranks its candidates by).

>>> table = StepTable([frozenset("ij"), frozenset("jk"), frozenset("kl")], frozenset("il"),
...                   [(0, 1), (0, 1)])
>>> each = table.price_each(dict(i=4, j=64, k=64, l=4), frozenset(), 1)
>>> table.labels, [int(n) for n in each.largest]
(['i', 'j', 'k', 'l'], [64, 256, 16, 256])
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from math import prod
from typing import Mapping, Sequence

import numpy as np

__all__ = ["StepTable", "EachCost", "Excess"]


@dataclass(frozen=True)
class Excess:
    """How far a path is over a budget: the elements by which its steps exceed ``limit``,
    summed over the steps; each step's working set counted (the elements alive while it
    runs, as the peak) where ``alive``, else its result (as the largest intermediate).
    Zero where the path keeps the limit; every step over it counts, so that lowering one of
    several steps tied at the peak is progress."""

    limit: float
    alive: bool

    def of(self, alive, result):
        """The excess of a step whose working set is ``alive`` and result ``result``
        elements (numbers, or NumPy vectors)."""
        over = (alive if self.alive else result) - self.limit
        return np.maximum(over, 0.0) if isinstance(over, np.ndarray) else max(over, 0.0)


NO_LIMIT = Excess(float("inf"), False)
"""An :class:`Excess` that every path keeps (zero)."""


@dataclass(frozen=True)
class TableStep:
    """A step of the path: the steps whose results it consumes, the labels of the operands
    it takes directly, the labels it holds and those its result keeps, and whether it sums
    a label."""

    consumes: tuple[int, ...]
    operands: frozenset
    held: tuple
    kept: tuple
    sums: bool


@dataclass(frozen=True)
class EachCost:
    """For each label of :attr:`StepTable.labels`, the path's cost with that label sliced
    too (to chunks of one): :class:`~.slicing.Cost`'s ``flops``, ``largest``, ``peak``,
    ``total`` and ``excess``, as float vectors."""

    flops: np.ndarray
    largest: np.ndarray
    peak: np.ndarray
    total: np.ndarray
    excess: np.ndarray


class StepTable:
    """A path over label sets, indexed once (:class:`TableStep`) for :meth:`price` and
    :meth:`price_each`. ``sources``: for each term, the labels of the operand a sum made it
    from before the path (a result, priced as a step ahead of the path's), or None (an
    operand, or a view of one: no elements)."""

    def __init__(self, terms: Sequence[frozenset], output: frozenset,
                 path: Sequence[Sequence[int]], sources: Sequence | None = None):
        labels = frozenset().union(*terms, output, *(x for x in sources or () if x))
        self.labels = sorted(labels, key=str)
        self.position = {x: i for i, x in enumerate(self.labels)}
        self.steps = _index(terms, output, path, sources)

    def price(self, sizes: Mapping[str, int], sliced: frozenset, num_slices: int,
              over: Excess = NO_LIMIT) -> tuple[int, int, int, int, float]:
        """``(flops, largest, peak, total, excess)`` of the path with ``sizes`` (a
        slice's), ``sliced`` and ``num_slices``: :func:`~.slicing.simulate`'s, exactly, and
        the path's excess over ``over``."""
        varies, held = [], []
        flops = largest = peak = current = total = 0
        excess = 0.0
        for step in self.steps:
            vary = any(varies[c] for c in step.consumes) or not step.operands.isdisjoint(sliced)
            # a result that runs once and feeds a step that runs each slice stays resident
            size_in = sum(held[c] for c in step.consumes if varies[c] or not vary)
            elements = prod(sizes[x] for x in step.kept)
            work = prod(sizes[x] for x in step.held) * (2 if step.sums else 1)
            flops += work * (num_slices if vary else 1)
            peak = max(peak, current + elements)
            excess += over.of(current + elements, elements)
            current += elements - size_in
            largest = max(largest, elements)
            total += elements
            varies.append(vary)
            held.append(elements)
        return flops, largest, peak, total, excess

    def price_each(self, sizes: Mapping[str, int], sliced: frozenset, num_slices: int,
                   over: Excess = NO_LIMIT) -> EachCost:
        """Each label's :class:`EachCost` entry: the path priced with ``sizes`` (a slice's),
        ``sliced`` and that label sliced to chunks of one (``num_slices`` times its size
        slices). A label already sliced, or of size one, has an entry of no meaning."""
        size = np.array([float(sizes[x]) for x in self.labels])
        cut = self._mask(sliced & frozenset(self.labels))
        count = len(self.labels)
        repeat = float(num_slices) * size  # the slices once a label is sliced too
        flops, largest, peak, total, excess, current = (np.zeros(count) for _ in range(6))
        results = []  # each step's result: (elements, whether it varies)
        for step, (held, kept, lineage) in zip(self.steps, self._vectors):
            varies = lineage | bool((lineage & cut).any())
            elements = _shrunk(size, kept, 1.0)
            work = _shrunk(size, held, 2.0 if step.sums else 1.0)
            flops += work * np.where(varies, repeat, 1.0)
            consumed = np.zeros(count)
            for c in step.consumes:
                # a result that runs once and feeds a step that runs each slice stays
                consumed += results[c][0] * (results[c][1] | ~varies)
            np.maximum(peak, current + elements, out=peak)
            excess += over.of(current + elements, elements)
            current += elements - consumed
            np.maximum(largest, elements, out=largest)
            total += elements
            results.append((elements, varies))
        return EachCost(flops, largest, peak, total, excess)

    @cached_property
    def _vectors(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each step's held and kept labels' positions, and its lineage: a mask of every
        label of the operands it descends from (slicing any makes it run once a slice)."""
        vectors = []
        for step in self.steps:
            lineage = np.logical_or.reduce(
                [self._mask(step.operands), *(vectors[c][2] for c in step.consumes)])
            vectors.append((self._positions(step.held), self._positions(step.kept), lineage))
        return vectors

    def _mask(self, labels) -> np.ndarray:
        mask = np.zeros(len(self.labels), dtype=bool)
        mask[[self.position[x] for x in labels]] = True
        return mask

    def _positions(self, labels) -> np.ndarray:
        return np.array(sorted(self.position[x] for x in labels), dtype=np.intp)


def _index(terms, output, path, sources=None) -> list[TableStep]:
    """The steps as :func:`~.slicing.simulate` walks them: first a step for each term a sum
    made from an operand (``sources``), then the path's, whose results keep the labels
    that a live term or the output still holds."""
    live = [frozenset(t) for t in terms]
    made = [None] * len(live)  # the step that made each live term (None: an operand)
    holders = Counter(x for t in live for x in t)
    steps = []
    for i, source in enumerate(sources or ()):
        if source is not None:
            steps.append(TableStep((), frozenset(source), tuple(source), tuple(live[i]),
                                   bool(frozenset(source) - live[i])))
            made[i] = len(steps) - 1
    for ids in path:
        union = frozenset().union(*(live[i] for i in ids))
        consumes = tuple(made[i] for i in ids if made[i] is not None)
        operands = frozenset().union(*(live[i] for i in ids if made[i] is None))
        for i in sorted(ids, reverse=True):
            holders.subtract(live[i])
            del live[i], made[i]
        kept = frozenset(x for x in union if holders[x] > 0 or x in output)
        steps.append(TableStep(consumes, operands, tuple(union), tuple(kept),
                               bool(union - kept)))
        live.append(kept)
        made.append(len(steps) - 1)
        holders.update(kept)
    return steps


def _shrunk(size: np.ndarray, positions: np.ndarray, scale: float) -> np.ndarray:
    """For each label, ``scale`` times the product of the sizes at ``positions``, that
    label's size left out where it is one of them."""
    whole = scale * float(np.prod(size[positions]))
    each = np.full(len(size), whole)
    each[positions] = whole / size[positions]
    return each
