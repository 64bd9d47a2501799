"""Plan steps planned again for the operands a call brings.

A compiled GPU plan launches each GEMM-class step on the launch its plan step carries
(:class:`~skcontract.kernels.step_launch.StepLaunch`), planned for the views the backend makes
of contiguous operands. A call whose operands are not those (another dtype, strides no
reshape follows, operands off 16 bytes: :class:`~skcontract.kernels.bound.OperandMismatch`),
or whose kernel this device does not build as its entry declares, gets the step planned again
here, at the plan layer, for its own operands: :class:`Replans` resolves it
(:func:`~skcontract.kernels.resolve.resolve_step`) once for each such product, keeps the
launch for later calls like it, and records what ran and why. A contract expression's repr
shows the record (:meth:`Replans.lines`), so what is shown is what ran.
"""
from __future__ import annotations

from typing import NamedTuple

from .kernels.operands import Product
from .kernels.resolve import device_info, resolve_step
from .kernels.step_launch import StepLaunch
from .schedule import DeviceInfo

CUPY_RUNS = "no kernel takes it: CuPy runs it"
"""What a re-planned step that no kernel takes shows (the backend's documented fallback)."""


class Replanned(NamedTuple):
    """One step planned again: its number in the plan (from 1), the operands the call
    brought, why, and the launch that ran (None: :data:`CUPY_RUNS`)."""

    step: int
    product: Product
    why: str
    launch: StepLaunch | None

    def line(self) -> str:
        ran = CUPY_RUNS if self.launch is None else self.launch.summary()
        return f"step {self.step} planned again for {self.product.describe()} ({self.why}): {ran}"


class Replans:
    """The re-planning hook a GPU backend's compiled plan calls
    (``replan(step, product, exclude, why)``, :func:`skcontract.backends.cupy_backend.compile`):
    the launch of ``step`` for a call's ``product`` on ``device`` (None: the current GPU),
    without the entries in ``exclude``, planned with the plan's ``options`` (mode,
    reduction, ...) once and remembered; the re-plans made so far in :attr:`ran`."""

    def __init__(self, plan, options: dict | None = None, device: DeviceInfo | None = None):
        self._numbers = {id(s): i + 1 for i, s in enumerate(plan.steps)}
        # the steps carry their precision (resolve_step reads it); the rest are the plan's
        self._options = {x: v for x, v in (options or {}).items() if x != "precision"}
        self._device = device
        self._launches: dict = {}
        self.ran: list[Replanned] = []

    def __call__(self, step, product: Product, exclude: frozenset = frozenset(),
                 why: str = "") -> StepLaunch | None:
        key = (id(step), product, exclude)
        if key in self._launches:
            return self._launches[key]
        launch = resolve_step(step, self._device or _current_device(), product,
                              exclude=exclude, **self._options)
        self._launches[key] = launch
        self.ran.append(Replanned(self._numbers.get(id(step), 0), product, why, launch))
        return launch

    def lines(self) -> list[str]:
        """What the re-planned steps ran, a line each."""
        return [r.line() for r in self.ran]


def _current_device() -> DeviceInfo:
    import cupy  # optional dependency: only GPU calls re-plan

    return device_info(cupy.cuda.runtime.getDevice())
