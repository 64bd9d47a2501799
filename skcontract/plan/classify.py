"""Classify one contraction step: its Kind, its label groups and its layout.

A pairwise step ``A[a-labels] * B[b-labels] -> C[c-labels]`` sorts its labels into four
groups, the vocabulary of a batched GEMM ``C[b, m, n] = sum_k A[b, m, k] B[b, k, n]``:

=========  ==========================================
group      labels that are in
=========  ==========================================
batch      A, B and C
m          A and C, not B
n          B and C, not A
k          A and B, not C (contracted)
=========  ==========================================

The Kind follows from which groups are non-trivial (a group is trivial when it has no
labels or all its labels have size 1, so a matrix product with M == 1 is a GEMV):

>>> classify_groups(batch=1, m=8, n=8, k=8).name, classify_groups(4, 8, 8, 8).name
('GEMM', 'BATCHED_GEMM')
>>> classify_groups(1, 8, 1, 8).name, classify_groups(1, 1, 1, 8).name
('GEMV', 'DOT')
>>> classify_groups(1, 8, 8, 1).name, classify_groups(8, 1, 1, 1).name
('OUTER', 'ELEMENTWISE')
"""
from __future__ import annotations

from math import prod
from typing import Mapping, Sequence

from functools import lru_cache

import numpy as np

from ..kinds import GEMM_KINDS, Kind

__all__ = ["Kind", "GEMM_KINDS", "classify_groups", "compute_dtype", "pair_groups",
           "choose_layout", "search_layout", "view_ok"]

def classify_groups(batch: int, m: int, n: int, k: int) -> Kind:
    """The Kind of a pairwise step from its group sizes (products of label sizes)."""
    has_m, has_n, has_k = m != 1, n != 1, k != 1
    if has_k:
        if has_m and has_n:
            return Kind.BATCHED_GEMM if batch != 1 else Kind.GEMM
        if has_m or has_n:
            return Kind.GEMV
        return Kind.DOT
    if has_m and has_n:
        return Kind.OUTER
    return Kind.ELEMENTWISE


@lru_cache(maxsize=None)
def compute_dtype(dtype) -> np.dtype:
    """The dtype a backend computes a step in: float16/bfloat16 go through float32."""
    dt = np.dtype(dtype)
    if dt.kind == "f" and dt.itemsize < 4 or dt.name == "bfloat16":
        return np.dtype(np.float32)
    return dt


def pair_groups(a: Sequence[str], b: Sequence[str], keep: set | frozenset):
    """Labels of a pairwise step sorted into (batch, m, n, k, a_only, b_only) sets.

    ``keep`` are the labels needed after the step (by the output or other operands).
    ``a_only``/``b_only`` are labels of one operand not kept: summed before the product.
    """
    sa, sb = set(a), set(b)
    batch = sa & sb & keep
    k = (sa & sb) - keep
    m = (sa - sb) & keep
    n = (sb - sa) & keep
    return batch, m, n, k, (sa - sb) - keep, (sb - sa) - keep


def _group_stride(group: Sequence[str], strides: Mapping[str, int],
                  sizes: Mapping[str, int]) -> int | None:
    """The single stride of ``group`` viewed as one dimension, or None if impossible."""
    live = [lab for lab in group if sizes[lab] != 1]
    if not live:
        return 0
    for outer, inner in zip(live, live[1:]):
        if strides[outer] != strides[inner] * sizes[inner]:
            return None
    return strides[live[-1]]


def view_ok(groups: Sequence[Sequence[str]], strides: Mapping[str, int],
            sizes: Mapping[str, int]) -> tuple[bool, bool]:
    """Whether an operand is viewable as (batch, rows, cols) with one unit inner stride.

    ``groups`` = (batch, rows, cols) label orders; ``strides`` in elements per label.
    Returns (ok, cols_contiguous): ok when every group merges into one stride (a reshape
    of a transposed view, no copy) and rows or cols has unit stride, as a GEMM kernel's
    leading-dimension convention needs.
    """
    gs = []
    for g in groups:
        st = _group_stride(g, strides, sizes)
        if st is None:
            return False, True
        gs.append(st)
    if gs[2] == 1 or prod([sizes[x] for x in groups[2]]) <= 1:
        return True, True
    if gs[1] == 1 or prod([sizes[x] for x in groups[1]]) <= 1:
        return True, False
    return False, True


def _contiguous_strides(term: Sequence[str], sizes: Mapping[str, int]) -> dict[str, int]:
    strides, acc = {}, 1
    for lab in reversed(term):
        strides[lab] = acc
        acc *= max(sizes[lab], 1)
    return strides


def _in_term_order(labels, term):
    return tuple([lab for lab in term if lab in labels])


BROADCAST_BATCH_MIN_ROWS = 64
"""A batch made of one operand's leading M (or N) labels must leave at least this many rows
(columns) a matrix: the GPU kernels' tiles are 64 to 256 rows, so fewer would pad every
batch's tiles where the copy it saves lets one product fill them."""


def _held(batch_order, term):
    """An operand's batch group: the batch labels in their order, or none where the operand
    lacks them (read with batch stride 0)."""
    return tuple(batch_order) if set(batch_order) <= set(term) else ()


def _candidates(a, b, batch, m_order, n_order, k, sizes):
    """(batch order, M order, N order, K order) candidates of :func:`choose_layout`: the
    batch and K labels in either operand's order (:func:`_shared_batch_candidates`), then,
    for a step without a batch that sums, the batches one operand's leading M (A) or N (B)
    labels make (:func:`_broadcast_batch_candidates`)."""
    yield from _shared_batch_candidates(a, b, batch, m_order, n_order, k)
    yield from _broadcast_batch_candidates(batch, m_order, n_order, _k_orders(a, b, k), k,
                                           sizes)


def _k_orders(a, b, k):
    """The K labels in A's order and in B's (once where they agree)."""
    return dict.fromkeys((_in_term_order(k, a), _in_term_order(k, b)))


def _shared_batch_candidates(a, b, batch, m_order, n_order, k):
    """The candidates whose batch labels both operands hold: the batch and K labels in
    either operand's order."""
    k_orders = _k_orders(a, b, k)
    for b_order in dict.fromkeys((_in_term_order(batch, a), _in_term_order(batch, b))):
        for k_order in k_orders:
            yield b_order, m_order, n_order, k_order


def _broadcast_batch_candidates(batch, m_order, n_order, k_orders, k, sizes):
    """For a step without a batch that sums, the batches one operand's leading M (A) or N
    (B) labels make, the other operand read with batch stride 0 (a broadcast view, no
    copy), where they leave :data:`BROADCAST_BATCH_MIN_ROWS` rows (columns)."""
    if batch or prod(sizes[x] for x in k) == 1:  # a batch of size 1 is still a batch
        return
    for j in range(1, len(m_order)):
        if prod(sizes[x] for x in m_order[j:]) >= BROADCAST_BATCH_MIN_ROWS:
            for k_order in k_orders:
                yield m_order[:j], m_order[j:], n_order, k_order
    for j in range(1, len(n_order)):
        if prod(sizes[x] for x in n_order[j:]) >= BROADCAST_BATCH_MIN_ROWS:
            for k_order in k_orders:
                yield n_order[:j], m_order, n_order[j:], k_order


def choose_layout(a: Sequence[str], b: Sequence[str], batch, m, n, k,
                  sizes: Mapping[str, int]):
    """Pick label orders for the groups that avoid copies, assuming both operands are
    C-contiguous in their term order (original operands as given; intermediates as
    produced, which is (batch, m, n)).

    Returns ``(orders, needs_copy, layouts)``: orders = (batch, m, n, k) label tuples;
    needs_copy = (a, b) booleans; layouts = the matrix layout of A (M x K) and of B
    (K x N), "row" (row-major: the column index contiguous) or "col" (column-major), the
    kernels' words (:func:`skcontract.kernels.operands.matrix_layout`); A "row" and B
    "col" are the K-major pair.
    The batch labels may be one operand's leading M or N labels (where that saves a copy);
    the other operand, which lacks them, is then read with batch stride 0
    (:attr:`~skcontract.plan.plan.Step.holds_batch`).
    """
    return search_layout(a, b, batch, m, n, k, sizes)[0]


def search_layout(a: Sequence[str], b: Sequence[str], batch, m, n, k,
                  sizes: Mapping[str, int]):
    """``(choose_layout's answer, by_class)``: ``by_class`` is whether the answer is a
    candidate whose batch both operands hold and that copies nothing, which depends only
    on which labels have size 0, 1 or more (the answer is then that of any sizes of the
    same classes); the other answers weigh the sizes themselves."""
    sa, sb = _contiguous_strides(a, sizes), _contiguous_strides(b, sizes)
    m_order, n_order = _in_term_order(m, a), _in_term_order(n, b)
    best = None
    for orders in _shared_batch_candidates(a, b, batch, m_order, n_order, k):
        best = _cheaper(best, _priced(a, b, orders, sa, sb, sizes))
        if best[0] == 0:  # no later candidate copies less than nothing
            return best[1:], True
    for orders in _broadcast_batch_candidates(batch, m_order, n_order, _k_orders(a, b, k),
                                              k, sizes):
        best = _cheaper(best, _priced(a, b, orders, sa, sb, sizes))
        if best[0] == 0:
            break
    return best[1:], False


def _cheaper(best, priced):
    """The cheaper of two priced candidates; of equals the earlier (``best``)."""
    return priced if best is None or priced[0] < best[0] else best


def _priced(a, b, orders, sa, sb, sizes):
    """``(elements copied, orders, needs_copy, layouts)`` of one candidate's ``orders``."""
    b_order, m_order, n_order, k_order = orders
    ok_a, a_kc = view_ok((_held(b_order, a), m_order, k_order), sa, sizes)
    ok_b, b_nc = view_ok((_held(b_order, b), k_order, n_order), sb, sizes)
    cost = (0 if ok_a else prod([sizes[x] for x in a])) + \
        (0 if ok_b else prod([sizes[x] for x in b]))
    return (cost, orders, (not ok_a, not ok_b),
            ("row" if a_kc else "col", "row" if b_nc else "col"))
