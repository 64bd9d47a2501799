"""The merged filters of a grouped convolution run with groups merged
(``cuda/merged_groups.cuh``), written on the GPU.

A grouped convolution of few channels a group runs on the Wgmma convolution entry with F
groups merged into one (:func:`.conv.merged_groups`): its kernel reads the filters of a
merged group as (K, R, S, F C/groups) rows, each output channel's C/groups channels at its
group's place among the F and zeros at the others'. :func:`merged_filters` writes them from
the caller's (K, C/groups, R, S) filters at any strides. The kernel itself recomputes the
outputs an infinite or NaN input turns NaN through those zeros (``sk_wgmma_conv.cuh``,
finish).
"""
from __future__ import annotations

import numpy as np

from . import jit
from .catalogue import CXX_TYPES
from .launch import record_direct
from .specs import VEC16_BYTES

HEADER = "merged_groups.cuh"
TYPES = {d: CXX_TYPES[d][0] for d in ("float16", "bfloat16")}
"""The dtypes the kernel takes -> their C++ element type."""
NAMES = tuple(f"skc::merged_filters<{t}>" for t in TYPES.values())
"""Every instantiation the module compiles, in :data:`TYPES`' order."""
THREADS = 256
"""Threads of a block (the kernel strides over the work by its grid's threads)."""
BLOCKS_PER_SM = 8
"""Blocks a launch gives each SM at most (the kernel strides over the rest)."""
ELEMENT_BYTES = 2
"""Bytes of an element (16-bit dtypes only): a thread writes VEC16_BYTES of them."""


def merged_filters(w, g, merged: int, out_ptr: int, dtype: str, stream, device_id: int,
                   sms: int) -> None:
    """Write the dense (K, R, S, ``merged`` C/groups) filters of convolution ``g`` (a
    ConvGeometry) with ``merged`` groups merged into one at ``out_ptr``, from its
    (K, C/groups, R, S) filters ``w`` (an :class:`~.operands.Operand`, strides in
    elements; ``merged`` C/groups whole 16-byte vectors, ``out_ptr`` on 16 bytes). A direct
    launch for :func:`~.launch.record_launches`."""
    cg, kg = g.c // g.groups, g.k // g.groups
    name = NAMES[tuple(TYPES).index(dtype)]
    fn = jit.get_module(HEADER, NAMES, device_id).get_function(name)
    work = g.k * g.r * g.s * merged * cg * ELEMENT_BYTES // VEC16_BYTES  # a thread a vector
    blocks = max(1, min(-(-work // THREADS), sms * BLOCKS_PER_SM))
    sk, sc, sr, ss = w.strides
    fn((blocks,), (THREADS,), (np.uint64(w.ptr), np.uint64(out_ptr), np.int32(g.k),
                               np.int32(kg), np.int32(cg), np.int32(g.r), np.int32(g.s),
                               np.int32(merged), np.int64(sk), np.int64(sc), np.int64(sr),
                               np.int64(ss)), stream=stream)
    record_direct(name, blocks)
