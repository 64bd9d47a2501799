"""Dtype facts shared by the planner, the scheduler and the kernels (one table, one place)."""
from __future__ import annotations

import numpy as np

_BFLOAT16_NAMES = ("bfloat16", "bf16")


def dtype_name(dtype) -> str:
    """Name of an operand dtype; accepts numpy dtypes and the string ``"bfloat16"``."""
    if isinstance(dtype, str) and dtype.lower() in _BFLOAT16_NAMES:
        return "bfloat16"
    return np.dtype(dtype).name


def accumulator_dtype(dtype) -> np.dtype | None:
    """The dtype a kernel accumulates products of ``dtype`` operands in: the one rule the
    planner, the scheduler, the kernels and the CPU emulator follow.

    float16/bfloat16 -> float32 (tensor cores); float32 -> float32 at every precision (the
    tf32 and 3xtf32 entries accumulate in float32 too); float64 -> float64;
    complex stays complex (no device atomic exists for it); integers of up to 32 bits ->
    int32/uint32 and 64-bit ones -> int64/uint64 (integer products wrap, as numpy's do, so
    any accumulator at least as wide as the result gives numpy's bits); bool -> int32 (a
    logical or of ands, counted). Object and other dtypes -> None.

    >>> accumulator_dtype('float16'), accumulator_dtype('int8'), accumulator_dtype(bool)
    (dtype('float32'), dtype('int32'), dtype('int32'))
    """
    name = dtype_name(dtype)
    if name == "bfloat16":
        return np.dtype(np.float32)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.dtype(np.float64 if dt.itemsize >= 8 else np.float32)
    if dt.kind == "c":
        return dt
    if dt.kind == "b":
        return np.dtype(np.int32)
    if dt.kind in "iu":
        wide = dt.itemsize == 8
        if dt.kind == "u":
            return np.dtype(np.uint64 if wide else np.uint32)
        return np.dtype(np.int64 if wide else np.int32)
    return None


EXACT = "exact"
"""The precision that names exact float32 arithmetic (FFMA) explicitly. At None (the default)
a plan's float32 and complex64 products run at float32 accuracy the fastest way: on the
3xTF32 tensor-core kernels where the device has them (complex64 always, float32 from
:data:`X3_DEFAULT_MIN_K` on: :func:`skcontract.kernels.resolve.float32_default`), else
exactly; at "exact" on the FFMA kernels."""

X3_DEFAULT_MIN_K = 2048
"""The shortest sum a float32 product of a plan runs at 3xTF32 by default (precision None).
3xTF32's relative error is about constant in K (its operands' small parts rounded to tf32,
the small x small product dropped, the tensor cores' truncated sums within a k-tile, the
last two biased), while exact float32's rounding error grows with the sum. Measured on the
H100 over K = 16 .. 4096 on normal, positive and wide-exponent data, 3xTF32's largest and
Frobenius errors were no larger than exact float32's on every kind of data from K = 2048
(at 1024, 1.2x on positive data's Frobenius error): docs/benchmarks/log.md, fourteenth
session. Shorter sums run exact."""


def float32_precision(precision: str | None) -> str | None:
    """The float32 precision ``precision`` asks for, in the catalogue's words: None for
    exact (None or :data:`EXACT`), else the precision itself ("tf32", "3xtf32")."""
    return None if precision == EXACT else precision


def complex64_precision(precision: str | None, float32_accurate: str | None) -> str | None:
    """The float32 precision a complex64 product's real form runs at: ``float32_accurate``
    (the fastest precision at float32 accuracy on the device, "3xtf32" where its tensor-core
    kernels are offered, else None: exact) where ``precision`` is None; exact for
    :data:`EXACT`; else ``precision``."""
    if precision is None:
        return float32_accurate
    return float32_precision(precision)
