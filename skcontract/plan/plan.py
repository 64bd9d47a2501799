"""Frozen Plan / Step values: the ordered steps of a contraction, printable as a table.

A Plan is built from shapes and a dtype only (no arrays), so it can be computed once and
reused: ``contract_expression`` keeps one, ``contract_path`` returns one.

Slots: the operands are slots ``0 .. n-1``; each step reads the slots in ``Step.args`` and
writes the new slot ``Step.result``. ``Plan.result`` is the slot holding the final value,
whose axes are labelled ``Plan.result_labels``; a backend transposes it to ``Plan.output``.

Each original operand first gets (when needed) one UNARY step that drops broadcast
size-1 axes, takes diagonals of repeated labels and sums labels needed nowhere else.
Then the path's pairwise steps follow; every one has been classified (see
:mod:`skcontract.plan.classify`).

The launch: ``Step.launch`` is None until a plan is resolved for a device:
:func:`skcontract.kernels.resolve.schedule_plan` sets each GEMM-class step's launch (its
schedule, kernel and operand copies; ``Step.schedule`` is the launch's schedule), and
``Step.precision`` where a float32 precision such as "3xtf32" or "exact" was asked for (None:
float32 accuracy the fastest way, which the schedule's reason names).
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import lru_cache
from math import prod
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
from opt_einsum.paths import PathOptimizer

from ..dtypes import accumulator_dtype, float32_precision
from ..parse import Equation
from . import arrange
from .classify import (GEMM_KINDS, Kind, classify_groups, compute_dtype, pair_groups,
                       search_layout)
from .path import (ADAPTIVE, HYPER_DEFAULT_SHARE, HYPER_UNSLICED_SHARE, RECONF_TARGET_SHARE,
                   find_path, is_hyper, minimizes_flops, reconfigured_slices, search_seconds,
                   sliced_search)
from .peak import executor_peak, view_copies
from .slicing import (PEAK_MODEL_SHARE, Slicing, budget_of, choose_sliced_path,
                      host_memory_bytes, output_units, simulate)

__all__ = ["Step", "Plan", "build_plan"]


def _term(labels: Sequence[str]) -> str:
    return "".join(labels)


@dataclass(frozen=True)
class Step:
    """One step of a plan: a pairwise product-and-sum, or a UNARY reshaping/sum.

    For pairwise steps ``inputs == (a, b)`` and the result is
    ``C[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n]`` with the label groups in
    the orders given (``output == batch_labels + m_labels + n_labels``). For UNARY steps
    ``m_labels`` are the kept labels, ``k_labels`` the summed ones, ``squeeze`` the input
    axes dropped as size-1 broadcasts; repeated input labels are diagonals. ``precision``:
    the precision its GEMM kernel runs float32 operands at (None: exact; other dtypes
    ignore it). ``unscheduled``: why a GEMM-class step of a plan resolved for a GPU has no
    schedule (its operations fall back to CuPy's), shown in the plan's table. ``launch``:
    what the GPU launches for the step, made when the plan is resolved for a device
    (:class:`skcontract.kernels.step_launch.StepLaunch`: the schedule, the kernel, the
    operand copies); the table shows it. ``conj``: for each input, whether the step reads
    it conjugated (an operand einsum's ``conj=`` names: :func:`conjugated`; empty: none).
    """

    index: int
    kind: Kind
    args: tuple[int, ...]
    result: int
    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    batch_labels: tuple[str, ...]
    m_labels: tuple[str, ...]
    n_labels: tuple[str, ...]
    k_labels: tuple[str, ...]
    batch: int
    m: int
    n: int
    k: int
    dtype: np.dtype
    accumulator_dtype: np.dtype | None
    associative: bool
    needs_copy: tuple[bool, ...]
    layouts: tuple[str, ...]
    flops: int
    squeeze: tuple[int, ...] = ()
    precision: str | None = None
    unscheduled: str | None = None
    launch: Any = None
    conj: tuple[bool, ...] = ()

    @property
    def schedule(self):
        """The schedule the step's launch runs (None without a launch)."""
        return None if self.launch is None else self.launch.schedule

    @property
    def subscripts(self) -> str:
        """The step's einsum, an input it reads conjugated marked ``*``."""
        flags = self.conj or (False,) * len(self.inputs)
        return ",".join(_term(t) + ("*" if c else "") for t, c in zip(self.inputs, flags)) + \
            "->" + _term(self.output)

    @property
    def reduces(self) -> bool:
        """Whether the step sums over labels (K is not 1)."""
        return self.k != 1

    @property
    def float32_precision(self) -> str | None:
        """The precision this step's float32 operands run at: ``precision`` on a float32
        step ("exact" reads None), None (exact) otherwise."""
        return float32_precision(self.precision) if self.dtype.name == "float32" else None

    @property
    def holds_batch(self) -> tuple[bool, ...]:
        """Whether each input carries the batch labels. A step without a shared batch may
        take one operand's leading M (or N) labels as its batch; the other operand then
        lacks them and is read with batch stride 0 (a broadcast view), where viewing the
        labels as M (or N) would need a copy."""
        if not self.batch_labels:
            return (True,) * len(self.inputs)
        return tuple([set(self.batch_labels) <= set(term) for term in self.inputs])

    @property
    def is_gemm_class(self) -> bool:
        """Whether a (batched) GEMM kernel, scheduled by Stream-K, runs this step."""
        return self.kind in GEMM_KINDS

    @property
    def problem(self) -> tuple[int, int, int, int]:
        """``(m, n, k, batch)``: the arguments of the scheduler."""
        return self.m, self.n, self.k, self.batch

    def _group(self, labels, size) -> str:
        return f"{_term(labels)}={size}" if labels else "-"

    def _batch_column(self) -> str:
        """The batch group, naming the operand read with batch stride 0 where one lacks
        the batch labels (:attr:`holds_batch`)."""
        text = self._group(self.batch_labels, self.batch)
        lacking = [x for x, held in zip("AB", self.holds_batch) if not held]
        return f"{text} ({lacking[0]} broadcast)" if lacking else text

    @property
    def conj_copies(self) -> tuple[bool, ...]:
        """For each input, whether the step conjugates it into a copy: every input it reads
        conjugated (``conj``) but where its launch reads them so itself (a complex product's
        embedding: ``StepLaunch.reads_conjugated``)."""
        if getattr(self.launch, "reads_conjugated", False):
            return (False,) * len(self.inputs)
        return self.conj or (False,) * len(self.inputs)

    def row(self) -> tuple[str, ...]:
        unary = self.kind is Kind.UNARY
        copy = ",".join([x for x, c in zip("AB", self.needs_copy) if c] +
                        [f"{x}*" for x, c in zip("AB", self.conj_copies) if c]) or "-"
        if not self.reduces:
            red = "-"
        else:
            acc = self.accumulator_dtype.name if self.accumulator_dtype is not None else "?"
            red = f"sum{' assoc' if self.associative else ''} {acc}"
        sched = "-" if self.launch is None else self.launch.summary(self.conj)
        if self.launch is None and self.unscheduled:
            sched = f"- ({self.unscheduled})"
        if self.float32_precision is not None:
            sched = f"{self.float32_precision}: {sched}"
        return (str(self.index), self.subscripts, self.kind.value,
                "-" if unary else self._batch_column(),
                self._group(self.m_labels, self.m),
                "-" if unary else self._group(self.n_labels, self.n),
                self._group(self.k_labels, self.k), f"{self.flops:,}", copy, red, sched)


_HEADER = ("#", "step", "kind", "batch", "M", "N", "K", "FLOPs", "copy", "reduction",
           "schedule")
UNPRICED_HINT = ("no GPU schedules priced: pass device='h200' (or 'h100', or 'gpu' for the "
                 "current one) to see what the GPU launches")
"""What a plan made for no device says of its GEMM-class steps' schedules."""


LEGEND_WIDTH = 100
"""The characters a line of a plan's legend holds at most (more where one entry is longer)."""


def _legend_lines(legend) -> list[str]:
    """The interleaved form's labels behind the plan's symbols, ``symbol=label``, a few to a
    line (:attr:`skcontract.parse.Equation.legend`); none for subscripts as written."""
    lines: list[str] = []
    line = "labels:"
    for sym, label in legend:
        entry = f" {sym}={label!r}"
        if len(line) + len(entry) > LEGEND_WIDTH and line != "labels:":
            lines.append(line)
            line = "       "
        line += entry
    return lines + [line] if legend else []


@dataclass(frozen=True)
class Plan:
    """A contraction planned for given shapes, dtype and target device.

    >>> from skcontract import contract
    >>> path, plan = contract.contract_path('ij,jk->ik', (8, 4), (4, 16), shapes=True)
    >>> plan.steps[0].kind.value, plan.steps[0].problem
    ('GEMM', (8, 16, 4, 1))
    """

    equation: Equation
    steps: tuple[Step, ...]
    path: tuple[tuple[int, ...], ...]
    dtype: np.dtype
    result: int
    result_labels: tuple[str, ...]
    device: Any = None
    #: for each original operand, the slot its (unary-processed) value lives in
    operand_slots: tuple[int, ...] = field(default=())
    #: the slices the plan runs in (None: unsliced); its steps are then a slice's
    slicing: Slicing | None = None
    #: the operands read conjugated (einsum's ``conj=``: :func:`conjugated`)
    conj: tuple[int, ...] = ()
    #: whether the result slot holds a conjugated operand's value (no step read it: a
    #: view or a unary step's result), so the run conjugates it last
    conj_result: bool = False

    @property
    def subscripts(self) -> str:
        return self.equation.subscripts

    @property
    def output(self) -> tuple[str, ...]:
        return self.equation.output

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.equation.shapes

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(self.equation.sizes[x] for x in self.equation.output)

    @property
    def output_perm(self) -> tuple[int, ...]:
        """Axes of the result slot in the order of the output labels."""
        return tuple(self.result_labels.index(x) for x in self.equation.output)

    @property
    def flops(self) -> int:
        return sum(s.flops for s in self.steps)

    @property
    def largest_intermediate(self) -> int:
        """The elements of the largest array a step makes (a UNARY step that only views its
        operand, a diagonal or size-1 axes dropped, makes none)."""
        return max((prod(s.output_shape) for s in self.steps
                    if s.kind is not Kind.UNARY or s.k_labels), default=0)

    def sliced_axes(self) -> tuple[tuple[bool, ...], ...]:
        """For each operand axis, whether a slice views it at a chunk (a sliced label that
        the operand does not broadcast)."""
        cut = set(self.slicing.labels) if self.slicing is not None else set()
        return tuple(tuple(lab in cut and d != 1 for lab, d in zip(t, s))
                     for t, s in zip(self.equation.inputs, self.equation.shapes))

    def step_varies(self) -> tuple[bool, ...]:
        """For each step, whether it runs once a slice: it reads an operand viewed at a
        chunk, or a result of a step that does (the others run once)."""
        varies = {i: any(axes) for i, axes in enumerate(self.sliced_axes())}
        for s in self.steps:
            varies[s.result] = any(varies.get(a, False) for a in s.args)
        return tuple(varies[s.result] for s in self.steps)

    def table(self) -> str:
        rows = [_HEADER] + [s.row() for s in self.steps]
        if self.slicing is not None:
            rows = [r + (runs,) for r, runs in zip(rows, ("runs", *(
                "each slice" if v else "once" for v in self.step_varies())))]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        head = (f"Plan {self.subscripts!r}: {len(self.equation.inputs)} operand(s) "
                f"{', '.join(str(s) for s in self.equation.shapes)} -> "
                f"{self.output_shape}, dtype {self.dtype.name}")
        if any(s.schedule is not None or s.unscheduled for s in self.steps):
            dev = getattr(self.device, "name", "?")
            head += (f"; schedules: what the GPU backend launches on {dev} (the NumPy "
                     "backend runs none)")
        head = "\n".join([head, *_legend_lines(self.equation.legend)])
        tail = (f"path {list(self.path)}; total FLOPs {self.flops:,}; largest intermediate "
                f"{self.largest_intermediate:,} elements")
        if self.device is None and any(s.is_gemm_class for s in self.steps):
            tail += "\n" + UNPRICED_HINT
        if self.slicing is not None:
            tail += "\n" + self.slicing.describe()
        if self.conj:
            tail += (f"\nconj: operand(s) {', '.join(map(str, self.conj))} read conjugated "
                     "(* in a step; A* / B* under copy: conjugated into a copy)" +
                     ("; the result conjugated last" if self.conj_result else ""))
        return "\n".join([head, *lines, tail])

    __str__ = table

    def __repr__(self) -> str:
        return self.table()


def conjugated(plan: Plan, conj: tuple[int, ...]) -> Plan:
    """``plan`` with the operands ``conj`` (their positions) read conjugated: each step that
    reads one has its ``conj`` flag set for that input. A UNARY step (a diagonal, a sum, a
    transpose: real and linear, so it commutes with conjugation) passes the mark on to its
    result instead; where the result slot still holds a marked value, the run conjugates it
    last (``conj_result``)."""
    if not conj:
        return plan
    marked = set(conj)
    steps = []
    for s in plan.steps:
        flags = tuple([a in marked for a in s.args])
        marked.discard(s.result)
        if s.kind is Kind.UNARY and any(flags):
            marked.add(s.result)
        elif any(flags):
            s = replace(s, conj=flags)
        steps.append(s)
    return replace(plan, steps=tuple(steps), conj=tuple(sorted(conj)),
                   conj_result=plan.result in marked)


_STEP_DEFAULTS = {f.name: f.default for f in fields(Step) if f.default is not MISSING}


def _new_step(**values) -> Step:
    """``Step(**values)`` with its instance dict filled at once: a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, most of the cost of a step
    sized for new shapes. (Step has no ``__post_init__`` to run.)"""
    step = object.__new__(Step)
    fields_of = step.__dict__
    fields_of.update(_STEP_DEFAULTS)
    fields_of.update(values)
    return step


_accumulator = lru_cache(maxsize=None)(accumulator_dtype)
""":func:`skcontract.dtypes.accumulator_dtype`, worked out once for each dtype."""

FORMS_KEPT = 1024
"""The step forms (:func:`_unary_forms`, :func:`_skeleton`) kept for reuse: a form holds
what a step is without its sizes, so plans of new sizes of a known structure reuse it."""
_MANY = 2
"""The least size of the class "more" (the size classes: 0, 1, more; :func:`_small_labels`)."""


class _UnaryForm(NamedTuple):
    """A UNARY step without its sizes: the slot it reads, the slot it writes, the operand's
    labels, the labels it keeps (in order) and sums, and the axes it squeezes."""

    arg: int
    result: int
    term: tuple[str, ...]
    output: tuple[str, ...]
    summed: tuple[str, ...]
    squeeze: tuple[int, ...]


class _PairForm(NamedTuple):
    """A pairwise step without its sizes: the slots it reads, the slot it writes, the
    operands' labels, the (batch, M, N, K) label orders, the result's labels (batch, M, N),
    the copies and the matrix layouts (:func:`~.classify.choose_layout`)."""

    args: tuple[int, int]
    result: int
    inputs: tuple[tuple[str, ...], tuple[str, ...]]
    orders: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    needs_copy: tuple[bool, bool]
    layouts: tuple[str, str]


class _Skeleton(NamedTuple):
    """The steps that run a path, without their sizes: their forms, the result's slot and
    labels, and ``by_class``: whether the labels' size classes decide them (0, 1, more:
    :func:`~.classify.search_layout`), so that any sizes of those classes have them."""

    forms: tuple
    result: int
    result_labels: tuple[str, ...]
    by_class: bool


def _unary_form(slot, new_slot, term, squeeze, keep) -> _UnaryForm | None:
    """The UNARY step of the operand in ``slot``, labelled ``term``, that drops its
    ``squeeze`` axes (broadcast size-1 ones), takes the diagonals of repeated labels and
    sums the labels not in ``keep``; None where that is nothing."""
    if not squeeze and len(set(term)) == len(term) and keep.issuperset(term):
        return None
    t = [lab for ax, lab in enumerate(term) if ax not in squeeze]
    uniq = tuple(dict.fromkeys(t))
    summed = tuple(lab for lab in uniq if lab not in keep)
    if not squeeze and len(uniq) == len(t) and not summed:
        return None
    out = tuple(lab for lab in uniq if lab in keep)
    return _UnaryForm(slot, new_slot, tuple(term), out, summed, squeeze)


def _unary_step(index, form: _UnaryForm, shape, sizes, dtype) -> Step:
    """The UNARY step of ``form`` on an operand of ``shape``."""
    out, summed = form.output, form.summed
    size = sizes.__getitem__
    m, k = prod(map(size, out)), prod(map(size, summed))
    return _new_step(index=index, kind=Kind.UNARY, args=(form.arg,), result=form.result,
                     inputs=(form.term,), output=out, input_shapes=(tuple(shape),),
                     output_shape=tuple(map(size, out)), batch_labels=(), m_labels=out,
                     n_labels=(), k_labels=summed, batch=1, m=m, n=1, k=k, dtype=dtype,
                     accumulator_dtype=_accumulator(dtype), associative=True,
                     needs_copy=(False,), layouts=("-",), flops=m * k if summed else 0,
                     squeeze=form.squeeze)


def _pair_form(slots, new_slot, a, b, keep, sizes, hint: arrange.Hint | None = None
               ) -> tuple[_PairForm, bool]:
    """``(form, by_class)`` of the pairwise step of the terms ``a`` and ``b`` that keeps
    the labels in ``keep`` (:func:`~.classify.search_layout`); ``hint``: what the step
    reading its result asks of the result's order (:func:`.arrange.arranged`)."""
    batch, ms, ns, ks, a_only, b_only = pair_groups(a, b, keep)
    if a_only or b_only:  # the unary pre-pass makes this impossible
        raise AssertionError(f"labels {sorted(a_only | b_only)} should have been summed")
    (orders, copies, layouts), by_class = search_layout(a, b, batch, ms, ns, ks, sizes)
    bo, mo, no, ko = orders
    better = None if hint is None else arrange.arranged(bo, mo, no, copies, hint)
    if better is not None:
        mo, no = better
        orders = (bo, mo, no, ko)
    return _PairForm(tuple(slots), new_slot, (tuple(a), tuple(b)), orders, bo + mo + no,
                     copies, layouts), by_class


def _pair_step(index, form: _PairForm, sizes, dtype) -> Step:
    """The pairwise step of ``form`` at ``sizes``: its group sizes, Kind and FLOPs."""
    a, b = form.inputs
    bo, mo, no, ko = form.orders
    size = sizes.__getitem__
    B, M, N, K = prod(map(size, bo)), prod(map(size, mo)), prod(map(size, no)), \
        prod(map(size, ko))
    return _new_step(index=index, kind=classify_groups(B, M, N, K), args=form.args,
                     result=form.result, inputs=form.inputs, output=form.output,
                     input_shapes=(tuple(map(size, a)), tuple(map(size, b))),
                     output_shape=tuple(map(size, form.output)), batch_labels=bo,
                     m_labels=mo, n_labels=no, k_labels=ko, batch=B, m=M, n=N, k=K,
                     dtype=dtype, accumulator_dtype=_accumulator(dtype), associative=True,
                     needs_copy=form.needs_copy, layouts=form.layouts,
                     flops=B * M * N * (2 * K if K != 1 else 1))


EXECUTOR_RETRIES = 4
"""Times a plan is sliced again, under a budget tightened by how far its steps' copies
(:func:`.peak.executor_peak`) overshoot, before the limit is refused."""
EXECUTOR_TIGHTEN = 0.8
"""The least a retry tightens the slicer's budget by (it also goes below the plan's own
label-set peak, so that the slicer must slice further)."""


def build_plan(eq: Equation, dtype=np.float64, optimize: Any = "adaptive",
               memory_limit: Any = None, device: Any = None, slicing: Any = True,
               schedule: Callable[[Plan], Plan] | None = None,
               conj: tuple[int, ...] = ()) -> Plan:
    """Plan ``eq`` for operands of ``dtype`` on ``device`` (a DeviceInfo or None), kept
    under ``memory_limit`` by slicing (:mod:`.slicing`; ``slicing``: True to choose the
    slices, False to refuse, or the labels / ``{label: chunk}`` to slice). A hyper
    optimiser's ``max_time`` bounds its searches: under a limit it may have to slice, the
    unsliced search takes :data:`~.path.HYPER_UNSLICED_SHARE` of it and the search that
    slices as it goes the rest; where it minimises FLOPs (cotengra's default objective),
    the default optimiser's plan, planned after them (its repaths within
    :data:`~.path.HYPER_DEFAULT_SHARE` of ``max_time``), is kept where it costs fewer FLOPs
    or where the searched path cannot keep the limit (:func:`_default_plan`).
    ``schedule``: how the executor schedules a plan for ``device`` (a GPU's launches, with
    the call's options), or None: where given, the copies the plan's steps make of their
    operands are counted as its launches make them, not as the larger of those a launch
    might make. ``conj``: the operands the run reads conjugated (:func:`conjugated`), whose
    copies the budget counts where a step makes them; the plan returned is not marked."""
    dtype = np.dtype(dtype)
    unary = _unary_pass(eq, dtype)
    terms = unary.terms
    budget = None if memory_limit is None else budget_of(
        memory_limit, [prod(s) for s in eq.shapes], _memory_bytes(device))
    seconds = seconds_total = search_seconds(optimize)
    deadline = None if seconds is None else time.monotonic() + seconds
    if deadline is not None and budget is not None and slicing is True:
        seconds *= HYPER_UNSLICED_SHARE  # the rest for the search that slices as it goes
    path = find_path(terms, eq.output, eq.sizes, optimize, seconds)
    fit = _Fit(budget, device, slicing, schedule, tuple(conj))
    if not (is_hyper(optimize) and minimizes_flops(optimize)):
        return _kept(eq, dtype, unary, path, fit, optimize, deadline)
    try:
        plan = _kept(eq, dtype, unary, path, fit, optimize, deadline)
    except ValueError as e:  # the searched path does not fit: the default's may
        plan, refusal = None, e
    until = None if seconds_total is None else \
        time.monotonic() + seconds_total * HYPER_DEFAULT_SHARE
    default = _default_plan(eq, dtype, unary, fit, until)
    if plan is None:
        if default is None:
            raise refusal
        return default
    return default if default is not None and _plan_flops(default) < _plan_flops(plan) \
        else plan


def _default_plan(eq: Equation, dtype, unary, fit: _Fit,
                  repath_until: float | None = None) -> Plan | None:
    """The plan of the default optimiser's path (:data:`~.path.ADAPTIVE`), sliced and
    repathed as that optimiser's plans are, which a hyper optimiser's plan must beat to be
    kept: cotengra's trials take seconds each on hundreds of tensors, and a search of few
    trials may find a path that costs far more (on the benchmark's closed circuit at 8 GiB,
    160x the default's FLOPs: docs/benchmarks/log.md, thirteenth session); None where the
    default's slices do not keep the budget. Planned after the searches, outside their
    ``max_time``: run first, its seconds of slicing on a poor path would leave the searches
    none (the random regular graph's at 1 GiB). Its repaths at sliced sizes stop at
    ``repath_until`` (a ``time.monotonic()``; :data:`~.path.HYPER_DEFAULT_SHARE`)."""
    path = find_path(unary.terms, eq.output, eq.sizes, ADAPTIVE)
    try:
        return _kept(eq, dtype, unary, path, fit, ADAPTIVE, repath_until=repath_until)
    except ValueError:
        return None


class _Fit(NamedTuple):
    """What a plan is fitted to (:func:`_kept`): the budget (None: none), the device, the
    caller's ``slicing``, the executor's scheduler and the operands read conjugated
    (:func:`build_plan`)."""

    budget: Any
    device: Any
    slicing: Any
    schedule: Callable[[Plan], Plan] | None
    conj: tuple[int, ...] = ()


def _kept(eq: Equation, dtype, unary, path, fit: _Fit, optimize,
          deadline: float | None = None, repath_until: float | None = None) -> Plan:
    """The plan of ``path`` sliced so that its executor's peak, its steps' copies included
    (:func:`executor_bytes`), keeps ``budget``: sliced again under a tighter budget where
    the copies push it over, at most :data:`EXECUTOR_RETRIES` times; ValueError where no
    slicing tried fits, or where the slices are named (or refused) and do not fit.
    ``deadline`` (``time.monotonic()``'s): when a hyper optimiser's search ends. Where a
    hyper optimiser's search that slices as it goes gives the path kept, ``path`` is
    fitted too, without the searches, and the plan of fewer FLOPs kept: the two are
    compared on the label-set model, before the copies are counted. ``repath_until``:
    when the slicer's repaths stop (:func:`~.slicing.choose_sliced_path`)."""
    plan = _fitted(eq, dtype, unary, path, fit, optimize, deadline, repath_until=repath_until)
    if tuple(map(tuple, plan.path)) == tuple(map(tuple, path)):
        return plan
    try:
        first = _fitted(eq, dtype, unary, path, fit, optimize, search=False)
    except ValueError:
        return plan
    return first if _plan_flops(first) < _plan_flops(plan) else plan


def _plan_flops(plan: Plan) -> float:
    """A plan's FLOPs over all its slices."""
    return plan.flops if plan.slicing is None else plan.slicing.flops


def _fitted(eq: Equation, dtype, unary, path, fit: _Fit, optimize,
            deadline: float | None = None, search: bool = True,
            repath_until: float | None = None) -> Plan:
    """:func:`_kept`'s plan of ``path`` under ``fit.budget``, sliced again under a tighter
    budget where the steps' copies (as ``fit.schedule``'s launches make them, where given)
    push it over; ``search``: the first try asks the optimiser for other paths
    (:func:`_sliced`'s ``reconfigure``)."""
    terms = unary.terms
    budget, device, slicing = fit.budget, fit.device, fit.slicing
    tight, need, smallest = budget, None, None
    for _ in range(EXECUTOR_RETRIES + 1):
        try:
            sliced, run_path = _sliced(terms, eq, path, tight, dtype, device, slicing,
                                       optimize, reconfigure=search and need is None,
                                       deadline=deadline, sources=_sum_sources(eq, unary),
                                       repath_until=repath_until)
        except ValueError:
            if need is None:  # the caller's own budget: the slicer's message stands
                raise
            break  # a tightened budget nothing keeps
        plan = _assemble(eq, dtype, run_path, sliced, unary, device)
        path = run_path  # a retry slices the path found (a search's that slices as it goes)
        if budget is None or budget.bytes is None:
            return _with_executor_peak(plan)
        need = executor_bytes(conjugated(plan if fit.schedule is None else fit.schedule(plan),
                                         fit.conj))
        smallest = need if smallest is None else min(smallest, need)
        allowed = int(budget.bytes * PEAK_MODEL_SHARE)
        if need <= allowed:
            return _with_executor_peak(plan, need)
        if slicing is not True:  # named slices, or none: nothing to slice again
            what = "slicing=False refuses to slice it" if slicing is False else \
                f"slicing {sorted(plan.slicing.labels) if plan.slicing else []} leaves it"
            raise ValueError(f"memory_limit {budget.text}: the plan's steps hold {need:,} "
                             "bytes at their peak (their results and the copies of their "
                             f"operands), over the {allowed:,} the budget leaves; {what}")
        # below the plan's own label-set peak, so that the slicer must slice further
        label = executor_bytes(plan, copies=False)
        tight = replace(tight, bytes=max(1, int(min(tight.bytes * EXECUTOR_TIGHTEN,
                                                    label * allowed / need / PEAK_MODEL_SHARE))))
    raise ValueError(f"memory_limit {budget.text}: no slicing tried fits; with its steps' "
                     f"copies of their operands the smallest peak was {smallest:,} bytes, "
                     f"over the {allowed:,} the budget leaves")


def with_launch_peak(plan: Plan) -> Plan:
    """A sliced ``plan`` scheduled for a device with its predicted peak from its steps' own
    launches: planned, before the schedule, each GEMM-class step counts the larger of the
    copies a launch might make (:func:`.peak._kernel_copies`); scheduled, the copies its
    launch makes (the H100 run of docs/benchmarks/networks-h100.md measured these peaks to
    within 4 bytes, where the planned bound was up to 40% above on PEPS)."""
    if plan.slicing is None:
        return plan
    return replace(plan, slicing=replace(plan.slicing, peak_bytes=executor_bytes(plan)))


def _with_executor_peak(plan: Plan, need: int | None = None) -> Plan:
    """``plan`` with its slicing's predicted peak counting its steps' copies."""
    if plan.slicing is None:
        return plan
    need = executor_bytes(plan) if need is None else need
    if need <= plan.slicing.peak_bytes:
        return plan
    return replace(plan, slicing=replace(plan.slicing, peak_bytes=need))


RECONFIGURE_MAX_TERMS = 300
"""The operands up to which a plan weighs cotengra's reconfigured slices of its path
(:func:`~.path.reconfigured_slices`), after the search and in each retry under a tighter
budget (a plan whose steps' copies pass it, sliced again without a search): 0.1-0.2 s on
the 10 x 10 lattice (100 tensors), whose 8 GiB plans the retries kept at 1.5-1.6e14 FLOPs
instead of 2.6-3.1e14, about a second on the random regular graph (250), whose 1 GiB plans
it made about 30x cheaper; on the circuits of 761-767 it gained nothing clear, and took
their planning from 14 to 45 s with the retries and once to 95 s after the search
(docs/benchmarks/log.md, twentieth session)."""


def _sliced(terms, eq: Equation, path, budget, dtype, device, slicing, optimize,
            reconfigure: bool = True, deadline: float | None = None, sources=None,
            repath_until: float | None = None):
    """``(slicing or None, path)``: the slices that keep ``budget`` (:mod:`.slicing`,
    priced in the bytes the executor on ``device`` holds: :func:`step_itemsize`,
    :func:`beside_bytes`); with ``reconfigure``, the optimiser's paths for the sliced sizes
    and, for a hyper optimiser, cotengra's search that slices as it goes, too (a retry
    under a tighter budget slices the path it is given: those searches take seconds
    each). ``sources``: :func:`_sum_sources`, the terms the operands' sums made, which the
    slices hold as intermediates."""
    if budget is None and (slicing is True or slicing is False):
        return None, path  # (no budget to keep, no slices named: choose_sliced_path's answer)
    units = {"beside_bytes": beside_bytes(eq, dtype, device), "sources": sources}
    itemsize = step_itemsize(dtype, device)
    sliced, path = choose_sliced_path(terms, eq.output, eq.sizes, path, budget,
                                      itemsize, slicing,
                                      _repath(terms, eq.output, optimize) if reconfigure
                                      else None, optimize=optimize,
                                      repath_until=repath_until, **units)
    if slicing is True and is_hyper(optimize) and \
            (reconfigure or len(terms) <= RECONFIGURE_MAX_TERMS):
        sliced, path = _reconfigured(terms, eq, budget, itemsize, optimize,
                                     sliced, path, units, deadline, search=reconfigure)
    return sliced, path


def _assemble(eq: Equation, dtype, path, sliced, unary, device) -> Plan:
    """The plan of ``path`` over ``eq`` (a slice's equation where ``sliced``)."""
    if sliced is not None:
        eq_run = _slice_equation(eq, sliced)
        unary = _unary_pass(eq_run, dtype)
    else:
        eq_run = eq
    steps, result, result_labels, operand_slots = _steps(eq_run, dtype, path, unary)
    return Plan(eq, steps, tuple(path), dtype, result, result_labels, device, operand_slots,
                sliced)


def step_itemsize(dtype, device) -> int:
    """The bytes an element of a plan's steps takes on its executor: NumPy's computes
    float16 and bfloat16 in float32 (:func:`~.classify.compute_dtype`); a GPU's keeps the
    dtype."""
    return np.dtype(dtype).itemsize if device is not None else compute_dtype(dtype).itemsize


def cast_bytes(eq: Equation, dtype, device) -> int:
    """The bytes of the operands a call casts to the dtype its steps compute in, held for
    the whole call: all of them for NumPy's float16 and bfloat16 (computed in float32);
    none on a GPU, which computes each dtype in its own."""
    itemsize = step_itemsize(dtype, device)
    if itemsize == np.dtype(dtype).itemsize:
        return 0
    return sum(prod(shape) for shape in eq.shapes) * itemsize


def beside_bytes(eq: Equation, dtype, device) -> int:
    """The bytes a sliced plan's executor holds beside its steps whatever the slices: the
    output (and its sum, :func:`~.slicing.output_units`) and the operands cast to the dtype
    the steps compute in (:func:`cast_bytes`)."""
    out = prod(eq.sizes[x] for x in eq.output) * output_units(dtype) * np.dtype(dtype).itemsize
    return out + cast_bytes(eq, dtype, device)


def executor_bytes(plan: Plan, copies: bool = True) -> int:
    """The bytes ``plan``'s executor holds at its peak (:func:`.peak.executor_peak`; with
    ``copies``, the copies its steps make of their operands, :func:`.peak.view_copies`
    included), with the operands cast to the dtype the steps compute in, and the slice
    loop's output where it is sliced."""
    itemsize = step_itemsize(plan.dtype, plan.device)
    eq, gpu = plan.equation, plan.device is not None
    n = len(eq.inputs)
    viewed = view_copies(plan.steps, eq.inputs, eq.shapes)
    if plan.slicing is None:
        return executor_peak(plan.steps, n, [True] * len(plan.steps), plan.result, itemsize,
                             gpu, viewed, copies) + cast_bytes(eq, plan.dtype, plan.device)
    steps_peak = executor_peak(plan.steps, n, plan.step_varies(), plan.result, itemsize,
                               gpu, viewed, copies)
    return steps_peak + beside_bytes(eq, plan.dtype, plan.device)


def resizable(plan: Plan) -> _PairForm | None:
    """The form of ``plan``'s one step where a plan of the same equation at other sizes of
    the same size classes (0, 1, more) is ``plan`` with its sizes changed (:func:`resized`):
    one pairwise step on the operands as given (no unary step, no slices), its layout
    decided by the size classes (:func:`~.classify.search_layout`). None otherwise."""
    if plan.slicing is not None or len(plan.steps) != 1 or plan.operand_slots != (0, 1):
        return None
    step = plan.steps[0]
    if step.kind is Kind.UNARY:
        return None
    a, b = step.inputs
    # the layout search of the step's groups, as _pair_form runs it (a batch only one
    # operand holds is offered by the sizes, not their classes)
    batch, ms, ns, ks, _, _ = pair_groups(a, b, set(step.output))
    _, by_class = search_layout(a, b, batch, ms, ns, ks, plan.equation.sizes)
    if not by_class:
        return None
    return _PairForm(step.args, step.result, step.inputs, (step.batch_labels, step.m_labels,
                     step.n_labels, step.k_labels), step.output, step.needs_copy,
                     step.layouts)


def size_classes(shapes) -> tuple:
    """Each operand's axes' size classes (0, 1, more): what plans :func:`resized` from one
    another share."""
    return tuple([tuple([min(d, _MANY) for d in s]) for s in shapes])


def resized(plan: Plan, form: _PairForm, shapes) -> Plan | None:
    """``plan`` (a :func:`resizable` one, of form ``form``) for operands of ``shapes``, of
    its operands' ranks and size classes: what :func:`build_plan` gives them, without the
    parse and the path search. None where a label's sizes differ between its axes (parsing
    ``shapes`` says how)."""
    eq = plan.equation
    sizes: dict[str, int] = {}
    for labels, shape in zip(eq.inputs, shapes):
        for lab, d in zip(labels, shape):
            if sizes.setdefault(lab, d) != d:
                return None
    resized_eq = Equation(eq.inputs, eq.output, sizes, tuple(shapes), eq.ellipsis, eq.legend)
    step = _pair_step(0, form, sizes, plan.dtype)
    return Plan(resized_eq, (step,), plan.path, plan.dtype, plan.result, plan.result_labels,
                plan.device, plan.operand_slots)


def _repath(terms, output, optimize):
    """How the slicer asks ``optimize`` for the path at other sizes
    (:func:`~.slicing.choose_sliced_path`), or None where it may not: an explicit path, a
    hyper-search (which slices as it goes: :func:`_reconfigured`; the default optimiser's
    plan, repathed, is its other candidate: :func:`_default_plan`) and an optimiser object,
    which may keep state between calls (opt_einsum's random optimisers refuse a call at
    other sizes), are asked once."""
    if isinstance(optimize, (list, tuple, PathOptimizer)) or is_hyper(optimize):
        return None
    return lambda sizes: find_path(terms, output, sizes, optimize)


def _reconfigured(terms, eq: Equation, budget, itemsize: int, optimize, sliced, path,
                  units: dict, deadline: float | None = None, search: bool = True):
    """The cheapest of ``(sliced, path)`` (the path found first, sliced after the search
    where the budget asks; ``sliced`` None where it fits whole), the same path's tree
    sliced by cotengra with its subtrees reconfigured (:func:`~.path.reconfigured_slices`,
    where it must be sliced, on up to :data:`RECONFIGURE_MAX_TERMS` operands: about a
    second, before the search), and cotengra's search
    that slices as it goes (:func:`~.path.sliced_search`); both to the largest intermediate
    the budget allows, with more labels sliced greedily where their slices still miss the
    budget (:func:`_budgeted`). The search runs until ``deadline``: where the first path
    fits whole, the rest of the time goes to it too, whose trials keep the trees that fit
    unsliced; where it must be sliced and the time is spent, it still runs to its first
    trial (on hundreds of tensors a trial may outlast the whole ``max_time``, and the
    sliced plans this search finds are the cheap ones there). ``search``: False for a
    retry under a tighter budget, which weighs the reconfigured slices only (a search
    takes seconds). ``units``: :func:`~.slicing.choose_sliced_path`'s ``beside_bytes``."""
    target = budget.elements if budget.elements is not None else \
        budget.bytes // itemsize // RECONF_TARGET_SHARE
    sources = units.get("sources")
    best = (sliced, path)
    found = []
    if sliced is not None and len(terms) <= RECONFIGURE_MAX_TERMS:
        try:
            found.append(reconfigured_slices(terms, eq.output, eq.sizes, path, target))
        except Exception:  # noqa: BLE001 - cotengra's slicer failing leaves the others
            pass
    seconds = None if deadline is None else deadline - time.monotonic()
    if search and (seconds is None or seconds > 0 or sliced is not None):
        try:  # (where the time is spent: its first trial, as timed_search runs it)
            found.append(sliced_search(optimize, terms, eq.output, eq.sizes, target,
                                       None if seconds is None else max(seconds, 0.0)))
        except Exception:  # noqa: BLE001 - cotengra's search failing leaves the others
            pass
    for other in [_budgeted(terms, eq, budget, itemsize, f, units) for f in found if f]:
        if other is not None and _flops(terms, eq, *other, sources) < \
                _flops(terms, eq, *best, sources):
            best = other
    return best


def _budgeted(terms, eq: Equation, budget, itemsize: int, found, units: dict):
    """``(slicing, path)`` of a path cotengra sliced (``found``: the path and its sliced
    labels), with more labels sliced where its slices miss the budget (a byte budget's
    peak); None where no slicing of its path keeps the budget."""
    other_path, labels = found
    try:
        return choose_sliced_path(terms, eq.output, eq.sizes, other_path, budget, itemsize,
                                  True, start=labels, **units)
    except ValueError:
        return None


def _flops(terms, eq: Equation, sliced, path, sources=None) -> float:
    """The FLOPs of ``path`` over every slice of ``sliced`` (None: unsliced)."""
    if sliced is not None:
        return sliced.flops
    return simulate([frozenset(t) for t in terms], frozenset(eq.output), eq.sizes,
                    path, sources=sources).flops


def _sum_sources(eq: Equation, unary) -> tuple | None:
    """For each term of ``unary.terms``, the labels of the operand its UNARY step summed it
    from (a new array, held while the path runs), or None: an operand read as it is or as a
    view (a diagonal, size-1 axes dropped), which holds no elements of its own; None for
    all where no step sums."""
    summing = {s.result for s in unary.steps if s.k_labels}
    if not summing:
        return None
    return tuple(frozenset(eq.inputs[i]) if slot in summing else None
                 for i, slot in enumerate(unary.slots))


def _memory_bytes(device) -> int:
    """The memory a fractional ``memory_limit`` is of: the device's, else the host's."""
    return getattr(device, "memory_bytes", 0) or host_memory_bytes()


def _slice_equation(eq: Equation, sliced: Slicing) -> Equation:
    """``eq`` for one slice: each sliced label at its chunk (a broadcast axis stays 1)."""
    sizes = sliced.slice_sizes()
    shapes = tuple(tuple(sizes[lab] if d == eq.sizes[lab] else d for lab, d in zip(t, s))
                   for t, s in zip(eq.inputs, eq.shapes))
    return replace(eq, sizes=sizes, shapes=shapes)


class _UnaryPass(NamedTuple):
    """The operands' UNARY steps (:func:`_unary_pass`): the steps, each operand's term
    after its step and the slot it is then in, and the next free slot."""

    steps: list[Step]
    terms: tuple[tuple[str, ...], ...]
    slots: tuple[int, ...]
    next_slot: int


def _unary_pass(eq: Equation, dtype) -> _UnaryPass:
    """The operands' unary steps (broadcast size-1 axes dropped, labels no other operand
    or the output holds summed, diagonals taken)."""
    sizes = eq.sizes
    squeezes = tuple([() if 1 not in s else tuple(
        ax for ax, (lab, d) in enumerate(zip(t, s)) if d == 1 and sizes[lab] != 1)
        for t, s in zip(eq.inputs, eq.shapes)])
    forms, terms, slots, next_slot = _unary_forms(eq.inputs, eq.output, squeezes)
    # (a step's number is its result's slot past the operands')
    steps = [_unary_step(form.result - len(forms), form, shape, sizes, dtype)
             for form, shape in zip(forms, eq.shapes) if form is not None]
    return _UnaryPass(steps, terms, slots, next_slot)


@lru_cache(maxsize=FORMS_KEPT)
def _unary_forms(inputs, output, squeezes):
    """``(each operand's UNARY form or None, its term after it, the slot it is then in, the
    next free slot)`` for operands labelled ``inputs`` whose ``squeezes`` axes are
    broadcast size-1 ones."""
    # the broadcast size-1 axes go first, so that "needed elsewhere" sees them gone
    squeezed = [{lab for ax, lab in enumerate(t) if ax not in q}
                for t, q in zip(inputs, squeezes)]
    out_set = set(output)
    held = Counter(lab for q in squeezed for lab in q)  # operands holding each label
    forms, terms, slots, next_slot = [], [], [], len(inputs)
    for i, (t, q) in enumerate(zip(inputs, squeezes)):
        # the operand's labels the output or another operand holds (all a step asks of it)
        keep = {lab for lab in t if lab in out_set or held[lab] > (lab in squeezed[i])}
        form = _unary_form(i, next_slot, t, q, keep)
        forms.append(form)
        terms.append(tuple(t) if form is None else form.output)
        slots.append(i if form is None else next_slot)
        if form is not None:
            next_slot += 1
    return tuple(forms), tuple(terms), tuple(slots), next_slot


def _small_labels(sizes) -> tuple[tuple[str, int], ...]:
    """The labels of size 0 or 1 and their sizes: with them the size class of every label
    (0, 1, more: :func:`~.classify.search_layout`)."""
    if min(sizes.values(), default=_MANY) >= _MANY:
        return ()
    return tuple([(x, d) for x, d in sizes.items() if d < _MANY])


_SKELETONS: dict = {}
"""The :class:`_Skeleton` of each path run over terms, by :func:`_steps`' key (those decided
by the size classes)."""


def _steps(eq: Equation, dtype, path, unary: _UnaryPass):
    """The steps that run ``path`` over ``eq`` after its ``unary`` pass: ``(steps, result
    slot, its labels, the slot of each operand)``."""
    sizes = eq.sizes
    steps = list(unary.steps)
    path = tuple(map(tuple, path))
    key = (unary.terms, unary.slots, unary.next_slot, eq.output, path, _small_labels(sizes))
    skeleton = _SKELETONS.get(key)
    if skeleton is None:
        skeleton = _skeleton(unary.terms, unary.slots, unary.next_slot, eq.output, path,
                             sizes)
        if skeleton.by_class:
            if len(_SKELETONS) >= FORMS_KEPT:
                _SKELETONS.clear()
            _SKELETONS[key] = skeleton
    for form in skeleton.forms:
        steps.append(_pair_step(len(steps), form, sizes, dtype) if type(form) is _PairForm
                     else _unary_step(len(steps), form, map(sizes.__getitem__, form.term),
                                      sizes, dtype))
    return tuple(steps), skeleton.result, skeleton.result_labels, unary.slots


def _skeleton(terms, slots, next_slot, output, path, sizes) -> _Skeleton:
    """The :class:`_Skeleton` of ``path`` run over ``terms`` in ``slots``, new results from
    slot ``next_slot`` on: each step sums the labels nothing after it holds, and orders
    the labels of a result it is free to order as the step reading it views them
    (:mod:`.arrange`, where :data:`.arrange.ARRANGE`: the steps are walked twice, the
    second time with the readers' hints, which stand where they copy fewer elements)."""
    first = _walk(terms, slots, next_slot, output, path, sizes, {})
    if not arrange.ARRANGE or sum(type(f) is _PairForm for f in first.forms) < 2:
        return first
    second = _walk(terms, slots, next_slot, output, path, sizes,
                   arrange.reader_hints(first.forms, _PairForm))
    # a hint from the first walk can mislead a reader whose own operands moved: the
    # second walk stands only where it copies less
    if _copied(second, output, sizes) >= _copied(first, output, sizes):
        return first
    return second._replace(by_class=first.by_class and second.by_class)


def _copied(skeleton: _Skeleton, output, sizes) -> int:
    """The elements ``skeleton``'s pairwise steps copy, and its result where the output's
    order differs from it (a final transpose)."""
    n = sum(prod(sizes[x] for x in term) for f in skeleton.forms if type(f) is _PairForm
            for term, c in zip(f.inputs, f.needs_copy) if c)
    if tuple(skeleton.result_labels) != tuple(output):
        n += prod(sizes[x] for x in output)
    return n


def _walk(terms, slots, next_slot, output, path, sizes, hints) -> _Skeleton:
    """The :class:`_Skeleton` of ``path``, each pairwise step given its result's
    :class:`~.arrange.Hint` from ``hints`` (by slot)."""
    out_set = set(output)
    slots, terms = list(slots), list(terms)
    alive = Counter(lab for t in terms for lab in set(t))  # live terms holding each label
    forms: list = []
    by_class = True

    def kept(labels, later=()):
        """Of ``labels``, those the output, a live term or ``later`` holds: all a step asks
        of the labels needed after it."""
        return {lab for lab in labels if lab in out_set or alive[lab] or lab in later}

    for ids in path:
        picked = [(slots[i], terms[i]) for i in ids]
        for i in sorted(ids, reverse=True):
            del slots[i]
            for lab in set(terms.pop(i)):
                alive[lab] -= 1
        (slot, term), rest = picked[0], picked[1:]
        if not rest:
            form = _unary_form(slot, next_slot, term, (), kept(term))
            if form is not None:
                forms.append(form)
                slot, term = next_slot, form.output
                next_slot += 1
        # an n-ary step becomes a left-to-right chain of pairwise steps
        for j, (slot_b, term_b) in enumerate(rest):
            later = set().union(*(t for _, t in rest[j + 1:]))
            form, decided = _pair_form((slot, slot_b), next_slot, term, term_b,
                                       kept({*term, *term_b}, later), sizes,
                                       hints.get(next_slot))
            forms.append(form)
            by_class = by_class and decided
            slot, term = next_slot, form.output
            next_slot += 1
        slots.append(slot)
        terms.append(term)
        alive.update(set(term))
    (result,), (result_labels,) = slots, terms
    return _Skeleton(tuple(forms), result, tuple(result_labels), by_class)
