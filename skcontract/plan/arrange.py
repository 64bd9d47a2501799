"""The order of an intermediate's labels, chosen for the step that reads it.

A pairwise step writes its result as (batch, M, N), its M labels in A's order and its N
labels in B's (:func:`.classify.search_layout`). Where the step copies A anyway, the copy
can lay A's M labels in any order at no cost, and so B's N labels where it copies B. The
step that reads the result views it as a matrix without a copy only where the labels it
sums lie together after its batch labels, first or last, in the order its other operand
holds them. :func:`reader_hints` says, for each intermediate, what its reader sums and
batches over; :func:`arranged` orders a step's free groups to suit it. A tensor network's
steps copy most of their operands (a 3-regular graph's steps hold 40 labels of size 2, the
summed ones anywhere among them), and many of those copies go (docs/benchmarks/log.md,
twenty-second session). Off (:data:`ARRANGE`) until a GPU has run the arranged plans.

>>> hint = Hint(summed=("k",), batch=())
>>> arranged((), ("i", "k", "l"), ("j",), (True, False), hint)  # A copied: M is free
(('k', 'i', 'l'), ('j',))
>>> arranged((), ("i", "k", "l"), ("j",), (False, False), hint)  # A read as it lies
>>> arranged((), ("i", "j"), ("k",), (False, False), hint)  # already last
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

ARRANGE = False
"""Whether plans order their results for their readers. Off until it runs on a GPU with the
tall products' fold and the small complex products
(:data:`skcontract.kernels.small_batched.FOLD`, ``SINGLE_COMPLEX``; tools/device_cliffs.sh's
``CANDIDATES``): an arranged reader may read its operand column-major, uncopied, which a
tall complex product without them runs on its real form, and the 8 GiB plan of the open
circuit then holds 8.7 GB (docs/benchmarks/log.md)."""


class Hint(NamedTuple):
    """What the step that reads an intermediate asks of its labels' order: ``summed``, the
    labels it sums, and ``batch``, its batch labels the intermediate holds, each in the
    order its other operand holds them (sorted where that operand's writer is free to order
    them too: :func:`_free`)."""

    summed: tuple
    batch: tuple


def reader_hints(forms: Sequence, pair_form: type) -> dict[int, Hint]:
    """For each slot a pairwise form of ``forms`` writes and another pairwise form reads,
    the reader's :class:`Hint` (``pair_form``: the pairwise forms' type; each form has
    ``args``, ``result``, ``inputs``, ``orders`` = (batch, M, N, K) and ``needs_copy``)."""
    writers = {f.result: f for f in forms if type(f) is pair_form}
    hints: dict[int, Hint] = {}
    for f in forms:
        if type(f) is not pair_form:
            continue
        batch, _, _, summed = f.orders
        for pos, slot in enumerate(f.args):
            if slot not in writers:
                continue
            other = f.inputs[1 - pos]
            free = _free(writers.get(f.args[1 - pos]), set(summed))

            def order(labels, free=free, other=other):
                return tuple(sorted(labels)) if free else \
                    tuple(x for x in other if x in labels)
            hints[slot] = Hint(order(set(summed)), order(set(batch) & set(f.inputs[pos])))
    return hints


def _free(writer, labels: set) -> bool:
    """Whether the step that writes an operand (None: an operand as given) is free to
    order ``labels`` in it: they lie in a group it copies (A's M, B's N)."""
    if writer is None:
        return False
    _, m, n, _ = writer.orders
    return any(c and labels <= set(group) for c, group in zip(writer.needs_copy, (m, n)))


def _rankings(hint: Hint):
    """The two label orders a reader views without a copy, each as a rank of every label:
    (class, place) with the batch first, then the rest and the summed labels last, or the
    summed labels before the rest."""
    b = {x: (0, i) for i, x in enumerate(hint.batch)}
    for last in (True, False):
        s = {x: ((2 if last else 1), i) for i, x in enumerate(hint.summed)}
        rest = (1 if last else 2, 0)
        yield lambda x, s=s, rest=rest: b.get(x) or s.get(x) or rest


def _quality(labels, rank) -> int:
    """2 where ``labels`` lie in ``rank``'s order, 1 where only their classes do (the
    summed labels together, in another order), else 0."""
    ranks = [rank(x) for x in labels]
    if all(p <= q for p, q in zip(ranks, ranks[1:])):
        return 2
    return int(all(p[0] <= q[0] for p, q in zip(ranks, ranks[1:])))


def arranged(batch: tuple, m: tuple, n: tuple, copies: tuple[bool, bool],
             hint: Hint) -> tuple[tuple, tuple] | None:
    """New (M, N) orders of a step whose result (``batch`` + ``m`` + ``n``) ``hint``'s
    reader reads: the groups the step copies (``copies``: A's M, B's N) sorted to lie as
    the reader views them; None where that is no better than the orders given."""
    best, found = max(_quality(batch + m + n, r) for r in _rankings(hint)), None
    for rank in _rankings(hint):
        mm = tuple(sorted(m, key=rank)) if copies[0] else m
        nn = tuple(sorted(n, key=rank)) if copies[1] else n
        q = _quality(batch + mm + nn, rank)
        if q > best:
            best, found = q, (mm, nn)
    return found
