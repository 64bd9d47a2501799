"""What kind of kernel a contraction step needs: the one vocabulary the planner, the
scheduler and the kernels share.

>>> Kind.GEMM == "GEMM", kind_of("gemv"), Kind.DOT in GEMM_KINDS
(True, 'GEMV', True)
"""
from __future__ import annotations

import enum


class Kind(str, enum.Enum):
    """The kind of a step (equal to its name as a string)."""

    GEMM = "GEMM"                  # m, n, k non-trivial, no batch
    BATCHED_GEMM = "BATCHED_GEMM"  # m, n, k and batch non-trivial
    GEMV = "GEMV"                  # k and exactly one of m, n non-trivial (batch allowed)
    DOT = "DOT"                    # only k (and maybe batch) non-trivial
    CONV = "CONV"                  # implicit-GEMM convolution (conv2d)
    OUTER = "OUTER"                # m and n non-trivial, no k (batch allowed)
    ELEMENTWISE = "ELEMENTWISE"    # no k, at most one of m, n non-trivial
    UNARY = "UNARY"                # one operand: diagonals, traces, sums, broadcast squeeze

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


GEMM_KINDS = frozenset({Kind.GEMM, Kind.BATCHED_GEMM, Kind.GEMV, Kind.DOT, Kind.CONV})
"""Kinds a (batched) GEMM kernel, and so the Stream-K scheduler, can run: a reduction over
tiles."""


def kind_of(kind) -> Kind:
    """The Kind named by ``kind``: a Kind, its name in any case, or anything with a ``name``;
    ValueError naming the kinds for anything else."""
    if isinstance(kind, Kind):
        return kind
    name = str(getattr(kind, "name", kind)).upper()
    try:
        return Kind(name)
    except ValueError:
        raise ValueError(f"unknown step kind {kind!r}; kinds are "
                         f"{', '.join(k.value for k in Kind)}") from None
