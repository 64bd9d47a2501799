"""Contractions planned once and run many times: :func:`contract_expression` and the
:class:`ContractExpression` it returns."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .backends import backend_for, get_backend, plan_allocates
from .backends.steps import sum_dtype
from .interop import has_torch, is_torch, run_on_torch
from .kernels.resolve import DEFAULT_REDUCTION
from .parse import split_operands
from .plan import Plan
from .planning import device_for, make_plan, scheduled, slicing_key
from .replan import Replans
from .schedule.device import DeviceInfo
from .schedule.types import as_mode, as_reduction
from .semantics import (brief, check_numeric, check_out, check_precision, conj_indices, finish,
                        operand_shape, result_dtype, single_operand_view, view_call,
                        viewable, widened_by_out)

__all__ = ["ContractExpression", "contract_expression"]


_NO_VIEW_YET = object()
"""ContractExpression._views' marker of an operand layout not yet seen."""


_VIEWS_MAX = 64
"""Operand layouts an expression keeps the view of before it starts again."""


class ContractExpression:
    """A planned contraction: call it with arrays of the planned shapes.

    Built by :func:`contract_expression`. ``expr(*arrays, out=None)`` checks the number,
    shapes and dtypes of the arrays (ValueError / TypeError naming the operand) and runs
    the plan, on the backend the expression was built for or, when none was named, on the
    one the arrays live on (NumPy or CuPy arrays, as opt_einsum chooses). ``expr.plan`` is
    the Plan of the named backend (NumPy's when none was named); ``expr.plan_for("cupy")``
    the one a CuPy call runs, with the schedules it launches.
    """

    __slots__ = ("_base", "_backend", "_device", "_options", "_n", "_shapes", "_dtype",
                 "_prepared", "_dtypes", "_by_types", "_views", "_constants", "_resident",
                 "_replans")

    def __init__(self, plan: Plan, dtype, backend: str | None, device=None, constants=None,
                 **options):
        self._base = plan
        self._backend = backend
        self._device = device
        self._options = options
        self._n = len(plan.input_shapes)
        self._shapes = plan.input_shapes
        self._dtype = None if dtype is None else np.dtype(dtype)
        self._prepared: dict = {}  # backend -> (plan, module, run, allocates)
        self._replans: dict = {}  # backend -> its compiled plan's Replans
        # (backend, operand dtypes, out's or None) -> (result, compute dtype, cast)
        self._dtypes: dict = {}
        # operand types -> (backend, its prepare entry): arrays of one backend's own type
        self._by_types: dict = {}
        # (backend, operand shape, strides) -> the single operand's view as a warm call
        # (view_call), or None where it has none (single_operand_view)
        self._views: dict = {}
        # operand index -> the constant array given at build; its copy on each backend
        # (on the GPU it stays resident between calls)
        self._constants: dict = dict(constants or {})
        self._resident: dict = {}
        if backend is not None:
            self._prepare(backend)

    @property
    def plan(self) -> Plan:
        return self.plan_for(self._backend or "numpy")

    def plan_for(self, backend: str) -> Plan:
        """The plan a call on ``backend`` runs ('numpy' or 'cupy')."""
        return self._prepare(backend)[0]

    def _prepare(self, backend: str):
        hit = self._prepared.get(backend)
        if hit is None:
            bk = get_backend(backend)
            plan = self._base
            if backend != "numpy" or self._device is not None:  # NumPy runs no schedule
                dev = self._device if self._device is not None else device_for(backend)
                plan = scheduled(replace(plan, device=dev), dev, **self._options)
            replans = self._replans[backend] = Replans(plan, self._options)
            hit = self._prepared[backend] = (plan, bk, bk.compile(plan, replan=replans),
                                             plan_allocates(plan))
        return hit

    def _resolve(self, backend, bk, arrays, out_dtype=None):
        """(result dtype, compute dtype, whether an operand needs the cast) of a call:
        einsum's rule, with ``out_dtype`` (out's, when the call has one) widening it."""
        dts = tuple(a.dtype for a in arrays)
        hit = self._dtypes.get((backend, dts, out_dtype))
        if hit is None:
            if self._dtype is None:
                res = result_dtype(arrays, None, "safe")
                if out_dtype is not None:
                    res = widened_by_out(arrays, res, out_dtype, "safe")
            else:
                res = self._dtype
                for i, dt in enumerate(dts):
                    if not np.can_cast(dt, res, "safe"):
                        raise TypeError(f"operand {i} has dtype {dt}, which cannot be cast "
                                        f"safely to the expression's dtype {res}")
            cd = bk.compute_dtype(res)
            hit = self._dtypes[(backend, dts, out_dtype)] = (res, cd,
                                                            any(dt != cd for dt in dts))
        return hit

    def __call__(self, *arrays, out=None, slices=None):
        if slices is not None:
            return self._partial(arrays, out, slices)
        if self._constants:
            arrays = self._with_constants(arrays, out)
        hit = self._by_types.get(tuple(map(type, arrays))) if out is None else None
        if hit is not None:
            backend, (plan, bk, run, allocates) = hit
        else:
            backend, (plan, bk, run, allocates) = self._backend_of(arrays, out)
            if backend is None:  # torch tensors
                return run_on_torch(arrays, out, lambda arrs: self(*arrs), self._dtype)
            if not all(type(a) is bk.xp.ndarray for a in arrays):
                arrays = [bk.asarray(a) for a in arrays]
            elif out is None:
                self._by_types[tuple(map(type, arrays))] = (backend, (plan, bk, run, allocates))
        if tuple(a.shape for a in arrays) != self._shapes:
            self._check_shapes(arrays, plan)
        res, cd, cast = self._resolve(backend, bk, arrays,
                                      out.dtype if out is not None and bk.is_array(out)
                                      else None)
        if out is None and self._n == 1 and not plan.conj and viewable(arrays[0].dtype, res):
            view = self._view(backend, bk, plan, arrays[0])  # as einsum's
            if view is not None:
                return view
        if out is not None:
            check_out(out, bk, plan.output_shape, res, "safe")
        r = run([a if a.dtype == cd else a.astype(cd) for a in arrays] if cast else arrays)
        if out is None and allocates and r.dtype == res:
            return r[()] if r.ndim == 0 else r
        return finish(r, arrays, res, allocates, out, "K", "safe", bk.xp)

    def _partial(self, arrays, out, slices):
        """The partial sum over the slices numbered in ``slices`` (see
        :func:`contract_expression`), on NumPy or CuPy arrays."""
        if out is not None:
            raise TypeError("slices= returns a new partial sum; out= is not taken with it")
        if self._constants:
            arrays = self._with_constants(arrays, None)
        backend, (plan, bk, run, _) = self._backend_of(arrays, None)
        if backend is None:
            raise TypeError("slices= takes NumPy or CuPy arrays (torch tensors: pass "
                            "their NumPy / CuPy views)")
        arrays = [a if type(a) is bk.xp.ndarray else bk.asarray(a) for a in arrays]
        if tuple(a.shape for a in arrays) != self._shapes:
            self._check_shapes(arrays, plan)
        res, cd, cast = self._resolve(backend, bk, arrays)
        if cast:
            arrays = [a if a.dtype == cd else a.astype(cd) for a in arrays]
        picked = _slice_numbers(slices, plan.slicing.num_slices if plan.slicing else 1)
        total = sum_dtype(res)
        if plan.slicing is not None:
            r = run(arrays, slices=picked)
        elif picked:
            r = run(arrays)
        else:
            r = bk.xp.zeros(plan.output_shape, total)
        return bk.xp.asarray(r).astype(total, copy=False)

    def _with_constants(self, arrays, out):
        """The call's operands with the constants in their places, on the backend of the
        given ones (converted once per backend); ValueError for a wrong number."""
        given = self._n - len(self._constants)
        if len(arrays) != given:
            raise ValueError(f"this expression ({self._base.subscripts!r}) takes {given} "
                             f"operands (operands {sorted(self._constants)} are constants "
                             f"given when it was built), got {len(arrays)}")
        if has_torch(arrays, out):  # on the torch operands' device
            device = next(a.device for a in [*arrays, out] if is_torch(a))
            key, convert = ("torch", str(device)), _to_torch(device)
        else:
            key = self._backend or backend_for(arrays if out is None else [*arrays, out])
            convert = get_backend(key).asarray
        resident = self._resident.get(key)
        if resident is None:
            resident = self._resident[key] = {i: convert(c) for i, c in self._constants.items()}
        full = list(arrays)
        for i in sorted(resident):
            full.insert(i, resident[i])
        return full

    def _view(self, backend, bk, plan, a):
        """The single operand's view (:func:`single_operand_view`), its strides worked out
        once for each layout of the operand."""
        key = (backend, a.shape, a.strides)
        hit = self._views.get(key, _NO_VIEW_YET)
        if hit is _NO_VIEW_YET:
            view = single_operand_view(plan.equation, a, bk.xp)
            if len(self._views) >= _VIEWS_MAX:
                self._views.clear()
            self._views[key] = None if view is None else view_call(view.shape, view.strides,
                                                                   bk.xp)
            return view
        return None if hit is None else hit((a,))

    def _backend_of(self, arrays, out):
        """(backend, its prepare entry) of a call's arrays; backend None for torch tensors.
        ValueError for the wrong number of arrays."""
        if has_torch(arrays, out):
            return None, (None, None, None, None)
        if len(arrays) != self._n:
            raise ValueError(f"this expression ({self._base.subscripts!r}) takes {self._n} "
                             f"operands, got {len(arrays)}")
        backend = self._backend or backend_for(arrays if out is None else [*arrays, out])
        return backend, self._prepare(backend)

    def _check_shapes(self, arrays, plan) -> None:
        for i, (a, shape) in enumerate(zip(arrays, self._shapes)):
            if a.shape != shape:
                raise ValueError(f"operand {i} has shape {tuple(a.shape)}, but the "
                                 f"expression {plan.subscripts!r} was planned for "
                                 f"{shape}")

    def __repr__(self) -> str:
        """The plan's table, and the steps a call planned again for its operands
        (:mod:`skcontract.replan`): what ran."""
        lines = [f"ContractExpression({self._base.subscripts!r})", self.plan.table()]
        for backend, replans in self._replans.items():
            lines += [f"{backend}: {line}" for line in replans.lines()]
        return "\n".join(lines)


def contract_expression(subscripts, *shapes, dtype=None, optimize="adaptive",
                        memory_limit=None, backend=None, device=None, mode="auto",
                        reduction=DEFAULT_REDUCTION, precision=None, constants=None,
                        slicing=True, conj=()) -> ContractExpression:
    """Plan ``subscripts`` for ``shapes`` once; return a callable that runs it.

    ``backend``: 'numpy' or 'cupy' fixes where it runs; None (the default) runs each call on
    the backend its arrays live on, planning that backend's schedules at its first call.
    ``dtype`` fixes the operands' dtype (arrays must cast to it safely); None accepts any
    numeric dtype per call (the plan's reduction facts and schedules then describe float64;
    on the GPU another dtype's steps are scheduled on their first call). On the GPU the
    GEMM-class steps are scheduled once, here, and the expression's repr shows the schedules
    that launch; ``mode`` and ``reduction`` force the scheduler's choices (see
    :func:`contract_path`); ``precision``, ``memory_limit``, ``slicing`` and ``conj`` are
    :func:`einsum`'s (a call's real operands, their own conjugates, are read as they are).
    The NumPy backend runs no GPU schedule and plans none unless ``device=`` asks to see
    one.

    The interleaved form works here as in :func:`einsum`: ``contract_expression(shape0,
    labels0, shape1, labels1, ..., [output_labels])``, any hashable labels.

    ``constants``: indices of operands given as arrays here, in place of their shapes
    (opt_einsum's meaning): a call then takes the other operands only, in order, and the
    constants are converted once to each backend a call runs on (on the GPU they stay
    resident). The constants are not folded: the steps that read only constants run on
    every call.

    ``expr(*arrays, slices=range(a, b))`` runs only those slices of a sliced plan (numbered
    as ``expr.plan.slicing.ranges()`` lists them; an unsliced plan has the one slice 0) and
    returns their partial sum, in the dtype slices are summed in (float32 for float16
    results), with zeros in the output chunks they do not cover: the partial sums of
    ranges that cover every slice once add up to the result (for callers who spread the
    slices themselves; the sum's order is theirs).

    >>> expr = contract_expression('ij,jk->ik', (2, 8), (8, 3), slicing=['j'])
    >>> expr.plan.slicing.num_slices
    8
    >>> a, b = np.arange(16.0).reshape(2, 8), np.ones((8, 3))
    >>> bool(np.array_equal(expr(a, b, slices=range(0, 3)) + expr(a, b, slices=range(3, 8)),
    ...                     a @ b))
    True

    >>> import numpy as np
    >>> expr = contract_expression('ij,jk,kl->il', (2, 3), (3, 4), (4, 5))
    >>> a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))
    >>> expr(a, b, c)[0, 0]
    np.float64(12.0)
    >>> expr(a, b, np.ones((5, 4)))
    Traceback (most recent call last):
    ...
    ValueError: operand 2 has shape (5, 4), but the expression 'ij,jk,kl->il' was planned for (4, 5)
    """
    check_precision(precision)
    as_mode(mode), as_reduction(reduction)  # refused now, not at the first GPU call
    if not isinstance(subscripts, str):  # the interleaved form
        subscripts, shapes = split_operands((subscripts, *shapes))
    fixed = _constant_operands(constants, shapes)
    shp = tuple(tuple(fixed[i].shape) if i in fixed else operand_shape(s, i)
                for i, s in enumerate(shapes))
    plan_dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float64)
    check_numeric(plan_dtype, "dtype=")
    dev = DeviceInfo.named(device) if device is not None else None
    conj = conj_indices(conj, len(shp))
    if dtype is not None and plan_dtype.kind != "c":
        conj = ()  # (real operands are their own conjugates)
    plan = make_plan(subscripts, shp, plan_dtype, optimize, memory_limit,
                      dev if dev is not None else device_for(backend or "numpy"),
                      slicing_key(slicing, subscripts), conj, mode=mode,
                      reduction=reduction, precision=precision)
    return ContractExpression(plan, dtype, backend, dev, constants=fixed, mode=mode,
                              reduction=reduction, precision=precision)


def _slice_numbers(slices, num_slices: int) -> list[int]:
    """``slices`` (a range or a sequence of ints) as a list of slice numbers; TypeError for
    another type, IndexError naming a number past the plan's ``num_slices``."""
    if isinstance(slices, (str, bytes)) or not hasattr(slices, "__iter__"):
        raise TypeError(f"slices must be a range or a sequence of ints, got {brief(slices)}")
    picked = []
    for i in slices:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"slices must hold ints, got {brief(i)}")
        if not 0 <= i < num_slices:
            raise IndexError(f"slice {i} is out of range: the plan has {num_slices} "
                             f"slice(s), numbered 0 to {num_slices - 1}")
        if i in picked:
            raise ValueError(f"slices: slice {i} is named twice (a partial sum counts each "
                             "slice once)")
        picked.append(int(i))
    return picked


def _to_torch(device):
    """A conversion of arrays to torch tensors on ``device``."""
    import torch  # optional dependency: only torch callers reach this
    return lambda a: torch.as_tensor(a, device=device)


def _constant_operands(constants, shapes) -> dict:
    """``constants`` (operand indices) as {index: the array given in place of its shape};
    TypeError / ValueError naming the index that is not one."""
    if constants is None:
        return {}
    fixed = {}
    for i in constants:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"constants must be operand indices (ints), got {brief(i)}")
        if not 0 <= i < len(shapes):
            raise ValueError(f"constants: operand {i} is out of range for "
                             f"{len(shapes)} operands")
        if i in fixed:
            raise ValueError(f"constants: operand {i} is named twice")
        a = shapes[i]
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(f"constants: operand {i} must be given as an array, got "
                            f"{brief(a)}")
        fixed[int(i)] = a
    return fixed
