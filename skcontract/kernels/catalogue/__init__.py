"""The kernel catalogue: every kernel the GPU engine can launch, one module per family.

An entry (an instance of an :class:`Entry` subclass, :mod:`.entry`) is one tile configuration
of one family: its C++ mainloop template, its own constraints, its tile / pipeline / warp
layout, the occupancy it is built for and its cost-model efficiency. The scheduler never
sees this package: :meth:`Entry.option` hands it a
:class:`~skcontract.schedule.TileOption` (tile, occupancy, efficiency) as data, and
:mod:`..resolve` maps the tile it chooses back to the entry.
:class:`~skcontract.kernels.specs.KernelSpec` is an entry plus the specialisation a launch
needs (fixup protocol, operand layouts, vector widths).

==============  ==============  =====================  ====================================
module          family          operands               mainloop
==============  ==============  =====================  ====================================
mma16           Mma16           float16, bfloat16      mma.sync m16n8k16, fp32 accumulators
dmma            Dmma            float64                DMMA m16n8k{8,16}, fp64 accumulators
ffma            Ffma            float32, float64       CUDA-core FMA (exact fp32; skinny
                                                       and one-row tiles)
tf32            Tf32            float32 (opt-in)       mma.sync m16n8k8 tf32
imma            Imma            int8                   mma.sync m16n8k32 s8, int32 output
wgmma           Wgmma           float16, bfloat16      sm_90a: TMA loads, wgmma from shared
                                                       memory, warp-specialised
wgmma_kmajor    WgmmaTf32,      float32 (opt-in),      the Wgmma kernel on tf32 and s8
                WgmmaTf32x3,    int8                   wgmma (K-major operands)
                WgmmaInt8
wgmma_pair      WgmmaPair       float16, bfloat16      the Wgmma kernel on clusters of two
dot             Dot             float16 ... float64    memory-bound products (dots, GEMV)
==============  ==============  =====================  ====================================

Beside the families: :mod:`.registry` (which entries serve which key, in order),
:mod:`.offer` (what is offered to a product), :mod:`.gates` (the offer gates' values and
the memory-bound rule) and :mod:`.calibration` (the efficiencies, as data).

``ctas_per_sm`` is the occupancy an entry is built for: it is the kernel's
``__launch_bounds__`` minimum, so the compiler keeps registers within it; the compile check
(``tools/compile_check.py``) verifies from ptxas' report that registers and shared memory
allow it, and the launcher refuses a waiting schedule when the compiled kernel's occupancy is
lower (co-residency of waiting splits). docs/design/kernels.md says how to add a family.
"""
from .dmma import Dmma
from .dot import Dot
from .entry import (ARCH_CC, CXX_TYPES, FAMILIES, INPUT_DTYPES, LAYOUT_PAIRS, PRECISIONS,
                    SMEM_RESERVED_PER_CTA, TF32, TF32X3, VEC16_BYTES, Entry,
                    vec16_elems)
from .ffma import Ffma
from .gates import (LINE_BYTES, memory_bound, output_tiles, streaming_wanted,
                    streaming_wave_tile)
from .imma import Imma
from .mma16 import Mma16
from .offer import OFFER_PENDING, entries_for, catalogue_key, dot_entries, pending_for
from .registry import CATALOGUE, DOT_CATALOGUE, PENDING, all_entries
from .tf32 import Tf32
from .wgmma import Wgmma
from .wgmma_kmajor import WgmmaInt8, WgmmaKMajor, WgmmaTf32, WgmmaTf32x3
from .wgmma_pair import WgmmaPair

__all__ = [
    "ARCH_CC", "CATALOGUE", "CXX_TYPES", "DOT_CATALOGUE", "FAMILIES", "INPUT_DTYPES",
    "LAYOUT_PAIRS", "LINE_BYTES", "OFFER_PENDING", "PENDING", "PRECISIONS",
    "SMEM_RESERVED_PER_CTA", "TF32", "TF32X3", "VEC16_BYTES", "Dmma", "Dot", "Ffma", "Imma",
    "Entry", "Mma16", "Tf32", "Wgmma", "WgmmaInt8", "WgmmaKMajor", "WgmmaPair",
    "WgmmaTf32", "WgmmaTf32x3", "all_entries", "entries_for", "catalogue_key", "dot_entries",
    "memory_bound", "output_tiles", "pending_for", "streaming_wanted", "streaming_wave_tile",
    "vec16_elems",
]
