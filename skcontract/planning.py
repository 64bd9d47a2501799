"""The plans the front door runs: made for a call's shapes, dtype and device
(:func:`planned`: re-sized from a template where a product's size classes decide it), and
prepared for a backend (:func:`prepare`: scheduled and compiled; cached by
:data:`prepare_cached`)."""
from __future__ import annotations

from functools import lru_cache
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .backends import get_backend, plan_allocates
from .backends.steps import resizable_run
from .kernels.resolve import schedule_plan
from .parse import parse_equation
from .plan import Plan, build_plan
from .plan.plan import conjugated, resizable, resized, size_classes, with_launch_peak
from .replan import Replans
from .schedule.device import DeviceInfo

PLAN_CACHE_SIZE = 512
"""Plans a process keeps prepared (:data:`prepare_cached`) and paths :func:`contract_path`
keeps, each."""


@lru_cache(maxsize=None)
def device_for(backend: str) -> Any:
    """The device a backend's plans are made for: the current GPU (else the H200 preset)
    for CuPy; none for NumPy, whose fractional memory_limit is a share of the host's
    memory."""
    if backend == "cupy":
        try:
            return DeviceInfo.from_cupy()
        except Exception:  # no CuPy device: plan for the preset
            return DeviceInfo.h200()
    return None


def make_plan(subscripts: str, shapes, dtype, optimize, memory_limit, device,
               slicing=True, conj=(), **options) -> Plan:
    """The plan of ``subscripts`` over operands of ``shapes`` (:func:`planned`), for a
    GPU's launches scheduled with ``options``, the operands ``conj`` read conjugated."""
    return planned(subscripts, shapes, dtype, optimize, memory_limit, device, slicing,
                    conj, **options)[0]


def _launches(device, **options):
    """How the executor on ``device`` schedules a plan (:func:`schedule_plan` with the
    call's ``options``), which the slicer counts the steps' copies by; None on the host."""
    if device is None:
        return None
    return lambda plan: schedule_plan(plan, device, **options)


class _Template(NamedTuple):
    """A plan that new sizes of its size classes re-size (:func:`planned`), its step's
    form, and the runs backends compiled for any of its sizes, by backend name."""

    plan: Plan
    form: Any
    runs: dict


def planned(subscripts: str, shapes, dtype, optimize, memory_limit, device,
             slicing=True, conj=(), **options) -> tuple[Plan, _Template | None]:
    """The plan of ``subscripts`` over operands of ``shapes`` and the template it is a
    re-sizing of (None: planned in full), marked for the operands ``conj`` reads
    conjugated (:func:`~skcontract.plan.plan.conjugated`: a memory limit counts their
    copies). A plan of one product whose size classes decide it is re-sized for new sizes
    of the same classes (:func:`~skcontract.plan.plan.resized`) rather than planned again.
    ``options``: those a GPU's launches are scheduled with (:func:`_launches`)."""
    key = None
    if memory_limit is None and slicing is True and len(shapes) == 2 and \
            _plain_optimize(optimize) and \
            all([type(d) is int for s in shapes for d in s]):  # (else the parse says why)
        key = (subscripts, getattr(subscripts, "legend", ()), size_classes(shapes), dtype,
               optimize, device)
        template = RESIZABLE.get(key, _UNSEEN)
        if type(template) is _Template:
            plan = resized(template.plan, template.form, shapes)
            if plan is not None:
                return conjugated(plan, conj), template
    eq = parse_equation(subscripts, shapes)
    plan = build_plan(eq, dtype, optimize=optimize, memory_limit=memory_limit, device=device,
                      slicing=_slicing_arg(slicing), schedule=_launches(device, **options),
                      conj=conj)
    if key is not None and template is not False and type(template) is not _Template:
        # a structure's first plan is only noted (most are planned at one size); its
        # second, at new sizes, becomes the template (False: not re-sizable)
        if len(RESIZABLE) >= _RESIZABLE_KEPT:
            RESIZABLE.clear()
        if template is _UNSEEN:
            RESIZABLE[key] = None
        else:
            form = resizable(plan)
            RESIZABLE[key] = False if form is None else _Template(plan, form, {})
    return conjugated(plan, conj), None


RESIZABLE: dict = {}
"""Plans of two operands that new sizes of the same size classes re-size, by subscripts,
the operands' size classes (0, 1, more), dtype, ``optimize`` and device (:func:`planned`):
a :class:`_Template`, None (planned once) or False (not re-sizable)."""


_UNSEEN = object()
"""What :data:`RESIZABLE` holds for a structure not planned before."""


_RESIZABLE_KEPT = 1024
"""Entries :data:`RESIZABLE` keeps before it starts again."""


def _plain_optimize(optimize) -> bool:
    """Whether plans re-sized from one another may share ``optimize``: a name, a bool, or
    an explicit path of exact ints (as a tuple; an optimiser object may keep state between
    calls, and a path of other values is checked, and refused, by every call's plan)."""
    if type(optimize) in (str, bool):
        return True
    return type(optimize) is tuple and all(
        type(s) is str or (type(s) is tuple and all(type(i) is int for i in s))
        for s in optimize)


def slicing_key(slicing, subscripts):
    """``slicing`` in a hashable form with the interleaved form's labels as their symbols:
    True / False, or ``((symbol, chunk), ...)`` (a label given alone: chunks of one).
    TypeError for anything else."""
    if isinstance(slicing, bool):
        return slicing
    if isinstance(slicing, str) or not hasattr(slicing, "__iter__"):
        raise TypeError(f"slicing must be True, False, a sequence of labels or a "
                        f"{{label: chunk}} dict, got {type(slicing).__name__} {slicing!r}")
    symbols = {label: sym for sym, label in getattr(subscripts, "legend", ())}
    pairs = slicing.items() if isinstance(slicing, Mapping) else ((x, 1) for x in slicing)
    try:
        return tuple((symbols.get(x, x), c) for x, c in pairs)
    except TypeError:
        raise TypeError(f"slicing: labels must be hashable, got {slicing!r}") from None


def _slicing_arg(key):
    """What :func:`~skcontract.plan.build_plan` takes for a :func:`slicing_key`."""
    return key if isinstance(key, bool) else dict(key)


def prepare(subscripts, shapes, dtype, optimize, memory_limit, backend, precision,
             slicing=True, conj=()):
    device = device_for(backend)
    plan, template = planned(subscripts, shapes, dtype, optimize, memory_limit, device,
                              slicing, conj, precision=precision)
    bk = get_backend(backend)
    if backend == "numpy":  # (NumPy launches nothing: no schedules, nothing to re-plan)
        if template is None or not resizable_run(plan):
            return plan, bk.compile(plan), plan_allocates(plan)
        run = template.runs.get(backend)  # (one run for every size of the template's)
        if run is None:
            run = bk.compile(template.plan, resizable=True)
            run.resizable = True  # (a warm call swaps it for the plan's own: WarmCall)
            template.runs[backend] = run
        return plan, run, plan_allocates(plan)
    plan = scheduled(plan, device, precision=precision)
    return plan, bk.compile(plan, replan=Replans(plan)), plan_allocates(plan)


def scheduled(plan: Plan, device, **options) -> Plan:
    """``plan`` scheduled for ``device`` (:func:`~.kernels.resolve.schedule_plan`), a sliced
    one's predicted peak from the launches it now holds (:func:`~.plan.plan.with_launch_peak`)."""
    return with_launch_peak(schedule_plan(plan, device, **options))


# typed: a memory_limit of 1.0 (refused) is not the cached plan of 1
prepare_cached = lru_cache(maxsize=PLAN_CACHE_SIZE, typed=True)(prepare)


def optimize_key(optimize: Any):
    """A hashable form of ``optimize`` (explicit paths as tuples), or None: not cacheable."""
    if isinstance(optimize, (bool, str)) or optimize is None:
        return optimize
    if isinstance(optimize, (list, tuple)):
        try:
            key = tuple(s if isinstance(s, str) else tuple(s) for s in optimize)
        except TypeError:
            return None
        # a path of other than ints (0.0 == 0) is checked, and refused, every call
        if all(isinstance(s, str) or all(isinstance(x, (int, np.integer)) for x in s)
               for s in key):
            return key
    return None  # optimiser objects may be stateful or random
