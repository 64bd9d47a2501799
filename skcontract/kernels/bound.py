"""Launches bound to a device: :func:`run_step` launches a plan step's
:class:`~.step_launch.StepLaunch` on CuPy operands.

One cache holds the compiled, uploaded :class:`~.launch.LaunchPlan` of each launch value and
device (:func:`launch_plan`), for einsum's steps, ``gemm()`` and the Dot family's products
alike. A call checks that its operands are the ones the launch was made for (dtype,
layouts, 16-byte alignment, the Dot form), makes the copies the launch names, binds the
pointers and launches: no resolver, no catalogue. Operands laid out otherwise get None, and
the caller runs them its documented way. CuPy is imported inside the functions only.
"""
from __future__ import annotations

from . import jit, relayout
from .forms import DotForm, form_of
from .launch import Binding, CoResidencyError, LaunchPlan
from .operands import as3, describe, is_vec16, matrix_layout
from .specs import specialise
from .step_launch import StepLaunch, dot_spec

_PLANS: dict = {}


def launch_plan(launch: StepLaunch, dev: int, stream) -> LaunchPlan:
    """The LaunchPlan of ``launch`` on device ``dev``: compiled and uploaded once."""
    key = (launch, dev)
    plan = _PLANS.get(key)
    if plan is None:
        kernel = jit.get_kernel(launch.spec, dev)
        plan = _PLANS[key] = LaunchPlan(kernel, launch.schedule, dev, stream)
        jit.print_kernel(f"launch {launch.spec.name} (occupancy {kernel.occupancy}/SM, smem "
                         f"{launch.spec.smem_bytes} B)\n    schedule: {launch.schedule.summary()}")
    return plan


def run_step(launch: StepLaunch, x, y):
    """``x @ y`` of CuPy (batch, M, K) x (batch, K, N) (or 2-D) views on ``launch``:
    ``(result, binding)``, the binding (:class:`~.launch.Binding`) repeating the launch on
    operands laid out as these (None where the launch copied an operand or cast its
    result); None where the operands are not those the launch was made for, or where this
    device cannot run its kernel as declared (a register count this compiler misses, fewer
    clusters resident than planned), whose fallbacks :func:`.gemm.gemm` takes."""
    if x.dtype.name != launch.spec.dtype_in or y.dtype != x.dtype:
        return None
    try:
        if launch.form is not None:
            return _run_dot(launch, x, y)
        return _run_gemm(launch, x, y)
    except (jit.RegisterCountError, CoResidencyError):
        return None


def _run_dot(launch: StepLaunch, x, y):
    import cupy  # optional dependency: only the GPU path needs CuPy

    found = form_of(x, y)
    if found is None or found[0] != launch.form:
        return None
    form, shape = found
    a, b = (y, x) if form.swap else (x, y)
    spec = dot_spec(launch.entry, launch.spec.protocol, form, x.itemsize, a.data.ptr,
                    b.data.ptr)
    dev = cupy.cuda.runtime.getDevice()
    if spec != launch.spec or x.device.id != dev or y.device.id != dev:
        return None
    out = cupy.empty(shape, dtype=x.dtype)
    stream = cupy.cuda.get_current_stream()
    args = _dot_args(form)
    plan = launch_plan(launch, dev, stream)
    plan.launch(a.data.ptr, b.data.ptr, out.data.ptr, *args, stream)
    bound = plan.bind(*args)
    return out, (None if bound is None else Binding(bound, form.swap, shape, x.dtype,
                                                    cupy.empty))


def _dot_args(form: DotForm) -> tuple:
    """The kernel's problem, strides, alpha and beta for ``form``."""
    mm, nn = (form.outputs, 1) if form.shape == "rows" else (1, form.outputs)
    return (mm, nn, form.k, form.lda, form.ldb, form.ldc, form.sa, form.sb, form.sc, 1.0,
            0.0)


def _run_gemm(launch: StepLaunch, x, y):
    import cupy  # optional dependency: only the GPU path needs CuPy

    copied_a, copied_b = launch.copies
    if copied_a:
        x = relayout.one_copy(x, relayout.row_major, x.ndim == 3 and x.strides[0] == 0)
    if copied_b:
        y = relayout.one_copy(y, relayout.col_major, y.ndim == 3 and y.strides[0] == 0)
    A, B = describe(x), describe(y)
    (ba, m, k), (sba, sam, sak) = as3(A.shape, A.strides)
    (bb, _, n), (sbb, sbk, sbn) = as3(B.shape, B.strides)
    batch = max(ba, bb)
    sba, sbb = (0 if ba == 1 else sba), (0 if bb == 1 else sbb)
    lay_a, lay_b = matrix_layout(m, k, sam, sak), matrix_layout(k, n, sbk, sbn)
    dev = cupy.cuda.runtime.getDevice()
    if lay_a is None or lay_b is None or min(sba, sbb) < 0 or \
            A.device_id != dev or B.device_id != dev:
        return None
    (la, lda), (lb, ldb) = lay_a, lay_b
    elem = A.itemsize()
    spec = launch.spec
    actual = specialise(spec.entry, protocol=spec.protocol, a_layout=la, b_layout=lb,
                        a_vec16=is_vec16(A.ptr, lda, sba, batch, elem),
                        b_vec16=is_vec16(B.ptr, ldb, sbb, batch, elem))
    if actual != spec:
        return None
    shape = (m, n) if len(A.shape) == 2 and len(B.shape) == 2 else (batch, m, n)
    out = cupy.empty(shape, dtype=spec.dtype_out)
    ldc, sbc = (n if m > 1 else 0), (m * n if batch > 1 else 0)
    args = (m, n, k, lda, ldb, ldc, sba, sbb, sbc, 1.0, 0.0)
    stream = cupy.cuda.get_current_stream()
    plan = launch_plan(launch, dev, stream)
    plan.launch(A.ptr, B.ptr, out.data.ptr, *args, stream)
    if out.dtype != x.dtype:  # int8: the kernel writes int32; the cast wraps like numpy's
        return out.astype(x.dtype), None
    if copied_a or copied_b:
        return out, None
    bound = plan.bind(*args)
    return out, (None if bound is None else Binding(bound, False, shape, out.dtype,
                                                    cupy.empty))


def clear_plans() -> None:
    _PLANS.clear()
