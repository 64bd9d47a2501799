"""Which entries serve which catalogue key, in the order they are offered.

A key is an operand dtype, or a float32 precision (:data:`.entry.PRECISIONS`). Within a
key, an earlier entry wins over a later one of the same tile and occupancy, so the
order is part of the catalogue: where the Wgmma entries are offered (sm_90, aligned
K-major operands) they come first.
"""
from __future__ import annotations

from . import dmma, dot, ffma, imma, mma16, tf32, wgmma, wgmma_kmajor, wgmma_pair
from .entry import TF32, TF32X3, Entry

CATALOGUE: dict[str, tuple[Entry, ...]] = {
    "float16": mma16.menu("float16") + wgmma.menu("float16") + wgmma_pair.menu("float16"),
    "bfloat16": (mma16.menu("bfloat16") + wgmma.menu("bfloat16")
                 + wgmma_pair.menu("bfloat16")),
    "float32": ffma.FLOAT32,
    "float64": dmma.menu() + ffma.FLOAT64,
    # the Wgmma entries name the 128 x 128 tile the portable entry shares
    TF32: wgmma_kmajor.tf32_menu() + tf32.menu(),
    # where the 3xTF32 entries are not offered (before sm_90, operands off 16 bytes), the
    # exact float32 entries run it: float32 accuracy, as asked
    TF32X3: wgmma_kmajor.tf32x3_menu() + ffma.FLOAT32,
    "int8": wgmma_kmajor.int8_menu() + imma.menu(),
}
"""Every entry the launcher may choose, by operand dtype (and the float32 precisions)."""

DOT_CATALOGUE: dict[str, tuple[dot.Dot, ...]] = {dt: dot.menu(dt) for dt in dot.Dot.DTYPES}
"""The memory-bound entries by operand dtype: the tile options of a step that
:mod:`..forms` maps onto rows or columns (never offered for other GEMMs)."""

PENDING: dict[str, tuple[Entry, ...]] = {}
"""Entries that are built and compile-checked (:func:`all_entries`) but not offered to auto
(:func:`.offer.entries_for`) until the whole GPU suite passes with them on the device; a
caller reaches them by forcing their tile (:func:`.offer.pending_for`), and a process with
``SKCONTRACT_OFFER_PENDING=1`` (:data:`.offer.OFFER_PENDING`; ``tools/device_run.sh
pending``) offers them like the others. Offering them for good is moving them into
:data:`CATALOGUE`."""


def all_entries() -> list[Entry]:
    """Every entry a kernel is built for, once (an entry may serve several keys): the
    offered ones and :data:`PENDING`."""
    return list(dict.fromkeys(b for table in (CATALOGUE, DOT_CATALOGUE, PENDING)
                              for entries in table.values() for b in entries))
