"""The decompositions: one function per mode, all vectorised numpy (docs/design/stream_k.md).

Every mode works on a :class:`TileSpace` (the output tiles of all batch entries / groups in
rasterised order) and returns a :class:`RawSplits`: for each split its CTA, its tile and its
k-iteration range ``[kb, ke)``, in the order the CTA executes them. :func:`build_table` turns
that into the split table of :mod:`.table` (peers, split index, flags, locks, slots).
This module is the only place that does decomposition arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import table as T
from .heuristics import (HYTIS_MIN_TILE, HYTIS_SMALL_TILES, MAX_STREAM_K_GROUPS,
                         MIN_ITERS_PER_SPLIT)
from .swizzle import default_log_swizzle, default_raster, tile_origins
from .types import ARRIVAL, ATOMIC, CLUSTER, DETERMINISTIC, GemmProblem


def cdiv(a, b):
    return -(-a // b)


@dataclass(frozen=True)
class TileSpace:
    """The output tiles of a problem in execution (raster) order, batch-major.

    A *uniform* space (one GEMM, or a batch of equal ones) keeps only its shape and computes
    any tile's coordinates on demand (:func:`.swizzle.tile_origins`), so nothing here grows
    with the tile count, and its tiles can be named by position in range rows. A *listed*
    space (grouped GEMMs, HyTiS's re-tiled waves) keeps one array per field.
    """

    n: int
    log_swizzle: int = 0
    raster: str = "N"
    shape: tuple | None = None     # uniform: (batch, m, n, k, bm, bn)
    listed: dict | None = None     # listed: batch, m0, n0, bm, bn, kk, small arrays

    @property
    def uniform(self) -> bool:
        return self.shape is not None

    def coords(self, idx) -> dict:
        """batch, m0, n0, bm, bn (clipped), kk (the tile's K) and small, for tiles ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.listed is not None:
            return {k: v[idx] for k, v in self.listed.items()}
        _, m, n, k, bm, bn = self.shape
        l, m0, n0, cbm, cbn = tile_origins(idx, m, n, bm, bn, self.log_swizzle, self.raster)
        return dict(batch=l, m0=m0, n0=n0, bm=cbm, bn=cbn, kk=np.full(len(idx), k, np.int64),
                    small=np.zeros(len(idx), dtype=bool))

    def k_and_small(self, idx) -> tuple:
        """(kk, small) of :meth:`coords` alone: the K of tiles ``idx`` and whether each is a
        small tile (for a uniform space the problem's K and False, whatever the tiles)."""
        if self.listed is not None:
            return self.listed["kk"][idx], self.listed["small"][idx]
        return self.shape[3], False

    def iters(self, bk: int) -> int:
        """k-iterations of the longest tile."""
        if self.uniform:
            return int(cdiv(self.shape[3], bk))
        return int(cdiv(self.listed["kk"], bk).max()) if self.n else 0

    def uniform_iters(self, bk: int) -> int:
        """k-iterations of every tile; ValueError when tiles differ (ragged K)."""
        if not self.uniform and self.n:
            p = cdiv(self.listed["kk"], bk)
            if p.min() != p.max():
                raise ValueError("stream-k needs the same k-iteration count for every tile")
        return self.iters(bk)

    def listing(self, idx) -> "TileSpace":
        """A listed space of the tiles ``idx`` (in that order)."""
        idx = np.asarray(idx, dtype=np.int64)
        return TileSpace(len(idx), self.log_swizzle, self.raster, listed=self.coords(idx))

    @staticmethod
    def concat(parts: list["TileSpace"]) -> "TileSpace":
        fields = [p.coords(np.arange(p.n)) for p in parts]
        listed = {k: np.concatenate([f[k] for f in fields]) for k in fields[0]}
        return TileSpace(sum(p.n for p in parts), parts[0].log_swizzle, parts[0].raster,
                         listed=listed)


def tile_space(problem: GemmProblem, bm: int, bn: int, log_swizzle: int | None = None,
               raster: str | None = None) -> TileSpace:
    """All output tiles of ``problem``: batch-major, swizzled inside each batch entry."""

    def one(m, n, k, batch):
        tm, tn = cdiv(m, bm), cdiv(n, bn)
        lsw = default_log_swizzle(tm, tn) if log_swizzle is None else log_swizzle
        ras = default_raster(tm, tn) if raster is None else raster
        return TileSpace(tm * tn * batch, lsw, ras, shape=(batch, m, n, k, bm, bn))

    if problem.groups is None:
        return one(problem.m, problem.n, problem.k, problem.batch)
    parts = []
    for l, (m, n, k) in enumerate(problem.groups):
        part = one(m, n, k, 1)
        c = part.coords(np.arange(part.n))
        c["batch"] = np.full(part.n, l, np.int64)
        parts.append(TileSpace(part.n, part.log_swizzle, part.raster, listed=c))
    return TileSpace.concat(parts)


@dataclass(frozen=True)
class Ranges:
    """Range rows before the table is built: CTA ``cta`` runs the whole tiles ``first +
    j * stride`` (``j < count``) of a uniform tile space; ``seq`` places the row among the
    CTA's other rows (smaller first)."""

    cta: np.ndarray
    first: np.ndarray
    count: np.ndarray
    stride: np.ndarray
    seq: np.ndarray

    @staticmethod
    def dealt(first: int, n: int, grid: int, seq: int) -> "Ranges":
        """Tiles ``first .. first + n`` dealt round-robin to ``grid`` CTAs: one row each."""
        c = np.arange(min(grid, n), dtype=np.int64)
        return Ranges(c, first + c, cdiv(n - c, grid), np.full(len(c), grid, np.int64),
                      np.full(len(c), seq, np.int64))

    @staticmethod
    def concat(parts: list["Ranges"]) -> "Ranges | None":
        parts = [p for p in parts if p is not None and len(p.cta)]
        if not parts:
            return None
        return Ranges(*(np.concatenate([getattr(p, f) for p in parts])
                        for f in ("cta", "first", "count", "stride", "seq")))


@dataclass(frozen=True)
class RawSplits:
    """Splits before the table is derived: for each listed split its CTA, its tile (an
    index into ``rows_space``, default ``tiles``) and k-iteration range ``[kb, ke)``, with
    ``seq`` ordering it among its CTA's rows (default: listing order); ``ranges`` the whole
    tiles given as range rows (positions in ``tiles``, which is then uniform)."""

    tiles: TileSpace
    cta: np.ndarray
    tile: np.ndarray
    kb: np.ndarray
    ke: np.ndarray
    grid: int
    note: str = ""
    splits_per_tile: int = 1
    groups: int = 1
    seq: np.ndarray | None = None
    ranges: Ranges | None = None
    rows_space: TileSpace | None = None


def _stable_by_cta(cta, tile, kb, ke):
    o = np.argsort(cta, kind="stable")
    return cta[o], tile[o], kb[o], ke[o]


_NONE = np.zeros(0, np.int64)


# ---------------------------------------------------------------------------------------
# DATA_PARALLEL
# ---------------------------------------------------------------------------------------
def data_parallel(ts: TileSpace, bk: int, grid: int) -> RawSplits:
    """One split per tile, tiles dealt to CTAs round-robin (one range row per CTA)."""
    if ts.uniform:
        return RawSplits(ts, _NONE, _NONE, _NONE, _NONE, grid,
                         ranges=Ranges.dealt(0, ts.n, grid, 0))
    pos = np.arange(ts.n, dtype=np.int64)
    p = cdiv(ts.listed["kk"], bk)
    return RawSplits(ts, *_stable_by_cta(pos % grid, pos, np.zeros_like(pos), p), grid)


BALANCE_WINDOW = 24
"""Grids below all resident CTAs that :func:`balanced_grid` tries: a raster band of the walk
holds up to 8 tile rows (or columns), so a window of a few bands' worth moves the grid off
any multiple of a band's pattern."""
BALANCE_MAX_TILES = 1 << 16
"""Tiles up to which :func:`balanced_grid` weighs the CTAs' loads; beyond, every CTA runs
so many tiles that the edge tiles' share of any one CTA is small."""


def balanced_grid(ts: TileSpace, bk: int, resident: int) -> int:
    """The data-parallel grid, of at most ``resident`` CTAs, whose busiest CTA has the least
    to do. A tile costs its k-iterations plus its output's share of a full tile (the
    epilogue stores the tile's part inside the output). Where the grid is a multiple of the
    raster's pattern, CTA c's tiles c, c + grid, ... all sit at the same place in their
    bands: every partial edge tile falls to the same few CTAs while the rest store full
    tiles, and the walk waits on the busiest. Spaces without edge tiles, listed ones, and
    those of fewer tiles than ``resident`` or more than :data:`BALANCE_MAX_TILES` keep
    ``min(tiles, resident)``; of equal loads the largest grid is kept."""
    grid = min(ts.n, resident)
    if not ts.uniform or ts.n <= resident or ts.n > BALANCE_MAX_TILES:
        return grid
    _, m, n, _, bm, bn = ts.shape
    if m % bm == 0 and n % bn == 0:
        return grid
    return _balanced_grid(ts.n, ts.log_swizzle, ts.raster, ts.shape, bk, grid)


@lru_cache(maxsize=1024)
def _balanced_grid(tiles: int, log_swizzle: int, raster: str, shape: tuple, bk: int,
                   grid: int) -> int:
    """:func:`balanced_grid`'s search, worked out once for each space, BK and grid."""
    ts = TileSpace(tiles, log_swizzle, raster, shape=shape)
    k = shape[3]
    bm, bn = shape[4], shape[5]
    c = ts.coords(np.arange(ts.n))
    cost = cdiv(k, bk) + c["bm"] * c["bn"] / (bm * bn)
    best, least = grid, np.inf
    for g in range(grid, max(grid - BALANCE_WINDOW, 1) - 1, -1):
        busiest = np.concatenate([cost, np.zeros(-ts.n % g)]).reshape(-1, g).sum(axis=0).max()
        if busiest < least and not np.isclose(busiest, least):  # equals: the larger grid
            best, least = g, busiest
    return best


# ---------------------------------------------------------------------------------------
# STREAM_K (and the Stream-K part of HYBRID)
# ---------------------------------------------------------------------------------------
def stream_k_units(total: int, per_tile: int, units: int) -> int:
    """Units actually used so every unit keeps >= MIN_ITERS_PER_SPLIT iterations (or, when
    tiles are shorter than that, at least one whole tile)."""
    tiles = total // per_tile
    return int(max(1, min(units, max(total // MIN_ITERS_PER_SPLIT, min(tiles, units)))))


def max_peers(per_tile: int) -> int:
    """The most splits :func:`stream_k_boundaries` cuts a tile of ``per_tile`` k-iterations
    into: every split of a tile of several keeps MIN_ITERS_PER_SPLIT iterations or more."""
    return max(1, per_tile // MIN_ITERS_PER_SPLIT)


def stream_k_boundaries(total: int, per_tile: int, units: int) -> np.ndarray:
    """Unit boundaries over ``[0, total)``: ``u * total // units``, then each boundary that
    would leave fewer than MIN_ITERS_PER_SPLIT iterations on either side inside its tile is
    moved to the nearest allowed position (ties: down).

    Allowed offsets inside a tile are the edges (0, P) and, when units hold at least
    2 * MIN_ITERS_PER_SPLIT iterations, also ``[MIN, P - MIN]`` (so a boundary moves by at
    most MIN / 2). Either way every split of a multi-split tile keeps >= MIN iterations:
    with units >= 2 MIN, two boundaries of one tile stay >= MIN apart after moving; with
    units in [MIN, 2 MIN) boundaries only move onto edges.
    """
    mn = MIN_ITERS_PER_SPLIT
    u = np.arange(units + 1, dtype=np.int64)
    b = u * total // units
    r = b % per_tile
    bad = (r != 0) & ((r < mn) | (per_tile - r < mn))
    if not bad.any():
        return b
    cand = [np.zeros_like(r), np.full_like(r, per_tile)]
    if total // units >= 2 * mn and per_tile >= 2 * mn:
        cand += [np.full_like(r, mn), np.full_like(r, per_tile - mn)]
    cand = np.stack(cand, axis=1)
    dist = np.abs(cand - r[:, None]) * (2 * per_tile + 1) + cand  # nearest, ties -> lower
    best = cand[np.arange(len(r)), np.argmin(dist, axis=1)]
    return np.where(bad, b - r + best, b)


def stream_k_walk(bounds: np.ndarray, per_tile: int, start=None, end=None):
    """Splits of units ``[bounds[u], bounds[u+1])`` (or ``[start[u], end[u])``): (unit,
    tile, kb, ke), each unit walking its tiles backwards so that the split it only publishes
    (the head of its last tile) comes first and the split that waits (the tail of its first
    tile) comes last."""
    if start is None:
        start, end = bounds[:-1], bounds[1:]
    nonempty = end > start
    t0 = start // per_tile
    t1 = np.where(nonempty, (end - 1) // per_tile, t0)
    n = np.where(nonempty, t1 - t0 + 1, 0)
    unit = np.repeat(np.arange(len(start), dtype=np.int64), n)
    j = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    tile = np.repeat(t1, n) - j
    kb = np.maximum(np.repeat(start, n), tile * per_tile) - tile * per_tile
    ke = np.minimum(np.repeat(end, n), (tile + 1) * per_tile) - tile * per_tile
    return unit, tile, kb, ke


def stream_k_walk_compact(start: np.ndarray, end: np.ndarray, per_tile: int):
    """:func:`stream_k_walk` for units ``[start, end)``, with each unit's whole tiles as one
    range: the partial head of its last tile (listed, first), its whole tiles walked
    backwards (a range), the partial tail of its first tile (listed, last). Returns the
    listed splits (unit, tile, kb, ke, seq) and the ranges (unit, first tile, count) walked
    with stride -1; units are indices into ``start``."""
    unit = np.arange(len(start), dtype=np.int64)
    live = end > start
    start, end, unit = start[live], end[live], unit[live]
    t0, t1 = start // per_tile, (end - 1) // per_tile
    kb0, ke1 = start - t0 * per_tile, end - t1 * per_tile   # k-range ends inside t0, t1
    one = t0 == t1
    head = ke1 < per_tile                                  # t1 is cut at its end
    tail = (kb0 > 0) & ~one                                # t0 is cut at its start
    lo = np.where(kb0 > 0, t0 + 1, t0)
    hi = np.where(head, t1 - 1, t1)
    whole = np.where(one & (head | (kb0 > 0)), 0, np.maximum(hi - lo + 1, 0))
    single = one & (head | (kb0 > 0))                      # a unit inside one tile
    listed_unit = np.concatenate([unit[head | single], unit[tail]])
    listed_tile = np.concatenate([t1[head | single], t0[tail]])
    listed_kb = np.concatenate([np.where(single, kb0, 0)[head | single], kb0[tail]])
    listed_ke = np.concatenate([ke1[head | single], np.full(int(tail.sum()), per_tile)])
    listed_seq = np.concatenate([np.zeros(int((head | single).sum()), np.int64),
                                 np.full(int(tail.sum()), 2, np.int64)])
    r = whole > 0
    return ((listed_unit, listed_tile, listed_kb, listed_ke, listed_seq),
            (unit[r], hi[r], whole[r]))


def auto_groups(tiles: int, per_tile: int, units: int) -> int:
    """Largest G <= MAX_STREAM_K_GROUPS dividing both units and tiles that keeps
    >= MIN_ITERS_PER_SPLIT iterations per unit; 1 if none."""
    for g in range(min(MAX_STREAM_K_GROUPS, units, tiles), 1, -1):
        if units % g == 0 and tiles % g == 0 and \
                (tiles // g) * per_tile // (units // g) >= MIN_ITERS_PER_SPLIT:
            return g
    return 1


def _stream_k_part(n_tiles: int, per_tile: int, units: int, groups: int, compact: bool):
    """Stream-K over tiles ``0 .. n_tiles`` (iteration-space order) with ``units`` CTAs in
    ``groups`` groups: group j owns tiles j, j + G, ... (output_tile_id = tile_in_group * G
    + j) and a contiguous block of the units. Returns the listed splits (cta, tile, kb, ke,
    seq) and, when ``compact``, the whole tiles as :class:`Ranges` (else listed too)."""
    starts, ends, group_of, cta_of = [], [], [], []
    base = 0
    for j in range(groups):
        count = len(range(j, n_tiles, groups))
        uj = units // groups + (1 if j < units % groups else 0)
        if count and uj:
            total = count * per_tile
            b = stream_k_boundaries(total, per_tile, stream_k_units(total, per_tile, uj))
            starts.append(b[:-1])
            ends.append(b[1:])
            group_of.append(np.full(len(b) - 1, j, np.int64))
            cta_of.append(base + np.arange(len(b) - 1, dtype=np.int64))
        base += uj
    if not starts:
        return [_NONE] * 5, None
    start, end = np.concatenate(starts), np.concatenate(ends)
    group, cta = np.concatenate(group_of), np.concatenate(cta_of)
    if compact:
        (u, t, kb, ke, seq), (ru, rfirst, rcount) = stream_k_walk_compact(start, end, per_tile)
        ranges = Ranges(cta[ru], group[ru] + groups * rfirst, rcount,
                        np.full(len(ru), -groups, np.int64), np.ones(len(ru), np.int64))
    else:
        u, t, kb, ke = stream_k_walk(np.append(start, end[-1]), per_tile, start, end)
        seq, ranges = np.zeros(len(u), np.int64), None
    return [cta[u], group[u] + groups * t, kb, ke, seq], ranges


def stream_k(ts: TileSpace, bk: int, grid: int, groups: int | None = None) -> RawSplits:
    """``grid`` units share the flattened (tile, k-iteration) space equally."""
    p = ts.uniform_iters(bk)
    total = ts.n * p
    used = stream_k_units(total, p, grid)
    note = ""
    if used < grid:
        note = f"grid {grid} -> {used} to keep >= {MIN_ITERS_PER_SPLIT} k-iterations per unit"
        grid = used
    g = auto_groups(ts.n, p, grid) if groups is None else max(1, min(groups, grid, ts.n,
                                                                     MAX_STREAM_K_GROUPS))
    (cta, tile, kb, ke, seq), ranges = _stream_k_part(ts.n, p, grid, g, ts.uniform)
    return RawSplits(ts, cta, tile, kb, ke, grid, note, groups=g, seq=seq, ranges=ranges)


# ---------------------------------------------------------------------------------------
# HYBRID: (w - 1) DP waves + two-tile Stream-K
# ---------------------------------------------------------------------------------------
def hybrid(ts: TileSpace, bk: int, grid: int, groups: int | None = None) -> RawSplits | str:
    """Returns the splits, or the reason the hybrid rule turns into plain DP."""
    p = ts.uniform_iters(bk)
    w, tail = divmod(ts.n, grid)
    if w == 0:  # no full wave: each unit would hold under one tile, which is stream_k
        return f"hybrid: {ts.n} tiles make no full wave of {grid} (stream_k's case)"
    if tail == 0:
        return "hybrid: no partial wave"
    if tail * 2 >= grid:
        return f"hybrid: tail of {tail} tiles >= half of {grid}"
    dp_waves = max(w - 1, 0)
    sk_n = ts.n - dp_waves * grid
    used = stream_k_units(sk_n * p, p, grid)
    g = auto_groups(sk_n, p, used) if groups is None else max(1, min(groups, used, sk_n,
                                                                     MAX_STREAM_K_GROUPS))
    (cta, tile, kb, ke, seq), ranges = _stream_k_part(sk_n, p, used, g, ts.uniform)
    if ts.uniform:  # the DP waves after the Stream-K rows of every CTA
        ranges = Ranges.concat([ranges, Ranges.dealt(sk_n, ts.n - sk_n, grid, 3)])
    else:
        pos = np.arange(sk_n, ts.n, dtype=np.int64)
        cta = np.concatenate([cta, (pos - sk_n) % grid])
        tile = np.concatenate([tile, pos])
        kb = np.concatenate([kb, np.zeros_like(pos)])
        ke = np.concatenate([ke, np.full_like(pos, p)])
        seq = np.concatenate([seq, np.full_like(pos, 3)])
    note = f"{dp_waves} DP wave(s) + stream-k over {sk_n} tiles"
    if used < grid:
        note += f" on {used} units"
    return RawSplits(ts, cta, tile, kb, ke, grid, note, groups=g, seq=seq, ranges=ranges)


# ---------------------------------------------------------------------------------------
# SPLIT_K and ALIGNED
# ---------------------------------------------------------------------------------------
def max_splits(per_tile: int) -> int:
    return max(1, per_tile // MIN_ITERS_PER_SPLIT)


def split_k(ts: TileSpace, bk: int, splits: int, grid: int) -> RawSplits:
    """Every tile cut into S k-ranges ``[s P / S, (s + 1) P / S)``; the ``tiles * S`` units
    are dealt round-robin to ``grid`` CTAs; inside a CTA first splits (publish only) run
    before the others (which wait, in deterministic mode), each group in unit order."""
    p = ts.uniform_iters(bk)
    s_count = max(1, min(splits, max_splits(p)))
    units = ts.n * s_count
    grid = min(grid, units)
    u = np.arange(units, dtype=np.int64)
    tile, s = divmod(u, s_count)
    kb = s * p // s_count
    ke = (s + 1) * p // s_count
    cta = u % grid
    o = np.lexsort((u, s != 0, cta))
    note = f"S={splits} -> {s_count} for >= {MIN_ITERS_PER_SPLIT} k-iterations" \
        if s_count != splits else ""
    return RawSplits(ts, cta[o], tile[o], kb[o], ke[o], grid, note, splits_per_tile=s_count)


def aligned_splits(per_tile: int) -> list[int]:
    """S values allowed for the aligned split: S divides P, P / S >= MIN_ITERS_PER_SPLIT."""
    return [s for s in range(1, per_tile + 1)
            if per_tile % s == 0 and (s == 1 or per_tile // s >= MIN_ITERS_PER_SPLIT)]


def aligned(ts: TileSpace, bk: int, splits: int, allowed: list[int] | None = None) -> RawSplits:
    """``tiles * S`` CTAs, CTA ``bid`` owns tile ``bid / S``, k-range of ``s = bid % S``; S
    the largest of ``allowed`` (default :func:`aligned_splits`) up to ``splits``."""
    p = ts.uniform_iters(bk)
    allowed = aligned_splits(p) if allowed is None else allowed
    s_count = max(s for s in allowed if s <= max(1, splits))
    units = ts.n * s_count
    u = np.arange(units, dtype=np.int64)
    tile, s = divmod(u, s_count)
    note = f"S={splits} -> {s_count} (S | P={p}, >= {MIN_ITERS_PER_SPLIT} per split)" \
        if s_count != splits else ""
    return RawSplits(ts, u, tile, s * (p // s_count), (s + 1) * (p // s_count), units, note,
                     splits_per_tile=s_count)


# ---------------------------------------------------------------------------------------
# HYTIS
# ---------------------------------------------------------------------------------------
def hytis(ts: TileSpace, bk: int, grid: int, small: tuple[int, int]) -> RawSplits | str:
    """Full waves keep the big tile; the tiles of the partial last wave are each re-tiled
    with the small tile and dealt round-robin after them. No K split."""
    w, tail = divmod(ts.n, grid)
    if tail == 0:
        return "hytis: no partial wave"
    sbm, sbn = small
    full = w * grid
    t = ts.coords(np.arange(full, ts.n))
    cm, cn = cdiv(t["bm"], sbm), cdiv(t["bn"], sbn)
    cnt = cm * cn
    parent = np.repeat(np.arange(tail, dtype=np.int64), cnt)
    j = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    jm, jn = divmod(j, cn[parent])
    m0 = t["m0"][parent] + jm * sbm
    n0 = t["n0"][parent] + jn * sbn
    small_ts = TileSpace(len(parent), ts.log_swizzle, ts.raster, listed=dict(
        batch=t["batch"][parent], m0=m0, n0=n0,
        bm=np.minimum(sbm, t["m0"][parent] + t["bm"][parent] - m0),
        bn=np.minimum(sbn, t["n0"][parent] + t["bn"][parent] - n0),
        kk=t["kk"][parent], small=np.ones(len(parent), dtype=bool)))
    note = (f"{full} big tiles in {w} full wave(s), {tail} tail tiles -> {small_ts.n} "
            f"{sbm}x{sbn} tiles")
    if w == 0:
        grid = min(grid, small_ts.n)
    pos = np.arange(small_ts.n, dtype=np.int64)
    kb, ke = np.zeros_like(pos), cdiv(small_ts.listed["kk"], bk)
    if ts.uniform:  # the full waves as range rows, the small tiles listed after them
        return RawSplits(ts, *_stable_by_cta(pos % grid, pos, kb, ke), grid, note,
                         seq=np.ones(len(pos), np.int64), rows_space=small_ts,
                         ranges=Ranges.dealt(0, full, grid, 0) if full else None)
    new = TileSpace.concat([ts.listing(np.arange(full)), small_ts])
    pos = np.arange(new.n, dtype=np.int64)
    cta = np.where(pos < full, pos % grid, (pos - full) % grid)
    return RawSplits(new, *_stable_by_cta(cta, pos, np.zeros_like(pos),
                                          cdiv(new.listed["kk"], bk)), grid, note)


def hytis_small_tiles(bm: int, bn: int) -> list[tuple[int, int]]:
    out = []
    for fm, fn in HYTIS_SMALL_TILES:
        if bm % fm == 0 and bn % fn == 0 and bm // fm >= HYTIS_MIN_TILE \
                and bn // fn >= HYTIS_MIN_TILE:
            out.append((bm // fm, bn // fn))
    return out


# ---------------------------------------------------------------------------------------
# The split table
# ---------------------------------------------------------------------------------------
_FLAGS_MAX = T.FLAG_FIRST | T.FLAG_FINAL | T.FLAG_SMALL | T.FLAG_SHARED_SUM | T.FLAG_RANGE
"""The largest FLAGS value a row holds."""
PRICED_COLUMNS = (T.K0, T.K1, T.FLAGS, T.TILE, T.PEERS, T.RANGE_COUNT)
"""The table columns the cost model reads (:func:`.heuristics.predict`; RANGE_COUNT of
range rows only): what :func:`cost_rows` fills."""


def build_table(raw: RawSplits, bk: int, reduction: str,
                shared_sum: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(table, cta_offsets) of :mod:`.table` from the listed splits and the range rows.

    Rows are grouped by CTA and ordered inside it by ``seq``, then listing order.
    ``shared_sum`` (``arrival`` only): mark the splits of multi-split tiles FLAG_SHARED_SUM,
    so that their peers share the final sum (the caller guarantees co-residency)."""
    rows, cta, seq = _rows(raw, bk, reduction, shared_sum, priced_only=False)
    _check_index(rows)
    return _ordered(rows, cta, seq, raw.grid, np.int32)


def data_parallel_table(ts: TileSpace, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`build_table` of :func:`data_parallel` on a uniform space whose values lie
    within the kernels' index (:func:`space_within_index`), for any BK: its range rows, one
    a CTA, written directly."""
    rows = min(grid, ts.n)
    cta = np.arange(rows, dtype=np.int64)
    table = np.zeros((rows, T.NUM_COLUMNS), np.int32)
    table[:, T.RANGE_FIRST] = cta
    table[:, T.RANGE_COUNT] = cdiv(ts.n - cta, grid)
    table[:, T.RANGE_STRIDE] = grid
    table[:, T.K1] = ts.shape[3]
    table[:, T.FLAGS] = T.FLAG_FIRST | T.FLAG_FINAL | T.FLAG_RANGE
    table[:, T.TILE], table[:, T.SLOT], table[:, T.PEERS] = -1, -1, 1
    offsets = np.minimum(np.arange(grid + 1, dtype=np.int32), rows)
    return table, offsets


def cost_rows(raw: RawSplits, bk: int, reduction: str,
              shared_sum: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cta_offsets): :func:`build_table`'s rows in its order, with the values of
    :data:`PRICED_COLUMNS` and zeros in the other columns (int64): what a candidate is
    priced on before its table is built. No tile coordinates, slots or split ranks are
    worked out and no values checked against the kernels' index (:func:`within_index`
    says where none can exceed it)."""
    rows, cta, seq = _rows(raw, bk, reduction, shared_sum, priced_only=True)
    return _ordered(rows, cta, seq, raw.grid, np.int64)


def within_index(raw: RawSplits) -> bool:
    """Whether no value of ``raw``'s table can exceed :data:`.table.INDEX_MAX` (so that
    :func:`build_table` cannot raise TableOverflow), by bounds that need no table: its
    coordinates lie within the tile spaces' extents, its tile positions, counts and strides
    within their tiles and the grid, its fixup indices and ranks within its listed splits."""
    return max(raw.groups, len(raw.tile)) <= T.INDEX_MAX and all(
        space_within_index(space, raw.grid) for space in (raw.tiles, raw.rows_space)
        if space is not None)


def space_within_index(space: TileSpace, grid: int) -> bool:
    """Whether no value of a table of ``space``'s tiles on ``grid`` CTAs, each tile whole
    or split into listed splits, can exceed :data:`.table.INDEX_MAX` by its coordinates,
    its tile positions and counts or its grid (:func:`within_index`)."""
    return max(grid, space.n, _extent(space), _FLAGS_MAX) <= T.INDEX_MAX


def _extent(space: TileSpace) -> int:
    """The largest coordinate, extent or batch index a tile of ``space`` has."""
    if space.uniform:
        return max(space.shape)
    return max((int(v.max()) for v in space.listed.values() if len(v)), default=0)


def _rows(raw: RawSplits, bk: int, reduction: str, shared_sum: bool, priced_only: bool):
    """(rows, cta, seq) of ``raw``'s table before ordering: the listed splits' rows, then the
    range rows; ``priced_only``: only :data:`PRICED_COLUMNS` filled."""
    if reduction not in (ATOMIC, CLUSTER, DETERMINISTIC, ARRIVAL):
        raise ValueError(f"unknown reduction {reduction!r}")
    tile = np.asarray(raw.tile, dtype=np.int64)
    if len(tile):
        listed = _listed_rows(raw, tile, bk, reduction, shared_sum, priced_only)
    else:  # range rows only (a data-parallel table of a uniform space)
        listed = np.zeros((0, T.NUM_COLUMNS), np.int64)
    cta = np.asarray(raw.cta, dtype=np.int64)
    seq = raw.seq if raw.seq is not None else np.zeros(len(cta), np.int64)
    r = raw.ranges
    if r is not None and len(r.cta):
        if not raw.tiles.uniform:
            raise ValueError("range rows need a uniform tile space")
        n = len(r.cta)
        rows = np.zeros((n, T.NUM_COLUMNS), np.int64)
        rows[:, T.RANGE_COUNT] = r.count
        if not priced_only:
            rows[:, T.RANGE_FIRST], rows[:, T.RANGE_STRIDE] = r.first, r.stride
            rows[:, T.SLOT] = -1
        rows[:, T.K1] = raw.tiles.shape[3]
        rows[:, T.FLAGS] = T.FLAG_FIRST | T.FLAG_FINAL | T.FLAG_RANGE
        rows[:, T.TILE], rows[:, T.PEERS] = -1, 1
        listed = np.concatenate([listed, rows])
        cta = np.concatenate([cta, r.cta])
        seq = np.concatenate([seq, r.seq])
    return listed, cta, seq


def _check_index(listed: np.ndarray) -> None:
    """TableOverflow where a value of the rows, or a range row's tile walk, lies beyond
    :data:`.table.INDEX_MAX`."""
    if len(listed) and (listed.max() > T.INDEX_MAX or listed.min() < -T.INDEX_MAX):
        raise T.TableOverflow(f"the split table holds a value beyond {T.INDEX_MAX} (a tile "
                              f"index or coordinate of {int(np.abs(listed).max())}): more "
                              f"than the kernels' 32-bit tables address")
    walked = listed[(listed[:, T.FLAGS] & T.FLAG_RANGE) != 0]
    last = walked[:, T.RANGE_FIRST].astype(np.int64) + \
        (walked[:, T.RANGE_COUNT].astype(np.int64) - 1) * walked[:, T.RANGE_STRIDE]
    if len(last) and last.max() > T.INDEX_MAX:
        raise T.TableOverflow(f"a range row walks to tile {int(last.max())}, beyond "
                              f"{T.INDEX_MAX}: more than the kernels' 32-bit tile walk "
                              f"addresses")


def _ordered(rows: np.ndarray, cta: np.ndarray, seq: np.ndarray, grid: int, dtype):
    """(table, cta_offsets) in ``dtype``: ``rows`` grouped by CTA, ordered inside it by
    ``seq``, then listing order."""
    order = np.lexsort((np.arange(len(cta)), seq, cta))
    table = rows[order].astype(dtype, copy=False)
    offsets = np.zeros(grid + 1, dtype=np.int64)
    np.cumsum(np.bincount(cta, minlength=grid), out=offsets[1:])
    return table, offsets.astype(dtype, copy=False)


def _listed_rows(raw: RawSplits, tile: np.ndarray, bk: int, reduction: str,
                 shared_sum: bool, priced_only: bool = False) -> np.ndarray:
    """The table rows of ``raw``'s listed splits (``tile``: their tiles, at least one), in
    listing order; ``priced_only``: only :data:`PRICED_COLUMNS` filled."""
    space = raw.rows_space if raw.rows_space is not None else raw.tiles
    kk, small = space.k_and_small(tile)
    k0 = raw.kb * bk
    k1 = np.minimum(raw.ke * bk, kk)
    uniq, inv, counts = np.unique(tile, return_inverse=True, return_counts=True)
    peers = counts[inv]
    multi = counts > 1
    fix_id = np.where(multi, np.cumsum(multi) - 1, -1)[inv]
    flags = (np.where(k0 == 0, T.FLAG_FIRST, 0) | np.where(k1 == kk, T.FLAG_FINAL, 0)
             | np.where(small, T.FLAG_SMALL, 0))
    if shared_sum and reduction == ARRIVAL:
        flags = flags | np.where(fix_id >= 0, T.FLAG_SHARED_SUM, 0)
    if priced_only:
        out = np.zeros((len(tile), T.NUM_COLUMNS), np.int64)
        out[:, T.K0], out[:, T.K1], out[:, T.FLAGS] = k0, k1, flags
        out[:, T.TILE], out[:, T.PEERS] = fix_id, peers
        return out
    c = space.coords(tile)
    order = np.lexsort((raw.kb, tile))
    st = tile[order]
    rank = np.empty(len(tile), dtype=np.int64)
    rank[order] = np.arange(len(tile)) - np.searchsorted(st, st, side="left")
    if reduction in (ATOMIC, CLUSTER):
        slot = np.full(len(tile), -1, dtype=np.int64)
    elif reduction == DETERMINISTIC:
        slot = fix_id
    else:  # ARRIVAL
        per = np.where(multi, counts, 0)
        base = np.cumsum(per) - per
        slot = np.where(fix_id >= 0, base[inv] + rank, -1)
    return np.stack([c["batch"], c["m0"], c["n0"], c["bm"], c["bn"], k0, k1, flags, fix_id,
                     slot, peers, rank], axis=1)
