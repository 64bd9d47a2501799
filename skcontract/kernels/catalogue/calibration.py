"""The cost calibration of the catalogue's entries: data, fitted on the H200.

``efficiency`` is an entry's time per unit of tile volume relative to the cost model's
reference tile (128 x 128 x 64) at the same dtype; the portable 16-bit, tf32 and int8
entries are the reference (1.0). ``FIXUP_COST`` scales the model's partial-tile terms for
a family. ``solo_fraction`` is a k-iteration's time on a data-parallel wave that leaves
SMs idle relative to its time when every SM runs the tile. The values are fitted by
``tools/calibrate.py`` (the model's constants and the tile efficiencies) or read off
timed runs; the runs and the fits behind each table are in
docs/benchmarks/calibration.md, "The kernel catalogue", and docs/benchmarks/cost-model-h200.md.
"""
from __future__ import annotations

from ...schedule.device import DeviceInfo
from ...schedule.heuristics import MEASURED_H200_COST, REF_TILE

WGMMA_EFFICIENCY = {(128, 128, 1): 0.37, (128, 256, 1): 0.345, (64, 256, 1): 0.42,
                    (64, 128, 2): 0.42, (128, 64, 1): 0.5, (128, 64, 2): 0.43,
                    (64, 64, 1): 0.6}
"""Wgmma entries' efficiency by (BM, BN, CTAs an SM): their data-parallel time against the
Mma16 entry's (1.0) on the same shapes. The 128 x 128 tile reads more L2 bytes per flop
than 128 x 256, and the L2 limits it when every SM runs it; the 64-row tiles' 0.42 and the
narrow tiles' 0.5 and 0.6 are estimates (one consumer warpgroup a CTA; more L2 bytes per
flop again: auto takes them only where a shape has few tiles, or, for 64 x 64, by the
memory-bound rule). The paired 128 x 64's is the eight-stage entry's times its rate on
many-tile convolutions."""

WGMMA_PAIR_EFFICIENCY = {(128, 128): 0.16, (128, 256): 0.146,
                         (64, 64): 0.24, (128, 64): 0.24}
"""Efficiency of the cluster pairs' (2 BM x BN) unit tiles by one CTA's (BM, BN). A unit is
two SMs, so a k-iteration of its tile takes what one of its CTAs' BM x BN k-iterations
takes: about half a single CTA's efficiency. The 128 x 128 pair's is its split
k-iterations' rate at full occupancy; the 128 x 256 pair's is fitted so that its
time over predicted time on wave-quantized and exact-wave shapes matches the single-CTA
entries'; the narrow pairs' lie where auto keeps the orders timed against the single
tiles."""

WGMMA_FIXUP_COST = 3.0
"""The Wgmma family's partial-tile cost relative to the model's (fitted on the portable
families, whose mainloop is two to three times slower, so a fixup hides less behind it);
with it auto's picks on the H200's fp16 schedules come closest to the best schedule."""

WGMMA_SOLO_FRACTION = {(128, 128, 1): 0.65}
"""Wgmma: (BM, BN, CTAs an SM) -> a k-iteration's time on a data-parallel wave that leaves
SMs idle, at least, relative to its time when every SM runs the tile
(:func:`skcontract.schedule.heuristics.partial_wave_scale`). The 128 x 128 tile is L2-bound
on every SM, so its partial waves run as fast as Stream-K from about 61% of a wave up. The
other tiles are 1 (at their tensor rate on every SM, or not told apart)."""

WGMMA_TF32_RATE = 0.5
"""tf32 wgmma's rate relative to f16 / bf16 wgmma (the H100 / H200 datasheet's dense peaks:
495 against 990 TFLOP/s)."""
WGMMA_TF32_EFFICIENCY_SCALE = 1.0 / (WGMMA_TF32_RATE
                                     * MEASURED_H200_COST.dtype_slowdown("float32"))
"""A tf32 Wgmma entry's efficiency relative to the 16-bit entry of the same tile and
occupancy: the cost model prices a float32 k-iteration's volume at the FFMA family's
slowdown, where tf32 wgmma runs it at WGMMA_TF32_RATE of the 16-bit rate (so a tf32 k-tile,
half the K of a 16-bit one, takes as long). An estimate from the rates."""
WGMMA_TF32X3_PRODUCTS = 3
"""The wgmmas of a 3xTF32 k step (big x big, big x small, small x big): its efficiency is
this many tf32 k-tiles'."""

FFMA_NARROW_EFFICIENCY = 1.0
"""Time per flop of the fp32 256 x 64 and 64 x 256 entries against the 128 x 128 x 32
entry's (1.0): with it auto takes them on every shape where they run faster and on none
where they run slower."""

FFMA_EFFICIENCY = {
    ("float32", 128, 128, 32): 1.0,
    ("float32", 128, 128, 16): 1.05,
    ("float32", 8, 256, 16): 2.8331,
    ("float32", 256, 64, 32): FFMA_NARROW_EFFICIENCY,
    ("float32", 64, 256, 32): FFMA_NARROW_EFFICIENCY,
    ("float32", 1, 1024, 8): 18.5,
    ("float64", 8, 256, 16): 4.7558,
    ("float64", 1, 512, 8): 36.0,
}
"""Ffma entries' efficiency by (dtype, BM, BN, BK), fitted by ``tools/calibrate.py`` (the
one-row tiles against their memory-bound rate)."""

DMMA_EFFICIENCY = {(128, 64, 32, 1): 0.87, (128, 64, 16, 2): 0.87 * 0.96,
                   (64, 64, 16, 2): 1.0}
"""Dmma entries' efficiency by (BM, BN, BK, CTAs an SM): the two-CTA 128 x 64 tile runs at
0.96 of the one-CTA entry's time per flop."""

COPY_BANDWIDTH_BYTES_PER_S = 4.14e12
"""The H200's device-to-device copy bandwidth (the memory-bound kernels' floor)."""


def memory_bound_efficiency(dtype: str, tile, bytes_per_iteration: int) -> float:
    """The cost-model efficiency of a tile whose k-iteration reads ``bytes_per_iteration``
    at one SM's share of the H200's copy bandwidth: the H200 model prices a k-iteration at
    efficiency x volume x dtype slowdown x its reference tile's time, so the efficiency is
    the ratio of the two times."""
    h200 = DeviceInfo.h200()
    seconds = bytes_per_iteration / (COPY_BANDWIDTH_BYTES_PER_S / h200.sms)
    vol = tile[0] * tile[1] * tile[2] / float(REF_TILE[0] * REF_TILE[1] * REF_TILE[2])
    return seconds * 1e6 / (h200.cost.c * vol * h200.cost.dtype_slowdown(dtype))
