"""validate_schedule: the split table's invariants, checked vectorised (no dense output).

Usable by any executor's tests: if this passes, every (output element, k) pair is covered
by exactly one split, tiles partition the output, flags / peers / split indices / locks /
slots are consistent, and a schedule that waits fits in the resident CTAs.
"""
from __future__ import annotations

import numpy as np

from . import table as T
from .heuristics import MIN_ITERS_PER_SPLIT
from .types import ALIGNED, ARRIVAL, ATOMIC, CLUSTER, CLUSTER_SPLITS, DETERMINISTIC, Schedule


class InvalidSchedule(ValueError):
    pass


def _fail(msg, rows=None):
    if rows is not None:
        idx = np.nonzero(rows)[0] if rows.dtype == bool else np.asarray(rows)
        msg += f" (rows {idx[:6].tolist()}{'...' if len(idx) > 6 else ''})"
    raise InvalidSchedule(msg)


def validate_schedule(s: Schedule, *, min_iters: int = MIN_ITERS_PER_SPLIT) -> None:
    """Raise InvalidSchedule unless the table (range rows written out) keeps every
    invariant of :mod:`.table`."""
    _check_ranges(s)
    s = s.expanded()
    t = s.table.astype(np.int64)
    n = len(t)
    p = s.problem
    bk = s.tile[2]
    offs = s.cta_offsets.astype(np.int64)
    if s.table.dtype != np.int32 or s.table.shape[1:] != (T.NUM_COLUMNS,):
        _fail("table must be int32 with NUM_COLUMNS columns")
    if offs[0] != 0 or offs[-1] != n or np.any(np.diff(offs) < 0):
        _fail("cta_offsets is not a CSR index over the table")
    shapes = np.array(p.shapes(), dtype=np.int64).reshape(-1, 3)
    l = t[:, T.BATCH]
    if n and (l.min() < 0 or l.max() >= p.batch):
        _fail("BATCH out of range")
    M, N, K = shapes[l, 0], shapes[l, 1], shapes[l, 2]
    m0, n0, bm, bn = t[:, T.M0], t[:, T.N0], t[:, T.BM], t[:, T.BN]
    k0, k1 = t[:, T.K0], t[:, T.K1]
    bad = (m0 < 0) | (n0 < 0) | (bm < 1) | (bn < 1) | (m0 + bm > M) | (n0 + bn > N)
    if bad.any():
        _fail("tile outside the matrix", bad)
    bad = (k0 < 0) | (k1 <= k0) | (k1 > K) | (k0 % bk != 0)
    if bad.any():
        _fail("bad k-range", bad)
    # -- per tile: k-ranges partition [0, K) --------------------------------------------
    order = np.lexsort((k0, n0, m0, l))
    key = np.stack([l, m0, n0], axis=1)[order]
    new_tile = np.ones(n, dtype=bool)
    new_tile[1:] = np.any(key[1:] != key[:-1], axis=1)
    tid = np.cumsum(new_tile) - 1
    ntiles = int(tid[-1]) + 1 if n else 0
    ko0, ko1 = k0[order], k1[order]
    if np.any(bm[order][1:][~new_tile[1:]] != bm[order][:-1][~new_tile[1:]]) or \
            np.any(bn[order][1:][~new_tile[1:]] != bn[order][:-1][~new_tile[1:]]):
        _fail("splits of one tile disagree on its extent")
    cont = ~new_tile[1:]
    if np.any(ko1[:-1][cont] != ko0[1:][cont]):
        _fail("k-ranges of a tile overlap or leave a gap", order[1:][cont & (ko1[:-1] != ko0[1:])])
    if np.any(ko0[new_tile] != 0):
        _fail("a tile's first split does not start at k=0")
    last = np.ones(n, dtype=bool)
    last[:-1] = new_tile[1:]
    if np.any(ko1[last] != K[order][last]):
        _fail("a tile's last split does not end at K")
    counts = np.bincount(tid, minlength=ntiles)
    rank = np.arange(n) - np.flatnonzero(new_tile)[tid]
    peers_o = t[order, T.PEERS]
    if np.any(peers_o != counts[tid]):
        _fail("PEERS differs from the number of splits of the tile", order[peers_o != counts[tid]])
    if np.any(t[order, T.SPLIT] != rank):
        _fail("SPLIT is not the k-order index of the split")
    flags = t[:, T.FLAGS]
    want = np.where(k0 == 0, T.FLAG_FIRST, 0) | np.where(k1 == K, T.FLAG_FINAL, 0)
    if np.any((flags & (T.FLAG_FIRST | T.FLAG_FINAL)) != want):
        _fail("FIRST/FINAL flags inconsistent with K0/K1", (flags & 3) != want)
    if np.bincount(tid[(flags[order] & T.FLAG_FINAL) != 0], minlength=ntiles).max(initial=1) != 1:
        _fail("a tile has more than one final split")
    # -- tiles partition the output (on a grid of gcd cells, not dense elements) ------
    first_rows = order[new_tile]
    for lb in range(p.batch):
        sel = first_rows[l[first_rows] == lb]
        Mb, Nb, _ = shapes[lb]
        if len(sel) == 0:
            _fail(f"batch entry {lb} has no tiles")
        gm = int(np.gcd.reduce(np.concatenate([m0[sel], bm[sel][m0[sel] + bm[sel] < Mb], [Mb]])))
        gn = int(np.gcd.reduce(np.concatenate([n0[sel], bn[sel][n0[sel] + bn[sel] < Nb], [Nb]])))
        gm, gn = max(gm, 1), max(gn, 1)
        cm = -(-(bm[sel]) // gm)
        cn = -(-(bn[sel]) // gn)
        cells_m, cells_n = -(-Mb // gm), -(-Nb // gn)
        cnt = cm * cn
        if int(cnt.sum()) != cells_m * cells_n:
            _fail(f"batch entry {lb}: tiles cover {int(cnt.sum())} cells of {cells_m * cells_n}")
        owner = np.repeat(np.arange(len(sel)), cnt)
        j = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        jm, jn = np.divmod(j, cn[owner])
        cell = (m0[sel][owner] // gm + jm) * cells_n + (n0[sel][owner] // gn + jn)
        hits = np.bincount(cell, minlength=cells_m * cells_n)
        if hits.max() != 1 or hits.min() != 1:
            _fail(f"batch entry {lb}: tiles overlap or leave holes")
    # -- fixup index, slots ------------------------------------------------------------
    tile_col, slot = t[:, T.TILE], t[:, T.SLOT]
    multi = t[:, T.PEERS] > 1
    if np.any((tile_col >= 0) != multi):
        _fail("TILE must be >= 0 exactly for tiles with several splits", (tile_col >= 0) != multi)
    if multi.any():
        fo = tile_col[order]
        mo = multi[order]
        if np.any(fo[1:][cont & mo[1:]] != fo[:-1][cont & mo[:-1]]):
            _fail("splits of one tile have different TILE indices")
        ids = fo[new_tile & mo]
        if len(np.unique(ids)) != len(ids) or ids.max() != len(ids) - 1:
            _fail("TILE indices are not 0..fixup_tiles-1, one per tile")
    if s.reduction == ATOMIC:
        if np.any(slot != -1):
            _fail("atomic fixup uses no workspace slot")
    elif s.reduction == DETERMINISTIC:
        if np.any(slot != np.where(multi, tile_col, -1)):
            _fail("deterministic: SLOT must equal TILE (one slot per fixup tile)")
    elif s.reduction == ARRIVAL:
        sm = slot[multi]
        if len(np.unique(sm)) != len(sm) or np.any(slot[~multi] != -1):
            _fail("arrival: one distinct slot per split of a fixup tile")
        base = (slot - t[:, T.SPLIT])[order]
        if np.any(base[1:][cont & multi[order][1:]] != base[:-1][cont & multi[order][:-1]]):
            _fail("arrival: the slots of a tile must be contiguous in SPLIT order")
    elif s.reduction == CLUSTER:
        _check_clusters(s, t, multi)
    else:
        _fail(f"unknown reduction {s.reduction!r}")
    # -- split sizes -------------------------------------------------------------------
    iters = -(-(k1 - k0) // bk)
    if np.any(iters[multi] < min_iters):
        _fail(f"a split of a multi-split tile has < {min_iters} k-iterations", multi & (iters < min_iters))
    # -- order inside CTAs and co-residency --------------------------------------------
    cta = s.cta_of_rows().astype(np.int64)
    first = (flags & T.FLAG_FIRST) != 0
    final = (flags & T.FLAG_FINAL) != 0
    waiter = multi & ~first
    publisher = multi & first & ~final
    if s.reduction == DETERMINISTIC and waiter.any() and publisher.any():
        # index of the first waiter in each CTA must come after its last publisher
        idx = np.arange(n)
        first_wait = np.full(s.grid, n)
        np.minimum.at(first_wait, cta[waiter], idx[waiter])
        last_pub = np.full(s.grid, -1)
        np.maximum.at(last_pub, cta[publisher], idx[publisher])
        if np.any(last_pub > first_wait):
            _fail("a CTA runs a split that waits before one that only publishes")
    if s.reduction == DETERMINISTIC and waiter.any() and s.grid > s.device.resident_ctas:
        _fail(f"splits wait but grid {s.grid} > resident CTAs {s.device.resident_ctas}")
    _check_shared_sum(s, t, multi, cta)


def _check_clusters(s: Schedule, t, multi) -> None:
    """The cluster protocol: the aligned split, one row a CTA, no workspace; a tile's PEERS
    splits (PEERS in CLUSTER_SPLITS) on the CTAs of one cluster, CTA c computing split
    c % PEERS (its rank in the cluster)."""
    if s.mode != ALIGNED:
        _fail(f"the cluster reduction is for the aligned split, not {s.mode}")
    if np.any(t[:, T.SLOT] != -1):
        _fail("cluster: no workspace slot")
    if np.any(np.diff(s.cta_offsets) != 1):
        _fail("cluster: one split a CTA")
    if not multi.any():
        return
    peers = t[:, T.PEERS]
    size = int(peers[0])
    if size not in CLUSTER_SPLITS or np.any(peers != size):
        _fail(f"cluster: every tile has the same PEERS in {CLUSTER_SPLITS}", peers != size)
    if size != s.splits_per_tile:
        _fail(f"cluster: PEERS {size} but {s.splits_per_tile} splits a tile (the launch's "
              "cluster size)")
    if size > s.device.resident_ctas:
        _fail(f"cluster: clusters of {size} CTAs, but only {s.device.resident_ctas} are "
              "resident at once")
    cta = np.arange(len(t))  # one row a CTA, in CTA order
    if np.any(t[:, T.SPLIT] != cta % size):
        _fail("cluster: CTA c computes split c % PEERS")
    tile = t[:, T.TILE].astype(np.int64)
    if np.any(tile != cta // size):
        _fail("cluster: a tile's splits are the CTAs of one cluster")


def _check_ranges(s: Schedule) -> None:
    """Range rows: whole tiles of a uniform space, no fixup, positions inside the walk."""
    t = s.table.astype(np.int64)
    r = (t[:, T.FLAGS] & T.FLAG_RANGE) != 0
    if not r.any():
        return
    if s.problem.groups is not None:
        _fail("range rows in a grouped GEMM's table")
    want = T.FLAG_FIRST | T.FLAG_FINAL | T.FLAG_RANGE
    bad = r & ((t[:, T.FLAGS] != want) | (t[:, T.TILE] != -1) | (t[:, T.SLOT] != -1)
               | (t[:, T.PEERS] != 1) | (t[:, T.K0] != 0) | (t[:, T.K1] != s.problem.k)
               | (t[:, T.RANGE_COUNT] < 1))
    if bad.any():
        _fail("malformed range row", bad)
    bm, bn = s.tile[:2]
    n_tiles = s.problem.batch * (-(-s.problem.m // bm)) * (-(-s.problem.n // bn))
    first = t[r, T.RANGE_FIRST]
    last = first + (t[r, T.RANGE_COUNT] - 1) * t[r, T.RANGE_STRIDE]
    if np.any(np.minimum(first, last) < 0) or np.any(np.maximum(first, last) >= n_tiles):
        _fail("range row outside the tile walk")


def _check_shared_sum(s: Schedule, t, multi, cta) -> None:
    """FLAG_SHARED_SUM: arrival only, on every split of a multi-split tile or on none, with
    every CTA resident. (A CTA arrives on all its tiles before it waits on any, so the order
    CTAs visit tiles in does not matter; residency does.)"""
    shared = (t[:, T.FLAGS] & T.FLAG_SHARED_SUM) != 0
    if not shared.any():
        return
    if s.reduction != ARRIVAL:
        _fail("FLAG_SHARED_SUM is an arrival-protocol flag", shared)
    if np.any(shared != multi):
        _fail("FLAG_SHARED_SUM must mark exactly the splits of multi-split tiles", shared != multi)
    if s.grid > s.device.resident_ctas:
        _fail(f"shared-sum splits wait for all peers but grid {s.grid} > resident CTAs "
              f"{s.device.resident_ctas}")
