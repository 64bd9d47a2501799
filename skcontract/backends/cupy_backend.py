"""The CuPy backend: a Plan's steps on the GPU.

GEMM-class steps (GEMM, BATCHED_GEMM, GEMV, DOT) whose dtype has a Stream-K kernel
(float16, bfloat16, float32, float64, int8; see :mod:`skcontract.kernels.catalogue`) run on
the launch their plan step carries (:class:`skcontract.kernels.step_launch.StepLaunch`:
the schedule, the kernel, the operand copies; memory-bound steps, batches of dots and
matrix-vector products, on the Dot family): the plan is resolved for the device once
(:func:`skcontract.kernels.resolve.schedule_plan`), the backend binds pointers to its
launches (:mod:`skcontract.kernels.bound`), so what the plan shows is what launches.
Operands a launch was not planned for (another dtype, strides or alignment than the views
of contiguous operands the plan assumes), and a kernel this device does not build as its entry
declares, get the step planned again at the plan layer through the ``replan`` hook the plan
was compiled with (:class:`skcontract.replan.Replans`, which records what ran: a contract
expression's repr shows it). float32 runs at float32 accuracy: on the 3xTF32
tensor cores where a step's schedule says so (the default's choice, or
``einsum(..., precision="3xtf32")``), else exactly (``precision="exact"``: always). int8 steps accumulate in int32 on
tensor cores and are cast back to int8, which wraps exactly as numpy's int8 einsum does (sums
are taken modulo 2^8 either way). Documented fallback: other dtypes (other integers, bool,
complex), steps with a dimension or a tile walk beyond the kernels' 32-bit index, and the
other step kinds use CuPy's own operations (``cupy.matmul``, broadcast multiply, ``sum``),
but for OUTER steps whose plan carries a launch (:mod:`skcontract.kernels.outer`: float16,
float32, float64 rows of at least 64 elements), which run on the outer-product kernel.

float16 stays float16 on the GPU (the kernels accumulate in float32), unlike the NumPy
backend which computes it in float32.
"""
from __future__ import annotations

from functools import lru_cache

import cupy

from ..kernels import catalogue
from ..kernels.bound import OperandMismatch, checked_operands, run_step
from ..kernels.operands import contiguous, describe, product_of
from ..kernels.jit import RegisterCountError
from ..kernels.launch import CoResidencyError
from ..kernels.outer import run_outer
from ..kernels.small_batched import SmallLaunch, bind_small, run_small
from ..plan.classify import compute_dtype as _cpu_compute_dtype
from .steps import ArrayOps, compile_plan, conjugate, lined_copy

NAME = "cupy"
xp = cupy

__all__ = ["NAME", "xp", "is_array", "asarray", "compile", "compute_dtype"]


def is_array(x) -> bool:
    return isinstance(x, cupy.ndarray)


def asarray(x):
    return x if type(x) is cupy.ndarray else cupy.asarray(x)


@lru_cache(maxsize=None)
def compute_dtype(dtype):
    """float16 runs as float16 on the GPU (float32 accumulation inside the kernels); int8
    stays int8 (int32 accumulation inside the kernel)."""
    dt = cupy.dtype(dtype)
    return dt if dt.name in catalogue.INPUT_DTYPES else _cpu_compute_dtype(dt)


def _launch_step(step, x, y, replan):
    """``x @ y`` for ``step``: on its launch (:func:`~skcontract.kernels.bound.run_step`)
    where the operands are the ones it was planned for; else on the launch ``replan`` (the
    plan layer's hook, :class:`skcontract.replan.Replans`) plans for them, or for this
    device where it does not build the launch's kernel as declared; CuPy's matmul where no
    kernel takes the step. Returns ``(result, binding)``: the binding repeats the launch for
    operands like these (:class:`~skcontract.kernels.launch.Binding`), None when there is
    none to repeat: where the operands were copied (strides no kernel reads), the launch
    ran on the copies, and a replay on the operands' addresses would read them as if they
    were the copies. Operands the step reads conjugated (``step.conj``) are read so by a
    launch that reads them so itself (``StepLaunch.reads_conjugated``: a complex product's
    embedding), else conjugated into copies first."""
    launch = step.launch
    conj = (False, False) if not step.conj else \
        tuple([c and v.dtype.kind == "c" for c, v in zip(step.conj, (x, y))])
    copied = False
    if isinstance(launch, SmallLaunch):
        if any(conj):  # on copies: no binding replays them
            return _small_step(step, launch, *_conjugated(x, y, conj), replan)[0], None
        return _small_step(step, launch, x, y, replan)
    exclude = frozenset()
    while launch is not None and x.size and y.size:
        try:
            if any(conj) and not launch.reads_conjugated:  # it reads them as they lie
                checked_operands(launch, x, y)  # (one planned for other operands is not it)
                x, y, conj = *_conjugated(x, y, conj), (False, False)
                copied = True
            r, binding = run_step(launch, x, y, conj)
            return r, (None if copied else binding)
        except OperandMismatch as e:
            if replan is None:
                raise
            if e.product is None:  # strides no kernel reads: those operands contiguous
                x, y = _readable(x, y)
                copied = True
                continue
            launch = replan(step, e.product, exclude, "not the operands the plan assumed")
        except (RegisterCountError, CoResidencyError) as e:
            if replan is None:
                raise
            exclude |= {launch.entry}
            launch = replan(step, launch.product, exclude, f"{e}; planned without "
                            f"{launch.entry.name}")
    x, y = _conjugated(x, y, conj)
    return cupy.matmul(_element_aligned(x), _element_aligned(y)), None


def _readable(x, y):
    """``x`` and ``y`` with each one whose strides no kernel reads (no unit stride in its
    last two axes, or a negative one) copied C-contiguous; both where neither is such (an
    operand padded onto 16-byte lines keeps its lines where only the other is)."""
    def unreadable(a):
        unit = a.strides[-1:] + a.strides[-2:-1]
        return min(a.strides, default=0) < 0 or a.itemsize not in unit
    bad = [unreadable(x), unreadable(y)]
    if not any(bad):
        return contiguous(x), contiguous(y)
    return tuple(contiguous(a) if b else a for a, b in zip((x, y), bad))


def _conjugated(x, y, conj):
    """``x`` and ``y``, each complex one that ``conj`` marks conjugated into a copy (of a
    broadcast view, the copy is of the elements it repeats, broadcast again)."""
    return tuple([conjugate(v, cupy) if c and v.dtype.kind == "c" else v
                  for v, c in zip((x, y), conj)])


def _element_aligned(a):
    """``a``, or a C-contiguous copy of it where its address is not a multiple of its
    element size (a complex128 view of float64 memory 8 bytes off 16, which cuBLAS refuses
    with CUBLAS_STATUS_NOT_SUPPORTED)."""
    return a if a.data.ptr % a.itemsize == 0 else contiguous(a)


def _small_step(step, launch, x, y, replan):
    """``(x @ y, binding)`` on the small-batched kernel's ``launch``, the binding repeating
    it for operands laid out alike (:func:`~skcontract.kernels.small_batched.bind_small`);
    where the operands are not the launch's (another dtype), on the launch ``replan`` plans
    for them (recorded, as for the other launches), or CuPy's matmul where none takes
    them, with no binding."""
    binding = bind_small(launch, x, y)
    if binding is not None:
        return binding(x, y, cupy.cuda.get_current_stream()), binding
    product = product_of(describe(x), describe(y))
    if replan is None or product is None:
        return cupy.matmul(x, y), None
    other = replan(step, product, frozenset(), "not the operands the plan assumed")
    r = None
    if isinstance(other, SmallLaunch):
        r = run_small(other, x, y)
    elif other is not None:
        try:
            r, _ = run_step(other, x, y)
        except (OperandMismatch, RegisterCountError, CoResidencyError):
            r = None
    return (cupy.matmul(x, y) if r is None else r), None


MAX_BINDINGS = 8
"""Operand layouts (shapes, strides, alignment) a step remembers a launch for; a step whose
operands keep changing layout takes the full path for the others."""


def _operands_key(x, y, current_device):
    """What a launch depends on of its operands, besides their addresses: shapes, strides,
    dtypes, 16-byte alignment, their devices and the current one."""
    xd, yd = x.data, y.data
    return (x.shape, x.strides, y.shape, y.strides, x.dtype, y.dtype, xd.ptr & 15,
            yd.ptr & 15, xd.device_id, yd.device_id, current_device())


def matmul_for(step, views, replan=None):
    """The batched matrix product that runs ``step`` on its operands through ``views``
    (:class:`~skcontract.backends.steps.StepViews`), on the launch the step carries. A call
    with operands laid out as an earlier call's (:func:`_operands_key`) replays that call's
    launch: one dict lookup, one allocation, one launch. Where the first call's views were
    views, the replay launches on the operands themselves and allocates the output in the
    step's shape (no view is made); where a view is a copy (strides no reshape follows),
    every call makes the copies and the replay is keyed by their layout."""
    direct: dict = {}  # operands' layout -> binding on the operands (views were views)
    copied: dict = {}  # copies' layout -> binding on the copies
    current_stream = cupy.cuda.get_current_stream
    current_device = cupy.cuda.runtime.getDevice
    fa, fb, out_shape = views

    def product(xv, yv, into: dict, key, replay_shape):
        """The product of the views, its binding kept in ``into`` under ``key``,
        allocating ``replay_shape`` (None: the product's own) on a replay."""
        r, binding = _launch_step(step, xv, yv, replan)
        if binding is not None and len(into) < MAX_BINDINGS:
            into[key] = binding if replay_shape is None else \
                binding._replace(out_shape=replay_shape)
        return r

    def matmul(x, y):
        key = _operands_key(x, y, current_device)
        hit = direct.get(key)
        if hit is not None:
            return hit(x, y, current_stream())
        xv = x if fa is None else fa(x)
        yv = y if fb is None else fb(y)
        if xv.data.ptr == x.data.ptr and yv.data.ptr == y.data.ptr:  # views start where
            r = product(xv, yv, direct, key, out_shape)               # their operand does
        else:
            vkey = _operands_key(xv, yv, current_device)
            hit = copied.get(vkey)
            r = hit(xv, yv, current_stream()) if hit is not None else \
                product(xv, yv, copied, vkey, None)
        return r if out_shape is None else r.reshape(out_shape)
    return matmul


def _sum(x, axis):
    """Sums in the operand's dtype, as numpy.einsum's are (integers wrap in their own
    width, where ``cupy.sum`` widens int8 to int64, as ``numpy.sum`` does, and would hand
    the next step operands of two dtypes), with float16 accumulated in float32 (5000
    float16 ones sum to 5000)."""
    if x.dtype == cupy.float16:
        return cupy.sum(x, axis=axis, dtype=cupy.float32).astype(cupy.float16)
    if x.dtype.kind in "iu":
        return cupy.sum(x, axis=axis, dtype=x.dtype)
    return cupy.sum(x, axis=axis)


def sum_for(step):
    """``run(a)``: the M sums of the (M x K) CuPy matrix ``a`` on the UNARY step's launch (a
    matrix-vector product with a vector of ones, on the Dot kernel), or None where the
    launch does not take ``a`` (another dtype, layout or alignment: the step then sums with
    CuPy, :func:`~skcontract.backends.steps._unary`)."""
    launch = step.launch
    ones: dict = {}  # (device, dtype, K) -> the vector of ones

    def run(a):
        key = (cupy.cuda.runtime.getDevice(), a.dtype, a.shape[1])
        y = ones.get(key)
        if y is None:
            y = ones[key] = cupy.ones((a.shape[1], 1), a.dtype)
        try:
            r, _ = run_step(launch, a, y)
        except (OperandMismatch, RegisterCountError, CoResidencyError):
            return None
        return r[:, 0]
    return run


def outer_for(step):
    """``run(x, y)``: the OUTER step's (batch, M, N) products of the CuPy (batch, M) and
    (batch, N) arrays on its launch (:func:`~skcontract.kernels.outer.run_outer`), or None
    where the launch does not take them (the step then multiplies them with CuPy)."""
    launch = step.launch
    return lambda x, y: run_outer(launch, x, y)


OPS = ArrayOps(cupy, matmul_for, _sum, cupy.any, sum_for, outer_for,
               folds_conj=lambda step: step.is_gemm_class, copy_into=lined_copy(cupy))
"""(A GEMM-class step's conjugated inputs are :func:`_launch_step`'s to read.)"""


def compile(plan, replan=None):
    """Prepare ``plan`` once; ``run(arrays)`` executes it (see :mod:`skcontract.backends`).
    ``replan``: the plan layer's hook for steps whose operands are not those their launch
    was planned for (:func:`_launch_step`; None: such a call raises
    :class:`~skcontract.kernels.bound.OperandMismatch`)."""
    if replan is None:
        return compile_plan(plan, OPS)
    return compile_plan(plan, OPS._replace(
        matmul_for=lambda step, views: matmul_for(step, views, replan)))
