"""schedule_gemm / schedule_problem: choose a decomposition on the tile options given and
build it.

The scheduler plans on the tiles its caller names and on no menu of its own: the schedule
the GPU runs for a product is the one planned on its kernels' entries
(:func:`skcontract.kernels.resolve.resolve_gemm`, and ``resolve_step`` for a plan step).

``mode="auto"`` evaluates, per tile candidate, the modes the rules allow (DP always; the
K-splitting modes when :func:`can_apply_stream_k` says so; HyTiS as the fallback), prices
each one's real split under the cost model (:mod:`.heuristics`: on the table's rows the
model reads, :func:`.decompose.cost_rows`, or a data-parallel table's tile counts) and
builds the table of the cheapest. Every candidate considered is kept on
``Schedule.candidates``.
A forced mode, tile, grid, S (``splits``), group count or swizzle is always honoured unless
it is impossible, in which case the fallback and its reason are recorded on ``s.reason``.
"""
from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import decompose as D
from ..kinds import kind_of
from .applicability import can_apply_stream_k
from .device import DeviceInfo
from . import table as T
from .heuristics import (MAX_SPLIT_K, MIN_ITERS_PER_SPLIT, SHARED_SUM_MIN_PEERS,
                         STREAM_K_MAX_WAVES, Prediction, cost_of, fixup_costs,
                         iteration_cost, predict, predict_data_parallel, rule_mode,
                         schedule_key)
from .types import (ALIGNED, ARRIVAL, ATOMIC, AUTO, CLUSTER, CLUSTER_SPLITS, DATA_PARALLEL,
                    DETERMINISTIC,
                    HYBRID, HYTIS, K_SPLITTING_MODES, SPLIT_K, STREAM_K, Candidate,
                    GemmProblem, Mode, Schedule,
                    TileOption, as_mode, as_reduction)


NO_SECOND_TILE = "these kernels run one tile shape per launch"
"""Why HyTiS is not offered for tile options that name no small tiles (the GPU entries but
those of :data:`skcontract.kernels.catalogue.wgmma.WGMMA_HYTIS_TILES`)."""


SPLITS_ONLY = "data-parallel not offered: the entry is planned on split tiles only"
"""Why auto's candidate list shows a ``splits_only`` option's data-parallel table unchosen."""


NO_TILES = ("the scheduler plans on the tiles it is given: pass tile=(BM, BN, BK) or "
            "tiles=[...] (the GPU's are its kernels' entries: "
            "skcontract.kernels.resolve.resolve_gemm plans on them)")
"""Why a schedule asked for without tile options is refused."""


def _options(tiles, tile, device) -> list[TileOption]:
    """The tile options to plan with: ``tiles`` (TileOptions or (BM, BN, BK) tuples, these at
    the device's occupancy), narrowed to ``tile`` when it is given (a (BM, BN) or
    (BM, BN, BK) prefix); without ``tiles``, the one (BM, BN, BK) ``tile``."""
    if tiles is None:
        if tile is None or len(tuple(tile)) != 3:
            raise ValueError(NO_TILES if tile is None else
                             f"tile must be (BM, BN, BK) of positive ints, got {tile!r}")
        tiles = [tile]
    opts = [t if isinstance(t, TileOption) else TileOption(t, device.ctas_per_sm)
            for t in tiles]
    if tile is not None:
        want = tuple(int(x) for x in tile)
        if len(want) not in (2, 3) or min(want) < 1:
            raise ValueError(f"tile must be (BM, BN, BK) of positive ints, got {tile!r}")
        match = [o for o in opts if o.tile[:len(want)] == want]
        if not match:
            raise ValueError(f"no tile {want} among the candidates "
                             f"{[o.tile for o in opts]}")
        opts = match
    if not opts:
        raise ValueError("no tile to plan with")
    return opts


def _sk_grid_options(n_tiles: int, per_tile: int, resident: int) -> list[int]:
    """Grids auto tries for stream-k: all resident CTAs, or for few tiles a spread of
    smaller grids (fixup cost grows with peers, so fewer units can win)."""
    return list(_grid_options(n_tiles, resident))


@lru_cache(maxsize=4096)
def _grid_options(n_tiles: int, resident: int) -> tuple[int, ...]:
    """:func:`_sk_grid_options` (which does not depend on ``per_tile``), worked out once for
    each count of tiles and of resident CTAs."""
    if n_tiles >= resident:
        return (resident,)
    opts = set(np.unique(np.geomspace(1, resident, 24).round().astype(int)).tolist())
    opts |= {n_tiles * s for s in range(1, resident // n_tiles + 1)}
    opts.add(resident)
    return tuple(sorted(o for o in opts if 1 <= o <= resident))


def _distinct_units(grids: list[int], ts, bk: int) -> list[int]:
    """Of ascending Stream-K ``grids``, those that decompose the space differently: a grid
    above the units that keep MIN_ITERS_PER_SPLIT iterations each
    (:func:`.decompose.stream_k_units`) runs as that many units, the same table as the
    smallest such grid, which the cheapest-first choice keeps of equals; only it is built.
    Units never fall as the grid grows, and once a grid runs as fewer units than its CTAs
    every larger one runs as those units too: the walk stops there."""
    p = ts.uniform_iters(bk)
    used, out = set(), []
    for g in grids:
        u = D.stream_k_units(ts.n * p, p, g)
        if u not in used:
            used.add(u)
            out.append(g)
        if u < g:
            break
    return out


def _join(*reasons) -> str:
    """The non-empty reasons, '; '-separated."""
    return "; ".join(r for r in reasons if r)


def _cheapest(schedules) -> _Priced:
    """The schedule with the lowest predicted time (the first of equals)."""
    return min(schedules, key=lambda s: s.predicted_time_us)


BOUND_SLACK = 1e-9
"""Relative slack under which :func:`_cheapest_bounded` still builds a candidate whose
bound exceeds the best time found (the bound and the prediction round differently)."""


def _cheapest_bounded(items, bound, build, closer=None) -> _Priced:
    """:func:`_cheapest` of ``build(item)`` over ``items`` (the first of equals in the items'
    order), without building those that cannot win: ``bound(item)`` is a time no schedule
    built from the item can beat, ``closer(item)`` a closer one, dearer to work out. The
    item of the lowest bound is taken first: its closer bound worked out, or, once it has
    one, built; the search stops when the lowest bound left exceeds the best time found."""
    heap = [(bound(x), i, closer is None) for i, x in enumerate(items)]
    heapq.heapify(heap)
    best = best_i = None
    while heap:
        low, i, closest = heapq.heappop(heap)
        if best is not None and low > best.predicted_time_us * (1 + BOUND_SLACK):
            break
        if not closest:
            heapq.heappush(heap, (max(low, closer(items[i])), i, True))
            continue
        s = build(items[i])
        if best is None or (s.predicted_time_us, i) < (best.predicted_time_us, best_i):
            best, best_i = s, i
    return best


def _planned_device(device: DeviceInfo, ctas_per_sm: int, cluster: int) -> DeviceInfo:
    """``device`` at an option's occupancy, as units of its cluster's CTAs (made once for
    each: a DeviceInfo is an immutable value; one with an unhashable field each time)."""
    try:
        return _planned_device_of(device, ctas_per_sm, cluster)
    except TypeError:
        return device.with_occupancy(ctas_per_sm).with_clusters(cluster)


@lru_cache(maxsize=256)
def _planned_device_of(device: DeviceInfo, ctas_per_sm: int, cluster: int) -> DeviceInfo:
    return device.with_occupancy(ctas_per_sm).with_clusters(cluster)


class _Builder:
    """Builds schedules of one problem for one tile option, at that option's occupancy."""

    def __init__(self, problem: GemmProblem, device: DeviceInfo, option: TileOption,
                 reduction, groups, swizzle, raster, small_tile):
        self.problem, self.reduction, self.option = problem, reduction, option
        self.device = _planned_device(device, option.ctas_per_sm, option.cluster)
        self.groups, self.swizzle, self.raster, self.small_tile = groups, swizzle, raster, small_tile
        self._ts = {}
        self._sk = {}  # (tile, grid) -> Stream-K's RawSplits, whatever the reduction
        self._work = {}  # tile -> what floor() reads (_floor_work)

    def tiles(self, tile):
        key = tile[:2]
        if key not in self._ts:
            self._ts[key] = D.tile_space(self.problem, tile[0], tile[1], self.swizzle, self.raster)
        return self._ts[key]

    def finish(self, mode, tile, raw: D.RawSplits, reduction, reason, small=None) -> "_Priced":
        """``raw`` priced as a schedule of ``mode`` (its table built where its values may
        reach beyond the kernels' index, so that TableOverflow is raised as building it
        raises it)."""
        # arrival tables whose CTAs are all resident let the peers share the final sum
        shared = self.option.shared_sum and reduction == ARRIVAL and \
            raw.grid <= self.device.resident_ctas
        if D.within_index(raw):
            rows, offsets = D.cost_rows(raw, tile[2], reduction, shared_sum=shared)

            def splits():
                return (raw, *D.build_table(raw, tile[2], reduction, shared_sum=shared))
        else:
            rows, offsets = D.build_table(raw, tile[2], reduction, shared_sum=shared)

            def splits():
                return raw, rows, offsets
        small_eff = self.option.small_efficiency if small is not None else None
        pred = predict(rows, offsets, raw.grid, tile, small, self.problem.dtype,
                       self.problem.accumulator_dtype, self.device, self.option.efficiency,
                       self.option.fixup_cost, cluster=reduction == CLUSTER,
                       small_efficiency=small_eff, solo_fraction=self._solo(mode))
        return _Priced(self, mode, tile, raw.grid, reduction, _join(reason, raw.note), small,
                       pred, splits, rows)

    def _solo(self, mode) -> float:
        """The option's solo fraction where ``mode`` runs data-parallel waves, else 1: a
        Stream-K table of the same whole tiles on as many CTAs runs slower."""
        return self.option.solo_fraction if mode == DATA_PARALLEL else 1.0

    def schedule(self, priced: "_Priced", **fields) -> Schedule:
        """The Schedule of ``priced``, its table built (``fields``: others to set, such as
        the reason and the candidates)."""
        raw, table, offsets = priced.splits()
        pred = priced.prediction
        values = dict(reason=priced.reason, small_tile=priced.small_tile,
                      splits_per_tile=raw.splits_per_tile, groups=raw.groups,
                      log_swizzle=raw.tiles.log_swizzle, raster=raw.tiles.raster,
                      predicted_time_us=pred.time_us, predicted_efficiency=pred.efficiency,
                      waves=pred.waves, tile_efficiency=self.option.efficiency,
                      fixup_cost=self.option.fixup_cost, cluster=self.option.cluster,
                      small_efficiency=priced.small_efficiency,
                      solo_fraction=self._solo(priced.mode))
        return Schedule(self.problem, self.device, priced.mode, priced.tile, priced.grid,
                        priced.reduction, table, offsets, **dict(values, **fields))

    # -- one builder per mode; each returns a _Priced (DP with a reason if it degenerates)
    def dp(self, tile, grid, reason=""):
        ts = self.tiles(tile)
        g = grid if grid is not None else D.balanced_grid(ts, tile[2], self.device.resident_ctas)
        pred = self._dp_price(ts, tile, g)
        if pred is None:
            return self.finish(DATA_PARALLEL, tile, D.data_parallel(ts, tile[2], g), ATOMIC,
                               reason)

        def splits():
            return (D.data_parallel(ts, tile[2], g), *D.data_parallel_table(ts, g))
        return _Priced(self, DATA_PARALLEL, tile, g, ATOMIC, reason, None, pred, splits)

    def _dp_price(self, ts: D.TileSpace, tile, grid: int) -> Prediction | None:
        """The prediction of the data-parallel table of ``ts`` on ``grid`` CTAs from its tile
        counts (:func:`.heuristics.predict_data_parallel`), where the space is uniform and no
        value of the table can exceed the kernels' index; else None (priced on its rows)."""
        if not (ts.uniform and D.space_within_index(ts, grid)):
            return None
        return predict_data_parallel(
            ts.n, grid, ts.shape[3], tile, self.problem.dtype, self.problem.accumulator_dtype,
            self.device, self.option.efficiency, self.option.fixup_cost,
            self._solo(DATA_PARALLEL))

    def _wait_check(self, grid, reduction=None):
        if (reduction or self.reduction) == DETERMINISTIC and grid > self.device.resident_ctas:
            raise ValueError(
                f"grid={grid} exceeds the {self.device.resident_ctas} resident CTAs of "
                f"{self.device.name} and deterministic fixup waits on locks: that could "
                "deadlock (use reduction='atomic' or a smaller grid)")

    def floor(self, tile, units: int) -> float:
        """A time no table of ``tile`` whose tiles are whole or split over k (no small
        tiles, k-iterations at full cost) on ``units`` CTAs can beat: the launch's fixed
        cost plus the tiles' k-iterations spread evenly over the CTAs a wave holds (the
        slowest CTA computes at least its share, and merging partials costs no less than
        nothing); 0 where the model's fixup constants could be negative or the space is
        not uniform."""
        work = self._work.get(tile)
        if work is None:
            work = self._work[tile] = self._floor_work(tile)
        a, spread = work
        if spread is None:
            return 0.0
        return a + spread / min(units, self.device.resident_ctas)

    def _floor_work(self, tile) -> tuple[float, float | None]:
        """(a, the k-iterations' time on one CTA) of :meth:`floor` for ``tile``; None for
        the time where the floor is 0."""
        ts = self.tiles(tile)
        model = cost_of(self.device)
        c = iteration_cost(tile, self.problem.dtype, model, self.option.efficiency) * \
            max(1, int(self.device.ctas_per_sm))
        if not ts.uniform or min(c, model.b, model.d, self.option.fixup_cost) < 0:
            return model.a, None
        return model.a, c * ts.n * ts.iters(tile[2])

    def raw_floor(self, tile, raw: D.RawSplits, reduction) -> float:
        """:meth:`floor` of the table of ``raw`` (listed splits of a uniform space), or more:
        the CTA that finishes a tile computes that split's k-iterations and, where the
        tile's partials merge in a chain (every reduction but the arrival protocol's shared
        sum and the cluster sum), merges the other splits one by one, at the model's ``d``
        each."""
        lower = self.floor(tile, raw.grid)
        if lower == 0.0 or not len(raw.tile) or raw.rows_space is not None:
            return lower
        model = cost_of(self.device)
        share = max(1, int(self.device.ctas_per_sm))
        c = iteration_cost(tile, self.problem.dtype, model, self.option.efficiency) * share
        shared = self.option.shared_sum and reduction == ARRIVAL and \
            raw.grid <= self.device.resident_ctas
        final = raw.ke >= self.tiles(tile).iters(tile[2])  # the split that finishes its tile
        cost = c * (raw.ke[final] - raw.kb[final])
        if not (shared or reduction == CLUSTER):
            d = share * fixup_costs(tile, self.problem.accumulator_dtype, model,
                                    self.option.fixup_cost)[1]
            cost = cost + d * (np.bincount(raw.tile)[raw.tile[final]] - 1)
        return max(lower, model.a + float(cost.max()))

    def _stream_k_raw(self, tile, grid):
        key = (tile, grid)
        raw = self._sk.get(key)
        if raw is None:
            raw = self._sk[key] = D.stream_k(self.tiles(tile), tile[2], grid, self.groups)
        return raw

    def stream_k(self, tile, grid, reason="", reduction=None):
        red = reduction or self.reduction
        ts = self.tiles(tile)
        p = ts.iters(tile[2])
        opts = [grid] if grid is not None else _distinct_units(
            _sk_grid_options(ts.n, p, self.device.resident_ctas), ts, tile[2])
        for g in opts:
            self._wait_check(g, red)

        def build(g):
            return self.finish(STREAM_K, tile, self._stream_k_raw(tile, g), red, reason)
        if len(opts) == 1:
            return build(opts[0])
        # a grid runs as stream_k_units of its CTAs (the table's grid)
        return _cheapest_bounded(
            opts, lambda g: self.floor(tile, D.stream_k_units(ts.n * p, p, g)), build,
            lambda g: self.raw_floor(tile, self._stream_k_raw(tile, g), red))

    def hybrid(self, tile, grid, reason=""):
        ts = self.tiles(tile)
        g = grid if grid is not None else self.device.resident_ctas
        self._wait_check(g)
        raw = D.hybrid(ts, tile[2], g, self.groups)
        if isinstance(raw, str):
            return self.dp(tile, grid, _join(reason, raw + " -> data_parallel"))
        return self.finish(HYBRID, tile, raw, self.reduction, reason)

    def split_k(self, tile, grid, splits, reason=""):
        ts = self.tiles(tile)
        p = ts.iters(tile[2])
        smax = D.max_splits(p)
        if splits is not None:
            opts = [splits]
        elif ts.n < self.device.resident_ctas:
            opts = list(range(2, min(MAX_SPLIT_K, smax) + 1)) or [2]
        else:  # a wave or more of tiles: splitting K only adds fixup; try the least
            opts = [2]
        if min(opts[0], smax) <= 1:  # (opts hold several S only where smax >= 2)
            return self.dp(tile, grid, _join(
                reason, f"split_k: P={p} < {2 * MIN_ITERS_PER_SPLIT} k-iterations, no split"
                " -> data_parallel"))

        raws = {}

        def grid_of(s_count):
            return grid if grid is not None else min(ts.n * min(s_count, smax),
                                                     self.device.resident_ctas)

        def raw(s_count):
            if s_count not in raws:
                raws[s_count] = D.split_k(ts, tile[2], s_count, grid_of(s_count))
            return raws[s_count]

        def build(s_count):
            self._wait_check(grid_of(s_count))
            return self.finish(SPLIT_K, tile, raw(s_count), self.reduction, reason)
        if len(opts) == 1:
            return build(opts[0])
        # (the table's grid: no more CTAs than its S splits of every tile)
        return _cheapest_bounded(
            opts, lambda s_count: self.floor(tile, min(grid_of(s_count),
                                                       ts.n * min(s_count, smax))),
            build, lambda s_count: self.raw_floor(tile, raw(s_count), self.reduction))

    def aligned(self, tile, grid, splits, reason="", reduction=None):
        ts = self.tiles(tile)
        p = ts.iters(tile[2])
        red = CLUSTER if (reduction or self.reduction) == CLUSTER else ARRIVAL
        allowed = D.aligned_splits(p)
        if red == CLUSTER:  # a tile's splits are one cluster's CTAs, all resident at once
            allowed = [s for s in allowed if s == 1 or s in CLUSTER_SPLITS
                       and self._clusters_fit(ts.n, s)]
        if splits is not None:
            opts = [splits]
        elif grid is not None:
            opts = [max([s for s in allowed if ts.n * s <= grid] or [1])]
        elif ts.n < self.device.resident_ctas:
            opts = [s for s in allowed if s <= MAX_SPLIT_K]
        else:
            opts = [min([s for s in allowed if s > 1] or [1])]
        def build(s_count):
            raw = D.aligned(ts, tile[2], s_count, allowed)
            if raw.splits_per_tile > 1:
                return self.finish(ALIGNED, tile, raw, red, reason)
            sizes = f" in {CLUSTER_SPLITS}" if red == CLUSTER else ""
            return self.dp(tile, None, _join(
                reason, f"aligned: no S > 1{sizes} divides P={p} with >= "
                f"{MIN_ITERS_PER_SPLIT} k-iterations -> data_parallel"))

        def bound(s_count):  # S splits of every tile on as many CTAs; S = 1 is planned DP
            splits = max(x for x in allowed if x <= max(1, s_count))
            return self.floor(tile, ts.n * splits) if splits > 1 else 0.0
        if len(opts) == 1:
            return build(opts[0])
        return _cheapest_bounded(opts, bound, build)

    def _clusters_fit(self, tiles: int, size: int) -> bool:
        """Whether ``tiles`` clusters of ``size`` CTAs are resident at once (where the
        device does not say how many are: whether they fit in its resident CTAs)."""
        resident = self.device.clusters_resident(size)
        if resident == 0:
            return size <= self.device.resident_ctas
        return tiles <= resident

    def hytis(self, tile, grid, reason="", forced=False):
        ts = self.tiles(tile)
        g = grid if grid is not None else self.device.resident_ctas
        if self.option.small_tiles == ():
            if forced:
                raise ValueError(f"mode='hytis' re-tiles the last wave with a smaller tile, "
                                 f"but {NO_SECOND_TILE}")
            return self.dp(tile, grid, _join(reason, f"hytis: {NO_SECOND_TILE} -> "
                                             "data_parallel"))
        smalls = [tuple(self.small_tile[:2])] if self.small_tile is not None else \
            list(self.option.small_tiles) if self.option.small_tiles is not None else \
            D.hytis_small_tiles(tile[0], tile[1])
        if self.option.small_tiles:  # a kernel's: only the small tiles it runs
            smalls = [sm for sm in smalls if sm in self.option.small_tiles]
            if not smalls:
                why = (f"small_tile={tuple(self.small_tile)} is not one the kernel runs "
                       f"beside its {tile[0]}x{tile[1]} tile {list(self.option.small_tiles)}")
                if forced:
                    raise ValueError(f"mode='hytis': {why}")
                return self.dp(tile, grid, _join(reason, f"hytis: {why} -> data_parallel"))
        best = None
        for sm in smalls:
            raw = D.hytis(ts, tile[2], g, sm)
            if isinstance(raw, str):
                return self.dp(tile, grid, _join(reason, raw + " -> data_parallel"))
            s = self.finish(HYTIS, tile, raw, ATOMIC, reason, small=(sm[0], sm[1], tile[2]))
            if best is None or s.predicted_time_us < best.predicted_time_us:
                best = s
        if best is None:
            return self.dp(tile, grid, _join(reason, "hytis: no smaller tile -> data_parallel"))
        return best

    def build(self, mode, tile, grid, splits, reason="", forced=False):
        if mode == DATA_PARALLEL:
            return self.dp(tile, grid, reason)
        if mode == STREAM_K:
            return self.stream_k(tile, grid, reason)
        if mode == HYBRID:
            return self.hybrid(tile, grid, reason)
        if mode == SPLIT_K:
            return self.split_k(tile, grid, splits, reason)
        if mode == ALIGNED:
            return self.aligned(tile, grid, splits, reason)
        if mode == HYTIS:
            return self.hytis(tile, grid, reason, forced=forced)
        raise ValueError(f"unknown mode {mode!r}")


@dataclass(frozen=True, eq=False)
class _Priced:
    """A schedule of one tile option priced by the cost model before its split table is
    built: what the choice and the candidate list read (the mode, tile, grid, prediction,
    occupancy and unit), and what builds the table of the one chosen (:meth:`schedule`).
    ``splits()``: its splits, table and CTA offsets; ``rows``: the rows it was priced on
    (:func:`.decompose.cost_rows`, or its table where that was built to price it; None where
    it was priced from its tile counts)."""

    builder: _Builder
    mode: Mode
    tile: tuple
    grid: int
    reduction: str
    reason: str
    small_tile: tuple | None
    prediction: Prediction
    splits: Callable[[], tuple[D.RawSplits, np.ndarray, np.ndarray]]
    rows: np.ndarray | None = None

    @property
    def predicted_time_us(self) -> float:
        return self.prediction.time_us

    @property
    def predicted_efficiency(self) -> float:
        return self.prediction.efficiency

    @property
    def waves(self) -> float:
        return self.prediction.waves

    @property
    def device(self) -> DeviceInfo:
        return self.builder.device

    @property
    def cluster(self) -> int:
        return self.builder.option.cluster

    @property
    def small_efficiency(self) -> float | None:
        return self.builder.option.small_efficiency if self.small_tile is not None else None

    @property
    def peers(self) -> int:
        """The most splits a tile has."""
        return int(self.rows[:, T.PEERS].max()) if self.rows is not None and \
            len(self.rows) else 1

    @property
    def shared_sum(self) -> bool:
        """Whether the peers of a tile share its final sum (:attr:`Schedule.shared_sum`)."""
        return self.rows is not None and \
            bool(np.any(self.rows[:, T.FLAGS] & T.FLAG_SHARED_SUM))

    def schedule(self, **fields) -> Schedule:
        """Its Schedule, the table built (``fields``: others to set)."""
        return self.builder.schedule(self, **fields)


def _finalise(best: _Priced, built: list[tuple[_Priced, str]], reason: str) -> Schedule:
    t0 = best.predicted_time_us
    cands = tuple(
        Candidate(c.mode, c.tile, c.grid, c.predicted_time_us, c.predicted_efficiency, c.waves,
                  c.predicted_time_us / t0, c is best, note, c.device.ctas_per_sm, c.cluster)
        for c, note in built)
    return best.schedule(reason=reason, candidates=cands)


SCHEDULE_CACHE_SIZE = 1024
"""Schedules :func:`schedule_problem` keeps by its arguments (values: the problem, the
device, the tile options and the options), so a product planned again (a plan's repeated
step, ``contract_path`` called again, ``gemm()`` on new arrays of planned shapes) costs a
lookup. A Schedule is immutable (its tables read-only), so the one kept is the one
returned."""
_SCHEDULES: dict = {}
_SCHEDULES_LOCK = threading.Lock()


def clear_schedule_cache() -> None:
    """Forget the schedules :func:`schedule_problem` keeps."""
    with _SCHEDULES_LOCK:
        _SCHEDULES.clear()


def _cache_key(args: tuple):
    """A key of ``schedule_problem``'s arguments: each with its type (a grid of 2.0 is not
    one of 2), sequences of tiles as tuples; None where one is not hashable."""
    def part(v):
        if isinstance(v, (list, tuple)):
            return (tuple, tuple(part(x) for x in v))
        return (type(v), v)
    try:
        key = tuple(part(v) for v in args)
        hash(key)
    except TypeError:
        return None
    return key


def schedule_problem(problem: GemmProblem, device: DeviceInfo | None = None, *,
                     mode: str = AUTO, tile=None, tiles=None, grid: int | None = None,
                     reduction: str = ATOMIC, splits: int | None = None,
                     groups: int | None = None, swizzle: int | None = None,
                     raster: str | None = None, small_tile=None, kind=None,
                     associative: bool = True, fused_consumer: bool = False,
                     fragment_accumulators: bool = False, accumulator_dtype=None) -> Schedule:
    """Schedule any GemmProblem (GEMM, batched, grouped, GEMV, implicit-GEMM conv).

    See :func:`schedule_gemm` for the arguments. ``tiles``: the candidates, as
    :class:`~skcontract.schedule.TileOption` values (each planned at its own occupancy and
    priced with its own efficiency) or (BM, BN, BK) tuples; ``tile`` or ``tiles`` is needed
    (:data:`NO_TILES`). Extra facts for :func:`can_apply_stream_k`:
    ``kind`` (defaults to the problem's), ``associative``, ``fused_consumer``,
    ``accumulator_dtype``; ``fragment_accumulators=True`` (accumulators that cannot be addressed
    element-wise) restricts auto to the aligned split. The same arguments give the same
    Schedule object (:data:`SCHEDULE_CACHE_SIZE` of them are kept).
    """
    args = (problem, device, mode, tile, tiles, grid, reduction, splits, groups, swizzle,
            raster, small_tile, kind, associative, fused_consumer, fragment_accumulators,
            accumulator_dtype)
    key = _cache_key(args) if not isinstance(tiles, Iterator) else None
    if key is not None:
        hit = _SCHEDULES.get(key)
        if hit is not None:
            return hit
    s = _schedule_problem(*args)
    if key is not None:
        with _SCHEDULES_LOCK:
            if len(_SCHEDULES) >= SCHEDULE_CACHE_SIZE:
                del _SCHEDULES[next(iter(_SCHEDULES))]  # the oldest
            _SCHEDULES[key] = s
    return s


def _schedule_problem(problem, device, mode, tile, tiles, grid, reduction, splits, groups,
                      swizzle, raster, small_tile, kind, associative, fused_consumer,
                      fragment_accumulators, accumulator_dtype) -> Schedule:
    device = device if device is not None else DeviceInfo.h200()
    mode, reduction = as_mode(mode), as_reduction(reduction)
    if reduction == CLUSTER and mode not in (AUTO, ALIGNED, DATA_PARALLEL):
        raise ValueError(f"reduction='cluster' runs a tile's splits on one cluster: it is for "
                         f"mode='aligned' (or 'auto'), not {str(mode)!r}")
    if grid is not None and (int(grid) != grid or grid < 1):
        raise ValueError(f"grid must be a positive int, got {grid!r}")
    if splits is not None and (int(splits) != splits or splits < 1):
        raise ValueError(f"splits must be a positive int, got {splits!r}")
    if groups is not None and (int(groups) != groups or groups < 1):
        raise ValueError(f"groups must be a positive int, got {groups!r}")
    if swizzle is not None and (int(swizzle) != swizzle or not 0 <= swizzle < T.RASTER_M_BIT):
        # the kernels read the walk as one int, the band's log2 below RASTER_M_BIT
        raise ValueError(f"swizzle (log2 of the band width) must be an int in "
                         f"[0, {T.RASTER_M_BIT - 1}], got {swizzle!r}")
    if raster not in (None, "M", "N"):
        raise ValueError(f"raster must be 'M' or 'N', got {raster!r}")
    if small_tile is not None:
        small_tile = tuple(int(x) for x in small_tile)
    kind = kind_of(kind if kind is not None else problem.kind)
    acc = str(accumulator_dtype) if accumulator_dtype is not None else \
        problem.accumulator_dtype
    facts = dict(associative=associative, accumulator_dtype=acc, ragged_k=problem.ragged_k,
                 fused_consumer=fused_consumer, device=device)
    builders = [_Builder(problem, device, o, reduction, groups, swizzle, raster, small_tile)
                for o in _options(tiles, tile, device)]
    if mode != AUTO:
        return _forced(mode, builders, grid, splits, kind, facts)
    return _auto(builders, grid, splits, reduction, fragment_accumulators, kind, facts)


def _forced(mode, builders, grid, splits, kind, facts) -> Schedule:
    """The forced ``mode`` on every tile option; the cheapest option wins."""
    red = builders[0].reduction
    if mode == ALIGNED and red != CLUSTER:
        red = ARRIVAL
    ok, why = can_apply_stream_k(kind, reduction=red, **facts)
    if mode == HYTIS:  # the options that have a small tile (none: the first says why not)
        builders = [b for b in builders if b.option.small_tiles != ()] or builders[:1]
    built = []
    for b in builders:
        t = b.option.tile
        if mode in K_SPLITTING_MODES and not ok:
            fallback = HYTIS if b.tiles(t).n % (grid or b.device.resident_ctas) else \
                DATA_PARALLEL
            s = b.build(fallback, t, grid, None, f"{mode} not applicable ({why}) -> {fallback}")
        else:
            s = b.build(mode, t, grid, splits, f"forced {mode}", forced=True)
        built.append((s, ""))
    offered = [s for (s, _), b in zip(built, builders)
               if not (b.option.splits_only and s.mode == DATA_PARALLEL)]
    best = min(offered or [s for s, _ in built], key=lambda s: s.predicted_time_us)
    reason = best.reason
    if len(builders) > 1:
        pair = " on cluster pairs" if best.cluster > 1 else ""
        reason += (f"; tile {best.tile[0]}x{best.tile[1]}x{best.tile[2]} at "
                   f"{best.device.ctas_per_sm} CTAs an SM{pair} by cost model")
    return _finalise(best, built, reason)


def _entry(s: Schedule) -> tuple:
    """What names the kernel entry a schedule plans for: its tile, its CTAs an SM and the
    CTAs of its work unit."""
    return s.tile, s.device.ctas_per_sm, s.cluster


def _lower_bound(b: _Builder) -> float:
    """A time no schedule of ``b``'s tile can beat: the launch cost plus its k-iterations
    spread perfectly over the resident CTAs (a schedule's predicted time, and so its
    selection key, is at least this). Only for the kernels' tile options on a uniform tile
    space; others (HyTiS's smaller tiles, ragged K) get 0: never pruned."""
    ts = b.tiles(b.option.tile)
    if b.option.small_tiles != () or not ts.uniform:
        return 0.0
    model = cost_of(b.device)
    c = iteration_cost(b.option.tile, b.problem.dtype, model, b.option.efficiency) * \
        b.device.ctas_per_sm
    return model.a + c * ts.n * ts.iters(b.option.tile[2]) / b.device.resident_ctas


def _cluster_sum(b: _Builder, tile, grid) -> _Priced | None:
    """The aligned split under the ``cluster`` reduction, where ``b``'s kernels run it and
    its clusters are all resident at once (the device knows how many), else None."""
    if not b.option.cluster_sum or grid is not None or not b.device.resident_clusters:
        return None
    s = b.aligned(tile, None, None, reduction=CLUSTER)
    return s if s.mode == ALIGNED else None


def _auto(builders, grid, splits, reduction, fragment_accumulators, kind, facts) -> Schedule:
    """Every mode the rules allow on every tile option; the cheapest (with MODE_PREFERENCE's
    nudge) wins."""
    ok, why = can_apply_stream_k(kind, reduction=reduction, **facts)
    built: list[tuple[_Priced, str]] = []
    allowed: list[_Priced] = []
    rules: dict = {}
    no_hytis = ""
    best_key = float("inf")
    keys: list[float] = []  # schedule_key of each allowed schedule
    for b in builders:
        t = b.option.tile
        resident = b.device.resident_ctas
        ts = b.tiles(t)
        p = ts.iters(t[2])
        if _lower_bound(b) >= best_key:
            continue  # no schedule of this tile can beat the best one found
        dp = b.dp(t, grid)
        built.append((dp, SPLITS_ONLY if b.option.splits_only else ""))
        if not b.option.splits_only:
            allowed.append(dp)
        g = grid if grid is not None else resident
        if (fragment_accumulators or reduction == CLUSTER) and ok:
            modes = [ALIGNED]
        elif ok:
            rule = rule_mode(ts.n, p, resident)
            rules[_entry(dp)] = rule
            few_waves = ts.n <= STREAM_K_MAX_WAVES * resident
            modes = [] if rule else ([STREAM_K] if few_waves else []) + \
                ([HYBRID] if ts.n >= resident else []) + ([SPLIT_K] if ts.n < resident else [])
            if not rule and b.option.small_tiles and ts.n % g:
                modes.append(HYTIS)  # a kernel's own small tile, weighed with the others
            if rule and not b.option.splits_only:
                built[-1] = (dp, f"rule: {rule}")
        elif ts.n % g and b.option.small_tiles == ():
            modes, no_hytis = [], f"hytis not offered: {NO_SECOND_TILE}"
        else:
            modes = [HYTIS] if ts.n % g else []
        for md in modes:
            try:
                s = b.build(md, t, grid, splits)
            except ValueError as e:  # e.g. deterministic with a forced grid > resident
                built.append((dp, f"{md}: {e}"))
                continue
            if s.mode != md:
                continue  # degenerated to DP, already listed
            built.append((s, ""))
            allowed.append(s)
        if STREAM_K in modes and reduction == DETERMINISTIC and ts.n < resident:
            # few tiles, many peers each: the deterministic chain merges them one by one,
            # the shared sum (or a kernel's last arrival, summing output-sized partials; both
            # bitwise reproducible) in one parallel pass
            s = b.stream_k(t, grid, reduction=ARRIVAL) if b.option.arrival and \
                D.max_peers(p) >= SHARED_SUM_MIN_PEERS else None
            if s is not None and s.mode == STREAM_K and s.peers >= SHARED_SUM_MIN_PEERS:
                built.append((s, "shared sum" if s.shared_sum else "last-arrival sum"))
                allowed.append(s)
            # or in one cluster's shared memory (also bitwise reproducible)
            s = _cluster_sum(b, t, grid)
            if s is not None:
                built.append((s, "cluster sum"))
                allowed.append(s)
        keys += [schedule_key(x) for x in allowed[len(keys):]]
        best_key = min(keys, default=float("inf"))
    best = min(allowed or [s for s, _ in built], key=schedule_key)
    dp_same = next(s for s, _ in built if s.mode == DATA_PARALLEL and _entry(s) == _entry(best))
    if best.mode == DATA_PARALLEL:
        rule = rules.get(_entry(best))
        reason = f"auto: {rule}" if rule else "auto: data_parallel is cheapest"
    else:
        speed = dp_same.predicted_time_us / best.predicted_time_us
        reason = f"auto: {best.mode} predicted x{speed:.2f} vs data_parallel"
    if not ok:
        reason += f"; stream-k not applicable: {why}"
        if no_hytis and best.mode == DATA_PARALLEL:
            reason += f"; {no_hytis}"
    if best.reason:
        reason += f"; {best.reason}"
    return _finalise(best, built, reason)


def schedule_gemm(m: int, n: int, k: int, *, batch: int = 1, device: DeviceInfo | None = None,
                  mode: str = AUTO, tile=None, grid: int | None = None,
                  reduction: str = ATOMIC, dtype="float16", **options) -> Schedule:
    """Schedule ``C[l] = A[l] @ B[l]`` with A (m, k), B (k, n), ``l < batch``.

    ``mode``: "auto" (default), "data_parallel", "split_k", "stream_k", "hybrid",
    "aligned" or "hytis". ``tile``: (BM, BN, BK), the tile to plan on; or ``tiles=``, the
    options auto chooses among (:func:`schedule_problem`; one of the two is needed).
    ``grid``: the number of persistent CTAs (default: the device's resident CTAs, or fewer).
    ``reduction``:
    "atomic", "deterministic", "arrival" (per-split slots; the peers share the final sum
    when the grid is resident; aligned uses it unless "cluster" is asked for) or "cluster"
    (aligned only: a tile's splits on one cluster's CTAs, summed in their shared memory);
    auto with "deterministic" also weighs stream_k with "arrival" and aligned with
    "cluster" for fewer tiles than resident CTAs. ``dtype``: the
    operand dtype (for the accumulator and the cost model). ``options``: ``splits`` (S of
    split_k / aligned), ``groups`` (Stream-K groups, <= 8), ``swizzle`` (log2 band width),
    ``raster`` ("M" / "N"), ``small_tile`` (HyTiS), and the applicability facts of
    :func:`schedule_problem`.

    >>> s = schedule_gemm(2176, 1024, 4096, tile=(128, 128, 64))
    >>> s.mode, s.grid
    ('hybrid', 132)
    """
    return schedule_problem(GemmProblem(m, n, k, batch=batch, dtype=dtype), device, mode=mode,
                            tile=tile, grid=grid, reduction=reduction, **options)
