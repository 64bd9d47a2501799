"""The CPU convolution forms' buffers (:mod:`.conv2d_cpu`, :mod:`.conv_regions`): each
thread's kept scratch buffer, the chunk size that bounds it, and near-equal chunking."""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["CHUNK_BYTES", "scratch", "even"]

CHUNK_BYTES = 16 << 20
"""The buffers of one chunk at most: large enough that each product is a long BLAS call,
small enough to bound the memory a call takes beside its input and output."""

SCRATCH = threading.local()
"""Each thread's chunk buffers, kept for its next call (:func:`scratch`): a thread's own,
so that calls on several threads never share them."""


def scratch(dtype, *sizes: int) -> list[np.ndarray]:
    """Flat buffers of ``sizes`` elements of ``dtype``, carved out of this thread's kept
    buffer, made anew (the old one let go first) only where it is too small. Kept: fresh
    buffers of a few megabytes page-fault their way in on every call, which costs more than
    the copies they serve."""
    itemsize = np.dtype(dtype).itemsize
    ends = np.cumsum((0,) + sizes) * itemsize
    kept = getattr(SCRATCH, "buffer", None)
    if kept is None or kept.size < ends[-1]:
        SCRATCH.buffer = None
        SCRATCH.buffer = kept = np.empty(ends[-1], np.uint8)
    return [kept[a:b].view(dtype) for a, b in zip(ends[:-1], ends[1:])]


def even(total: int, most: int) -> int:
    """The size of the fewest near-equal parts of ``total`` of at most ``most`` each (at
    least one): no short last part (a chunk of its own shape, a block mostly padding)."""
    parts = -(-total // max(1, most))
    return -(-total // parts)
