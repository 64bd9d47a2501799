"""Memory-bound matrix products on the Dot family (``sk_dot.cuh``): :func:`matvec` launches
the :class:`~.forms.DotForm` of a batched product (:mod:`.forms` says which products have
one); products that have none go to :func:`.gemm.gemm`.

The scheduler plans a form as a GEMM of ``rows x 1`` (or ``1 x cols``) outputs over k, with
the Dot entries' tiles as its options, so the same split table, Stream-K decomposition and
fixup protocols run it (:func:`.resolve.resolve_dot`).
"""
from __future__ import annotations

from . import bound
from .catalogue import DOT_CATALOGUE, Dot
from .forms import DotForm, form_of, loads_aligned
from .launch import Binding, LaunchPlan
from .resolve import DEFAULT_REDUCTION, Resolved, device_info, resolve_dot
from .specs import specialise
from .step_launch import StepLaunch


_PLANS: dict = {}


def _plan(form: DotForm, dtype: str, a_vec: bool, b_vec: bool, resolved: Resolved | None,
          dev: int, stream, reduction: str) -> LaunchPlan:
    """The LaunchPlan of one form (cold path: resolve, specialise, compile, upload)."""
    if resolved is None or not isinstance(resolved.entry, Dot) or \
            resolved.schedule.problem != form.problem(dtype):
        resolved = resolve_dot(form, dtype, device_info(dev), reduction=reduction)
    schedule, entry = resolved
    la, lb = entry.layouts()[0]
    spec = specialise(entry, protocol=schedule.protocol, a_layout=la, b_layout=lb,
                      a_vec16=a_vec, b_vec16=b_vec)
    return bound.launch_plan(StepLaunch(schedule, spec, form=form), dev, stream)


def _launch(form: DotForm, dtype: str, item: int, a_ptr: int, b_ptr: int, c_ptr: int,
            resolved: Resolved | None, dev: int, stream, alpha, beta, bind: bool,
            reduction: str = DEFAULT_REDUCTION):
    """Launch ``form`` (operand addresses in the form's A / B order) with ``resolved``'s
    schedule, or one resolved with ``reduction``; the BoundLaunch that repeats it when
    ``bind``, else None."""
    rows = form.shape == "rows"
    a_vec = loads_aligned(a_ptr, form.lda, form.sa, item, True) if rows else True
    b_vec = loads_aligned(b_ptr, form.ldb, form.sb, item, True)
    key = (dev, dtype, form, a_vec, b_vec, reduction,
           None if resolved is None else (resolved.schedule.digest(), resolved.entry))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _plan(form, dtype, a_vec, b_vec, resolved, dev, stream, reduction)
    mm, nn = (form.outputs, 1) if rows else (1, form.outputs)
    args = (mm, nn, form.k, form.lda, form.ldb, form.ldc, form.sa, form.sb, form.sc, alpha,
            beta)
    plan.launch(a_ptr, b_ptr, c_ptr, *args, stream)
    return plan.bind(*args) if bind else None


def matvec(x, y, resolved: Resolved | None = None, out=None, bind=False):
    """``x @ y`` of CuPy (batch, M, K) x (batch, K, N) (or 2-D) arrays on the Dot kernel;
    None when the product has no Dot form or its dtype no Dot kernel (the caller runs a
    GEMM). ``resolved``: the schedule a plan step carries (re-resolved when the operands'
    strides give another form). ``out``: a C-contiguous array of the result's shape and
    dtype to write (else one is allocated). ``bind=True``: returns ``(out, binding)`` as
    :func:`.gemm.gemm` does (``(None, None)`` without a Dot form)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    dtype = x.dtype.name
    none = (None, None) if bind else None
    replayable = out is None  # a replay allocates its output
    if dtype not in DOT_CATALOGUE or y.dtype != x.dtype or x.ndim != y.ndim or \
            x.ndim not in (2, 3):
        return none
    if y.shape[-2] != x.shape[-1]:
        raise ValueError(f"matvec: inner dimensions differ: x is {x.shape}, y is {y.shape}")
    found = form_of(x, y)
    if found is None:
        return none
    form, shape = found
    if out is not None and (out.shape != shape or out.dtype != x.dtype or
                            not out.flags.c_contiguous):
        raise ValueError(f"matvec: out must be a C-contiguous {x.dtype} array of shape "
                         f"{shape}, got {out.dtype} {out.shape}")
    dev = cupy.cuda.runtime.getDevice()
    if x.device.id != dev or y.device.id != dev or (out is not None and out.device.id != dev):
        raise ValueError(f"matvec: operands on devices {x.device.id}, {y.device.id}; the "
                         f"current device is {dev} (use cupy.cuda.Device)")
    if out is None:
        out = cupy.empty(shape, dtype=x.dtype)
    a, b = (y, x) if form.swap else (x, y)
    bound = _launch(form, dtype, x.itemsize, a.data.ptr, b.data.ptr, out.data.ptr, resolved,
                    dev, cupy.cuda.get_current_stream(), 1.0, 0.0, bind and replayable)
    if not bind:
        return out
    return out, (None if bound is None else Binding(bound, form.swap, shape, x.dtype,
                                                    cupy.empty))


def product(form: DotForm, dtype: str, item: int, x_ptr: int, y_ptr: int, c_ptr: int, dev: int,
            stream, alpha, beta, bind: bool = False, reduction: str = DEFAULT_REDUCTION):
    """``c = alpha * x @ y + beta * c`` for raw operands (device addresses of x, y and the
    output, whose strides ``form`` holds: :func:`.forms.dot_form`), the way
    :func:`.gemm.gemm` runs its matrix-vector products, split tiles merged by ``reduction``;
    the BoundLaunch that repeats it when ``bind`` (None otherwise)."""
    a_ptr, b_ptr = (y_ptr, x_ptr) if form.swap else (x_ptr, y_ptr)
    return _launch(form, dtype, item, a_ptr, b_ptr, c_ptr, None, dev, stream, alpha, beta,
                   bind, reduction)


def clear_plans() -> None:
    """Forget the launches made so far (this module's and the bound ones it shares)."""
    _PLANS.clear()
    bound.clear_plans()
