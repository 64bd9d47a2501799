"""When Stream-K (any K-splitting mode) applies, and what replaces it
(docs/design/stream_k.md).

A pairwise step may cut its reduction across CTAs only if all hold:

1. it is a reduction over tiles (GEMM, GEMV, batched / grouped GEMM, implicit-GEMM conv,
   any contraction with a non-empty reduction index set);
2. the reduction operator is associative (sum; max/min of tropical semirings);
3. the fixup can merge: a device atomic for the accumulator type (ATOMIC mode), or a
   workspace (the DETERMINISTIC and ARRIVAL reductions, always available);
4. every tile has the same number of k-iterations (no ragged K) and tile counts are
   known at launch;
5. the output goes to global memory with no fused consumer reading partial tiles.

Fallback chain: when (2)-(5) fail, HYTIS if the data-parallel decomposition has a partial
last wave, otherwise DATA_PARALLEL; when (1) fails the step is not GEMM-class at all.
"""
from __future__ import annotations

from .. import dtypes
from ..kinds import GEMM_KINDS, kind_of
from .types import ARRIVAL, ATOMIC, CLUSTER, DETERMINISTIC


def can_apply_stream_k(kind="GEMM", *, associative: bool = True, accumulator_dtype=None,
                       dtype=None, reduction: str = ATOMIC, ragged_k: bool = False,
                       fused_consumer: bool = False, device=None) -> tuple[bool, str]:
    """Whether a step may split its reduction across CTAs, and why (not).

    ``accumulator_dtype`` defaults to :func:`skcontract.dtypes.accumulator_dtype` of
    ``dtype``. ``reduction`` is the fixup the caller wants: ``"atomic"`` needs a device atomic
    for the accumulator; ``"deterministic"`` and ``"arrival"`` only need a workspace.

    >>> from skcontract.schedule import DeviceInfo
    >>> can_apply_stream_k("GEMM", dtype="float16", device=DeviceInfo.h200())
    (True, 'stream-k applies: associative sum over k, float32 atomic fixup')
    >>> can_apply_stream_k("GEMM", accumulator_dtype="complex128", device=DeviceInfo.h200())[0]
    False
    """
    k = kind_of(kind)
    if k not in GEMM_KINDS:
        return False, f"{k} has no reduction over tiles"
    if not associative:
        return False, "the reduction operator is not associative"
    if accumulator_dtype is None:
        accumulator_dtype = dtypes.accumulator_dtype(dtype if dtype is not None else "float16")
    acc = str(accumulator_dtype)
    if reduction == ATOMIC:
        has = device.has_atomic(acc) if device is not None else acc in (
            "float32", "float64", "int32", "int64")
        if not has:
            return False, (f"no device atomic add for {acc} accumulators "
                           "(reduction='deterministic' would allow stream-k)")
        merge = f"{acc} atomic fixup"
    elif reduction in (DETERMINISTIC, ARRIVAL):
        merge = f"{acc} workspace fixup"
    elif reduction == CLUSTER:
        merge = f"{acc} fixup in the cluster's shared memory"
    else:
        return False, f"unknown reduction mode {reduction!r}"
    if ragged_k:
        return False, "ragged K: tiles have different k-iteration counts"
    if fused_consumer:
        return False, "a fused consumer in the same launch would read partial tiles"
    return True, f"stream-k applies: associative sum over k, {merge}"
