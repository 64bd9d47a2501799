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

from dataclasses import dataclass, fields
from typing import ClassVar

from ..dtypes import accumulator_dtype
from ..schedule.types import TileOption

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
"""The catalogue key of float32 operands on tf32 tensor cores (``gemm(allow_tf32=True)``)."""

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


@dataclass(frozen=True)
class KernelBase:
    """One catalogue entry: a tile configuration of one mainloop family.

    ``dtype`` is the operand dtype; ``warps_m x warps_n`` warps share the BM x BN tile;
    ``stages`` is the depth of the cp.async pipeline; ``min_cc`` the lowest compute
    capability (major * 10 + minor) the entry is offered on; ``vec16_only`` marks entries that
    run 16-byte aligned operands only (their element-wise copies would spill).
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

    FAMILY: ClassVar[str] = ""
    DTYPES: ClassVar[tuple] = ()

    def __post_init__(self):
        if self.dtype not in self.DTYPES:
            raise ValueError(f"{self.FAMILY} takes {self.DTYPES} operands, not {self.dtype!r}")
        for name in ("bm", "bn", "bk", "stages", "warps_m", "warps_n", "ctas_per_sm"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"{self.FAMILY}.{name} must be a positive int, got {v!r}")
        if self.stages < 2:
            raise ValueError(f"{self.FAMILY}: the pipeline needs at least two stages")
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
        return TileOption(self.tile, self.ctas_per_sm, self.efficiency, small_tiles=())

    def offered_on(self, cc: int | None) -> bool:
        """Whether the launcher offers this entry on compute capability ``cc`` (None: any)."""
        return cc is None or cc >= self.min_cc

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


def _kc(loader: str) -> str:
    """'true' when a TileLoader type string is k-contiguous (its 4th template argument)."""
    return loader.split(",")[3].strip()


FAMILIES = {cls.FAMILY: cls for cls in (Mma16, Dmma, Ffma, Tf32, Imma)}
"""Family name -> entry type (for :meth:`KernelBase.from_dict`)."""


CATALOGUE: dict[str, tuple[KernelBase, ...]] = {
    "float16": (Mma16("float16", 128, 128, 32, 4, 2, 4),),
    "bfloat16": (Mma16("bfloat16", 128, 128, 32, 4, 2, 4),),
    "float32": (
        Ffma("float32", 128, 128, 32, 3, 2, 4),
        # a finer k-iteration: strong-scaling shapes split over twice the CTAs
        Ffma("float32", 128, 128, 16, 3, 2, 4, efficiency=1.05),
        # M <= 8: the skinny tile
        Ffma("float32", 8, 256, 16, 4, 2, 4, ctas_per_sm=2, efficiency=2.8331),
        # M = 1: one row, 4 columns a thread, B streams through shared memory once;
        # BK = 8 so that a column-major B's [1024][BK + 4] stages fit 4 deep
        Ffma("float32", 1, 1024, 8, 4, 1, 8, efficiency=18.5),
    ),
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
    TF32: (Tf32("float32", 128, 128, 32, 3, 2, 4),),
    "int8": (Imma("int8", 128, 128, 64, 4, 2, 4),),
}
"""Every entry the launcher may choose, by operand dtype (and :data:`TF32`)."""


def bases_for(dtype: str, allow_tf32: bool = False, cc: int | None = None,
              vec16: bool = True) -> tuple[KernelBase, ...]:
    """The entries offered for ``dtype`` operands on compute capability ``cc`` (None: any);
    ``vec16=False`` (an operand not 16-byte aligned) leaves out the ``vec16_only`` ones.
    TypeError for a dtype no kernel takes."""
    key = TF32 if (allow_tf32 and dtype == "float32") else dtype
    if key not in CATALOGUE or key == TF32 and dtype != "float32":
        raise TypeError(f"gemm: unsupported dtype {dtype!r} (have "
                        f"{', '.join(k for k in CATALOGUE if k != TF32)})")
    return tuple(b for b in CATALOGUE[key]
                 if b.offered_on(cc) and (vec16 or not b.vec16_only))


def all_bases() -> list[KernelBase]:
    return [b for bases in CATALOGUE.values() for b in bases]
