"""KernelSpec: one frozen description = one template instantiation of ``sk_gemm.cuh``.

The host emits a tiny source: the inlined headers, a ``Cfg`` struct spelling out the spec,
and the kernel is fetched by the name expression ``skc::sk_gemm<Cfg_...>``. Every spec the
heuristic can choose is enumerated from :data:`HEURISTIC_TILES` by :func:`all_specs`; the
compile check walks that list.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

import numpy as np

NARROW_COPY_UNROLL = 4
"""Unroll factor of the shared-memory loader's element-wise (misaligned) copies."""

# dtype name -> (C++ storage type, element bytes). int32 is only an output / accumulator type
# (of int8 operands); the input dtypes with kernels are the keys of INPUT_DTYPES below.
CXX_TYPES = {
    "float16": ("skc::half_t", 2),
    "bfloat16": ("skc::bfloat16_t", 2),
    "float32": ("float", 4),
    "float64": ("double", 8),
    "int8": ("skc::int8_t", 1),
    "int32": ("int", 4),
}
# operand dtype -> (output dtype of gemm() by default, accumulator dtype)
INPUT_DTYPES = {
    "float16": ("float16", "float32"),
    "bfloat16": ("bfloat16", "float32"),
    "float32": ("float32", "float32"),
    "float64": ("float64", "float64"),
    "int8": ("int32", "int32"),
}
MAINLOOPS = ("mma_sync", "ffma")
# fp64 m16n8k8 fragment paths (KernelSpec.frag): "scalar" = MainloopDmma16's 8-byte loads;
# "vec" = MainloopDmmaVec (fragments permuted inside each k8 step so that they load as
# 16-byte pairs); "vecdb" = "vec" with the next k8 step's fragments loaded before this
# step's mma.
FRAGS = ("scalar", "vec", "vecdb")
# Pitches (doubles) of the "vec" stages, for conflict-free fragment loads (MainloopDmmaVec in
# mainloop_mma_sync.cuh says why): k-contiguous VEC_KC_PITCH_REM (mod VEC_KC_PITCH_MOD);
# x-contiguous 2 (mod 4), which VEC_XC_PAD_BYTES of padding gives for any extent that is a
# multiple of 4 (the scalar path pads x-contiguous fp64 by 64 bytes instead).
VEC_KC_PITCH_MOD, VEC_KC_PITCH_REM = 16, 8
VEC_XC_PAD_BYTES = 16
# fp32 FFMA inner loops (KernelSpec.ffma): "kslice" = MainloopFfma (4-wide k slices read
# straight from the stages); "kmajor" = MainloopFfmaKMajor (per single k, 8 + 8 values from
# k-major shared memory, next k's fragments loaded ahead; k-contiguous stages transposed into
# a scratch after the stages). "kmajor" is 128x128 float32 only.
FFMA_PATHS = ("kslice", "kmajor")
KMAJOR_TILE = (128, 128)
FIXUPS = ("none", "atomic", "deterministic", "aligned")
LAYOUTS = ("row", "col")
FIXUP_CODES = {"none": 0, "atomic": 1, "deterministic": 2, "aligned": 3}
# compute capability of each compile target (KernelSpec.min_cc is compared with it)
ARCH_CC = {"sm_80": 80, "sm_90a": 90}


@dataclass(frozen=True)
class KernelSpec:
    """What one compiled kernel is.

    ``a_layout``/``b_layout``: ``row`` means the last index is contiguous (A[m, k] row-major:
    k contiguous; B[k, n] row-major: n contiguous). ``a_vec``/``b_vec``: elements per async
    copy along the contiguous dimension (16 bytes when leading dimension and base pointer are
    16-byte aligned, else 1 element).
    """

    dtype_in: str = "float16"
    dtype_out: str = "float16"
    dtype_acc: str = "float32"
    bm: int = 128
    bn: int = 128
    bk: int = 32
    stages: int = 4
    warps_m: int = 2
    warps_n: int = 4
    mainloop: str = "mma_sync"
    fixup: str = "deterministic"
    a_layout: str = "row"
    b_layout: str = "row"
    a_vec: int = 8
    b_vec: int = 8
    min_blocks: int = 1  # __launch_bounds__ minimum CTAs per SM (caps registers per thread)
    mma_k: int = 0  # fp64 mma_sync: 0 = m8n8k4; 4 / 8 / 16 = m16n8k{4,8,16} (sm_90)
    frag: str = "scalar"  # fp64 mma_k=8 fragment path (FRAGS); "vec"/"vecdb" need mma_k=8
    ffma: str = "kslice"  # fp32 FFMA inner loop (FFMA_PATHS); "kmajor" = MainloopFfmaKMajor
    # lowest compute capability (major * 10 + minor) the launcher offers this base on; the
    # compile check builds it only for the ARCH_CC targets at or above it
    min_cc: int = 0
    # float32 + mma_sync = tf32 tensor cores (mma.m16n8k8.tf32, chosen only with
    # gemm(allow_tf32=True)); int8 + mma_sync = mma.m16n8k32.s8 with int32 accumulators/output.

    def __post_init__(self):
        if self.dtype_in not in CXX_TYPES or self.dtype_out not in CXX_TYPES:
            raise ValueError(f"unsupported dtype in {self}")
        if self.mainloop not in MAINLOOPS or self.fixup not in FIXUPS:
            raise ValueError(f"unsupported mainloop/fixup in {self}")
        if self.a_layout not in LAYOUTS or self.b_layout not in LAYOUTS:
            raise ValueError(f"unsupported layout in {self}")
        if self.mainloop == "ffma" and self.warps != 8:
            raise ValueError("the ffma mainloop runs 256 threads (8 warps)")
        if self.dtype_in not in INPUT_DTYPES:
            raise ValueError(f"no kernel takes {self.dtype_in} operands")
        if self.dtype_in == "int8":
            if (self.dtype_out, self.dtype_acc, self.mainloop) != ("int32", "int32", "mma_sync"):
                raise ValueError("int8 operands run on mma_sync with int32 accumulators and "
                                 "int32 output")
        elif "int32" in (self.dtype_out, self.dtype_acc):
            raise ValueError("int32 output / accumulators only with int8 operands")
        if self.mainloop == "mma_sync" and self.dtype_in == "float32" and (
                self.dtype_acc != "float32" or self.mma_k):
            raise ValueError("tf32 mma.sync accumulates in float32 (m16n8k8 only)")
        if self.frag not in FRAGS:
            raise ValueError(f"unsupported frag {self.frag!r} (have {FRAGS})")
        if self.frag != "scalar" and (self.dtype_in, self.mainloop, self.mma_k) != (
                "float64", "mma_sync", 8):
            raise ValueError("frag='vec'/'vecdb' is the fp64 mma_sync m16n8k8 path (mma_k=8)")
        if int(self.min_cc) != self.min_cc or self.min_cc < 0:
            raise ValueError(f"min_cc must be a compute capability like 90, got {self.min_cc!r}")
        if self.ffma not in FFMA_PATHS:
            raise ValueError(f"unsupported ffma {self.ffma!r} (have {FFMA_PATHS})")
        if self.ffma == "kmajor" and (self.dtype_in, self.mainloop, (self.bm, self.bn)) != (
                "float32", "ffma", KMAJOR_TILE):
            raise ValueError("ffma='kmajor' is the float32 ffma mainloop on 128x128 tiles")

    # ---- derived ------------------------------------------------------------------------
    @property
    def warps(self) -> int:
        return self.warps_m * self.warps_n

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def elem_bytes(self) -> int:
        return CXX_TYPES[self.dtype_in][1]

    @property
    def acc_bytes(self) -> int:
        return np.dtype(self.dtype_acc).itemsize

    @property
    def is_tf32(self) -> bool:
        return self.dtype_in == "float32" and self.mainloop == "mma_sync"

    def pad(self, kcontig: bool) -> int:
        """Shared-memory row padding in elements (TileLoader's PAD): 16 bytes; fp64
        x-contiguous 64 bytes; tf32 k-contiguous 8 floats (conflict-free 8-byte fragments);
        fp64 "vec" fragments: k-contiguous pitch 8 (mod 16) doubles, x-contiguous 16 bytes
        (see VEC_KC_PITCH_MOD)."""
        if self.is_tf32 and kcontig:
            return 8
        if self.frag != "scalar":
            if kcontig:
                return (VEC_KC_PITCH_REM - self.bk) % VEC_KC_PITCH_MOD
            return VEC_XC_PAD_BYTES // self.elem_bytes
        return 8 if (self.elem_bytes == 8 and not kcontig) else 16 // self.elem_bytes

    def loader_unroll(self, vec: int) -> int:
        """TileLoader's UNROLL_ARG: 0 = fully unrolled; copies narrower than 16 bytes (the
        misaligned fallback) are unrolled by NARROW_COPY_UNROLL: fully unrolled, their many
        in-flight element copies spill registers on sm_80 (`compile_check --all`)."""
        return NARROW_COPY_UNROLL if vec * self.elem_bytes < 16 else 0

    def _stage_bytes(self, rows: int, kcontig: bool) -> int:
        pad = self.pad(kcontig)
        cont, lines = (self.bk, rows) if kcontig else (rows, self.bk)
        return lines * (cont + pad) * self.elem_bytes

    @property
    def a_kcontig(self) -> bool:
        return self.a_layout == "row"

    @property
    def b_kcontig(self) -> bool:
        return self.b_layout == "col"

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory; the kernel traps if the launch gives less."""
        return self.stages * (self._stage_bytes(self.bm, self.a_kcontig)
                              + self._stage_bytes(self.bn, self.b_kcontig)) + self.scratch_bytes

    @property
    def scratch_bytes(self) -> int:
        """Mainloop scratch after the stages (ML::SCRATCH_BYTES): "kmajor" transposes each
        k-contiguous operand into a [BK][X] k-major buffer."""
        if self.ffma != "kmajor":
            return 0
        rows = self.bm * self.a_kcontig + self.bn * self.b_kcontig
        return rows * self.bk * self.elem_bytes

    @property
    def acc_per_thread(self) -> int:
        return self.bm * self.bn // self.threads

    @property
    def slot_elems(self) -> int:
        """Accumulators in one workspace slot (one tile, fragment order)."""
        return self.bm * self.bn

    @property
    def name(self) -> str:
        return (f"{self.dtype_in}_{self.dtype_out}_{self.dtype_acc}_{self.bm}x{self.bn}x{self.bk}"
                f"_s{self.stages}_w{self.warps_m}x{self.warps_n}_{self.mainloop}_{self.fixup}"
                f"_{self.a_layout[0]}{self.b_layout[0]}_v{self.a_vec}x{self.b_vec}"
                + (f"_mb{self.min_blocks}" if self.min_blocks != 1 else "")
                + (f"_k{self.mma_k}" if self.mma_k else "")
                + (f"_{self.frag}" if self.frag != "scalar" else "")
                + (f"_{self.ffma}" if self.ffma != "kslice" else ""))

    def to_dict(self) -> dict:
        return asdict(self)

    # ---- code generation ----------------------------------------------------------------
    @property
    def cfg_name(self) -> str:
        return "Cfg_" + self.name

    @property
    def name_expression(self) -> str:
        return f"skc::sk_gemm<{self.cfg_name}>"

    def cfg_source(self) -> str:
        tin = CXX_TYPES[self.dtype_in][0]
        tout = CXX_TYPES[self.dtype_out][0]
        acc = CXX_TYPES[self.dtype_acc][0]
        akc = "true" if self.a_kcontig else "false"
        bkc = "true" if self.b_kcontig else "false"
        # kmajor: TileLoader's LINE_STEP (fewer registers held per split, see loader.cuh)
        step = ", true" if self.ffma == "kmajor" else ""
        la = (f"skc::TileLoader<{tin}, {self.bm}, {self.bk}, {akc}, {self.a_vec}, {self.threads}, "
              f"{self.pad(self.a_kcontig)}, {self.loader_unroll(self.a_vec)}{step}>")
        lb = (f"skc::TileLoader<{tin}, {self.bn}, {self.bk}, {bkc}, {self.b_vec}, {self.threads}, "
              f"{self.pad(self.b_kcontig)}, {self.loader_unroll(self.b_vec)}{step}>")
        if self.ffma == "kmajor":
            ml = f"skc::MainloopFfmaKMajor<{self.bm}, {self.bn}, {self.bk}, LA, LB>"
        elif self.mainloop == "ffma":
            ml = f"skc::MainloopFfma<{tin}, {self.bm}, {self.bn}, {self.bk}, LA, LB>"
        elif self.frag != "scalar":
            ml = (f"skc::MainloopDmmaVec<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                  f"{self.warps_n}, LA, LB, {'true' if self.frag == 'vecdb' else 'false'}>")
        elif self.dtype_in == "float64" and self.mma_k:
            ml = (f"skc::MainloopDmma16<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                  f"{self.warps_n}, {self.mma_k}, LA, LB>")
        elif self.dtype_in == "float32":
            ml = (f"skc::MainloopTf32<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                  f"{self.warps_n}, LA, LB>")
        elif self.dtype_in == "int8":
            ml = (f"skc::MainloopImma<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                  f"{self.warps_n}, LA, LB>")
        elif self.dtype_in == "float64":
            ml = (f"skc::MainloopDmma<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                  f"{self.warps_n}, LA, LB>")
        else:
            ml = (f"skc::MainloopMma16<{tin}, {self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                  f"{self.warps_n}, LA, LB, {akc}, {bkc}>")
        return (
            f"struct {self.cfg_name} {{\n"
            f"  using TIn = {tin};\n  using TOut = {tout};\n  using Acc = {acc};\n"
            f"  static constexpr int BM = {self.bm}, BN = {self.bn}, BK = {self.bk};\n"
            f"  static constexpr int STAGES = {self.stages}, THREADS = {self.threads};\n"
            f"  static constexpr int MIN_BLOCKS = {self.min_blocks};\n"
            f"  static constexpr int FIXUP = {FIXUP_CODES[self.fixup]};\n"
            f"  using LA = {la};\n  using LB = {lb};\n  using ML = {ml};\n}};\n")


# ---- the heuristic's menu ----------------------------------------------------------------
# The bases auto may choose per input dtype (the scheduler's cost model picks among them).
# Everything the launcher can pick is one of these with fixup / layouts / vector widths set.
# Keys are operand dtypes, plus TF32 ("tf32"): float32 operands when gemm(allow_tf32=True).
TF32 = "tf32"
HEURISTIC_TILES = {
    # 128x256x32 3 stages 16 warps compiles but has not passed the GPU tests yet: not listed
    "float16": (KernelSpec("float16", "float16", "float32", 128, 128, 32, 4, 2, 4, "mma_sync"),),
    "bfloat16": (KernelSpec("bfloat16", "bfloat16", "float32", 128, 128, 32, 4, 2, 4, "mma_sync"),),
    # exact fp32: 8x8 FFMA register tiles; 8x256 is the skinny (GEMV-like, M <= 8) tile,
    # 1x1024 the one-row one
    "float32": (KernelSpec("float32", "float32", "float32", 128, 128, 32, 3, 2, 4, "ffma",
                           a_vec=4, b_vec=4),
                # BK = 16: twice the k-iterations, so strong-scaling shapes split over twice
                # the CTAs at MIN_ITERS_PER_SPLIT (~5% slower per FLOP: heuristics.BK_EFFICIENCY)
                KernelSpec("float32", "float32", "float32", 128, 128, 16, 3, 2, 4, "ffma",
                           a_vec=4, b_vec=4),
                KernelSpec("float32", "float32", "float32", 8, 256, 16, 4, 2, 4, "ffma",
                           a_vec=4, b_vec=4),
                # M = 1 (GEMV): one row, 4 columns a thread, so B streams through shared
                # memory once with 16-byte reads and no padded rows (1x8192x8192 on the H200,
                # 2026-11-30: 74.8 us vs 87.4 us for 8x256; cuBLAS 65.3). BK = 8: a
                # column-major B's [1024][BK + 4] stages must fit 4 deep
                KernelSpec("float32", "float32", "float32", 1, 1024, 8, 4, 1, 8, "ffma",
                           a_vec=4, b_vec=4)),
    # fp64: DMMA m16n8k8 128x64x32 (8 warps of 32x32, 16-byte "vec" fragments: cuBLAS' own
    # 1024^3 configuration, 1.1-1.25x the former 128x128 16-warp base on the corpus subset,
    # H200 2026-11-30), m16n8k16 64x64 (4 warps of 32x32, two CTAs per SM), and the skinny
    # (8x256) and one-row (1x512) tiles on DFMA
    "float64": (KernelSpec("float64", "float64", "float64", 128, 64, 32, 3, 4, 2, "mma_sync",
                           a_vec=2, b_vec=2, mma_k=8, frag="vec"),
                # the same tile as 4 warps of 64x32 (a quarter less shared-memory traffic per
                # DMMA) with two CTAs per SM: cuBLAS's 2304^2 x 4096 configuration, 0.80x
                # cuBLAS there vs 0.73x for the base (H200, 2026-11-30); the launcher plans it
                # at its own occupancy (SHARES_SM). Hopper only: on sm_80 (m8n8k4) it spills
                KernelSpec("float64", "float64", "float64", 128, 64, 16, 3, 2, 2, "mma_sync",
                           a_vec=2, b_vec=2, mma_k=8, frag="vecdb", min_blocks=2, min_cc=90),
                KernelSpec("float64", "float64", "float64", 64, 64, 16, 3, 2, 2, "mma_sync",
                           a_vec=2, b_vec=2, mma_k=16),
                KernelSpec("float64", "float64", "float64", 8, 256, 16, 4, 2, 4, "ffma",
                           a_vec=2, b_vec=2),
                # M = 1: one row, 2 columns a thread (136.3 vs 142.9 us; cuBLAS 125.4)
                KernelSpec("float64", "float64", "float64", 1, 512, 8, 4, 1, 8, "ffma",
                           a_vec=2, b_vec=2)),
    # tf32 tensor cores (opt-in): mma.m16n8k8, 8 warps of 64x32, 3 stages (120 KiB smem)
    TF32: (KernelSpec("float32", "float32", "float32", 128, 128, 32, 3, 2, 4, "mma_sync",
                      a_vec=4, b_vec=4),),
    # int8 -> int32: mma.m16n8k32.s8, 8 warps of 64x32, BK = 64 bytes (same smem as fp16)
    "int8": (KernelSpec("int8", "int32", "int32", 128, 128, 64, 4, 2, 4, "mma_sync",
                        a_vec=16, b_vec=16),),
}


def offered_on(spec: KernelSpec, cc: int | None) -> bool:
    """Whether the launcher offers ``spec`` on compute capability ``cc`` (None: any)."""
    return cc is None or cc >= spec.min_cc


def shares_sm(spec: KernelSpec) -> bool:
    """A base built to share its SM with another CTA of itself (``min_blocks > 1``). Its
    speed comes from two CTAs overlapping their pipelines, which the cost model only sees at
    the kernel's own occupancy: the launcher plans it there, apart from the other bases, and
    the scheduler's own tile candidates leave it out. It runs 16-byte aligned operands only
    (its 255 registers spill in misaligned specializations' element-wise copies): the
    launcher plans misaligned operands on the other bases."""
    return spec.min_blocks > 1


def bases_for(dtype: str, allow_tf32: bool = False, cc: int | None = None) -> tuple:
    """The HEURISTIC_TILES bases gemm() plans over for ``dtype`` operands on compute
    capability ``cc`` (None: every base)."""
    key = TF32 if (allow_tf32 and dtype == "float32") else dtype
    if key not in HEURISTIC_TILES or key == TF32 and dtype != "float32":
        raise TypeError(f"gemm: unsupported dtype {dtype!r} (have "
                        f"{', '.join(k for k in HEURISTIC_TILES if k != TF32)})")
    return tuple(b for b in HEURISTIC_TILES[key] if offered_on(b, cc))


def full_vec(dtype: str) -> int:
    return 16 // CXX_TYPES[dtype][1]


def specialise(base: KernelSpec, *, fixup: str, a_layout: str, b_layout: str,
               a_aligned: bool = True, b_aligned: bool = True) -> KernelSpec:
    v = full_vec(base.dtype_in)
    # An x-contiguous operand copies along the tile's rows (A: BM, B: BN): a vector wider
    # than the one-row GEMV tile's single row would straddle tiles, so it copies elements.
    a_fits = a_layout == "row" or base.bm % v == 0
    b_fits = b_layout == "col" or base.bn % v == 0
    return replace(base, fixup=fixup, a_layout=a_layout, b_layout=b_layout,
                   a_vec=v if a_aligned and a_fits else 1, b_vec=v if b_aligned and b_fits else 1)


def all_specs() -> list[KernelSpec]:
    """Every spec the launcher can choose (the compile check's full list)."""
    out = {}  # by name: the one-row tiles specialise aligned and misaligned alike
    for bases in HEURISTIC_TILES.values():
        for base in bases:
            for fx, la, lb, aa, ba in itertools.product(FIXUPS, LAYOUTS, LAYOUTS, (True, False),
                                                        (True, False)):
                if shares_sm(base) and not (aa and ba):
                    continue
                spec = specialise(base, fixup=fx, a_layout=la, b_layout=lb, a_aligned=aa,
                                  b_aligned=ba)
                out.setdefault(spec.name, spec)
    return list(out.values())


def representative_specs() -> list[KernelSpec]:
    """A small set that touches every mainloop, dtype, fixup, layout and vector width once."""
    out = []
    layouts = [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")]
    for bases in HEURISTIC_TILES.values():
        for bi, base in enumerate(bases):
            for i, fx in enumerate(FIXUPS):
                if bi > 0 and fx != "deterministic":
                    continue
                la, lb = layouts[i % 4]
                aligned = not (fx == "aligned")
                out.append(specialise(base, fixup=fx, a_layout=la, b_layout=lb,
                                      a_aligned=aligned, b_aligned=True))
    return out
