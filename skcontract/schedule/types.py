"""Value types of the scheduler: modes, problems, splits, candidates and the Schedule.

Everything here is immutable. A :class:`Schedule` owns a read-only split table in the
format of :mod:`skcontract.schedule.table`; every executor (the CPU emulator, the CUDA
kernels) walks that table and nothing else.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from enum import Enum
from typing import NamedTuple

import numpy as np

from ..dtypes import accumulator_dtype, dtype_name
from ..kinds import Kind

from . import table as T
from .device import DeviceInfo
from .swizzle import tile_origins

# ---------------------------------------------------------------------------------------
# The vocabulary: decomposition modes and reduction modes (one name per idea)
# ---------------------------------------------------------------------------------------
class _Name(str, Enum):
    """A str enum that prints as its value, so ``s.mode == "stream_k"`` and f-strings read
    naturally."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __hash__(self) -> int:  # equal to its value, so it hashes like it too
        return hash(self.value)

    def __repr__(self) -> str:  # reads as the string it equals
        return repr(self.value)


class Mode(_Name):
    """How a schedule cuts the (tile x k-iteration) space (docs/design/stream_k.md)."""

    DATA_PARALLEL = "data_parallel"
    SPLIT_K = "split_k"
    STREAM_K = "stream_k"
    HYBRID = "hybrid"
    ALIGNED = "aligned"      # the aligned split: S equal k-ranges per tile, one CTA each
    HYTIS = "hytis"


class Protocol(_Name):
    """How the partial sums of a tile's splits merge: the fixup protocol a kernel runs (its
    ``REDUCTION`` constant, :data:`.table.PROTOCOL_CODES`). A schedule's ``reduction`` is one
    of the reductions (:data:`REDUCTIONS`, all but NONE); its ``protocol`` is NONE where its
    table splits no tile."""

    NONE = "none"                    # no tile is split: no fixup
    ATOMIC = "atomic"                # red.add into a zero-kept staging slot + arrival counter
    DETERMINISTIC = "deterministic"  # workspace slot + lock, merged in k order
    ARRIVAL = "arrival"              # a slot per split + arrival counter; summed in split order
    CLUSTER = "cluster"              # a tile's splits are one cluster's CTAs; summed in split
                                     # order through distributed shared memory (aligned only)

    @property
    def code(self) -> int:
        """The kernels' code of the protocol (``REDUCTION_<NAME>``)."""
        return T.PROTOCOL_CODES[self.value]


DATA_PARALLEL, SPLIT_K, STREAM_K, HYBRID, ALIGNED, HYTIS = Mode
AUTO = "auto"

CLUSTER_SPLITS = tuple(range(2, 17))
"""The splits a tile may have under the ``cluster`` reduction: cluster sizes of one CTA an SM
that a Hopper GPC holds (beyond the portable 8 up to 16: its kernels allow it, jit.py)."""

MODES = tuple(Mode)
"""Every mode a Schedule can report in ``s.mode``."""

K_SPLITTING_MODES = frozenset({SPLIT_K, STREAM_K, HYBRID, ALIGNED})
"""Modes that cut the reduction (K) and therefore need a fixup."""

REDUCTIONS = tuple(p for p in Protocol if p is not Protocol.NONE)
ATOMIC, DETERMINISTIC, ARRIVAL, CLUSTER = REDUCTIONS
"""Reduction modes a caller may ask for. The aligned split uses ``arrival`` (which
``s.reduction`` then reports) unless ``cluster`` is asked for: then each tile's S splits run
on one cluster of S CTAs (S in :data:`CLUSTER_SPLITS`), which sum the partial tiles in their
shared memory; ``cluster`` is for the aligned split only. ``arrival`` with the other
K-splitting modes gives every split its own slot; when the grid fits in the resident CTAs
the peers share the final sum (FLAG_SHARED_SUM, a parallel split reduction).
``deterministic``, ``arrival`` and ``cluster`` are all bitwise reproducible (fixed
summation orders, though not the same grouping), so auto with ``deterministic`` also weighs
``arrival`` and ``cluster`` (see the scheduler)."""


def as_mode(mode) -> Mode | str:
    """``mode`` as a :class:`Mode` (or ``"auto"``); ValueError naming the choices."""
    if mode == AUTO:
        return AUTO
    try:
        return Mode(mode)
    except ValueError:
        raise ValueError(f"mode must be 'auto' or one of "
                         f"{', '.join(repr(m.value) for m in Mode)}, got {mode!r}") from None


def as_reduction(reduction) -> Protocol:
    """``reduction`` as one of the :data:`REDUCTIONS`; ValueError naming the choices."""
    if reduction in REDUCTIONS:
        return Protocol(reduction)
    raise ValueError(f"reduction must be one of "
                     f"{', '.join(repr(r.value) for r in REDUCTIONS)}, got "
                     f"{reduction!r}")




class ScheduleError(RuntimeError):
    """Base class of the errors the emulator raises when a schedule is wrong."""


class ScheduleDeadlock(ScheduleError):
    """Every resident CTA is waiting on a lock that no running CTA will ever release."""


class ProtocolViolation(ScheduleError):
    """A split broke the fixup protocol (early waiter, bad lock value, slot misuse...)."""


# ---------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmProblem:
    """``C[l] = A[l] @ B[l]`` for ``l`` in ``range(batch)``: A is (m, k), B is (k, n).

    * plain GEMM / GEMV: ``batch == 1`` (GEMV is ``m == 1`` or ``n == 1``);
    * batched GEMM: ``batch > 1``, the batch is folded into the tile space;
    * grouped GEMM: ``groups`` is a tuple of ``(m, n, k)``, one per group, all launched at
      once; group ``g`` has batch index ``g`` in the split table, and an executor looks up
      that group's (m, n, k) and pointers by the BATCH column. ``m, n, k`` then hold the
      maxima and ``batch == len(groups)``. Use :func:`grouped_problem` to build one.
    * implicit-GEMM convolution: see :func:`conv_problem`.
    """

    m: int
    n: int
    k: int
    batch: int = 1
    dtype: str = "float16"
    groups: tuple | None = None

    def __post_init__(self):
        for name in ("m", "n", "k", "batch"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
            if v > T.INDEX_MAX:
                raise T.TableOverflow(f"{name} = {v} exceeds {T.INDEX_MAX}, the largest "
                                      f"coordinate of the kernels' 32-bit split tables")
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        if self.groups is not None:
            groups = tuple(tuple(int(x) for x in g) for g in self.groups)
            if len(groups) != self.batch or any(len(g) != 3 or min(g) < 1 for g in groups):
                raise ValueError("groups must be (m, n, k) triples, one per batch entry")
            object.__setattr__(self, "groups", groups)

    def shape(self, l: int) -> tuple[int, int, int]:
        """(m, n, k) of batch entry / group ``l``."""
        return self.groups[l] if self.groups is not None else (self.m, self.n, self.k)

    def shapes(self) -> list[tuple[int, int, int]]:
        return [self.shape(l) for l in range(self.batch)]

    @property
    def ragged_k(self) -> bool:
        """Whether groups have different K (so tiles have different k-iteration counts)."""
        return self.groups is not None and len({g[2] for g in self.groups}) > 1

    @property
    def accumulator_dtype(self) -> str:
        """Name of the dtype the kernels accumulate this problem's products in
        (:func:`skcontract.dtypes.accumulator_dtype`); ValueError for a dtype none can."""
        return _accumulator_name(self.dtype)

    @property
    def kind(self) -> Kind:
        """The step kind the problem is: a grouped problem's groups are the batch entries of
        its table, so it is a BATCHED_GEMM (no step kind of its own: grouped GEMM has no
        kernel)."""
        if self.batch > 1:
            return Kind.BATCHED_GEMM
        if self.m == 1 or self.n == 1:
            return Kind.GEMV
        return Kind.GEMM

    @property
    def flops(self) -> int:
        return sum(2 * m * n * k for m, n, k in self.shapes())


@lru_cache(maxsize=None)
def _accumulator_name(dtype: str) -> str:
    """:attr:`GemmProblem.accumulator_dtype` of a dtype name (worked out once for each)."""
    acc = accumulator_dtype(dtype)
    if acc is None:
        raise ValueError(f"no GEMM accumulator known for operand dtype {dtype!r}")
    return acc.name


def grouped_problem(shapes, dtype="float16") -> GemmProblem:
    """A grouped GEMM: a list of ``(m, n, k)`` launched together (group g -> BATCH g)."""
    shapes = tuple(tuple(int(x) for x in s) for s in shapes)
    if not shapes:
        raise ValueError("a grouped GEMM needs at least one group")
    return GemmProblem(max(s[0] for s in shapes), max(s[1] for s in shapes),
                       max(s[2] for s in shapes), batch=len(shapes), dtype=dtype,
                       groups=shapes)


def conv_problem(n, c, h, w, out_channels, r, s, *, stride=1, padding=0, dilation=1,
                 dtype="float16") -> GemmProblem:
    """Implicit-GEMM view of a 2-D convolution (NCHW input, KCRS filter).

    ``M = N * P * Q`` (output pixels), ``N = out_channels``, ``K = C * R * S`` with
    ``P = (H + 2 pad_h - dil_h (R - 1) - 1) // stride_h + 1`` and likewise Q.

    >>> p = conv_problem(8, 64, 56, 56, 128, 3, 3, padding=1)
    >>> (p.m, p.n, p.k)
    (25088, 128, 576)
    """
    sh, sw = (stride, stride) if np.isscalar(stride) else stride
    ph, pw = (padding, padding) if np.isscalar(padding) else padding
    dh, dw = (dilation, dilation) if np.isscalar(dilation) else dilation
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    if p < 1 or q < 1:
        raise ValueError("convolution has an empty output")
    return GemmProblem(n * p * q, out_channels, c * r * s, dtype=dtype)


# ---------------------------------------------------------------------------------------
# Splits, candidates, schedules
# ---------------------------------------------------------------------------------------
class Split(NamedTuple):
    """One row of the split table, decoded (element coordinates, python ints/bools)."""

    cta: int
    batch: int
    m0: int
    n0: int
    bm: int
    bn: int
    k0: int
    k1: int
    first: bool
    final: bool
    tile: int      # fixup index (lock / counter), -1 for a tile with one split
    slot: int      # workspace slot, -1 when none
    peers: int
    split: int
    small: bool    # HyTiS latency-tile row


@dataclass(frozen=True)
class TileOption:
    """A tile the scheduler may plan with, as the kernel catalogue describes it.

    ``ctas_per_sm``: CTAs of that kernel resident on one SM (its declared occupancy; the
    schedule's grid and co-residency use it). ``efficiency``: its cost-model time per unit
    of tile volume relative to the reference tile (None: the cost model's own estimate for
    the shape). ``small_tiles``: (BM, BN) latency tiles the same launch can also run, which
    HyTiS needs; a kernel that runs one tile shape per launch offers none (``()``), and None
    lets the scheduler choose any (:func:`~.decompose.hytis_small_tiles`: planning without a
    kernel). ``small_efficiency``: the efficiency of the kernel's small tiles (None: the cost
    model's estimate). ``solo_fraction``: an L2-bound kernel's k-iteration time on a grid
    that leaves SMs idle, at least, relative to its time on every SM (1: not L2-bound;
    :func:`~.heuristics.partial_wave_scale`).
    ``fixup_cost``: its cost of writing and merging a partial tile relative to the cost
    model's (``b`` and ``d``). ``cluster``: CTAs (on as many SMs) that run one work unit
    together (a cluster pair sharing an operand); the schedule's grid counts units, and the
    device offers ``sms / cluster`` of them. ``cluster_sum``: its kernels run the ``cluster``
    reduction, which auto then weighs for few tiles. ``shared_sum``: its kernels run the
    arrival protocol's shared sum (the peers of a tile share its final sum) on tables whose
    CTAs are all resident; without it (a kernel whose partials are output sums, not
    fragments: the Dot family's) the last arrival sums them. ``arrival``: its kernels run
    the arrival protocol at all (auto then weighs it for few tiles with many peers).
    ``splits_only``: the option is planned only in schedules that split its tiles (its
    data-parallel table is listed among auto's candidates, not chosen, and a forced
    data-parallel mode takes another option), unless it is the only option.
    """

    tile: tuple
    ctas_per_sm: int = 1
    efficiency: float | None = None
    small_tiles: tuple | None = None
    small_efficiency: float | None = None
    solo_fraction: float = 1.0
    fixup_cost: float = 1.0
    cluster: int = 1
    cluster_sum: bool = False
    shared_sum: bool = True
    arrival: bool = True
    splits_only: bool = False

    def __post_init__(self):
        tile = tuple(int(x) for x in self.tile)
        if len(tile) != 3 or min(tile) < 1:
            raise ValueError(f"tile must be (BM, BN, BK) of positive ints, got {self.tile!r}")
        if int(self.ctas_per_sm) != self.ctas_per_sm or self.ctas_per_sm < 1:
            raise ValueError(f"ctas_per_sm must be a positive int, got {self.ctas_per_sm!r}")
        if int(self.cluster) != self.cluster or self.cluster < 1:
            raise ValueError(f"cluster must be a positive int, got {self.cluster!r}")
        object.__setattr__(self, "tile", tile)


@dataclass(frozen=True)
class Candidate:
    """One (mode, tile, grid) option auto considered, with the cost model's view of it;
    ``ctas_per_sm``: the occupancy of the kernel entry it plans for (a tile may have
    entries of two); ``cluster``: the CTAs of its work unit (2: a cluster pair, whose unit
    tile a single CTA's may equal)."""

    mode: Mode
    tile: tuple
    grid: int
    predicted_time_us: float
    predicted_efficiency: float
    waves: float
    relative_time: float = 1.0
    chosen: bool = False
    note: str = ""
    ctas_per_sm: int = 1
    cluster: int = 1

    def __str__(self):
        bm, bn, bk = self.tile
        occupancy = f"/{self.ctas_per_sm}" if self.ctas_per_sm > 1 else ""
        tile = f"{bm}x{bn}x{bk}{occupancy}{',pair' if self.cluster == 2 else ''}"
        return (f"{'*' if self.chosen else ' '} {self.mode:<13} {tile:<14} "
                f"grid={self.grid:<5} waves={self.waves:5.2f} eff={self.predicted_efficiency:4.2f} "
                f"t={self.predicted_time_us:9.1f}us rel={self.relative_time:5.2f} {self.note}")


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.int32)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Schedule:
    """A decomposition of one GEMM-class problem onto a persistent 1-D grid of CTAs.

    ``table`` / ``cta_offsets`` are the split table (see :mod:`.table`); everything else
    describes how it was chosen. :func:`skcontract.kernels.resolve.resolve_gemm` builds the one
    a GPU kernel runs; :func:`skcontract.schedule.schedule_problem` builds one on given tiles.
    """

    problem: GemmProblem
    device: DeviceInfo
    mode: Mode
    tile: tuple
    grid: int
    reduction: Protocol
    table: np.ndarray
    cta_offsets: np.ndarray
    reason: str = ""
    small_tile: tuple | None = None     # HyTiS latency tile (BM, BN, BK)
    splits_per_tile: int = 1            # S of split_k / aligned
    groups: int = 1                     # Stream-K groups (which CTA runs which tile)
    log_swizzle: int = 0
    raster: str = "N"                   # "N": bands of rows walked along N; "M": the transpose
    predicted_time_us: float = float("nan")
    predicted_efficiency: float = float("nan")
    waves: float = float("nan")
    candidates: tuple = field(default=())
    tile_efficiency: float | None = None  # the kernel's own cost-model efficiency, if given
    small_efficiency: float | None = None  # the same for its HyTiS small tile
    solo_fraction: float = 1.0  # TileOption.solo_fraction of the kernel it plans for
    fixup_cost: float = 1.0  # the kernel's own partial-tile cost relative to the model's
    cluster: int = 1  # CTAs that run one work unit (TileOption.cluster); the grid counts units

    def __post_init__(self):
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "reduction", as_reduction(self.reduction))
        object.__setattr__(self, "table", _readonly(self.table).reshape(-1, T.NUM_COLUMNS))
        object.__setattr__(self, "cta_offsets", _readonly(self.cta_offsets))
        object.__setattr__(self, "tile", tuple(int(x) for x in self.tile))
        if len(self.cta_offsets) != self.grid + 1:
            raise ValueError("cta_offsets must have grid + 1 entries")

    # -- derived sizes ---------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """Rows of the table as launched (a range row counts once)."""
        return len(self.table)

    @property
    def num_splits(self) -> int:
        """Splits, counting each tile of a range row."""
        return int(self._tiles_per_row().sum())

    @property
    def num_tiles(self) -> int:
        """Output tiles (splits with SPLIT == 0, each tile of a range row)."""
        return int(self._tiles_per_row()[self.table[:, T.SPLIT] == 0].sum())

    def _tiles_per_row(self) -> np.ndarray:
        t = self.table
        return np.where(t[:, T.FLAGS] & T.FLAG_RANGE, t[:, T.RANGE_COUNT], 1).astype(np.int64)

    @property
    def has_ranges(self) -> bool:
        return bool(np.any(self.table[:, T.FLAGS] & T.FLAG_RANGE))

    @property
    def tile_order(self) -> int:
        """The tile walk as the kernels take it (:func:`.table.tile_order_code`)."""
        return T.tile_order_code(self.log_swizzle, self.raster)

    @cached_property
    def _expanded(self) -> "Schedule":
        t = self.table
        is_range = (t[:, T.FLAGS] & T.FLAG_RANGE) != 0
        reps = self._tiles_per_row()
        out = np.repeat(t, reps, axis=0).astype(np.int64)
        j = np.arange(len(out)) - np.repeat(np.cumsum(reps) - reps, reps)
        rr = np.repeat(is_range, reps)
        if rr.any():
            p = self.problem
            tile = out[rr, T.RANGE_FIRST] + j[rr] * out[rr, T.RANGE_STRIDE]
            l, m0, n0, bm, bn = tile_origins(tile, p.m, p.n, self.tile[0], self.tile[1],
                                             self.log_swizzle, self.raster)
            out[rr, T.BATCH], out[rr, T.M0], out[rr, T.N0] = l, m0, n0
            out[rr, T.BM], out[rr, T.BN] = bm, bn
            out[rr, T.FLAGS] &= ~T.FLAG_RANGE
        cta = self.cta_of_rows()
        counts = np.bincount(cta, weights=reps, minlength=self.grid).astype(np.int64)
        offsets = np.zeros(self.grid + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        return replace(self, table=out.astype(np.int32), cta_offsets=offsets.astype(np.int32))

    def expanded(self) -> "Schedule":
        """This schedule with every range row written out as one row per tile (what the
        emulator, the checks and the pictures walk); itself when it has none."""
        return self._expanded if self.has_ranges else self

    @property
    def num_fixup_tiles(self) -> int:
        """Tiles with more than one split."""
        t = self.table[:, T.TILE]
        return int(t.max()) + 1 if len(t) and t.max() >= 0 else 0

    @property
    def workspace_slots(self) -> int:
        """Workspace slots of BM x BN accumulators the executor must provide."""
        s = self.table[:, T.SLOT]
        return int(s.max()) + 1 if len(s) and s.max() >= 0 else 0

    @property
    def num_locks(self) -> int:
        """32-bit locks (deterministic) / arrival counters (arrival, atomic), one per tile
        with several splits; zeroed once when allocated, left at zero by every launch."""
        return 0 if self.reduction == CLUSTER else self.num_fixup_tiles

    @property
    def cluster_size(self) -> int:
        """CTAs a launch groups in one cluster for the protocol: a tile's splits under the
        ``cluster`` reduction, else 1."""
        return self.splits_per_tile if self.protocol == CLUSTER else 1

    @property
    def staging_slots(self) -> int:
        """Zero-kept slots of BM x BN accumulators the atomic protocol adds into."""
        return self.num_fixup_tiles if self.reduction == ATOMIC else 0

    @cached_property
    def protocol(self) -> Protocol:
        """The fixup protocol a kernel runs this schedule with (:func:`.table.protocol`)."""
        return Protocol(T.protocol(self.table, self.reduction))

    @property
    def accumulator_dtype(self) -> str:
        return self.problem.accumulator_dtype

    @property
    def workspace_bytes(self) -> int:
        """Bytes of workspace and staging slots a launch of this schedule uses."""
        bm, bn, _ = self.tile
        slots = self.workspace_slots + self.staging_slots
        return slots * bm * bn * np.dtype(self.accumulator_dtype).itemsize

    @property
    def shared_sum(self) -> bool:
        """Whether the peers of a tile share its final sum (arrival + FLAG_SHARED_SUM)."""
        return bool(np.any(self.table[:, T.FLAGS] & T.FLAG_SHARED_SUM))

    @property
    def waits(self) -> bool:
        """Whether some split spins on a lock or counter (deterministic non-first splits,
        and every split of a shared-sum tile)."""
        if self.reduction == DETERMINISTIC:
            return bool(np.any((self.table[:, T.FLAGS] & T.FLAG_FIRST) == 0))
        return self.shared_sum

    def digest(self) -> str:
        """A short hash of the split table, CTA offsets and tile walk: two schedules with the
        same digest, grid and tile launch the same work."""
        return self._digest

    @cached_property
    def _digest(self) -> str:
        h = hashlib.sha256(self.table.tobytes())
        h.update(self.cta_offsets.tobytes())
        h.update(str(self.tile_order).encode())
        return h.hexdigest()[:16]

    # -- rows --------------------------------------------------------------------------
    def cta_of_rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.grid, dtype=np.int32), np.diff(self.cta_offsets))

    def splits(self) -> list[Split]:
        """All splits, grouped by CTA, in the order each CTA executes them."""
        if self.has_ranges:
            return self.expanded().splits()
        t = self.table
        ctas = self.cta_of_rows().tolist()
        flags = t[:, T.FLAGS]
        cols = [t[:, i].tolist() for i in range(T.NUM_COLUMNS)]
        first = ((flags & T.FLAG_FIRST) != 0).tolist()
        final = ((flags & T.FLAG_FINAL) != 0).tolist()
        small = ((flags & T.FLAG_SMALL) != 0).tolist()
        return [Split(ctas[i], cols[T.BATCH][i], cols[T.M0][i], cols[T.N0][i], cols[T.BM][i],
                      cols[T.BN][i], cols[T.K0][i], cols[T.K1][i], first[i], final[i],
                      cols[T.TILE][i], cols[T.SLOT][i], cols[T.PEERS][i], cols[T.SPLIT][i],
                      small[i]) for i in range(len(t))]

    # -- text ----------------------------------------------------------------------------
    def summary(self) -> str:
        """One line for plan tables: mode, tile (",pair": a cluster pair's unit), grid,
        waves, predicted efficiency, reason."""
        bm, bn, bk = self.tile
        tile = f"{bm}x{bn}x{bk}{',pair' if self.cluster == 2 else ''}"
        if self.small_tile is not None:
            tile += "+{}x{}x{}".format(*self.small_tile)
        extra = ""
        if self.mode in (SPLIT_K, ALIGNED):
            extra = f" S={self.splits_per_tile}"
        if self.groups > 1:
            extra += f" groups={self.groups}"
        red = f" {self.reduction}" if self.num_fixup_tiles else ""
        return (f"{self.mode}{red} {tile} grid={self.grid}{extra} waves={self.waves:.2f} "
                f"eff={self.predicted_efficiency:.2f} ({self.reason})")

    def __repr__(self):
        p = self.problem
        shape = f"{p.batch}x" if p.batch > 1 else ""
        return (f"<Schedule {shape}{p.m}x{p.n}x{p.k} {p.dtype}: {self.summary()}; "
                f"{self.num_splits} splits in {self.num_rows} rows>")

    def describe(self) -> str:
        """Summary plus the candidate table auto evaluated."""
        lines = [repr(self)]
        lines += [str(c) for c in self.candidates]
        return "\n".join(lines)
