"""The Wgmma kernel on 32- and 8-bit operands: WgmmaTf32, WgmmaTf32x3 and WgmmaInt8.

wgmma reads tf32 and s8 operands K-major only. The tf32 and int8 entries take a row-major A
and a column-major B (``gemm`` copies an operand of another layout first); the 3xTF32
entries turn an MN-major operand K-major in their stages. No convolution entry, no HyTiS
tile. Each type's menu is the 16-bit one (:data:`.wgmma.WGMMA_MENU`) less its ``LEFT_OUT``
tiles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .calibration import WGMMA_TF32_EFFICIENCY_SCALE, WGMMA_TF32X3_PRODUCTS
from .entry import TF32
from .wgmma import (Wgmma, WgmmaClusters, WgmmaMainloop, WgmmaMenu, WgmmaOperands,
                    WgmmaSmallRows, menu)


@dataclass(frozen=True)
class WgmmaKMajor(Wgmma):
    """The Wgmma kernel on 32- or 8-bit operands, which wgmma reads K-major only: the
    entries take a row-major A and a column-major B (:meth:`layouts`); ``gemm`` copies an
    operand of another layout into that one first (:func:`skcontract.kernels.gemm.gemm`),
    but for the 3xTF32 entries, which turn it K-major in their stages
    (:class:`WgmmaTf32x3`). No convolution entry, no HyTiS tile."""

    IM2COL: ClassVar[str | None] = None
    OPERANDS: ClassVar[WgmmaOperands] = WgmmaOperands("copied")
    SMALL_ROWS: ClassVar[WgmmaSmallRows] = WgmmaSmallRows()
    MENU: ClassVar[WgmmaMenu] = WgmmaMenu()


@dataclass(frozen=True)
class WgmmaTf32(WgmmaKMajor):
    """float32 operands on tf32 wgmma (``gemm(precision="tf32")`` on sm_90a): the Wgmma kernel
    with BK = 32 (one 128-byte swizzle row of floats) and wgmma m64nNk8.tf32 on operands the
    TMA loads round to tf32 (a 10-bit mantissa, to nearest), fp32 accumulators and output.
    The epilogue stores C by the threads (the TMA store packs 16-bit outputs)."""

    FAMILY: ClassVar[str] = "WgmmaTf32"
    DTYPES: ClassVar[tuple] = ("float32",)
    MAINLOOP: ClassVar[WgmmaMainloop] = WgmmaMainloop(tma_dtype=TF32)
    MENU: ClassVar[WgmmaMenu] = WgmmaMenu(efficiency_scale=WGMMA_TF32_EFFICIENCY_SCALE)


@dataclass(frozen=True)
class WgmmaTf32x3(WgmmaTf32):
    """float32 operands at float32 accuracy on tf32 wgmma (``gemm(precision="3xtf32")`` on
    sm_90a): the tf32 kernel loading the raw floats (``TMA_DTYPE`` float32: no rounding).
    The consumers split each landed stage (``split_stage``): x = big + small, big what tf32
    wgmma reads of x itself (its 10-bit mantissa, truncated), small = x - big rounded to tf32
    and written beside the stage in the same layout. A k step is three wgmmas, small x big,
    big x small and big x big, into one of two partial accumulators, fresh each k-tile,
    which the consumers add to the tile's in fp32 once they are done (``wgmma_consume_x3``:
    the tensor cores truncate their own sums, which over a long K costs float32 accuracy).
    The dropped small x small term is below 2^-20 of a product. Three accumulators a thread
    leave the 128- and 256-column tiles of one warpgroup and the 128 x 256 tile out and make
    the 128 x 128 tile trade registers; the paired 128 x 64 entry (one stage) is left out
    too. Every layout: the producer warpgroup's other warps turn an MN-major operand K-major
    in the stages (:meth:`.wgmma.Wgmma.transposes`), while the wgmmas of the k-tiles before it
    run; a 3xTF32 k-tile's three products leave them the time (tf32's one does not: its
    entries read copies, :class:`WgmmaKMajor`)."""

    FAMILY: ClassVar[str] = "WgmmaTf32x3"
    MAINLOOP: ClassVar[WgmmaMainloop] = WgmmaMainloop(tma_dtype="float32", tf32x3=True)
    OPERANDS: ClassVar[WgmmaOperands] = WgmmaOperands("turned")
    MENU: ClassVar[WgmmaMenu] = WgmmaMenu(
        left_out=((128, 256, 1), (64, 256, 1), (64, 128, 2), (128, 64, 2)),
        trades=((128, 128, 1),),
        efficiency_scale=WGMMA_TF32X3_PRODUCTS * WGMMA_TF32_EFFICIENCY_SCALE)


@dataclass(frozen=True)
class WgmmaInt8(WgmmaKMajor):
    """int8 operands on s8 wgmma (sm_90a): the Wgmma kernel with BK = 128 (one 128-byte
    swizzle row of bytes) and wgmma m64nNk32.s32.s8.s8, int32 accumulators and output, sums
    wrapping modulo 2^32 as the portable ``Imma`` entry's do. The tile is stored from the
    accumulator fragment by the portable epilogue, alpha and beta in int32; no cluster
    protocol (its sums are fp32). ``LEFT_OUT``: besides the register-trading entries (128 x
    256, the paired 128 x 64), whose arrival kernels spill with 32-bit outputs, the 64 x 256
    and two-CTA 64 x 128 tiles, whose fixups spill with the fragment-store epilogue of int32
    accumulators (the compile check)."""

    FAMILY: ClassVar[str] = "WgmmaInt8"
    DTYPES: ClassVar[tuple] = ("int8",)
    CLUSTERS: ClassVar[WgmmaClusters] = WgmmaClusters(cluster_sum=False)
    MENU: ClassVar[WgmmaMenu] = WgmmaMenu(
        left_out=((128, 256, 1), (128, 64, 2), (64, 256, 1), (64, 128, 2)))


def tf32_menu() -> tuple[WgmmaTf32, ...]:
    return menu("float32", WgmmaTf32)


def tf32x3_menu() -> tuple[WgmmaTf32x3, ...]:
    return menu("float32", WgmmaTf32x3)


def int8_menu() -> tuple[WgmmaInt8, ...]:
    return menu("int8", WgmmaInt8)
