"""KernelSpec: one catalogue entry specialised for a launch = one instantiation of its
family's kernel template (``sk_gemm.cuh``, or ``sk_dot.cuh`` for the Dot family).

The host emits a tiny source: the inlined headers and a ``Cfg`` struct spelling out the
spec; the kernel is fetched by the name expression ``skc::sk_gemm<Cfg_...>`` (the entry's
``KERNEL``). Every spec the
launcher can choose is enumerated by :func:`all_specs` (the compile check walks that list).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..schedule.types import Protocol
from .catalogue import CXX_TYPES, VEC16_BYTES, Entry, all_entries, vec16_elems

NARROW_COPY_UNROLL = 4
"""Unroll factor of the shared-memory loader's element-wise (misaligned) copies: fully
unrolled, their many in-flight copies spill registers on sm_80."""

PROTOCOLS = tuple(Protocol)
"""Fixup protocols a kernel is built for: NONE and the reductions."""
LAYOUTS = ("row", "col")
A_SOURCES = ("dense", "im2col", "merged")
"""Where operand A comes from: a dense strided matrix, or gathered from a channels-last
convolution input (the implicit GEMM of conv2d: the family's convolution entry,
:attr:`Entry.IM2COL`), or so with groups merged (:func:`.conv.merged_groups`: the TMA
convolution entry's kernel that recomputes the outputs its merged filters' zeros turn NaN,
:data:`MERGED_PROTOCOLS` only)."""
MERGED_PROTOCOLS = (Protocol.NONE, Protocol.DETERMINISTIC)
"""The fixups of a merged convolution's kernel (``sk_wgmma_conv.cuh``, finish, which
recomputes a finished tile's non-finite outputs in its consumers' registers): data-parallel
tiles and the deterministic fixup, whose tile's last split holds the sum in registers on
every path. The arrival protocol's shared sums and the cluster sum finish a tile in other
paths (and the atomic one is not reproducible), so the merged kernels are not built for
them."""
# VEC16_BYTES (catalogue): an operand whose base address, leading dimension and batch
# stride are multiples of it is "vec16" and copies in 16-byte chunks.


@dataclass(frozen=True)
class KernelSpec:
    """What one compiled kernel is: a catalogue entry and its specialisation.

    ``protocol``: the fixup the kernel runs (a :class:`~skcontract.schedule.Protocol`, or its
    name).
    ``a_layout``/``b_layout``: ``row`` means the last index is contiguous (A[m, k] row-major:
    k contiguous; B[k, n] row-major: n contiguous). ``a_vec``/``b_vec``: elements per async
    copy along the contiguous dimension (16 bytes for vec16 operands, else 1 element).
    ``a_source``: "dense", "im2col" or "merged" (:data:`A_SOURCES`; im2col and merged specs
    are k-contiguous A, i.e. ``a_layout == "row"``, of entries whose family has the im2col
    entry; merged ones of the TMA entry).
    Build one with :func:`specialise`.
    """

    entry: Entry
    protocol: Protocol = Protocol.DETERMINISTIC
    a_layout: str = "row"
    b_layout: str = "row"
    a_vec: int = 1
    b_vec: int = 1
    a_source: str = "dense"

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown fixup protocol {self.protocol!r} (have {PROTOCOLS})")
        object.__setattr__(self, "protocol", Protocol(self.protocol))
        if self.protocol not in self.entry.protocols():
            raise ValueError(f"{self.entry.name}: no {self.protocol!r} kernel (the "
                             f"{self.entry.FAMILY} family runs {self.entry.protocols()})")
        if self.a_layout not in LAYOUTS or self.b_layout not in LAYOUTS:
            raise ValueError(f"layouts must be in {LAYOUTS}, got {self.a_layout!r}, "
                             f"{self.b_layout!r}")
        if self.a_source not in A_SOURCES:
            raise ValueError(f"a_source must be in {A_SOURCES}, got {self.a_source!r}")
        if self.im2col and not (self.entry.IM2COL and self.a_layout == "row"):
            raise ValueError(f"{self.entry.name}: no im2col kernel with a {self.a_layout!r} A")
        if self.merged and not (getattr(self.entry, "merges_groups", False) and
                                self.protocol in MERGED_PROTOCOLS):
            raise ValueError(f"{self.entry.name}: no merged-groups kernel with the "
                             f"{self.protocol!r} fixup")

    # ---- what the launcher and the tools read -----------------------------------------
    bm = property(lambda self: self.entry.bm)
    bn = property(lambda self: self.entry.bn)
    bk = property(lambda self: self.entry.bk)
    stages = property(lambda self: self.entry.stages)
    threads = property(lambda self: self.entry.threads)
    ctas_per_sm = property(lambda self: self.entry.ctas_per_sm)
    min_cc = property(lambda self: self.entry.min_cc)
    dtype_in = property(lambda self: self.entry.dtype)
    dtype_out = property(lambda self: self.entry.dtype_out)
    accumulator_dtype = property(lambda self: self.entry.accumulator_dtype)
    scalar_dtype = property(lambda self: self.entry.scalar_dtype)
    elem_bytes = property(lambda self: self.entry.elem_bytes)

    @property
    def acc_bytes(self) -> int:
        return np.dtype(self.accumulator_dtype).itemsize

    @property
    def im2col(self) -> bool:
        """A convolution's kernel (A from its input), merged groups' included."""
        return self.a_source != "dense"

    @property
    def merged(self) -> bool:
        """A convolution's kernel with groups merged (:func:`.conv.merged_groups`)."""
        return self.a_source == "merged"

    @property
    def a_kcontig(self) -> bool:
        return self.a_layout == "row"

    @property
    def b_kcontig(self) -> bool:
        return self.b_layout == "col"

    def loader_unroll(self, vec: int) -> int:
        """TileLoader's UNROLL_ARG: 0 = fully unrolled; element-wise copies (misaligned
        operands) are unrolled by NARROW_COPY_UNROLL."""
        return NARROW_COPY_UNROLL if vec * self.elem_bytes < VEC16_BYTES else 0

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory; the GEMM kernel traps if the launch gives less."""
        return self.entry.smem_bytes(self)

    @property
    def slot_elems(self) -> int:
        """Accumulators in one workspace slot (one tile, fragment order)."""
        return self.entry.slot_elems(self)

    @property
    def entry_header(self) -> str:
        return self.entry.IM2COL_HEADER if self.im2col else self.entry.ENTRY_HEADER

    @property
    def kernel(self) -> str:
        """The kernel template the spec instantiates."""
        return self.entry.IM2COL_KERNEL if self.im2col else self.entry.KERNEL

    @property
    def name(self) -> str:
        source = {"dense": "", "im2col": "_im2col", "merged": "_merged"}[self.a_source]
        return (f"{self.entry.name}_{self.protocol}_{self.a_layout[0]}{self.b_layout[0]}"
                f"_v{self.a_vec}x{self.b_vec}{source}")

    def to_dict(self) -> dict:
        return {"entry": self.entry.to_dict(), "protocol": self.protocol,
                "a_layout": self.a_layout, "b_layout": self.b_layout, "a_vec": self.a_vec,
                "b_vec": self.b_vec, "a_source": self.a_source}

    @staticmethod
    def from_dict(d: dict) -> "KernelSpec":
        d = dict(d)
        return KernelSpec(Entry.from_dict(d.pop("entry")), **d)

    # ---- code generation ----------------------------------------------------------------
    @property
    def cfg_name(self) -> str:
        return "Cfg_" + self.name

    @property
    def name_expression(self) -> str:
        return f"{self.kernel}<{self.cfg_name}>"

    def cfg_source(self) -> str:
        return (
            f"struct {self.cfg_name} {{\n"
            f"  using TIn = {CXX_TYPES[self.dtype_in][0]};\n"
            f"  using TOut = {CXX_TYPES[self.dtype_out][0]};\n"
            f"  using Acc = {CXX_TYPES[self.accumulator_dtype][0]};\n"
            f"  static constexpr int BM = {self.bm}, BN = {self.bn}, BK = {self.bk};\n"
            f"  static constexpr int THREADS = {self.threads};\n"
            f"  static constexpr int MIN_BLOCKS = {self.ctas_per_sm};\n"
            f"  static constexpr int REDUCTION = {Protocol(self.protocol).code};\n"
            f"{self.entry.cfg_lines(self)}}};\n")


def specialise(entry: Entry, *, protocol: str, a_layout: str, b_layout: str,
               a_vec16: bool = True, b_vec16: bool = True,
               a_source: str = "dense") -> KernelSpec:
    """The spec of ``entry`` for one launch. An x-contiguous operand copies along the tile's
    rows (A: BM, B: BN): a vector wider than a one-row tile would straddle tiles, so such an
    operand copies elements. An im2col A copies 16-byte vectors when ``a_vec16`` (the
    caller's promise that a vector never straddles two filter taps)."""
    v = vec16_elems(entry.dtype)
    a_fits, b_fits = entry.vec_fits(a_layout, "a"), entry.vec_fits(b_layout, "b")
    return KernelSpec(entry, protocol, a_layout, b_layout,
                      v if a_vec16 and a_fits else 1, v if b_vec16 and b_fits else 1,
                      a_source)


def all_specs() -> list[KernelSpec]:
    """Every spec the launcher can choose (the compile check's full list)."""
    out = {}  # by name: the one-row tiles specialise vec16 and element-wise copies alike
    for entry in all_entries():
        for proto, (la, lb), av, bv in itertools.product(entry.protocols(), entry.layouts(),
                                                         (True, False), (True, False)):
            if entry.vec16_only and not (av and bv):
                continue
            spec = specialise(entry, protocol=proto, a_layout=la, b_layout=lb, a_vec16=av,
                              b_vec16=bv)
            out.setdefault(spec.name, spec)
    for spec in im2col_specs():
        out.setdefault(spec.name, spec)
    return list(out.values())


def im2col_specs() -> list[KernelSpec]:
    """Every im2col spec the convolution launcher can choose: the GEMM entries of families
    with the im2col entry, A channels-last ("row"), B the (K, R, S, C) filters ("col"); and
    the merged-groups kernels of the entries that have them
    (:attr:`.catalogue.Wgmma.merges_groups`) and :data:`MERGED_PROTOCOLS`."""
    out = []
    for entry in all_entries():
        if not entry.IM2COL:
            continue
        for proto, av, bv in itertools.product(entry.protocols(), (True, False), (True, False)):
            if entry.vec16_only and not (av and bv):
                continue
            out.append(specialise(entry, protocol=proto, a_layout="row", b_layout="col",
                                  a_vec16=av, b_vec16=bv, a_source="im2col"))
            if getattr(entry, "merges_groups", False) and proto in MERGED_PROTOCOLS \
                    and av and bv:
                out.append(specialise(entry, protocol=proto, a_layout="row", b_layout="col",
                                      a_source="merged"))
    return out


def representative_specs() -> list[KernelSpec]:
    """A small set that touches every entry, protocol, layout and vector width once."""
    out = []
    layouts = [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")]
    seen_keys = set()
    for entry in all_entries():
        first_of_key = (entry.FAMILY, entry.dtype) not in seen_keys
        seen_keys.add((entry.FAMILY, entry.dtype))
        own = entry.layouts()
        # entries of one layout pair (Dot) are cheap: each also runs its element-wise arrival
        others = ("deterministic", "arrival") if len(own) == 1 else ("deterministic",)
        for i, proto in enumerate(entry.protocols()):
            if not first_of_key and proto not in others:
                continue
            la, lb = layouts[i % 4] if len(own) == 4 else own[0]
            vec16 = proto != "arrival" or entry.vec16_only
            spec = specialise(entry, protocol=proto, a_layout=la, b_layout=lb,
                              a_vec16=vec16, b_vec16=vec16 or len(own) == 4)
            if not first_of_key and ("col", "row") in own:
                both = specialise(entry, protocol=proto, a_layout="col", b_layout="row")
                if entry.transposes(both):
                    spec = both  # every entry's transposers, which take registers of their own
            out.append(spec)
        if entry.IM2COL and first_of_key:  # the family's im2col entry, aligned and not
            for vec16, proto in ((True, "deterministic"), (False, "arrival")):
                vec16 = vec16 or entry.vec16_only
                out.append(specialise(entry, protocol=proto, a_layout="row", b_layout="col",
                                      a_vec16=vec16, b_vec16=vec16, a_source="im2col"))
    return out
