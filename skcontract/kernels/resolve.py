"""Resolve a GEMM-class problem for a device: the schedule that will launch, and its kernel.

This is the one place where the kernel catalogue meets the scheduler: the catalogue's entries
go to :func:`skcontract.schedule.schedule_problem` as tile options (tile, occupancy,
efficiency), and the tile it chooses maps back to its entry. The GPU backend resolves each
step once when a plan is compiled; the plan carries the schedule, and the launcher launches
exactly that schedule. Pure Python: no CuPy import, so plans for a GPU can be shown anywhere.

>>> from skcontract.schedule import DeviceInfo, GemmProblem
>>> r = resolve_gemm(GemmProblem(2176, 1024, 4096, dtype="float16"), DeviceInfo.h200())
>>> r.entry.FAMILY, r.schedule.tile, str(r.schedule.mode)
('Wgmma', (128, 128, 64), 'hybrid')
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from ..dtypes import EXACT, X3_DEFAULT_MIN_K, complex64_precision, float32_precision
from ..kinds import Kind
from ..layout import copy_lines
from ..schedule import DeviceInfo, GemmProblem, Schedule, TileOption, schedule_problem
from ..schedule.table import INDEX_MAX, TableOverflow
from ..schedule.types import AUTO, CLUSTER, DATA_PARALLEL, HYTIS
from .catalogue import (CATALOGUE, DOT_CATALOGUE, INPUT_DTYPES,
                        SMEM_RESERVED_PER_CTA, Dot, Entry, entries_for, catalogue_key,
                        Wgmma, WgmmaKMajor, dot_entries, output_tiles, pending_for,
                        TF32X3, streaming_wanted, streaming_wave_tile)
from .embed import REAL_OF, embedding
from .forms import dot_form, form_aligned
from .outer import plan_outer
from .small_batched import SmallLaunch, plan_folded, plan_small
from .operands import Operand, Product, is_vec16, matrix_layout, product_of, rows_off_lines
from .specs import CXX_TYPES, VEC16_BYTES, specialise
from .step_launch import StepLaunch, dot_spec

DEFAULT_REDUCTION = "deterministic"
"""The fixup the GPU engine uses unless told otherwise: bitwise run-to-run reproducible, as
numpy users expect (auto may pick the arrival protocol's shared sum, also reproducible)."""


K_MAJOR = ("row", "col")
"""The (A, B) layouts that put K innermost in both operands: what tf32 and s8 wgmma read."""


def k_major_only(entry: Entry) -> bool:
    """Whether ``entry`` reads K-major operands only (no kernel of it for row-major B)."""
    return ("row", "row") not in entry.layouts()


def turns_operands(entry: Entry) -> bool:
    """Whether ``entry`` reads MN-major operands by turning them K-major in its stages (the
    3xTF32 entries: :meth:`~.catalogue.Wgmma.transposes`)."""
    return isinstance(entry, WgmmaKMajor) and not k_major_only(entry)


def runs_exact(entry: Entry) -> bool:
    """Whether ``entry`` runs float32 exactly whatever the precision asked (a Dot entry, or
    one of the exact entries that follow the tensor-core ones under a precision's key)."""
    return isinstance(entry, Dot) or entry in CATALOGUE["float32"]


K_MAJOR_KEYS = tuple(key for key, entries in CATALOGUE.items()
                     if any(isinstance(b, Wgmma) for b in entries)
                     and all(k_major_only(b) for b in entries if isinstance(b, Wgmma)))
"""The catalogue keys (a dtype, or a float32 precision) whose Wgmma entries read K-major
operands only (WgmmaInt8, WgmmaTf32; the 3xTF32 entries turn MN-major operands K-major in
their stages)."""


class Resolved(NamedTuple):
    """A schedule and the catalogue entry whose kernel runs it."""

    schedule: Schedule
    entry: Entry


_DEVICES: dict = {}


def device_info(dev: int) -> DeviceInfo:
    """The DeviceInfo of CUDA device ``dev`` (read once)."""
    info = _DEVICES.get(dev)
    if info is None:
        info = _DEVICES[dev] = DeviceInfo.from_cupy(dev)
    return info


def compute_capability(device: DeviceInfo) -> int:
    major, minor = device.compute_capability
    return 10 * major + minor


def resolve_gemm(problem: GemmProblem, device: DeviceInfo, *, mode: str = "auto",
                 reduction: str = DEFAULT_REDUCTION, tile=None, precision: str | None = None,
                 vec16: bool = True, im2col: str | None = None, masked: bool = False,
                 merged: bool = False,
                 operand_elems: int | None = None, layouts: tuple | None = None,
                 b_off_lines: bool = False, exclude: frozenset = frozenset(),
                 **options) -> Resolved:
    """The schedule our kernels would run ``problem`` with on ``device``, and the entry.

    ``tile``: force the entries of a tile by its (BM, BN) or (BM, BN, BK) (where a tile has
    entries of two occupancies, the model picks between those offered to the product by
    their waves and loops, :meth:`~.catalogue.Entry.fills_waves` and
    :meth:`~.catalogue.Entry.runs_long_enough`, or among all when none), or the entries
    of (BM, BN, BK, CTAs an SM) or one entry by (BM, BN, BK, CTAs an SM, CTAs a work unit: 2
    for a cluster pair, whose unit tile a single CTA's may equal; a shorter tile names the
    entries of the fewest), offered then whatever its waves and loops;
    :data:`.catalogue.PENDING` ones and those offered only where B's rows start off lines
    included (else a memory-bound problem gets its dtype's streaming entry where one is
    offered and fits, :data:`.catalogue.gates.MEMORY_BOUND_REUSE`); ``precision``: float32 on
    the entries of that precision (:data:`.catalogue.PRECISIONS`; None: exact); ``vec16``: both
    operands are 16-byte aligned (entries that need it are left out otherwise);
    ``im2col``: the problem is a convolution's implicit GEMM, on the entries whose
    convolution entry gets A that way
    ("gather" or "tma", :attr:`~.catalogue.Entry.IM2COL`); ``masked``: a folded
    convolution, on the entries that zero its padding taps
    (:attr:`.catalogue.Wgmma.masks_stages`); ``merged``: a convolution of merged groups, on
    the entries with merged-groups kernels (:attr:`.catalogue.Wgmma.merges_groups`);
    ``operand_elems``: the elements the operands
    hold where that is not (M + N) K (the memory-bound rule's count); ``layouts``: the (A,
    B) layouts ("row" / "col") of the operands, on the entries specialised for them (None:
    any, as when planning from shapes); ``b_off_lines``: B's rows start off
    :data:`~.catalogue.LINE_BYTES` lines (the entries offered only then are offered);
    ``exclude``: entries not to plan on (a kernel this device cannot build as declared:
    :func:`.gemm.plan_launch`). Other
    ``options`` (grid, splits, groups, ...) go to the scheduler. TypeError when no kernel
    takes the dtype; ValueError for a tile no entry has.
    """
    cc = compute_capability(device)
    entries = tuple(b for b in entries_for(problem.dtype, precision, cc, vec16,
                                       b_off_lines or tile is not None) if b not in exclude)
    if tile is not None:
        want = tuple(int(t) for t in tile)
        offered = entries + tuple(b for b in pending_for(problem.dtype, cc)
                                if vec16 or not b.vec16_only)
        offered = tuple(b for b in offered if im2col is None or b.IM2COL == im2col)
        entries = tuple(b for b in offered
                      if (*b.tile, b.ctas_per_sm, b.CLUSTER)[:len(want)] == want)
        if not entries:
            raise ValueError(f"gemm: no {problem.dtype} kernel with tile {want}; have "
                             f"{[b.tile for b in offered]}")
    if im2col is not None:
        entries = tuple(b for b in entries if b.IM2COL == im2col)
    elif tile is None:
        entries = tuple(b for b in entries if not b.im2col_only)
    if layouts is not None:
        named = entries
        entries = tuple(b for b in entries if tuple(layouts) in b.layouts())
        if tile is not None and named and not entries:
            raise ValueError(f"gemm: the {problem.dtype} kernel of tile {tuple(tile)} reads "
                             f"{named[0].layouts()} operands only, not {tuple(layouts)}")
    if masked:
        entries = tuple(b for b in entries if getattr(b, "masks_stages", False))
    if merged:
        entries = tuple(b for b in entries if getattr(b, "merges_groups", False))
    if reduction == CLUSTER:
        entries = tuple(b for b in entries if b.cluster_sum)
        if not entries:
            raise ValueError(f"gemm: reduction='cluster' needs a kernel that sums in a "
                             f"cluster's shared memory; none takes {problem.dtype} on "
                             f"compute capability {cc}")
    if tile is not None and len(tile) < 5 and entries:  # no unit's CTAs named: the fewest
        entries = tuple(b for b in entries if b.CLUSTER == min(x.CLUSTER for x in entries))
    one_entry = tile is not None and len(tile) >= 4  # forced whatever its waves and loops
    by_entry, fit = {}, {}  # (tile, CTAs an SM, CTAs a unit) -> entry: what names an entry
    for b in entries:
        c = ctas_on(b, device)
        tiles = output_tiles(problem.m, problem.n, problem.batch, b.tile)
        units = c * device.with_clusters(b.CLUSTER).sms
        if c > 0:
            fit.setdefault((b.tile, c, b.CLUSTER), b)
            if one_entry or (b.fills_waves(tiles, units) and b.runs_long_enough(problem.k)):
                by_entry.setdefault((b.tile, c, b.CLUSTER), b)
    if tile is not None and not by_entry:  # a forced tile none of whose entries is offered
        by_entry = fit
    wave = None
    if tile is None and streaming_wanted(problem.m, problem.n, problem.k, problem.batch,
                                         device.sms, operand_elems):
        wave = _one_wave(problem, device, by_entry) if mode == AUTO and im2col is None \
            and not _shaped(options) else None
        if wave:
            by_entry, mode = wave, DATA_PARALLEL
        else:
            by_entry = {key: b for key, b in by_entry.items() if b.streams} or by_entry
    if tile is None and mode == HYTIS:  # forced: the entries that run a small tile
        by_entry = {key: b for key, b in fit.items() if b.option().small_tiles} or by_entry
    if not by_entry:
        raise ValueError(f"gemm: no {problem.dtype} kernel's shared memory fits on "
                         f"{device.name}")
    while True:
        options_ = [_tile_option(b, c, im2col is not None) for (_, c, _), b in by_entry.items()]
        schedule = schedule_problem(problem, device, mode=mode, reduction=reduction,
                                    tiles=options_, **options)
        key = schedule.tile, schedule.device.ctas_per_sm, schedule.cluster
        if schedule.protocol in by_entry[key].protocols():
            if wave:
                schedule = replace(schedule, reason=f"memory-bound: one data-parallel wave "
                                   f"of {schedule.tile[0]}x{schedule.tile[1]} tiles")
            return Resolved(schedule, by_entry[key])
        # an entry is planned only with the fixup protocols its kernels are built for (a
        # tf32 register-trading entry runs no arrival, which mode "aligned" or a forced
        # reduction may ask for): plan again without it
        del by_entry[key]
        if not by_entry:
            raise ValueError(f"gemm: no {problem.dtype} kernel runs the {schedule.protocol} "
                             f"fixup protocol that mode={mode!r}, reduction={reduction!r} "
                             f"plans for this product")


SHAPING_OPTIONS = ("grid", "splits", "fragment_accumulators")
"""The scheduler's options that shape a schedule's grid or splits: a caller who names one
gets the model's schedule on the streaming entry, not the memory-bound rule's one wave."""


def _shaped(options: dict) -> bool:
    """Whether ``options`` name any of :data:`SHAPING_OPTIONS`."""
    return any(options.get(name) not in (None, False) for name in SHAPING_OPTIONS)


def _one_wave(problem: GemmProblem, device: DeviceInfo, by_entry: dict) -> dict:
    """The entries of ``by_entry`` (single CTAs of the family of a streaming entry, a
    :attr:`~.catalogue.Entry.streams` one) whose tile runs a memory-bound ``problem`` in one
    data-parallel wave (:func:`.catalogue.gates.streaming_wave_tile`); empty where no tile
    does."""
    families = {b.FAMILY for b in by_entry.values() if b.streams}
    single = {key: b for key, b in by_entry.items() if key[2] == 1 and b.FAMILY in families}
    tile = streaming_wave_tile(problem.m, problem.n, problem.batch, device.sms,
                               {key[0][:2] for key in single})
    return {key: b for key, b in single.items() if key[0][:2] == tile} if tile else {}


DOT_REPRODUCIBLE_REDUCTION = "arrival"
"""The protocol auto runs the Dot family's split products with when a bitwise reproducible
result is asked for (the deterministic default). The Dot kernels' arrival merge is
reproducible (the last arrival sums the peers' output sums in a fixed order) and takes one
parallel step, where the deterministic chain hands a tile from split to split, about a
microsecond a hand-off on the H200, so a long dot over hundreds of splits waits hundreds of
microseconds in the chain (evidence: docs/benchmarks/calibration.md). The cost model charges
a partial by its bytes, which for an output-sized partial misses that latency."""


def resolve_dot(form, dtype: str, device: DeviceInfo, *, mode: str = "auto",
                reduction: str = DEFAULT_REDUCTION, **options) -> Resolved:
    """The schedule the Dot kernel runs a memory-bound product with (``form``: a
    :class:`.dot.DotForm`), and its entry: the entries of the form's shape are the tile
    options, so rows that are few and long get one-row tiles split over k."""
    entries = dot_entries(dtype, form.shape)
    if not entries:
        raise TypeError(f"dot: no {form.shape} kernel takes {dtype}")
    if mode == "auto" and reduction == "deterministic":
        reduction = DOT_REPRODUCIBLE_REDUCTION
    options_ = [_tile_option(b, c, False) for b in entries if (c := ctas_on(b, device)) > 0]
    by_tile = {b.tile: b for b in entries}
    kind = Kind.DOT if form.outputs == 1 else Kind.GEMV
    schedule = schedule_problem(form.problem(dtype), device, mode=mode, reduction=reduction,
                                tiles=options_, kind=kind, **options)
    schedule = replace(schedule, reason=f"Dot {form.shape} kernel; {schedule.reason}")
    return Resolved(schedule, by_tile[schedule.tile])


_MEMO_MAX = 4096
"""Values :func:`ctas_on` and :func:`_tile_option` keep (by entry and device or occupancy)
before they start again."""
_CTAS: dict = {}
_OPTIONS: dict = {}


def _remembered(memo: dict, key, make):
    """``memo[key]``, made by ``make()`` the first time."""
    value = memo.get(key)
    if value is None:
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        value = memo[key] = make()
    return value


def ctas_on(entry: Entry, device: DeviceInfo) -> int:
    """CTAs of ``entry`` that fit on one SM of ``device``: its declared occupancy, fewer where
    the device's shared memory holds fewer of its largest specialisation, over the layouts
    it reads (0: none). Worked out once for each entry and device (both values)."""
    def make():
        smem = max(specialise(entry, protocol="none", a_layout=la, b_layout=lb).smem_bytes
                   for la, lb in entry.layouts())
        return min(entry.ctas_per_sm, device.smem_per_sm // (smem + SMEM_RESERVED_PER_CTA))
    return _remembered(_CTAS, (entry, device), make)


def _tile_option(entry: Entry, ctas: int, conv: bool) -> TileOption:
    """The tile option the scheduler plans ``entry`` with at ``ctas`` CTAs an SM (made once
    for each). A convolution's kernels (``conv``) run one tile shape (no HyTiS small rows),
    and their producer (im2col) is not the one the solo fractions describe: their partial
    waves are priced as full ones."""
    def make():
        smalls = {"small_tiles": (), "solo_fraction": 1.0} if conv else {}
        return replace(entry.option(), ctas_per_sm=ctas, **smalls)
    return _remembered(_OPTIONS, (entry, ctas, conv), make)


def entry_for(schedule: Schedule, dtype: str, precision: str | None, cc: int | None,
              layouts: tuple | None = None) -> Entry:
    """The catalogue entry that runs ``schedule``: the one with its tile and its CTAs an SM
    (a Dot entry for a memory-bound schedule, whose problem is rows x 1 or 1 x columns, in
    its own orientation), among those specialised for the operands' (A, B) ``layouts`` when
    they are given; ``precision`` as :func:`resolve_gemm` takes it."""
    p = schedule.problem
    dots = () if min(p.m, p.n) > 1 else DOT_CATALOGUE.get(dtype, ())
    # a forced tile may name a pending entry (none are pending under a precision's key)
    pending = () if catalogue_key(dtype, precision) != dtype else pending_for(dtype, cc)
    entries = tuple(dots) + entries_for(dtype, precision, cc) + pending
    tile, ctas = tuple(schedule.tile), schedule.device.ctas_per_sm
    fits = [(ctas_on(b, schedule.device), b) for b in entries
            if b.tile == tile and schedule.protocol in b.protocols()
            and (layouts is None or b in dots or tuple(layouts) in b.layouts())]
    # the entry of the schedule's occupancy; else one that holds at least as many CTAs an
    # SM (the schedule's co-resident CTAs are resident on it too); first those of the
    # schedule's CTAs a unit, else another's (a schedule built by hand for a wide pair's
    # tile, which no single CTA has, names no unit's CTAs and still gets the pair)
    for c, b in sorted(fits, key=lambda cb: (cb[1].CLUSTER != schedule.cluster,
                                             cb[0] != ctas)):
        if c >= ctas:
            return b
    raise ValueError(f"gemm: no {dtype} kernel runs tile {tuple(schedule.tile)} at "
                     f"{ctas} CTAs an SM on compute capability {cc} (have "
                     f"{[(b.tile, b.ctas_per_sm) for b in entries]})")


K_MAJOR_COPY_BANDWIDTH = 3.8e12
"""Bytes a second the K-major copy (``relayout``) reads and writes on the H200, in 16-byte
vectors: the low end of its range there (evidence: docs/benchmarks/calibration.md)."""
TF32X3_RATE = 100e12
"""Flops a second of the 3xTF32 entries on products of many tiles on the H200: the middle of
their range there (evidence: docs/benchmarks/calibration.md)."""
TURN_COST_SHARE = 0.15
"""The in-stage pass's cost as a share of a 3xTF32 product's time, on compute-bound products
(H200): a copy K-major estimated at less than this share of the product is made, and the
K-major kernel runs (where the copy is that cheap, turning the operand in the stages is no
faster, and on the largest squares slower); a dearer one (an operand large against the
product's flops, as B of 256 x 3584 x 8192, a 45% share) is not, and the kernel turns the
operand in its stages (evidence: docs/benchmarks/calibration.md)."""


def k_major_copy_elems(a_copied: bool, b_copied: bool, m: int, n: int, k: int,
                       a_matrices: int, b_matrices: int) -> int:
    """Elements a K-major copy of a product's MN-major operands moves: A's m x k, B's k x n,
    each of as many matrices as the operand holds (one where its batch repeats it: the copy
    is made once and read back with a batch stride of 0)."""
    return a_copied * a_matrices * m * k + b_copied * b_matrices * k * n


def reads_k_major(dtype: str, precision: str | None, k: int, cc: int | None,
                  aligned: bool = True, copied_elems: int = 0, flops: float = 0.0) -> bool:
    """Whether ``dtype`` operands at ``precision`` run on compute capability ``cc``'s Wgmma
    entries once copied K-major (A row-major, B column-major): where those entries read
    K-major operands only (:class:`~.catalogue.WgmmaTf32`, ``WgmmaInt8``); where they turn
    MN-major ones in their stages (``WgmmaTf32x3``), when the operands as they lie are not
    ``aligned`` (their rows off 16 bytes, which TMA cannot read) or the copy of their
    ``copied_elems`` elements costs less than :data:`TURN_COST_SHARE` of a product of
    ``flops``. Either way a K-major copy's rows of ``k`` elements must lie on 16 bytes (else
    the portable entries run the operands in any layout, uncopied)."""
    elem = CXX_TYPES[dtype][1]
    if (k * elem) % VEC16_BYTES:
        return False
    entries = entries_for(dtype, precision, cc)
    if catalogue_key(dtype, precision) in K_MAJOR_KEYS:
        return any(map(k_major_only, entries))
    if not any(map(turns_operands, entries)):
        return False
    copy_s = 2 * copied_elems * elem / K_MAJOR_COPY_BANDWIDTH
    return not aligned or copy_s <= TURN_COST_SHARE * flops / TF32X3_RATE


def k_major_copies(product: Product, precision: str | None,
                   cc: int | None) -> tuple[bool, bool]:
    """Which of a product's operands are copied K-major (A row-major, B column-major) before
    the launch: those MN-major where ``product``'s dtype at ``precision`` runs on ``cc``'s
    Wgmma entries once copied (:func:`reads_k_major`); none for a product of one column."""
    la, lb = product.layouts
    if product.n <= 1 or (la, lb) == K_MAJOR:
        return False, False
    copies = (la != "row", lb != "col")
    elems = k_major_copy_elems(*copies, product.m, product.n, product.k, *product.matrices)
    flops = 2.0 * product.batch * product.m * product.n * product.k
    if reads_k_major(product.dtype, precision, product.k, cc, all(product.vec16), elems,
                     flops):
        return copies
    return False, False


def copied_views(product: Product, copies: tuple[bool, bool]) -> Product:
    """``product`` as the launch reads it once the operands ``copies`` names are copied
    K-major (fresh arrays: their base on a line; a broadcast operand's copy is one matrix
    read with a batch stride of 0)."""
    if not any(copies):
        return product
    m, n, k, batch = product.m, product.n, product.k, product.batch
    elem = CXX_TYPES[product.dtype][1]
    (la, lb), (va, vb), b_off = product.layouts, product.vec16, product.b_off_lines
    if copies[0]:
        la, ld = matrix_layout(m, k, k, 1)
        va = is_vec16(0, ld, m * k if product.matrices[0] > 1 else 0, batch, elem)
    if copies[1]:
        lb, ld = matrix_layout(k, n, 1, k)
        sb = k * n if product.matrices[1] > 1 else 0
        vb = is_vec16(0, ld, sb, batch, elem)
        b_off = rows_off_lines(0, ld, sb, elem)
    return replace(product, layouts=(la, lb), vec16=(va, vb), b_off_lines=b_off)


def step_product(step) -> Product:
    """The :class:`~.operands.Product` of a plan step for the views the array backends make
    of contiguous operands (a copy where the plan says ``needs_copy`` is C-contiguous; the
    batch strides of :func:`_batch_strides`)."""
    a_row = step.needs_copy[0] or step.layouts[0] == "row"
    b_row = step.needs_copy[1] or step.layouts[1] == "row"
    m, n, k, batch = step.m, step.n, step.k, step.batch
    elem = step.dtype.itemsize
    lda, ldb = copy_lines(step)
    sa, sb = _batch_strides(step, lda, ldb)
    xs = (sa, lda, 1) if a_row else (sa, 1, m)
    ys = (sb, ldb, 1) if b_row else (sb, 1, k)
    a = matrix_layout(m, k, *xs[1:])
    b = matrix_layout(k, n, *ys[1:])
    form = dot_form(batch, m, n, k, xs, ys, (m * n, n, 1))
    aligned = (True, True) if form is None else form_aligned(form, 0, 0, elem)
    ha, hb = step.holds_batch
    return Product(step.dtype.name, batch, m, n, k, (a[0], b[0]),
                   (is_vec16(0, a[1], sa, batch, elem), is_vec16(0, b[1], sb, batch, elem)),
                   form, aligned, rows_off_lines(0, b[1], sb, elem),
                   (batch if ha else 1, batch if hb else 1))


def step_operands(step, cc: int | None = None) -> tuple[tuple[str, str], bool]:
    """The (A, B) layouts a plan step's matrix product sees on compute capability ``cc``,
    and whether both operands are 16-byte aligned: the views of contiguous operands
    (:func:`step_product`), or their K-major copies where the step's float32 precision
    reads them so (:func:`k_major_copies`)."""
    product = step_product(step)
    views = copied_views(product, k_major_copies(product, step.float32_precision, cc))
    return views.layouts, all(views.vec16)


def _batch_strides(step, lda: int, ldb: int) -> tuple[int, int]:
    """The (A, B) batch strides of the operands' views in elements: a whole matrix (of
    lines ``lda`` / ``ldb`` where row-major: :func:`skcontract.layout.copy_lines`), or 0
    for a batch of one and for an operand broadcast over the batch
    (:attr:`~skcontract.plan.plan.Step.holds_batch`)."""
    if step.batch <= 1:
        return 0, 0
    ha, hb = step.holds_batch
    return (step.m * lda if ha else 0), (step.k * ldb if hb else 0)


def unscheduled_reason(step) -> str | None:
    """Why the GPU runs a GEMM-class plan step without a schedule (CuPy's operations run
    it, the backend's documented fallback), or None when a kernel takes it."""
    name = step.dtype.name
    if name not in INPUT_DTYPES and name not in REAL_OF:
        return f"no kernel for {name}: CuPy runs it"
    if min(step.m, step.n, step.k, step.batch) == 0:
        return "empty: nothing to launch"
    # a complex product's real form is 2n x 2k (the Dot kernel reads a memory-bound one as
    # it lies)
    widen = 2 if name in REAL_OF and step_product(step).form is None else 1
    if max(step.m, widen * step.n, widen * step.k, step.batch) > INDEX_MAX:
        return f"a dimension beyond the kernels' {INDEX_MAX}: CuPy runs it"
    return None


def resolve_step(step, device: DeviceInfo, product: Product | None = None,
                 **options) -> StepLaunch | None:
    """The launch the GPU runs a plan step with (:class:`~.step_launch.StepLaunch`), at the
    step's ``precision``, for its operands as the backends view contiguous ones
    (:func:`step_product`) or as ``product`` says (a call's operands laid out otherwise:
    the step planned again for them); a batch of small products gets the small-batched
    kernel's launch (:class:`.small_batched.SmallLaunch`); None when the step is not
    GEMM-class or no kernel takes its dtype (the backend's documented fallback runs it).
    Memory-bound steps with a Dot form run on the Dot kernel, exactly whatever the precision
    (:func:`resolve_product`)."""
    if not step.is_gemm_class or unscheduled_reason(step) is not None:
        return None
    if product is not None and product.dtype not in INPUT_DTYPES and \
            product.dtype not in REAL_OF:
        return None
    product = step_product(step) if product is None else product
    small = small_launch(product)
    if small is not None:
        return small
    try:
        if product.dtype in REAL_OF:
            return resolve_complex(product, device, step.precision,
                                   associative=step.associative, **options)
        if product.dtype == "float32" and step.precision is None:
            return float32_default(product, device, kind=step.kind,
                                   associative=step.associative, **options)
        precision = float32_precision(step.precision) if product.dtype == "float32" else None
        return resolve_product(product, device, precision=precision, kind=step.kind,
                               associative=step.associative, **options)
    except TableOverflow:  # a tile walk beyond 32 bits (TILES_BEYOND_INDEX)
        return None


def small_launch(product: Product) -> SmallLaunch | None:
    """The small-batched kernel's launch of ``product``: a batch of small products (B
    staged once where its batch repeats one matrix), or a tall product with no Dot form
    folded into such a batch (:func:`.small_batched.plan_folded`); None where the kernel
    takes neither."""
    shared_b = product.batch > 1 and product.matrices[1] == 1
    small = plan_small(product.dtype, product.batch, product.m, product.n, product.k,
                       shared_b)
    if small is None and product.batch == 1 and product.form is None:
        small = plan_folded(product.dtype, product.m, product.n, product.k)
    return small


def resolve_complex(product: Product, device: DeviceInfo, precision: str | None = None,
                    **options) -> StepLaunch | None:
    """The launch of a complex product: a memory-bound one (a Dot form) on the Dot kernel,
    its operands read as they lie (:func:`complex_dot`); any other on its real form
    (:mod:`.embed`): the real product planned by :func:`resolve_product` (complex64 at
    :func:`complex_precision`), the launch keeping the complex operands' ``product`` and
    the form (``embed``). None where neither runs it (CuPy does)."""
    if product.form is not None:
        return complex_dot(product, device, **options)
    form = embedding(product)
    if form is None:
        return None
    real = form.real
    at = complex_precision(product.dtype, precision, compute_capability(device))
    kind = Kind.BATCHED_GEMM if real.batch > 1 else Kind.GEMM
    launch = resolve_product(real, device, precision=at, dot=False, kind=kind, **options)
    words = form.describe(product.dtype) + (f" at {at}" if at is not None else "")
    schedule = replace(launch.schedule, reason=f"{words}; {launch.schedule.reason}")
    return replace(launch, schedule=schedule, product=product, embed=form)


def complex_dot(product: Product, device: DeviceInfo, **options) -> StepLaunch | None:
    """The Dot kernel's launch of a memory-bound complex product (exact: the accumulator is
    the operands' complex dtype); None where its entries do not read the operands as they
    lie (complex128 off 16 bytes: :attr:`~.catalogue.dot.Dot.aligned_only`)."""
    entries = dot_entries(product.dtype, product.form.shape)
    if any(e.aligned_only for e in entries) and not all(product.form_aligned):
        return None
    return resolve_product(product, device, **options)


def complex_precision(dtype: str, precision: str | None, cc: int | None) -> str | None:
    """The float32 precision a ``dtype`` (complex) product's real form runs at on compute
    capability ``cc``: complex64 at float32 accuracy by default, on the 3xTF32 entries where
    they are offered (:func:`~skcontract.dtypes.complex64_precision`); complex128 (float64)
    has none."""
    if dtype != "complex64":
        return None
    return complex64_precision(precision, TF32X3 if x3_offered(cc) else None)


def x3_offered(cc: int | None) -> bool:
    """Whether compute capability ``cc`` has 3xTF32 tensor-core entries (else "3xtf32" runs
    on the exact ones)."""
    return any(not runs_exact(b) for b in entries_for("float32", TF32X3, cc))


def float32_default(product: Product, device: DeviceInfo, **options) -> StepLaunch:
    """The launch of a plan's float32 product at the default precision (None): float32
    accuracy the fastest way, in the memory the exact kernels take. The 3xTF32 launch where
    the device offers its tensor-core entries, the sum is at least
    :data:`~skcontract.dtypes.X3_DEFAULT_MIN_K` long (from there its errors are no larger
    than exact float32's), it copies no more of the operands than the exact launch (its
    kernels turn MN-major operands K-major in their stages: no K-major copy, so a plan's
    peak is the exact one's) and it is predicted sooner, its copies included
    (:func:`launch_time_us`); else the exact one (FFMA, or the Dot kernel of a memory-bound
    product). ``options`` go to :func:`resolve_product`."""
    exact = resolve_product(product, device, precision=None, **options)
    if product.k < X3_DEFAULT_MIN_K or exact.form is not None or \
            not x3_offered(compute_capability(device)):
        return exact
    try:
        x3 = resolve_product(product, device, precision=TF32X3, k_major=False, **options)
    except ValueError:  # a forced tile or mode no 3xTF32 entry runs
        return exact
    if runs_exact(x3.entry) or copied_elems(x3) > copied_elems(exact) or \
            launch_time_us(x3) >= launch_time_us(exact):
        return exact
    s = x3.schedule
    reason = f"float32 at 3xtf32 (K {product.k:,} >= {X3_DEFAULT_MIN_K:,}); {s.reason}"
    return replace(x3, schedule=replace(s, reason=reason))


def copied_elems(launch: StepLaunch) -> int:
    """The elements of a launch's operand copies (K-major, or onto 16-byte rows)."""
    p = launch.product
    return k_major_copy_elems(*launch.copies, p.m, p.n, p.k, *p.matrices) + \
        k_major_copy_elems(*launch.aligned_copies, p.m, p.n, p.k, *p.matrices)


def launch_time_us(launch: StepLaunch) -> float:
    """A launch's predicted time: its kernel's, :data:`TURN_COST_SHARE` more for each
    operand its kernel turns K-major in the stages (the schedule's model prices the tile,
    not the layout), and its operand copies' (:func:`copied_elems`) at
    :data:`K_MAJOR_COPY_BANDWIDTH`, each element read and written once."""
    spec = launch.spec
    turned = 0
    if turns_operands(spec.entry):
        turned = (not spec.a_kcontig) + (not spec.b_kcontig)
    elem = CXX_TYPES[launch.product.dtype][1]
    return launch.schedule.predicted_time_us * (1 + TURN_COST_SHARE * turned) + \
        2 * copied_elems(launch) * elem / K_MAJOR_COPY_BANDWIDTH * 1e6


TILES_BEYOND_INDEX = f"its tiles beyond the kernels' {INDEX_MAX}: CuPy runs it"
"""The reason a step shows whose dimensions fit the kernels' index but its tile walk does
not (a Dot of ``batch x rows`` tiles of one or eight rows; :class:`TableOverflow`)."""


def resolve_product(product: Product, device: DeviceInfo, *, precision: str | None = None,
                    dot: bool = True, schedule=None, exclude: frozenset = frozenset(),
                    pad: bool = True, k_major: bool = True, **options) -> StepLaunch:
    """The launch of a matrix product on ``device`` (:class:`~.step_launch.StepLaunch`): the
    one function that plans the launches of einsum's steps and of ``gemm()``. A product with
    a Dot form runs on the Dot kernel where ``dot`` allows it, exactly whatever the
    precision; else the operands :func:`k_major_copies` names are copied K-major, and
    :func:`resolve_gemm` plans the product as the launch reads it. ``schedule``: a caller's
    :class:`Resolved` or Schedule to launch as it is (checked against the operands:
    ValueError or TypeError where it is not one for them); ``exclude``: entries not to plan
    on (a kernel this device does not build as declared). ``options`` (mode, reduction,
    tile, grid, kind, ...) go to :func:`resolve_gemm`. ``pad``: operands whose rows miss
    16 bytes may be copied onto them (:func:`aligned_copies`; False for a caller that
    makes no such copies). ``k_major``: MN-major operands may be copied K-major (False:
    the entries that turn them in their stages run them, or those that read them as they
    lie). The schedule's reason names the operands copied."""
    dtype = product.dtype
    given_dot = isinstance(schedule, Resolved) and isinstance(schedule.entry, Dot)
    if product.form is not None and dtype in DOT_CATALOGUE and (
            given_dot or (schedule is None and dot)):
        return _dot_launch(product, device, schedule, options)
    cc = compute_capability(device)
    copies = k_major_copies(product, precision, cc) if k_major else (False, False)
    if schedule is not None:
        return _given_launch(product, schedule, precision, cc, copies)
    views = copied_views(product, copies)
    problem = GemmProblem(product.m, product.n, product.k, batch=product.batch, dtype=dtype)
    r = resolve_gemm(problem, device, vec16=all(views.vec16), layouts=views.layouts,
                     precision=precision, b_off_lines=views.b_off_lines, exclude=exclude,
                     **options)
    if any(copies) and not (k_major_only(r.entry) or turns_operands(r.entry)):
        copies, views = (False, False), product  # an exact fallback reads them as they are
    if pad and not any(copies) and not all(views.vec16) and options.get("tile") is None:
        padded = aligned_copies(views, r, device, precision, exclude, options)
        if padded is not None:
            pads, r, views = padded
            return _launch(product, r, views, copies, precision, pads)
    return _launch(product, r, views, copies, precision)


def aligned_copies(views: Product, r: Resolved, device: DeviceInfo, precision, exclude,
                   options: dict):
    """``(pads, resolved, views)`` where copying the operands whose rows miss 16 bytes into
    rows padded to 16 bytes (in their own layouts: :func:`.relayout.aligned`) lets a
    kernel that needs aligned rows run the product sooner, copies included, than ``r``
    (planned on the operands as they lie); None where it does not. The copies' time is
    their bytes read and written at :data:`K_MAJOR_COPY_BANDWIDTH`."""
    pads = tuple(not v for v in views.vec16)
    padded = padded_views(views, pads)
    problem = r.schedule.problem
    try:
        other = resolve_gemm(problem, device, vec16=True, layouts=padded.layouts,
                             precision=precision, b_off_lines=padded.b_off_lines,
                             exclude=exclude, **options)
    except ValueError:
        return None
    if not other.entry.vec16_only:
        return None
    elem = CXX_TYPES[views.dtype][1]
    m, n, k = views.m, views.n, views.k
    moved = pads[0] * views.matrices[0] * m * k + pads[1] * views.matrices[1] * k * n
    copy_us = 2 * moved * elem / K_MAJOR_COPY_BANDWIDTH * 1e6
    if other.schedule.predicted_time_us + copy_us >= r.schedule.predicted_time_us:
        return None
    return pads, other, padded


def padded_views(product: Product, pads: tuple[bool, bool]) -> Product:
    """``product`` as the launch reads it once the operands ``pads`` names are copied into
    rows padded to 16 bytes (fresh arrays: their base on a line, rows and batches on 16
    bytes)."""
    elem = CXX_TYPES[product.dtype][1]
    va, vb = (True if p else v for p, v in zip(pads, product.vec16))
    b_off = product.b_off_lines
    if pads[1]:  # B's lines (rows, or columns where column-major) of `length` elements
        row = product.layouts[1] == "row"
        length, lines = (product.n, product.k) if row else (product.k, product.n)
        ld = -(-length * elem // VEC16_BYTES) * VEC16_BYTES // elem
        b_off = rows_off_lines(0, ld, ld * lines if product.matrices[1] > 1 else 0, elem)
    return replace(product, vec16=(va, vb), b_off_lines=b_off)


def _dot_launch(product: Product, device: DeviceInfo, schedule: Resolved | None,
                options: dict) -> StepLaunch:
    """The Dot kernel's launch of a memory-bound product: the caller's Dot schedule, or the
    one :func:`resolve_dot` plans with ``options``."""
    form = product.form
    if schedule is None:
        dot_options = {x: v for x, v in options.items() if x not in ("kind", "associative")}
        schedule = resolve_dot(form, product.dtype, device, **dot_options)
    elif schedule.schedule.problem != form.problem(product.dtype):
        raise ValueError(f"matvec: the schedule is for {schedule.schedule.problem}; the "
                         f"operands' Dot form is {form.problem(product.dtype)}")
    sched, entry = schedule
    if entry.aligned_only and not all(product.form_aligned):
        raise ValueError(f"dot: kernel {entry.name} reads operands on 16 bytes; these are "
                         f"{product.describe()}")
    return StepLaunch(sched, dot_spec(entry, sched.protocol, product.form_aligned), form=form,
                      product=product)


def _given_launch(product: Product, schedule, precision, cc, copies) -> StepLaunch:
    """The launch of a caller's schedule (a :class:`Resolved` or a Schedule) on
    ``product``'s operands, copied K-major where its entry reads them so."""
    if isinstance(schedule, Resolved):
        sched, entry = schedule
        if not (k_major_only(entry) or turns_operands(entry)):
            copies = (False, False)
    else:
        sched = schedule
        entry = entry_for(sched, product.dtype, precision, cc,
                          copied_views(product, copies).layouts)
    views = copied_views(product, copies)
    _check_schedule(sched, entry, views)
    return _launch(product, Resolved(sched, entry), views, copies, precision)


def _check_schedule(schedule: Schedule, entry: Entry, views: Product) -> None:
    """A caller's schedule must be one for these operands and this kernel."""
    p = schedule.problem
    got = (views.batch, views.m, views.n, views.k)
    if (p.batch, p.m, p.n, p.k) != got or p.groups is not None:
        raise ValueError(f"gemm: the schedule is for batch={p.batch} m={p.m} n={p.n} "
                         f"k={p.k}; the operands are batch={got[0]} m={got[1]} n={got[2]} "
                         f"k={got[3]}")
    if entry.dtype != views.dtype:
        raise TypeError(f"gemm: the schedule's kernel takes {entry.dtype}; the operands are "
                        f"{views.dtype}")
    if tuple(views.layouts) not in entry.layouts():
        raise ValueError(f"gemm: the schedule's kernel {entry.name} reads {entry.layouts()} "
                         f"operands; these are {views.describe()}")
    if entry.vec16_only and not all(views.vec16):
        raise ValueError(f"gemm: kernel {entry.name} needs 16-byte aligned operands; these "
                         f"are {views.describe()}")
    small = schedule.small_tile
    if small is not None and tuple(small[:2]) not in (entry.option().small_tiles or ()):
        raise ValueError(f"gemm: the HyTiS schedule's small tile {tuple(small)} is not one "
                         f"that kernel {entry.name} runs beside its {schedule.tile} tile")


def _launch(product: Product, r: Resolved, views: Product, copies, precision,
            pads: tuple[bool, bool] = (False, False)) -> StepLaunch:
    """The StepLaunch of ``r`` on ``product``'s operands read as ``views`` (after the
    ``copies`` K-major and the copies into rows on 16 bytes, ``pads``)."""
    spec = specialise(r.entry, protocol=r.schedule.protocol, a_layout=views.layouts[0],
                      b_layout=views.layouts[1], a_vec16=views.vec16[0],
                      b_vec16=views.vec16[1])
    schedule = r.schedule
    if any(copies):
        copied = " and ".join(x for x, c in zip("AB", copies) if c)
        schedule = replace(schedule, reason=(
            f"{schedule.reason}; {copied} copied K-major for {precision or product.dtype}"))
    if any(pads):
        padded = " and ".join(x for x, c in zip("AB", pads) if c)
        schedule = replace(schedule, reason=(
            f"{schedule.reason}; {padded} copied into rows on 16 bytes"))
    return StepLaunch(schedule, spec, copies, product=product, aligned_copies=pads)


def sum_view(step) -> tuple[int, int, bool] | None:
    """How a UNARY step's sum runs as a matrix-vector product with a vector of ones on the
    GPU: ``(M, K, leading)``, its kept labels' M elements by its summed labels' K, the
    summed labels leading (the contiguous operand read as an M x K column-major matrix) or
    trailing (row-major); None for a step with no sum, a diagonal, or summed labels
    interleaved with kept ones (whose matrix no view of a contiguous operand is)."""
    if step.kind is not Kind.UNARY or not step.k_labels:
        return None
    term = [lab for ax, lab in enumerate(step.inputs[0]) if ax not in step.squeeze]
    if len(set(term)) != len(term):
        return None
    summed = {term.index(lab) for lab in step.k_labels}
    s = len(summed)
    if summed == set(range(s)):
        return step.m, step.k, True
    if summed == set(range(len(term) - s, len(term))):
        return step.m, step.k, False
    return None


def sum_product(m: int, k: int, leading: bool, dtype: str) -> Product | None:
    """The :class:`~.operands.Product` of a sum as ``A (m x k) @ ones (k x 1)``: A
    column-major (its rows of k elements ``m`` apart) where the summed labels lead, else
    row-major; None where it has no Dot form."""
    a = Operand(0, (m, k), (1, m) if leading else (k, 1), dtype, 0)
    ones = Operand(0, (k, 1), (1, 1), dtype, 0)
    product = product_of(a, ones)
    return product if product is not None and product.form is not None else None


def resolve_sum(step, device: DeviceInfo, **options) -> StepLaunch | None:
    """The Dot kernel's launch of a UNARY step's sum on ``device`` (:func:`sum_view`), for
    its contiguous operand; None where the sum has no such view, its dtype no Dot kernel,
    or its product no Dot form."""
    view = sum_view(step)
    if view is None or step.dtype.name not in DOT_CATALOGUE or step.m * step.k == 0:
        return None
    product = sum_product(*view, step.dtype.name)
    if product is None:
        return None
    dot_options = {x: v for x, v in options.items() if x in ("mode", "reduction")}
    try:
        return resolve_product(product, device, **dot_options)
    except (TableOverflow, ValueError):  # a walk past the index, a forced mode it lacks
        return None


def schedule_plan(plan, device: DeviceInfo, precision: str | None = None, **options):
    """``plan`` with each GEMM-class step's ``schedule`` set to the one the GPU runs it with
    on ``device`` (None for steps no kernel takes). ``precision``: float32 products on the
    entries of that precision (:data:`.catalogue.PRECISIONS`), which the GEMM-class steps
    then carry as ``precision`` (a step planned for another dtype keeps it for float32
    operands it gets at run time); None: at float32 accuracy the fastest way
    (:func:`float32_default`: 3xTF32 or exact, the schedule's reason says which; complex64
    steps likewise, :func:`complex_precision`); "exact" names exact float32 (FFMA). A float32
    step on exact entries (the Dot family, the exact fallback of operands off 16 bytes)
    says None, or "exact" where that was asked for, so that a step planned again for other
    operands stays exact.
    ``options`` (mode, reduction, tile, grid, ...) apply to every step."""
    catalogue_key("float32", float32_precision(precision))  # (ValueError: unknown)

    def one(step):
        if step.kind is Kind.UNARY:
            launch = resolve_sum(step, device, **options)
            return step if launch is None else replace(step, launch=launch)
        if step.kind is Kind.OUTER:
            launch = plan_outer(step.dtype.name, step.batch, step.m, step.n)
            return step if launch is None else replace(step, launch=launch)
        if not step.is_gemm_class:
            return step
        step = replace(step, precision=precision)
        launch = resolve_step(step, device, **options)
        # a float32 step that runs exactly says None, but EXACT where it was asked for: a
        # step planned again (replan.py) must stay exact, not take the default
        ran_exact = EXACT if precision == EXACT else None
        if launch is None:  # CuPy runs it: float32 exactly, whatever the precision asked
            return replace(step, launch=None,
                           unscheduled=unscheduled_reason(step) or TILES_BEYOND_INDEX,
                           precision=ran_exact if step.dtype.name == "float32" else precision)
        exact = step.dtype.name == "float32" and (launch.entry is None or
                                                  runs_exact(launch.entry))
        return replace(step, launch=launch,
                       precision=ran_exact if exact else precision)
    return replace(plan, steps=tuple(one(s) for s in plan.steps))
