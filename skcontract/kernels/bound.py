"""Launches bound to a device: a :class:`~.step_launch.StepLaunch` run on operands.

One cache holds the compiled, uploaded :class:`~.launch.LaunchPlan` of each launch value and
device (:func:`launch_plan`), for einsum's steps, ``gemm()``, the Dot family's products and
conv2d alike. :func:`run_step` runs a plan step's launch on CuPy operands: it checks that the
operands are the ones the launch was planned for (:meth:`.operands.Product.runs_as`; else
:class:`OperandMismatch`, and the plan layer plans the step again for them), makes the copies
the launch names, binds the pointers and launches. :func:`launch_operands` is the launch
itself, which ``gemm()`` calls too. No resolver, no catalogue. CuPy is imported inside the
functions only.
"""
from __future__ import annotations


from . import embed, jit, relayout
from .forms import DotForm
from .launch import Binding, BoundLaunch, LaunchPlan
from .operands import Operand, Product, as3, contiguous, describe, matrix_layout, product_of
from .step_launch import StepLaunch

_PLANS: dict = {}


class OperandMismatch(ValueError):
    """A call's operands are not those a launch was planned for: ``product`` is theirs
    (:class:`~.operands.Product`; None for an operand no launch reads as it lies: no unit
    inner stride, or a negative stride)."""

    def __init__(self, launch: StepLaunch, product: Product | None):
        self.launch, self.product = launch, product
        planned = launch.product.describe() if launch.product is not None else "?"
        got = "operands no kernel reads as they lie" if product is None else \
            product.describe()
        super().__init__(f"launch {launch.spec.name} was planned for {planned} "
                         f"({_dims(launch.product)}); the call has {got} ({_dims(product)})")


def _dims(p: Product | None) -> str:
    return "-" if p is None else f"batch={p.batch} m={p.m} n={p.n} k={p.k}"


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


def checked_operands(launch: StepLaunch, x, y) -> tuple[Operand, Operand, Product]:
    """The descriptions of CuPy views ``x`` and ``y`` and their product, where ``launch``
    runs them: TypeError where their dtypes differ, :class:`OperandMismatch` where they are
    not the operands it was planned for."""
    A, B = describe(x), describe(y)
    if A.dtype != B.dtype:  # a kernel reads both as one dtype: never launch on such a pair
        raise TypeError(f"launch {launch.spec.name}: operands of dtypes {A.dtype} and "
                        f"{B.dtype}; a launch multiplies operands of one dtype")
    product = product_of(A, B)
    if product is None or launch.product is None or not product.runs_as(launch.product):
        raise OperandMismatch(launch, product)
    return A, B, product


def run_step(launch: StepLaunch, x, y, conj: tuple[bool, bool] = (False, False)):
    """``x @ y`` of CuPy (batch, M, K) x (batch, K, N) (or 2-D) views on ``launch``
    (``conj``: of ``x`` and / or ``y`` conjugated, for a launch that reads them so itself,
    ``StepLaunch.reads_conjugated``: ValueError for another):
    ``(result, binding)``, the binding (:class:`~.launch.Binding`) repeating the launch on
    operands laid out as these (None where the launch copied an operand or cast its
    result). TypeError where the operands' dtypes differ (the steps before hand on one
    dtype); :class:`OperandMismatch` where the operands are not those the launch was
    planned for; :class:`.jit.RegisterCountError` or :class:`.launch.CoResidencyError`
    where this device cannot run its kernel as declared (the plan layer plans the step
    again either way)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    A, B, product = checked_operands(launch, x, y)
    dev = cupy.cuda.runtime.getDevice()
    if A.device_id != dev or B.device_id != dev:
        raise ValueError(f"einsum: operands on devices {A.device_id}, {B.device_id}; the "
                         f"current device is {dev} (use cupy.cuda.Device)")
    if launch.embed is not None:
        return _run_embedded(launch, x, y, dev, cupy.cuda.get_current_stream(), conj), None
    if any(conj):
        if not launch.reads_conjugated:
            raise ValueError(f"launch {launch.spec.name} reads no conjugated operand")
        launch = launch.runs(conj)
    shape = (product.m, product.n) if x.ndim == 2 and y.ndim == 2 else \
        (product.batch, product.m, product.n)
    out = cupy.empty(shape, dtype=launch.spec.dtype_out)
    bound = launch_operands(launch, x, y, A, B, describe(out), 1.0, 0.0, dev,
                            cupy.cuda.get_current_stream(), bind=True)
    if out.dtype != x.dtype:  # int8: the kernel writes int32; the cast wraps like numpy's
        return out.astype(x.dtype), None
    swapped = launch.form is not None and launch.form.swap
    return out, (None if bound is None else Binding(bound, swapped, shape, out.dtype,
                                                    cupy.empty))


def _run_embedded(launch: StepLaunch, x, y, dev: int, stream, conj=(False, False)):
    """``x @ y`` of complex CuPy views on the real form of ``launch`` (:mod:`.embed`): the
    read operand's (re, im) pairs as a real view (copied row-major first where the form
    says so), the other operand embedded, the result's pairs written by the real product
    (the transposed product's result returned as a view of C^T); ``conj`` (of ``x``, of
    ``y``) folded into the embedding's signs. The embedding runs every call: no binding."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    form = launch.embed
    swap = form.side == embed.TRANSPOSED
    read, other = (y.swapaxes(-1, -2), x.swapaxes(-1, -2)) if swap else (x, y)
    conj_read, conj_other = conj[::-1] if swap else conj
    if form.copy:
        read = contiguous(read)
    xr, w = embed.real_view(read), embed.embed(other, form.ld, conj_read, conj_other)
    batch = max(v.shape[0] if v.ndim == 3 else 1 for v in (read, w))
    lead = () if x.ndim == 2 and y.ndim == 2 else (batch,)
    out = cupy.empty(lead + (read.shape[-2], other.shape[-1]), dtype=x.dtype)
    cr = embed.real_view(out)
    launch_operands(launch, xr, w, describe(xr), describe(w), describe(cr), 1.0, 0.0, dev,
                    stream)
    return out.swapaxes(-1, -2) if swap else out


def launch_operands(launch: StepLaunch, x, y, X: Operand, Y: Operand, C: Operand, alpha,
                    beta, dev: int, stream, bind: bool = False) -> BoundLaunch | None:
    """``C = alpha * x @ y + beta * C`` on ``launch`` for operands whose product runs as the
    launch's (the caller checked; ``X``, ``Y``, ``C``: the arrays described,
    :func:`.operands.describe`; ``C`` row-major): the copies the launch names made first.
    Returns the BoundLaunch repeating it when ``bind`` and the launch copied nothing (no
    K-major copy, no copy into rows on 16 bytes)."""
    if launch.form is not None:
        return _launch_dot(launch, launch.form, X, Y, C, alpha, beta, dev, stream, bind)
    pad_a, pad_b = launch.aligned_copies
    if pad_a:
        x = relayout.aligned(x)
        X = describe(x)
    if pad_b:
        y = relayout.aligned(y)
        Y = describe(y)
    copy_a, copy_b = launch.copies
    if copy_a:
        x = relayout.one_copy(x, relayout.row_major, X.strides[0] == 0 and len(X.shape) == 3)
        X = describe(x)
    if copy_b:
        y = relayout.one_copy(y, relayout.col_major, Y.strides[0] == 0 and len(Y.shape) == 3)
        Y = describe(y)
    (ba, m, k), (sba, sam, sak) = as3(X.shape, X.strides)
    (bb, _, n), (sbb, sbk, sbn) = as3(Y.shape, Y.strides)
    batch = max(ba, bb)
    sba, sbb = (0 if ba == 1 else sba), (0 if bb == 1 else sbb)
    (_, lda), (_, ldb) = matrix_layout(m, k, sam, sak), matrix_layout(k, n, sbk, sbn)
    _, (sbc, scm, _) = as3(C.shape, C.strides)
    args = (m, n, k, lda, ldb, scm if m > 1 else 0, sba, sbb, sbc if batch > 1 else 0,
            alpha, beta)
    plan = launch_plan(launch, dev, stream)
    plan.launch(X.ptr, Y.ptr, C.ptr, *args, stream)
    return plan.bind(*args) if bind and not (copy_a or copy_b or pad_a or pad_b) else None


def _launch_dot(launch, form: DotForm, X, Y, C, alpha, beta, dev, stream, bind):
    """The Dot kernel's launch (its A and B in the form's order)."""
    a, b = (Y, X) if form.swap else (X, Y)
    mm, nn = (form.outputs, 1) if form.shape == "rows" else (1, form.outputs)
    args = (mm, nn, form.k, form.lda, form.ldb, form.ldc, form.sa, form.sb, form.sc, alpha,
            beta)
    plan = launch_plan(launch, dev, stream)
    plan.launch(a.ptr, b.ptr, C.ptr, *args, stream)
    return plan.bind(*args) if bind else None


def clear_plans() -> None:
    _PLANS.clear()
