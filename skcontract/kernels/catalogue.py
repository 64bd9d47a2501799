"""The kernel catalogue: every kernel the GPU engine can launch, one entry type per mainloop
family.

An entry (a :class:`KernelBase` subclass instance) is one tile configuration of one family:
its C++ mainloop template, its own constraints, its tile / pipeline / warp layout, the
occupancy it is built for and its cost-model efficiency, in one place. The scheduler never
sees this module: :meth:`KernelBase.option` hands it a :class:`~skcontract.schedule.TileOption`
(tile, occupancy, efficiency) as data, and :mod:`.resolve` maps the tile it chooses back to
the entry. :class:`~skcontract.kernels.specs.KernelSpec` is an entry plus the specialisation a
launch needs (fixup protocol, operand layouts, vector widths).

Families (docs/design/kernels.md says how to add one):

========  =====================  ===================================================
family    operands               mainloop
========  =====================  ===================================================
Mma16     float16, bfloat16      mma.sync m16n8k16, fp32 accumulators (sm_80+)
Dmma      float64                DMMA m16n8k{8,16}, fp64 accumulators
Ffma      float32, float64       CUDA-core FMA (exact fp32; skinny and one-row tiles)
Tf32      float32 (opt-in)       mma.sync m16n8k8 tf32, fp32 accumulators
Imma      int8                   mma.sync m16n8k32 s8, int32 accumulators and output
Wgmma     float16, bfloat16      sm_90a: TMA loads, wgmma m64nNk16 from shared memory,
                                 a producer warpgroup and one or two consumer warpgroups
WgmmaTf32 float32 (opt-in)       the Wgmma kernel on wgmma m64nNk8 tf32 (K-major operands)
WgmmaInt8 int8                   the Wgmma kernel on wgmma m64nNk32 s8, int32 accumulators
Dot       float16 ... float64    memory-bound products (batched dots, GEMV)
========  =====================  ===================================================

``ctas_per_sm`` is the occupancy an entry is built for: it is the kernel's
``__launch_bounds__`` minimum, so the compiler keeps registers within it; the compile check
(``tools/compile_check.py``) verifies from ptxas' report that registers and shared memory
allow it, and the launcher refuses a waiting schedule when the compiled kernel's occupancy is
lower (co-residency of waiting splits).

``efficiency`` is the entry's time per unit of tile volume relative to the cost model's
reference tile (128x128x64) at the same dtype; the values are measured on the H200 (the fit
and its data: docs/benchmarks/cost-model-h200.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import ClassVar

from ..dtypes import accumulator_dtype
from ..schedule.device import DeviceInfo
from ..schedule.heuristics import MEASURED_H200_COST, REF_TILE
from ..schedule.table import PROTOCOL_CODES
from ..schedule.types import ARRIVAL, CLUSTER, TileOption

CXX_TYPES = {
    "float16": ("skc::half_t", 2),
    "bfloat16": ("skc::bfloat16_t", 2),
    "float32": ("float", 4),
    "float64": ("double", 8),
    "int8": ("skc::int8_t", 1),
    "int32": ("int", 4),
}
"""dtype name -> (C++ storage type, element bytes)."""

INPUT_DTYPES = {
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "int8": "int32",
}
"""Operand dtypes with kernels -> the output dtype of ``gemm()``. Every kernel accumulates
in :func:`skcontract.dtypes.accumulator_dtype` of its operands."""

TF32 = "tf32"
"""The catalogue key of float32 operands on tf32 tensor cores (``gemm(precision="tf32")``,
or ``allow_tf32=True``)."""
TF32X3 = "3xtf32"
"""The catalogue key of float32 operands on tf32 tensor cores at float32 accuracy
(``gemm(precision="3xtf32")``: each operand split into a tf32 big part and a tf32 small
part, three products summed)."""
PRECISIONS = (TF32, TF32X3)
"""The float32 precisions other than exact, which are also their catalogue keys."""

ARCH_CC = {"sm_80": 80, "sm_90a": 90}
"""Compute capability of each compile target (``KernelBase.min_cc`` is compared with it)."""

VEC_KC_PITCH_MOD, VEC_KC_PITCH_REM = 16, 8
"""Dmma "vec" fragments: a k-contiguous stage's pitch is VEC_KC_PITCH_REM (mod
VEC_KC_PITCH_MOD) doubles, which makes the paired fragment loads conflict-free
(mainloop_dmma.cuh says why)."""
VEC_XC_PAD_BYTES = 16
"""Dmma "vec" fragments: x-contiguous stages are padded by 16 bytes (a pitch of 2 mod 4
doubles for extents that are multiples of 4)."""
XC_PAD_BYTES_FP64 = 64
"""Scalar fp64 fragments: x-contiguous stages are padded by 64 bytes."""
PAD_BYTES = 16
"""Default shared-memory row padding (one 16-byte chunk: conflict-free ldmatrix rows)."""
TF32_KC_PAD = 8
"""tf32: k-contiguous stages are padded by 8 floats (conflict-free 8-byte fragments)."""
VEC16_BYTES = 16
"""Width of one vector copy (cp.async, or a Dot lane's load)."""


def vec16_elems(dtype: str) -> int:
    """Elements of ``dtype`` in one 16-byte vector."""
    return VEC16_BYTES // CXX_TYPES[dtype][1]

DOT_WARPS = 8
"""Warps of a Dot kernel's CTA."""
DOT_UNROLL = 4
"""16-byte loads a Dot lane keeps in flight per operand: 4 x 256 threads x 2 operands x 16 B
is 32 KB a CTA, enough in flight for the copy bandwidth at DOT_CTAS_PER_SM CTAs an SM."""
DOT_CTAS_PER_SM = 4
"""Occupancy the Dot kernels are built for (64 registers a thread)."""
DOT_ROW_SWEEPS = 1
"""Sweeps of the one-row tile's k-iteration. Its splits are whole k-iterations, at least
MIN_ITERS_PER_SPLIT of them (:mod:`skcontract.schedule.heuristics`), so a short k-iteration
is what lets a single long dot (16M elements) split over every resident CTA; the kernel's
loop runs a split's whole range, DOT_UNROLL loads in flight, whatever the iteration."""
DOT_COLS_BK = 64
"""Rows of W in one k-iteration of the Dot "cols" tile (32 KB of fp32 columns)."""
WGMMA_SWIZZLE_BYTES = 128
"""Wgmma: a k-tile row is one 128-byte swizzle row (BK = 64 16-bit elements)."""
MBARRIER_BYTES = 8
WGMMA_ACC_BYTES = 4
"""Wgmma: bytes of one fp32 accumulator (the cluster protocol receives a tile of them)."""
SMEM_RESERVED_PER_CTA = 1024
"""Shared memory the hardware reserves per resident CTA (compute capability 8.0 and up)."""
WGMMA_FLAG_BYTES = 16
"""Wgmma: the fixup's flag after the mbarriers (one int, 16 bytes kept)."""
WGMMA_TRANSPOSER_REGISTER_SPLITS = {1: (168, 88, 208)}
"""The register splits, by CTAs an SM, of the trading kernels whose producer warpgroup also
transposes an operand in the stages (:meth:`Wgmma.transposes`): its transposers hold two
boxes' chunks and walk the table, which spills at the issuer's 40 registers."""

WGMMA_REGISTER_SPLITS = {1: (168, 40, 232), 2: (80, 32, 104)}
"""Wgmma entries of two consumer warpgroups whose warpgroups trade registers (setmaxnreg), by
CTAs an SM: (the registers a thread has at launch: 65536 over the CTAs' threads, in units of
8; the producer's after the trade; each consumer's), producer + 2 consumers = 3 x launch
(the kernel's Cfg::SPLIT_REGS, PRODUCER_REGS, CONSUMER_REGS). The 128 x 256 tile trades for
its 128 accumulators a thread; the paired 128 x 64 so that its fixups fit in registers at
two CTAs an SM."""
MEMORY_BOUND_REUSE = 128
"""A product whose operand elements are used fewer times than this on average (2 M N K over
the elements A and B hold: 2 M N / (M + N) for a GEMM, more for a convolution, whose A
reads each input pixel R x S times; decode and other skinny GEMMs, a late layer of batch
1) is bound by streaming its operands, which the cost model (flops per k-iteration) does
not see: it is offered only its dtype's streaming entry
(:attr:`KernelBase.streams`), if there is one, and the model picks the mode. Measured on the
H200, fp16 (docs/benchmarks/log.md): 16 x 4096 x 4096 on Wgmma 64 x 64 (Stream-K) 10.5 us
against the model's own pick, 64 x 256, 19.9 us; 128 x 4096 x 11008 (reuse 248) gains
less (33.0 against 35.5 us) and stays with the model."""
WGMMA_STREAMING_TILE = (64, 64)
"""The Wgmma tile that streams memory-bound products: 64 columns of weights a tile give a
decode product tiles enough for Stream-K to spread over every SM with 16 KB partial tiles.
It runs one CTA an SM with 8 stages."""


STREAMING_MAX_WAVES = 2
"""The memory-bound rule gives a product only the streaming entry while that entry's output
tiles fill at most this many waves of SMs: it pays where few tiles must spread over every
SM (decode); a tall product of many tiles (a 1 x 1 convolution's 100352 x 64 x 256) streams
its operands as well on the wider tiles the cost model picks (H200, fp16: 24.1 us on
128 x 64 against 28.4 us on 64 x 64; docs/benchmarks/log.md)."""


def streaming_wanted(m: int, n: int, k: int, batch: int, sms: int,
                     operand_elems: int | None = None) -> bool:
    """Whether the memory-bound rule offers a product only its streaming entry: memory-bound
    (:func:`memory_bound`) and few streaming tiles (:data:`STREAMING_MAX_WAVES`)."""
    tiles = output_tiles(m, n, batch, WGMMA_STREAMING_TILE)
    return tiles <= STREAMING_MAX_WAVES * sms and memory_bound(m, n, k, operand_elems)


def output_tiles(m: int, n: int, batch: int, tile) -> int:
    """Output tiles of a batch of m x n products on ``tile`` ((BM, BN, ...))."""
    return batch * -(-m // tile[0]) * -(-n // tile[1])


def memory_bound(m: int, n: int, k: int = 1, operand_elems: int | None = None) -> bool:
    """Whether an m x n x k product is memory-bound (:data:`MEMORY_BOUND_REUSE`);
    ``operand_elems``: the elements A and B hold where that is not (m + n) k (an implicit
    GEMM's A is a view of fewer elements)."""
    elems = (m + n) * k if operand_elems is None else operand_elems
    return 2 * m * n * k < MEMORY_BOUND_REUSE * elems


WGMMA_EPI_PITCH = 40
"""Wgmma: floats a row of the epilogue's staging buffer (the kernel's Cfg::EPI_PITCH: 32
columns, and 8 more than a multiple of 32 for conflict-free fragment writes)."""
WGMMA_STORE_COLS = 128
"""Wgmma: output columns the epilogue's TMA store stages at once in an SM's shared memory
(the kernel's Cfg::STORE_COLS, :attr:`Wgmma.store_cols`): a 128-column pass of 64 rows is
16 KB a consumer warpgroup, which fits beside the rings of the one-CTA entries; a wider
tile stores in passes, each waiting until the last has read the staging."""
WGMMA_HYTIS_TILES = ((128, 256, 1),)
"""Wgmma: (BM, BN, CTAs an SM) of the entries whose kernel also runs HyTiS's small tile,
BM x BN / 2 (:attr:`Wgmma.small_bn`): the widest tile, whose last partial wave HyTiS runs as
twice as many half tiles with no reduction, where auto's cost model prefers that to
Stream-K and hybrid."""
WGMMA_SOLO_FRACTION = {(128, 128, 1): 0.65}
"""Wgmma: (BM, BN, CTAs an SM) -> a k-iteration's time on a data-parallel wave that leaves
SMs idle, at least, relative to its time when every SM runs the tile
(:func:`skcontract.schedule.heuristics.partial_wave_scale`). The 128 x 128 tile is L2-bound on
every SM: H200, fp16, its k-iterations take 0.29 - 0.32 us in data-parallel waves of 64 - 100
CTAs and 0.42 - 0.49 us in Stream-K on 132 (docs/benchmarks/log.md, "Stream-K against
data-parallel on one partial wave"), so those waves run as fast as Stream-K from 61% of a
wave up. The other tiles are 1 (not measured apart, or, 128 x 256, at its tensor rate on
every SM)."""
WGMMA_ALIGN_BYTES = 1024
"""Wgmma: slack to align the ring to the 128-byte swizzle's 1024-byte period."""
COPY_BANDWIDTH_BYTES_PER_S = 4.14e12
"""Device-to-device copy bandwidth measured on the H200 (the memory-bound kernels' floor)."""


LAYOUT_PAIRS = (("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"))
"""Every (A, B) pair of layouts ("row": last index contiguous)."""


@dataclass(frozen=True)
class KernelBase:
    """One catalogue entry: a tile configuration of one mainloop family.

    ``dtype`` is the operand dtype; ``warps_m x warps_n`` warps share the BM x BN tile;
    ``stages`` is the depth of the cp.async pipeline; ``min_cc`` the lowest compute
    capability (major * 10 + minor) the entry is offered on; ``vec16_only`` marks entries that
    run 16-byte aligned operands only (their element-wise copies would spill); ``min_waves``:
    the entry is offered only to products whose output tiles fill at least that many waves
    of its resident CTAs (:meth:`fills_waves`), and, where ``max_waves`` is set, at most that
    many; ``min_k_iterations``: the entry is offered only to products whose tiles' loops
    run at least that many k-iterations (:meth:`runs_long_enough`); ``splits_only``: the
    entry is planned only in schedules that split its tiles
    (:attr:`~skcontract.schedule.types.TileOption.splits_only`); ``b_off_lines_only``: the
    entry is offered only to products whose B rows start off :data:`LINE_BYTES` lines (and
    to a caller who forces its tile). An entry is named
    by its tile, its occupancy and its unit's CTAs (:attr:`CLUSTER`): two entries of one
    tile differ in ``ctas_per_sm`` or in their family's CLUSTER.
    """

    dtype: str
    bm: int
    bn: int
    bk: int
    stages: int
    warps_m: int
    warps_n: int
    ctas_per_sm: int = 1
    efficiency: float = 1.0
    min_cc: int = 0
    vec16_only: bool = False
    min_waves: float = 0.0
    max_waves: float | None = None
    min_k_iterations: int = 0
    splits_only: bool = False
    b_off_lines_only: bool = False

    FAMILY: ClassVar[str] = ""
    DTYPES: ClassVar[tuple] = ()
    ENTRY_HEADER: ClassVar[str] = "sk_gemm.cuh"
    """The header whose kernel template the entry instantiates (jit.py inlines it)."""
    KERNEL: ClassVar[str] = "skc::sk_gemm"
    TENSOR_MAPS: ClassVar[bool] = False
    """Whether the kernel takes TMA descriptors of A, B and C and the epilogue's store flag
    after the common arguments (:mod:`.tma`)."""
    IM2COL: ClassVar[str | None] = None
    """How the family's convolution entry (the implicit GEMM of :mod:`.conv`) gets A from a
    channels-last input: ``"gather"`` (the CTA's threads copy it, ``sk_conv.cuh``), ``"tma"``
    (TMA im2col loads, ``sk_wgmma_conv.cuh``: k padded to whole BK-channel blocks a tap),
    or None (no convolution entry)."""
    IM2COL_HEADER: ClassVar[str] = "sk_conv.cuh"
    IM2COL_KERNEL: ClassVar[str] = "skc::sk_conv"
    """The convolution entry's header and kernel template."""
    FIXUP_COST: ClassVar[float] = 1.0
    """The family's cost of writing and merging a partial tile relative to the cost model's
    (``b`` and ``d``, fitted on the portable families)."""
    CLUSTER: ClassVar[int] = 1
    """CTAs (one an SM) that run one work unit of the schedule together: the launch's grid
    is the schedule's times this (:class:`WgmmaPair`)."""
    CLUSTER_SUM: ClassVar[bool] = False
    """Whether the family runs the ``cluster`` reduction (a tile's splits summed in the
    shared memory of one cluster's CTAs, launched in clusters of the schedule's splits)."""
    SHARED_SUM: ClassVar[bool] = True
    """Whether the family's kernels run the arrival protocol's shared sum (fixup.cuh); one
    whose partials are output sums (Dot) has its last arrival sum them instead."""

    def protocols(self) -> tuple[str, ...]:
        """The fixup protocols the entry's kernels are built for (the table's
        :data:`~skcontract.schedule.table.PROTOCOL_CODES` less those the family does not
        run)."""
        return tuple(p for p in PROTOCOL_CODES if p != CLUSTER or self.cluster_sum)

    @property
    def cluster_sum(self) -> bool:
        """Whether the entry's kernels run the ``cluster`` protocol (its family's
        ``CLUSTER_SUM``)."""
        return self.CLUSTER_SUM

    def __post_init__(self):
        if self.dtype not in self.DTYPES:
            raise ValueError(f"{self.FAMILY} takes {self.DTYPES} operands, not {self.dtype!r}")
        for name in ("bm", "bn", "bk", "stages", "warps_m", "warps_n", "ctas_per_sm"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"{self.FAMILY}.{name} must be a positive int, got {v!r}")
        if self.stages < 2:
            raise ValueError(f"{self.FAMILY}: the pipeline needs at least two stages")
        if not self.min_waves >= 0:
            raise ValueError(f"{self.FAMILY}.min_waves must be >= 0, got {self.min_waves!r}")
        if int(self.min_k_iterations) != self.min_k_iterations or self.min_k_iterations < 0:
            raise ValueError(f"{self.FAMILY}.min_k_iterations must be an int >= 0, got "
                             f"{self.min_k_iterations!r}")
        if self.max_waves is not None and not self.max_waves > self.min_waves:
            raise ValueError(f"{self.FAMILY}.max_waves must exceed min_waves, got "
                             f"{self.max_waves!r}")
        self.check()

    # -- what a family provides -------------------------------------------------------
    def check(self) -> None:
        """Raise ValueError when the family cannot run this configuration."""

    def mainloop(self, la: str, lb: str) -> str:
        """The C++ mainloop type for TileLoader types ``la`` / ``lb``."""
        raise NotImplementedError

    def pad(self, kcontig: bool) -> int:
        """Shared-memory row padding in elements of a stage (TileLoader's PAD)."""
        return PAD_BYTES // self.elem_bytes

    def cfg_lines(self, spec) -> str:
        """The family's own lines of the spec's Cfg struct (sk_gemm.cuh: the TileLoaders
        and the mainloop)."""
        la = _loader(spec, self.bm, spec.a_kcontig, spec.a_vec)
        lb = _loader(spec, self.bn, spec.b_kcontig, spec.b_vec)
        return (f"  static constexpr int STAGES = {self.stages};\n"
                f"  using LA = {la};\n  using LB = {lb};\n"
                f"  using ML = {self.mainloop(la, lb)};\n")

    def transposes(self, spec) -> bool:
        """Whether the kernel of ``spec`` turns an operand's layout in its stages (the
        Wgmma tf32 kernels do, :meth:`Wgmma.transposes`)."""
        return False

    def smem_bytes(self, spec) -> int:
        """Dynamic shared memory of the spec's launch: the pipeline stages."""
        def stage(rows: int, kcontig: bool) -> int:
            cont, lines = (self.bk, rows) if kcontig else (rows, self.bk)
            return lines * (cont + self.pad(kcontig)) * self.elem_bytes
        return self.stages * (stage(self.bm, spec.a_kcontig) + stage(self.bn, spec.b_kcontig))

    def slot_elems(self, spec) -> int:
        """Accumulators in one workspace slot: one tile, in fragment order."""
        return self.bm * self.bn

    def layouts(self) -> tuple[tuple[str, str], ...]:
        """The (A, B) layouts the entry is specialised for ("row": last index contiguous)."""
        return LAYOUT_PAIRS

    def vec_fits(self, layout: str, operand: str) -> bool:
        """Whether a 16-byte vector of an operand in ``layout`` stays inside one tile."""
        v = vec16_elems(self.dtype)
        if operand == "a":
            return layout == "row" or self.bm % v == 0
        return layout == "col" or self.bn % v == 0

    @property
    def launch_registers(self) -> int | None:
        """Registers a thread the compiled kernel must have (None: any; the compile check
        and the loader verify it)."""
        return None

    # -- derived ------------------------------------------------------------------------
    @property
    def tile(self) -> tuple[int, int, int]:
        return self.bm, self.bn, self.bk

    @property
    def warps(self) -> int:
        return self.warps_m * self.warps_n

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def elem_bytes(self) -> int:
        return CXX_TYPES[self.dtype][1]

    @property
    def dtype_out(self) -> str:
        return INPUT_DTYPES[self.dtype]

    @property
    def dtype_acc(self) -> str:
        return accumulator_dtype(self.dtype).name

    @property
    def name(self) -> str:
        return (f"{self.FAMILY.lower()}_{self.dtype}_{self.bm}x{self.bn}x{self.bk}"
                f"_s{self.stages}_w{self.warps_m}x{self.warps_n}_c{self.ctas_per_sm}")

    def option(self) -> TileOption:
        """What the scheduler needs of this entry; one tile shape per launch (no HyTiS)."""
        return TileOption(self.tile, self.ctas_per_sm, self.efficiency, small_tiles=(),
                          fixup_cost=self.FIXUP_COST, cluster_sum=self.cluster_sum,
                          shared_sum=self.SHARED_SUM, arrival=ARRIVAL in self.protocols(),
                          splits_only=self.splits_only)

    def fills_waves(self, tiles: int, resident: int) -> bool:
        """Whether ``tiles`` output tiles fill :attr:`min_waves` waves of ``resident`` CTAs
        (the entry's occupancy times the SMs) and no more than :attr:`max_waves`, as the
        entry needs to be offered."""
        if self.max_waves is not None and tiles > self.max_waves * resident:
            return False
        return tiles >= self.min_waves * resident

    def runs_long_enough(self, k: int) -> bool:
        """Whether a product of ``k`` columns of A runs its tiles' loops over at least
        :attr:`min_k_iterations` k-iterations, as the entry needs to be offered. A last,
        partial k-tile counts, as the kernel's loop runs it (the partial-wave term's
        :data:`~skcontract.schedule.heuristics.SOLO_MIN_K_ITERATIONS` counts whole k-tiles:
        a floor on the loop's time, where this one names a loop)."""
        return -(-k // self.bk) >= self.min_k_iterations

    def offered_on(self, cc: int | None) -> bool:
        """Whether the launcher offers this entry on compute capability ``cc`` (None: any)."""
        return cc is None or cc >= self.min_cc

    @property
    def streams(self) -> bool:
        """Whether this entry is its dtype's tile for memory-bound products
        (:func:`memory_bound`), the only one offered to them."""
        return False

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["family"] = self.FAMILY
        return d

    @staticmethod
    def from_dict(d: dict) -> "KernelBase":
        d = dict(d)
        return FAMILIES[d.pop("family")](**d)


@dataclass(frozen=True)
class Mma16(KernelBase):
    """fp16 / bf16 operands on mma.sync m16n8k16 (ldmatrix fragments), fp32 accumulators."""

    FAMILY: ClassVar[str] = "Mma16"
    IM2COL: ClassVar[str | None] = "gather"
    DTYPES: ClassVar[tuple] = ("float16", "bfloat16")

    def mainloop(self, la, lb):
        akc, bkc = _kc(la), _kc(lb)
        return (f"skc::MainloopMma16<{CXX_TYPES[self.dtype][0]}, {self.bm}, {self.bn}, "
                f"{self.bk}, {self.warps_m}, {self.warps_n}, LA, LB, {akc}, {bkc}>")


@dataclass(frozen=True)
class Dmma(KernelBase):
    """fp64 operands on DMMA m16n8k{8,16} (sm_90; decomposed into m8n8k4 below it).

    ``mma_k``: the instruction's K (8 or 16). ``frag``: "scalar" (8-byte fragment loads),
    "vec" (fragments permuted inside each k8 step so that they load as 16-byte pairs; needs
    ``mma_k == 8``), "vecdb" ("vec" with the next k8 step's fragments loaded ahead).
    """

    mma_k: int = 8
    frag: str = "scalar"

    FAMILY: ClassVar[str] = "Dmma"
    IM2COL: ClassVar[str | None] = "gather"
    DTYPES: ClassVar[tuple] = ("float64",)
    FRAGS: ClassVar[tuple] = ("scalar", "vec", "vecdb")

    def check(self):
        if self.mma_k not in (8, 16):
            raise ValueError(f"Dmma.mma_k must be 8 or 16, got {self.mma_k!r}")
        if self.frag not in self.FRAGS:
            raise ValueError(f"Dmma.frag must be one of {self.FRAGS}, got {self.frag!r}")
        if self.frag != "scalar" and self.mma_k != 8:
            raise ValueError("Dmma's 16-byte fragments ('vec', 'vecdb') need mma_k == 8")

    def pad(self, kcontig):
        if self.frag != "scalar":
            if kcontig:
                return (VEC_KC_PITCH_REM - self.bk) % VEC_KC_PITCH_MOD
            return VEC_XC_PAD_BYTES // self.elem_bytes
        return PAD_BYTES // self.elem_bytes if kcontig else XC_PAD_BYTES_FP64 // self.elem_bytes

    def mainloop(self, la, lb):
        if self.frag != "scalar":
            db = "true" if self.frag == "vecdb" else "false"
            return (f"skc::MainloopDmmaVec<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                    f"{self.warps_n}, LA, LB, {db}>")
        return (f"skc::MainloopDmma16<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                f"{self.warps_n}, {self.mma_k}, LA, LB>")

    @property
    def name(self):
        return f"{super().name}_k{self.mma_k}_{self.frag}"


@dataclass(frozen=True)
class Ffma(KernelBase):
    """fp32 / fp64 operands on CUDA-core FMA: exact fp32, and the skinny (8 x N) and one-row
    (1 x N) GEMV tiles of both. 256 threads (8 warps)."""

    FAMILY: ClassVar[str] = "Ffma"
    IM2COL: ClassVar[str | None] = "gather"
    DTYPES: ClassVar[tuple] = ("float32", "float64")

    def check(self):
        if self.warps != 8:
            raise ValueError("the Ffma mainloop runs 256 threads (8 warps)")

    def pad(self, kcontig):
        if self.dtype == "float64" and not kcontig:
            return XC_PAD_BYTES_FP64 // self.elem_bytes
        return PAD_BYTES // self.elem_bytes

    def mainloop(self, la, lb):
        return (f"skc::MainloopFfma<{CXX_TYPES[self.dtype][0]}, {self.bm}, {self.bn}, "
                f"{self.bk}, LA, LB>")


@dataclass(frozen=True)
class Tf32(KernelBase):
    """fp32 operands rounded to tf32 on mma.sync m16n8k8, fp32 accumulators (opt-in)."""

    FAMILY: ClassVar[str] = "Tf32"
    IM2COL: ClassVar[str | None] = "gather"
    DTYPES: ClassVar[tuple] = ("float32",)

    def pad(self, kcontig):
        return TF32_KC_PAD if kcontig else PAD_BYTES // self.elem_bytes

    def mainloop(self, la, lb):
        return (f"skc::MainloopTf32<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                f"{self.warps_n}, LA, LB>")


@dataclass(frozen=True)
class Imma(KernelBase):
    """int8 operands on mma.sync m16n8k32, int32 accumulators and output (wrapping)."""

    FAMILY: ClassVar[str] = "Imma"
    DTYPES: ClassVar[tuple] = ("int8",)

    def mainloop(self, la, lb):
        return (f"skc::MainloopImma<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                f"{self.warps_n}, LA, LB>")


@dataclass(frozen=True)
class Dot(KernelBase):
    """Memory-bound products, one 16-byte load per lane and operand (``sk_dot.cuh``).

    ``bn == 1``: the "rows" shape, ``C[r] = sum_k X[r, k] Y[r, k]`` (batched dots and
    matrix-vector products over contiguous rows; ``warps / bm`` warps share a row);
    ``bn > 1``: the "cols" shape, ``C[c] = sum_k V[k] W[k, c]`` (a vector times a matrix
    whose rows are contiguous; a tile is one warp's ``32 * 16 / elem`` columns and the
    warps split k). ``stages`` is the unroll: 16-byte loads each lane has in flight per
    operand. ``efficiency`` follows from the bytes a k-iteration reads
    (:func:`memory_bound_efficiency`).
    """

    FAMILY: ClassVar[str] = "Dot"
    DTYPES: ClassVar[tuple] = ("float16", "bfloat16", "float32", "float64")
    ENTRY_HEADER: ClassVar[str] = "sk_dot.cuh"
    KERNEL: ClassVar[str] = "skc::sk_dot"
    SHAPES: ClassVar[dict] = {"rows": 0, "cols": 1}  # sk_dot.cuh's SHAPE_* codes
    SHARED_SUM: ClassVar[bool] = False

    @property
    def shape(self) -> str:
        return "cols" if self.bn > 1 else "rows"

    @property
    def per_lane(self) -> int:
        """Elements of one 16-byte load (a lane's accumulators)."""
        return vec16_elems(self.dtype)

    def check(self):
        per_lane = self.per_lane
        if self.shape == "rows":
            if self.warps % self.bm:
                raise ValueError("Dot rows: the warps must split evenly over the BM rows")
            sweep = self.warps // self.bm * 32 * per_lane
            if self.bk % sweep:
                raise ValueError(f"Dot rows: BK must be a multiple of a sweep ({sweep})")
        else:
            if self.bm != 1 or self.bn != 32 * per_lane:
                raise ValueError(f"Dot cols: the tile is 1 x {32 * per_lane} (one warp's "
                                 "16-byte loads)")
            if self.bk % (self.warps * self.stages):
                raise ValueError("Dot cols: BK must be a multiple of warps x unroll")

    def cfg_lines(self, spec) -> str:
        return (f"  static constexpr int SHAPE = {self.SHAPES[self.shape]};\n"
                f"  static constexpr int UNROLL = {self.stages};\n"
                f"  static constexpr bool VEC_A = {_cxx_bool(spec.a_vec > 1)};\n"
                f"  static constexpr bool VEC_B = {_cxx_bool(spec.b_vec > 1)};\n")

    def smem_bytes(self, spec) -> int:
        return 0  # static shared memory only

    def slot_elems(self, spec) -> int:
        return self.bm * self.bn  # a split's partial is its tile's output sums (DotMerge)

    def vec_fits(self, layout, operand):
        return True

    def layouts(self):
        # rows: X and Y both k-contiguous (A row-major, B column-major); cols: V a vector,
        # W row-major
        return (("row", "col"),) if self.shape == "rows" else (("row", "row"),)

    def bytes_per_iteration(self) -> int:
        """Operand bytes one k-iteration of a tile reads (rows: X and Y; cols: W)."""
        if self.shape == "rows":
            return 2 * self.bm * self.bk * self.elem_bytes
        return self.bn * self.bk * self.elem_bytes


WGMMA_FIXUP_COST = 3.0
"""The Wgmma family's partial-tile cost relative to the model's (fitted on the portable
families, whose mainloop is two to three times slower, so a fixup hides less behind it):
with it, auto's picks on the H200's measured fp16 schedules (the GEMM benchmark's rows and
the sweeps of 2026-12-01, docs/benchmarks/log.md) come within 4.2% of the best measured
schedule in geomean instead of 7.4%; 2.5 and 3.5 measure 5.3% and 4.3%."""


@dataclass(frozen=True)
class Wgmma(KernelBase):
    """fp16 / bf16 operands on sm_90a (``sk_wgmma.cuh``): TMA loads into a ring of ``stages``
    shared-memory stages (128-byte swizzle), ``wgmma.mma_async`` m64nBNk16 from shared
    memory, fp32 accumulators; one producer warpgroup and ``bm / 64`` (1 or 2) consumer
    warpgroups
    (``warps_m`` counts all of their warps, ``warps_n`` is 1). TMA needs 16-byte aligned
    bases and strides (``vec16_only``); ``bk`` is one 128-byte swizzle row.
    ``trades_registers``: the producer gives registers to the two consumer warpgroups
    (:data:`WGMMA_REGISTER_SPLITS` at the entry's occupancy)."""

    trades_registers: bool = False

    FAMILY: ClassVar[str] = "Wgmma"
    DTYPES: ClassVar[tuple] = ("float16", "bfloat16")
    ENTRY_HEADER: ClassVar[str] = "sk_wgmma.cuh"
    KERNEL: ClassVar[str] = "skc::sk_wgmma"
    TENSOR_MAPS: ClassVar[bool] = True
    IM2COL: ClassVar[str | None] = "tma"
    IM2COL_HEADER: ClassVar[str] = "sk_wgmma_conv.cuh"
    IM2COL_KERNEL: ClassVar[str] = "skc::sk_wgmma_conv"
    FIXUP_COST: ClassVar[float] = WGMMA_FIXUP_COST
    CLUSTER_SUM: ClassVar[bool] = True
    EFFICIENCY_SCALE: ClassVar[float] = 1.0
    """The entry type's efficiency relative to the 16-bit entry of the same tile and
    occupancy (:data:`WGMMA_EFFICIENCY`)."""
    LEFT_OUT: ClassVar[tuple] = ()
    """(BM, BN, CTAs an SM) of the 16-bit menu (:func:`_wgmma_entries`) the entry type has
    no entry of."""
    TF32X3: ClassVar[bool] = False
    """Whether the kernel splits float32 operands into tf32 big and small parts (the kernel's
    Cfg::TF32X3: :class:`WgmmaTf32x3`): a stage holds the small parts beside the loaded
    boxes (:meth:`stage_copies`)."""
    TMA_DTYPE: ClassVar[str | None] = None
    """The element type the operands' TMA maps read (:mod:`.tma`); None: the dtype."""
    TRADES: ClassVar[tuple] = ()
    """(BM, BN, CTAs an SM) of the 16-bit menu whose entry of this type trades registers
    where the 16-bit one does not."""
    HYTIS_TILES: ClassVar[tuple] = WGMMA_HYTIS_TILES
    """(BM, BN, CTAs an SM) of the entries whose data-parallel kernel also runs HyTiS's
    small tile, BM x BN / 2, on a table's small rows (:attr:`small_bn`)."""
    SOLO_FRACTION: ClassVar[dict] = WGMMA_SOLO_FRACTION
    """(BM, BN, CTAs an SM) -> the entry's :attr:`TileOption.solo_fraction` (the tiles
    measured L2-bound on every SM; others 1)."""

    def check(self):
        if self.bm not in (64, 128) or self.bn not in (64, 128, 256):
            raise ValueError("Wgmma tiles are 64 or 128 x 64, 128 or 256 (one or two "
                             "consumer warpgroups of wgmma m64n64 / m64n128 / m64n256)")
        if self.bk * self.elem_bytes != WGMMA_SWIZZLE_BYTES:
            raise ValueError(f"Wgmma: BK must fill one {WGMMA_SWIZZLE_BYTES}-byte swizzle row")
        if self.warps != 4 * (self.bm // 64 + 1) or self.warps_n != 1:
            raise ValueError("Wgmma: warps_m counts the consumer and producer warpgroups' warps")
        if self.min_cc < 90 or not self.vec16_only:
            raise ValueError("Wgmma entries need min_cc=90 and vec16_only=True (TMA)")
        if self.trades_registers and (self.bm != 128 or
                                      self.ctas_per_sm not in WGMMA_REGISTER_SPLITS):
            raise ValueError("Wgmma: registers are traded with two consumer warpgroups, at "
                             f"{sorted(WGMMA_REGISTER_SPLITS)} CTAs an SM")

    def cfg_lines(self, spec) -> str:
        split = self.register_split_of(spec) or (0, 0, 0)
        return (f"  static constexpr int STAGES = {self.stages};\n"
                f"  static constexpr int CLUSTER = {self.CLUSTER};\n"
                f"  static constexpr bool A_KMAJOR = {_cxx_bool(spec.a_kcontig)};\n"
                f"  static constexpr bool B_KMAJOR = {_cxx_bool(spec.b_kcontig)};\n"
                f"  static constexpr int EPI_PITCH = {WGMMA_EPI_PITCH};\n"
                f"  static constexpr int STORE_COLS = {self.store_cols};\n"
                f"  static constexpr bool MASKS_STAGES = {_cxx_bool(self.masks_stages)};\n"
                f"  static constexpr int SPLIT_REGS = {split[0]};\n"
                f"  static constexpr int PRODUCER_REGS = {split[1]};\n"
                f"  static constexpr int CONSUMER_REGS = {split[2]};\n"
                f"  static constexpr bool TF32X3 = {_cxx_bool(self.TF32X3)};\n"
                f"  static constexpr int SMALL_BN = {self.small_bn_of(spec)};\n"
                f"  using ML = skc::WgmmaTile<{self.bm}, {self.bn}, Acc>;\n")

    @property
    def small_bn(self) -> int:
        """Columns of the entry's HyTiS small tile (BM x BN / 2), 0 for an entry without
        one (:attr:`HYTIS_TILES`)."""
        key = (self.bm, self.bn, self.ctas_per_sm)
        return self.bn // 2 if key in self.HYTIS_TILES else 0

    def small_bn_of(self, spec) -> int:
        """The small tile's columns in the kernel of ``spec`` (its Cfg::SMALL_BN): the
        entry's in its GEMM kernel without a fixup (a HyTiS table splits no tile), else 0."""
        return self.small_bn if spec.protocol == "none" and not spec.im2col else 0

    def b_parts(self, spec) -> int:
        """The parts B's stage loads in (its map's box is one): a pair's CTAs each load
        one, and a kernel with the small tile loads two halves (a small row the first)."""
        return 2 if self.small_bn_of(spec) else self.CLUSTER

    def option(self) -> TileOption:
        """The entry's tile option, with its partial waves' k-iteration time and its HyTiS
        small tile where it has them."""
        option = replace(super().option(), solo_fraction=self.SOLO_FRACTION.get(
            (self.bm, self.bn, self.ctas_per_sm), 1.0))
        if not self.small_bn:
            return option
        small_eff = WGMMA_EFFICIENCY[self.bm, self.small_bn, self.ctas_per_sm] * \
            self.EFFICIENCY_SCALE
        return replace(option, small_tiles=((self.bm, self.small_bn),),
                       small_efficiency=small_eff)

    @property
    def streams(self) -> bool:
        return (self.bm, self.bn) == WGMMA_STREAMING_TILE

    @classmethod
    def stage_copies(cls) -> int:
        """Boxes' worth of shared memory a stage holds per box it loads (2 with the 3xTF32
        split's small parts); the 16-bit menu's stage counts are divided by it, so every
        entry type's ring fills the same shared memory."""
        return 2 if cls.TF32X3 else 1

    @property
    def tma_dtype(self) -> str:
        """The element type of the operands' TMA maps (:func:`.tma.gemm_maps`)."""
        return self.TMA_DTYPE or self.dtype

    @property
    def tma_store(self) -> bool:
        """Whether the epilogue can store C by TMA (``WgmmaEpilogue::run_tma`` packs 16-bit
        outputs; :func:`.tma.output_map` encodes no map for others)."""
        return CXX_TYPES[self.dtype_out][1] == 2


    @property
    def masks_stages(self) -> bool:
        """Whether the entry's convolution kernel can zero a folded convolution's padding
        taps in the landed stages (``sk_wgmma.cuh``, ``mask_stage``; the kernel's
        Cfg::MASKS_STAGES): its consumers have the registers to spare, fewer than 128
        accumulators a thread or registers traded from the producer (the 64 x 256 tile has
        neither). :func:`~.resolve.resolve_gemm` offers folded convolutions only these."""
        return self.bn < 256 or self.trades_registers

    @property
    def store_cols(self) -> int:
        """Columns of one pass of the epilogue's TMA store (the kernel's Cfg::STORE_COLS): the
        tile's, at most :data:`WGMMA_STORE_COLS` shared by the CTAs of an SM."""
        return min(self.bn, WGMMA_STORE_COLS // self.ctas_per_sm)

    def smem_bytes(self, spec) -> int:
        transposed = self.stages * MBARRIER_BYTES if self.transposes(spec) else 0
        return self._smem_bytes(spec.protocol) + transposed

    def transposes(self, spec) -> bool:
        """Whether the kernel of ``spec`` turns an operand K-major in its stages (the
        kernel's WgmmaSmem::TRANSPOSES): an MN-major operand of a type that wgmma reads
        K-major only, which the producer warpgroup's other warps rewrite in place
        (``sk_wgmma.cuh``, ``transpose_stage``; a stage's `transposed` mbarrier more)."""
        return self.elem_bytes == 4 and not (spec.a_kcontig and spec.b_kcontig)

    def _smem_bytes(self, protocol: str) -> int:
        """The stage ring, the epilogue's staging (a consumer warpgroup's: 64 rows of
        WGMMA_EPI_PITCH floats, or of store_cols output elements where the epilogue stores
        by TMA, whichever is larger; in
        the cluster protocol at least the tile's fp32 accumulators, the peers' shares
        arriving there), the ring's full / empty mbarriers, the fixup's flag and the cluster
        protocol's `ready` mbarrier, plus the slack that aligns the ring to the swizzle
        atom."""
        ring = self.stage_copies() * self.stages * (self.bm + self.bn) * self.bk * self.elem_bytes
        tma_staging = self.store_cols * self.elem_bytes if self.tma_store else 0
        staging = (self.bm // 64) * 64 * max(WGMMA_EPI_PITCH * 4, tma_staging)
        ready = 0
        if protocol == CLUSTER:
            staging = max(staging, self.bm * self.bn * WGMMA_ACC_BYTES)
            ready = MBARRIER_BYTES
        return (ring + staging + 2 * self.stages * MBARRIER_BYTES + WGMMA_FLAG_BYTES
                + ready + WGMMA_ALIGN_BYTES)

    @cached_property
    def cluster_sum(self) -> bool:
        """The cluster protocol needs a receive buffer of the tile's fp32 bytes: the entries
        where it fits beside their ring at their occupancy (on the H200) run it."""
        per_cta = DeviceInfo.h200().smem_per_sm // self.ctas_per_sm - SMEM_RESERVED_PER_CTA
        return self.CLUSTER_SUM and self._smem_bytes(CLUSTER) <= per_cta

    def vec_fits(self, layout, operand):
        return True  # TMA boxes, not per-thread vectors

    @property
    def register_split(self) -> tuple[int, int, int] | None:
        """(launch, producer, consumer) registers a thread where the warpgroups trade
        registers (:data:`WGMMA_REGISTER_SPLITS`); None for an entry that does not."""
        return WGMMA_REGISTER_SPLITS[self.ctas_per_sm] if self.trades_registers else None

    def register_split_of(self, spec) -> tuple[int, int, int] | None:
        """The register split of the kernel of ``spec``: the entry's, or, where its
        producer warpgroup also transposes an operand (:meth:`transposes`), the one of
        :data:`WGMMA_TRANSPOSER_REGISTER_SPLITS` (the same launch)."""
        if self.register_split is None or not self.transposes(spec):
            return self.register_split
        if self.ctas_per_sm not in WGMMA_TRANSPOSER_REGISTER_SPLITS:
            raise ValueError(f"{self.name}: no register split for transposers at "
                             f"{self.ctas_per_sm} CTAs an SM")
        return WGMMA_TRANSPOSER_REGISTER_SPLITS[self.ctas_per_sm]

    @property
    def launch_registers(self) -> int | None:
        """Registers a thread the compiled kernel must be launched with: where the
        warpgroups trade registers (setmaxnreg), an increase never waits only when the
        launch allocates the whole register file (sk_wgmma.cuh)."""
        split = self.register_split
        return split[0] if split else None


WGMMA_TF32_RATE = 0.5
"""tf32 wgmma's rate relative to f16 / bf16 wgmma (the H100 / H200 datasheet's dense peaks:
495 against 990 TFLOP/s)."""
WGMMA_TF32_EFFICIENCY_SCALE = 1.0 / (WGMMA_TF32_RATE
                                     * MEASURED_H200_COST.dtype_slowdown("float32"))
"""A tf32 Wgmma entry's efficiency relative to the 16-bit entry of the same tile and
occupancy: the cost model prices a float32 k-iteration's volume at the FFMA family's
slowdown, where tf32 wgmma runs it at WGMMA_TF32_RATE of the 16-bit rate (so a tf32 k-tile,
half the K of a 16-bit one, takes as long). An estimate from the rates until the tf32 rows
are fitted."""


@dataclass(frozen=True)
class WgmmaKMajor(Wgmma):
    """The Wgmma kernel on 32- or 8-bit operands, which wgmma reads K-major only: the
    entries take a row-major A and a column-major B (:meth:`layouts`); ``gemm`` copies an
    operand of another layout into that one first (:func:`skcontract.kernels.gemm.gemm`),
    but for the 3xTF32 entries, which turn it K-major in their stages
    (:meth:`WgmmaTf32x3.layouts`). No convolution entry, no HyTiS tile."""

    IM2COL: ClassVar[str | None] = None
    HYTIS_TILES: ClassVar[tuple] = ()
    SOLO_FRACTION: ClassVar[dict] = {}

    def layouts(self) -> tuple[tuple[str, str], ...]:
        return (("row", "col"),)


@dataclass(frozen=True)
class WgmmaTf32(WgmmaKMajor):
    """float32 operands on tf32 wgmma (``gemm(precision="tf32")`` on sm_90a): the Wgmma kernel
    with BK = 32 (one 128-byte swizzle row of floats) and wgmma m64nNk8.tf32 on operands the
    TMA loads round to tf32 (a 10-bit mantissa, to nearest), fp32 accumulators and output.
    The epilogue stores C by the threads (the TMA store packs 16-bit outputs)."""

    FAMILY: ClassVar[str] = "WgmmaTf32"
    DTYPES: ClassVar[tuple] = ("float32",)
    EFFICIENCY_SCALE: ClassVar[float] = WGMMA_TF32_EFFICIENCY_SCALE
    TMA_DTYPE: ClassVar[str | None] = TF32

    def protocols(self) -> tuple[str, ...]:
        """The register-trading entries (128 x 256, the paired 128 x 64) run no arrival
        protocol: its kernels spill with float outputs. Auto plans no arrival on them
        (``TileOption.arrival``), and :func:`~.resolve.resolve_gemm` plans again without an
        entry whose protocol a forced mode or reduction asks for and its kernels lack."""
        protos = super().protocols()
        return tuple(p for p in protos if p != ARRIVAL) if self.trades_registers else protos


WGMMA_TF32X3_PRODUCTS = 3
"""The wgmmas of a 3xTF32 k step (big x big, big x small, small x big)."""


@dataclass(frozen=True)
class WgmmaTf32x3(WgmmaTf32):
    """float32 operands at float32 accuracy on tf32 wgmma (``gemm(precision="3xtf32")`` on
    sm_90a): the tf32 kernel loading the raw floats (``TMA_DTYPE`` float32: no rounding).
    The consumers split each landed stage (``sk_wgmma.cuh``, ``split_stage``): x = big +
    small, big what tf32 wgmma reads of x itself (its 10-bit mantissa, truncated), small =
    x - big rounded to tf32 and written beside the stage in the same layout. A k step is
    three wgmmas, small x big, big x small and big x big, into one of two partial
    accumulators, fresh each k-tile, which the consumers add to the tile's in fp32 once
    they are done (``wgmma_consume_x3``: the tensor cores truncate their own sums, which over
    a long K costs float32 accuracy). The dropped small x small term is below 2^-20 of a
    product. Three accumulators a thread leave the 128- and 256-column tiles of one
    warpgroup and the 128 x 256 tile out and make the 128 x 128 tile trade registers; the
    paired 128 x 64 entry (one stage) is left out too."""

    FAMILY: ClassVar[str] = "WgmmaTf32x3"
    EFFICIENCY_SCALE: ClassVar[float] = WGMMA_TF32X3_PRODUCTS * WGMMA_TF32_EFFICIENCY_SCALE
    TMA_DTYPE: ClassVar[str | None] = "float32"
    TF32X3: ClassVar[bool] = True
    LEFT_OUT: ClassVar[tuple] = ((128, 256, 1), (64, 256, 1), (64, 128, 2), (128, 64, 2))
    TRADES: ClassVar[tuple] = ((128, 128, 1),)

    def layouts(self) -> tuple[tuple[str, str], ...]:
        """Every layout: the producer warpgroup's other warps turn an MN-major operand
        K-major in the stages (:meth:`Wgmma.transposes`), while the wgmmas of the k-tiles
        before it run; a 3xTF32 k-tile's three products leave them the time (tf32's one does
        not: its entries read copies, :class:`WgmmaKMajor`)."""
        return LAYOUT_PAIRS


@dataclass(frozen=True)
class WgmmaInt8(WgmmaKMajor):
    """int8 operands on s8 wgmma (sm_90a): the Wgmma kernel with BK = 128 (one 128-byte
    swizzle row of bytes) and wgmma m64nNk32.s32.s8.s8, int32 accumulators and output, sums
    wrapping modulo 2^32 as the portable ``Imma`` entry's do. The tile is stored from the
    accumulator fragment by the portable epilogue, alpha and beta in int32; no cluster
    protocol (its sums are fp32). ``LEFT_OUT``: besides the register-trading entries (128 x
    256, the paired 128 x 64), whose arrival kernels spill with 32-bit outputs, the 64 x 256
    and two-CTA 64 x 128 tiles, whose fixups spill with the fragment-store epilogue of int32
    accumulators (the compile check)."""

    FAMILY: ClassVar[str] = "WgmmaInt8"
    DTYPES: ClassVar[tuple] = ("int8",)
    CLUSTER_SUM: ClassVar[bool] = False
    LEFT_OUT: ClassVar[tuple] = ((128, 256, 1), (128, 64, 2), (64, 256, 1), (64, 128, 2))


@dataclass(frozen=True)
class WgmmaPair(Wgmma):
    """A cluster of two Wgmma CTAs (``sk_wgmma_pair``) that runs one (2 BM) x BN tile of the
    schedule: each CTA computes BM of its rows over the same k range, loads its own A and
    half of B, and multicasts that half into both CTAs' shared memory, so the pair reads B
    once from L2 for both (the L2 bounds the Wgmma tiles when every SM runs them). ``bm``
    is one CTA's rows; :attr:`tile`, the schedule's, is twice that (a 64 x 64 pair's unit
    tile is a single 128 x 64 CTA's: an entry is named by its cluster too). Each CTA keeps
    its own fixup: two locks and slots a tile. GEMMs only (no im2col entry). B's part is
    half its rows, or, for an N-major B of 64 columns (one box), half the box's k rows
    (``load_part``)."""

    FAMILY: ClassVar[str] = "WgmmaPair"
    KERNEL: ClassVar[str] = "skc::sk_wgmma_pair"
    IM2COL: ClassVar[str | None] = None
    CLUSTER: ClassVar[int] = 2
    CLUSTER_SUM: ClassVar[bool] = False  # its clusters are the pair
    HYTIS_TILES: ClassVar[tuple] = ()  # a pair's unit runs one tile shape
    SOLO_FRACTION: ClassVar[dict] = {}  # B multicast: not measured apart

    def check(self):
        super().check()
        if self.ctas_per_sm != 1:
            raise ValueError("WgmmaPair: one CTA an SM (a cluster's CTAs on as many SMs)")

    @property
    def tile(self) -> tuple[int, int, int]:
        return self.CLUSTER * self.bm, self.bn, self.bk

    def slot_elems(self, spec) -> int:
        return self.CLUSTER * self.bm * self.bn

    def option(self) -> TileOption:
        return replace(super().option(), cluster=self.CLUSTER)


def _wgmma_pair(dtype: str, bm: int, bn: int, stages: int, trades_registers: bool = False,
                b_off_lines_only: bool = False) -> WgmmaPair:
    return WgmmaPair(dtype, bm, bn, 64, stages, 4 * (bm // 64 + 1), 1,
                     efficiency=WGMMA_PAIR_EFFICIENCY[bm, bn], min_cc=90, vec16_only=True,
                     max_waves=WGMMA_PAIR_MAX_WAVES,
                     min_k_iterations=WGMMA_PAIR_MIN_K_ITERATIONS.get((bm, bn), 0),
                     splits_only=(bm, bn) in WGMMA_PAIR_SPLITS_ONLY,
                     trades_registers=trades_registers, b_off_lines_only=b_off_lines_only)


WGMMA_PAIR_MAX_WAVES = 1.5
"""The cluster pairs are offered only to products whose unit tiles fill at most this many
waves of pairs (measured on the wide pairs' 256-row units; the narrow pairs, offered where
B's rows start off lines, keep it). There the pair's shared B loads pay and the cost model,
which has no term for the L2's bandwidth, picks them where they measured faster; on products
of more waves it would pick them where the single-CTA tiles measured faster. H200, fp16,
auto with the pairs offered against without (2026-12-02, docs/benchmarks/log.md): 2000 x
3000 x 5000 (1.45 waves) 93.3 / 122.3 us, 1280 x 2560 x 4096 (0.76) 44.4 / 50.6, 4352 x 1024
x 4096 (1.03) 56.2 / 60.2, 2304^2 x 4096 (1.23) 65.6 / 66.8; left out: 3072 x 2816 x 4096
(2.0) 93.6 / 91.7, 3200^3 (2.56) 104.4 / 94.8, 8192^3 (15.5) 1748 / 1429."""


WGMMA_PAIR_EFFICIENCY = {(128, 128): 0.16, (128, 256): 0.146,
                         (64, 64): 0.24, (128, 64): 0.24}
"""Cost-model efficiency of the pairs' (2 BM x BN) unit tiles by one CTA's (BM, BN). A unit
is two SMs, so a k-iteration of its tile takes what one of its CTAs' BM x BN k-iterations
takes: about half a single CTA's efficiency. The narrow pairs (:func:`_narrow_pairs`,
offered where B's rows start off lines): the 64 x 64 pair's is 0.6 / 2 x 0.8, its time
against the single 64 x 64 tile's on 1000^3 fp16 (9.8 against 12.3 us, forced data-parallel,
H200, 2026-12-03, docs/benchmarks/log.md); the 128 x 64 pair's lies inside the range
(0.235-0.25) in which auto keeps both orders measured that day: the pair on 1000^3 (8.9
against 10.2 us for the single 128 x 64 tile) and Stream-K on 128 x 128 tiles on 1000 x 1000
x 4096 (19.9 against 21.5 for the pair). The 128 x 256 pair's is fitted on the H200,
2026-12-02 (docs/benchmarks/log.md), so that measured / predicted time over eight
wave-quantized and exact-wave fp16 shapes matches that of the single-CTA entries auto picks
there (geomean 0.70); with it, auto would take that pair on 3200^3, where it measured 8%
slower (:data:`WGMMA_PAIR_MAX_WAVES` keeps it from products of that many tiles). The 128 x
128 pair's 0.16 is its split k-iterations' time at full occupancy against the single 128 x
128 tile's (0.37 / 2 x 0.85): on 1536^2 x 8192, hybrid, 72 unit tiles on 66 clusters ran in
57.5 us against the single tile's 144 tiles on 132 CTAs in 67.0, the same 139.6 k-iterations
a CTA (H200, fp16, 2026-12-03, docs/benchmarks/log.md); where its loops are short it is not
offered (:data:`WGMMA_PAIR_MIN_K_ITERATIONS`), nor on whole tiles
(:data:`WGMMA_PAIR_SPLITS_ONLY`)."""


WGMMA_PAIR_MIN_K_ITERATIONS = {(128, 128): 128}
"""The k-iterations a tile's loop must run for the pair of (BM, BN) CTAs to be offered
(:attr:`KernelBase.min_k_iterations`; pairs not named: any). The 128 x 128 pair's split
k-iterations run faster than the single tile's, yet on loops of 64 it measured slower on
every product timed: fp16, us, pair against auto's single 128 x 128 tile, 1664 x 1408 x 4096
40.1 / 32.1, 2176 x 1024 x 4096 36.6 / 29.5, 896 x 2432 x 4096 41.6 / 29.9 (hybrid each). On
loops of 128 and more it measured faster where auto splits the single tile: 1536^2 x 8192
57.5 / 67.0 (hybrid), 256 x 3584 x 8192 27.8 / 30.1 (Stream-K), 256^2 x 32768 16.0 against
17.0 for auto's 128 x 64 tile (H200, 2026-12-03, docs/benchmarks/log.md). With the
efficiency above, this floor and :data:`WGMMA_PAIR_SPLITS_ONLY`, auto takes the pair over
the GEMM corpus on 1536^2 x 8192 and 256 x 3584 x 8192."""


WGMMA_PAIR_SPLITS_ONLY = ((128, 128),)
"""The pairs of (BM, BN) CTAs planned only in schedules that split their tiles
(:attr:`KernelBase.splits_only`). On whole tiles a wave of the 128 x 128 pair measured no
faster than the single 128 x 128 tile's: fp16, data-parallel, us, pair / single, 1536^2 x
8192 86.8 / 86.4, 256 x 3584 x 8192 39.8 / 39.7, 1056^2 x 8192 55.8 / 49.4 (H200,
2026-12-03), one wave of 1536 x 1408 x 4096 26.7 / 25.3 (2026-12-02; docs/benchmarks/log.md);
its efficiency above is its split k-iterations' rate."""


def memory_bound_efficiency(dtype: str, tile, bytes_per_iteration: int) -> float:
    """The cost-model efficiency of a tile whose k-iteration reads ``bytes_per_iteration``
    at one SM's share of the H200's copy bandwidth: the H200 model prices a k-iteration at
    efficiency x volume x dtype slowdown x its reference tile's time, so the efficiency is
    the ratio of the two times."""
    h200 = DeviceInfo.h200()
    seconds = bytes_per_iteration / (COPY_BANDWIDTH_BYTES_PER_S / h200.sms)
    vol = tile[0] * tile[1] * tile[2] / float(REF_TILE[0] * REF_TILE[1] * REF_TILE[2])
    return seconds * 1e6 / (h200.cost.c * vol * h200.cost.dtype_slowdown(dtype))


def _dot(dtype: str, shape: str) -> Dot:
    """The Dot entry of ``dtype`` and ``shape`` ("rows8": 8 rows a tile, a warp each;
    "rows1": one row a tile, all warps; "cols")."""
    per_lane, warps = vec16_elems(dtype), DOT_WARPS
    if shape == "cols":
        tile = (1, 32 * per_lane, DOT_COLS_BK)
    else:
        bm = 8 if shape == "rows8" else 1
        sweep = warps // bm * 32 * per_lane  # elements of a row the tile's warps read at once
        tile = (bm, 1, sweep * (DOT_ROW_SWEEPS if bm == 1 else DOT_UNROLL))
    base = Dot(dtype, *tile, DOT_UNROLL, 1, warps, ctas_per_sm=DOT_CTAS_PER_SM)
    eff = memory_bound_efficiency(dtype, tile, base.bytes_per_iteration())
    return Dot(dtype, *tile, DOT_UNROLL, 1, warps, ctas_per_sm=DOT_CTAS_PER_SM, efficiency=eff)


def _cxx_bool(b: bool) -> str:
    return "true" if b else "false"


def _loader(spec, rows: int, kcontig: bool, vec: int) -> str:
    """The TileLoader type of one operand of a GEMM-family spec."""
    base = spec.base
    return (f"skc::TileLoader<{CXX_TYPES[base.dtype][0]}, {rows}, {base.bk}, "
            f"{_cxx_bool(kcontig)}, {vec}, {base.threads}, {base.pad(kcontig)}, "
            f"{spec.loader_unroll(vec)}>")


def _kc(loader: str) -> str:
    """'true' when a TileLoader type string is k-contiguous (its 4th template argument)."""
    return loader.split(",")[3].strip()


FAMILIES = {cls.FAMILY: cls for cls in (Mma16, Dmma, Ffma, Tf32, Imma, Wgmma, WgmmaTf32,
                                         WgmmaTf32x3, WgmmaInt8, WgmmaPair, Dot)}
"""Family name -> entry type (for :meth:`KernelBase.from_dict`)."""


def _wgmma(dtype: str, bm: int, bn: int, stages: int, ctas_per_sm: int = 1,
           min_waves: float = 0.0, trades_registers: bool = False, cls=Wgmma) -> Wgmma:
    eff = WGMMA_EFFICIENCY[bm, bn, ctas_per_sm] * cls.EFFICIENCY_SCALE
    return cls(dtype, bm, bn, WGMMA_SWIZZLE_BYTES // CXX_TYPES[dtype][1],
               stages // cls.stage_copies(),
               4 * (bm // 64 + 1), 1, ctas_per_sm=ctas_per_sm, efficiency=eff, min_cc=90,
               vec16_only=True, min_waves=min_waves, trades_registers=trades_registers)


def _wgmma_pairs(dtype: str) -> tuple[WgmmaPair, ...]:
    """The cluster pairs: 256 x 128 and 256 x 256 work units on two CTAs that share B's
    k-tiles, for products of few waves (:data:`WGMMA_PAIR_MAX_WAVES`)."""
    return (_wgmma_pair(dtype, 128, 128, 6),
            _wgmma_pair(dtype, 128, 256, 4, trades_registers=True))


def _narrow_pairs(dtype: str) -> tuple[WgmmaPair, ...]:
    """The narrow pairs: 128 x 64 and 256 x 64 work units of the 64 x 64 and 128 x 64 tiles
    on two CTAs sharing B (13 and 8 stages), offered only where B's rows start off
    :data:`LINE_BYTES` lines: each of B's loads then reads a line more a row, and the pair
    makes half of them. H200, fp16 (docs/benchmarks/log.md, 2026-12-03):
    1000^3 8.8 us against 10.0 on the single-CTA tiles; on products of few tiles whose B
    lies on lines they run within 5% of the single-CTA tiles, either way (8 x 256^2 x 4096
    13.8 against 14.5 us, 512 x 1024 x 4096 12.8 against 12.3), which the cost model does
    not tell apart."""
    return (_wgmma_pair(dtype, 64, 64, 13, b_off_lines_only=True),
            _wgmma_pair(dtype, 128, 64, 8, b_off_lines_only=True))


LINE_BYTES = 128
"""The L2 line a TMA load reads rows in: a row that starts off one reads a line more."""


def _wgmma_entries(dtype: str, cls=Wgmma) -> tuple[Wgmma, ...]:
    """The Wgmma tiles: 128 x 256 and 128 x 128 for the many-tile shapes; the 64-row tiles
    for few rows (decode GEMV, strong scaling), whose Stream-K partial tiles are half the
    bytes (64 x 128 runs two CTAs an SM); 128 x 64 for shapes of few tiles and products of
    64 columns (a convolution's 64 output channels), deep-pipelined alone on an SM for few
    tiles and paired (:data:`WGMMA_PAIRED_MIN_WAVES`) for many; and the streaming 64 x 64
    (:data:`WGMMA_STREAMING_TILE`), which gives skinny products (decode) tiles enough to
    spread over every SM with small partial tiles. ``cls``: the entry type (WgmmaTf32 for
    float32 operands on tf32, WgmmaInt8 for int8: a k-tile of as many bytes), less its
    ``LEFT_OUT`` tiles (its stages divided by its stage copies, :meth:`Wgmma.stage_copies`;
    its ``TRADES`` trading registers). The 64 x 64 ring is 8 stages, not the 13 its shared
    memory holds: on its products of one tile an SM more loads in flight run slower, at 13
    stages up to 10% longer than at 8, at 5 up to 27% (H200, fp16; docs/benchmarks/log.md,
    2026-12-03)."""
    menu = ((128, 128, 6, {}),
            (128, 256, 4, {"trades_registers": True}),
            (64, 256, 5, {}),
            (64, 128, 4, {"ctas_per_sm": 2}),
            (128, 64, 8, {}),
            (128, 64, 3, {"ctas_per_sm": 2, "min_waves": WGMMA_PAIRED_MIN_WAVES,
                          "trades_registers": True}),
            (64, 64, 8, {}))
    out = []
    for bm, bn, stages, kw in menu:
        key = (bm, bn, kw.get("ctas_per_sm", 1))
        if key not in cls.LEFT_OUT:
            kw = {**kw, "trades_registers": kw.get("trades_registers", False)
                  or key in cls.TRADES}
            out.append(_wgmma(dtype, bm, bn, stages, cls=cls, **kw))
    return tuple(out)


WGMMA_PAIRED_MIN_WAVES = 1.0
"""The paired 128 x 64 entry (3 stages, two CTAs an SM) is offered only where its tiles
fill a wave of its resident CTAs: two CTAs on an SM hide each other's epilogue behind their
mainloops, which pays once every SM has two tiles to run; alone on an SM its three stages
lose to the eight-stage entry. H200, fp16, the same runs (docs/benchmarks/log.md): paired
against the eight-stage entry, the stem 103.8 / 112.4 us, 32 x 64 x 56 x 56 3 x 3 24.4 /
28.0, 32 x 256 x 56 x 56 1 x 1 21.6 / 24.3, 48 x 1024 x 1024 x 64 55.8 / 86.7; but
1000^3 15.8 / 12.2, 256 x 256 x 32768 26.8 / 22.2, 128 x 4096 x 11008 35.6 / 30.3."""

WGMMA_EFFICIENCY = {(128, 128, 1): 0.37, (128, 256, 1): 0.345, (64, 256, 1): 0.42,
                    (64, 128, 2): 0.42, (128, 64, 1): 0.5, (128, 64, 2): 0.43,
                    (64, 64, 1): 0.6}
"""Wgmma entries' cost-model efficiency by (BM, BN, CTAs an SM): their data-parallel time
against the Mma16 entry's (1.0) on the same shapes, H200, 2026-12-01
(docs/benchmarks/log.md): 128 x 256 0.341 (4096^3), 0.342 (3072 x 2816 x 4096), 0.354
(8192^3); 128 x 128 0.364 (1536 x 1408 x 4096), 0.366 (4096^3). The 128 x 128 tile reads
more L2 bytes per flop, and the L2 limits it when every SM runs it. The 64-row tiles' 0.42
is an estimate (one consumer warpgroup a CTA; docs/benchmarks/log.md), as are the narrow
tiles' 0.5 and 0.6 (more L2 bytes per flop again: auto takes them only where a shape has
few tiles, or, for 64 x 64, by the memory-bound rule). The paired 128 x 64's 0.43 is the
eight-stage entry's 0.5 times its measured 0.87-0.92 on many-tile convolutions
(:data:`WGMMA_PAIRED_MIN_WAVES`)."""

FFMA_NARROW_EFFICIENCY = 1.0
"""Time per flop of the fp32 256 x 64 and 64 x 256 entries against the 128 x 128 x 32
entry's (1.0), H200, 2026-12-02 (docs/benchmarks/log.md): 1.23 on a 3 x 3 convolution of 64
channels (256 x 64), 1.07 on 64 x 2112 x 7168 (64 x 256), 0.68 on the 7 x 7 x 512 layer of
batch 32 (64 x 256 by Stream-K against 128 x 128 by split-K). At 1.0 auto takes them on every
shape where they measured faster and on none where they measured slower."""

_FLOAT32 = (
    Ffma("float32", 128, 128, 32, 3, 2, 4),
    # a finer k-iteration: strong-scaling shapes split over twice the CTAs
    Ffma("float32", 128, 128, 16, 3, 2, 4, efficiency=1.05),
    # M <= 8: the skinny tile
    Ffma("float32", 8, 256, 16, 4, 2, 4, ctas_per_sm=2, efficiency=2.8331),
    # 64 columns or rows (a convolution's 64 output channels, an NCHW pointwise
    # convolution's transposed product, a 64-row GEMM), where the 128 x 128 tile
    # computes half padding: its 8 x 8 thread tiles over 256 x 64 and 64 x 256
    Ffma("float32", 256, 64, 32, 3, 2, 4, efficiency=FFMA_NARROW_EFFICIENCY),
    Ffma("float32", 64, 256, 32, 3, 2, 4, efficiency=FFMA_NARROW_EFFICIENCY),
    # M = 1: one row, 4 columns a thread, B streams through shared memory once;
    # BK = 8 so that a column-major B's [1024][BK + 4] stages fit 4 deep
    Ffma("float32", 1, 1024, 8, 4, 1, 8, efficiency=18.5),
)
"""The exact float32 entries (FFMA)."""

CATALOGUE: dict[str, tuple[KernelBase, ...]] = {
    "float16": ((Mma16("float16", 128, 128, 32, 4, 2, 4),) + _wgmma_entries("float16")
                + _wgmma_pairs("float16") + _narrow_pairs("float16")),
    "bfloat16": ((Mma16("bfloat16", 128, 128, 32, 4, 2, 4),) + _wgmma_entries("bfloat16")
                 + _wgmma_pairs("bfloat16") + _narrow_pairs("bfloat16")),
    "float32": _FLOAT32,
    "float64": (
        Dmma("float64", 128, 64, 32, 3, 4, 2, efficiency=0.87, mma_k=8, frag="vec"),
        # the same tile as 4 warps of 64x32 and two CTAs per SM; its 255 registers spill on
        # sm_80 and in element-wise (misaligned) copies
        Dmma("float64", 128, 64, 16, 3, 2, 2, ctas_per_sm=2, efficiency=0.87 * 0.96,
             min_cc=90, vec16_only=True, mma_k=8, frag="vecdb"),
        Dmma("float64", 64, 64, 16, 3, 2, 2, ctas_per_sm=2, efficiency=1.0, mma_k=16),
        Ffma("float64", 8, 256, 16, 4, 2, 4, efficiency=4.7558),
        Ffma("float64", 1, 512, 8, 4, 1, 8, efficiency=36.0),
    ),
    # the Wgmma entries first: where they are offered (sm_90, aligned K-major operands) they
    # name the 128 x 128 tile, which the portable entry shares
    TF32: _wgmma_entries("float32", WgmmaTf32) + (Tf32("float32", 128, 128, 32, 3, 2, 4),),
    # where the 3xTF32 entries are not offered (before sm_90, operands off 16 bytes), the
    # exact float32 entries run it: float32 accuracy, as asked
    TF32X3: _wgmma_entries("float32", WgmmaTf32x3) + _FLOAT32,
    "int8": _wgmma_entries("int8", WgmmaInt8) + (Imma("int8", 128, 128, 64, 4, 2, 4),),
}
"""Every entry the launcher may choose, by operand dtype (and the float32
:data:`PRECISIONS`)."""


DOT_SHAPES = ("rows8", "rows1", "cols")
DOT_CATALOGUE: dict[str, tuple[Dot, ...]] = {
    dt: tuple(_dot(dt, shape) for shape in DOT_SHAPES) for dt in Dot.DTYPES}
"""The memory-bound entries by operand dtype: the tile options of a step that
:mod:`.dot_forms` maps onto rows or columns (never offered for other GEMMs)."""


def dot_bases(dtype: str, shape: str) -> tuple[Dot, ...]:
    """The Dot entries of ``dtype`` for a "rows" or "cols" problem (empty: none)."""
    return tuple(b for b in DOT_CATALOGUE.get(dtype, ()) if b.shape == shape)


_WITHDRAWN: set = set()


def withdraw(base: KernelBase) -> None:
    """Offer ``base`` no more in this process (its kernel cannot be built as declared here,
    e.g. :class:`~skcontract.kernels.jit.RegisterCountError`)."""
    _WITHDRAWN.add(base)


def catalogue_key(dtype: str, precision: str | None = None) -> str:
    """The catalogue key of ``dtype`` operands at ``precision`` (None: exact; one of
    :data:`PRECISIONS`, which float32 alone has: other dtypes ignore it). TypeError for a
    dtype no kernel takes, ValueError for an unknown precision."""
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"gemm: unknown precision {precision!r} (have None (exact), "
                         f"{', '.join(repr(p) for p in PRECISIONS)})")
    if dtype not in CATALOGUE or dtype in PRECISIONS:
        raise TypeError(f"gemm: unsupported dtype {dtype!r} (have "
                        f"{', '.join(k for k in CATALOGUE if k not in PRECISIONS)})")
    return precision if precision is not None and dtype == "float32" else dtype


def bases_for(dtype: str, precision: str | None = None, cc: int | None = None,
              vec16: bool = True, b_off_lines: bool = True) -> tuple[KernelBase, ...]:
    """The entries offered for ``dtype`` operands at ``precision`` (:func:`catalogue_key`)
    on compute capability ``cc`` (None: any); ``vec16=False`` (an operand not 16-byte
    aligned) leaves out the ``vec16_only`` ones, ``b_off_lines=False`` (B's rows start on
    :data:`LINE_BYTES` lines) the ``b_off_lines_only`` ones. TypeError for a dtype no
    kernel takes."""
    key = catalogue_key(dtype, precision)
    entries = CATALOGUE[key] + (PENDING.get(key, ()) if OFFER_PENDING else ())
    return tuple(b for b in entries
                 if b.offered_on(cc) and (vec16 or not b.vec16_only)
                 and (b_off_lines or not b.b_off_lines_only) and b not in _WITHDRAWN)


PENDING: dict[str, tuple[KernelBase, ...]] = {}
"""Entries that are built and compile-checked (:func:`all_bases`) but not offered to auto
(:func:`bases_for`) until the whole GPU suite passes with them on the device; a caller
reaches them by forcing their tile (:func:`pending_for`), and a process with
``SKCONTRACT_OFFER_PENDING=1`` (:data:`OFFER_PENDING`; ``tools/device_run.sh pending``)
offers them like the others. Offering them for good is moving them into
:data:`CATALOGUE`."""

OFFER_PENDING = os.environ.get("SKCONTRACT_OFFER_PENDING") == "1"
"""Whether :func:`bases_for` offers :data:`PENDING` in this process (read at import)."""


def pending_for(dtype: str, cc: int | None = None) -> tuple[KernelBase, ...]:
    """The :data:`PENDING` entries of ``dtype`` on compute capability ``cc``."""
    return tuple(b for b in PENDING.get(dtype, ()) if b.offered_on(cc) and b not in _WITHDRAWN)


def all_bases() -> list[KernelBase]:
    """Every entry a kernel is built for, once (an entry may serve several keys): the
    offered ones and :data:`PENDING`."""
    return list(dict.fromkeys(b for table in (CATALOGUE, DOT_CATALOGUE, PENDING)
                              for bases in table.values() for b in bases))
