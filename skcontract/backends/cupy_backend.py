"""The CuPy backend: a Plan's steps on the GPU.

GEMM-class steps (GEMM, BATCHED_GEMM, GEMV, DOT) whose dtype has a Stream-K kernel
(float16, bfloat16, float32, float64, int8; see :mod:`skcontract.kernels.specs`) run on
:func:`skcontract.kernels.gemm.gemm` under the scheduler's ``auto`` choice. float32 stays
exact (no tf32). int8 steps accumulate in int32 on tensor cores and are cast back to int8,
which wraps exactly as numpy's int8 einsum does (sums are taken modulo 2^8 either way).
Documented fallback, until the kernel-coverage issue: other dtypes (other integers, bool,
complex) and the other step kinds use CuPy's own operations (``cupy.matmul``, broadcast
multiply, ``sum``).

float16 stays float16 on the GPU (the kernels accumulate in float32), unlike the NumPy
backend which computes it in float32.
"""
from __future__ import annotations

import cupy

from ..kernels import specs
from ..kernels.gemm import gemm
from ..plan.classify import compute_dtype as _cpu_compute_dtype
from ..schedule.heuristics import EINSUM_REDUCTION
from .steps import ArrayOps, compile_plan

NAME = "cupy"
xp = cupy

__all__ = ["NAME", "xp", "is_array", "asarray", "compile", "compute_dtype"]



def is_array(x) -> bool:
    return isinstance(x, cupy.ndarray)


def asarray(x):
    return x if type(x) is cupy.ndarray else cupy.asarray(x)


def compute_dtype(dtype):
    """float16 runs as float16 on the GPU (float32 accumulation inside the kernels); int8
    stays int8 (int32 accumulation inside the kernel)."""
    dt = cupy.dtype(dtype)
    return dt if dt.name in specs.INPUT_DTYPES else _cpu_compute_dtype(dt)


def stream_k_matmul(x, y):
    """``x @ y`` on (batch, M, K) x (batch, K, N) or 2-D views: our kernels where a
    kernel exists for the dtype, else cupy.matmul."""
    if x.dtype.name in specs.INPUT_DTYPES and x.dtype == y.dtype and x.ndim in (2, 3) \
            and x.ndim == y.ndim:
        r = gemm(x, y, reduction=EINSUM_REDUCTION)
        # int8: the kernel writes int32; the int8 cast wraps like numpy's int8 matmul
        return r if r.dtype == x.dtype else r.astype(x.dtype)
    return cupy.matmul(x, y)


def _sum(x, axis):
    """Sums with float16 accumulated in float32 (5000 float16 ones sum to 5000)."""
    if x.dtype == cupy.float16:
        return cupy.sum(x, axis=axis, dtype=cupy.float32).astype(cupy.float16)
    return cupy.sum(x, axis=axis)


OPS = ArrayOps(cupy, stream_k_matmul, _sum, cupy.any)


def compile(plan):
    """Prepare ``plan`` once; ``run(arrays)`` executes it (see :mod:`skcontract.backends`)."""
    return compile_plan(plan, OPS)
