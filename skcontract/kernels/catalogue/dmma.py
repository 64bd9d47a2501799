"""The Dmma family: fp64 operands on the fp64 tensor cores (DMMA, ``mainloop_dmma.cuh``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .calibration import DMMA_EFFICIENCY
from .entry import PAD_BYTES, XC_PAD_BYTES_FP64, Entry

VEC_KC_PITCH_MOD, VEC_KC_PITCH_REM = 16, 8
"""Dmma "vec" fragments: a k-contiguous stage's pitch is VEC_KC_PITCH_REM (mod
VEC_KC_PITCH_MOD) doubles, which makes the paired fragment loads conflict-free
(mainloop_dmma.cuh says why)."""
VEC_XC_PAD_BYTES = 16
"""Dmma "vec" fragments: x-contiguous stages are padded by 16 bytes (a pitch of 2 mod 4
doubles for extents that are multiples of 4)."""


@dataclass(frozen=True)
class Dmma(Entry):
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


def _dmma(bm, bn, bk, warps_m, warps_n, ctas_per_sm=1, **kw) -> Dmma:
    return Dmma("float64", bm, bn, bk, 3, warps_m, warps_n, ctas_per_sm=ctas_per_sm,
                efficiency=DMMA_EFFICIENCY[bm, bn, bk, ctas_per_sm], **kw)


def menu() -> tuple[Dmma, ...]:
    """The float64 tensor-core entries: 128 x 64 on 8 warps with 16-byte fragments; the
    same tile as 4 warps of 64 x 32 at two CTAs an SM, fragments loaded ahead (its 255
    registers spill on sm_80 and in element-wise copies: sm_90 and aligned operands only);
    and 64 x 64 at two CTAs an SM on m16n8k16."""
    return (_dmma(128, 64, 32, 4, 2, mma_k=8, frag="vec"),
            _dmma(128, 64, 16, 2, 2, ctas_per_sm=2, min_cc=90, vec16_only=True, mma_k=8,
                  frag="vecdb"),
            _dmma(64, 64, 16, 2, 2, ctas_per_sm=2, mma_k=16))
