"""The Dot family: memory-bound products, one 16-byte load per lane and operand.

Batched dots and matrix-vector products (``sk_dot.cuh``): the tile options of a step that
:mod:`..forms` maps onto rows or columns, never offered for other GEMMs. Its kernels keep
the scheduler loop and the fixup of the GEMM families; a split's partial is its tile's
output sums. Complex operands run as they lie (their real form, :mod:`..embed`, would read
the matrix once per output part).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...schedule.types import ATOMIC
from .calibration import memory_bound_efficiency
from .entry import VEC16_BYTES, Entry, cxx_bool, vec16_elems

COMPLEX = ("complex64", "complex128")
"""The complex dtypes the Dot kernels read as they lie (``complex.cuh``)."""

DOT_WARPS = 8
"""Warps of a Dot kernel's CTA."""
DOT_UNROLL = 4
"""16-byte loads a Dot lane keeps in flight per operand: 4 x 256 threads x 2 operands x 16 B
is 32 KB a CTA, enough in flight for the copy bandwidth at DOT_CTAS_PER_SM CTAs an SM."""
DOT_CTAS_PER_SM = 4
"""Occupancy the Dot kernels are built for (64 registers a thread)."""
WIDE_ROWS_CTAS_PER_SM = 3
"""Occupancy of the eight-row complex128 Dot kernel (85 registers a thread): its eight
complex accumulators take 32 registers, and its arrival fixup spills within 64."""
DOT_ROW_SWEEPS = 1
"""Sweeps of the one-row tile's k-iteration. Its splits are whole k-iterations, at least
MIN_ITERS_PER_SPLIT of them (:mod:`skcontract.schedule.heuristics`), so a short k-iteration
is what lets a single long dot (16M elements) split over every resident CTA; the kernel's
loop runs a split's whole range, DOT_UNROLL loads in flight, whatever the iteration."""
DOT_COLS_BK = 64
"""Rows of W in one k-iteration of the Dot "cols" tile (32 KB of fp32 columns)."""
DOT_SHAPES = ("rows8", "rows1", "cols")
"""The Dot entries of each dtype: 8 rows a tile (a warp each), one row a tile (all warps),
and a vector times a matrix's columns."""


@dataclass(frozen=True)
class Dot(Entry):
    """Memory-bound products, one 16-byte load per lane and operand (``sk_dot.cuh``).

    ``bn == 1``: the "rows" shape, ``C[r] = sum_k X[r, k] Y[r, k]`` (batched dots and
    matrix-vector products over contiguous rows; ``warps / bm`` warps share a row);
    ``bn > 1``: the "cols" shape, ``C[c] = sum_k V[k] W[k, c]`` (a vector times a matrix
    whose rows are contiguous; a tile is one warp's ``32 * 16 / elem`` columns and the
    warps split k). ``stages`` is the unroll: 16-byte loads each lane has in flight per
    operand. ``efficiency`` follows from the bytes a k-iteration reads
    (:func:`.calibration.memory_bound_efficiency`). ``conj``: whether the kernel reads A
    and B conjugated (complex entries only; made for a step that reads an operand so,
    :meth:`..step_launch.StepLaunch.conjugating`).
    """

    conj: tuple[bool, bool] = (False, False)

    FAMILY: ClassVar[str] = "Dot"
    DTYPES: ClassVar[tuple] = ("float16", "bfloat16", "float32", "float64", "complex64",
                               "complex128")
    ENTRY_HEADER: ClassVar[str] = "sk_dot.cuh"
    KERNEL: ClassVar[str] = "skc::sk_dot"
    SHAPES: ClassVar[dict] = {"rows": 0, "cols": 1}  # sk_dot.cuh's SHAPE_* codes
    SHARED_SUM: ClassVar[bool] = False

    @property
    def shape(self) -> str:
        return "cols" if self.bn > 1 else "rows"

    @property
    def dtype_out(self) -> str:
        """Complex products write their own dtype (gemm() takes no complex operands)."""
        return self.dtype if self.dtype in COMPLEX else super().dtype_out

    def protocols(self) -> tuple[str, ...]:
        """A complex accumulator's splits merge through the workspace: no atomic adds a
        complex value as one."""
        every = super().protocols()
        return tuple(p for p in every if p != ATOMIC) if self.dtype in COMPLEX else every

    @property
    def per_lane(self) -> int:
        """Elements of one 16-byte load (a lane's accumulators)."""
        return vec16_elems(self.dtype)

    def check(self):
        if any(self.conj) and self.dtype not in COMPLEX:
            raise ValueError(f"Dot: conj is for complex operands, not {self.dtype}")
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
                f"  static constexpr bool VEC_A = {cxx_bool(self.loads16(spec.a_vec))};\n"
                f"  static constexpr bool VEC_B = {cxx_bool(self.loads16(spec.b_vec))};\n"
                f"  static constexpr bool CONJ_A = {cxx_bool(self.conj[0])};\n"
                f"  static constexpr bool CONJ_B = {cxx_bool(self.conj[1])};\n")

    def loads16(self, vec: int) -> bool:
        """Whether an operand specialised to ``vec`` elements a copy is read by 16-byte
        loads: elements of 16 bytes (complex128) always are, so such a Dot kernel runs
        operands on 16 bytes only (:attr:`aligned_only`)."""
        return vec * self.elem_bytes >= VEC16_BYTES

    @property
    def aligned_only(self) -> bool:
        """Whether the entry reads only operands on 16 bytes (:func:`..forms.form_aligned`):
        its elements are 16 bytes, and a complex128 view of float64 memory may start
        between two."""
        return self.elem_bytes >= VEC16_BYTES

    def smem_bytes(self, spec) -> int:
        return 0  # static shared memory only

    @property
    def name(self):
        if not any(self.conj):
            return super().name
        return f"{super().name}_conj{''.join('AB'[i] for i, c in enumerate(self.conj) if c)}"

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


def _dot(dtype: str, shape: str) -> Dot:
    """The Dot entry of ``dtype`` and ``shape`` (:data:`DOT_SHAPES`)."""
    per_lane, warps = vec16_elems(dtype), DOT_WARPS
    if shape == "cols":
        tile = (1, 32 * per_lane, DOT_COLS_BK)
    else:
        bm = 8 if shape == "rows8" else 1
        sweep = warps // bm * 32 * per_lane  # elements of a row the tile's warps read at once
        tile = (bm, 1, sweep * (DOT_ROW_SWEEPS if bm == 1 else DOT_UNROLL))
    ctas = WIDE_ROWS_CTAS_PER_SM if dtype == "complex128" and tile[0] == 8 else DOT_CTAS_PER_SM
    entry = Dot(dtype, *tile, DOT_UNROLL, 1, warps, ctas_per_sm=ctas)
    eff = memory_bound_efficiency(dtype, tile, entry.bytes_per_iteration())
    return Dot(dtype, *tile, DOT_UNROLL, 1, warps, ctas_per_sm=ctas, efficiency=eff)


def menu(dtype: str) -> tuple[Dot, ...]:
    """The Dot entries of ``dtype``, one a shape of :data:`DOT_SHAPES`."""
    return tuple(_dot(dtype, shape) for shape in DOT_SHAPES)
