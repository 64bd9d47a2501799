"""`skcontract.explain`: a contraction's plan as text, and its schedules as a picture."""
from __future__ import annotations

import os

from .contract import contract_path
from .kernels.resolve import DEFAULT_REDUCTION
from .schedule.draw import draw_schedule


def explain(subscripts, *operands_or_shapes, shapes=False, draw=None, device=None,
            optimize="auto", dtype=None, mode="auto", reduction=DEFAULT_REDUCTION,
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
