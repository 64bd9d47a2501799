"""The working set a plan's executor holds, step by step: what a byte budget bounds.

:mod:`.slicing` chooses slices on a model of label sets: the intermediates alive at once,
the results kept across slices and the output. The executor holds more while a step runs:
the copies it makes of the step's operands (a transpose into the product's (batch, rows,
columns) layout, the plan's ``needs_copy``; an operand whose strides no such view takes,
:func:`view_copies`), and on a GPU a complex product's real-form buffers
(:func:`_embedded`).
:func:`executor_peak` walks the classified steps of a plan and counts them, on the first
slice and on the later ones (where the results of the steps that run once which a
varying step reads are already resident, :func:`resident`); :func:`~.plan.build_plan`
slices again, under a tighter budget, where they push the peak over it
(docs/benchmarks/networks-h100.md: peaks 1.2-6x the label-set model).

::

    step j:  [ intermediates alive ] [ its result ] [ copies of its operands ]
              '-- slicing.simulate's peak --'        '-- counted here only --'
"""
from __future__ import annotations

from math import prod
from typing import Sequence

from ..kinds import GEMM_KINDS, Kind
from .classify import view_ok

COMPLEX_EMBED_UNITS = 2
"""A complex element embedded in real form is a 2 x 2 block of reals: twice its room. A
complex GEMM or batched GEMM step on a GPU embeds one operand so (its rows padded to
:data:`EMBED_ROW_BYTES`); where neither operand lies with its (re, im) pairs along K, it
also copies the other one row-major (:mod:`skcontract.kernels.embed`)."""
EMBED_ROW_BYTES = 16
"""The embedded matrix's rows are whole 16-byte vectors (the kernels' loads)."""
EMBEDDED_KINDS = (Kind.GEMM, Kind.BATCHED_GEMM)
"""The step kinds whose complex products run on the embedding (Dot forms do not)."""


def executor_peak(steps: Sequence, n_operands: int, varies: Sequence[bool], result: int,
                  itemsize: int, gpu: bool, cut_copies: frozenset = frozenset(),
                  copies: bool = True, kept: frozenset | None = None) -> int:
    """The most bytes the steps hold at once, over the first slice and the later ones:
    intermediates alive, each step's result, and (``copies``) the copies it makes of its
    inputs: those its ``needs_copy`` flags, the ``(step, position)`` pairs of
    ``cut_copies`` (:func:`view_copies`), and on a GPU a complex product's real-form
    buffers. ``kept``: the results that stay through the slices (None: :func:`resident`).
    The operands are the caller's and are not counted."""
    kept = resident(steps, varies) if kept is None else kept
    first = _walk(steps, n_operands, result, kept, varies, itemsize, gpu, cut_copies,
                  copies, later=False)
    if not kept:
        return first
    return max(first, _walk(steps, n_operands, result, kept, varies, itemsize, gpu,
                            cut_copies, copies, later=True))


def resident(steps: Sequence, varies: Sequence[bool]) -> frozenset:
    """The results of the steps that run once (``varies`` false) which a step run each
    slice reads: they stay through the slices. The other results of such steps go once
    the last step reading them has run, on the first slice."""
    once = {s.result for s, v in zip(steps, varies) if not v}
    return frozenset(a for s, v in zip(steps, varies) if v for a in s.args if a in once)


def _walk(steps, n_operands, result, kept, varies, itemsize, gpu, cut_copies, copies,
          later: bool) -> int:
    """One slice's peak: the first (every step runs), or a later one (the ``kept`` results
    of the steps that run once resident from the start, only the varying steps run)."""
    last = {}
    for j, s in enumerate(steps):
        for a in s.args:
            last[a] = j
    alive = {s.result: prod(s.output_shape) for s in steps if later and s.result in kept}
    held = sum(alive.values())
    peak = 0
    for j, (s, vary) in enumerate(zip(steps, varies)):
        if later and not vary:
            continue
        out = prod(s.output_shape)
        peak = max(peak, held + out + (_copies(j, s, gpu, cut_copies) if copies else 0))
        alive[s.result] = out
        held += out
        for a in dict.fromkeys(s.args):
            if a >= n_operands and last[a] == j and a != result and a not in kept:
                held -= alive.pop(a, 0)
    return peak * itemsize


def _copies(j: int, step, gpu: bool, cut_copies: frozenset) -> int:
    """The elements step ``j`` copies of its inputs while it runs."""
    sizes = [prod(shape) for shape in step.input_shapes]
    copied = [c or (j, pos) in cut_copies for pos, c in enumerate(step.needs_copy)]
    n = sum(size for size, c in zip(sizes, copied) if c)
    if gpu and step.dtype.kind == "c" and step.kind in EMBEDDED_KINDS:
        n += _embedded(step, copied)
    return n


def _embedded(step, copied) -> int:
    """The complex elements' room a GPU complex product's real form holds: the operand it
    embeds (B where A lies with its pairs along K, as rows, unless B lies so and holds
    fewer elements; A otherwise), each element a 2 x 2 real block in rows padded to
    :data:`EMBED_ROW_BYTES`, and A copied row-major where neither lies so (the choice of
    :func:`skcontract.kernels.embed.embedding`). ``copied``: the operands the step copies
    first (row-major)."""
    la, lb = ("row" if c else lay for c, lay in zip(copied, step.layouts))
    ma, mb = (step.batch if held and step.batch_labels else 1 for held in step.holds_batch)
    m, n, k = step.m, step.n, step.k
    a_reads, b_reads = la == "row", lb == "col"
    per = max(1, COMPLEX_EMBED_UNITS * EMBED_ROW_BYTES // step.dtype.itemsize)
    ld = -(-COMPLEX_EMBED_UNITS * k // per) * per  # a row's reals, padded
    if (a_reads and not (b_reads and ma * m < mb * n)) or not b_reads:
        return mb * n * ld + (0 if a_reads else ma * m * k)
    return ma * m * ld


def view_copies(steps: Sequence, terms: Sequence, shapes: Sequence) -> frozenset:
    """``(step, operand position)`` of each GEMM-class step whose operand, as the executor
    holds it, is no (batch, rows, columns) view with a unit stride where the step's
    ``needs_copy`` (made for operands contiguous at the step's sizes) says it is: an
    operand (labels ``terms``, whole shape ``shapes``) viewed at a slice's chunks keeps the
    whole operand's strides, and a UNARY step's diagonal, or its sum transposed into the
    step's order, keeps its own. The executor copies such an operand (a reshape on the CPU;
    on a GPU a reshape, or a contiguous copy for the kernel)."""
    strides = {i: _contiguous(shape) for i, shape in enumerate(shapes)}
    out = set()
    for j, s in enumerate(steps):
        if s.kind is Kind.UNARY:
            if s.args[0] in strides:
                strides[s.result] = _unary_strides(s, strides[s.args[0]])
            continue
        if s.kind not in GEMM_KINDS:
            continue
        held = ((s.batch_labels, s.m_labels, s.k_labels),
                (s.batch_labels, s.k_labels, s.n_labels))
        for pos, (arg, term, shape, groups) in enumerate(zip(s.args, s.inputs,
                                                             s.input_shapes, held)):
            if s.needs_copy[pos] or arg not in strides:
                continue
            batch = groups[0] if set(groups[0]) <= set(term) else ()
            ok, _ = view_ok((batch,) + groups[1:], dict(zip(term, strides[arg])),
                            dict(zip(term, shape)))
            if not ok:
                out.add((j, pos))
    return frozenset(out)


def _contiguous(shape) -> list[int]:
    """The element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


def _unary_strides(step, strides: list[int]) -> list[int]:
    """The strides, in the order of ``step.output``, of a UNARY step's result on an
    operand of ``strides`` (as :func:`skcontract.backends.steps._unary` makes it): squeezed
    axes dropped, each diagonal a view whose stride is the sum of its two axes'; a sum is a
    fresh array in the order of the labels it keeps."""
    term = [x for ax, x in enumerate(step.inputs[0]) if ax not in step.squeeze]
    st = [d for ax, d in enumerate(strides) if ax not in step.squeeze]
    while len(set(term)) != len(term):
        lab = next(x for x in term if term.count(x) > 1)
        p = term.index(lab)
        q = term.index(lab, p + 1)
        merged = st[p] + st[q]
        term = [x for i, x in enumerate(term) if i not in (p, q)] + [lab]
        st = [d for i, d in enumerate(st) if i not in (p, q)] + [merged]
    kept = dict(zip(term, st))
    if step.k_labels:
        sizes = dict(zip(step.output, step.output_shape))
        order = [x for x in term if x not in step.k_labels]
        kept = dict(zip(order, _contiguous([sizes[x] for x in order])))
    return [kept[x] for x in step.output]
