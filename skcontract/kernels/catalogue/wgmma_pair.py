"""WgmmaPair: the Wgmma kernel on clusters of two CTAs that share B by TMA multicast.

A pair runs one (2 BM) x BN unit tile of the schedule: each CTA computes BM of its rows over
the same k range, loads its own A and half of B, and multicasts that half into both CTAs'
shared memory, so the pair reads B once from L2 for both (the L2 bounds the Wgmma tiles when
every SM runs them). The wide pairs serve products of few waves; the narrow ones products
whose B rows start off lines (:mod:`.gates`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ...schedule.types import TileOption
from .calibration import WGMMA_PAIR_EFFICIENCY
from .gates import WGMMA_PAIR_MAX_WAVES, WGMMA_PAIR_MIN_K_ITERATIONS, WGMMA_PAIR_SPLITS_ONLY
from .wgmma import Wgmma, WgmmaClusters, WgmmaMenu, WgmmaSmallRows


@dataclass(frozen=True)
class WgmmaPair(Wgmma):
    """A cluster of two Wgmma CTAs (``sk_wgmma_pair``) that runs one (2 BM) x BN tile of the
    schedule: each CTA computes BM of its rows over the same k range, loads its own A and
    half of B, and multicasts that half into both CTAs' shared memory. ``bm`` is one CTA's
    rows; :attr:`tile`, the schedule's, is twice that (a 64 x 64 pair's unit tile is a
    single 128 x 64 CTA's: an entry is named by its cluster too). Each CTA keeps its own
    fixup: two locks and slots a tile. GEMMs only (no im2col entry). B's part is half its
    rows, or, for an N-major B of 64 columns (one box), half the box's k rows
    (``load_part``)."""

    FAMILY: ClassVar[str] = "WgmmaPair"
    IM2COL: ClassVar[str | None] = None
    CLUSTERS: ClassVar[WgmmaClusters] = WgmmaClusters(ctas=2, cluster_sum=False)  # the pair
    SMALL_ROWS: ClassVar[WgmmaSmallRows] = WgmmaSmallRows()  # a unit runs one tile shape
    MENU: ClassVar[WgmmaMenu] = WgmmaMenu()  # B multicast: its partial waves not told apart

    def check(self):
        super().check()
        if self.ctas_per_sm != 1:
            raise ValueError("WgmmaPair: one CTA an SM (a cluster's CTAs on as many SMs)")

    @property
    def tile(self) -> tuple[int, int, int]:
        return self.CLUSTER * self.bm, self.bn, self.bk

    def slot_elems(self, spec) -> int:
        return self.CLUSTER * self.bm * self.bn

    def option(self) -> TileOption:
        return replace(super().option(), cluster=self.CLUSTER)


def pair_entry(dtype: str, bm: int, bn: int, stages: int, trades_registers: bool = False,
               b_off_lines_only: bool = False) -> WgmmaPair:
    """The pair of BM x BN CTAs of ``dtype`` (``stages`` deep), with its offer gates."""
    return WgmmaPair(dtype, bm, bn, 64, stages, 4 * (bm // 64 + 1), 1,
                     efficiency=WGMMA_PAIR_EFFICIENCY[bm, bn], min_cc=90, vec16_only=True,
                     max_waves=WGMMA_PAIR_MAX_WAVES,
                     min_k_iterations=WGMMA_PAIR_MIN_K_ITERATIONS.get((bm, bn), 0),
                     splits_only=(bm, bn) in WGMMA_PAIR_SPLITS_ONLY,
                     trades_registers=trades_registers, b_off_lines_only=b_off_lines_only)


def menu(dtype: str) -> tuple[WgmmaPair, ...]:
    """The pairs of ``dtype``: the wide ones, 256 x 128 and 256 x 256 work units on two CTAs
    that share B's k-tiles, for products of few waves
    (:data:`.gates.WGMMA_PAIR_MAX_WAVES`); and the narrow ones, 128 x 64 and 256 x 64 work
    units of the 64 x 64 and 128 x 64 tiles (13 and 8 stages), offered only where B's rows
    start off :data:`.gates.LINE_BYTES` lines: each of B's loads then reads a line more a
    row, and the pair makes half of them."""
    return (pair_entry(dtype, 128, 128, 6),
            pair_entry(dtype, 128, 256, 4, trades_registers=True),
            pair_entry(dtype, 64, 64, 13, b_off_lines_only=True),
            pair_entry(dtype, 128, 64, 8, b_off_lines_only=True))
