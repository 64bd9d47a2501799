"""Named constants and the cost model behind ``mode="auto"``.

The model is the Stream-K paper's: a work unit's time is

    a + b * [it writes a partial tile] + c * (its k-iterations) + d * (peers - 1 it merges)

evaluated per CTA on the actual split table (so it sees exactly the decomposition the
kernel will run), and the launch's time is ``a`` plus the slowest CTA (or, when the grid
is larger than the resident CTAs, the sum over waves of each wave's slowest CTA).

Constants fitted to a device are stored with it (``DeviceInfo(cost=CostModel(...))``):
:data:`MEASURED_H200_COST` is the H200's (and is used for any device whose name contains
"H200" or "H100" and that carries no cost of its own); :data:`DEFAULT_COST` holds estimates
from the H200's ceilings for devices without fitted constants. Only the ratios of the
constants matter for choosing a mode.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import table as T

MIN_ITERS_PER_SPLIT = 8
"""Fewest k-iterations in a split of a tile that has several splits (CUTLASS uses 8).
Split boundaries closer than this to a tile edge are moved onto the edge."""

MAX_STREAM_K_GROUPS = 8
"""Stream-K groups are at most this many (the groups set which CTA runs which tile:
docs/design/stream_k.md, "Groups and swizzle")."""

MAX_SPLIT_K = 16
"""Largest S auto tries for split_k / aligned."""

# -- cost model constants (microseconds): estimates for devices without fitted constants --
COST_A_US = 4.0
"""a: fixed cost of a launch (launch latency, prologue, first loads)."""
COST_B_US = 0.5
"""b: writing one 128x128 fp32 partial tile to the workspace / atomically into C
(64 KiB at ~130 GB/s of per-SM L2 bandwidth), charged to each non-final split."""
COST_C_US = 0.35
"""c: one 128x128x64 fp16/bf16 k-iteration on one SM (2.1 MFLOP at ~6 TFLOP/s per SM)."""
COST_D_US = 0.5
"""d: reading and adding one peer's partial tile, charged to the final split per peer."""

STREAM_K_MAX_WAVES = 2
"""auto offers pure Stream-K only up to this many waves of tiles (hybrid beyond): a CTA's
Stream-K range is a run of consecutive tiles, so with many waves the resident CTAs work on
tiles spread over the whole output instead of one wave's neighbouring panels, and the L2
stops serving their shared A and B panels. On the Wgmma kernel (H200) pure Stream-K runs
level with hybrid up to about 4 waves, behind it from about 5 and far behind at 15. The
portable families, two to three times slower per tile, lose nothing to it on exact waves,
and the rule is not specific to a family: it applies wherever the mainloop outruns the L2's
reuse (evidence: docs/benchmarks/calibration.md)."""

SHARED_SUM_MIN_PEERS = 8
"""auto weighs the shared sum only for tiles with at least this many splits: with few peers
the deterministic chain is short and overlaps other work, and the shared sum's barrier costs
more than it saves (evidence: docs/benchmarks/calibration.md)."""

SHARED_SUM_PASS_TILES = 1.0
"""Partial tiles each split of a shared-sum tile reads in the shared pass (its 1/PEERS share
of every peer's slot, whose sum it stores as its share of the output), charged at d per
tile; the final split is charged one tile more: the model's constants are fitted with that
charge, and without it auto takes a 128 x 256 shared sum for 128 x 4096 x 11008 (fp16, H200),
which runs slower than the 128 x 64 deterministic Stream-K it picks with it (evidence:
docs/benchmarks/calibration.md)."""

CLUSTER_SUM_TILES = 1.0
"""Partial tiles each split of a ``cluster`` reduction is charged at d: its share of the
peers' partials, read from their shared memory (no workspace write, no chain)."""

REF_TILE = (128, 128, 64)
"""The tile that COST_C_US is quoted for; other tiles scale by volume and efficiency."""

DTYPE_SLOWDOWN = {
    "float16": 1.0, "bfloat16": 1.0, "int8": 0.5, "uint8": 0.5,
    "float32": 15.5,   # exact fp32 (no tf32) peaks near 51 TFLOP/s against bf16's 790
    "float64": 13.4,   # fp64 peaks near 59 TFLOP/s
    "int32": 15.5, "int64": 30.0, "complex64": 62.0, "complex128": 53.6,
}
"""Per-iteration time of a dtype relative to fp16 (from the H200's peak rates)."""

TILE_EFFICIENCY = {(128, 256): 0.92, (256, 128): 0.92, (128, 128): 1.0, (64, 256): 1.1,
                   (128, 64): 1.15, (64, 128): 1.15, (64, 64): 1.45}
"""Time per unit of tile volume relative to 128x128 (bigger tiles reuse operands more).
Shapes not listed use ``SMALL_TILE_EFFICIENCY_SLOPE``; kernels bring their own (their
catalogue entry's ``efficiency``)."""
SMALL_TILE_EFFICIENCY_SLOPE = 0.45
"""Extra relative time per halving of the tile area below 128x128 for unlisted shapes."""

HYTIS_SMALL_TILES = ((2, 2), (2, 1), (1, 2), (4, 2), (2, 4), (4, 4))
"""HyTiS latency tile = (BM / fm, BN / fn) for these (fm, fn); BK unchanged; >= 16."""

HYTIS_MIN_TILE = 16

MODE_PREFERENCE = ("data_parallel", "hybrid", "stream_k", "aligned", "split_k", "hytis")
"""Order auto prefers modes in when the model cannot tell them apart: simpler first, and
hybrid before stream_k because it keeps most tiles in DP raster order (L2 locality)."""
PREFERENCE_MARGIN = 0.01
"""A mode later in MODE_PREFERENCE must be predicted this much faster per step to win."""
KERNEL_HYTIS_PREFERENCE = 1
"""The step of a HyTiS schedule on a kernel's own small tile (priced with that tile's
efficiency: a schedule with ``small_efficiency``): beside hybrid, one step after
data-parallel, as its tiles each have one split. HyTiS on a small tile the scheduler chose
(planning without a kernel) keeps its place last in MODE_PREFERENCE."""


def selection_key(mode: str, time_us: float, kernel_small_tile: bool = False) -> float:
    """What auto minimises: predicted time, nudged by MODE_PREFERENCE
    (:data:`KERNEL_HYTIS_PREFERENCE` for hytis on a kernel's own small tile)."""
    step = KERNEL_HYTIS_PREFERENCE if mode == "hytis" and kernel_small_tile else \
        MODE_PREFERENCE.index(mode)
    return time_us * (1.0 + PREFERENCE_MARGIN * step)


def schedule_key(s) -> float:
    """:func:`selection_key` of a Schedule."""
    return selection_key(s.mode, s.predicted_time_us, s.small_efficiency is not None)


@dataclass(frozen=True)
class CostModel:
    """The constants of the cost model, in microseconds (see the module docstring).

    ``slowdown`` and ``tile_efficiency`` optionally override :data:`DTYPE_SLOWDOWN` and
    :data:`TILE_EFFICIENCY` for this device, as tuples so the model stays hashable:
    ``slowdown = (("float32", 9.1), ...)``, ``tile_efficiency = (("float64", 64, 64, 1.3),
    ...)`` (a dtype of ``None`` applies to every dtype). Entries not given use the guesses.
    """

    a: float = COST_A_US
    b: float = COST_B_US
    c: float = COST_C_US
    d: float = COST_D_US
    slowdown: tuple = ()
    tile_efficiency: tuple = ()

    def dtype_slowdown(self, dtype) -> float:
        name = str(dtype)
        for dt, v in self.slowdown:
            if dt == name:
                return float(v)
        return DTYPE_SLOWDOWN.get(name, 1.0)

    def efficiency(self, bm: int, bn: int, dtype=None) -> float:
        name = None if dtype is None else str(dtype)
        for key in (name, None):
            for dt, m, n, v in self.tile_efficiency:
                if dt == key and (m, n) == (bm, bn):
                    return float(v)
        return tile_efficiency(bm, bn)


DEFAULT_COST = CostModel()
"""The initial guesses: used for devices without fitted constants."""

MEASURED_H200_COST = CostModel(a=19.0355, b=0.0, c=1.39959, d=1.117,
                               slowdown=(("float32", 4.5835), ("float64", 5.0627)))
"""The cost model fitted to the H200 (``python -m tools.calibrate``; the data, the fit and
its error: docs/benchmarks/cost-model-h200.md). Reading: a k-iteration of 128x128x64 fp16
takes ``c`` on one SM, a launch ``a`` of fixed cost, merging a peer's partial ``d``, and
writing a partial overlaps with other work (``b`` = 0). fp32 (FFMA) / fp64 (DMMA)
iterations cost ``slowdown`` times an fp16 one. The kernels' own tile efficiencies live
with their entries in the kernel catalogue."""
MEASURED_COST_DEVICE_NAMES = ("H200", "H100")
"""A device whose name contains one of these (and that carries no ``cost`` of its own) uses
:data:`MEASURED_H200_COST` (H100 and H200 share the SM; H200 only adds HBM bandwidth)."""


def cost_of(device) -> CostModel:
    cost = getattr(device, "cost", None)
    if cost is not None:
        return cost
    name = str(getattr(device, "name", ""))
    if any(tag in name for tag in MEASURED_COST_DEVICE_NAMES):
        return MEASURED_H200_COST
    return DEFAULT_COST


def tile_efficiency(bm: int, bn: int) -> float:
    if (bm, bn) in TILE_EFFICIENCY:
        return TILE_EFFICIENCY[(bm, bn)]
    ratio = (128 * 128) / float(bm * bn)
    if ratio <= 1:
        return 1.0
    return 1.0 + SMALL_TILE_EFFICIENCY_SLOPE * np.log2(ratio)


def iteration_cost(tile, dtype, model: CostModel, efficiency: float | None = None) -> float:
    """Model time (us) of one k-iteration of ``tile`` = (BM, BN, BK) on one SM.
    ``efficiency``: the kernel's own (its catalogue entry's); None: the model's estimate."""
    bm, bn, bk = tile
    vol = bm * bn * bk / float(REF_TILE[0] * REF_TILE[1] * REF_TILE[2])
    eff = model.efficiency(bm, bn, dtype) if efficiency is None else efficiency
    return model.c * vol * eff * model.dtype_slowdown(dtype)


def fixup_costs(tile, accumulator_dtype, model: CostModel,
                fixup_cost: float = 1.0) -> tuple[float, float]:
    """(b, d) scaled from a 128x128 fp32 partial tile to ``tile`` and ``accumulator_dtype``,
    times the kernel's own ``fixup_cost`` (its catalogue entry's; 1: the model's)."""
    bm, bn, _ = tile
    scale = fixup_cost * bm * bn * np.dtype(accumulator_dtype).itemsize / (128 * 128 * 4.0)
    return model.b * scale, model.d * scale


@dataclass(frozen=True)
class Prediction:
    time_us: float
    efficiency: float
    waves: float


@dataclass(frozen=True)
class RowCosts:
    """The cost model's terms for each row of a split table: the one formula that the
    prediction, the timeline pictures and the calibration's features all read.

    A row computes ``iters`` k-iterations at ``c`` us each (a range row: all its tiles'),
    writes a partial tile for ``write`` us (b: a non-final split of a shared tile, and every
    split of a shared sum), and reads ``chain`` peers' partials (the one CTA that finishes a
    tile merges them all) and ``pooled`` partial tiles (its share of a shared sum and of the
    output it stores, :data:`SHARED_SUM_PASS_TILES`), ``d`` us each.
    """

    iters: np.ndarray
    c: np.ndarray
    write: np.ndarray
    chain: np.ndarray
    pooled: np.ndarray
    d: np.ndarray

    @property
    def compute(self) -> np.ndarray:
        return self.c * self.iters

    @property
    def fixup(self) -> np.ndarray:
        return self.write + self.d * (self.chain + self.pooled)


def row_costs(table: np.ndarray, tile, small_tile, dtype, accumulator_dtype,
              model: CostModel, efficiency: float | None = None, share: int = 1,
              fixup_cost: float = 1.0, cluster: bool = False,
              small_efficiency: float | None = None) -> RowCosts:
    """:class:`RowCosts` of ``table`` under ``model``, with ``share`` CTAs on each SM;
    ``efficiency`` / ``small_efficiency``: the kernel's own for the big / small tile;
    ``fixup_cost``: the kernel's own, for both tiles (one kernel runs them); ``cluster``:
    the table runs the ``cluster`` reduction (:data:`CLUSTER_SUM_TILES`)."""
    bk = tile[2]
    flags = table[:, T.FLAGS]
    tiles = np.where(flags & T.FLAG_RANGE, table[:, T.RANGE_COUNT], 1)
    iters = -(-(table[:, T.K1].astype(np.int64) - table[:, T.K0]) // bk) * tiles
    small = (flags & T.FLAG_SMALL) != 0
    c_big = iteration_cost(tile, dtype, model, efficiency) * share
    c_small = (iteration_cost(small_tile, dtype, model, small_efficiency) * share
               if small_tile is not None else c_big)
    b_big, d_big = (share * x
                    for x in fixup_costs(tile, accumulator_dtype, model, fixup_cost))
    b_sm, d_sm = ((share * x
                   for x in fixup_costs(small_tile, accumulator_dtype, model, fixup_cost))
                  if small_tile is not None else (b_big, d_big))
    peers = table[:, T.PEERS].astype(np.int64)
    final = (flags & T.FLAG_FINAL) != 0
    multi = peers > 1
    shared = (flags & T.FLAG_SHARED_SUM) != 0
    if cluster:
        return RowCosts(iters=iters, c=np.where(small, c_small, c_big),
                        write=np.zeros(len(table)), chain=np.zeros(len(table), np.int64),
                        pooled=CLUSTER_SUM_TILES * multi, d=np.where(small, d_sm, d_big))
    return RowCosts(
        iters=iters, c=np.where(small, c_small, c_big),
        write=np.where(small, b_sm, b_big) * (multi & (~final | shared)),
        chain=(peers - 1) * (multi & final & ~shared),
        pooled=(SHARED_SUM_PASS_TILES + final) * shared,
        d=np.where(small, d_sm, d_big))


SOLO_MIN_K_ITERATIONS = 64
"""The k-iterations a tile's loop needs before :func:`partial_wave_scale` prices its partial
wave's faster k-iterations: the 128 x 128 Wgmma tile's partial waves run faster from 64 up
(H200, fp16); at 16 (1024^3) the shorter loop is bound by filling the ring, and the term's
pick, half as many CTAs, runs slower (evidence: docs/benchmarks/calibration.md)."""


SOLO_MIN_WAVE_SHARE = 0.6
"""The share of the SMs a partial wave must run on for :func:`partial_wave_scale` to price
it: the 128 x 128 Wgmma tile's partial waves run faster from 81 CTAs of 132 up (H200,
fp16); a 128 x 128 wave of 56 CTAs runs slower than 128 x 64 tiles on 112 (evidence:
docs/benchmarks/calibration.md)."""


def partial_wave_scale(table: np.ndarray, grid: int, resident: int,
                       solo_fraction: float = 1.0, bk: int = 1) -> float:
    """A k-iteration's time in a table of whole tiles (no split) whose one wave leaves SMs
    idle, relative to its time when every SM runs the kernel: the CTAs share the L2 among
    fewer SMs, so an L2-bound kernel's k-iteration takes ``grid / resident`` of its time,
    down to its ``solo_fraction`` (:attr:`.types.TileOption.solo_fraction`), where the
    wave runs on :data:`SOLO_MIN_WAVE_SHARE` of the SMs or more and the tiles' loops run
    :data:`SOLO_MIN_K_ITERATIONS` of ``bk`` or more; 1 otherwise."""
    if not len(table):
        return 1.0
    return wave_scale(grid, resident, solo_fraction, lambda: int(table[:, T.TILE].max()) >= 0,
                      lambda: int(table[:, T.K1].min() - table[:, T.K0].max()), bk)


def wave_scale(grid: int, resident: int, solo_fraction: float, splits, k_span, bk: int) -> float:
    """:func:`partial_wave_scale` of a table told by what it reads: ``splits()``, whether
    the table splits a tile, and ``k_span()``, the k-elements every row computes (the least
    K1 less the largest K0); both called only where the grid leaves them to decide."""
    if solo_fraction >= 1.0 or grid >= resident or grid < SOLO_MIN_WAVE_SHARE * resident or \
            splits() or k_span() < SOLO_MIN_K_ITERATIONS * bk:
        return 1.0
    return max(solo_fraction, grid / resident)


def predict(table: np.ndarray, cta_offsets: np.ndarray, grid: int, tile, small_tile,
            dtype, accumulator_dtype, device, efficiency: float | None = None,
            fixup_cost: float = 1.0, cluster: bool = False,
            small_efficiency: float | None = None, solo_fraction: float = 1.0) -> Prediction:
    """Evaluate the cost model on a split table (vectorised); ``efficiency`` (and
    ``small_efficiency``, the small tile's) as in :func:`iteration_cost`, ``fixup_cost`` as
    in :func:`fixup_costs` (for the big tile), ``cluster`` as in :func:`row_costs` and
    ``solo_fraction`` as in :func:`partial_wave_scale`."""
    model = cost_of(device)
    resident = device.resident_ctas
    # c is an SM's time per k-iteration (calibrated at one CTA per SM); CTAs sharing an SM
    # share its math units, so each of them takes ctas_per_sm times as long. They share its
    # load / store pipes too: the fixup's partial-tile traffic (b, d) scales the same way.
    share = max(1, int(getattr(device, "ctas_per_sm", 1)))
    rc = row_costs(table, tile, small_tile, dtype, accumulator_dtype, model, efficiency, share,
                   fixup_cost, cluster, small_efficiency)
    cta = np.repeat(np.arange(grid), np.diff(cta_offsets))
    scale = partial_wave_scale(table, grid, resident, solo_fraction, tile[2])
    per_cta_compute = np.bincount(cta, weights=rc.compute * scale, minlength=grid)
    per_cta = per_cta_compute + np.bincount(cta, weights=rc.fixup, minlength=grid)
    if grid > resident:
        # CTAs beyond the resident ones start as earlier ones leave: charge each wave
        # of `resident` CTAs its slowest member.
        pad = (-grid) % resident
        waves = np.concatenate([per_cta, np.zeros(pad)]).reshape(-1, resident)
        makespan = float(waves.max(axis=1).sum())
    else:
        makespan = float(per_cta.max()) if grid else 0.0
    busy = float(per_cta_compute.sum())
    eff = busy / (resident * makespan) if makespan > 0 else 1.0
    # waves: the longest CTA in units of one full big tile's compute
    bk = tile[2]
    p_max = -(-int(table[:, T.K1].max()) // bk) if len(table) else 1
    c_big = iteration_cost(tile, dtype, model, efficiency) * share
    waves = makespan / (c_big * max(p_max, 1))
    return Prediction(model.a + makespan, min(eff, 1.0), waves)


def predict_data_parallel(n_tiles: int, grid: int, k: int, tile, dtype, accumulator_dtype,
                          device, efficiency: float | None = None, fixup_cost: float = 1.0,
                          solo_fraction: float = 1.0) -> Prediction | None:
    """:func:`predict` of the data-parallel table of a uniform space of ``n_tiles`` tiles of
    ``k`` (one range row a CTA, the tiles dealt round-robin to ``grid`` CTAs), worked out from
    the tile counts without the table: the same operations on the same values. None where
    the table is needed: a grid beyond the resident CTAs (priced wave by wave), no tiles,
    or constants that are not positive and finite (whose zero fixup terms could change a
    sum)."""
    model = cost_of(device)
    resident = device.resident_ctas
    share = max(1, int(getattr(device, "ctas_per_sm", 1)))
    c_big = iteration_cost(tile, dtype, model, efficiency) * share
    b, d = fixup_costs(tile, accumulator_dtype, model, fixup_cost)
    rows = min(grid, n_tiles)
    if grid > resident or rows < 1 or not (0.0 < c_big < math.inf) or \
            not (math.isfinite(share * b) and math.isfinite(share * d)):
        return None
    bk = tile[2]
    p = -(-k // bk)
    scale = wave_scale(grid, resident, solo_fraction, lambda: False, lambda: k, bk)
    few, more = divmod(n_tiles, grid) if grid <= n_tiles else (1, 0)
    per_cta = [c_big * float(p * count) * scale for count in (few + 1, few, 0)]
    makespan = per_cta[0] if more else per_cta[1]
    busy = float(np.repeat(per_cta, (more, rows - more, grid - rows)).sum())
    eff = busy / (resident * makespan) if makespan > 0 else 1.0
    return Prediction(model.a + makespan, min(eff, 1.0), makespan / (c_big * max(p, 1)))


def rule_mode(tiles: int, iters_per_tile: int, resident: int) -> str | None:
    """Rules that choose data-parallel outright: returns the reason, or None (use the model).

    Kept from CUTLASS because the H200 agrees (docs/benchmarks/cost-model-h200.md): at most
    MIN_ITERS_PER_SPLIT k-iterations per tile (nothing to split: every mode runs alike), and
    exact waves (stream_k / hybrid are no faster than DP). CUTLASS's third rule, "a tail of
    at least half a wave -> DP", is *not* applied: on the H200 stream_k beats data-parallel
    on the shapes it covers, so the calibrated model judges them instead.
    """
    if iters_per_tile <= MIN_ITERS_PER_SPLIT:
        return f"<= {MIN_ITERS_PER_SPLIT} k-iterations per tile"
    if tiles % resident == 0:
        return f"exact waves ({tiles // resident} x {resident} tiles)"
    return None
