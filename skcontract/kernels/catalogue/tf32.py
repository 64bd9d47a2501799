"""The Tf32 family: float32 operands rounded to tf32 on ``mma.sync`` m16n8k8 (opt-in).

Offered at ``precision="tf32"`` where the WgmmaTf32 entries are not: before sm_90, or on
rows of K floats off 16 bytes (``mainloop_tf32.cuh``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .entry import PAD_BYTES, Entry

TF32_KC_PAD = 8
"""tf32: k-contiguous stages are padded by 8 floats (conflict-free 8-byte fragments)."""


@dataclass(frozen=True)
class Tf32(Entry):
    """fp32 operands rounded to tf32 on mma.sync m16n8k8, fp32 accumulators (opt-in)."""

    FAMILY: ClassVar[str] = "Tf32"
    IM2COL: ClassVar[str | None] = "gather"
    DTYPES: ClassVar[tuple] = ("float32",)

    def pad(self, kcontig):
        return TF32_KC_PAD if kcontig else PAD_BYTES // self.elem_bytes

    def mainloop(self, la, lb):
        return (f"skc::MainloopTf32<{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, "
                f"{self.warps_n}, LA, LB>")


def menu() -> tuple[Tf32, ...]:
    """The portable tf32 entry: 128 x 128 x 32, 3 stages, 8 warps."""
    return (Tf32("float32", 128, 128, 32, 3, 2, 4),)
