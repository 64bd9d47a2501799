"""`skcontract.explain`: a contraction's plan as text, and its schedules as a picture;
`skcontract.explain_conv2d`: a convolution's GPU plan as text."""
from __future__ import annotations

import os

import numpy as np

from .contract import contract_path
from .kernels.resolve import DEFAULT_REDUCTION
from .ops.conv2d import GPU_DTYPES, check_schedule_options, conv_geometry
from .ops.conv_cpu_plan import CpuConvPlan, plan_conv2d_cpu
from .ops.conv_plan import ConvOperands, ConvPlan, plan_conv2d
from .schedule.device import DeviceInfo
from .schedule.draw import draw_schedule


def explain(subscripts, *operands_or_shapes, shapes=False, draw=None, device=None,
            optimize="adaptive", dtype=None, mode="auto", reduction=DEFAULT_REDUCTION,
            precision=None):
    """Return the plan of a contraction; with ``draw=path``, also draw its schedules.

    The schedules are the ones our GPU kernels run on ``device`` (default: the GPU holding
    CuPy operands; without one, none is priced, as :func:`skcontract.contract_path` says,
    and there is nothing to draw); ``mode`` / ``reduction`` force the scheduler's
    choices and ``precision`` sets float32's as :func:`skcontract.contract_path` does.

    The picture has one panel per GEMM-class step: one row per CTA, k-iterations on the x
    axis, splits coloured by tile, waits for a fixup marked (see docs/schedules.md).
    Drawing needs matplotlib (``pip install 'skcontract[plot]'``).

    >>> plan = explain("ij,jk->ik", (256, 32768), (32768, 256), shapes=True, device="h200")
    >>> plan.steps[0].kind.name, plan.steps[0].schedule.mode   # 4 tiles, long K
    ('GEMM', 'stream_k')
    """
    _, plan = contract_path(subscripts, *operands_or_shapes, shapes=shapes,
                            optimize=optimize, dtype=dtype, device=device, mode=mode,
                            reduction=reduction, precision=precision)
    if draw is not None and not isinstance(draw, (str, os.PathLike)) and \
            not hasattr(draw, "write"):
        raise TypeError(f"draw must be a file path or a writable file, got {draw!r}")
    if isinstance(draw, (str, os.PathLike)) and not os.fspath(draw):
        raise ValueError("draw: the file path is empty")
    if draw is not None:
        scheduled = [s for s in plan.steps if getattr(s, "schedule", None) is not None]
        if not scheduled:
            why = "; ".join(f"step {s.index}: {s.unscheduled}" for s in plan.steps
                            if s.unscheduled)
            raise ValueError(f"{subscripts!r} has no scheduled GEMM-class step to draw"
                             + (f" ({why})" if why else ""))
        _draw_steps(scheduled, draw)
    return plan


def _draw_steps(steps, path) -> None:
    try:
        import matplotlib  # optional dependency (the plot extra)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional dependency (the plot extra)
    except ImportError as exc:  # optional dependency
        raise ImportError("explain(draw=...) needs matplotlib: "
                          "pip install 'skcontract[plot]'") from exc
    fig, axes = plt.subplots(len(steps), 1, figsize=(12, 4.5 * len(steps)), squeeze=False)
    for ax, step in zip(axes[:, 0], steps):
        draw_schedule(step.schedule, ax)
        ax.set_title(f"step {step.subscripts}: {step.schedule.summary()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def explain_conv2d(input_shape, weight_shape, bias=False, stride=1, padding=0, dilation=1,
                   groups=1, dtype="float16", device=None, *, channels_last=False,
                   mode="auto", reduction=DEFAULT_REDUCTION, tile=None,
                   grid=None) -> ConvPlan | CpuConvPlan:
    """The GPU plan of ``conv2d`` on arrays of these shapes: a
    :class:`~skcontract.ops.conv_plan.ConvPlan`, which prints as a table of what runs (the
    copies, the bias, the launch with its schedule and kernel, the result); with
    ``device="cpu"``, the plan ``conv2d`` runs on NumPy arrays of these shapes on this
    machine (:class:`~skcontract.ops.conv_cpu_plan.CpuConvPlan`: the route, the C kernel
    and its threads, or why a NumPy form runs), for any dtype the CPU takes.

    ``input_shape`` is (N, C, H, W) or (C, H, W), ``weight_shape`` (K, C / groups, R, S);
    ``bias``: whether a bias is added; ``stride``, ``padding``, ``dilation`` and ``groups``
    as :func:`skcontract.conv2d` takes them; ``dtype``: one the GPU kernels take (float16,
    bfloat16, float32, float64). The arrays are freshly allocated and dense: NCHW input and
    (K, C / groups, R, S) weight, or both channels-last with ``channels_last=True`` (torch's
    ``memory_format=torch.channels_last``). ``device``: a DeviceInfo, "h200", "h100" or
    "gpu"; None: the current GPU where CuPy has one, else no GPU schedule is priced (as
    :func:`skcontract.contract_path` without a device) and the plan says how to ask for one.
    ``mode``, ``reduction``, ``tile`` and ``grid`` force the schedule as for ``conv2d``. The
    plan is the one ``conv2d`` launches for such arrays on that device.

    Bad arguments raise as ``conv2d`` does: TypeError for types and dtypes, ValueError
    naming the argument or dimension for the rest.

    >>> plan = explain_conv2d((32, 64, 56, 56), (64, 64, 3, 3), padding=1, device="h200")
    >>> plan.route, plan.input_copy, plan.launch.entry.FAMILY
    ('implicit GEMM', 'nhwc', 'Wgmma')
    >>> plan.launch.spec.name in str(plan)
    True
    >>> explain_conv2d((8, 512, 7, 7), (512, 512, 3, 3), padding=1, dtype="float32",
    ...                device="cpu").route
    'gathered taps'
    """
    input_shape = _shape_of(input_shape, "input_shape")
    weight_shape = _shape_of(weight_shape, "weight_shape")
    if bias is None:
        bias = False
    if not isinstance(bias, (bool, np.bool_)):
        raise TypeError(f"conv2d: bias must be True or False (whether a bias is added), got "
                        f"{bias!r}")
    cpu = isinstance(device, str) and device == "cpu"
    dtype = _cpu_dtype(dtype) if cpu else _gpu_dtype(dtype)
    if not isinstance(channels_last, (bool, np.bool_)):
        raise TypeError(f"conv2d: channels_last must be True or False, got {channels_last!r}")
    tile = check_schedule_options(mode, reduction, tile, grid)
    g = conv_geometry(input_shape, weight_shape, stride, padding, dilation, groups)
    if cpu:
        return plan_conv2d_cpu(g, dtype, bool(channels_last) and g.c > 1)
    device = _current_gpu() if device is None else DeviceInfo.named(device)
    return plan_conv2d(g, dtype, device, ConvOperands.dense(g, bool(channels_last), bool(bias)),
                       mode=mode, reduction=reduction, tile=tile, grid=grid)


def _shape_of(shape, name: str) -> tuple[int, ...]:
    """A shape argument as a tuple of ints; TypeError for anything else (an array: its
    ``.shape`` is meant), ValueError for a negative size."""
    if hasattr(shape, "shape") and not isinstance(shape, tuple):
        raise TypeError(f"conv2d: {name} must be a shape (a tuple of ints), got "
                        f"{type(shape).__name__} of shape {tuple(shape.shape)}: pass its "
                        ".shape")
    return _ints(shape, name)


def _ints(value, name: str) -> tuple[int, ...]:
    """A sequence of non-negative ints as a tuple."""
    try:
        values = tuple(value)
    except TypeError:
        raise TypeError(f"conv2d: {name} must be a tuple of ints, got "
                        f"{type(value).__name__}") from None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        raise TypeError(f"conv2d: {name} must be a tuple of ints, got {value!r}")
    if any(v < 0 for v in values):
        raise ValueError(f"conv2d: {name} must not be negative, got {value!r}")
    return tuple(int(v) for v in values)


def _gpu_dtype(dtype) -> str:
    """The name of a dtype the GPU kernels convolve (a name, a NumPy dtype or type, a torch
    dtype); TypeError for any other."""
    if isinstance(dtype, str) or type(dtype).__module__ == "torch":
        name = str(dtype).removeprefix("torch.")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"conv2d: dtype must be a dtype or its name, got "
                            f"{dtype!r}") from None
    if name not in GPU_DTYPES:
        raise TypeError(f"conv2d: the GPU kernels take {', '.join(GPU_DTYPES)}, not {name}")
    return name


def _cpu_dtype(dtype) -> str:
    """The name of a dtype conv2d computes in on the CPU (floating or complex); TypeError
    for any other."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"conv2d: dtype must be a dtype or its name, got {dtype!r}") from None
    if np.dtype(name).kind not in "fc":
        raise TypeError(f"conv2d: the CPU convolves floating and complex dtypes, not {name}")
    return name


def _current_gpu() -> DeviceInfo | None:
    """The current CUDA device through CuPy; None without CuPy or a device."""
    try:
        return DeviceInfo.named("gpu")
    except (ImportError, RuntimeError):
        return None
