"""The catalogue entry: what every kernel family's entry type shares.

An entry (an instance of an :class:`Entry` subclass) is one tile configuration of one family:
its C++ mainloop template, its own constraints, its tile / pipeline / warp layout, the
occupancy it is built for, its cost-model efficiency, and the offer gates planning reads
(:mod:`.gates`), in one place. The scheduler never sees this module:
:meth:`Entry.option` hands it a :class:`~skcontract.schedule.TileOption` as data.

A family's entry type registers itself under its ``FAMILY`` name when its class is defined
(:data:`FAMILIES`, read by :meth:`Entry.from_dict`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from ...dtypes import accumulator_dtype
from ...schedule.types import ARRIVAL, CLUSTER, Protocol, TileOption

CXX_TYPES = {
    "float16": ("skc::half_t", 2),
    "bfloat16": ("skc::bfloat16_t", 2),
    "float32": ("float", 4),
    "float64": ("double", 8),
    "int8": ("skc::int8_t", 1),
    "int32": ("int", 4),
    "complex64": ("skc::complex64_t", 8),
    "complex128": ("skc::complex128_t", 16),
}
"""dtype name -> (C++ storage type, element bytes). Complex operands run as they lie on the
Dot family only (``complex.cuh``); the other families run complex products on their real
form (:mod:`..embed`)."""

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
"""Compute capability of each compile target (``Entry.min_cc`` is compared with it)."""

PAD_BYTES = 16
"""Default shared-memory row padding (one 16-byte chunk: conflict-free ldmatrix rows)."""
XC_PAD_BYTES_FP64 = 64
"""Scalar fp64 fragments: x-contiguous stages are padded by 64 bytes."""
VEC16_BYTES = 16
"""Width of one vector copy (cp.async, or a Dot lane's load)."""
SMEM_RESERVED_PER_CTA = 1024
"""Shared memory the hardware reserves per resident CTA (compute capability 8.0 and up)."""

LAYOUT_PAIRS = (("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"))
"""Every (A, B) pair of layouts ("row": last index contiguous)."""

FAMILIES: dict[str, type] = {}
"""Family name -> entry type; each entry type that names a ``FAMILY`` of its own is added
when its class is defined (:meth:`Entry.from_dict` reads it)."""


def vec16_elems(dtype: str) -> int:
    """Elements of ``dtype`` in one 16-byte vector."""
    return VEC16_BYTES // CXX_TYPES[dtype][1]


@dataclass(frozen=True)
class Entry:
    """One catalogue entry: a tile configuration of one mainloop family.

    ``dtype`` is the operand dtype; ``warps_m x warps_n`` warps share the BM x BN tile;
    ``stages`` is the depth of the cp.async pipeline; ``min_cc`` the lowest compute
    capability (major * 10 + minor) the entry is offered on; ``vec16_only`` marks entries that
    run 16-byte aligned operands only (their element-wise copies would spill).

    The offer gates (planning policy, whose values live in :mod:`.gates`): ``min_waves``:
    the entry is offered only to products whose output tiles fill at least that many waves
    of its resident CTAs (:meth:`fills_waves`), and, where ``max_waves`` is set, at most that
    many; ``min_k_iterations``: the entry is offered only to products whose tiles' loops
    run at least that many k-iterations (:meth:`runs_long_enough`); ``splits_only``: the
    entry is planned only in schedules that split its tiles
    (:attr:`~skcontract.schedule.types.TileOption.splits_only`); ``b_off_lines_only``: the
    entry is offered only to products whose B rows start off
    :data:`~.gates.LINE_BYTES` lines (and to a caller who forces its tile); ``im2col_only``:
    the entry is offered only to convolutions' implicit GEMMs (a narrow tile for grouped
    convolutions' few output channels a group) and to a caller who forces its tile. An
    entry is named
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
    im2col_only: bool = False

    FAMILY: ClassVar[str] = ""
    DTYPES: ClassVar[tuple] = ()
    ENTRY_HEADER: ClassVar[str] = "sk_gemm.cuh"
    """The header whose kernel template the entry instantiates (jit.py inlines it)."""
    KERNEL: ClassVar[str] = "skc::sk_gemm"
    TENSOR_MAPS: ClassVar[bool] = False
    """Whether the kernel takes TMA descriptors of A, B and C and the epilogue's store flag
    after the common arguments (:mod:`..tma`)."""
    IM2COL: ClassVar[str | None] = None
    """How the family's convolution entry (the implicit GEMM of :mod:`..conv`) gets A from a
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
    is the schedule's times this (:class:`~.wgmma_pair.WgmmaPair`)."""
    CLUSTER_SUM: ClassVar[bool] = False
    """Whether the family runs the ``cluster`` reduction (a tile's splits summed in the
    shared memory of one cluster's CTAs, launched in clusters of the schedule's splits)."""
    SHARED_SUM: ClassVar[bool] = True
    """Whether the family's kernels run the arrival protocol's shared sum (fixup.cuh); one
    whose partials are output sums (Dot) has its last arrival sum them instead."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "FAMILY" in cls.__dict__:
            FAMILIES[cls.FAMILY] = cls

    def protocols(self) -> tuple[str, ...]:
        """The fixup protocols the entry's kernels are built for (every
        :class:`~skcontract.schedule.Protocol` less those the family does not run)."""
        return tuple(p for p in Protocol if p != CLUSTER or self.cluster_sum)

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
        la = tile_loader(spec, self.bm, spec.a_kcontig, spec.a_vec)
        lb = tile_loader(spec, self.bn, spec.b_kcontig, spec.b_vec)
        return (f"  static constexpr int STAGES = {self.stages};\n"
                f"  using LA = {la};\n  using LB = {lb};\n"
                f"  using ML = {self.mainloop(la, lb)};\n")

    def transposes(self, spec) -> bool:
        """Whether the kernel of ``spec`` turns an operand's layout in its stages (the
        Wgmma tf32 kernels do, :meth:`.wgmma.Wgmma.transposes`)."""
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
    def accumulator_dtype(self) -> str:
        return accumulator_dtype(self.dtype).name

    @property
    def scalar_dtype(self) -> str:
        """The dtype of the kernel's alpha and beta: the accumulator's, real for a complex
        one (``complex.cuh``, ScalarOf)."""
        return np.dtype(self.accumulator_dtype).type(0).real.dtype.name

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
        (:func:`.gates.memory_bound`), the only one offered to them."""
        return False

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["family"] = self.FAMILY
        return d

    @staticmethod
    def from_dict(d: dict) -> "Entry":
        # (JSON writes a tuple field, such as Dot's conj, as a list)
        d = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return FAMILIES[d.pop("family")](**d)


def cxx_bool(b: bool) -> str:
    return "true" if b else "false"


def tile_loader(spec, rows: int, kcontig: bool, vec: int) -> str:
    """The TileLoader type of one operand of a GEMM-family spec."""
    entry = spec.entry
    return (f"skc::TileLoader<{CXX_TYPES[entry.dtype][0]}, {rows}, {entry.bk}, "
            f"{cxx_bool(kcontig)}, {vec}, {entry.threads}, {entry.pad(kcontig)}, "
            f"{spec.loader_unroll(vec)}>")


def k_contiguous(loader: str) -> str:
    """'true' when a TileLoader type string is k-contiguous (its 4th template argument)."""
    return loader.split(",")[3].strip()
