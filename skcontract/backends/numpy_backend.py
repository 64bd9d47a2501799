"""The NumPy backend: runs a Plan's steps on the CPU the way the GPU backend does.

The step executors live in :mod:`skcontract.backends.steps`; here GEMM-class steps are
``np.matmul`` on (batch, M, K) x (batch, K, N) views. numpy.einsum is never called. Object
arrays work through numpy's object loops (slow but exact); other non-numeric dtypes raise
TypeError in the front end. float16/bfloat16 are computed in float32 (``compute_dtype``).
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

__all__ = ["NAME", "xp", "is_array", "asarray", "compile", "compute_dtype"]


def is_array(x) -> bool:
    return isinstance(x, np.ndarray)


def asarray(x):
    return x if type(x) is np.ndarray else np.asarray(x)


def compile(plan, replan=None):
    """Prepare ``plan`` once; ``run(arrays)`` executes it (see :mod:`skcontract.backends`).
    ``replan`` is a GPU backend's hook: NumPy launches nothing and takes none."""
    return compile_plan(plan, OPS)
