"""Memory-bound matrix products on the Dot family (``sk_dot.cuh``): :func:`matvec` runs the
:class:`~.forms.DotForm` of a batched product (:mod:`.forms` says which products have one)
the way :func:`.gemm.gemm` runs any memory-bound product; products that have none go to
``gemm()``.

The scheduler plans a form as a GEMM of ``rows x 1`` (or ``1 x cols``) outputs over k, with
the Dot entries' tiles as its options, so the same split table, Stream-K decomposition and
fixup protocols run it (:func:`.resolve.resolve_dot`).
"""
from __future__ import annotations

from .catalogue import DOT_CATALOGUE, INPUT_DTYPES
from .forms import form_of
from .gemm import gemm
from .resolve import Resolved


def matvec(x, y, resolved: Resolved | None = None, out=None, bind=False):
    """``x @ y`` of CuPy (batch, M, K) x (batch, K, N) (or 2-D) arrays on the Dot kernel;
    None when the product has no Dot form or its dtype no Dot kernel (the caller runs a
    GEMM; complex products run on it through einsum only, as ``gemm()`` takes none). ``resolved``: a Dot schedule to run (:func:`.resolve.resolve_dot`'s, for this
    form: ValueError otherwise). ``out``: a C-contiguous array of the result's shape and
    dtype to write (else one is allocated). ``bind=True``: returns ``(out, binding)`` as
    :func:`.gemm.gemm` does (``(None, None)`` without a Dot form)."""
    none = (None, None) if bind else None
    if x.dtype.name not in DOT_CATALOGUE or x.dtype.name not in INPUT_DTYPES or \
            y.dtype != x.dtype or x.ndim != y.ndim or x.ndim not in (2, 3):
        return none
    if y.shape[-2] != x.shape[-1]:
        raise ValueError(f"matvec: inner dimensions differ: x is {x.shape}, y is {y.shape}")
    found = form_of(x, y)
    if found is None:
        return none
    _, shape = found
    if out is not None and (out.shape != shape or out.dtype != x.dtype or
                            not out.flags.c_contiguous):
        raise ValueError(f"matvec: out must be a C-contiguous {x.dtype} array of shape "
                         f"{shape}, got {out.dtype} {out.shape}")
    return gemm(x, y, out, schedule=resolved, bind=bind)
