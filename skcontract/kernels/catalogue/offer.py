"""What the catalogue offers a product: the entries of its key, device and operands.

The offer is planning policy over the registry (:mod:`.registry`) and the entries' own
gates (:mod:`.gates`): an entry is offered on the compute capabilities it is built for, to
aligned operands where it needs them, and to products whose B rows start off lines where
it serves only those.
"""
from __future__ import annotations

import os

from .dot import Dot
from .entry import PRECISIONS, Entry
from .registry import CATALOGUE, DOT_CATALOGUE, PENDING

OFFER_PENDING = os.environ.get("SKCONTRACT_OFFER_PENDING") == "1"
"""Whether :func:`entries_for` offers :data:`.registry.PENDING` in this process (read at
import)."""

def catalogue_key(dtype: str, precision: str | None = None) -> str:
    """The catalogue key of ``dtype`` operands at ``precision`` (None: exact; one of
    :data:`.entry.PRECISIONS`, which float32 alone has: other dtypes ignore it). TypeError
    for a dtype no kernel takes, ValueError for an unknown precision."""
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"gemm: unknown precision {precision!r} (have None (exact), "
                         f"{', '.join(repr(p) for p in PRECISIONS)})")
    if dtype not in CATALOGUE or dtype in PRECISIONS:
        raise TypeError(f"gemm: unsupported dtype {dtype!r} (have "
                        f"{', '.join(k for k in CATALOGUE if k not in PRECISIONS)})")
    return precision if precision is not None and dtype == "float32" else dtype


def entries_for(dtype: str, precision: str | None = None, cc: int | None = None,
              vec16: bool = True, b_off_lines: bool = True) -> tuple[Entry, ...]:
    """The entries offered for ``dtype`` operands at ``precision`` (:func:`catalogue_key`)
    on compute capability ``cc`` (None: any); ``vec16=False`` (an operand not 16-byte
    aligned) leaves out the ``vec16_only`` ones, ``b_off_lines=False`` (B's rows start on
    :data:`.gates.LINE_BYTES` lines) the ``b_off_lines_only`` ones. TypeError for a dtype no
    kernel takes."""
    key = catalogue_key(dtype, precision)
    entries = CATALOGUE[key] + (PENDING.get(key, ()) if OFFER_PENDING else ())
    return tuple(b for b in entries
                 if b.offered_on(cc) and (vec16 or not b.vec16_only)
                 and (b_off_lines or not b.b_off_lines_only))


def pending_for(dtype: str, cc: int | None = None) -> tuple[Entry, ...]:
    """The :data:`.registry.PENDING` entries of ``dtype`` on compute capability ``cc``."""
    return tuple(b for b in PENDING.get(dtype, ()) if b.offered_on(cc))


def dot_entries(dtype: str, shape: str) -> tuple[Dot, ...]:
    """The Dot entries of ``dtype`` for a "rows" or "cols" problem (empty: none)."""
    return tuple(b for b in DOT_CATALOGUE.get(dtype, ()) if b.shape == shape)
