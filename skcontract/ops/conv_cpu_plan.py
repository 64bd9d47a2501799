"""A convolution's CPU plan: which way ``conv2d`` runs on NumPy arrays, as one frozen value
that prints (:class:`CpuConvPlan`), made from the geometry, the dtype it computes in and
whether the input's channels are contiguous by :func:`plan_conv2d_cpu`.
:func:`~.conv2d_cpu.conv2d_cpu` runs the route the plan names, and
``skcontract.explain_conv2d(..., device="cpu")`` prints it.

The routes, first that applies: an empty output; zeros (no input channel); a pointwise
layer as one BLAS product an image; the C kernels (:mod:`skcontract.host`) for depthwise
layers, grouped layers and the one-group layers their rule takes, where the host can build
them (else the plan says why, and a NumPy form runs); tap regions
(:mod:`.conv_regions`) where padding holds a large share of the taps; the NumPy forms of
:mod:`.conv2d_cpu`, gathered taps or shifted planes.

>>> from skcontract.ops.conv2d import conv_geometry
>>> plan = plan_conv2d_cpu(conv_geometry((8, 512, 7, 7), (512, 512, 3, 3), padding=1), "float32")
>>> plan.route
'gathered taps'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..host.call import HostRun
from ..host.depthwise import depthwise_run, is_depthwise
from ..host.grouped import grouped_run, kernel_takes
from ..host.parallel import host_threads
from . import conv2d_cpu as forms, conv_regions
from .conv2d_cpu import DEPTHWISE, DIRECT, EMPTY, GATHERED, PLANES, POINTWISE, REGIONS, ZEROS

__all__ = ["CpuConvPlan", "plan_conv2d_cpu", "EMPTY", "ZEROS", "POINTWISE", "DEPTHWISE",
           "DIRECT", "GATHERED", "PLANES", "REGIONS"]

_WHAT = {
    EMPTY: "nothing to compute: the output has no element",
    ZEROS: "no input channel: zeros (and the bias)",
    POINTWISE: "one BLAS product an image, on the input as it lies",
    DEPTHWISE: "the host's C kernel (c/conv.c), one filter a channel",
    DIRECT: "the host's C kernel (c/conv.c), a block of output channels at once over "
            "a group's padded planes",
    GATHERED: "NumPy: the taps gathered into one operand a chunk, one BLAS product a group",
    PLANES: "NumPy: shifted copies of the padded planes, BLAS products a filter row",
    REGIONS: "NumPy: the output in rectangles of the taps that read the input, each "
             "rectangle's taps gathered, one BLAS product a group (padding's taps skipped)",
}


@dataclass(frozen=True)
class CpuConvPlan:
    """What ``conv2d`` runs on the CPU (see the module). ``dtype``: the dtype it computes
    in (float16 computes in float32); ``channels_last``: the input's channels are
    contiguous; ``route``: one of the module's routes; ``run``: the C kernel's call
    (:class:`~skcontract.host.call.HostRun`) on the kernel routes; ``fallback``: why a
    layer a C kernel's rule takes runs a NumPy form instead."""

    geometry: Any
    dtype: str
    channels_last: bool
    route: str
    run: HostRun | None = None
    fallback: str | None = None

    def lines(self) -> list[str]:
        g = self.geometry
        layout = "channels-last" if self.channels_last else "NCHW"
        lines = [f"conv2d on the CPU: ({g.n}, {g.c}, {g.h}, {g.w}) x "
                 f"({g.k}, {g.c // max(g.groups, 1)}, {g.r}, {g.s}) -> "
                 f"({g.n}, {g.k}, {g.p}, {g.q}), {self.dtype}, {layout}, groups {g.groups}",
                 f"route: {self.route}: {_WHAT[self.route]}"]
        if self.run is not None:
            r = self.run
            lines.append(f"kernel: {r.function}, {r.form}; {r.units:,} units over "
                         f"{r.threads} of {host_threads()} threads; a thread's buffer "
                         f"{r.scratch * np.dtype(self.dtype).itemsize:,} bytes")
        if self.fallback:
            lines.append(f"no C kernel: {self.fallback}")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())


def plan_conv2d_cpu(g, dtype, channels_last: bool = False) -> CpuConvPlan:
    """The CPU plan of the convolution ``g`` (a checked ConvGeometry) on an input of
    ``dtype`` (float16 computes in float32) whose channels are contiguous where
    ``channels_last``."""
    dtype = np.dtype(dtype)
    dtype = np.dtype(np.float32) if dtype == np.float16 else dtype

    def route(name: str, **more) -> CpuConvPlan:
        return CpuConvPlan(g, dtype.name, bool(channels_last), name, **more)

    if min(g.n, g.k, g.p, g.q) == 0:
        return route(EMPTY)
    if g.c == 0:
        return route(ZEROS)
    if forms.is_pointwise(g):
        return route(POINTWISE)
    run = _host_run(g, dtype, channels_last)
    if isinstance(run, HostRun):
        return route(DEPTHWISE if is_depthwise(g) else DIRECT, run=run)
    if conv_regions.takes(g):
        return route(REGIONS, fallback=run)
    return route(GATHERED if forms.gathers(g) else PLANES, fallback=run)


def _host_run(g, dtype, channels_last: bool) -> HostRun | str | None:
    """The C kernel's call where a kernel's rule takes the layer; the reason where it does
    but cannot run here; None where no kernel takes it."""
    if is_depthwise(g):
        return depthwise_run(g, dtype, channels_last)
    if kernel_takes(g):
        return grouped_run(g, dtype, channels_last)
    return None
