"""The working set a plan's executor holds, step by step: what a byte budget bounds.

:mod:`.slicing` chooses slices on a model of label sets: the intermediates alive at once,
the results kept across slices and the output. The executor holds more while a step runs:
the copies it makes of the step's operands (a transpose into the product's (batch, rows,
columns) layout, the plan's ``needs_copy``; an operand whose strides no such view takes,
:func:`view_copies`), and on a GPU what the launch or CuPy holds beside the step's result
(:func:`_device_room`): a complex product's real-form buffers (:func:`_embedded`), the
kernels' K-major copies and rows padded to 16 bytes (:func:`_kernel_copies`), an int8
product's int32 output, CuPy's matmul's contiguous copies (:func:`_matmul_room`), an OUTER
launch's rows (:func:`_outer_room`) and a float16 sum's float32 buffer (:func:`_half_sum`).
A plan is sliced before it is scheduled (its steps carry no launch yet): where the launch
would decide a copy, the larger case is counted; a scheduled plan's steps count what their
launches name.
:func:`executor_peak` walks the classified steps of a plan and counts them, on the first
slice and on the later ones (where the results of the steps that run once which a
varying step reads are already resident, :func:`resident`); :func:`~.plan.build_plan`
slices again, under a tighter budget, where they push the peak over it
(the H100 run of 2026-12-06 in docs/benchmarks/log.md: peaks 1.2-6x the label-set model).

::

    step j:  [ intermediates alive ] [ its result ] [ copies of its operands ]
              '-- slicing.simulate's peak --'        '-- counted here only --'
"""
from __future__ import annotations

from math import prod
from typing import Sequence

from ..kinds import GEMM_KINDS, Kind
from ..layout import copy_lines
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
ALIGNED_ROW_BYTES = 16
"""The kernels that read through TMA or in 16-byte vectors read lines (a row-major
matrix's rows, a column-major one's columns) that start on 16 bytes; an operand whose
lines or batches miss them may be copied, in its own layout, into lines padded to them
(:func:`skcontract.kernels.relayout.aligned`), where the resolver finds that sooner than
the portable kernel (:func:`skcontract.kernels.resolve.aligned_copies`)."""
KERNEL_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int8"})
"""The dtypes the GPU's GEMM kernels take
(:data:`skcontract.kernels.catalogue.INPUT_DTYPES`): a GEMM-class step of another runs on
CuPy's matmul, but a complex product with a real form (:data:`EMBEDDED_KINDS`)."""
DOT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "complex64",
                        "complex128"})
"""The dtypes of the Dot family (:data:`skcontract.kernels.catalogue.DOT_CATALOGUE`), which
runs a matrix-vector product or a batch of dots on its operands as they lie (complex ones
too)."""
DOT_KINDS = (Kind.GEMV, Kind.DOT)
"""The step kinds the Dot family runs (:data:`DOT_DTYPES`)."""
K_MAJOR_DTYPES = frozenset({"int8"})
"""The dtypes whose Wgmma entries read operands K-major only at any precision (int8's): an
unscheduled step of one copies an MN-major operand K-major
(:func:`skcontract.kernels.resolve.k_major_copies`) where its rows of K lie on 16 bytes.
float32's tf32 entries do too, and its 3xTF32 ones at "3xtf32" where the copy is cheap (the
default precision's 3xTF32 launches turn operands in their stages, never copy them), but
which runs is known only once the step is scheduled: an unscheduled float32 step is
counted as the default runs it, with no K-major copy (counting one would add an operand to
nearly every float32 product a plan is sliced for), and a plan the executors slice is
counted with its launches' own copies (:func:`skcontract.plan.build_plan`'s
``schedule``)."""
WIDE_OUTPUTS = {"int8": 4}
"""Bytes of the element a kernel writes for an operand dtype it accumulates wider: an int8
product's int32 output, cast to int8 after the launch (both held at once)."""
DIRECT_DTYPES = frozenset({"float16", "float32", "float64"})
"""The dtypes of the direct kernels: the small-batched kernel
(:mod:`skcontract.kernels.small_batched`) and the outer-product one
(:mod:`skcontract.kernels.outer`)."""
SMALL_COMPLEX_DTYPES: frozenset = frozenset()
"""The complex dtypes the small-batched kernel takes, in a batch of any size (down to one
product): such a product reads its operands as they lie, with no real form. None where
:data:`skcontract.kernels.small_batched.SINGLE_COMPLEX` is off (complex64 and complex128
with it on)."""
SMALL_MAX_DIM = 32
"""The largest rows, columns or K of a product the small-batched kernel takes
(:data:`skcontract.kernels.small_batched.MAX_DIM`); it reads its operands as they lie."""
SMALL_MIN_BATCH = 256
"""The fewest products the small-batched kernel takes
(:data:`skcontract.kernels.small_batched.MIN_BATCH`)."""
SMALL_FOLDS = False
"""Whether tall products fold into batches of small products
(:data:`skcontract.kernels.small_batched.FOLD`)."""
SMALL_FOLD_ROWS = 32
SMALL_FOLD_MIN_ROWS = 8
"""The most and fewest rows of A a tall product's folded products take
(:data:`skcontract.kernels.small_batched.FOLD_ROWS`, ``FOLD_MIN_ROWS``)."""
OUTER_MIN_ROW = 64
"""The shortest row the outer-product kernel writes
(:data:`skcontract.kernels.outer.MIN_ROW`); shorter ones stay on CuPy's broadcast multiply,
which copies nothing."""
HALF_SUM_UNITS = 2
"""CuPy sums float16 in a float32 buffer, cast to float16 after (both held at once): twice
the float16 result's room."""


def executor_peak(steps: Sequence, n_operands: int, varies: Sequence[bool], result: int,
                  itemsize: int, gpu: bool, cut_copies: frozenset = frozenset(),
                  copies: bool = True, kept: frozenset | None = None) -> int:
    """The most bytes the steps hold at once, over the first slice and the later ones:
    intermediates alive, each step's result, and (``copies``) the copies it makes of its
    inputs: those its ``needs_copy`` flags, the ``(step, position)`` pairs of
    ``cut_copies`` (:func:`view_copies`), and on a GPU what else its launch or CuPy holds
    beside its result (:func:`_device_room`). ``kept``: the results that stay through the
    slices (None: :func:`resident`).
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
    """The elements step ``j`` copies of its inputs while it runs (the conjugates it copies
    included: ``Step.conj_copies``, none where it will embed them, :func:`_embeds`), and on
    a GPU what else it holds beside its result (:func:`_device_room`)."""
    sizes = [prod(shape) for shape in step.input_shapes]
    copied = [c or (j, pos) in cut_copies for pos, c in enumerate(step.needs_copy)]
    if gpu and step.kind in GEMM_KINDS:
        sizes = _padded_copies(step, sizes)
    n = sum(size for size, c in zip(sizes, copied) if c)
    if any(step.conj) and not _embeds(step, gpu):
        n += sum(size for size, c in zip(sizes, step.conj_copies) if c)
    return n + (_device_room(step, copied) if gpu else 0)


def _padded_copies(step, sizes) -> list[int]:
    """The elements of a GEMM-class step's copies of its (A, B) inputs of ``sizes`` on a
    GPU: those its plan names (``needs_copy``) lie on lines (K of A, N of B) padded as
    :func:`skcontract.layout.copy_lines` says; a slice's view copied by its reshape does
    not."""
    return [size // line * padded if line else size
            for size, line, padded in zip(sizes, (step.k, step.n), copy_lines(step))]


def _embeds(step, gpu: bool) -> bool:
    """Whether a step not yet scheduled will run on a GPU as a complex product's real form,
    whose embedding reads its conjugated inputs without copies (a scheduled step says so
    itself: ``Step.conj_copies``)."""
    return gpu and step.launch is None and step.dtype.kind == "c" and \
        step.kind in EMBEDDED_KINDS and not _on_cupy(step) and not _small_complex(step)


def _device_room(step, copied) -> int:
    """The elements a step holds on a GPU beyond its result and the copies its plan names
    (``copied``): a GEMM-class step's (:func:`_product_room`), an OUTER step's
    (:func:`_outer_room`), a float16 sum's (:func:`_half_sum`)."""
    if step.kind in GEMM_KINDS:
        return _product_room(step, copied)
    if step.kind is Kind.OUTER:
        return _outer_room(step, copied)
    if step.kind is Kind.UNARY:
        return _half_sum(step)
    return 0


def _product_room(step, copied) -> int:
    """A GEMM-class step's room beyond its result: CuPy's matmul's copies where no kernel
    runs it (:func:`_matmul_room`); a complex product's real form (:func:`_embedded`,
    :func:`_embedded_pad`); else the kernels' operand copies (:func:`_kernel_copies`) and
    the wider output an int8 product is written in (:data:`WIDE_OUTPUTS`)."""
    if _on_cupy(step):
        return _matmul_room(step, copied)
    if step.dtype.kind == "c" and _real_form(step):
        return _embedded(step, copied) + _embedded_pad(step, copied)
    wide = WIDE_OUTPUTS.get(step.dtype.name, 0) // step.dtype.itemsize
    return _kernel_copies(step, copied) + wide * prod(step.output_shape)


def _real_form(step) -> bool:
    """Whether a complex GEMM-class step runs as its real form (:mod:`skcontract.kernels.embed`):
    its launch embeds an operand (a Dot form's launch and the small-batched kernel's read
    the operands as they lie), or, before the plan is scheduled, it is of
    :data:`EMBEDDED_KINDS` and not small (:func:`_small_complex`)."""
    if step.launch is not None:
        return getattr(step.launch, "embed", None) is not None
    return step.kind in EMBEDDED_KINDS and not _small_complex(step)


def _on_cupy(step) -> bool:
    """Whether CuPy's matmul runs a GEMM-class step: one its plan's schedule left without a
    launch (``unscheduled``: a dtype no kernel takes, a dimension past the kernels' index),
    or, before the plan is scheduled, one of a dtype no kernel takes
    (:data:`KERNEL_DTYPES`; a complex product of :data:`EMBEDDED_KINDS` runs on the real
    form, one of :data:`DOT_KINDS` on the Dot family). A dimension past the kernels' index
    is not foreseen there."""
    if step.unscheduled is not None:
        return True
    if step.launch is not None:
        return False
    return step.dtype.name not in KERNEL_DTYPES and not (
        step.dtype.kind == "c" and step.kind in EMBEDDED_KINDS + DOT_KINDS)


def _matrices(step) -> tuple[int, int]:
    """The matrices A and B hold: the batch, or one where the operand lacks the batch labels
    (read with batch stride 0; a copy of it is one matrix)."""
    return tuple(step.batch if held and step.batch_labels else 1
                 for held in step.holds_batch)


def _row_major(step, copied) -> tuple[bool, bool]:
    """Whether the (batch, rows, columns) views of A and B are row-major: copied first
    (C-contiguous), or so laid out."""
    return tuple(c or lay == "row" for c, lay in zip(copied, step.layouts))


def _kernel_copies(step, copied) -> int:
    """The elements of the copies the kernels' launch makes of a step's operands: K-major
    copies (:func:`_k_major`) or lines padded to :data:`ALIGNED_ROW_BYTES`
    (:func:`_padded`), as the launch names them (none for the Dot family's and the
    small-batched kernel's). Before the plan is scheduled, the larger of the two (a launch
    makes one or the other, which the schedule chooses by the device's entries and the
    kernels' predicted times), and none where the kernel that will take the step reads its
    operands as they lie (:func:`_as_they_lie`)."""
    launch = step.launch
    if launch is not None:
        none = (False, False)  # a launch without copies (small-batched) names none
        return _k_major(step, copied, getattr(launch, "copies", none)) + \
            _padded(step, copied, getattr(launch, "aligned_copies", none))
    if _as_they_lie(step):
        return 0
    return max(_k_major(step, copied, None), _padded(step, copied, None))


def _small(step, min_batch: int) -> bool:
    """Whether the small-batched kernel takes an unscheduled step's products: a batch of at
    least ``min_batch`` of sides at most :data:`SMALL_MAX_DIM`, or a tall product (a batch
    of one, not of :data:`DOT_KINDS`) whose rows fold into such a batch
    (:func:`skcontract.kernels.small_batched.plan_folded`)."""
    if max(step.n, step.k) > SMALL_MAX_DIM:
        return False
    if step.m <= SMALL_MAX_DIM:
        return step.batch >= min_batch
    if not SMALL_FOLDS or step.batch != 1 or step.kind in DOT_KINDS:
        return False
    rows = next((r for r in range(SMALL_FOLD_ROWS, SMALL_FOLD_MIN_ROWS - 1, -1)
                 if step.m % r == 0), None)
    return rows is not None and step.m // rows >= min_batch


def _small_complex(step) -> bool:
    """Whether a complex product not yet scheduled will run on the small-batched kernel (no
    real form): a batch of any size of sides at most :data:`SMALL_MAX_DIM`, or a tall
    product folded into one (:func:`_small`; :data:`SMALL_COMPLEX_DTYPES`; a scheduled
    one's launch says so itself)."""
    return step.dtype.name in SMALL_COMPLEX_DTYPES and _small(step, 1)


def _as_they_lie(step) -> bool:
    """Whether the kernel an unscheduled step will run on reads its operands as they lie:
    the small-batched kernel's batch of small products or a tall product folded into one
    (:func:`_small`, :data:`SMALL_MIN_BATCH`), the Dot family's matrix-vector product or
    batch of dots (which the views of contiguous operands always form)."""
    name = step.dtype.name
    if name in DIRECT_DTYPES and _small(step, SMALL_MIN_BATCH):
        return True
    return step.kind in DOT_KINDS and name in DOT_DTYPES


def _k_major(step, copied, flags) -> int:
    """The elements of the dense K-major copies (A row-major, B column-major) of the
    operands ``flags`` names, a broadcast operand's one matrix. ``flags`` None: those a
    :data:`K_MAJOR_DTYPES` step would copy, its MN-major operands where its rows of K lie
    on 16 bytes (and it has more than one column)."""
    m, n, k = step.m, step.n, step.k
    if flags is None:
        row_a, row_b = _row_major(step, copied)
        may = step.dtype.name in K_MAJOR_DTYPES and n > 1 and \
            (k * step.dtype.itemsize) % ALIGNED_ROW_BYTES == 0
        flags = (may and not (row_a or m == 1 or k == 1), may and row_b)
    ma, mb = _matrices(step)
    return flags[0] * ma * m * k + flags[1] * mb * k * n


def _padded(step, copied, flags) -> int:
    """The elements of the copies of the operands ``flags`` names into lines padded to
    :data:`ALIGNED_ROW_BYTES` (each matrix's lines, :func:`_lines`; a broadcast operand's
    one matrix). ``flags`` None: every operand whose lines or batches miss 16 bytes, those
    the plan copies on lines of :func:`skcontract.layout.copy_lines` (:func:`_padded_copies`)
    as those lines lie."""
    item = step.dtype.itemsize
    dims = ((step.m, step.k), (step.k, step.n))
    lines_copied = tuple(ld if c else None for ld, c in zip(copy_lines(step), step.needs_copy))
    n = 0
    for (rows, cols), row, held, flag, planned in zip(
            dims, _row_major(step, copied), _matrices(step), flags or (None, None),
            lines_copied):
        lines, length = _lines(rows, cols, row)
        line = planned if planned is not None else length
        if flag or (flag is None and _misses(lines, line, held, item)):
            n += held * lines * _whole_rows(length, item)
    return n


def _lines(rows: int, cols: int, row_major: bool) -> tuple[int, int]:
    """``(lines, elements a line)`` of a dense matrix as the kernels read it
    (:func:`skcontract.kernels.operands.matrix_layout`): a row-major one's rows, a
    column-major one's columns, but one of one column or one row is read as rows."""
    if row_major:
        return rows, cols
    if cols == 1:
        return rows, 1
    return (1, cols) if rows == 1 else (cols, rows)


def _misses(lines: int, length: int, held: int, item: int) -> bool:
    """Whether a dense operand's lines (its leading dimension, where it has more than one)
    or its batches (where it holds more than one matrix) miss 16 bytes
    (:func:`skcontract.kernels.operands.is_vec16` of a fresh array)."""
    ld = length if lines > 1 else 0
    return (ld * item) % ALIGNED_ROW_BYTES != 0 or \
        (held > 1 and (lines * length * item) % ALIGNED_ROW_BYTES != 0)


def _whole_rows(length: int, item: int) -> int:
    """``length`` elements of ``item`` bytes rounded up to whole 16-byte vectors."""
    per = max(1, ALIGNED_ROW_BYTES // item)
    return -(-length // per) * per


def _embed_side(step, copied) -> tuple[bool, bool]:
    """``(embeds B, A lies with its pairs along K)`` of a GPU complex product: B is embedded
    where A lies so, as rows, unless B lies so and holds fewer elements; A otherwise (the
    choice of :func:`skcontract.kernels.embed.embedding`)."""
    la, lb = ("row" if c else lay for c, lay in zip(copied, step.layouts))
    ma, mb = _matrices(step)
    a_reads, b_reads = la == "row", lb == "col"
    return (a_reads and not (b_reads and ma * step.m < mb * step.n)) or not b_reads, a_reads


def _embedded(step, copied) -> int:
    """The complex elements' room a GPU complex product's real form holds: the operand it
    embeds (:func:`_embed_side`), each element a 2 x 2 real block in rows padded to
    :data:`EMBED_ROW_BYTES`, and A copied row-major where neither operand lies with its
    pairs along K (``ascontiguousarray``: the whole batch, where A is broadcast over it).
    ``copied``: the operands the step copies first (row-major)."""
    embed_b, a_reads = _embed_side(step, copied)
    ma, mb = _matrices(step)
    m, n, k = step.m, step.n, step.k
    per = max(1, COMPLEX_EMBED_UNITS * EMBED_ROW_BYTES // step.dtype.itemsize)
    ld = -(-COMPLEX_EMBED_UNITS * k // per) * per  # a row's reals, padded
    if embed_b:
        return mb * n * ld + (0 if a_reads else step.batch * m * k)
    return ma * m * ld


def _embedded_pad(step, copied) -> int:
    """The complex elements' room of the real form's read operand (A, or B^T in the
    transposed product: rows of K (re, im) pairs) copied into rows padded to
    :data:`ALIGNED_ROW_BYTES`: where the launch names it (its A's ``aligned_copies``);
    before the plan is scheduled, where those rows or their batches miss 16 bytes. A's
    row-major copy (:func:`_embedded`) holds the whole batch."""
    embed_b, a_reads = _embed_side(step, copied)
    ma, mb = _matrices(step)
    lines, held = (step.m, ma if a_reads else step.batch) if embed_b else (step.n, mb)
    item = step.dtype.itemsize
    if step.launch is not None:
        pad = getattr(step.launch, "aligned_copies", (False, False))[0]
    else:
        pad = _misses(lines, step.k, held, item)
    return held * lines * _whole_rows(step.k, item) if pad else 0


def _matmul_room(step, copied) -> int:
    """The elements CuPy's matmul copies of a step's operand views. With a batch (3-D
    views), ``ascontiguousarray`` copies each view that is not C-contiguous: one copied by
    the plan and held whole is, one whose labels lie in the view's order too; an operand
    read with batch stride 0 is expanded to the whole batch. Without one (2-D), cuBLAS
    reads a C- or F-contiguous view as it lies, but CuPy's integer (and bool) kernel a
    C-contiguous one only."""
    bl, ml, nl, kl = step.batch_labels, step.m_labels, step.n_labels, step.k_labels
    groups = ((ml, kl, step.m * step.k), (kl, nl, step.k * step.n))
    n = 0
    for (rows, cols, size), term, c, held in zip(groups, step.inputs, copied,
                                                 step.holds_batch):
        if bl:
            n += 0 if held and (c or tuple(term) == bl + rows + cols) else step.batch * size
            continue
        lies = (rows + cols,) if step.dtype.kind in "biu" else (rows + cols, cols + rows)
        n += 0 if c or tuple(term) in lies else size
    return n


def _outer_room(step, copied) -> int:
    """The elements an OUTER step's launch copies of its operands: it reads them as (batch,
    M) and (batch, N) rows (``steps._launched_outer``), a copy of an operand whose labels of
    more than one element do not lie in that order (one the plan copies is counted once).
    A step without a launch runs CuPy's broadcast multiply, which copies nothing; but an
    OUTER step's plan does not say whether it is scheduled yet, so one without a launch
    that the kernel may take (:data:`DIRECT_DTYPES`, :data:`OUTER_MIN_ROW`) is counted (the
    larger case)."""
    if step.launch is None and (step.dtype.name not in DIRECT_DTYPES or
                                step.n < OUTER_MIN_ROW):
        return 0
    sizes = {x: d for term, shape in zip(step.inputs, step.input_shapes)
             for x, d in zip(term, shape)}
    n = 0
    for term, shape, group, c in zip(step.inputs, step.input_shapes,
                                     (step.m_labels, step.n_labels), copied):
        big = [x for x in term if sizes[x] > 1]
        if not c and big != [x for x in step.batch_labels + group if sizes[x] > 1]:
            n += prod(shape)
    return n


def _half_sum(step) -> int:
    """A float16 UNARY sum's float32 buffer, where CuPy sums it (the step has no launch: a
    scheduled one whose sum no Dot kernel's launch takes, or any before the plan is
    scheduled)."""
    if step.dtype.name != "float16" or not step.k_labels or step.launch is not None:
        return 0
    return HALF_SUM_UNITS * prod(step.output_shape)


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
