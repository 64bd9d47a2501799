"""The Wgmma family: fp16 / bf16 operands on sm_90a (``sk_wgmma.cuh``).

TMA loads into a ring of shared-memory stages (128-byte swizzle), ``wgmma.mma_async`` from
shared memory, fp32 accumulators in registers, one producer warpgroup and one or two
consumer warpgroups (docs/design/hopper.md). This module holds the kernel's facts and the
16-bit menu (:func:`menu`), which the same kernel's other operand types
(:mod:`.wgmma_kmajor`) and the cluster pairs (:mod:`.wgmma_pair`) build on.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import ClassVar

from ...schedule.device import DeviceInfo
from ...schedule.types import ARRIVAL, CLUSTER, TileOption
from .calibration import WGMMA_EFFICIENCY, WGMMA_FIXUP_COST, WGMMA_SOLO_FRACTION
from .entry import CXX_TYPES, LAYOUT_PAIRS, SMEM_RESERVED_PER_CTA, Entry, cxx_bool
from .gates import WGMMA_PAIRED_MIN_WAVES, WGMMA_STREAMING_TILE

WGMMA_SWIZZLE_BYTES = 128
"""A k-tile row is one 128-byte swizzle row (BK = 64 16-bit elements)."""
MBARRIER_BYTES = 8
WGMMA_ACC_BYTES = 4
"""Bytes of one fp32 accumulator (the cluster protocol receives a tile of them)."""
WGMMA_FLAG_BYTES = 16
"""The fixup's flag after the mbarriers (one int, 16 bytes kept)."""
WGMMA_ALIGN_BYTES = 1024
"""Slack to align the ring to the 128-byte swizzle's 1024-byte period."""
WGMMA_EPI_PITCH = 40
"""Floats a row of the epilogue's staging buffer (the kernel's Cfg::EPI_PITCH: 32
columns, and 8 more than a multiple of 32 for conflict-free fragment writes)."""
WGMMA_STORE_COLS = 128
"""Output columns the epilogue's TMA store stages at once in an SM's shared memory
(the kernel's Cfg::STORE_COLS, :attr:`Wgmma.store_cols`): a 128-column pass of 64 rows is
16 KB a consumer warpgroup, which fits beside the rings of the one-CTA entries; a wider
tile stores in passes, each waiting until the last has read the staging."""

MERGED_DTYPES = ("float16", "bfloat16")
"""The dtypes of the merged-groups convolution kernels (:attr:`Wgmma.merges_groups`)."""

WGMMA_REGISTER_SPLITS = {1: (168, 40, 232), 2: (80, 32, 104)}
"""Entries of two consumer warpgroups whose warpgroups trade registers (setmaxnreg), by
CTAs an SM: (the registers a thread has at launch: 65536 over the CTAs' threads, in units of
8; the producer's after the trade; each consumer's), producer + 2 consumers = 3 x launch
(the kernel's Cfg::SPLIT_REGS, PRODUCER_REGS, CONSUMER_REGS). The 128 x 256 tile trades for
its 128 accumulators a thread; the paired 128 x 64 so that its fixups fit in registers at
two CTAs an SM."""
WGMMA_TRANSPOSER_REGISTER_SPLITS = {1: (168, 88, 208)}
"""The register splits, by CTAs an SM, of the trading kernels whose producer warpgroup also
transposes an operand in the stages (:meth:`Wgmma.transposes`): its transposers hold two
boxes' chunks and walk the table, which spills at the issuer's 40 registers."""

WGMMA_HYTIS_TILES = ((128, 256, 1),)
"""(BM, BN, CTAs an SM) of the entries whose kernel also runs HyTiS's small tile,
BM x BN / 2 (:attr:`Wgmma.small_bn`): the widest tile, whose last partial wave HyTiS runs as
twice as many half tiles with no reduction, where auto's cost model prefers that to
Stream-K and hybrid."""

WGMMA_MENU = ((128, 128, 6, {}),
              (128, 256, 4, {"trades_registers": True}),
              (64, 256, 5, {}),
              (64, 128, 4, {"ctas_per_sm": 2}),
              (128, 64, 8, {}),
              (128, 64, 3, {"ctas_per_sm": 2, "min_waves": WGMMA_PAIRED_MIN_WAVES,
                            "trades_registers": True}),
              (64, 64, 8, {}))
"""The Wgmma tiles, (BM, BN, stages of 16-bit operands, options): 128 x 256 and 128 x 128
for the many-tile shapes; the 64-row tiles for few rows (decode GEMV, strong scaling), whose
Stream-K partial tiles are half the bytes (64 x 128 runs two CTAs an SM); 128 x 64 for
shapes of few tiles and products of 64 columns (a convolution's 64 output channels),
deep-pipelined alone on an SM for few tiles and paired (:data:`.gates.WGMMA_PAIRED_MIN_WAVES`)
for many; and the streaming 64 x 64 (:data:`.gates.WGMMA_STREAMING_TILE`), which gives
skinny products (decode) tiles enough to spread over every SM with small partial tiles. The
64 x 64 ring is 8 stages, not the 13 its shared memory holds: on its products of one tile an
SM more loads in flight run slower."""


@dataclass(frozen=True)
class WgmmaMainloop:
    """The consumers' mainloop, by operand type: ``tma_dtype``, the element type the operands'
    TMA maps read (None: the entry's dtype; ``"tf32"`` rounds floats to a 10-bit mantissa on
    the way in); ``tf32x3``, float32 operands split into tf32 big and small parts, three
    wgmmas a k step (the kernel's Cfg::TF32X3, :class:`.wgmma_kmajor.WgmmaTf32x3`), a stage
    then holding the small parts beside the loaded boxes (:attr:`stage_copies`)."""

    tma_dtype: str | None = None
    tf32x3: bool = False

    @property
    def stage_copies(self) -> int:
        """Boxes' worth of shared memory a stage holds per box it loads."""
        return 2 if self.tf32x3 else 1

    def cfg_lines(self) -> str:
        return f"  static constexpr bool TF32X3 = {cxx_bool(self.tf32x3)};\n"


@dataclass(frozen=True)
class WgmmaOperands:
    """How an operand of either layout reaches the wgmmas, which read 16-bit operands of either
    major and 32- and 8-bit ones K-major only (:meth:`Wgmma.transposes`): ``"as_laid"``, read
    as they are (16-bit); ``"copied"``, the entries take a row-major A and a column-major B, and
    ``gemm`` copies an operand of another layout into that one first (tf32, int8); ``"turned"``,
    the producer warpgroup's other warps turn an MN-major operand K-major in the stages
    (3xTF32: WgmmaSmem::TRANSPOSES)."""

    transform: str = "as_laid"

    TRANSFORMS: ClassVar[tuple] = ("as_laid", "copied", "turned")

    def __post_init__(self):
        if self.transform not in self.TRANSFORMS:
            raise ValueError(f"operand transform {self.transform!r} is none of {self.TRANSFORMS}")

    def layouts(self) -> tuple[tuple[str, str], ...]:
        """The (A, B) layouts the entries take."""
        return (("row", "col"),) if self.transform == "copied" else LAYOUT_PAIRS


@dataclass(frozen=True)
class WgmmaClusters:
    """The kernel's two uses of thread-block clusters (``wgmma_cluster.cuh``): ``ctas``, the CTAs
    of a work unit (2: a cluster pair sharing B's k-tiles by multicast, ``sk_wgmma_pair``; the
    entry's ``CLUSTER`` and the kernel's Cfg::CLUSTER); ``cluster_sum``, whether the kernels
    run the ``cluster`` reduction (a tile's splits summed in one cluster's shared memory) where
    its receive buffer fits (:attr:`Wgmma.cluster_sum`)."""

    ctas: int = 1
    cluster_sum: bool = True

    @property
    def kernel(self) -> str:
        """The kernel template (the entry's ``KERNEL``)."""
        return "skc::sk_wgmma" if self.ctas == 1 else "skc::sk_wgmma_pair"

    def cfg_lines(self) -> str:
        return f"  static constexpr int CLUSTER = {self.ctas};\n"


@dataclass(frozen=True)
class WgmmaSmallRows:
    """HyTiS's small rows: ``tiles``, the (BM, BN, CTAs an SM) of the entries whose
    data-parallel kernel also runs the small tile BM x BN / 2 on a table's ``FLAG_SMALL`` rows
    (the kernel's Cfg::SMALL_BN, :attr:`Wgmma.small_bn`)."""

    tiles: tuple = ()

    def small_bn(self, bm: int, bn: int, ctas_per_sm: int) -> int:
        """Columns of the small tile of the BM x BN entry, 0 for an entry without one."""
        return bn // 2 if (bm, bn, ctas_per_sm) in self.tiles else 0


@dataclass(frozen=True)
class WgmmaMenu:
    """The 16-bit menu (:data:`WGMMA_MENU`) as an entry type runs it: ``left_out``, the
    (BM, BN, CTAs an SM) it has no entry of; ``trades``, those whose entry trades registers
    where the 16-bit one does not; ``efficiency_scale``, its efficiency relative to the
    16-bit entry of the same tile and occupancy (:data:`.calibration.WGMMA_EFFICIENCY`);
    ``solo_fraction``, (BM, BN, CTAs an SM) -> the entry's
    :attr:`~skcontract.schedule.TileOption.solo_fraction` (the tiles L2-bound on every SM;
    others 1)."""

    left_out: tuple = ()
    trades: tuple = ()
    efficiency_scale: float = 1.0
    solo_fraction: dict = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Wgmma(Entry):
    """fp16 / bf16 operands on sm_90a (``sk_wgmma.cuh``): TMA loads into a ring of ``stages``
    shared-memory stages (128-byte swizzle), ``wgmma.mma_async`` m64nBNk16 from shared
    memory, fp32 accumulators; one producer warpgroup and ``bm / 64`` (1 or 2) consumer
    warpgroups (``warps_m`` counts all of their warps, ``warps_n`` is 1). TMA needs 16-byte
    aligned bases and strides (``vec16_only``); ``bk`` is one 128-byte swizzle row.
    ``trades_registers``: the producer gives registers to the two consumer warpgroups
    (:data:`WGMMA_REGISTER_SPLITS` at the entry's occupancy).

    An entry type of the kernel is the composition of its policies: its mainloop
    (:class:`WgmmaMainloop`), how its operands reach the wgmmas (:class:`WgmmaOperands`), its
    clusters (:class:`WgmmaClusters`, which also give the entry's ``KERNEL``, ``CLUSTER`` and
    ``CLUSTER_SUM``), HyTiS's small rows (:class:`WgmmaSmallRows`) and its menu
    (:class:`WgmmaMenu`); the epilogue follows from the output type and the occupancy
    (:attr:`tma_store`, :attr:`store_cols`), the register trade from the entry
    (:attr:`register_split`)."""

    trades_registers: bool = False

    FAMILY: ClassVar[str] = "Wgmma"
    DTYPES: ClassVar[tuple] = ("float16", "bfloat16")
    ENTRY_HEADER: ClassVar[str] = "sk_wgmma.cuh"
    TENSOR_MAPS: ClassVar[bool] = True
    IM2COL: ClassVar[str | None] = "tma"
    IM2COL_HEADER: ClassVar[str] = "sk_wgmma_conv.cuh"
    IM2COL_KERNEL: ClassVar[str] = "skc::sk_wgmma_conv"
    FIXUP_COST: ClassVar[float] = WGMMA_FIXUP_COST

    MAINLOOP: ClassVar[WgmmaMainloop] = WgmmaMainloop()
    OPERANDS: ClassVar[WgmmaOperands] = WgmmaOperands("as_laid")
    CLUSTERS: ClassVar[WgmmaClusters] = WgmmaClusters()
    SMALL_ROWS: ClassVar[WgmmaSmallRows] = WgmmaSmallRows(WGMMA_HYTIS_TILES)
    MENU: ClassVar[WgmmaMenu] = WgmmaMenu(solo_fraction=WGMMA_SOLO_FRACTION)

    KERNEL: ClassVar[str] = CLUSTERS.kernel
    CLUSTER: ClassVar[int] = CLUSTERS.ctas
    CLUSTER_SUM: ClassVar[bool] = CLUSTERS.cluster_sum

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.KERNEL = cls.CLUSTERS.kernel
        cls.CLUSTER = cls.CLUSTERS.ctas
        cls.CLUSTER_SUM = cls.CLUSTERS.cluster_sum

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
        if (self.OPERANDS.transform == "as_laid") != (self.elem_bytes == 2):
            raise ValueError("Wgmma: wgmma reads 16-bit operands as laid out, others K-major "
                             "only (copied or turned in the stages)")
        if self.trades_registers and (self.bm != 128 or
                                      self.ctas_per_sm not in WGMMA_REGISTER_SPLITS):
            raise ValueError("Wgmma: registers are traded with two consumer warpgroups, at "
                             f"{sorted(WGMMA_REGISTER_SPLITS)} CTAs an SM")

    def cfg_lines(self, spec) -> str:
        split = self.register_split_of(spec) or (0, 0, 0)
        return (f"  static constexpr int STAGES = {self.stages};\n"
                + self.CLUSTERS.cfg_lines()
                + f"  static constexpr bool A_KMAJOR = {cxx_bool(spec.a_kcontig)};\n"
                f"  static constexpr bool B_KMAJOR = {cxx_bool(spec.b_kcontig)};\n"
                f"  static constexpr int EPI_PITCH = {WGMMA_EPI_PITCH};\n"
                f"  static constexpr int STORE_COLS = {self.store_cols};\n"
                f"  static constexpr bool MASKS_STAGES = {cxx_bool(self.masks_stages)};\n"
                f"  static constexpr bool MERGED_GROUPS = {cxx_bool(spec.merged)};\n"
                f"  static constexpr int SPLIT_REGS = {split[0]};\n"
                f"  static constexpr int PRODUCER_REGS = {split[1]};\n"
                f"  static constexpr int CONSUMER_REGS = {split[2]};\n"
                + self.MAINLOOP.cfg_lines()
                + f"  static constexpr int SMALL_BN = {self.small_bn_of(spec)};\n"
                f"  using ML = skc::WgmmaTile<{self.bm}, {self.bn}, Acc>;\n")

    def protocols(self) -> tuple[str, ...]:
        """Every protocol the family runs (the cluster one where :attr:`cluster_sum`), but
        arrival on an entry that trades registers with 32-bit outputs (tf32's and 3xTF32's
        float outputs: its kernels spill). Auto plans no arrival on them
        (``TileOption.arrival``), and :func:`..resolve.resolve_gemm` plans again without an
        entry whose protocol a forced mode or reduction asks for and its kernels lack."""
        protos = super().protocols()
        if self.trades_registers and CXX_TYPES[self.dtype_out][1] == 4:
            return tuple(p for p in protos if p != ARRIVAL)
        return protos

    def layouts(self) -> tuple[tuple[str, str], ...]:
        return self.OPERANDS.layouts()

    @property
    def small_bn(self) -> int:
        """Columns of the entry's HyTiS small tile (BM x BN / 2), 0 for an entry without
        one (:attr:`SMALL_ROWS`)."""
        return self.SMALL_ROWS.small_bn(self.bm, self.bn, self.ctas_per_sm)

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
        option = replace(super().option(), solo_fraction=self.MENU.solo_fraction.get(
            (self.bm, self.bn, self.ctas_per_sm), 1.0))
        if not self.small_bn:
            return option
        small_eff = WGMMA_EFFICIENCY[self.bm, self.small_bn, self.ctas_per_sm] * \
            self.MENU.efficiency_scale
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
        return cls.MAINLOOP.stage_copies

    @property
    def tma_dtype(self) -> str:
        """The element type of the operands' TMA maps (:func:`..tma.gemm_maps`)."""
        return self.MAINLOOP.tma_dtype or self.dtype

    @property
    def tma_store(self) -> bool:
        """Whether the epilogue can store C by TMA (``WgmmaEpilogue::run_tma`` packs 16-bit
        outputs; :func:`..tma.output_map` encodes no map for others)."""
        return CXX_TYPES[self.dtype_out][1] == 2

    @property
    def masks_stages(self) -> bool:
        """Whether the entry's convolution kernel can zero a folded convolution's padding
        taps in the landed stages (``mask_stage``; the kernel's Cfg::MASKS_STAGES): its
        consumers have the registers to spare, fewer than 128 accumulators a thread or
        registers traded from the producer (the 64 x 256 tile has neither).
        :func:`..resolve.resolve_gemm` offers folded convolutions only these."""
        return self.bn < 256 or self.trades_registers

    @property
    def merges_groups(self) -> bool:
        """Whether the entry has merged-groups convolution kernels (``a_source="merged"``,
        :func:`...conv.merged_groups`): 16-bit ones whose consumers have the registers for
        the recomputation of non-finite outputs, alone on an SM or trading registers (two
        CTAs an SM without the trade spill)."""
        return self.dtype in MERGED_DTYPES and (self.ctas_per_sm == 1 or
                                                self.trades_registers)

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
        (``transpose_stage``; a stage's `transposed` mbarrier more)."""
        return self.elem_bytes == 4 and not (spec.a_kcontig and spec.b_kcontig)

    def _smem_bytes(self, protocol: str) -> int:
        """The stage ring, the epilogue's staging (a consumer warpgroup's: 64 rows of
        WGMMA_EPI_PITCH floats, or of store_cols output elements where the epilogue stores
        by TMA, whichever is larger; in the cluster protocol at least the tile's fp32
        accumulators, the peers' shares arriving there), the ring's full / empty mbarriers,
        the fixup's flag and the cluster protocol's `ready` mbarrier, plus the slack that
        aligns the ring to the swizzle atom."""
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
        return self.CLUSTERS.cluster_sum and self._smem_bytes(CLUSTER) <= per_cta

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


def wgmma_entry(dtype: str, bm: int, bn: int, stages: int, ctas_per_sm: int = 1,
                min_waves: float = 0.0, trades_registers: bool = False, cls=Wgmma) -> Wgmma:
    """The ``cls`` entry of a BM x BN tile of ``dtype``: one swizzle row a k-tile, ``stages``
    of 16-bit operands' ring (divided by the type's :meth:`Wgmma.stage_copies`)."""
    eff = WGMMA_EFFICIENCY[bm, bn, ctas_per_sm] * cls.MENU.efficiency_scale
    return cls(dtype, bm, bn, WGMMA_SWIZZLE_BYTES // CXX_TYPES[dtype][1],
               stages // cls.stage_copies(),
               4 * (bm // 64 + 1), 1, ctas_per_sm=ctas_per_sm, efficiency=eff, min_cc=90,
               vec16_only=True, min_waves=min_waves, trades_registers=trades_registers)


def menu(dtype: str, cls=Wgmma) -> tuple[Wgmma, ...]:
    """The :data:`WGMMA_MENU` entries of ``cls`` for ``dtype`` operands, less its menu's
    ``left_out`` tiles, its ``trades`` trading registers."""
    out = []
    for bm, bn, stages, kw in WGMMA_MENU:
        key = (bm, bn, kw.get("ctas_per_sm", 1))
        if key not in cls.MENU.left_out:
            kw = {**kw, "trades_registers": kw.get("trades_registers", False)
                  or key in cls.MENU.trades}
            out.append(wgmma_entry(dtype, bm, bn, stages, cls=cls, **kw))
    return tuple(out)
