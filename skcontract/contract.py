"""The public front door: ``einsum``, ``contract_path``, ``contract_expression``.

Each is parse -> plan -> run, with the plan cached or kept:

* :func:`einsum` follows ``numpy.einsum`` (same arguments, results, dtypes and exception
  types), plus ``memory_limit`` and ``backend``. Plans are cached per (subscripts, shapes,
  dtype, optimize, memory_limit, backend).
* :func:`contract_path` returns ``(path, plan)``; the plan prints as a table.
* :func:`contract_expression` plans once; each call checks shapes and dtypes and runs.

Differences from numpy: ``optimize`` defaults to ``'adaptive'`` (opt_einsum's greedy path
where the contraction is too cheap to be worth a search, else opt_einsum's 'auto' search;
the result is the same; the paths are opt_einsum's, which may order ties otherwise than
numpy's); an unknown optimiser name raises KeyError. As in numpy, a
single-operand einsum that only transposes or takes diagonals (without ``out``) returns a
view; unlike numpy, an ``order`` of 'C' or 'F' that the view does not have gets a copy in
that order, and a ``dtype`` other than the operand's a converted copy (numpy returns the
view in the operand's dtype).
"""
from __future__ import annotations

import math
import operator
from dataclasses import replace
from functools import lru_cache
from collections.abc import Mapping
from typing import Any, NamedTuple, Sequence

import numpy as np

from .backends import backend_for, get_backend, plan_allocates
from .backends.numpy_backend import quietly
from .backends.steps import resizable_run, sum_dtype
from .dtypes import EXACT
from .parse import parse_equation, split_operands, symbol
from .interop import has_torch, is_torch, permute, run_on_torch
from .kernels.catalogue import PRECISIONS
from .kernels.resolve import DEFAULT_REDUCTION, schedule_plan
from .plan import Plan, build_plan
from .plan.plan import conjugated, resizable, resized, size_classes, with_launch_peak
from .replan import Replans
from .schedule.device import DeviceInfo
from .schedule.types import as_mode, as_reduction

__all__ = ["einsum", "contract_path", "contract_expression", "ContractExpression",
           "tensordot", "transpose"]

_ORDERS = ("C", "F", "A", "K")
_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
_PLAN_CACHE_SIZE = 512


def _checked_order_casting(order: Any, casting: Any) -> str:
    """``order`` as one of 'C', 'F', 'A', 'K' (numpy's spellings: either case, bytes, None
    for 'K'); ValueError for another order or casting rule."""
    name = "K" if order is None else order
    if isinstance(name, bytes):
        name = name.decode("latin-1")
    if isinstance(name, str):
        name = name.upper()
    if name not in _ORDERS:
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if casting not in _CASTINGS:
        raise ValueError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', or "
                         f"'unsafe' (got {casting!r})")
    return name


def _check_precision(precision: Any) -> None:
    if precision is not None and precision != EXACT and precision not in PRECISIONS:
        raise ValueError(f"precision must be None (float32 accuracy), {EXACT!r} or one of "
                         f"{', '.join(map(repr, PRECISIONS))} (got {precision!r})")


def _conj_indices(conj: Any, n: int) -> tuple[int, ...]:
    """``conj`` (einsum's: positions of operands read conjugated) as a sorted tuple of
    positions in ``range(n)`` (a negative one counts from the end); TypeError for anything
    but integers, ValueError for a position out of range or named twice."""
    if conj is None or (type(conj) is tuple and not conj):  # (every call's default)
        return ()
    if isinstance(conj, (str, bytes)) or not hasattr(conj, "__iter__"):
        raise TypeError(f"conj must be a sequence of operand positions, got "
                        f"{type(conj).__name__} {conj!r}")
    out = []
    for i in conj:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"conj: operand positions are integers, got "
                            f"{type(i).__name__} {i!r}")
        if not -n <= i < n:
            raise ValueError(f"conj: operand position {i} is out of range for {n} "
                             f"operand(s)")
        out.append(int(i) % n)
    if len(set(out)) != len(out):
        raise ValueError(f"conj: an operand is named twice in {tuple(conj)!r}")
    return tuple(sorted(out))


def _complex_conj(conj: tuple[int, ...], arrays) -> tuple[int, ...]:
    """The positions of ``conj`` whose operands are complex (a real one's conjugate is
    itself)."""
    return tuple([i for i in conj if np.dtype(arrays[i].dtype).kind == "c"])


def _check_numeric(dt: np.dtype, what: str) -> None:
    if dt.kind not in "biufcO":
        raise TypeError(f"einsum does not support the dtype {dt} ({what})")


def _result_dtype(arrays: Sequence[Any], dtype: Any, casting: str) -> np.dtype:
    """numpy's rule: result_type of the operands, or ``dtype`` (each operand castable);
    remembered per (operand dtypes, dtype, casting), as every call asks."""
    key = (tuple([a.dtype for a in arrays]), dtype, casting)
    try:
        return _RESULT_DTYPES[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable dtype= argument
        return _result_dtype_of(arrays, dtype, casting)
    if len(_RESULT_DTYPES) >= _RESULT_DTYPES_MAX:
        _RESULT_DTYPES.clear()
    res = _RESULT_DTYPES[key] = _result_dtype_of(arrays, dtype, casting)
    return res


_RESULT_DTYPES: dict = {}
_RESULT_DTYPES_MAX = 4096


def _result_dtype_of(arrays: Sequence[Any], dtype: Any, casting: str) -> np.dtype:
    """The result dtype; every operand must cast to it by ``casting`` (which the operands'
    common type fails only under 'no' and 'equiv')."""
    if dtype is None:
        res = np.result_type(*[a.dtype for a in arrays])
        _check_numeric(res, "the operands' common type")
        what = "their common type"
    else:
        res = np.dtype(dtype)
        _check_numeric(res, "dtype=")
        what = "dtype="
    _check_operand_casts(arrays, res, casting, what)
    return res


def _check_operand_casts(arrays: Sequence[Any], res: np.dtype, casting: str, what: str):
    """TypeError naming the first operand that does not cast to ``res`` (``what``) by
    ``casting``."""
    for i, a in enumerate(arrays):
        if not np.can_cast(a.dtype, res, casting):
            raise TypeError(f"Cannot cast operand {i} from {a.dtype!r} to {res!r} ({what}) "
                            f"according to the rule {casting!r}")


def _widened_by_out(arrays: Sequence[Any], res: np.dtype, out_dtype, casting: str):
    """The dtype numpy computes in with ``out`` and no ``dtype=``: the operands' and out's
    common type (a wider out widens the sums: int8 sums into an int64 out do not wrap at
    8 bits), each operand castable to it by ``casting``."""
    wide = np.result_type(res, out_dtype)
    if wide != res:
        _check_operand_casts(arrays, wide, casting, "the operands' and out's common type")
    return wide


@lru_cache(maxsize=None)
def _device_for(backend: str) -> Any:
    """The device a backend's plans are made for: the current GPU (else the H200 preset)
    for CuPy; none for NumPy, whose fractional memory_limit is a share of the host's
    memory."""
    if backend == "cupy":
        try:
            return DeviceInfo.from_cupy()
        except Exception:  # no CuPy device: plan for the preset
            return DeviceInfo.h200()
    return None


def _make_plan(subscripts: str, shapes, dtype, optimize, memory_limit, device,
               slicing=True, conj=(), **options) -> Plan:
    """The plan of ``subscripts`` over operands of ``shapes`` (:func:`_planned`), for a
    GPU's launches scheduled with ``options``, the operands ``conj`` read conjugated."""
    return _planned(subscripts, shapes, dtype, optimize, memory_limit, device, slicing,
                    conj, **options)[0]


def _launches(device, **options):
    """How the executor on ``device`` schedules a plan (:func:`schedule_plan` with the
    call's ``options``), which the slicer counts the steps' copies by; None on the host."""
    if device is None:
        return None
    return lambda plan: schedule_plan(plan, device, **options)


class _Template(NamedTuple):
    """A plan that new sizes of its size classes re-size (:func:`_planned`), its step's
    form, and the runs backends compiled for any of its sizes, by backend name."""

    plan: Plan
    form: Any
    runs: dict


def _planned(subscripts: str, shapes, dtype, optimize, memory_limit, device,
             slicing=True, conj=(), **options) -> tuple[Plan, _Template | None]:
    """The plan of ``subscripts`` over operands of ``shapes`` and the template it is a
    re-sizing of (None: planned in full), marked for the operands ``conj`` reads
    conjugated (:func:`~skcontract.plan.plan.conjugated`: a memory limit counts their
    copies). A plan of one product whose size classes decide it is re-sized for new sizes
    of the same classes (:func:`~skcontract.plan.plan.resized`) rather than planned again.
    ``options``: those a GPU's launches are scheduled with (:func:`_launches`)."""
    key = None
    if memory_limit is None and slicing is True and len(shapes) == 2 and \
            _plain_optimize(optimize) and \
            all([type(d) is int for s in shapes for d in s]):  # (else the parse says why)
        key = (subscripts, getattr(subscripts, "legend", ()), size_classes(shapes), dtype,
               optimize, device)
        template = _RESIZABLE.get(key, _UNSEEN)
        if type(template) is _Template:
            plan = resized(template.plan, template.form, shapes)
            if plan is not None:
                return conjugated(plan, conj), template
    eq = parse_equation(subscripts, shapes)
    plan = build_plan(eq, dtype, optimize=optimize, memory_limit=memory_limit, device=device,
                      slicing=_slicing_arg(slicing), schedule=_launches(device, **options),
                      conj=conj)
    if key is not None and template is not False and type(template) is not _Template:
        # a structure's first plan is only noted (most are planned at one size); its
        # second, at new sizes, becomes the template (False: not re-sizable)
        if len(_RESIZABLE) >= _RESIZABLE_KEPT:
            _RESIZABLE.clear()
        if template is _UNSEEN:
            _RESIZABLE[key] = None
        else:
            form = resizable(plan)
            _RESIZABLE[key] = False if form is None else _Template(plan, form, {})
    return conjugated(plan, conj), None


_RESIZABLE: dict = {}
"""Plans of two operands that new sizes of the same size classes re-size, by subscripts,
the operands' size classes (0, 1, more), dtype, ``optimize`` and device (:func:`_planned`):
a :class:`_Template`, None (planned once) or False (not re-sizable)."""
_UNSEEN = object()
"""What :data:`_RESIZABLE` holds for a structure not planned before."""
_RESIZABLE_KEPT = 1024
"""Entries :data:`_RESIZABLE` keeps before it starts again."""


def _plain_optimize(optimize) -> bool:
    """Whether plans re-sized from one another may share ``optimize``: a name, a bool, or
    an explicit path of exact ints (as a tuple; an optimiser object may keep state between
    calls, and a path of other values is checked, and refused, by every call's plan)."""
    if type(optimize) in (str, bool):
        return True
    return type(optimize) is tuple and all(
        type(s) is str or (type(s) is tuple and all(type(i) is int for i in s))
        for s in optimize)


def _slicing_key(slicing, subscripts):
    """``slicing`` in a hashable form with the interleaved form's labels as their symbols:
    True / False, or ``((symbol, chunk), ...)`` (a label given alone: chunks of one).
    TypeError for anything else."""
    if isinstance(slicing, bool):
        return slicing
    if isinstance(slicing, str) or not hasattr(slicing, "__iter__"):
        raise TypeError(f"slicing must be True, False, a sequence of labels or a "
                        f"{{label: chunk}} dict, got {type(slicing).__name__} {slicing!r}")
    symbols = {label: sym for sym, label in getattr(subscripts, "legend", ())}
    pairs = slicing.items() if isinstance(slicing, Mapping) else ((x, 1) for x in slicing)
    try:
        return tuple((symbols.get(x, x), c) for x, c in pairs)
    except TypeError:
        raise TypeError(f"slicing: labels must be hashable, got {slicing!r}") from None


def _slicing_arg(key):
    """What :func:`~skcontract.plan.build_plan` takes for a :func:`_slicing_key`."""
    return key if isinstance(key, bool) else dict(key)


def _prepare(subscripts, shapes, dtype, optimize, memory_limit, backend, precision,
             slicing=True, conj=()):
    device = _device_for(backend)
    plan, template = _planned(subscripts, shapes, dtype, optimize, memory_limit, device,
                              slicing, conj, precision=precision)
    bk = get_backend(backend)
    if backend == "numpy":  # (NumPy launches nothing: no schedules, nothing to re-plan)
        if template is None or not resizable_run(plan):
            return plan, bk.compile(plan), plan_allocates(plan)
        run = template.runs.get(backend)  # (one run for every size of the template's)
        if run is None:
            run = bk.compile(template.plan, resizable=True)
            run.resizable = True  # (a warm call swaps it for the plan's own: _WarmCall)
            template.runs[backend] = run
        return plan, run, plan_allocates(plan)
    plan = _scheduled(plan, device, precision=precision)
    return plan, bk.compile(plan, replan=Replans(plan)), plan_allocates(plan)


def _scheduled(plan: Plan, device, **options) -> Plan:
    """``plan`` scheduled for ``device`` (:func:`~.kernels.resolve.schedule_plan`), a sliced
    one's predicted peak from the launches it now holds (:func:`~.plan.plan.with_launch_peak`)."""
    return with_launch_peak(schedule_plan(plan, device, **options))


# typed: a memory_limit of 1.0 (refused) is not the cached plan of 1
_prepare_cached = lru_cache(maxsize=_PLAN_CACHE_SIZE, typed=True)(_prepare)


def _optimize_key(optimize: Any):
    """A hashable form of ``optimize`` (explicit paths as tuples), or None: not cacheable."""
    if isinstance(optimize, (bool, str)) or optimize is None:
        return optimize
    if isinstance(optimize, (list, tuple)):
        try:
            key = tuple(s if isinstance(s, str) else tuple(s) for s in optimize)
        except TypeError:
            return None
        # a path of other than ints (0.0 == 0) is checked, and refused, every call
        if all(isinstance(s, str) or all(isinstance(x, (int, np.integer)) for x in s)
               for s in key):
            return key
    return None  # optimiser objects may be stateful or random


@quietly
def _cast(a, dtype):
    """``a.astype(dtype)`` as numpy.einsum casts: an overflow to inf or a NaN to an integer
    neither warns nor raises."""
    return a.astype(dtype)


def _caster(casting: str):
    """How a call casts its operands to the compute dtype: plainly where ``casting`` allows
    safe casts only (none overflows), else :func:`_cast`."""
    return _astype if casting in _SAFE_CASTINGS else _cast


def _astype(a, dtype):
    return a.astype(dtype)


_SAFE_CASTINGS = ("no", "equiv", "safe")


@quietly
def _copy_into(out, result, xp) -> None:
    """``result`` written into ``out`` whatever the cast, as numpy.einsum writes it (no
    floating-point warning)."""
    xp.copyto(out, result, casting="unsafe")


def _finish(result, arrays, res_dtype, allocates, out, order, casting, xp):
    if result.dtype != res_dtype:
        result = _cast(result, res_dtype)
    elif not allocates:
        result = result.copy()
    if out is not None:
        _copy_into(out, result, xp)
        return out
    if result.ndim < 2:  # C and F orders coincide
        pass
    elif order == "C":
        result = xp.ascontiguousarray(result)
    elif order == "F":
        result = xp.asfortranarray(result)
    elif order == "A":
        f = all(a.flags.f_contiguous for a in arrays) and \
            not all(a.flags.c_contiguous for a in arrays)
        result = xp.asfortranarray(result) if f else xp.ascontiguousarray(result)
    return result[()] if result.ndim == 0 else result


def _check_out(out, bk, shape, res_dtype, casting) -> None:
    if not bk.is_array(out):
        raise TypeError(f"keyword parameter out must be an array for einsum (got "
                        f"{type(out).__name__})")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, but the einsum result has shape "
                         f"{tuple(shape)}")
    if not np.can_cast(res_dtype, out.dtype, casting):
        raise TypeError(f"Cannot cast the einsum result from {res_dtype!r} to out's "
                        f"{out.dtype!r} according to the rule {casting!r}")
    if not np.can_cast(out.dtype, res_dtype, casting):  # numpy reads out in that type too
        raise TypeError(f"Cannot cast out's {out.dtype!r} to the einsum's {res_dtype!r} "
                        f"according to the rule {casting!r}")


def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize="adaptive",
           memory_limit=None, backend=None, precision=None, slicing=True, conj=()):
    """``einsum(subscripts, *operands, out=None, dtype=None, order='K', casting='safe',
    optimize='adaptive', memory_limit=None, backend=None, precision=None, slicing=True,
    conj=())``: numpy.einsum, planned.

    Accepts everything numpy.einsum does (implicit/explicit output, ellipses, broadcasting,
    diagonals and traces, the sublist form) and the same ``out``/``dtype``/``order``/
    ``casting`` rules. ``optimize`` chooses the contraction order (the path):

    * ``'adaptive'`` (the default): a search that costs no more than the contraction is
      worth. The greedy path (opt_einsum's) is found first and kept where its FLOP count is
      below :data:`skcontract.plan.path.ADAPTIVE_SEARCH_FLOPS` (2**20); above it
      opt_einsum's ``'auto'`` search runs too and the path of fewer FLOPs is kept, so no
      path costs more than 'auto''s (:func:`skcontract.plan.path.adaptive`);
    * numpy's values: False (left to right, unoptimised), True or ``'greedy'`` (a greedy
      path: opt_einsum's, which may break ties otherwise than numpy's), ``'optimal'`` (the
      exhaustive search, with no memory limit unless ``memory_limit`` says one), an
      explicit path (``['einsum_path', (0, 1), ...]`` or opt_einsum's list of tuples);
    * any other opt_einsum optimiser name, exactly opt_einsum's: ``'auto'`` (by the number
      of operands: 'optimal' up to 4, a branch search up to 14, greedy beyond), ``'dp'``,
      ``'branch-2'``, ``'random-greedy'``, ...; an ``opt_einsum.paths.PathOptimizer``;
    * ``'hyper'`` (cotengra's hyper-optimiser: :func:`skcontract.hyper`).

    ``memory_limit``
    bounds the largest intermediate (an int: elements, as in opt_einsum), or the peak
    working set ('8GB', or '80%' of the memory), a plan that does not fit being sliced
    (``slicing``: True chooses the slices, False refuses with a ValueError, labels or a
    ``{label: chunk}`` dict slice those; docs/einsum.md); ``backend`` is 'numpy' or 'cupy'
    (by default the operands' own). ``precision`` says how float32 products run on the
    GPU: None (the default) at float32 accuracy the fastest way, on the 3xTF32 tensor
    cores (each operand split into two tf32 parts, three products a step; errors no larger
    than exact float32's) where the device has them, the sum is at least
    :data:`~skcontract.dtypes.X3_DEFAULT_MIN_K` long and they are predicted sooner, else on
    the exact float32 (FFMA) kernels, as the plan's steps say; "exact" on the FFMA kernels
    always; "tf32" rounds the operands to tf32 (10-bit mantissa, fp32 sums); "3xtf32" on the
    3xTF32 kernels whatever the sum (:func:`skcontract.kernels.gemm.gemm` says where each
    runs). complex64 products run as real float32 ones (:mod:`skcontract.kernels.embed`)
    at float32 accuracy by default, on the 3xTF32 tensor cores where the device has them,
    and on the exact float32 kernels at "exact". Memory-bound steps, other dtypes and the
    NumPy backend stay exact; an unknown precision is a ValueError. torch
    tensors come back as torch tensors on their device (:mod:`skcontract.interop`);
    ``conj`` names operands (their positions) read conjugated, as if each were
    ``operand.conj()``: on the GPU a complex product's embedding reads them so (no copy;
    :mod:`skcontract.kernels.embed`), elsewhere they are conjugated into copies first, and
    a real operand is its own conjugate;
    broadcast (stride-0) operands are read once, never materialised. Given a dask array,
    it returns a lazy dask array (:func:`skcontract.dask.contract`).

    >>> import numpy as np
    >>> a = np.arange(6.0).reshape(2, 3); b = np.arange(12.0).reshape(3, 4)
    >>> np.array_equal(einsum('ij,jk->ik', a, b), a @ b)
    True
    >>> einsum('ii', np.eye(3))                # implicit output: the trace
    np.float64(3.0)
    >>> einsum(a, [0, 1], b, [1, 2], [0, 2]).shape     # the sublist form
    (2, 4)
    >>> float(einsum('i->', np.ones(5000, np.float16)))  # float16 accumulates in float32
    5000.0
    >>> psi = np.array([1 + 1j, 2 - 1j])
    >>> complex(einsum('i,i->', psi, psi, conj=(0,)))     # <psi|psi>, as np.vdot
    (7+0j)
    """
    warm_key = None if slicing is not True else _warm_key(
        operands, out, dtype, order, casting, optimize, memory_limit, backend, precision,
        conj)
    if warm_key is not None:
        try:
            warm = _WARM.get(warm_key)
        except TypeError:  # an unhashable keyword: the full path says what is wrong with it
            warm = warm_key = None
        if warm is not None:
            return warm(operands[1:])
    order = _checked_order_casting(order, casting)
    _check_precision(precision)
    subscripts, ops = split_operands(operands)
    conj = _conj_indices(conj, len(ops))
    numpy_only = out is None and _NDARRAY.issuperset(map(type, ops))
    if not numpy_only and any(type(x).__module__.startswith("dask.") for x in ops):
        from .dask import einsum as dask_einsum  # a lazy dask array (skcontract.dask)
        if slicing is not True:
            raise ValueError("slicing: dask arrays are sliced by skcontract.dask.contract, "
                             "which takes no slicing=")
        ops = [x if hasattr(x, "dtype") else np.asarray(x) for x in ops]
        conj = _complex_conj(conj, ops)
        ops = [x.conj() if i in conj else x for i, x in enumerate(ops)]  # (lazy on dask's)
        return dask_einsum(subscripts, *ops, out=out, dtype=dtype, order=order,
                           casting=casting, optimize=optimize, memory_limit=memory_limit,
                           backend=backend, precision=precision)
    if not numpy_only and has_torch(ops, out):
        # a lazy conjugate (torch's conjugate bit) is read as conj= reads an operand, and
        # conj= of one reads the memory as it lies
        return run_on_torch(ops, out, lambda arrays, lazy: einsum(
            subscripts, *arrays, dtype=dtype, order=order, casting=casting, optimize=optimize,
            memory_limit=memory_limit, backend=backend, precision=precision,
            slicing=slicing, conj=tuple(sorted(set(conj) ^ set(lazy)))), dtype,
            takes_conj=True)
    if backend is None:
        backend = "numpy" if numpy_only else backend_for(ops if out is None else [*ops, out])
    bk = get_backend(backend)
    arrays = [bk.asarray(x) for x in ops]
    shapes = tuple([tuple(a.shape) for a in arrays])
    try:
        res = _result_dtype(arrays, dtype, casting)
        if out is not None and dtype is None and bk.is_array(out):
            res = _widened_by_out(arrays, res, out.dtype, casting)
    except TypeError:
        parse_equation(subscripts, shapes)  # numpy reports bad subscripts or shapes first
        raise
    key = _optimize_key(optimize)
    prepare = _prepare if key is None else _prepare_cached
    conj = _complex_conj(conj, arrays)
    args = (subscripts, shapes, res, optimize if key is None else key, memory_limit, backend,
            None if backend == "numpy" else precision,  # (NumPy is exact at any precision)
            _slicing_key(slicing, subscripts), conj)
    prepared = None
    if out is None and len(arrays) == 1 and not conj and _viewable(arrays[0].dtype, res):
        # (planning one operand calls no path optimiser, so a stateful one is not used up)
        prepared = prepare(*args)
        view = _single_operand_view(prepared[0].equation, arrays[0], bk.xp)
        if view is not None and _has_order(view, order):
            _remember(warm_key, ops, bk, prepared, res, order, casting, view)
            return view
    if out is None and backend == "numpy" and any([0 in a.strides for a in arrays]) and \
            any(_broadcast_axes(a) for a in arrays):
        reduced = _without_broadcast_axes(subscripts, arrays)
        if reduced is not None:
            sub, small, expand = reduced
            return expand(einsum(sub, *small, dtype=dtype, order=order, casting=casting,
                                 optimize=optimize, memory_limit=memory_limit,
                                 backend=backend, precision=precision, slicing=slicing,
                                 conj=conj), order)
    plan, run, allocates = prepared or prepare(*args)
    if out is not None:
        _check_out(out, bk, plan.output_shape, res, casting)
        cd, cast = bk.compute_dtype(res), _caster(casting)
        arrays_c = [a if a.dtype == cd else cast(a, cd) for a in arrays]
        return _finish(run(arrays_c), arrays, res, allocates, out, order, casting, bk.xp)
    return _remember(warm_key, ops, bk, (plan, run, allocates), res, order,
                     casting).once(arrays)


_WARM: dict = {}
"""The warm path of :func:`einsum`: a call's subscripts, operand types, shapes, strides and
dtypes and its keywords -> the rest of the call (:class:`_WarmCall`), for calls without
``out`` on arrays of the backend's own type (so no torch operand, no copy to make) whose
``optimize`` is a name or a bool. A hit skips the checks, the parse and the plan lookup:
every one of them depends only on what the key holds."""
_WARM_MAX = 1024
"""Entries :data:`_WARM` keeps before it starts again (distinct calls of a process)."""
_WARM_OPTIMIZE = (str, bool)
_NDARRAY = frozenset({np.ndarray})
"""The type of NumPy's arrays: operands all of it are no dask, torch or CuPy arrays."""


def _warm_key(operands, out, dtype, order, casting, optimize, memory_limit, backend,
              precision, conj=()):
    """The :data:`_WARM` key of an einsum call, or None for a call the warm path does not
    take (``out``, the sublist form, an optimiser object, operands that are not arrays,
    ``conj`` other than a tuple or a list)."""
    if type(conj) is list:
        conj = tuple(conj)
    if out is not None or not operands or type(operands[0]) is not str or \
            type(optimize) not in _WARM_OPTIMIZE or type(conj) is not tuple or \
            any([type(i) is not int for i in conj]):  # (True and 1.0 hash as 1 does)
        return None
    try:
        ops = tuple([(type(a), a.shape, a.strides, a.dtype) for a in operands[1:]])
    except AttributeError:
        return None
    return (operands[0], ops, dtype, order, casting, optimize, memory_limit,
            type(memory_limit), backend, precision, conj)


def _remember(warm_key, ops, bk, prepared, res, order, casting, view=None):
    """The rest of this call as :class:`_WarmCall` makes it (``view``: the single operand's
    view this call returns, whose shape and strides every call of the key repeats), kept
    under ``warm_key`` when the operands are the backend's own arrays (not converted, no
    torch tensor)."""
    plan, run, allocates = prepared
    if view is not None:
        call = _view_call(view.shape, view.strides, bk.xp)
    else:
        call = _WarmCall(run, allocates, res, bk.compute_dtype(res), order, casting, bk.xp)
        if getattr(run, "resizable", False):  # a template's run: the plan's own on a repeat
            call.specialize = lambda: bk.compile(plan)
    if warm_key is not None and {bk.xp.ndarray}.issuperset(map(type, ops)):
        if len(_WARM) >= _WARM_MAX:
            _WARM.clear()
        _WARM[warm_key] = call
    return call


class _WarmCall:
    """What an einsum call does once its arrays are checked and its plan found: the plan's
    run on the arrays cast to the compute dtype, the result made as numpy would. (An
    instance, not a closure: one object for the collector where a closure is nine, and a
    first call on new shapes keeps one.)"""

    __slots__ = ("run", "allocates", "res", "cd", "order", "casting", "xp", "cast",
                 "specialize")

    def __init__(self, run, allocates, res, cd, order, casting, xp):
        self.run, self.allocates, self.res, self.cd = run, allocates, res, cd
        self.order, self.casting, self.xp, self.cast = order, casting, xp, _caster(casting)
        self.specialize = None  # where run serves any sizes: how to make the plan's own

    def __call__(self, arrays):
        """A warm call: a run for any sizes (a re-sized plan's first call: :func:`_prepare`)
        is swapped for the plan's own, faster a call, when the call repeats."""
        specialize = self.specialize
        if specialize is not None:
            self.specialize = None
            self.run = specialize()
        return self.once(arrays)

    def once(self, arrays):
        """The call on ``arrays`` with the run it holds."""
        cd, cast = self.cd, self.cast
        arrays_c = [a if a.dtype == cd else cast(a, cd) for a in arrays]
        return _finish(self.run(arrays_c), arrays, self.res, self.allocates, None, self.order,
                       self.casting, self.xp)


def _view_call(shape, strides, xp):
    """The warm call of a single operand's view (:func:`_single_operand_view`)."""
    return lambda arrays: _strided_view(arrays[0], shape, strides, xp)


def _strided_view(a, shape, strides, xp):
    """``a``'s elements at ``shape`` and ``strides`` from its first, as ``as_strided`` makes
    them. A contiguous NumPy array lends its buffer to an ndarray directly, a quarter of
    ``as_strided``'s cost (which wraps ``a`` in an array interface first); the view is
    writeable where ``a`` is, and its base is ``a``."""
    if xp is np and (a.flags.c_contiguous or a.flags.f_contiguous):
        return np.ndarray(shape, a.dtype, buffer=a, strides=strides)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _viewable(operand_dtype, res) -> bool:
    """Whether a single operand's result may be a view of it: its dtype is the result's up
    to byte order (numpy.einsum's view keeps the operand's byte order). Another dtype makes
    a copy in that dtype (where numpy.einsum would return the view, ignoring ``dtype``)."""
    return operand_dtype == res or operand_dtype.newbyteorder("=") == res.newbyteorder("=")


def _has_order(a, order) -> bool:
    """Whether ``a`` is laid out as ``order`` asks ('K' and 'A' take any layout)."""
    return order in ("K", "A") or (a.flags.c_contiguous if order == "C" else
                                   a.flags.f_contiguous)


def _single_operand_view(eq, a, xp):
    """numpy.einsum's view of one operand that it only transposes or takes diagonals of
    (every label kept, no sum): the output's strides are the sums of its labels' strides.
    None when a label is summed, and for a 0-d result, which numpy returns as a scalar. A
    read-only operand (a broadcast one) gives a read-only view, as in numpy."""
    (labels,) = eq.inputs
    if not eq.output or set(labels) != set(eq.output):
        return None
    strides = {lab: 0 for lab in eq.output}
    for lab, st in zip(labels, a.strides):
        strides[lab] += st
    return _strided_view(a, tuple(eq.sizes[x] for x in eq.output),
                         tuple(strides[x] for x in eq.output), xp)


def _broadcast_axes(a) -> list[int]:
    """Axes along which ``a`` repeats itself (stride 0, more than one element); none in an
    empty array (NumPy gives its axes stride 0 whatever their length)."""
    if a.size == 0:
        return []
    return [ax for ax, (n, st) in enumerate(zip(a.shape, a.strides)) if st == 0 and n > 1]


def _without_broadcast_axes(subscripts, arrays):
    """The same contraction with every broadcast axis read once instead of materialised or
    swept: ``(subscripts, arrays, expand)`` where ``expand(result, order)`` broadcasts the
    smaller result back to the full output; None when nothing can be dropped.

    An axis repeats its operand when its stride is 0 (np.broadcast_to) or its length is 1
    while the label's size is larger (einsum's own broadcasting). Its label is dropped from
    that operand when another operand spans it in full (the products do not depend on it)
    or when it is an output label, which the result then gets back by broadcasting."""
    eq = parse_equation(subscripts, [a.shape for a in arrays])
    labels = list(dict.fromkeys([x for t in eq.inputs for x in t] + list(eq.output)))

    strided = [_broadcast_axes(a) for a in arrays]

    def repeats(i, ax):
        return ax in strided[i] or (arrays[i].shape[ax] == 1 and eq.sizes[eq.inputs[i][ax]] > 1)

    full = [{lab for ax, lab in enumerate(t) if not repeats(i, ax)}
            for i, t in enumerate(eq.inputs)]
    terms, small = [], []
    kept = set()   # labels kept at their full size (on an axis that does not repeat)
    swept = set()  # labels kept on a repeating axis longer than 1 (a broadcast diagonal)
    for i, (t, a) in enumerate(zip(eq.inputs, arrays)):
        index, keep = [slice(None)] * a.ndim, []
        for ax, lab in enumerate(t):
            spanned = any(lab in full[j] for j in range(len(arrays)) if j != i)
            if repeats(i, ax) and t.count(lab) == 1 and (spanned or lab in eq.output):
                index[ax] = 0
                continue
            keep.append(lab)
            if not repeats(i, ax):
                kept.add(lab)
            elif a.shape[ax] > 1:
                swept.add(lab)
        terms.append(keep)
        small.append(a[tuple(index)] if len(keep) != len(t) else a)
    if all(s is a for s, a in zip(small, arrays)) or swept - kept:
        # (a label kept only on broadcast axes longer than 1 would be summed over them)
        return None
    # A label left only on axes of length 1 has length 1 in the smaller contraction: it is
    # summed there (over one term) and broadcast back where the output has it.
    letter = {x: symbol(i) for i, x in enumerate(labels)}
    out_small = [x for x in eq.output if x in kept]
    sub = ",".join("".join(letter[x] for x in t) for t in terms) + "->" + \
        "".join(letter[x] for x in out_small)
    full_shape = tuple(eq.sizes[x] for x in eq.output)
    where = [ax for ax, x in enumerate(eq.output) if x not in kept]

    def expand(r, order):
        if not where:
            return r
        r = np.broadcast_to(np.expand_dims(r, where), full_shape)
        return np.array(r, order="F" if order == "F" else "C")
    return sub, small, expand


def tensordot(a, b, axes=2):
    """``numpy.tensordot`` through :func:`einsum` (so GEMM-class contractions run on the
    Stream-K kernels for CuPy arrays); with :func:`transpose` and :func:`einsum` it makes
    skcontract an opt_einsum backend: ``opt_einsum.contract(..., backend="skcontract")``.

    >>> import numpy as np
    >>> a, b = np.arange(24.0).reshape(2, 3, 4), np.arange(12.0).reshape(4, 3)
    >>> bool(np.array_equal(tensordot(a, b, axes=([1, 2], [1, 0])),
    ...                     np.tensordot(a, b, axes=([1, 2], [1, 0]))))
    True
    """
    a = a if hasattr(a, "shape") else np.asarray(a)
    b = b if hasattr(b, "shape") else np.asarray(b)
    ax_a, ax_b = _tensordot_axes(axes)
    na, nb = len(a.shape), len(b.shape)
    if len(ax_a) != len(ax_b) or any(a.shape[i] != b.shape[j] for i, j in zip(ax_a, ax_b)):
        raise ValueError("shape-mismatch for sum")  # (an axis out of range: IndexError)
    ax_a = [i + na if i < 0 else i for i in ax_a]
    ax_b = [j + nb if j < 0 else j for j in ax_b]
    if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
        raise ValueError("duplicate axes are not allowed in tensordot")
    ta = [symbol(i) for i in range(na)]
    tb = [symbol(i) for i in range(na, na + nb)]
    for i, j in zip(ax_a, ax_b):
        tb[j] = ta[i]
    out = [ta[i] for i in range(na) if i not in ax_a] + \
        [tb[j] for j in range(nb) if j not in ax_b]
    r = einsum(f"{''.join(ta)},{''.join(tb)}->{''.join(out)}", a, b)
    return np.asarray(r) if isinstance(r, np.generic) else r  # a full contraction: 0-d


def _tensordot_axes(axes) -> tuple[list[int], list[int]]:
    """numpy.tensordot's ``axes``: an int n (the last n axes of a, the first n of b), or a
    pair of axis sequences (or of single axes), as lists of ints."""
    try:
        iter(axes)
    except TypeError:
        n = operator.index(axes)
        return list(range(-n, 0)), list(range(0, n))
    ax_a, ax_b = axes

    def as_list(x):
        try:
            return [operator.index(i) for i in x]
        except TypeError:
            return [operator.index(x)]
    return as_list(ax_a), as_list(ax_b)


def transpose(a, axes=None):
    """``numpy.transpose`` for any array module's arrays (a view where the module gives
    one); torch tensors are permuted (:func:`skcontract.interop.permute`), on their
    device."""
    if is_torch(a):
        return permute(a, axes)
    return a.transpose(axes) if axes is not None else a.transpose()


def _shapes_and_dtype(subscripts, operands_or_shapes, shapes: bool, dtype):
    if not isinstance(subscripts, str):
        subscripts, ops = split_operands((subscripts, *operands_or_shapes))
    else:
        ops = list(operands_or_shapes)
    if shapes:
        shp = tuple(_shape(s, i) for i, s in enumerate(ops))
        res = np.dtype(dtype if dtype is not None else np.float64)
        _check_numeric(res, "dtype=")
        return subscripts, shp, res
    arrays = [x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)
              for x in ops]
    res = np.dtype(dtype) if dtype is not None else np.result_type(*[a.dtype for a in arrays])
    return subscripts, tuple(tuple(a.shape) for a in arrays), res


def _shape(s, i: int) -> tuple[int, ...]:
    """Operand ``i``'s shape given as a sequence of non-negative ints (numpy's rules: no
    strings, no floats, no booleans). Errors name an array given instead by its shape and
    dtype, never by its contents."""
    if hasattr(s, "shape") and hasattr(s, "dtype"):
        raise TypeError(f"with shapes=True every operand must be a shape (a tuple of ints); "
                        f"operand {i} is an array of shape {tuple(s.shape)} and dtype "
                        f"{s.dtype} (pass its .shape, or the arrays to contract_path without "
                        "shapes=True)")
    if isinstance(s, (str, bytes)) or not hasattr(s, "__iter__"):
        raise TypeError(f"with shapes=True every operand must be a shape (a tuple of ints); "
                        f"operand {i} is {_brief(s)}")
    if type(s) is tuple and _INT.issuperset(map(type, s)) and \
            0 <= min(s, default=0) and max(s, default=0) <= _INTP_MAX and \
            math.prod(s) <= _INTP_MAX:
        return s  # (a tuple of ints in range: the checks below would pass)
    dims = []
    for d in s:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"operand {i}'s shape {_brief(tuple(s))} has a dimension "
                            f"{_brief(d)} that is not an int")
        if d < 0:
            raise ValueError(f"operand {i}'s shape {_brief(tuple(s))} has a negative dimension")
        if d > _INTP_MAX:
            raise ValueError(f"operand {i}'s shape {_brief(tuple(s))} has a dimension above "
                             f"{_INTP_MAX}, the largest an array may have")
        dims.append(int(d))
    if math.prod(dims) > _INTP_MAX:
        raise ValueError(f"operand {i}'s shape {_brief(tuple(s))} has more elements than an array "
                         f"may have ({_INTP_MAX})")
    return tuple(dims)


_INTP_MAX = int(np.iinfo(np.intp).max)
_INT = frozenset({int})
BRIEF_CHARS = 80
"""The most characters of a value an error message quotes."""


def _brief(x) -> str:
    """``repr(x)``, cut to :data:`BRIEF_CHARS` (an error never prints a large value whole)."""
    text = repr(x)
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS - 3] + "..."


def _looks_like_shapes(ops) -> bool:
    """Whether every operand is a tuple of ints: shapes given without ``shapes=True``."""
    return bool(ops) and all(
        isinstance(x, tuple) and all(isinstance(d, (int, np.integer))
                                     and not isinstance(d, bool) for d in x) for x in ops)


def contract_path(subscripts, *operands_or_shapes, shapes=False, optimize="adaptive",
                  memory_limit=None, dtype=None, device=None, mode="auto",
                  reduction=DEFAULT_REDUCTION, precision=None, slicing=True, conj=()):
    """Plan a contraction without running it: returns ``(path, plan)``.

    ``path`` is opt_einsum's list of tuples (accepted back by ``optimize=``, whose values
    and default are :func:`einsum`'s); ``plan`` is a
    frozen :class:`~skcontract.plan.Plan` that prints as a table of its steps. With
    ``shapes=True`` the operands are shapes. ``dtype`` defaults to the operands' result
    type (float64 for shapes); ``device`` (a DeviceInfo, or "h200", "h100", "gpu") defaults
    to the GPU holding CuPy operands. With a device, each GEMM-class step shows the launch
    our kernels run it with there (schedule and kernel); without one (NumPy operands or
    shapes, no ``device=``) no GPU schedule is priced, at opt_einsum's cost, and the table
    says how to ask for them. ``mode`` and ``reduction`` force the scheduler's choices there
    (as :func:`skcontract.kernels.gemm.gemm` takes them), ``precision`` is :func:`einsum`'s
    (the float32 steps that run at it show it before their schedule); ``memory_limit``,
    ``slicing`` and ``conj`` are :func:`einsum`'s (a sliced plan shows its slices, a step
    that reads an operand conjugated marks it ``*``).

    >>> path, plan = contract_path('bij,bjk->bik', (4, 8, 16), (4, 16, 32), shapes=True)
    >>> path
    [(0, 1)]
    >>> s = plan.steps[0]
    >>> s.kind.name, s.batch_labels, s.m_labels, s.n_labels, s.k_labels
    ('BATCHED_GEMM', ('b',), ('i',), ('k',), ('j',))
    >>> s.m, s.n, s.k, s.batch, s.reduces
    (8, 32, 16, 4, True)
    """
    _check_precision(precision)
    as_mode(mode), as_reduction(reduction)  # refused on any machine
    subscripts, shp, res = _shapes_and_dtype(subscripts, operands_or_shapes, shapes, dtype)
    conj = _conj_indices(conj, len(shp))
    if np.dtype(res).kind != "c":
        conj = ()  # (real operands are their own conjugates)
    elif not shapes:
        conj = _complex_conj(conj, [x if hasattr(x, "dtype") else np.asarray(x)
                                    for x in operands_or_shapes])
    backend = "numpy" if shapes else backend_for(operands_or_shapes)
    priced = device is not None or backend != "numpy"
    device = DeviceInfo.named(device) if device is not None else _device_for(backend)
    cut = _slicing_key(slicing, subscripts)
    key = _path_key(subscripts, shp, res, optimize, memory_limit, device, priced, mode,
                    reduction, precision, cut, conj)
    plan = _PATHS.get(key) if key is not None else None
    if plan is not None:
        return _path_of(plan), plan
    try:
        plan = _make_plan(subscripts, shp, res, optimize, memory_limit, device, cut, conj,
                          mode=mode, reduction=reduction, precision=precision)
    except ValueError as e:
        if shapes or not _looks_like_shapes(operands_or_shapes):
            raise
        raise ValueError(f"{e} (the operands look like shapes: pass shapes=True to plan "
                         "for shapes)") from None
    if priced:  # (else no GPU is asked for and none holds the operands: device is None)
        plan = _scheduled(plan, device, mode=mode, reduction=reduction, precision=precision)
    if key is not None:
        if len(_PATHS) >= _PLAN_CACHE_SIZE:
            _PATHS.clear()
        _PATHS[key] = plan
    return _path_of(plan), plan


_PATHS: dict = {}
"""The plans :func:`contract_path` made, by :func:`_path_key`: a Plan is immutable, so a call
with the same arguments returns the one made for them."""


def _path_key(subscripts, shapes, dtype, optimize, memory_limit, device, priced, mode,
              reduction, precision, slicing=True, conj=()):
    """The :data:`_PATHS` key of a contract_path call's checked arguments (each with its
    type where an equal value of another type is refused: ``memory_limit=True`` is not 1),
    or None where one is not hashable or ``optimize`` not cacheable."""
    opt = _optimize_key(optimize)
    if opt is None and optimize is not None:
        return None
    key = (subscripts, getattr(subscripts, "legend", None), shapes, dtype, type(opt), opt,
           type(memory_limit), memory_limit, device, priced, type(mode), mode,
           type(reduction), reduction, precision, slicing, conj)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _path_of(plan: Plan) -> list[tuple[int, ...]]:
    """The plan's contraction path as opt_einsum writes it: one operand's is [(0,)] (an
    empty path would tell opt_einsum to do nothing with it)."""
    path = [tuple(p) for p in plan.path]
    if not path and len(plan.input_shapes) == 1:
        return [(0,)]
    return path


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
        # operand types -> (backend, its _prepare entry): arrays of one backend's own type
        self._by_types: dict = {}
        # (backend, operand shape, strides) -> the single operand's view as a warm call
        # (_view_call), or None where it has none (_single_operand_view)
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
                dev = self._device if self._device is not None else _device_for(backend)
                plan = _scheduled(replace(plan, device=dev), dev, **self._options)
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
                res = _result_dtype(arrays, None, "safe")
                if out_dtype is not None:
                    res = _widened_by_out(arrays, res, out_dtype, "safe")
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
        if out is None and self._n == 1 and not plan.conj and _viewable(arrays[0].dtype, res):
            view = self._view(backend, bk, plan, arrays[0])  # as einsum's
            if view is not None:
                return view
        if out is not None:
            _check_out(out, bk, plan.output_shape, res, "safe")
        r = run([a if a.dtype == cd else a.astype(cd) for a in arrays] if cast else arrays)
        if out is None and allocates and r.dtype == res:
            return r[()] if r.ndim == 0 else r
        return _finish(r, arrays, res, allocates, out, "K", "safe", bk.xp)

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
        """The single operand's view (:func:`_single_operand_view`), its strides worked out
        once for each layout of the operand."""
        key = (backend, a.shape, a.strides)
        hit = self._views.get(key, _NO_VIEW_YET)
        if hit is _NO_VIEW_YET:
            view = _single_operand_view(plan.equation, a, bk.xp)
            if len(self._views) >= _VIEWS_MAX:
                self._views.clear()
            self._views[key] = None if view is None else _view_call(view.shape, view.strides,
                                                                   bk.xp)
            return view
        return None if hit is None else hit((a,))

    def _backend_of(self, arrays, out):
        """(backend, its _prepare entry) of a call's arrays; backend None for torch tensors.
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
    _check_precision(precision)
    as_mode(mode), as_reduction(reduction)  # refused now, not at the first GPU call
    if not isinstance(subscripts, str):  # the interleaved form
        subscripts, shapes = split_operands((subscripts, *shapes))
    fixed = _constant_operands(constants, shapes)
    shp = tuple(tuple(fixed[i].shape) if i in fixed else _shape(s, i)
                for i, s in enumerate(shapes))
    plan_dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float64)
    _check_numeric(plan_dtype, "dtype=")
    dev = DeviceInfo.named(device) if device is not None else None
    conj = _conj_indices(conj, len(shp))
    if dtype is not None and plan_dtype.kind != "c":
        conj = ()  # (real operands are their own conjugates)
    plan = _make_plan(subscripts, shp, plan_dtype, optimize, memory_limit,
                      dev if dev is not None else _device_for(backend or "numpy"),
                      _slicing_key(slicing, subscripts), conj, mode=mode,
                      reduction=reduction, precision=precision)
    return ContractExpression(plan, dtype, backend, dev, constants=fixed, mode=mode,
                              reduction=reduction, precision=precision)


def _slice_numbers(slices, num_slices: int) -> list[int]:
    """``slices`` (a range or a sequence of ints) as a list of slice numbers; TypeError for
    another type, IndexError naming a number past the plan's ``num_slices``."""
    if isinstance(slices, (str, bytes)) or not hasattr(slices, "__iter__"):
        raise TypeError(f"slices must be a range or a sequence of ints, got {_brief(slices)}")
    picked = []
    for i in slices:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"slices must hold ints, got {_brief(i)}")
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
            raise TypeError(f"constants must be operand indices (ints), got {_brief(i)}")
        if not 0 <= i < len(shapes):
            raise ValueError(f"constants: operand {i} is out of range for "
                             f"{len(shapes)} operands")
        if i in fixed:
            raise ValueError(f"constants: operand {i} is named twice")
        a = shapes[i]
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(f"constants: operand {i} must be given as an array, got "
                            f"{_brief(a)}")
        fixed[int(i)] = a
    return fixed
