"""A CPU emulator that executes a Schedule's split table on NumPy arrays, and a timeline model.

:func:`emulate` runs the table exactly as a GPU would, CTA by CTA and split by split, with a
real workspace, real locks / arrival counters, and concurrently running CTAs:

* at most ``resident`` CTAs (default: the schedule's device ``resident_ctas``) run at once;
  the others start, in dispatch order, when a running CTA finishes;
* at every step one running CTA is picked at random (seeded) and advances by one action
  (compute a split's partial, or do its fixup); a CTA whose lock is not ready yields and
  stays resident, exactly like a spinning CTA on the GPU;
* ``atomic`` partials are added into the tile's zero-kept staging slot in the order the
  interleaving produces (so results vary with the seed at the rounding level) and the last
  arrival on the tile's counter writes it; ``deterministic`` and ``arrival`` results are
  bitwise identical under every interleaving;
* ``arrival`` rows flagged SHARED_SUM store and arrive where they are computed; after its
  last row the CTA walks them again and waits for every peer's arrival before the shared
  sum (spinning, resident), so a co-residency mistake shows up as a deadlock here too;
* the protocol is checked as it runs (:class:`ProtocolViolation`): a waiter may only
  proceed when the lock says exactly its K0 elements were folded in *and* the workspace
  really holds ``[0, K0)`` of that tile; slots are never overwritten while in use; at the
  end every lock and counter is 0, every workspace and staging slot is free, and every
  output element was written by exactly one epilogue;
* if every resident CTA is blocked, :class:`ScheduleDeadlock` is raised (never a hang),
  naming the waiters and where their producers are.

The accumulator dtype is the kernels' (:func:`skcontract.dtypes.accumulator_dtype`) of the
operands' common dtype (numpy's ``result_type`` of A and B): float32 for float16, bfloat16
and float32, float64 for float64, int32 for int8 (sums wrapping as the kernels' do), the
complex dtype for complex operands. The result is returned in that dtype unless
``out_dtype`` is given.
"""
from __future__ import annotations

import heapq

import numpy as np

from ..dtypes import accumulator_dtype
from . import table as T
from .heuristics import cost_of, iteration_cost, partial_wave_scale, row_costs
from .types import (ARRIVAL, ATOMIC, CLUSTER, DETERMINISTIC, ProtocolViolation, Schedule,
                    ScheduleDeadlock)


def _operands(s: Schedule, a, b):
    p = s.problem
    if p.groups is not None:
        if len(a) != p.batch or len(b) != p.batch:
            raise ValueError(f"grouped GEMM needs {p.batch} A and B operands")
        a_list, b_list = [np.asarray(x) for x in a], [np.asarray(x) for x in b]
        squeeze = None
    else:
        a, b = np.asarray(a), np.asarray(b)
        squeeze = a.ndim == 2 and b.ndim == 2
        a3 = a if a.ndim == 3 else a[None]
        b3 = b if b.ndim == 3 else b[None]
        a_list = [a3[l if a3.shape[0] > 1 else 0] for l in range(p.batch)]
        b_list = [b3[l if b3.shape[0] > 1 else 0] for l in range(p.batch)]
    for l, (x, y) in enumerate(zip(a_list, b_list)):
        m, n, k = p.shape(l)
        if x.shape != (m, k) or y.shape != (k, n):
            raise ValueError(f"batch entry {l}: expected A {(m, k)} and B {(k, n)}, got "
                             f"{x.shape} and {y.shape}")
    return a_list, b_list, squeeze


class _Machine:
    """Global memory of the emulated launch: output, workspace, locks, counters."""

    def __init__(self, s: Schedule, a_list, b_list, acc):
        self.s, self.acc = s, acc
        self.t = s.table
        self.a = [x.astype(acc, copy=False) for x in a_list]
        self.b = [y.astype(acc, copy=False) for y in b_list]
        self.c = [np.zeros(s.problem.shape(l)[:2], dtype=acc) for l in range(s.problem.batch)]
        self.final_count = [np.zeros(s.problem.shape(l)[:2], dtype=np.int32)
                            for l in range(s.problem.batch)]
        self.locks = np.zeros(s.num_fixup_tiles, dtype=np.int64)
        self.staging: dict[int, np.ndarray] = {}         # tile -> partial sum (atomic)
        self.ws: dict[int, np.ndarray] = {}
        self.ws_owner: dict[int, tuple[int, int]] = {}   # slot -> (tile, k covered)

    def row(self, r):
        t = self.t[r]
        return (int(t[T.BATCH]), int(t[T.M0]), int(t[T.N0]), int(t[T.BM]), int(t[T.BN]),
                int(t[T.K0]), int(t[T.K1]), int(t[T.FLAGS]), int(t[T.TILE]), int(t[T.SLOT]),
                int(t[T.PEERS]), int(t[T.SPLIT]))

    def compute(self, r):
        l, m0, n0, bm, bn, k0, k1, *_ = self.row(r)
        return self.a[l][m0:m0 + bm, k0:k1] @ self.b[l][k0:k1, n0:n0 + bn]

    def _out(self, l, m0, n0, bm, bn, value):
        """The epilogue: write the tile's complete sum."""
        self.c[l][m0:m0 + bm, n0:n0 + bn] = value
        self.final_count[l][m0:m0 + bm, n0:n0 + bn] += 1

    def _out_share(self, l, m0, n0, value, lo, hi):
        """A shared sum's epilogue: elements [lo, hi) of the tile's sum (row-major)."""
        bm, bn = value.shape
        rows, cols = np.unravel_index(np.arange(lo, hi), (bm, bn))
        self.c[l][m0 + rows, n0 + cols] = value[rows, cols]
        self.final_count[l][m0 + rows, n0 + cols] += 1

    def fixup(self, r, partial) -> bool:
        """Do split r's fixup; False when it must wait (lock not ready)."""
        l, m0, n0, bm, bn, k0, k1, flags, tile, slot, peers, split = self.row(r)
        first, final = bool(flags & T.FLAG_FIRST), bool(flags & T.FLAG_FINAL)
        red = self.s.reduction
        if peers == 1:
            if not (first and final):
                raise ProtocolViolation(f"row {r}: a tile with one split must be first and final")
            self._out(l, m0, n0, bm, bn, partial)
            return True
        if tile < 0:
            raise ProtocolViolation(f"row {r}: a tile with {peers} splits has no fixup index")
        if red == ATOMIC:
            if slot != -1:
                raise ProtocolViolation(f"row {r}: an atomic split has workspace slot {slot}")
            self.staging[tile] = self.staging.get(tile, 0) + partial
            old = self.locks[tile]
            self.locks[tile] = old + 1
            if old == peers - 1:  # the last arrival: read, re-zero, reset, epilogue
                self._out(l, m0, n0, bm, bn, self.staging.pop(tile))
                self.locks[tile] = 0
            return True
        if red == DETERMINISTIC:
            if not first and self.locks[tile] != k0:
                return False
            owner = self.ws_owner.get(slot)
            if first:
                if final:
                    raise ProtocolViolation(f"row {r}: first+final split in a {peers}-split tile")
                if owner is not None or self.locks[tile] != 0:
                    raise ProtocolViolation(
                        f"row {r}: first split of tile {tile} found slot {slot} in use "
                        f"({owner}) or lock {self.locks[tile]} != 0")
                self.ws[slot] = partial.copy()
                self.ws_owner[slot] = (tile, k1)
                self.locks[tile] = k1
                return True
            if owner != (tile, k0):
                raise ProtocolViolation(
                    f"row {r}: split waiting for K0={k0} of tile {tile} proceeded but the "
                    f"workspace slot {slot} holds {owner}: a waiter proceeded early")
            if final:
                self._out(l, m0, n0, bm, bn, partial + self.ws.pop(slot))
                del self.ws_owner[slot]
                self.locks[tile] = 0
            else:
                self.ws[slot] = self.ws[slot] + partial
                self.ws_owner[slot] = (tile, k1)
                self.locks[tile] = k1
            return True
        if red == ARRIVAL and flags & T.FLAG_SHARED_SUM or red == CLUSTER:
            return self._arrive_shared(r, partial)
        if red == ARRIVAL:
            if slot in self.ws_owner:
                raise ProtocolViolation(f"row {r}: slot {slot} written twice")
            self.ws[slot] = partial.copy()
            self.ws_owner[slot] = (tile, split)
            old = self.locks[tile]
            self.locks[tile] = old + 1
            if old == peers - 1:
                base = slot - split
                total = None
                for i in range(peers):
                    if self.ws_owner.get(base + i) != (tile, i):
                        raise ProtocolViolation(
                            f"row {r}: last arrival of tile {tile} misses split {i}")
                    part = self.ws.pop(base + i)
                    del self.ws_owner[base + i]
                    total = part if total is None else total + part
                # the last arriving split (any of them) runs the epilogue for the tile
                self._out(l, m0, n0, bm, bn, total)
                self.locks[tile] = 0
            return True
        raise ProtocolViolation(f"unknown reduction {red!r}")

    def _arrive_shared(self, r, partial) -> bool:
        """Shared-sum split, where it is computed: store the slot and arrive (no wait)."""
        tile, slot, split = (int(self.t[r, c]) for c in (T.TILE, T.SLOT, T.SPLIT))
        key = self._slot(tile, slot, split)
        if key in self.ws_owner:
            raise ProtocolViolation(f"row {r}: slot {key} written twice")
        self.ws[key] = partial.copy()
        self.ws_owner[key] = (tile, split)
        self.locks[tile] += 1
        return True

    def _slot(self, tile, slot, split):
        """Where a shared sum's split keeps its partial: its workspace slot (arrival), or its
        CTA's shared memory (cluster: keyed by tile and split)."""
        return ("cluster", tile, split) if self.s.reduction == CLUSTER else slot

    def finish_shared(self, r) -> bool:
        """After the CTA's last row: wait for all PEERS arrivals, sum the split's share of the
        tile (SPLIT / PEERS of its elements in the kernels' slot order, here row-major) and
        write that share of the output, arrive again; the split that sees 2 * PEERS - 1
        frees the slots and resets the counter. False while it must wait."""
        l, m0, n0, bm, bn, k0, k1, flags, tile, slot, peers, split = self.row(r)
        if self.locks[tile] < peers:
            return False
        keys = [self._slot(tile, slot - split + i, i) for i in range(peers)]
        for i, key in enumerate(keys):
            if self.ws_owner.get(key) != (tile, i):
                raise ProtocolViolation(
                    f"row {r}: split {split} of tile {tile} passed its wait but split {i}'s "
                    "partial is not where it keeps it")
        total = self.ws[keys[0]]
        for key in keys[1:]:
            total = total + self.ws[key]
        size = total.size
        self._out_share(l, m0, n0, total, size * split // peers, size * (split + 1) // peers)
        old = self.locks[tile]
        self.locks[tile] = old + 1
        if old == 2 * peers - 1:
            for key in keys:
                del self.ws[key], self.ws_owner[key]
            self.locks[tile] = 0
        return True

    def check_end(self):
        if np.any(self.locks != 0):
            bad = np.nonzero(self.locks)[0][:5].tolist()
            raise ProtocolViolation(f"locks/counters not reset to 0 at the end: {bad}")
        if self.ws_owner:
            raise ProtocolViolation(f"workspace slots still in use: {sorted(self.ws_owner)[:5]}")
        if self.staging:
            raise ProtocolViolation(f"staging slots not re-zeroed: {sorted(self.staging)[:5]}")
        for l, fc in enumerate(self.final_count):
            if fc.size and (fc.min() != 1 or fc.max() != 1):
                raise ProtocolViolation(
                    f"batch {l}: output elements finalised {fc.min()}..{fc.max()} times, not once")

def _dispatch_order(grid: int, dispatch: str, rng) -> list[int]:
    if dispatch == "in_order":
        return list(range(grid))
    if dispatch == "reverse":
        return list(range(grid - 1, -1, -1))
    if dispatch == "random":
        return rng.permutation(grid).tolist()
    raise ValueError(f"dispatch must be 'in_order', 'reverse' or 'random', got {dispatch!r}")


def emulate(s: Schedule, a, b, *, seed: int = 0, resident: int | None = None,
            dispatch: str = "in_order", out_dtype=None):
    """Execute schedule ``s`` on ``a`` (m, k) / (batch, m, k) and ``b`` (k, n) / (batch, k, n).

    For a grouped problem ``a`` and ``b`` are lists (one array per group) and a list is
    returned. ``seed`` drives the interleaving of CTAs; ``resident`` overrides how many CTAs
    run at once; ``dispatch`` is the order CTAs are first started in ("in_order" like the
    hardware's block scheduler in practice, "reverse" or "random" to probe co-residency
    assumptions). Raises :class:`ScheduleDeadlock` / :class:`ProtocolViolation`.
    """
    s = s.expanded()
    a_list, b_list, squeeze = _operands(s, a, b)
    common = np.result_type(*[x.dtype for x in a_list + b_list])
    acc = accumulator_dtype(common)
    if acc is None:
        raise TypeError(f"emulate: no kernel accumulates {common} operands")
    mach = _Machine(s, a_list, b_list, acc)
    rng = np.random.default_rng(seed)
    resident = s.device.resident_ctas if resident is None else int(resident)
    offs = s.cta_offsets
    # clusters start whole (the hardware places a cluster's CTAs together)
    size = s.cluster_size
    if resident < size:
        raise ScheduleDeadlock(f"clusters of {size} CTAs, but only {resident} resident")
    resident -= resident % size
    pending = [c * size + j for c in _dispatch_order(s.grid // size, dispatch, rng)
               for j in range(size)]
    pending.reverse()  # pop() from the end
    ptr = {}
    deferred = {}  # per CTA: its shared-sum rows, finished after its last row
    shared_rows = ((s.table[:, T.FLAGS] & T.FLAG_SHARED_SUM) != 0) | \
        ((s.table[:, T.PEERS] > 1) & (s.reduction == CLUSTER))
    partial = {}
    running: list[int] = []
    blocked: set[int] = set()
    while running or pending:
        while len(running) < resident and pending:
            c = pending.pop()
            if offs[c] == offs[c + 1]:
                continue
            running.append(c)
            ptr[c] = int(offs[c])
            deferred[c] = [r for r in range(offs[c], offs[c + 1]) if shared_rows[r]]
        if not running:
            break
        runnable = [c for c in running if c not in blocked]
        if not runnable:
            raise ScheduleDeadlock(_deadlock_message(s, mach, running, ptr, pending, deferred))
        c = runnable[int(rng.integers(len(runnable)))]
        r = ptr[c]
        if r >= offs[c + 1]:  # the CTA's second walk: finish its shared sums
            if not mach.finish_shared(deferred[c][0]):
                blocked.add(c)
                continue
            blocked.clear()
            deferred[c].pop(0)
            if not deferred[c]:
                running.remove(c)
            continue
        if c not in partial:
            partial[c] = mach.compute(r)
            continue
        if not mach.fixup(r, partial[c]):
            blocked.add(c)
            continue
        del partial[c]
        blocked.clear()
        ptr[c] = r + 1
        if ptr[c] == offs[c + 1] and not deferred[c]:
            running.remove(c)
    mach.check_end()
    out = mach.c
    if out_dtype is not None:
        out = [x.astype(out_dtype) for x in out]
    if squeeze is None:
        return out
    res = np.stack(out) if out else np.zeros((0,), dtype=acc)
    return res[0] if squeeze else res


def _deadlock_message(s, mach, running, ptr, pending, deferred) -> str:
    t = s.table
    cta_of = s.cta_of_rows()
    lines = [f"schedule deadlocks: all {len(running)} resident CTAs wait"]
    for c in running[:8]:
        r = ptr[c] if ptr[c] < s.cta_offsets[c + 1] else deferred[c][0]
        tile, k0 = int(t[r, T.TILE]), int(t[r, T.K0])
        if t[r, T.FLAGS] & T.FLAG_SHARED_SUM:
            lines.append(f"  CTA {c} row {r}: counter[{tile}] == {mach.locks[tile]}, needs all "
                         f"{int(t[r, T.PEERS])} peers to arrive (shared sum)")
            continue
        prod = np.nonzero((t[:, T.TILE] == tile) & (t[:, T.K1] == k0))[0]
        where = ""
        if len(prod):
            pc = int(cta_of[prod[0]])
            state = "not resident" if pc in pending else (
                "running" if pc in running else "finished")
            where = f"; its producer is row {int(prod[0])} on CTA {pc} ({state})"
        lines.append(f"  CTA {c} row {r}: lock[{tile}] == {mach.locks[tile]}, needs {k0}{where}")
    if len(running) > 8:
        lines.append(f"  ... and {len(running) - 8} more")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Timeline model (for pictures): when each split runs, under the cost model
# ---------------------------------------------------------------------------------------
def timeline(s: Schedule, resident: int | None = None) -> dict:
    """Start / compute end / wait end / end of every split, in k-iterations of ``s.tile``.

    Costs follow :mod:`.heuristics` (fixup b and d converted to iterations). Deterministic
    waiters wait for the end of their predecessor split (SPLIT - 1) of the same tile.
    Shared-sum splits end with their arrival; after the CTA's last row each one waits
    (``sum_wait`` .. ``sum_start``) for its tile's last arrival and sums its share
    (``sum_start`` .. ``sum_end``).
    CTAs beyond ``resident`` start when a slot frees (in index order).
    """
    s = s.expanded()
    t = s.table
    n = len(t)
    model = cost_of(s.device)
    c_big = iteration_cost(s.tile, s.problem.dtype, model, s.tile_efficiency)
    rc = row_costs(t, s.tile, s.small_tile, s.problem.dtype, s.accumulator_dtype, model,
                   s.tile_efficiency, fixup_cost=s.fixup_cost, cluster=s.reduction == CLUSTER,
                   small_efficiency=s.small_efficiency)
    dur = rc.compute * partial_wave_scale(s.table, s.grid, s.device.resident_ctas,
                                          s.solo_fraction, s.tile[2]) / c_big
    fix = (rc.write + rc.d * rc.chain) / c_big
    first = (t[:, T.FLAGS] & T.FLAG_FIRST) != 0
    multi = t[:, T.PEERS] > 1
    # the cluster sum, as the shared sum, after the CTA's (one) row
    shared = ((t[:, T.FLAGS] & T.FLAG_SHARED_SUM) != 0) | (multi & (s.reduction == CLUSTER))
    waits = multi & ~first & (s.reduction == DETERMINISTIC)
    pred = {}
    if waits.any():
        key = {(int(tl), int(sp)): i for i, (tl, sp) in
               enumerate(zip(t[:, T.TILE].tolist(), t[:, T.SPLIT].tolist())) if tl >= 0}
        for i in np.nonzero(waits)[0].tolist():
            pred[i] = key[(int(t[i, T.TILE]), int(t[i, T.SPLIT]) - 1)]
    start = np.zeros(n)
    cend = np.full(n, np.nan)
    wend = np.zeros(n)
    end = np.full(n, np.nan)
    offs = s.cta_offsets
    resident = s.device.resident_ctas if resident is None else resident
    if s.grid > resident and waits.any():
        raise ScheduleDeadlock("timeline: waiting splits on a grid larger than the resident CTAs")
    cta_start = np.zeros(s.grid)
    if s.grid > resident:
        # list scheduling in index order (no waits here, so each CTA's length is known)
        length = np.array([dur[offs[c]:offs[c + 1]].sum() + fix[offs[c]:offs[c + 1]].sum()
                           for c in range(s.grid)])
        slots = [0.0] * resident
        for c in range(s.grid):
            t0 = heapq.heappop(slots)
            cta_start[c] = t0
            heapq.heappush(slots, t0 + length[c])
    ptr = offs[:-1].astype(np.int64).copy()
    now = cta_start.copy()
    remaining = n
    while remaining:
        progress = False
        for c in range(s.grid):
            while ptr[c] < offs[c + 1]:
                i = int(ptr[c])
                ready = 0.0
                if i in pred:
                    if np.isnan(end[pred[i]]):
                        break
                    ready = end[pred[i]]
                start[i] = now[c]
                cend[i] = start[i] + dur[i]
                wend[i] = max(cend[i], ready)
                end[i] = wend[i] + fix[i]
                now[c] = end[i]
                ptr[c] += 1
                remaining -= 1
                progress = True
        if not progress:
            raise ScheduleDeadlock("timeline: circular waits in the split table")
    sum_wait, sum_start, sum_end = _shared_sum_pass(t, offs, shared, end, now,
                                                    rc.d * rc.pooled / c_big)
    return {"start": start, "compute_end": cend, "wait_end": wend, "end": end,
            "sum_wait": sum_wait, "sum_start": sum_start, "sum_end": sum_end,
            "cta": s.cta_of_rows(), "cta_start": cta_start}


def _shared_sum_pass(t, offs, shared, arrive, now, cost):
    """After its last row a CTA walks its shared-sum rows: wait for the tile's last arrival,
    then spend ``cost`` (its share of the sum and of the tile's stores, as the model charges
    it: :data:`.heuristics.SHARED_SUM_PASS_TILES`). Returns (wait start, sum start, sum end)
    per row, NaN for other rows."""
    n = len(t)
    sum_wait, sum_start, sum_end = (np.full(n, np.nan) for _ in range(3))
    if not shared.any():
        return sum_wait, sum_start, sum_end
    last_arrival = {}
    for i in np.nonzero(shared)[0].tolist():
        tile = int(t[i, T.TILE])
        last_arrival[tile] = max(last_arrival.get(tile, 0.0), float(arrive[i]))
    for c in range(len(offs) - 1):
        clock = float(now[c])
        for i in range(int(offs[c]), int(offs[c + 1])):
            if shared[i]:
                sum_wait[i] = clock
                sum_start[i] = max(clock, last_arrival[int(t[i, T.TILE])])
                clock = sum_start[i] + cost[i]
                sum_end[i] = clock
    return sum_wait, sum_start, sum_end
