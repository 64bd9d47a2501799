"""``gemm``: the Python entry point of the GPU engine.

    out = gemm(a, b, out=None, *, alpha=1.0, beta=0.0, mode="auto",
               reduction="deterministic", tile=None, grid=None, allow_tf32=False,
               precision=None, stream=None, schedule=None)

``a`` is (m, k) or (batch, m, k), ``b`` is (k, n) or (batch, k, n): CuPy arrays or any GPU
array with ``__cuda_array_interface__`` or ``__dlpack__`` (:mod:`.operands`), with any
strides where one of the two inner strides is 1 (row or column major, any leading dimension,
any batch stride including 0). A column-major ``out`` is handled by computing
``out^T = b^T a^T``. Other layouts are copied.

A call goes the way an einsum step goes: its operands' :class:`~.operands.Product` is planned
once (:func:`.resolve.resolve_product`, the :class:`~.step_launch.StepLaunch` kept for the
next call of that product and those options) and launched through the bound launches
(:func:`.bound.launch_operands`). A warm call is one dict lookup plus one launch.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

from . import bound, jit, torch_cuda
from .catalogue import INPUT_DTYPES, TF32, catalogue_key
from .launch import Binding, CoResidencyError, LaunchPlan
from .operands import Product, as3, contiguous, describe, product_of
from .resolve import DEFAULT_REDUCTION, Resolved, device_info, resolve_product
from .step_launch import StepLaunch

_LAUNCHES: dict = {}
"""(device, Product, options) -> the StepLaunch gemm() planned for them."""


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
    docs/benchmarks/tf32-int8-h200.md; infinities and NaNs give exact float32's results, but
    for an infinity times a denormal below 2^-136, NaN);
    where wgmma is not offered, before sm_90 or
    on operands whose K-major copies would still miss 16 bytes, the exact entries run
    it). Operands whose rows miss 16 bytes are copied, in their own layout, into rows
    padded to 16 bytes where the plan prices that copy and the Wgmma kernel below the
    portable kernel on them as they lie (:func:`.resolve.aligned_copies`).
    ``allow_tf32=True`` is ``precision="tf32"``. wgmma reads tf32 and int8 operands
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
    integers (applied in int32, wrapping). Without ``out``, CUDA torch tensors give a new
    torch tensor (bfloat16 too), and CuPy arrays, or any operands with ``bind=True`` or a
    ``stream``, a new CuPy array, which needs ``out`` for dtypes CuPy has no arrays of
    (bfloat16).
    ``schedule``: a :class:`~.resolve.Resolved` or a Schedule to launch as it is; it
    bypasses the scheduler, and ValueError / TypeError say where it is not one for these
    operands (another problem or dtype, a kernel that reads them in other layouts or needs
    them on 16 bytes).
    ``bind=True``: returns ``(out, binding)``, where ``binding(a2, b2, stream)`` (a
    :class:`~.launch.Binding`) repeats this launch for operands of the same shapes,
    strides, dtypes and 16-byte alignment with one packed ``cuLaunchKernel`` into a new
    C-contiguous output; None when the call copied an operand, wrote a caller's ``out`` or
    had ``beta != 0`` (a replay allocates its output).
    ``stream``: a CuPy stream; None is CuPy's current stream, or for torch tensors torch's
    current stream, with the call's allocations made through torch's allocator (so that
    ``torch.cuda.graph`` captures the call: :mod:`.torch_cuda`).
    """
    torch_device = torch_cuda.device_of(a, b, out) if stream is None else None
    key = None
    if stream is None and schedule is None and not bind:
        key = _warm_key(a, b, out, (alpha, beta, mode, reduction, tile, grid, allow_tf32,
                                    precision), torch_device)
        hit = _WARM.get(key) if key is not None else None
        if hit is not None:
            return hit(a, b, out, torch_device)
    args = (a, b, out, alpha, beta, mode, reduction, tile, grid, allow_tf32, precision,
            stream, schedule, bind, key)
    if torch_device is None:
        return _gemm(*args)
    with torch_cuda.on_torch_stream(torch_device):
        if out is None and not bind and beta == 0:
            args = (a, b, _torch_output(a, b, torch_device), *args[3:])
        return _gemm(*args)


def _torch_output(a, b, device: int):
    """A new row-major torch tensor for the product of the torch tensors ``a`` and ``b``
    (of the output dtype of theirs: a torch caller gets a torch tensor, bfloat16 too)."""
    A, B = describe(a), describe(b)
    dtype, batch, m, n, _ = _problem(A, B)
    shape = (m, n) if len(A.shape) == 2 and len(B.shape) == 2 else (batch, m, n)
    return torch_cuda.empty(shape, INPUT_DTYPES[dtype], device)


WARM_CALLS = 1024
"""Warm calls remembered (:class:`_WarmCall`): a program's products, a few layouts each."""
_WARM: dict = {}


_LIBRARIES: dict = {}
"""An array type -> the library it comes from ("cupy", "torch" or another module's name),
worked out once a type: a warm call asks it of every operand."""


def _library(x) -> str:
    kind = type(x)
    found = _LIBRARIES.get(kind)
    if found is None:
        found = _LIBRARIES[kind] = kind.__module__.split(".")[0]
    return found


def _layout(x):
    """What a launch depends on of an array besides its address (shape, strides, dtype,
    16-byte alignment, device), for CuPy arrays and torch tensors; None for others."""
    library = _library(x)
    if library == "cupy":
        return (x.shape, x.strides, x.dtype, x.data.ptr & 15, x.data.device_id)
    if library == "torch":
        return (x.shape, x.stride(), x.dtype, x.data_ptr() & 15, x.get_device())
    return None


def _ptr(x) -> int:
    return x.data.ptr if _library(x) == "cupy" else x.data_ptr()


def _warm_key(a, b, out, options: tuple, torch_device: int | None):
    """The key of a call :func:`gemm` may replay (:class:`_WarmCall`), or None: plain
    Python scalars and options, CuPy or torch operands (torch's on the current device)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    current = cupy.cuda.runtime.getDevice()
    # scalars alone are checked in one C-level pass; a tile or grid tuple goes by _plain
    plain = _PLAIN.issuperset(map(type, options)) or all(_plain(v) for v in options)
    if not plain or torch_device not in (None, current):
        return None
    la, lb = _layout(a), _layout(b)
    lo = None if out is None else _layout(out)
    if la is None or lb is None or (out is not None and lo is None):
        return None
    return (la, lb, lo, options, current)


_PLAIN = frozenset({int, float, bool, str, type(None)})


def _plain(v) -> bool:
    """A value whose equality means the same call: a plain scalar, a tuple of ints."""
    return type(v) in _PLAIN or (type(v) is tuple and all(type(t) is int for t in v))


class _WarmCall(NamedTuple):
    """What a warm call redoes: allocate the output where the caller gave none, launch.
    ``b_first``: the kernel's A is the caller's ``b`` (a Dot form's swap, or an output
    written transposed); ``torch_dtype``: the output's torch dtype for torch callers (their
    output is ``new_empty`` of the first CUDA tensor among ``a`` and ``b``, ``b`` where
    ``torch_from_b``: torch's C++ allocation path, with no dtype or device to parse), None
    for CuPy ones."""

    launch: object          # BoundLaunch
    b_first: bool
    out_shape: tuple
    out_dtype: str
    torch_dtype: object = None
    torch_from_b: bool = False

    def __call__(self, a, b, out, torch_device):
        import cupy  # optional dependency: only the GPU path needs CuPy

        if torch_device is None:
            stream = cupy.cuda.get_current_stream()
            if out is None:
                out = cupy.empty(self.out_shape, self.out_dtype)
        else:
            stream = torch_cuda.current_stream(torch_device)
            if out is None:
                out = (b if self.torch_from_b else a).new_empty(self.out_shape,
                                                                dtype=self.torch_dtype)
        pa, pb = _ptr(a), _ptr(b)
        args = (*((pb, pa) if self.b_first else (pa, pb)), _ptr(out), stream)
        if torch_device is not None and not self.launch.has_pool(stream):
            # a stream new to this launch (a graph's capture stream): its fixup pool is
            # allocated through torch, which a capture permits
            with torch_cuda.on_torch_stream(torch_device):
                self.launch(*args)
        else:
            self.launch(*args)
        return out


def _gemm(a, b, out, alpha, beta, mode, reduction, tile, grid, allow_tf32, precision,
          stream, schedule, bind, warm_key=None):
    """:func:`gemm` on the current stream, or on ``stream``; a call that read its operands
    in place is remembered under ``warm_key`` (None: not remembered)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    caller_a, caller_b = a, b  # (replaced below by copies or transposed views)
    A, B = describe(a), describe(b)
    dtype, batch, m, n, k = _problem(A, B)
    precision = _precision(dtype, allow_tf32, precision)
    out_dt = INPUT_DTYPES[dtype]
    alpha, beta = _scalars(out_dt, alpha, beta)
    out_shape = (m, n) if len(A.shape) == 2 and len(B.shape) == 2 else (batch, m, n)
    replayable = out is None and beta == 0
    out = _output(out, out_shape, out_dt, beta, batch, m, n, cupy)
    if m == 0 or n == 0 or batch == 0 or k == 0:
        if k == 0 and min(m, n, batch) > 0:
            out[...] = 0 if beta == 0 else out * beta
        return (out, None) if bind else out
    a, A, copied_a = _unit_strided(a, A)
    b, B, copied_b = _unit_strided(b, B)
    C = describe(out)
    transposed = _column_major(C, m, n)
    if transposed:  # out^T (n x m, row-major) = b^T a^T
        if schedule is not None:
            raise ValueError("gemm: a given schedule needs a row-major out")
        a, b = _transposed(b, cupy), _transposed(a, cupy)
        A, B, C = describe(a), describe(b), describe(_transposed(out, cupy))
    dev = _check_device(A, B, C, cupy)
    _, c_strides = as3(C.shape, C.strides)
    product = product_of(A, B, c_strides)
    options = dict(mode=mode, reduction=reduction, tile=tile, grid=grid, precision=precision,
                   dot=mode == "auto" and tile is None and grid is None and schedule is None)
    if stream is None:
        stream = cupy.cuda.get_current_stream()
    in_place = not (copied_a or copied_b)
    launch, replay = _launch(product, schedule, options, a, b, A, B, C, alpha, beta, dev,
                             stream, in_place and (bind and replayable or warm_key is not None))
    swapped = launch.form is not None and launch.form.swap
    if warm_key is not None and replay is not None:
        if len(_WARM) >= WARM_CALLS:
            _WARM.clear()
        from_b = torch_cuda.device_of(caller_a) is None
        _WARM[warm_key] = _WarmCall(replay, swapped != transposed, out_shape, out_dt,
                                    torch_cuda.dtype_of(caller_b if from_b else caller_a,
                                                        out_dt), from_b)
    if not bind:
        return out
    return out, (Binding(replay, swapped, out_shape, out.dtype, cupy.empty)
                 if replay is not None and replayable else None)


def _launch(product: Product, schedule, options: dict, a, b, A, B, C, alpha, beta, dev: int,
            stream, bind: bool):
    """Launch the call's product on the launch planned for it (:func:`plan_launch`, on the
    first call of the product and options): ``(launch, BoundLaunch or None)``."""
    key = (dev, product, _schedule_key(schedule), *sorted(options.items()))
    launch = _LAUNCHES.get(key)
    if launch is None:
        launch = _LAUNCHES[key] = plan_launch(product, dev, stream, schedule=schedule,
                                              **options)[0]
    return launch, bound.launch_operands(launch, a, b, A, B, C, alpha, beta, dev, stream,
                                         bind)


def plan_launch(product: Product, dev: int, stream, *, schedule=None,
                **options) -> tuple[StepLaunch, LaunchPlan]:
    """The launch ``gemm()`` plans for ``product`` on device ``dev`` (``schedule`` and
    ``options`` as :func:`.resolve.resolve_product` takes them) and its compiled LaunchPlan.
    A kernel this device does not build as its entry declares (a register count this
    compiler misses; for auto's plan, a cluster pair of which the device keeps fewer clusters
    resident than the plan assumed) is planned around for this product, with a warning
    naming the entry; the catalogue is left as it is."""
    exclude = frozenset()
    while True:
        launch = resolve_product(product, device_info(dev), schedule=schedule,
                                 exclude=exclude, **options)
        try:
            return launch, bound.launch_plan(launch, dev, stream)
        except (jit.RegisterCountError, CoResidencyError) as e:
            auto = schedule is None and options.get("tile") is None
            if schedule is not None or (isinstance(e, CoResidencyError) and not (
                    auto and launch.entry.CLUSTER > 1)):
                raise
            warnings.warn(f"{e}; planned again without {launch.entry.name}", RuntimeWarning)
            exclude |= {launch.entry}


def _problem(A, B) -> tuple[str, int, int, int, int]:
    """The dtype and (batch, m, n, k) of ``A @ B``; TypeError / ValueError for operands
    gemm does not take."""
    if A.dtype != B.dtype:
        raise TypeError(f"gemm: operand dtypes differ ({A.dtype} vs {B.dtype})")
    if A.dtype not in INPUT_DTYPES:
        raise TypeError(f"gemm: unsupported dtype {A.dtype!r} (have "
                        f"{', '.join(INPUT_DTYPES)})")
    (ba, m, k), _ = as3(A.shape, A.strides)
    (bb, k2, n), _ = as3(B.shape, B.strides)
    if k != k2:
        raise ValueError(f"gemm: inner dimensions differ: a is {A.shape}, b is {B.shape}")
    batch = max(ba, bb)
    if ba not in (1, batch) or bb not in (1, batch):
        raise ValueError(f"gemm: batch sizes {ba} and {bb} do not broadcast")
    return A.dtype, batch, m, n, k


def _scalars(out_dt: str, alpha, beta):
    """``alpha`` and ``beta`` as the kernel takes them: int32 for int8 operands."""
    if out_dt != "int32":
        return alpha, beta
    if alpha != int(alpha) or beta != int(beta) or not (
            -2**31 <= int(alpha) < 2**31 and -2**31 <= int(beta) < 2**31):
        raise ValueError(f"gemm: int8 operands need int32 alpha / beta (got {alpha}, {beta})")
    return int(alpha), int(beta)


def _output(out, out_shape: tuple, out_dt: str, beta, batch: int, m: int, n: int, cupy):
    """The caller's ``out`` (checked) or a new one."""
    if out is None:
        if beta != 0:
            raise ValueError("gemm: beta != 0 needs out")
        if out_dt == "bfloat16":
            raise TypeError("gemm: bfloat16 operands need out= (CuPy has no bfloat16 arrays)")
        return cupy.empty(out_shape, dtype=out_dt)
    C = describe(out)
    if C.dtype != out_dt:
        raise TypeError(f"gemm: out dtype {C.dtype} is not {out_dt}, the output dtype of "
                        f"the operands")
    if tuple(C.shape) != out_shape and not (len(C.shape) == 3 and C.shape == (batch, m, n)):
        raise ValueError(f"gemm: out has shape {C.shape}, expected {out_shape}")
    _, (_, scm, scn) = as3(tuple(C.shape), tuple(C.strides))
    if not (scn == 1 or n == 1 or scm == 1 or m == 1):
        raise ValueError("gemm: out needs a unit inner stride")
    return out


def _column_major(C, m: int, n: int) -> bool:
    """Whether the launch writes ``out`` transposed (out^T row-major)."""
    _, (_, _, scn) = as3(C.shape, C.strides)
    return not (scn == 1 or n == 1)


def _unit_strided(x, X):
    """``x`` and its description, copied C-contiguous where neither of its inner strides is
    1 or a stride is negative (no kernel reads it as it lies); and whether it was."""
    (_, rows, cols), (sb, sr, sc) = as3(X.shape, X.strides)
    if (cols == 1 or sc == 1 or rows == 1 or sr == 1) and min(sb, sr, sc) >= 0:
        return x, X, False
    y = contiguous(x)
    return y, describe(y), True


def _transposed(x, cupy):
    """``x`` with its last two axes swapped (a view)."""
    return x.swapaxes(-1, -2) if hasattr(x, "swapaxes") else cupy.asarray(x).swapaxes(-1, -2)


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


def _check_device(A, B, C, cupy) -> int:
    """The current device, which every operand must be on (ValueError otherwise)."""
    dev = cupy.cuda.runtime.getDevice()
    if {A.device_id, B.device_id, C.device_id} != {dev}:
        raise ValueError(f"gemm: operands on devices {A.device_id}, {B.device_id}, "
                         f"{C.device_id}; the current device is {dev} (use cupy.cuda.Device)")
    return dev


def _schedule_key(schedule):
    """What identifies a caller's schedule: its content, so that equal schedules share one
    launch and none is kept alive by identity."""
    if schedule is None:
        return None
    s, entry = schedule if isinstance(schedule, Resolved) else (schedule, None)
    return (s.digest(), s.grid, tuple(s.tile), s.device.ctas_per_sm, s.cluster, s.protocol,
            entry)


def clear_plans() -> None:
    """Forget the launches made so far (this module's and the bound ones it shares)."""
    _LAUNCHES.clear()
    _WARM.clear()
    bound.clear_plans()
