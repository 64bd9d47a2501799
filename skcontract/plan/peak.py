"""The working set a plan's executor holds, step by step: what a byte budget bounds.

:mod:`.slicing` chooses slices on a model of label sets: the intermediates alive at once,
the results kept across slices and the output. The executor holds more while a step runs:
the copies it makes of the step's operands (a transpose into the product's (batch, rows,
columns) layout, the plan's ``needs_copy``; an operand viewed at a chunk of an axis its
label group merges with the one before, which no reshape takes as a view), and on a GPU a
complex product's real-form embedding.
:func:`executor_peak` walks the classified steps of a plan and counts them, on the first
slice and on the later ones (where every result of a step that runs once is already
resident); :func:`~.plan.build_plan` slices again, under a tighter budget, where they push
the peak over it (docs/benchmarks/networks-h100.md: peaks 1.2-6x the label-set model).

::

    step j:  [ intermediates alive ] [ its result ] [ copies of its operands ]
              '-- slicing.simulate's peak --'        '-- counted here only --'
"""
from __future__ import annotations

from math import prod
from typing import Sequence

from ..kinds import Kind

COMPLEX_EMBED_UNITS = 2
"""A complex GEMM or batched GEMM step on a GPU holds one operand embedded in real form, at
twice its size (the ``[[re, -im], [im, re]]`` block); the larger is counted."""
EMBEDDED_KINDS = (Kind.GEMM, Kind.BATCHED_GEMM)
"""The step kinds whose complex products run on the embedding (Dot forms do not)."""


def executor_peak(steps: Sequence, n_operands: int, varies: Sequence[bool], result: int,
                  itemsize: int, gpu: bool, cut_copies: frozenset = frozenset(),
                  copies: bool = True) -> int:
    """The most bytes the steps hold at once, over the first slice and the later ones:
    intermediates alive, each step's result, and (``copies``) the copies it makes of its
    inputs: those its ``needs_copy`` flags, the ``(step, position)`` pairs of
    ``cut_copies`` (an operand viewed at a chunk its reshape cannot keep as a view), and on
    a GPU a complex product's embedding. The operands are the caller's and are not
    counted."""
    kept = frozenset(s.result for s, v in zip(steps, varies) if not v)
    first = _walk(steps, n_operands, result, kept, varies, itemsize, gpu, cut_copies,
                  copies, later=False)
    if not kept:
        return first
    return max(first, _walk(steps, n_operands, result, kept, varies, itemsize, gpu,
                            cut_copies, copies, later=True))


def _walk(steps, n_operands, result, kept, varies, itemsize, gpu, cut_copies, copies,
          later: bool) -> int:
    """One slice's peak: the first (every step runs), or a later one (the results of the
    steps that run once resident from the start, only the varying steps run)."""
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
    n = sum(size for pos, (size, copied) in enumerate(zip(sizes, step.needs_copy))
            if copied or (j, pos) in cut_copies)
    if gpu and step.dtype.kind == "c" and step.kind in EMBEDDED_KINDS:
        n += COMPLEX_EMBED_UNITS * max(sizes)
    return n
