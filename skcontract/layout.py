"""How the GPU executor lays out the operand copies a plan's steps make.

A GEMM-class step whose operand's labels do not lie in the order its matrix product reads
them copies that operand into a (batch, rows, columns) matrix (the plan's ``needs_copy``).
On a GPU the copy's lines (its last axis) start on 16 bytes: the tensor-core kernels read
their operands through TMA, which needs lines on 16 bytes, and an operand whose lines miss
them would be copied a second time onto padded lines, or run on a slower kernel. A tensor
network's bonds of 3, 5 or 7 make such lines (5^6 = 15625 float32 elements, 62,500 bytes).
The planner (:func:`skcontract.kernels.resolve.step_product`), the peak model
(:mod:`skcontract.plan.peak`) and the executor (:mod:`skcontract.backends.cupy_backend`)
read a step's lines from :func:`copy_lines`, so that what is planned is what runs.
"""
from __future__ import annotations

COPY_ALIGN_BYTES = 16
"""The bytes a padded copy's lines start on: a TMA load's and a 16-byte vector's."""

COPY_PAD_MIN_LINE_BYTES = 256
"""The shortest line a copy pads: padding adds at most 12 bytes a line, under 5% from here;
shorter lines (a bond of 5 as K) would grow by up to 60%, and their products run on kernels
that read them as they lie."""

PADDED_COPY_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
"""The dtypes whose copies pad their lines: those of the real GEMM kernels that read 16-byte
lines (int8's launches copy K-major; complex products embed their operands)."""

PADDED_COPY_KINDS = frozenset({"GEMM", "BATCHED_GEMM"})
"""The step kinds (:class:`skcontract.kinds.Kind`, which equals its name) whose copies pad
their lines (the Dot family reads a matrix-vector product's or a batch of dots' operands as
they lie)."""


def copy_line(length: int, itemsize: int, dtype: str, kind: str) -> int:
    """The elements a line of ``length`` takes in a GPU step's copy of an operand of
    ``dtype`` (its name) in a step of ``kind`` (a Kind or its name): ``length`` rounded up
    to whole :data:`COPY_ALIGN_BYTES`, where the dtype and kind pad (:data:`PADDED_COPY_DTYPES`,
    :data:`PADDED_COPY_KINDS`) and the line is at least :data:`COPY_PAD_MIN_LINE_BYTES`
    long; else ``length``.

    >>> copy_line(15625, 4, "float32", "GEMM"), copy_line(64, 4, "float32", "GEMM")
    (15628, 64)
    """
    if dtype not in PADDED_COPY_DTYPES or kind not in PADDED_COPY_KINDS or \
            length * itemsize < COPY_PAD_MIN_LINE_BYTES:
        return length
    per = max(1, COPY_ALIGN_BYTES // itemsize)
    return -(-length // per) * per


def copy_lines(step) -> tuple[int, int]:
    """The (A, B) lines of a GEMM-class plan step's row-major operand views on a GPU, in
    elements: K and N, or where the step copies the operand (its ``needs_copy``), the
    copy's lines (:func:`copy_line`). ``step``: a plan step (``k``, ``n``, ``needs_copy``,
    ``dtype``, ``kind``)."""
    name, item = step.dtype.name, step.dtype.itemsize
    ca, cb = step.needs_copy
    return (copy_line(step.k, item, name, step.kind) if ca else step.k,
            copy_line(step.n, item, name, step.kind) if cb else step.n)
