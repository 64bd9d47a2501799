"""StepLaunch: everything that launches one GEMM-class plan step, decided when the plan is made.

The resolver (:func:`.resolve.resolve_step`) makes one for each GEMM-class step a kernel
takes: the schedule, the kernel specialisation (entry, fixup protocol, operand layouts and
vector widths), the operand copies made before the launch, and the Dot form of a
memory-bound step; a convolution's plan (:mod:`skcontract.ops.conv_plan`) holds one too,
with its implicit GEMM's facts (``conv``). The plan holds it and prints it; the backend binds
pointers to it (:mod:`.bound`) without entering the resolver or the catalogue. Pure Python:
plans for a GPU are made and shown anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..schedule import Schedule
from .forms import DotForm
from .operands import Product
from .specs import KernelSpec, specialise

DOT_READS_CONJUGATED = True
"""Whether a complex Dot launch reads the operands a step conjugates (einsum's ``conj=``)
itself, on its kernel's CONJ_A / CONJ_B build (:meth:`StepLaunch.conjugating`); off, the step
conjugates them into copies first (the path the tests compare it with)."""


@dataclass(frozen=True, eq=False)
class StepLaunch:
    """The launch of one plan step: ``schedule`` runs on the kernel of ``spec``; ``copies``
    says, for A and B, whether the operand is first copied K-major (the entries that read
    K-major operands only, or where the copy costs less than turning the operand in the
    kernel's stages); ``form`` is the step's Dot form when the Dot family runs it (its
    operands in the form's order); ``conv`` is a convolution's (:class:`.conv.ConvArgs`:
    the geometry the im2col kernel runs, its input view's strides, the filters' row stride,
    a folded convolution's extent), from which its ConvShape argument and TMA maps are made.
    ``aligned_copies`` says, for A and B, whether the operand is first copied, in its own
    layout, into rows padded to 16 bytes (rows that miss 16 bytes, which the kernels that
    read through TMA or 16-byte vectors cannot read, where the copy costs less than the
    portable kernel's extra time: :func:`.resolve.aligned_copies`).
    ``product``: the operands the launch was planned for (:class:`.operands.Product`; a
    call runs it on operands whose product :meth:`~.operands.Product.runs_as` this one).
    ``embed``: a complex product's real form (:class:`.embed.Embedding`), whose real
    product the schedule, the kernel and the copies are for (``product`` stays the complex
    operands').
    Two launches with equal :attr:`key` launch the same kernel on the same split table (and
    the same convolution)."""

    schedule: Schedule
    spec: KernelSpec
    copies: tuple[bool, bool] = (False, False)
    form: DotForm | None = None
    conv: Any = None
    product: Product | None = None
    aligned_copies: tuple[bool, bool] = (False, False)
    embed: Any = None

    @property
    def entry(self):
        """The catalogue entry whose kernel runs the step."""
        return self.spec.entry

    @property
    def reads_conjugated(self) -> bool:
        """Whether the launch reads the operands its step conjugates itself: a complex
        product's embedding (its blocks' signs), or a complex Dot launch
        (:data:`DOT_READS_CONJUGATED`); else the step conjugates them into copies."""
        if self.embed is not None:
            return True
        return DOT_READS_CONJUGATED and self.form is not None and \
            self.spec.entry.dtype.startswith("complex")

    @property
    def key(self) -> tuple:
        """What identifies the launch: the split table's content and the mode that made it
        (two modes may make one table; the launch records the mode it was planned with), the
        kernel, the copies, the form and the convolution (the schedule's numpy table is
        compared by digest), and a complex product's real form."""
        s = self.schedule
        return (s.digest(), str(s.mode), s.grid, tuple(s.tile), s.device.ctas_per_sm,
                s.cluster, s.protocol, self.spec, self.copies, self.form, self.conv,
                self.aligned_copies, self.embed)

    def __eq__(self, other) -> bool:
        return isinstance(other, StepLaunch) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def conjugating(self, conj: tuple[bool, bool]) -> "StepLaunch":
        """This Dot launch on its kernel's build that reads the step's ``x`` and / or ``y``
        (``conj``, the step's order) conjugated: the form's A and B are the step's operands,
        swapped where the form says."""
        flags = conj[::-1] if self.form.swap else tuple(conj)
        return replace(self, spec=replace(self.spec, entry=replace(self.spec.entry,
                                                                   conj=flags)))

    def runs(self, conj: tuple[bool, ...] = ()) -> "StepLaunch":
        """The launch that runs a step reading its inputs ``conj`` (the step's flags):
        the conjugating Dot build where this is a Dot launch that reads them itself, else
        this one (an embedding folds them into its signs; other steps copy them)."""
        if any(conj) and self.embed is None and self.reads_conjugated:
            return self.conjugating(tuple(conj))
        return self

    def summary(self, conj: tuple[bool, ...] = ()) -> str:
        """The schedule's summary and the kernel that runs a step reading its inputs
        ``conj``, as a plan's row shows them (the schedule's reason names the operands
        copied K-major)."""
        return f"{self.schedule.summary()}; kernel {self.runs(conj).spec.name}"


def dot_spec(entry, protocol: str, aligned: tuple[bool, bool]) -> KernelSpec:
    """The Dot kernel of ``entry`` whose 16-byte loads of the form's A and B are ``aligned``
    or not (:func:`.forms.form_aligned`)."""
    la, lb = entry.layouts()[0]
    return specialise(entry, protocol=protocol, a_layout=la, b_layout=lb, a_vec16=aligned[0],
                      b_vec16=aligned[1])
