"""The Imma family: int8 operands on ``mma.sync`` m16n8k32 (``mainloop_imma.cuh``).

int32 accumulators and output, sums wrapping modulo 2^32; offered where the WgmmaInt8
entries are not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .entry import Entry


@dataclass(frozen=True)
class Imma(Entry):
    """int8 operands on mma.sync m16n8k32, int32 accumulators and output (wrapping)."""

    FAMILY: ClassVar[str] = "Imma"
    DTYPES: ClassVar[tuple] = ("int8",)

    def mainloop(self, la, lb):
        return (f"skc::MainloopImma<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                f"{self.warps_n}, LA, LB>")


def menu() -> tuple[Imma, ...]:
    """The portable int8 entry: 128 x 128 x 64, 4 stages, 8 warps."""
    return (Imma("int8", 128, 128, 64, 4, 2, 4),)
