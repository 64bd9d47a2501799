"""``gemm``: the Python entry point of the GPU engine.

    out = gemm(a, b, out=None, *, alpha=1.0, beta=0.0, mode="auto",
               reduction="deterministic", tile=None, grid=None, allow_tf32=False,
               precision=None, stream=None, schedule=None)

``a`` is (m, k) or (batch, m, k), ``b`` is (k, n) or (batch, k, n): CuPy arrays or any GPU
array with ``__cuda_array_interface__`` or ``__dlpack__`` (:mod:`.operands`), with any
strides where one of the two inner strides is 1 (row or column major, any leading dimension,
any batch stride including 0). A column-major ``out`` is handled by computing
``out^T = b^T a^T``. Other layouts are copied.

The schedule comes from :func:`.resolve.resolve_gemm` (the catalogue's entries as the
scheduler's tile options) unless the caller passes one; the launcher runs exactly that
schedule. A warm call is one dict lookup plus one launch.
"""
from __future__ import annotations

import contextlib
import warnings

from ..schedule import GemmProblem, Schedule
from ..schedule.types import CLUSTER
from . import bound, dot, jit, relayout, specs
from .catalogue import DOT_CATALOGUE, INPUT_DTYPES, TF32, catalogue_key
from .forms import dot_form
from .launch import Binding, CoResidencyError, LaunchPlan
from .operands import as3, describe, is_vec16, matrix_layout
from .resolve import (DEFAULT_REDUCTION, Resolved, compute_capability, device_info,
                      entry_for, k_major_copy_elems, k_major_only, reads_k_major,
                      resolve_gemm, rows_off_lines, turns_operands)
from .step_launch import StepLaunch

_PLANS: dict = {}


def _check_schedule(schedule: Schedule, entry, dtype, batch, m, n, k, vec16) -> None:
    """A caller's schedule must be one for these operands and this kernel."""
    p = schedule.problem
    if (p.batch, p.m, p.n, p.k) != (batch, m, n, k) or p.groups is not None:
        raise ValueError(f"gemm: the schedule is for batch={p.batch} m={p.m} n={p.n} "
                         f"k={p.k}; the operands are batch={batch} m={m} n={n} k={k}")
    if entry.dtype != dtype:
        raise TypeError(f"gemm: the schedule's kernel takes {entry.dtype}; the operands are "
                        f"{dtype}")
    if entry.vec16_only and not vec16:
        raise ValueError(f"gemm: kernel {entry.name} needs 16-byte aligned operands")
    small = schedule.small_tile
    if small is not None and tuple(small[:2]) not in (entry.option().small_tiles or ()):
        raise ValueError(f"gemm: the HyTiS schedule's small tile {tuple(small)} is not one "
                         f"that kernel {entry.name} runs beside its {schedule.tile} tile")


def make_plan(dtype, batch, m, n, k, a_layout, b_layout, a_vec16, b_vec16, *, mode,
              reduction, tile, grid, dev, schedule=None, precision=None,
              stream=None, b_off_lines=False, exclude: frozenset = frozenset()) -> LaunchPlan:
    """Resolve (or take), specialise, compile and upload for one problem (the cold path).

    ``schedule``: a :class:`~.resolve.Resolved` or a Schedule to launch as it is; else the
    problem is resolved for the device with ``mode`` / ``reduction`` / ``tile`` / ``grid``;
    ``precision``: float32's (:func:`.catalogue.catalogue_key`); ``b_off_lines``: B's rows
    start off the L2's lines (:func:`.resolve.rows_off_lines`); ``exclude``: entries not to
    plan on. A kernel this device cannot build as its entry declares (a register count this
    compiler misses; a cluster pair of which the device keeps fewer clusters resident than
    the plan assumed) is planned around for this problem, with a warning naming the entry;
    the catalogue is left as it is.
    """
    vec16 = a_vec16 and b_vec16
    planned_here = schedule is None and tile is None
    if isinstance(schedule, Resolved):
        schedule, entry = schedule
        if (a_layout, b_layout) not in entry.layouts():
            # an entry planned for other layouts than these operands have (a plan step whose
            # operands are not laid out as its views assume): plan again for these
            _check_schedule(schedule, entry, dtype, batch, m, n, k, vec16)
            red = DEFAULT_REDUCTION if schedule.reduction == CLUSTER else schedule.reduction
            return make_plan(dtype, batch, m, n, k, a_layout, b_layout, a_vec16, b_vec16,
                             mode=schedule.mode, reduction=red, tile=None, grid=None,
                             dev=dev, precision=precision, stream=stream,
                             b_off_lines=b_off_lines)
    elif schedule is not None:
        entry = entry_for(schedule, dtype, precision, compute_capability(device_info(dev)),
                         (a_layout, b_layout))
    if schedule is not None:
        _check_schedule(schedule, entry, dtype, batch, m, n, k, vec16)
    else:
        options = {} if grid is None else {"grid": grid}
        schedule, entry = resolve_gemm(GemmProblem(m, n, k, batch=batch, dtype=dtype),
                                      device_info(dev), mode=mode, reduction=reduction,
                                      tile=tile, precision=precision, vec16=vec16,
                                      layouts=(a_layout, b_layout), b_off_lines=b_off_lines,
                                      exclude=exclude, **options)
    spec = specs.specialise(entry, protocol=schedule.protocol, a_layout=a_layout,
                            b_layout=b_layout, a_vec16=a_vec16, b_vec16=b_vec16)
    try:
        return bound.launch_plan(StepLaunch(schedule, spec), dev, stream)
    except (jit.RegisterCountError, CoResidencyError) as e:
        # the documented fallbacks: plan again without the entry this compiler cannot build,
        # or, for a schedule auto planned here, without the cluster entry whose clusters
        # this device keeps fewer of resident than the plan assumed (a GPC of an odd count
        # of SMs)
        if isinstance(e, CoResidencyError) and not (planned_here and entry.CLUSTER > 1):
            raise
        warnings.warn(f"{e}; planned again without {entry.name}", RuntimeWarning)
        return make_plan(dtype, batch, m, n, k, a_layout, b_layout, a_vec16, b_vec16,
                         mode=mode, reduction=reduction, tile=tile, grid=grid, dev=dev,
                         precision=precision, stream=stream, b_off_lines=b_off_lines,
                         exclude=exclude | {entry})


def gemm(a, b, out=None, *, alpha=1.0, beta=0.0, mode="auto", reduction=DEFAULT_REDUCTION,
         tile=None, grid=None, allow_tf32=False, precision=None, stream=None, schedule=None,
         bind=False):
    """``out = alpha * a @ b + beta * out`` on the GPU with a Stream-K family kernel.

    ``mode``: "auto", "data_parallel", "stream_k", "hybrid", "split_k", "aligned" or
    "hytis" (passed to the scheduler; "hytis" runs on the entries whose kernel has a small
    tile, :data:`.catalogue.wgmma.WGMMA_HYTIS_TILES`, and raises ValueError where none is
    offered).
    ``reduction``: "deterministic" (workspace + lock, bitwise reproducible; auto may pick the
    arrival protocol's shared sum, also bitwise reproducible, for few tiles with many peers),
    "arrival" (a slot per split; the peers share the final sum when every CTA is resident)
    or "atomic". ``precision`` (float32 operands; other dtypes ignore it): None (the
    default) is exact float32 (FFMA); ``"tf32"`` runs tf32 tensor cores (operands rounded
    to a 10-bit mantissa, fp32 accumulation: wgmma on sm_90, ``mma.m16n8k8.tf32``
    elsewhere); ``"3xtf32"`` runs tf32 wgmma at float32 accuracy (each operand split into
    a tf32 big and small part, three products a k step, errors no larger than exact
    float32's, at about twice the speed of cuBLAS's SGEMM on the H200:
    docs/benchmarks/tf32-int8-h200.md); an infinite element times a tf32-exact one makes
    NaN where exact float32 makes an infinity; where wgmma is not offered, before sm_90 or
    on operands whose K-major copies would still miss 16 bytes, the exact entries run
    it). ``allow_tf32=True`` is ``precision="tf32"``. wgmma reads tf32 and int8 operands
    K-major only: on sm_90 an A that is not row-major or a B that is not column-major is
    copied into that layout first (where its rows of K elements lie on 16 bytes; else the
    portable entries run it as it is), but at "3xtf32" where that copy is estimated dearer
    than :data:`~.resolve.TURN_COST_SHARE` of the product and the operands lie on 16
    bytes: its kernels then turn the operand K-major in their shared-memory stages.
    With ``mode="auto"`` (and no ``tile``, ``grid`` or ``schedule``), a product with
    ``m == 1`` or ``n == 1`` whose vector side is contiguous along k (or whose matrix is)
    is memory-bound and runs on the Dot family (:mod:`.dot`), as einsum runs it; float32
    is then exact whatever ``precision`` says.
    int8 operands accumulate in int32 (s8 wgmma or ``mma.m16n8k32.s8``) and ``out`` is
    int32 (the default output dtype); sums wrap modulo 2^32; ``alpha`` / ``beta`` must be
    integers (applied in int32, wrapping). ``out`` is required for dtypes CuPy has no arrays
    of (bfloat16).
    ``schedule``: a :class:`~.resolve.Resolved` or a Schedule to launch as it is (a plan's
    step carries one); it bypasses the scheduler.
    ``bind=True``: returns ``(out, binding)``, where ``binding(a2, b2, stream)`` (a
    :class:`~.launch.Binding`) repeats this launch for operands of the same shapes,
    strides, dtypes and 16-byte alignment with one packed ``cuLaunchKernel`` into a new
    C-contiguous output; None when the call copied an operand, wrote a caller's ``out`` or
    had ``beta != 0`` (a replay allocates its output).
    """
    import cupy  # optional dependency: only the GPU path needs CuPy

    replayable = out is None and beta == 0
    A, B = describe(a), describe(b)
    if A.dtype != B.dtype:
        raise TypeError(f"gemm: operand dtypes differ ({A.dtype} vs {B.dtype})")
    a_dt = A.dtype
    if a_dt not in INPUT_DTYPES:
        raise TypeError(f"gemm: unsupported dtype {a_dt!r} (have {', '.join(INPUT_DTYPES)})")
    precision = _precision(a_dt, allow_tf32, precision)
    (ba, m, k), (sba, sam, sak) = as3(A.shape, A.strides)
    (bb, k2, n), (sbb, sbk, sbn) = as3(B.shape, B.strides)
    if k != k2:
        raise ValueError(f"gemm: inner dimensions differ: a is {A.shape}, b is {B.shape}")
    batch = max(ba, bb)
    if ba not in (1, batch) or bb not in (1, batch):
        raise ValueError(f"gemm: batch sizes {ba} and {bb} do not broadcast")
    sba, sbb = (0 if ba == 1 else sba), (0 if bb == 1 else sbb)
    lay_a, lay_b = matrix_layout(m, k, sam, sak), matrix_layout(k, n, sbk, sbn)
    out_shape = (m, n) if len(A.shape) == 2 and len(B.shape) == 2 else (batch, m, n)
    out_dt = INPUT_DTYPES[a_dt]
    if out_dt == "int32":
        if alpha != int(alpha) or beta != int(beta) or not (
                -2**31 <= int(alpha) < 2**31 and -2**31 <= int(beta) < 2**31):
            raise ValueError(f"gemm: int8 operands need int32 alpha / beta (got {alpha}, "
                             f"{beta})")
        alpha, beta = int(alpha), int(beta)
    if out is None:
        if beta != 0:
            raise ValueError("gemm: beta != 0 needs out")
        if out_dt == "bfloat16":
            raise TypeError("gemm: bfloat16 operands need out= (CuPy has no bfloat16 arrays)")
        out = cupy.empty(out_shape, dtype=out_dt)
    C = describe(out)
    if C.dtype != out_dt:
        raise TypeError(f"gemm: out dtype {C.dtype} is not {out_dt}, the output dtype of "
                        f"{a_dt} operands")
    if tuple(C.shape) != out_shape and not (len(C.shape) == 3 and C.shape == (batch, m, n)):
        raise ValueError(f"gemm: out has shape {C.shape}, expected {out_shape}")
    (_, _, _), (sbc, scm, scn) = as3(tuple(C.shape), tuple(C.strides))
    if batch == 1:
        sbc = 0
    if m == 0 or n == 0 or batch == 0:
        return (out, None) if bind else out
    if k == 0:
        out[...] = 0 if beta == 0 else out * beta
        return (out, None) if bind else out
    if mode == "auto" and (m == 1 or n == 1) and tile is None and grid is None and \
            schedule is None and a_dt in DOT_CATALOGUE:
        form = dot_form(batch, m, n, k, (sba, sam, sak), (sbb, sbk, sbn), (sbc, scm, scn))
        if form is not None:  # memory-bound: the Dot family, as einsum runs it
            replay = _matvec(form, A, B, C, alpha, beta, stream, bind and replayable,
                             reduction)
            if not bind:
                return out
            return out, (None if replay is None else Binding(replay, form.swap, out_shape,
                                                             out.dtype, cupy.empty))
    a_kmajor = lay_a is not None and lay_a[0] == "row"
    b_kmajor = lay_b is not None and lay_b[0] == "col"
    elem = specs.CXX_TYPES[a_dt][1]
    # (a B of one column reads as row-major whatever its copy: the portable entries take it)
    copy_k_major = False
    if _copies_k_major(schedule, precision) and n > 1 and not (a_kmajor and b_kmajor):
        aligned = (lay_a is not None and lay_b is not None
                   and is_vec16(A.ptr, lay_a[1], sba, batch, elem)
                   and is_vec16(B.ptr, lay_b[1], sbb, batch, elem))
        copied = k_major_copy_elems(not a_kmajor, not b_kmajor, m, n, k, ba if sba else 1,
                                    bb if sbb else 1)
        copy_k_major = _reads_k_major(a_dt, precision, k, aligned, copied,
                                      2.0 * batch * m * n * k)
    if copy_k_major:
        # the tf32 and s8 entries read K-major operands only, and the 3xTF32 ones where
        # the copy is cheap or their rows miss 16 bytes: copy the others into that layout
        # once, on the product's stream (the copies are freed to its pool when it returns)
        with _on(stream):
            a2 = a if a_kmajor else relayout.one_copy(a, relayout.row_major, sba == 0)
            b2 = b if b_kmajor else relayout.one_copy(b, relayout.col_major, sbb == 0)
            r = gemm(a2, b2, out, alpha=alpha, beta=beta, mode=mode, reduction=reduction,
                     tile=tile, grid=grid, precision=precision, stream=stream,
                     schedule=schedule)
        return (r, None) if bind else r
    copy_a = lay_a is None or min(sam, sak, sba) < 0
    copy_b = lay_b is None or min(sbk, sbn, sbb) < 0
    if copy_a or copy_b:  # neither inner stride is 1 (or negative strides): copy once
        if bind:
            return gemm(a, b, out, alpha=alpha, beta=beta, mode=mode, reduction=reduction,
                        tile=tile, grid=grid, precision=precision, stream=stream,
                        schedule=schedule), None
        return gemm(cupy.ascontiguousarray(a) if copy_a else a,
                    cupy.ascontiguousarray(b) if copy_b else b, out, alpha=alpha, beta=beta,
                    mode=mode, reduction=reduction, tile=tile, grid=grid,
                    precision=precision, stream=stream, schedule=schedule)

    (la, lda), (lb, ldb) = lay_a, lay_b
    a_ptr, b_ptr = A.ptr, B.ptr
    swapped = False
    if scn == 1 or n == 1:
        ldc = scm if m > 1 else 0
    elif scm == 1 or m == 1:
        if schedule is not None:
            raise ValueError("gemm: a given schedule needs a row-major out")
        # column-major out: out^T (n x m, row-major) = b^T a^T
        swapped = True
        ldc = scn
        a_ptr, b_ptr = b_ptr, a_ptr
        sba, sbb = sbb, sba
        m, n = n, m
        la, lb = ("col" if lb == "row" else "row"), ("col" if la == "row" else "row")
        lda, ldb = ldb, lda
    else:
        raise ValueError("gemm: out needs a unit inner stride")

    a_vec16 = is_vec16(a_ptr, lda, sba, batch, elem)
    b_vec16 = is_vec16(b_ptr, ldb, sbb, batch, elem)
    if isinstance(schedule, Resolved) and schedule.entry.vec16_only and not (a_vec16 and b_vec16):
        # the plan assumed aligned operands: run it on aligned copies of the others
        a2 = a if a_vec16 else _aligned_copy(a, la == "col", schedule.entry)
        b2 = b if b_vec16 else _aligned_copy(b, lb == "col", schedule.entry)
        r = gemm(a2, b2, out, alpha=alpha, beta=beta, stream=stream, schedule=schedule,
                 precision=precision)
        return (r, None) if bind else r
    dev = _check_device(A, B, C)
    b_off = rows_off_lines(b_ptr, ldb, sbb if batch > 1 else 0, elem)
    key = (dev, a_dt, batch, m, n, k, la, lb, a_vec16, b_vec16, b_off, mode, reduction,
           None if tile is None else tuple(tile), grid, _schedule_key(schedule), precision)
    if stream is None:
        stream = cupy.cuda.get_current_stream()
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = make_plan(a_dt, batch, m, n, k, la, lb, a_vec16, b_vec16,
                                       mode=mode, reduction=reduction, tile=tile, grid=grid,
                                       dev=dev, schedule=schedule, precision=precision,
                                       stream=stream, b_off_lines=b_off)
    plan.launch(a_ptr, b_ptr, C.ptr, m, n, k, lda, ldb, ldc, sba, sbb, sbc, alpha, beta,
                stream)
    if not bind:
        return out
    replay = plan.bind(m, n, k, lda, ldb, ldc, sba, sbb, sbc, alpha, beta) if replayable \
        else None
    if replay is None:
        return out, None
    return out, Binding(replay, swapped, tuple(out.shape), out.dtype, cupy.empty)


def _precision(dtype: str, allow_tf32: bool, precision: str | None) -> str | None:
    """The float32 precision a call asks for (None: exact, or an operand dtype that has
    none); ValueError for an unknown one, or for ``allow_tf32`` with another."""
    if allow_tf32:
        if precision not in (None, TF32):
            raise ValueError(f"gemm: allow_tf32=True asks for precision {TF32!r}; got "
                             f"precision={precision!r} too")
        precision = TF32
    catalogue_key(dtype, precision)  # (ValueError for an unknown precision)
    return precision if dtype == "float32" else None


def _reads_k_major(dtype: str, precision: str | None, k: int, aligned: bool,
                   copied_elems: int, flops: float) -> bool:
    """:func:`~.resolve.reads_k_major` on the current device."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    return reads_k_major(dtype, precision, k,
                         compute_capability(device_info(cupy.cuda.runtime.getDevice())),
                         aligned, copied_elems, flops)


def _copies_k_major(schedule, precision: str | None) -> bool:
    """Whether a call with ``schedule`` copies operands K-major where its dtype's entries read
    them so (:func:`~.resolve.reads_k_major`): with no schedule; with a Resolved one whose
    entry reads K-major only, or turns operands K-major in its stages (a plan step's,
    resolved for the copies: :func:`~.resolve.step_operands`); with a plain one at a
    float32 precision (which its entry is then looked up for)."""
    if isinstance(schedule, Resolved):
        return k_major_only(schedule.entry) or turns_operands(schedule.entry)
    return schedule is None or precision is not None


def _on(stream):
    """A context in which CuPy works on ``stream`` (a CuPy stream; else the current one)."""
    return stream if hasattr(stream, "__enter__") else contextlib.nullcontext()


def _check_device(A, B, C) -> int:
    """The current device, which every operand must be on (ValueError otherwise)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    dev = cupy.cuda.runtime.getDevice()
    if {A.device_id, B.device_id, C.device_id} != {dev}:
        raise ValueError(f"gemm: operands on devices {A.device_id}, {B.device_id}, "
                         f"{C.device_id}; the current device is {dev} (use cupy.cuda.Device)")
    return dev


def _matvec(form, A, B, C, alpha, beta, stream, bind, reduction):
    """A matrix-vector product (or batch of dots) on the Dot family; its BoundLaunch when
    ``bind``."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    dev = _check_device(A, B, C)
    if stream is None:
        stream = cupy.cuda.get_current_stream()
    return dot.product(form, A.dtype, A.itemsize(), A.ptr, B.ptr, C.ptr, dev, stream, alpha,
                       beta, bind, reduction)


def _schedule_key(schedule):
    """What identifies a caller's schedule in the plan cache: its content, so that equal
    schedules share one LaunchPlan and none is kept alive by identity."""
    if schedule is None:
        return None
    s, entry = schedule if isinstance(schedule, Resolved) else (schedule, None)
    return (s.digest(), s.grid, tuple(s.tile), s.device.ctas_per_sm, s.cluster, s.protocol,
            entry)


def _aligned_copy(x, col: bool, entry):
    """A copy of ``x`` in the same layout (``col``: column-major matrices), freshly allocated
    (256-byte aligned); ValueError when its leading dimension is still not a multiple of 16
    bytes, which ``entry`` needs."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    y = relayout.col_major(x) if col else cupy.ascontiguousarray(x)
    ld = y.shape[-2] if col else y.shape[-1]
    if (ld * y.itemsize) % specs.VEC16_BYTES:
        raise ValueError(f"gemm: kernel {entry.name} needs 16-byte aligned operands; a "
                         f"leading dimension of {ld} {y.dtype} elements is not")
    return y


def clear_plans() -> None:
    """Forget the launches made so far (this module's and the bound ones it shares)."""
    _PLANS.clear()
    bound.clear_plans()
