"""The decompositions: one function per mode, all vectorised numpy (docs/design/stream_k.md).

Every mode works on a :class:`TileSpace` (the output tiles of all batch entries / groups in
rasterised order) and returns a :class:`RawSplits`: for each split its CTA, its tile and its
k-iteration range ``[kb, ke)``, in the order the CTA executes them. :func:`build_table` turns
that into the split table of :mod:`.table` (peers, split index, flags, locks, slots).
This module is the only place that does decomposition arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import table as T
from .heuristics import (HYTIS_MIN_TILE, HYTIS_SMALL_TILES, MAX_STREAM_K_GROUPS,
                         MIN_ITERS_PER_SPLIT)
from .swizzle import default_log_swizzle, default_raster, tile_order
from .types import ARRIVAL, ATOMIC, DETERMINISTIC, GemmProblem


def cdiv(a, b):
    return -(-a // b)


@dataclass(frozen=True)
class TileSpace:
    """Output tiles in execution (raster) order; int64 arrays of equal length."""

    batch: np.ndarray
    m0: np.ndarray
    n0: np.ndarray
    bm: np.ndarray      # clipped extents
    bn: np.ndarray
    kk: np.ndarray      # K (elements) of the tile's batch entry / group
    small: np.ndarray   # bool: HyTiS latency tile
    log_swizzle: int = 0
    raster: str = "N"

    @property
    def n(self) -> int:
        return len(self.batch)

    def iters(self, bk: int) -> np.ndarray:
        return cdiv(self.kk, bk)

    def take(self, idx) -> "TileSpace":
        return TileSpace(self.batch[idx], self.m0[idx], self.n0[idx], self.bm[idx],
                         self.bn[idx], self.kk[idx], self.small[idx], self.log_swizzle,
                         self.raster)

    @staticmethod
    def concat(parts: list["TileSpace"]) -> "TileSpace":
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return TileSpace(cat("batch"), cat("m0"), cat("n0"), cat("bm"), cat("bn"), cat("kk"),
                         cat("small"), parts[0].log_swizzle, parts[0].raster)


def tile_space(problem: GemmProblem, bm: int, bn: int, log_swizzle: int | None = None,
               raster: str | None = None) -> TileSpace:
    """All output tiles of ``problem``: batch-major, swizzled inside each batch entry."""

    def one(m, n, k, l_values):
        tm, tn = cdiv(m, bm), cdiv(n, bn)
        lsw = default_log_swizzle(tm, tn) if log_swizzle is None else log_swizzle
        ras = default_raster(tm, tn) if raster is None else raster
        mi, ni = tile_order(tm, tn, lsw, ras)
        m0, n0 = mi * bm, ni * bn
        per = len(mi)
        nl = len(l_values)
        rep = lambda a: np.tile(a, nl)  # noqa: E731
        ts = TileSpace(np.repeat(np.asarray(l_values, dtype=np.int64), per), rep(m0), rep(n0),
                       rep(np.minimum(bm, m - m0)), rep(np.minimum(bn, n - n0)),
                       np.full(per * nl, k, dtype=np.int64), np.zeros(per * nl, dtype=bool),
                       lsw, ras)
        return ts

    if problem.groups is None:
        return one(problem.m, problem.n, problem.k, range(problem.batch))
    return TileSpace.concat([one(m, n, k, [l]) for l, (m, n, k) in enumerate(problem.groups)])


@dataclass(frozen=True)
class RawSplits:
    """Splits before the table is derived: CTA, tile index and k-iteration range."""

    tiles: TileSpace
    cta: np.ndarray
    tile: np.ndarray
    kb: np.ndarray
    ke: np.ndarray
    grid: int
    note: str = ""
    splits_per_tile: int = 1
    groups: int = 1


def _stable_by_cta(cta, tile, kb, ke):
    o = np.argsort(cta, kind="stable")
    return cta[o], tile[o], kb[o], ke[o]


# ---------------------------------------------------------------------------------------
# DATA_PARALLEL
# ---------------------------------------------------------------------------------------
def data_parallel(ts: TileSpace, bk: int, grid: int) -> RawSplits:
    """One split per tile, tiles dealt to CTAs round-robin."""
    pos = np.arange(ts.n, dtype=np.int64)
    cta = pos % grid
    return RawSplits(ts, *_stable_by_cta(cta, pos, np.zeros_like(pos), ts.iters(bk)), grid)


# ---------------------------------------------------------------------------------------
# STREAM_K (and the Stream-K part of HYBRID)
# ---------------------------------------------------------------------------------------
def stream_k_units(total: int, per_tile: int, units: int) -> int:
    """Units actually used so every unit keeps >= MIN_ITERS_PER_SPLIT iterations (or, when
    tiles are shorter than that, at least one whole tile)."""
    tiles = total // per_tile
    return int(max(1, min(units, max(total // MIN_ITERS_PER_SPLIT, min(tiles, units)))))


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


def stream_k_walk(bounds: np.ndarray, per_tile: int):
    """Splits of units ``[bounds[u], bounds[u+1])``: (unit, tile, kb, ke), each unit walking
    its tiles backwards so that the split it only publishes (the head of its last tile)
    comes first and the split that waits (the tail of its first tile) comes last."""
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


def auto_groups(tiles: int, per_tile: int, units: int) -> int:
    """Largest G <= MAX_STREAM_K_GROUPS dividing both units and tiles that keeps
    >= MIN_ITERS_PER_SPLIT iterations per unit; 1 if none."""
    for g in range(min(MAX_STREAM_K_GROUPS, units, tiles), 1, -1):
        if units % g == 0 and tiles % g == 0 and \
                (tiles // g) * per_tile // (units // g) >= MIN_ITERS_PER_SPLIT:
            return g
    return 1


def _stream_k_part(sel: np.ndarray, per_tile: int, units: int, groups: int):
    """Stream-K over tile indices ``sel`` (iteration-space order) with ``units`` CTAs in
    ``groups`` groups: group j owns tiles sel[j::groups] (output_tile_id =
    tile_in_group * G + j) and a contiguous block of the units."""
    ctas, tiles, kbs, kes = [], [], [], []
    base = 0
    for j in range(groups):
        tj = sel[j::groups]
        uj = units // groups + (1 if j < units % groups else 0)
        if len(tj) == 0 or uj == 0:
            base += uj
            continue
        total = len(tj) * per_tile
        used = stream_k_units(total, per_tile, uj)
        unit, t, kb, ke = stream_k_walk(stream_k_boundaries(total, per_tile, used), per_tile)
        ctas.append(unit + base)
        tiles.append(tj[t])
        kbs.append(kb)
        kes.append(ke)
        base += uj
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)  # noqa: E731
    return cat(ctas), cat(tiles), cat(kbs), cat(kes)


def _uniform_iters(ts: TileSpace, bk: int) -> int:
    p = ts.iters(bk)
    if len(p) and p.min() != p.max():
        raise ValueError("stream-k needs the same k-iteration count for every tile")
    return int(p[0]) if len(p) else 0


def stream_k(ts: TileSpace, bk: int, grid: int, groups: int | None = None) -> RawSplits:
    """``grid`` units share the flattened (tile, k-iteration) space equally."""
    p = _uniform_iters(ts, bk)
    total = ts.n * p
    used = stream_k_units(total, p, grid)
    note = ""
    if used < grid:
        note = f"grid {grid} -> {used} to keep >= {MIN_ITERS_PER_SPLIT} k-iterations per unit"
        grid = used
    g = auto_groups(ts.n, p, grid) if groups is None else max(1, min(groups, grid, ts.n,
                                                                     MAX_STREAM_K_GROUPS))
    sel = np.arange(ts.n, dtype=np.int64)
    cta, tile, kb, ke = _stream_k_part(sel, p, grid, g)
    return RawSplits(ts, *_stable_by_cta(cta, tile, kb, ke), grid, note, groups=g)


# ---------------------------------------------------------------------------------------
# HYBRID: (w - 1) DP waves + two-tile Stream-K
# ---------------------------------------------------------------------------------------
def hybrid(ts: TileSpace, bk: int, grid: int, groups: int | None = None) -> RawSplits | str:
    """Returns the splits, or the reason the hybrid rule turns into plain DP."""
    p = _uniform_iters(ts, bk)
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
    sel = np.arange(sk_n, dtype=np.int64)
    cta, tile, kb, ke = _stream_k_part(sel, p, used, g)
    pos = np.arange(sk_n, ts.n, dtype=np.int64)
    dp_cta = (pos - sk_n) % grid
    cta = np.concatenate([cta, dp_cta])
    tile = np.concatenate([tile, pos])
    kb = np.concatenate([kb, np.zeros_like(pos)])
    ke = np.concatenate([ke, np.full_like(pos, p)])
    note = f"{dp_waves} DP wave(s) + stream-k over {sk_n} tiles"
    if used < grid:
        note += f" on {used} units"
    return RawSplits(ts, *_stable_by_cta(cta, tile, kb, ke), grid, note, groups=g)


# ---------------------------------------------------------------------------------------
# SPLIT_K and ALIGNED
# ---------------------------------------------------------------------------------------
def max_splits(per_tile: int) -> int:
    return max(1, per_tile // MIN_ITERS_PER_SPLIT)


def split_k(ts: TileSpace, bk: int, splits: int, grid: int) -> RawSplits:
    """Every tile cut into S k-ranges ``[s P / S, (s + 1) P / S)``; the ``tiles * S`` units
    are dealt round-robin to ``grid`` CTAs; inside a CTA first splits (publish only) run
    before the others (which wait, in deterministic mode), each group in unit order."""
    p = _uniform_iters(ts, bk)
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


def aligned(ts: TileSpace, bk: int, splits: int) -> RawSplits:
    """``tiles * S`` CTAs, CTA ``bid`` owns tile ``bid / S``, k-range of ``s = bid % S``."""
    p = _uniform_iters(ts, bk)
    allowed = aligned_splits(p)
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
    tail_ts = ts.take(np.arange(full, ts.n))
    cm, cn = cdiv(tail_ts.bm, sbm), cdiv(tail_ts.bn, sbn)
    cnt = cm * cn
    parent = np.repeat(np.arange(tail_ts.n, dtype=np.int64), cnt)
    j = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    jm, jn = divmod(j, cn[parent])
    m0 = tail_ts.m0[parent] + jm * sbm
    n0 = tail_ts.n0[parent] + jn * sbn
    small_ts = TileSpace(tail_ts.batch[parent], m0, n0,
                         np.minimum(sbm, tail_ts.m0[parent] + tail_ts.bm[parent] - m0),
                         np.minimum(sbn, tail_ts.n0[parent] + tail_ts.bn[parent] - n0),
                         tail_ts.kk[parent], np.ones(len(parent), dtype=bool),
                         ts.log_swizzle, ts.raster)
    new = TileSpace.concat([ts.take(np.arange(full)), small_ts])
    if w == 0:
        grid = min(grid, small_ts.n)
    pos = np.arange(new.n, dtype=np.int64)
    cta = np.where(pos < full, pos % grid, (pos - full) % grid)
    return RawSplits(new, *_stable_by_cta(cta, pos, np.zeros_like(pos), new.iters(bk)), grid,
                     f"{full} big tiles in {w} full wave(s), {tail} tail tiles -> "
                     f"{small_ts.n} {sbm}x{sbn} tiles")


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
def build_table(raw: RawSplits, bk: int, reduction: str,
                shared_sum: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(table, cta_offsets) of :mod:`.table` from splits already ordered by CTA.

    ``shared_sum`` (``arrival`` only): mark the splits of multi-split tiles FLAG_SHARED_SUM,
    so that their peers share the final sum (the caller guarantees co-residency)."""
    ts = raw.tiles
    tile = raw.tile
    kk = ts.kk[tile]
    k0 = raw.kb * bk
    k1 = np.minimum(raw.ke * bk, kk)
    counts = np.bincount(tile, minlength=ts.n)
    peers = counts[tile]
    order = np.lexsort((raw.kb, tile))
    st = tile[order]
    rank = np.empty(len(tile), dtype=np.int64)
    rank[order] = np.arange(len(tile)) - np.searchsorted(st, st, side="left")
    multi = counts > 1
    fix_id = np.where(multi, np.cumsum(multi) - 1, -1)[tile]
    if reduction == ATOMIC:
        slot = np.full(len(tile), -1, dtype=np.int64)
    elif reduction == DETERMINISTIC:
        slot = fix_id
    elif reduction == ARRIVAL:
        per = np.where(multi, counts, 0)
        base = np.cumsum(per) - per
        slot = np.where(fix_id >= 0, base[tile] + rank, -1)
    else:
        raise ValueError(f"unknown reduction {reduction!r}")
    flags = (np.where(k0 == 0, T.FLAG_FIRST, 0) | np.where(k1 == kk, T.FLAG_FINAL, 0)
             | np.where(ts.small[tile], T.FLAG_SMALL, 0))
    if shared_sum and reduction == ARRIVAL:
        flags = flags | np.where(fix_id >= 0, T.FLAG_SHARED_SUM, 0)
    table = np.empty((len(tile), T.NUM_COLUMNS), dtype=np.int32)
    table[:, T.BATCH] = ts.batch[tile]
    table[:, T.M0] = ts.m0[tile]
    table[:, T.N0] = ts.n0[tile]
    table[:, T.BM] = ts.bm[tile]
    table[:, T.BN] = ts.bn[tile]
    table[:, T.K0] = k0
    table[:, T.K1] = k1
    table[:, T.FLAGS] = flags
    table[:, T.TILE] = fix_id
    table[:, T.SLOT] = slot
    table[:, T.PEERS] = peers
    table[:, T.SPLIT] = rank
    offsets = np.zeros(raw.grid + 1, dtype=np.int64)
    np.cumsum(np.bincount(raw.cta, minlength=raw.grid), out=offsets[1:])
    return table, offsets.astype(np.int32)
