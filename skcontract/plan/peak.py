"""The working set a plan's executor holds, step by step: what a byte budget bounds.

:mod:`.slicing` chooses slices on a model of label sets: the intermediates alive at once,
the results kept across slices and the output. The executor holds more while a step runs:
the copies it makes of the step's operands (a transpose into the product's (batch, rows,
columns) layout, the plan's ``needs_copy``; an operand viewed at a chunk of an inner axis,
which no reshape takes as a view), and on a GPU a complex product's real-form embedding.
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
                  itemsize: int, gpu: bool, viewed_cut: frozenset = frozenset(),
                  copies: bool = True) -> int:
    """The most bytes the steps hold at once, over the first slice and the later ones:
    intermediates alive, each step's result, and (``copies``) the copies it makes of its
    inputs: those its ``needs_copy`` flags, the operands in ``viewed_cut`` (slots viewed at
    a chunk of an inner axis), and on a GPU a complex product's embedding. The operands
    are the caller's and are not counted."""
    kept = frozenset(s.result for s, v in zip(steps, varies) if not v)
    first = _walk(steps, n_operands, result, kept, varies, itemsize, gpu, viewed_cut,
                  copies, later=False)
    if not kept:
        return first
    return max(first, _walk(steps, n_operands, result, kept, varies, itemsize, gpu,
                            viewed_cut, copies, later=True))


def _walk(steps, n_operands, result, kept, varies, itemsize, gpu, viewed_cut, copies,
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
        peak = max(peak, held + out + (_copies(s, gpu, viewed_cut) if copies else 0))
        alive[s.result] = out
        held += out
        for a in dict.fromkeys(s.args):
            if a >= n_operands and last[a] == j and a != result and a not in kept:
                held -= alive.pop(a, 0)
    return peak * itemsize


def _copies(step, gpu: bool, viewed_cut: frozenset) -> int:
    """The elements ``step`` copies of its inputs while it runs."""
    sizes = [prod(shape) for shape in step.input_shapes]
    n = sum(size for size, copied, a in zip(sizes, step.needs_copy, step.args)
            if copied or a in viewed_cut)
    if gpu and step.dtype.kind == "c" and step.kind in EMBEDDED_KINDS:
        n += COMPLEX_EMBED_UNITS * max(sizes)
    return n
