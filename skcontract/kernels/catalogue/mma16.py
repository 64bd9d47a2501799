"""The Mma16 family: fp16 / bf16 operands on ``mma.sync`` m16n8k16 (sm_80 and up).

ldmatrix fragments, fp32 accumulators (``mainloop_mma16.cuh``); its convolution entry
gathers A in the CTA's threads. On sm_90 the Wgmma entries are offered beside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .entry import CXX_TYPES, Entry, k_contiguous


@dataclass(frozen=True)
class Mma16(Entry):
    """fp16 / bf16 operands on mma.sync m16n8k16 (ldmatrix fragments), fp32 accumulators."""

    FAMILY: ClassVar[str] = "Mma16"
    IM2COL: ClassVar[str | None] = "gather"
    DTYPES: ClassVar[tuple] = ("float16", "bfloat16")

    def mainloop(self, la, lb):
        akc, bkc = k_contiguous(la), k_contiguous(lb)
        return (f"skc::MainloopMma16<{CXX_TYPES[self.dtype][0]}, {self.bm}, {self.bn}, "
                f"{self.bk}, {self.warps_m}, {self.warps_n}, LA, LB, {akc}, {bkc}>")


def menu(dtype: str) -> tuple[Mma16, ...]:
    """The Mma16 entries of ``dtype``: a 128 x 128 x 32 tile, 4 stages, 8 warps; for the
    implicit GEMMs of grouped convolutions (16 - 32 output channels a group: ResNeXt's,
    RegNet's), a 128 x 32 x 32 tile of 4 warps, :data:`NARROW_CTAS` resident an SM so one
    CTA's loads overlap another's few k-iterations and epilogue (16-byte aligned operands:
    element-wise copies would spill at that occupancy)."""
    return (Mma16(dtype, 128, 128, 32, 4, 2, 4),
            Mma16(dtype, 128, 32, 32, 4, 4, 1, ctas_per_sm=NARROW_CTAS, vec16_only=True,
                  im2col_only=True))


NARROW_CTAS = 4
"""CTAs an SM of the narrow convolution tile: 40 KB of stages and 128 threads each."""
