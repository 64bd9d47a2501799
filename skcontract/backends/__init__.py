"""Backends: the modules that execute a :class:`~skcontract.plan.Plan` on arrays.

A backend is a module ``skcontract.backends.<name>_backend`` exposing:

``NAME: str``
    ``'numpy'``, ``'cupy'``.
``xp``
    The array module (``numpy``, ``cupy``); the front end uses ``xp.ascontiguousarray``,
    ``xp.asfortranarray`` and ``xp.copyto(out, result, casting='unsafe')`` on results.
``is_array(x) -> bool``
    Whether ``x`` is already this backend's array type (the front end uses it to pick a
    backend and to check ``out=``).
``asarray(x)``
    ``x`` as this backend's array (no copy when it already is one).
``compute_dtype(dtype) -> dtype``
    The dtype ``run`` receives operands in for a result of ``dtype`` (NumPy computes
    float16 in float32; the GPU keeps float16 and accumulates in float32 in its kernels).
``compile(plan, replan=None) -> run``
    Prepare ``plan`` once. ``replan(step, product, exclude, why)``: the plan layer's hook
    a GPU backend calls for a step whose operands are not those its launch was planned for,
    or whose kernel the device does not build as declared (:class:`skcontract.replan.Replans`:
    the step's launch for the call's operands, None where no kernel takes it); without one,
    such a call raises. ``run(arrays)`` takes one array per plan operand, with the
    shapes of ``plan.input_shapes`` and all of dtype ``compute_dtype(result dtype)``
    (the front end casts), executes ``plan.steps`` and returns
    the result with the axes of ``plan.output`` in the compute dtype. It may return a
    view of an input when the plan has no allocating step (``plan_allocates(plan)`` is
    False); the front end copies then. It must not call ``einsum`` on a step: GEMM-class
    steps run as batched matrix products over (batch, M, K) x (batch, K, N) views, UNARY
    steps as diagonal views and sums, ELEMENTWISE/OUTER steps as broadcast products.
    bool operands are computed as a logical or of ands; integer products wrap as numpy's.

``get_backend('numpy')`` imports the NumPy backend; ``get_backend('cupy')`` imports
``skcontract.backends.cupy_backend`` on first use (so CuPy is never imported unless asked
for). ``backend_for(arrays)`` picks ``'cupy'`` when any operand is a CuPy array.

>>> get_backend('numpy').NAME
'numpy'
>>> import numpy as np
>>> backend_for([np.ones(3), 2.0])
'numpy'
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from types import MappingProxyType, ModuleType
from typing import Iterable

from ..plan.classify import Kind

__all__ = ["BACKENDS", "get_backend", "backend_for", "plan_allocates"]

#: backend name -> module path (read-only)
BACKENDS = MappingProxyType({
    "numpy": "skcontract.backends.numpy_backend",
    "cupy": "skcontract.backends.cupy_backend",
})


@lru_cache(maxsize=None)
def get_backend(name: str) -> ModuleType:
    """The backend module called ``name`` (imported lazily); ValueError if unknown."""
    try:
        path = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known backends: "
                         f"{', '.join(BACKENDS)}") from None
    try:
        return importlib.import_module(path)
    except ImportError as e:
        if name == "cupy" and e.name and e.name.split(".")[0] in ("cupy", "cupy_backends"):
            raise ImportError("backend='cupy' needs CuPy and an NVIDIA GPU: "
                              "pip install 'skcontract[cuda13]'") from e
        raise


def backend_for(arrays: Iterable[object]) -> str:
    """'cupy' when any of ``arrays`` is a CuPy array, else 'numpy'."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            return "cupy"
    return "numpy"


def plan_allocates(plan) -> bool:
    """Whether running ``plan`` creates a new array (else the result may view an input)."""
    return plan.slicing is not None or plan.conj_result or any(
        s.kind is not Kind.UNARY or s.k_labels for s in plan.steps)
