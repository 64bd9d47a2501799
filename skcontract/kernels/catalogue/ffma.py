"""The Ffma family: exact fp32 and fp64 on CUDA-core FMA (``mainloop_ffma.cuh``).

It runs exact float32 products, the skinny (8 x N) and one-row (1 x N, GEMV) tiles of
float32 and float64, and float32 at "3xtf32" where the 3xTF32 entries are not offered.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .calibration import FFMA_EFFICIENCY
from .entry import CXX_TYPES, PAD_BYTES, XC_PAD_BYTES_FP64, Entry


@dataclass(frozen=True)
class Ffma(Entry):
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


def _ffma(dtype, bm, bn, bk, stages, warps_m, warps_n, **kw) -> Ffma:
    return Ffma(dtype, bm, bn, bk, stages, warps_m, warps_n,
                efficiency=FFMA_EFFICIENCY[dtype, bm, bn, bk], **kw)


FLOAT32 = (
    _ffma("float32", 128, 128, 32, 3, 2, 4),
    # a finer k-iteration: strong-scaling shapes split over twice the CTAs
    _ffma("float32", 128, 128, 16, 3, 2, 4),
    # M <= 8: the skinny tile
    _ffma("float32", 8, 256, 16, 4, 2, 4, ctas_per_sm=2),
    # 64 columns or rows (a convolution's 64 output channels, an NCHW pointwise
    # convolution's transposed product, a 64-row GEMM), where the 128 x 128 tile
    # computes half padding: its 8 x 8 thread tiles over 256 x 64 and 64 x 256
    _ffma("float32", 256, 64, 32, 3, 2, 4),
    _ffma("float32", 64, 256, 32, 3, 2, 4),
    # M = 1: one row, 4 columns a thread, B streams through shared memory once;
    # BK = 8 so that a column-major B's [1024][BK + 4] stages fit 4 deep
    _ffma("float32", 1, 1024, 8, 4, 1, 8),
)
"""The exact float32 entries."""

FLOAT64 = (
    # M <= 8 and M = 1, beside the Dmma tiles
    _ffma("float64", 8, 256, 16, 4, 2, 4),
    _ffma("float64", 1, 512, 8, 4, 1, 8),
)
"""The float64 skinny and one-row entries."""
