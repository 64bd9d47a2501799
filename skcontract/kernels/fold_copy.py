"""The copy a folded convolution reads (``cuda/fold_copy.cuh``), launched on the GPU.

A folded convolution (:class:`.conv.FoldedTaps`) reads its input through a copy of dense
rows of zero-padded pixels: (N, H, W, C) at any strides into (N, H, width, channels), the
left padding's pixels first, zeros after the image and past C. Through the array library
that copy is a pad and a second dense copy; :func:`fold_copy` writes each pixel once, from
one thread (16-bit elements, so float16 and bfloat16 alike, as their bits).
"""
from __future__ import annotations

import numpy as np

from . import jit

HEADER = "fold_copy.cuh"
CHANNELS = (1, 2, 4, 8, 16, 32, 64)
"""The pixel widths the kernel is instantiated for (a folded pixel's channels divide a
64-element block)."""
THREADS = 256
BLOCKS_PER_SM = 8
"""Blocks a launch gives each SM at most (the kernel strides over the rest)."""
NAMES = tuple(f"skc::fold_copy<{ch}>" for ch in CHANNELS)


def fits(shape: tuple, itemsize: int, channels: int) -> bool:
    """Whether :func:`fold_copy` makes this copy: a 4-D array of 16-bit elements whose
    channels fit a pixel width the kernel has."""
    return len(shape) == 4 and itemsize == 2 and channels in CHANNELS and shape[3] <= channels


def fold_copy(x_ptr: int, shape: tuple, strides: tuple, out_ptr: int, channels: int,
              left: int, width: int, stream, device_id: int, sms: int) -> None:
    """Launch the copy of the (N, H, W, C) array at ``x_ptr`` (``strides`` in elements)
    into the dense (N, H, ``width``, ``channels``) array at ``out_ptr`` on ``stream``."""
    n, h, w, c = shape
    pixels = n * h * width
    if pixels == 0:
        return
    fn = jit.get_module(HEADER, NAMES, device_id).get_function(
        NAMES[CHANNELS.index(channels)])
    blocks = min(-(-pixels // THREADS), sms * BLOCKS_PER_SM)
    sn, sh, sw, sc = strides
    fn((blocks,), (THREADS,), (np.uint64(x_ptr), np.uint64(out_ptr), np.int64(pixels),
                               np.int32(h), np.int32(w), np.int32(c), np.int32(width),
                               np.int32(left), np.int64(sn), np.int64(sh), np.int64(sw),
                               np.int64(sc)), stream=stream)
