"""The working set a plan's executor holds, step by step: what a byte budget bounds.

:mod:`.slicing` chooses slices on a model of label sets: the intermediates alive at once,
the results kept across slices and the output. The executor holds more while a step runs:
the copies it makes of the step's operands (a transpose into the product's (batch, rows,
columns) layout, the plan's ``needs_copy``), and on a GPU a complex product's real-form
embedding. :func:`executor_peak` walks the classified steps of a plan and counts them;
:func:`~.plan.build_plan` slices again, under a budget tightened by the difference, where
it is over (docs/benchmarks/networks-h100.md: peaks 1.2-6x the label-set model).

::

    step j:  [ intermediates alive ] [ its result ] [ copies of its operands ]
              '-- slicing.simulate's peak --'        '-- counted here only --'
"""
from __future__ import annotations

from math import prod
from typing import Sequence

from .classify import GEMM_KINDS

COMPLEX_EMBED_UNITS = 2
"""A complex GEMM-class step on a GPU holds its larger operand embedded in real form, at
twice its size (the ``[[re, -im], [im, re]]`` block), and its product in real form before
the complex result (one result more)."""


def executor_peak(steps: Sequence, n_operands: int, varies: Sequence[bool], result: int,
                  itemsize: int, gpu: bool) -> int:
    """The most bytes the steps hold at once: intermediates alive (results of steps that
    run once kept throughout), each step's result, and the copies it makes of its inputs
    (those its ``needs_copy`` flags, and on a GPU a complex product's embedding). The
    operands are the caller's and are not counted."""
    last = {}
    for j, s in enumerate(steps):
        for a in s.args:
            last[a] = j
    kept = {s.result for s, v in zip(steps, varies) if not v}
    alive: dict[int, int] = {}
    held = peak = 0
    for j, s in enumerate(steps):
        out = prod(s.output_shape)
        copies = sum(prod(shape) for shape, copied in zip(s.input_shapes, s.needs_copy)
                     if copied)
        if gpu and s.dtype.kind == "c" and s.kind in GEMM_KINDS:
            copies += COMPLEX_EMBED_UNITS * max(prod(x) for x in s.input_shapes) + out
        peak = max(peak, held + out + copies)
        alive[s.result] = out
        held += out
        for a in dict.fromkeys(s.args):
            if a >= n_operands and last[a] == j and a != result and a not in kept:
                held -= alive.pop(a, 0)
    return peak * itemsize
