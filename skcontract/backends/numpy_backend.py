"""The NumPy backend: runs a Plan's steps on the CPU the way the GPU backend does.

The step executors live in :mod:`skcontract.backends.steps`; here GEMM-class steps are
``np.matmul`` on (batch, M, K) x (batch, K, N) views. numpy.einsum is never called. Object
arrays work through numpy's object loops (slow but exact); other non-numeric dtypes raise
TypeError in the front end. float16/bfloat16 are computed in float32 (``compute_dtype``).

A plan runs as numpy.einsum's own loops do:

* floating-point errors (an overflow, an inf times zero) neither warn nor raise, whatever
  ``np.seterr`` / ``np.errstate`` say (:func:`quietly`);
* on object arrays each element of the result starts from the int 0, to which the sum of
  its products is added (a sum of strings is a TypeError, as in numpy; a plan that only
  views its operand adds nothing).
"""
from __future__ import annotations

import numpy as np

from ..plan.classify import compute_dtype
from .steps import ArrayOps, compile_plan

NAME = "numpy"
xp = np


def _sum(x, axis):
    """np.add.reduce, starting object arrays from 0 as numpy.einsum does (a sum of strings
    is a TypeError, not a concatenation)."""
    if x.dtype == object:
        return np.add.reduce(x, axis=axis, initial=0)
    return np.add.reduce(x, axis=axis)


OPS = ArrayOps(np, lambda step, views: views.around(np.matmul), _sum, np.logical_or.reduce)

__all__ = ["NAME", "xp", "is_array", "asarray", "compile", "compute_dtype", "quietly"]

try:  # numpy 2: np.errstate sets this context variable; setting it directly costs a sixth
    from numpy._core.umath import _extobj_contextvar, _make_extobj
    _IGNORE = _make_extobj(all="ignore")
    _enter, _leave = _extobj_contextvar.set, _extobj_contextvar.reset
except (ImportError, AttributeError, TypeError):  # numpy 1: np.errstate itself
    _extobj_contextvar = None


def quietly(fn):
    """``fn`` run with numpy's floating-point error handling off (``np.errstate(all=
    "ignore")``), as numpy.einsum's loops and torch's operations run."""
    if _extobj_contextvar is None:
        return np.errstate(all="ignore")(fn)

    def run(*args, **kwargs):
        token = _enter(_IGNORE)
        try:
            return fn(*args, **kwargs)
        finally:
            _leave(token)
    run.__name__, run.__doc__, run.__wrapped__ = fn.__name__, fn.__doc__, fn
    return run


def is_array(x) -> bool:
    return isinstance(x, np.ndarray)


def asarray(x):
    return x if type(x) is np.ndarray else np.asarray(x)


def compile(plan, replan=None, resizable=False):
    """Prepare ``plan`` once; ``run(arrays)`` executes it (see :mod:`skcontract.backends`).
    ``replan`` is a GPU backend's hook: NumPy launches nothing and takes none.
    ``resizable``: the run serves the plan re-sized too, where it is a product of two
    operands (:func:`~.steps.resizable_run`). Plans of
    integer or bool dtype, and plans of no steps (the operand viewed, to which numpy adds
    nothing), run as they are; others run :func:`quietly`, and an object result starts
    from 0 (see the module). A float16 plan's result is rounded back to float16 here,
    quietly; other results come back in the dtype they were computed in (a contract
    expression of no dtype runs float16 arrays on its float64 plan, in float32)."""
    run = compile_plan(plan, OPS, resizable)
    if plan.dtype.kind in "biu" or not plan.steps:
        return run  # no floating-point errors to silence, no objects; or views only
    narrow = plan.dtype if compute_dtype(plan.dtype) != plan.dtype else None
    if narrow is not None:  # float16 computed in float32: rounded back here, quietly
        wide = run

        def run(arrays, slices=None):  # (a partial sum over slices stays in float32)
            if slices is not None:
                return wide(arrays, slices=slices)
            r = wide(arrays)
            return r.astype(narrow) if r.dtype != narrow else r
    if _extobj_contextvar is None:
        quiet = quietly(run)

        def run_on_numpy_1(arrays, slices=None):
            r = quiet(arrays) if slices is None else quiet(arrays, slices=slices)
            return _from_zero(r) if arrays[0].dtype.kind == "O" else r
        return run_on_numpy_1

    def quiet_run(arrays, slices=None):  # quietly(run), inlined: one frame less a call
        token = _enter(_IGNORE)
        try:
            r = run(arrays) if slices is None else run(arrays, slices=slices)
        finally:
            _leave(token)
        return _from_zero(r) if arrays[0].dtype.kind == "O" else r
    return quiet_run


def _from_zero(r):
    """0 + each element of ``r``, the result of object operands, as an object array, as
    numpy.einsum starts its sums (a 0-d product may have come back as a str or int
    array)."""
    out = np.empty(r.shape, object)
    np.add(0, r if r.dtype == object else r.astype(object), out=out)
    return out
