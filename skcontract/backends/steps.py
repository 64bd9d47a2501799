"""Step executors shared by the array backends: a Plan's steps as array operations.

Every backend runs a plan the same way; only the array module and the batched matrix
product differ (``numpy.matmul`` on the CPU, the Stream-K kernels on the GPU):

* GEMM, BATCHED_GEMM, GEMV, DOT: ``matmul`` on (batch, M, K) x (batch, K, N) views
  (a transpose then a reshape; the reshape copies only when the plan says ``needs_copy``
  or the caller's strides demand it), the result viewed in the step's output shape; the
  backend gets the views with the step (:class:`StepViews`), so that it may skip them on a
  call it has seen;
* ELEMENTWISE, OUTER: a broadcast multiply of (batch, M, 1) and (batch, 1, N) views;
* UNARY: broadcast size-1 axes squeezed, diagonals as ``xp.diagonal`` views, sums with
  ``xp.add.reduce``-style reductions (a logical or for bool).

``einsum`` is never called on a step.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from math import prod
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..layout import copy_lines
from ..plan.classify import GEMM_KINDS, Kind
from ..plan.peak import resident
from ..plan.plan import Plan, Step



class StepViews(NamedTuple):
    """How a GEMM-class step views its operands and its result: ``a(x)`` and ``b(y)`` make
    the (batch, M, K) and (batch, K, N) operands (None: the operand as it is), and ``out``
    is the result's shape when the (batch, M, N) product needs a reshape (else None)."""

    a: Callable | None
    b: Callable | None
    out: tuple | None

    def around(self, matmul: Callable) -> Callable:
        """``matmul`` between the views: a function of the step's own operands."""
        out = self.out
        return _binary(self.a, self.b, matmul, None if out is None else lambda r: r.reshape(out))


class ArrayOps(NamedTuple):
    """What a backend brings: its array module and its batched matrix product."""

    xp: Any
    matmul_for: Callable  # matmul_for(step, views) -> run(x, y) on the step's operands
    sum: Callable     # sum(x, axis=tuple) keeping numpy's result dtype for x's dtype
    any: Callable     # logical-or reduction, for bool operands
    # sum_for(step) -> run(a): a UNARY step's sum on its launch, ``a`` the (M x K) matrix
    # of the kept by the summed elements; run returns the M sums, or None where the launch
    # does not take ``a`` (the step then sums with ``sum``). None: no launches.
    sum_for: Callable | None = None
    # outer_for(step) -> run(x, y): an OUTER step's products on its launch, ``x`` (batch, M)
    # and ``y`` (batch, N); run returns the (batch, M, N) products, or None where the launch
    # does not take the operands (the step then multiplies them). None: no launches.
    outer_for: Callable | None = None
    # folds_conj(step) -> bool: whether the step's run reads its conjugated inputs
    # (Step.conj) itself; else they are conjugated into copies first. None: never.
    folds_conj: Callable | None = None
    # copy_into(view, shape, line) -> a copy of ``view`` (its axes in the order of
    # ``shape``'s, grouped) as ``shape`` whose last axis lies in lines of ``line`` elements
    # (the rest of each line unused): a GEMM-class step's copy of an operand its plan says
    # it copies (``needs_copy``), on lines of skcontract.layout.copy_lines. None: plain
    # copies (a reshape's).
    copy_into: Callable | None = None


PERMS_KEPT = 4096
"""The transposes (:func:`_perm`) kept for reuse: they depend on the labels only, so plans of
new sizes of a known structure reuse them."""


@lru_cache(maxsize=PERMS_KEPT)
def _perm(term: tuple[str, ...], order: tuple[str, ...]):
    """The transpose taking ``term``'s axes to ``order``; None when it is the identity."""
    p = tuple([term.index(x) for x in order])
    return None if p == tuple(range(len(p))) else p


def _shaper(term, order, shape_in, shape_out):
    """A function viewing an array labelled ``term`` as ``shape_out`` in ``order``."""
    p = _perm(term, order)
    permuted = tuple(shape_in[i] for i in p) if p is not None else tuple(shape_in)
    reshape = None if permuted == tuple(shape_out) else tuple(shape_out)
    if p is None and reshape is None:
        return None
    if p is None:
        return lambda x: x.reshape(reshape)
    if reshape is None:
        return lambda x: x.transpose(p)
    return lambda x: x.transpose(p).reshape(reshape)


def _binary(fa, fb, op, post) -> Callable:
    """``post(op(fa(x), fb(y)))``, skipping the views and the post-step that are None."""
    if fa is None and fb is None and post is None:
        return op

    def run(x, y):
        if fa is not None:
            x = fa(x)
        if fb is not None:
            y = fb(y)
        r = op(x, y)
        return r if post is None else post(r)
    return run


def _operand(term, holds, bl, inner, shape_in, lead, matrix, xp, copy=None):
    """A function viewing one GEMM operand as (batch, rows, cols), or None where it is one
    already; an operand without the batch labels (``holds`` false) is broadcast over the
    batch (stride 0: no copy). ``copy``: ``copy(view, shape)`` makes the copy where the
    plan says the operand is copied (None: a reshape's)."""
    order = bl + inner if holds else inner
    shape = lead + matrix if holds else matrix
    if copy is not None:
        p = _perm(term, order)
        f = (lambda x: copy(x, shape)) if p is None else (lambda x: copy(x.transpose(p), shape))
    else:
        f = _shaper(term, order, shape_in, shape)
    if holds:
        return f
    full = lead + matrix
    if f is None:
        return lambda x: xp.broadcast_to(x, full)
    return lambda x: xp.broadcast_to(f(x), full)


def lined_copy(xp) -> Callable:
    """The backend's ``copy_into`` (:class:`ArrayOps`) for array module ``xp``:
    ``copy_into(view, shape, line)`` is ``view`` as ``shape`` (``view``'s axes group into
    it, in order), its last axis in lines of ``line`` elements
    (:func:`skcontract.layout.copy_line`): where ``line`` is that axis's length, a
    C-contiguous array (``view`` itself where it is one: a copy the plan names is never a
    strided view, whose axes might leave no unit stride); else a view of the first columns
    of a fresh (..., rows, line) array."""
    def copy_into(view, shape, line):
        cols = shape[-1]
        if line == cols:
            return xp.ascontiguousarray(view).reshape(shape)
        out = xp.empty(tuple(shape[:-1]) + (line,), dtype=view.dtype)[..., :cols]
        dst = out.reshape(view.shape)  # splitting axes: a view of out (else a copy of it)
        if not xp.may_share_memory(dst, out):
            return view.reshape(shape)
        xp.copyto(dst, view)
        return out
    return copy_into


def _copier(step: Step, ops: ArrayOps, pos: int) -> Callable | None:
    """How the backend copies input ``pos`` of a GEMM-class step the plan says it copies,
    onto the lines :func:`skcontract.layout.copy_lines` gives (:data:`ArrayOps.copy_into`);
    None for a reshape's copy."""
    if ops.copy_into is None or not step.needs_copy[pos]:
        return None
    padded = copy_lines(step)[pos]
    return lambda x, shape: ops.copy_into(x, shape, padded)


def _gemm(step: Step, ops: ArrayOps) -> Callable:
    a, b = step.inputs
    bl, ml, nl, kl = step.batch_labels, step.m_labels, step.n_labels, step.k_labels
    lead = (step.batch,) if bl else ()
    ha, hb = step.holds_batch
    fa = _operand(a, ha, bl, ml + kl, step.input_shapes[0], lead, (step.m, step.k), ops.xp,
                  _copier(step, ops, 0))
    fb = _operand(b, hb, bl, kl + nl, step.input_shapes[1], lead, (step.k, step.n), ops.xp,
                  _copier(step, ops, 1))
    out_shape = step.output_shape
    flat = lead + (step.m, step.n)
    return ops.matmul_for(step, StepViews(fa, fb, None if flat == out_shape else out_shape))


def _resizable_gemm(step: Step, ops: ArrayOps) -> Callable:
    """:func:`_gemm` for the operands of any sizes of the step's labels' size classes (a
    re-sized plan's step, :func:`~skcontract.plan.plan.resized`): the (batch, M, K) and
    (batch, K, N) views and the result's shape are worked out from the operands' shapes on
    each call, so that one run serves every size."""
    a, b = step.inputs
    bl, ml, nl, kl = step.batch_labels, step.m_labels, step.n_labels, step.k_labels
    ha, hb = step.holds_batch
    pa = _perm(a, (bl if ha else ()) + ml + kl)
    pb = _perm(b, (bl if hb else ()) + kl + nl)
    nb, nm, nk = len(bl), len(ml), len(kl)
    ma, mb = (nb if ha else 0), (nb if hb else 0)  # where M starts in a's axes, K in b's
    xp, batched = ops.xp, bool(bl)

    def run(x, y):
        if pa is not None:
            x = x.transpose(pa)
        if pb is not None:
            y = y.transpose(pb)
        sx, sy = x.shape, y.shape
        lead = sx[:nb] if ha else sy[:nb]
        m_dims, n_dims = sx[ma:ma + nm], sy[mb + nk:]
        m, k, n = prod(m_dims), prod(sx[ma + nm:]), prod(n_dims)
        if batched:
            full = (prod(lead),)
            x = x.reshape(full + (m, k)) if ha else xp.broadcast_to(x.reshape(m, k),
                                                                     full + (m, k))
            y = y.reshape(full + (k, n)) if hb else xp.broadcast_to(y.reshape(k, n),
                                                                     full + (k, n))
        else:
            x, y = x.reshape(m, k), y.reshape(k, n)
        return xp.matmul(x, y).reshape(lead + m_dims + n_dims)
    return run


def _broadcast(step: Step, ops: ArrayOps) -> Callable:
    a, b = step.inputs
    bl, ml, nl, kl = step.batch_labels, step.m_labels, step.n_labels, step.k_labels
    sz = dict(zip(step.output, step.output_shape))
    shp = [sz[x] for x in bl], [sz[x] for x in ml], [sz[x] for x in nl]
    # k labels here all have size 1 (K == 1): the reshapes drop them
    fa = _shaper(a, bl + ml + kl, step.input_shapes[0],
                 tuple(shp[0] + shp[1] + [1] * len(nl)))
    fb = _shaper(b, bl + kl + nl, step.input_shapes[1],
                 tuple(shp[0] + [1] * len(ml) + shp[2]))
    xp = ops.xp
    multiply = xp.multiply
    scalar = not step.output  # 0-d products come back as scalars: keep arrays
    if step.kind is Kind.OUTER and step.launch is not None and ops.outer_for is not None:
        return _launched_outer(step, ops, fa, fb, shp)
    return _binary(fa, fb, multiply, xp.asarray if scalar else None)


def _launched_outer(step: Step, ops: ArrayOps, fa, fb, shp) -> Callable:
    """``run(x, y)``: an OUTER step on its launch (``ops.outer_for``), the operands'
    (batch, M) and (batch, N) views made from the broadcast multiply's (``fa``, ``fb``);
    the broadcast multiply where the launch does not take them."""
    product = ops.outer_for(step)
    m, n = prod(shp[1]), prod(shp[2])
    out_shape = tuple(shp[0] + shp[1] + shp[2])
    multiply = ops.xp.multiply

    def run(x, y):
        xv = x if fa is None else fa(x)
        yv = y if fb is None else fb(y)
        r = product(xv.reshape(-1, m), yv.reshape(-1, n))
        return multiply(xv, yv) if r is None else r.reshape(out_shape)
    return run


def _unary(step: Step, ops: ArrayOps) -> Callable:
    term = [lab for ax, lab in enumerate(step.inputs[0]) if ax not in step.squeeze]
    squeeze = step.squeeze
    diagonals = []
    while len(set(term)) != len(term):
        lab = next(x for x in term if term.count(x) > 1)
        p = term.index(lab)
        q = term.index(lab, p + 1)
        diagonals.append((p, q))
        term = [x for i, x in enumerate(term) if i not in (p, q)] + [lab]
    summed = tuple(term.index(x) for x in step.k_labels)
    kept = [x for x in term if x not in step.k_labels]
    perm = _perm(tuple(kept), step.output)
    scalar = not step.output
    xp = ops.xp
    launched = _launched_sum(step, ops, summed, len(term))

    def run(x):
        if squeeze:
            x = x.squeeze(axis=squeeze)
        for p, q in diagonals:
            x = xp.diagonal(x, axis1=p, axis2=q)
        if summed:
            r = None if launched is None else launched(x)
            if r is None:
                reduce = ops.any if x.dtype == xp.bool_ else ops.sum
                r = reduce(x, axis=summed)
            x = xp.asarray(r) if scalar else r
        return x if perm is None else x.transpose(perm)
    return run


def _launched_sum(step: Step, ops: ArrayOps, summed: tuple, ndim: int):
    """``run(x)``: the sum of a UNARY step on its launch (a matrix-vector product with ones,
    ``ops.sum_for``) over a C-contiguous ``x`` whose summed axes lead or trail, in the kept
    axes' shape; None from ``run`` for another ``x``, and None here for a step with no
    launch or summed axes between kept ones."""
    if step.launch is None or ops.sum_for is None or step.kind is not Kind.UNARY:
        return None
    s, axes = len(summed), tuple(sorted(summed))
    if axes == tuple(range(s)):
        leading = True
    elif axes == tuple(range(ndim - s, ndim)):
        leading = False
    else:
        return None
    product = ops.sum_for(step)

    def run(x):
        if not x.flags.c_contiguous:
            return None
        kept = x.shape[s:] if leading else x.shape[:ndim - s]
        m = prod(kept)
        a = x.reshape(-1, m).T if leading else x.reshape(m, -1)
        r = product(a)
        return None if r is None else r.reshape(kept)
    return run


def _step_fn(step: Step, ops: ArrayOps) -> Callable:
    if step.kind is Kind.UNARY:
        fn = _unary(step, ops)
    elif step.kind in (Kind.ELEMENTWISE, Kind.OUTER):
        fn = _broadcast(step, ops)
    else:
        fn = _gemm(step, ops)
    if any(step.conj) and not (ops.folds_conj is not None and ops.folds_conj(step)):
        return _conjugating(fn, step.conj, ops.xp)
    return fn


def _conjugating(fn: Callable, flags: tuple[bool, ...], xp) -> Callable:
    """``fn`` on its inputs, the complex ones ``flags`` mark conjugated into copies first
    (a real one is its own conjugate: an expression's plan may be called on real arrays)."""
    return lambda *xs: fn(*[conjugate(x, xp) if c and x.dtype.kind == "c" else x
                            for x, c in zip(xs, flags)])


def conjugate(x, xp):
    """The conjugate of ``x`` in a new array; of a broadcast view, of the elements it
    repeats, broadcast again (not materialised)."""
    if 0 not in x.strides:
        return xp.conj(x)
    held = x[tuple([slice(0, 1) if st == 0 else slice(None) for st in x.strides])]
    return xp.broadcast_to(xp.conj(held), x.shape)


def _conjugated_result(run: Callable, xp) -> Callable:
    """``run`` with its result conjugated (a plan whose result slot holds a conjugated
    operand's value: :attr:`Plan.conj_result`); a sliced run's ``slices`` passed on (the
    conjugate of a partial sum is the partial sum of the conjugates)."""
    def conjugated(arrays, **slices):
        return xp.conj(run(arrays, **slices))
    return conjugated


def resizable_run(plan: Plan) -> bool:
    """Whether :func:`compile_plan` can make ``plan``'s run for any sizes of its labels'
    size classes (``resizable=True``): one GEMM-class step of the two operands, unsliced."""
    return plan.slicing is None and not plan.conj and len(plan.steps) == 1 and \
        plan.steps[0].kind in GEMM_KINDS and plan.steps[0].args == (0, 1) and \
        len(plan.input_shapes) == 2


def compile_plan(plan: Plan, ops: ArrayOps,
                 resizable: bool = False) -> Callable[[Sequence[Any]], Any]:
    """Prepare ``plan`` once for ``ops``; the returned ``run(arrays)`` executes it (see the
    package docstring of :mod:`skcontract.backends` for the contract). ``resizable``: the
    run serves ``plan`` re-sized too (:func:`resizable_run` plans; ``ops.xp.matmul`` is the
    product: NumPy's backend asks for it)."""
    if plan.conj_result:
        return _conjugated_result(compile_plan(replace(plan, conj_result=False), ops), ops.xp)
    if plan.slicing is not None:
        return _compile_sliced(plan, ops)
    n = len(plan.input_shapes)
    if resizable and resizable_run(plan):
        steps = ((_resizable_gemm(plan.steps[0], ops), (0, 1), plan.steps[0].result),)
    else:
        steps = tuple([(_step_fn(s, ops), s.args, s.result) for s in plan.steps])
    result = plan.result
    perm = _perm(plan.result_labels, plan.output)

    if len(steps) == 1 and n == 2 and len(steps[0][1]) == 2 and steps[0][1] == (0, 1):
        fn = steps[0][0]
        if perm is None:
            return lambda arrays: fn(arrays[0], arrays[1])
        return lambda arrays: fn(arrays[0], arrays[1]).transpose(perm)

    n_slots = max([s.result for s in plan.steps], default=n - 1) + 1
    extra = [None] * (n_slots - n)
    steps = tuple((fn, args, res, done) for (fn, args, res), done in zip(steps, _consumed(plan)))

    def run(arrays):
        slots = list(arrays) + extra
        for fn, args, res, done in steps:
            slots[res] = fn(*[slots[i] for i in args])
            for i in done:  # an intermediate no later step reads goes now
                slots[i] = None
        r = slots[result]
        return r if perm is None else r.transpose(perm)
    return run


class SliceSteps:
    """A sliced plan (:class:`~skcontract.plan.slicing.Slicing`) prepared once: its steps,
    which of them vary with the slice (the others run on the first slice only, their results
    that a varying step reads kept: :func:`~skcontract.plan.peak.resident`), each operand's
    sliced axes and the output's: what a slice loop runs (:func:`_compile_sliced`)."""

    def __init__(self, plan: Plan, ops: ArrayOps):
        self.xp, self.plan = ops.xp, plan
        eq = plan.equation
        self.n = len(eq.inputs)
        varies = plan.step_varies()
        freed = _consumed(plan, keep=resident(plan.steps, varies))
        self.steps = [(_step_fn(s, ops), s.args, s.result, vary, done)
                      for s, vary, done in zip(plan.steps, varies, freed)]
        self.n_slots = max([s.result for s in plan.steps], default=self.n - 1) + 1
        self.per_slice = [res for _, _, res, vary, _ in self.steps if vary]
        self.result, self.perm = plan.result, _perm(plan.result_labels, plan.output)
        self.cuts = [[(p, lab) for p, (lab, h) in enumerate(zip(term, held)) if h]
                     for term, held in zip(eq.inputs, plan.sliced_axes())]
        self.out_cuts = [(p, lab) for p, lab in enumerate(eq.output)
                         if lab in plan.slicing.labels]
        self.ranges = [{lab: slice(*span) for lab, span in r.items()}
                       for r in plan.slicing.ranges()]

    def views(self, arrays, r: dict) -> list:
        """The operands at slice ``r``'s chunks (views)."""
        return [a if not cut else a[_index(len(term), cut, r)]
                for a, cut, term in zip(arrays, self.cuts, self.plan.equation.inputs)]

    def run(self, slots: list, first: bool):
        """The slice's steps on ``slots`` (the operands first; on the first slice also the
        steps that run once): the slice's result, in the output's label order."""
        for fn, args, res, vary, done in self.steps:
            if vary or first:
                slots[res] = fn(*[slots[i] for i in args])
                for i in done:
                    slots[i] = None
        part = slots[self.result]
        return part if self.perm is None else part.transpose(self.perm)

    def drop(self, slots: list) -> None:
        """A slice's results go before the next slice's come."""
        for res in self.per_slice:
            slots[res] = None

    def add(self, total, part, r: dict):
        """``part`` added into ``total``'s chunk of slice ``r`` (a new total, zeros in the
        dtype slices are summed in, where ``total`` is None; bool by a logical or)."""
        if total is None:
            total = self.xp.zeros(self.plan.output_shape, sum_dtype(part.dtype))
        at = _index(len(self.plan.equation.output), self.out_cuts, r)
        if total.dtype == bool:
            total[at] |= part
        else:
            total[at] += part
        return total

    def finish(self, total, dtype, partial: bool):
        """The loop's value: a partial sum stays in the dtype slices are summed in (zeros
        where no slice ran); the result is ``dtype``'s."""
        if partial:
            return self.xp.zeros(self.plan.output_shape, sum_dtype(self.plan.dtype)) \
                if total is None else total
        return total if total.dtype == dtype else total.astype(dtype)


def _compile_sliced(plan: Plan, ops: ArrayOps) -> Callable[[Sequence[Any]], Any]:
    """``run(arrays)`` for a sliced plan (:class:`~skcontract.plan.slicing.Slicing`): each
    slice runs the plan's steps on views of the operands at its chunks; a step that holds
    no sliced label, and consumes no result that does, runs once, on the first slice, and
    its result stays where a step run each slice reads it. The slices' results are added
    into the output in the slices' order (float16 in float32, rounded once; bool by a
    logical or), each into its chunk of the output's sliced labels. ``run(arrays,
    slices)`` runs only the slices numbered in ``slices`` (their order in
    :meth:`~skcontract.plan.slicing.Slicing.ranges`) and returns their partial sum in the
    dtype slices are summed in (float32 for float16), zeros in the output's chunks they do
    not cover."""
    sliced = SliceSteps(plan, ops)

    def run(arrays, slices=None):
        slots = [None] * sliced.n_slots
        total = dtype = None
        picked = sliced.ranges if slices is None else [sliced.ranges[i] for i in slices]
        for j, r in enumerate(picked):
            slots[:sliced.n] = sliced.views(arrays, r)
            part = sliced.run(slots, first=j == 0)
            total, dtype = sliced.add(total, part, r), part.dtype
            part = None
            sliced.drop(slots)
        return sliced.finish(total, dtype, slices is not None)
    return run


def _index(ndim: int, cuts, r: dict) -> tuple:
    """The index of a slice's chunk: ``r``'s slice at each (position, label) of ``cuts``,
    the whole axis elsewhere."""
    index = [_WHOLE] * ndim
    for p, lab in cuts:
        index[p] = r[lab]
    return tuple(index)


_WHOLE = slice(None)


def _consumed(plan: Plan, keep=frozenset()) -> list[tuple[int, ...]]:
    """For each step, the intermediates' slots it reads last (freed once it has run): not
    the operands' slots, the result's, or those in ``keep``."""
    n = len(plan.input_shapes)
    last = {}
    for j, s in enumerate(plan.steps):
        for a in s.args:
            last[a] = j
    return [tuple(a for a in dict.fromkeys(s.args) if a >= n and last[a] == j
                  and a != plan.result and a not in keep)
            for j, s in enumerate(plan.steps)]


def sum_dtype(dtype) -> np.dtype:
    """The dtype partial results (slices, Dask's blocks) are summed in: float16 in float32,
    the others their own."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)
