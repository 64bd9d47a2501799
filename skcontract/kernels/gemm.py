"""``gemm``: the Python entry point of the GPU engine.

    out = gemm(a, b, out=None, *, alpha=1.0, beta=0.0, mode="auto",
               reduction="deterministic", tile=None, grid=None, allow_tf32=False, stream=None)

``a`` is (m, k) or (batch, m, k), ``b`` is (k, n) or (batch, k, n): CuPy arrays (or torch
tensors, used by the benchmark for bf16) with any strides where one of the two inner
strides is 1 (row or column major, any leading dimension, any batch stride including 0).
A column-major ``out`` is handled by computing ``out^T = b^T a^T``. Other layouts are copied.

The schedule comes from :func:`skcontract.schedule.schedule_gemm`, called with a DeviceInfo
whose ``ctas_per_sm`` is the occupancy queried for the compiled kernel. A warm call is one
dict lookup plus one launch.
"""
from __future__ import annotations

import numpy as np

from . import jit, specs
from .launch import LaunchPlan, fixup_for

_PLANS: dict = {}
_DEVICES: dict = {}


# ---- operands ------------------------------------------------------------------------------
def _is_torch(x) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "stride")


def _describe(x):
    """(ptr, shape, element strides, dtype name) of a CuPy array or torch tensor."""
    if _is_torch(x):
        return (x.data_ptr(), tuple(x.shape), tuple(x.stride()),
                str(x.dtype).replace("torch.", ""))
    item = x.dtype.itemsize
    return (x.data.ptr, tuple(x.shape), tuple(s // item for s in x.strides), x.dtype.name)


def _as3(shape, strides):
    if len(shape) == 2:
        return (1,) + shape, (0,) + strides
    if len(shape) == 3:
        return shape, strides
    raise ValueError(f"gemm takes 2-D or 3-D operands, got shape {shape}")


def _layout(rows, cols, s_rows, s_cols):
    """('row', ld) when X(r, c) = p[r * ld + c]; ('col', ld) when p[c * ld + r]; else None."""
    if cols == 1 or s_cols == 1:
        return "row", (s_rows if rows > 1 else 0)
    if rows == 1 or s_rows == 1:
        return "col", (s_cols if cols > 1 else 0)
    return None


def _aligned(ptr, ld, batch_stride, batch, elem) -> bool:
    return (ptr % 16 == 0 and (ld * elem) % 16 == 0
            and (batch <= 1 or (batch_stride * elem) % 16 == 0))


def _device_info(dev: int):
    info = _DEVICES.get(dev)
    if info is None:
        import cupy

        from skcontract.schedule.device import DeviceInfo
        p = cupy.cuda.runtime.getDeviceProperties(dev)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        info = _DEVICES[dev] = DeviceInfo(
            name, p["multiProcessorCount"], (p["major"], p["minor"]), p["l2CacheSize"],
            p["sharedMemPerMultiprocessor"], p["maxThreadsPerMultiProcessor"])
    return info


def _scheduler():
    try:
        from skcontract.schedule import schedule_gemm
    except ImportError:
        try:  # the package may not re-export it yet
            from skcontract.schedule.scheduler import schedule_gemm
        except ImportError as e:
            raise ImportError("skcontract.schedule.schedule_gemm is not available; pass "
                              "schedule= explicitly") from e
    return schedule_gemm


def _bases(dtype: str, allow_tf32: bool = False, dev: int | None = None) -> tuple:
    """The bases offered on device ``dev`` (None: every base)."""
    cc = None
    if dev is not None:
        major, minor = _device_info(dev).compute_capability
        cc = 10 * major + minor
    return specs.bases_for(dtype, allow_tf32, cc)


def _selection_key(schedule) -> float:
    from skcontract.schedule.heuristics import selection_key
    return selection_key(schedule.mode, schedule.predicted_time_us)


def _match_base(bases, tile) -> specs.KernelSpec:
    """The base whose (BM, BN[, BK]) is the schedule's tile."""
    tile = tuple(int(t) for t in tile)
    for b in bases:
        if (b.bm, b.bn, b.bk)[:len(tile)] == tile:
            return b
    for b in bases:
        if (b.bm, b.bn) == tile[:2]:
            return b
    raise RuntimeError(f"scheduler returned tile {tile}; kernels have "
                       f"{[(b.bm, b.bn, b.bk) for b in bases]}")


def _base_spec(dtype: str, tile, allow_tf32: bool = False,
               dev: int | None = None) -> specs.KernelSpec:
    bases = _bases(dtype, allow_tf32, dev)
    if tile is None:
        return bases[0]
    tile = tuple(int(t) for t in tile)
    for b in bases:
        if (b.bm, b.bn, b.bk)[:len(tile)] == tile:
            return b
    raise ValueError(f"gemm: no {dtype} kernel with tile {tile}; have "
                     f"{[(b.bm, b.bn, b.bk) for b in bases]}")


def make_plan(dtype, batch, m, n, k, a_layout, b_layout, a_vec_ok, b_vec_ok, *, mode, reduction,
              tile, grid, dev, schedule=None, allow_tf32=False) -> LaunchPlan:
    """Compile, schedule and upload for one problem (the cold path).

    ``tile=None`` lets the scheduler's cost model choose among every base of
    ``HEURISTIC_TILES[dtype]``; the kernel is the base whose tile it returned. The schedule is
    always built with the occupancy of the kernel that runs it (co-residency of waiting splits).
    ``allow_tf32`` with float32 plans over the tf32 bases (``HEURISTIC_TILES["tf32"]``); the
    schedule's dtype stays float32 (accumulator and cost model).
    """
    bases = _bases(dtype, allow_tf32, dev)
    base = (_base_spec(dtype, tile, allow_tf32, dev) if tile is not None or len(bases) == 1
            else None)

    def spec_for(b, fixup):
        return specs.specialise(b, fixup=fixup, a_layout=a_layout, b_layout=b_layout,
                                a_aligned=a_vec_ok, b_aligned=b_vec_ok)

    def occupancy(b):
        # Occupancy of the kernel that may wait decides how many CTAs can be resident; auto
        # with "deterministic" may return an "arrival" (aligned-fixup) schedule: take the lower.
        if reduction == "atomic":
            return jit.get_kernel(spec_for(b, "atomic"), dev).occupancy
        fixups = ("aligned",) if reduction == "arrival" else ("deterministic", "aligned")
        return min(jit.get_kernel(spec_for(b, f), dev).occupancy for f in fixups)

    if schedule is None:
        schedule_gemm = _scheduler()

        def plan_with(b, tile_arg):
            device = _device_info(dev).with_occupancy(occupancy(b))
            kwargs = dict(batch=batch, device=device, mode=mode, tile=tile_arg,
                          reduction=reduction, dtype=dtype)
            if grid is not None:
                kwargs["grid"] = grid
            return schedule_gemm(m, n, k, **kwargs)

        if base is None:  # auto over the scheduler's tiles, with the first tile's occupancy
            schedule = plan_with(bases[0], None)
            base = _match_base(bases, schedule.tile)
            if base is not bases[0] and occupancy(base) != occupancy(bases[0]):
                schedule = plan_with(base, (base.bm, base.bn, base.bk))
            # bases that share an SM are planned at their own occupancy and compete on the
            # predicted time (the scheduler's tile candidates leave them out); aligned
            # operands only
            for b in filter(specs.shares_sm, bases) if a_vec_ok and b_vec_ok else ():
                s = plan_with(b, (b.bm, b.bn, b.bk))
                if _selection_key(s) < _selection_key(schedule):
                    schedule, base = s, b
        else:
            schedule = plan_with(base, (base.bm, base.bn, base.bk))
        if tuple(schedule.tile)[:2] != (base.bm, base.bn):
            raise RuntimeError(f"scheduler returned tile {schedule.tile}, kernel is "
                               f"{(base.bm, base.bn, base.bk)}")
    elif base is None:
        base = _match_base(bases, schedule.tile)
    kernel = jit.get_kernel(spec_for(base, fixup_for(schedule)), dev)
    plan = LaunchPlan(kernel, schedule, dev)
    summary = schedule.summary() if hasattr(schedule, "summary") else (
        f"grid={schedule.grid} rows={len(schedule.table)} reduction={schedule.reduction}")
    jit.print_kernel(f"gemm {dtype} batch={batch} m={m} n={n} k={k} "
                     f"A={a_layout} B={b_layout} -> {kernel.spec.name} "
                     f"(occupancy {kernel.occupancy}/SM, smem {kernel.spec.smem_bytes} B)\n"
                     f"    schedule: {summary}")
    return plan


def gemm(a, b, out=None, *, alpha=1.0, beta=0.0, mode="auto", reduction="deterministic",
         tile=None, grid=None, allow_tf32=False, stream=None, schedule=None):
    """``out = alpha * a @ b + beta * out`` on the GPU with a Stream-K family kernel.

    ``mode``: "auto", "data_parallel", "stream_k", "hybrid", "split_k", "aligned", "hytis"
    (passed to the scheduler). ``reduction``: "deterministic" (workspace + lock, bitwise
    reproducible; auto may pick the arrival protocol's shared sum, also bitwise reproducible,
    for few tiles with many peers), "arrival" (a slot per split; the peers share the
    final sum when every CTA is resident) or "atomic". ``allow_tf32``: float32 operands run on tf32 tensor cores
    (``mma.m16n8k8.tf32``, operands rounded to a 10-bit mantissa, fp32 accumulation); by
    default float32 is exact (FFMA). Other dtypes ignore it.
    int8 operands accumulate in int32 (``mma.m16n8k32.s8``) and ``out`` is int32 (the default
    output dtype); sums wrap modulo 2^32; ``alpha`` / ``beta`` must be integers (applied in
    int32, wrapping).
    ``schedule``: a ready Schedule-like object (table, cta_offsets, grid, tile, reduction),
    for tests and callers that cache their own; it bypasses the scheduler.
    """
    import cupy

    a_ptr, a_shape, a_str, a_dt = _describe(a)
    b_ptr, b_shape, b_str, b_dt = _describe(b)
    if a_dt != b_dt:
        raise TypeError(f"gemm: operand dtypes differ ({a_dt} vs {b_dt})")
    (ba, m, k), (sba, sam, sak) = _as3(a_shape, a_str)
    (bb, k2, n), (sbb, sbk, sbn) = _as3(b_shape, b_str)
    if k != k2:
        raise ValueError(f"gemm: inner dimensions differ: a is {a_shape}, b is {b_shape}")
    batch = max(ba, bb)
    if ba not in (1, batch) or bb not in (1, batch):
        raise ValueError(f"gemm: batch sizes {ba} and {bb} do not broadcast")
    if ba == 1:
        sba = 0
    if bb == 1:
        sbb = 0
    lay_a = _layout(m, k, sam, sak)
    lay_b = _layout(k, n, sbk, sbn)
    if lay_a is None or lay_b is None or min(sba, sbb, sam, sak, sbk, sbn) < 0:
        # neither inner stride is 1 (or negative strides): one copy, then the fast path
        a = cupy.ascontiguousarray(a) if lay_a is None or min(sam, sak, sba) < 0 else a
        b = cupy.ascontiguousarray(b) if lay_b is None or min(sbk, sbn, sbb) < 0 else b
        return gemm(a, b, out, alpha=alpha, beta=beta, mode=mode, reduction=reduction,
                    tile=tile, grid=grid, allow_tf32=allow_tf32, stream=stream,
                    schedule=schedule)
    out_shape = (m, n) if len(a_shape) == 2 and len(b_shape) == 2 else (batch, m, n)
    out_dt = specs.INPUT_DTYPES[a_dt][0] if a_dt in specs.INPUT_DTYPES else a_dt
    if out_dt == "int32":
        if alpha != int(alpha) or beta != int(beta) or not (
                -2**31 <= int(alpha) < 2**31 and -2**31 <= int(beta) < 2**31):
            raise ValueError(f"gemm: int8 operands need int32 alpha / beta (got {alpha}, "
                             f"{beta})")
        alpha, beta = int(alpha), int(beta)
    if out is None:
        if beta != 0:
            raise ValueError("gemm: beta != 0 needs out")
        if _is_torch(a):
            import torch
            out = torch.empty(out_shape, dtype=getattr(torch, out_dt), device=a.device)
        else:
            out = cupy.empty(out_shape, dtype=out_dt)
    c_ptr, c_shape, c_str, c_dt = _describe(out)
    if c_dt != out_dt:
        raise TypeError(f"gemm: out dtype {c_dt} is not {out_dt}, the output dtype of "
                        f"{a_dt} operands")
    if tuple(c_shape) != out_shape and not (len(c_shape) == 3 and c_shape == (batch, m, n)):
        raise ValueError(f"gemm: out has shape {c_shape}, expected {out_shape}")
    (_, _, _), (sbc, scm, scn) = _as3(tuple(c_shape), tuple(c_str))
    if batch == 1:
        sbc = 0
    if m == 0 or n == 0 or batch == 0:
        return out
    if k == 0:
        out[...] = 0 if beta == 0 else out * beta
        return out

    (la, lda), (lb, ldb) = lay_a, lay_b
    if scn == 1 or n == 1:
        ldc = scm if m > 1 else 0
    elif scm == 1 or m == 1:
        # column-major out: out^T (n x m, row-major) = b^T a^T
        ldc = scn
        a_ptr, b_ptr = b_ptr, a_ptr
        sba, sbb = sbb, sba
        m, n = n, m
        la, lb = ("col" if lb == "row" else "row"), ("col" if la == "row" else "row")
        lda, ldb = ldb, lda
    else:
        raise ValueError("gemm: out needs a unit inner stride")

    elem = specs.CXX_TYPES[a_dt][1] if a_dt in specs.CXX_TYPES else 0
    dev = cupy.cuda.runtime.getDevice()
    tf32 = bool(allow_tf32) and a_dt == "float32"
    key = (dev, a_dt, batch, m, n, k, la, lb, _aligned(a_ptr, lda, sba, batch, elem),
           _aligned(b_ptr, ldb, sbb, batch, elem), mode, reduction,
           None if tile is None else tuple(tile), grid, id(schedule) if schedule else None, tf32)
    plan = _PLANS.get(key)
    if plan is None:
        plan = make_plan(a_dt, batch, m, n, k, la, lb, key[8], key[9], mode=mode,
                         reduction=reduction, tile=tile, grid=grid, dev=dev, schedule=schedule,
                         allow_tf32=tf32)
        if schedule is None:
            _PLANS[key] = plan
    if stream is None:
        stream = cupy.cuda.get_current_stream()
    plan.launch(a_ptr, b_ptr, c_ptr, m, n, k, lda, ldb, ldc, sba, sbb, sbc, alpha, beta, stream)
    return out


def clear_plans() -> None:
    _PLANS.clear()
