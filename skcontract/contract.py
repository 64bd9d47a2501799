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

import operator

import numpy as np

from . import warm as warm_path
from .backends import backend_for, get_backend
from .expression import ContractExpression, contract_expression
from .interop import has_torch, is_torch, permute, run_on_torch
from .kernels.resolve import DEFAULT_REDUCTION
from .parse import parse_equation, split_operands, symbol
from .plan import Plan
from .planning import (PLAN_CACHE_SIZE, device_for, make_plan, optimize_key, prepare,
                       prepare_cached, scheduled, slicing_key)
from .schedule.device import DeviceInfo
from .schedule.types import as_mode, as_reduction
from .semantics import (broadcast_axes, caster, check_out, check_precision,
                        checked_order_casting, complex_conj, conj_indices, finish, has_order,
                        looks_like_shapes, result_dtype, shapes_and_dtype, single_operand_view,
                        viewable, widened_by_out, without_broadcast_axes)

__all__ = ["einsum", "contract_path", "contract_expression", "ContractExpression",
           "tensordot", "transpose"]


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
    warm_key = None if slicing is not True else warm_path.call_key(
        operands, out, dtype, order, casting, optimize, memory_limit, backend, precision,
        conj)
    if warm_key is not None:
        try:
            warm = warm_path.WARM.get(warm_key)
        except TypeError:  # an unhashable keyword: the full path says what is wrong with it
            warm = warm_key = None
        if warm is not None:
            return warm(operands[1:])
    order = checked_order_casting(order, casting)
    check_precision(precision)
    subscripts, ops = split_operands(operands)
    conj = conj_indices(conj, len(ops))
    numpy_only = out is None and _NDARRAY.issuperset(map(type, ops))
    if not numpy_only and any(type(x).__module__.startswith("dask.") for x in ops):
        from .dask import einsum as dask_einsum  # a lazy dask array (skcontract.dask)
        if slicing is not True:
            raise ValueError("slicing: dask arrays are sliced by skcontract.dask.contract, "
                             "which takes no slicing=")
        ops = [x if hasattr(x, "dtype") else np.asarray(x) for x in ops]
        conj = complex_conj(conj, ops)
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
        res = result_dtype(arrays, dtype, casting)
        if out is not None and dtype is None and bk.is_array(out):
            res = widened_by_out(arrays, res, out.dtype, casting)
    except TypeError:
        parse_equation(subscripts, shapes)  # numpy reports bad subscripts or shapes first
        raise
    key = optimize_key(optimize)
    preparer = prepare if key is None else prepare_cached
    conj = complex_conj(conj, arrays)
    args = (subscripts, shapes, res, optimize if key is None else key, memory_limit, backend,
            None if backend == "numpy" else precision,  # (NumPy is exact at any precision)
            slicing_key(slicing, subscripts), conj)
    prepared = None
    if out is None and len(arrays) == 1 and not conj and viewable(arrays[0].dtype, res):
        # (planning one operand calls no path optimiser, so a stateful one is not used up)
        prepared = preparer(*args)
        view = single_operand_view(prepared[0].equation, arrays[0], bk.xp)
        if view is not None and has_order(view, order):
            warm_path.remember(warm_key, ops, bk, prepared, res, order, casting, view)
            return view
    if out is None and backend == "numpy" and any([0 in a.strides for a in arrays]) and \
            any(broadcast_axes(a) for a in arrays):
        reduced = without_broadcast_axes(subscripts, arrays)
        if reduced is not None:
            sub, small, expand = reduced
            return expand(einsum(sub, *small, dtype=dtype, order=order, casting=casting,
                                 optimize=optimize, memory_limit=memory_limit,
                                 backend=backend, precision=precision, slicing=slicing,
                                 conj=conj), order)
    plan, run, allocates = prepared or preparer(*args)
    if out is not None:
        check_out(out, bk, plan.output_shape, res, casting)
        cd, cast = bk.compute_dtype(res), caster(casting)
        arrays_c = [a if a.dtype == cd else cast(a, cd) for a in arrays]
        return finish(run(arrays_c), arrays, res, allocates, out, order, casting, bk.xp)
    return warm_path.remember(warm_key, ops, bk, (plan, run, allocates), res, order,
                     casting).once(arrays)


_NDARRAY = frozenset({np.ndarray})
"""The type of NumPy's arrays: operands all of it are no dask, torch or CuPy arrays."""


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
    check_precision(precision)
    as_mode(mode), as_reduction(reduction)  # refused on any machine
    subscripts, shp, res = shapes_and_dtype(subscripts, operands_or_shapes, shapes, dtype)
    conj = conj_indices(conj, len(shp))
    if np.dtype(res).kind != "c":
        conj = ()  # (real operands are their own conjugates)
    elif not shapes:
        conj = complex_conj(conj, [x if hasattr(x, "dtype") else np.asarray(x)
                                    for x in operands_or_shapes])
    backend = "numpy" if shapes else backend_for(operands_or_shapes)
    priced = device is not None or backend != "numpy"
    device = DeviceInfo.named(device) if device is not None else device_for(backend)
    cut = slicing_key(slicing, subscripts)
    key = _path_key(subscripts, shp, res, optimize, memory_limit, device, priced, mode,
                    reduction, precision, cut, conj)
    plan = _PATHS.get(key) if key is not None else None
    if plan is not None:
        return _path_of(plan), plan
    try:
        plan = make_plan(subscripts, shp, res, optimize, memory_limit, device, cut, conj,
                          mode=mode, reduction=reduction, precision=precision)
    except ValueError as e:
        if shapes or not looks_like_shapes(operands_or_shapes):
            raise
        raise ValueError(f"{e} (the operands look like shapes: pass shapes=True to plan "
                         "for shapes)") from None
    if priced:  # (else no GPU is asked for and none holds the operands: device is None)
        plan = scheduled(plan, device, mode=mode, reduction=reduction, precision=precision)
    if key is not None:
        if len(_PATHS) >= PLAN_CACHE_SIZE:
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
    opt = optimize_key(optimize)
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
