"""Which batched products are memory-bound, and their shape in the Dot kernel's terms.

A batched product ``x @ y`` of (batch, M, K) x (batch, K, N) views reads every operand byte
once when it is a batch of dots (``M == N == 1``) or a matrix-vector product (``M == 1`` or
``N == 1``): no tile reuses anything, and the GEMM kernels' tiles would compute mostly
padding. :func:`dot_form` maps such a product onto one of the Dot kernel's two shapes
(``sk_dot.cuh``), from the views' strides:

* "rows": ``C[b, r] = sum_k X[b, r, k] Y[b, r, k]``, k contiguous in both (Y's row stride
  is 0 for a matrix-vector product);
* "cols": ``C[b, c] = sum_k V[b, k] W[b, k, c]``, a vector times a matrix whose c is
  contiguous.

Pure Python: plans for a GPU are made anywhere.

>>> f = dot_form(1, 8192, 1, 4096, (0, 4096, 1), (0, 1, 1), (0, 1, 1))   # ij,j->i
>>> f.shape, f.batch, f.outputs, f.k, f.lda, f.ldb
('rows', 1, 8192, 4096, 4096, 0)
>>> dot_form(4, 64, 64, 64, (4096, 64, 1), (4096, 64, 1), (4096, 64, 1)) is None
True
"""
from __future__ import annotations

from typing import NamedTuple

from ..schedule import GemmProblem
from ..schedule.table import INDEX_MAX
from .catalogue import VEC16_BYTES


class DotForm(NamedTuple):
    """A product in the Dot kernel's terms (strides in elements; batch strides 0 for one
    batch entry). ``swap``: the kernel's A is the product's y (and B its x)."""

    shape: str     # "rows" or "cols"
    batch: int
    outputs: int   # rows or columns of one batch entry
    k: int
    swap: bool
    lda: int       # rows: X's row stride; cols: V's k stride
    ldb: int       # rows: Y's row stride (0: a vector); cols: W's row stride
    sa: int        # batch strides of A, B, C
    sb: int
    ldc: int       # stride between outputs
    sc: int

    def problem(self, dtype: str) -> GemmProblem:
        """The GemmProblem the scheduler plans: outputs x 1 (rows) or 1 x outputs (cols)."""
        m, n = (self.outputs, 1) if self.shape == "rows" else (1, self.outputs)
        return GemmProblem(m, n, self.k, batch=self.batch, dtype=dtype)


def dot_form(batch, m, n, k, xs, ys, cs) -> DotForm | None:
    """The Dot form of ``x @ y`` for views x (batch, m, k), y (batch, k, n) and the output
    (batch, m, n) with element strides ``xs``, ``ys``, ``cs`` (batch stride first); None when
    the product is not memory-bound (``m > 1`` and ``n > 1``) or its strides fit neither
    shape."""
    if (m > 1 and n > 1) or min(batch, m, n, k) < 1 or k > INDEX_MAX:
        return None
    if min(*xs, *ys, *cs) < 0:
        return None
    sxb, sxm, sxk = xs[0] if batch > 1 else 0, xs[1], xs[2] if k > 1 else 1
    syb, syk, syn = ys[0] if batch > 1 else 0, ys[1] if k > 1 else 1, ys[2]
    scb, scm, scn = cs[0] if batch > 1 else 0, cs[1], cs[2]
    if m == 1 and n == 1:
        if sxk == 1 and syk == 1:  # a batch of dots: one row each
            return DotForm("rows", 1, batch, k, False, sxb, syb, 0, 0, scb, 0)
        return None
    if n == 1:
        if sxk == 1 and syk == 1:
            return DotForm("rows", batch, m, k, False, sxm, 0, sxb, syb, scm, scb)
        if sxm == 1:
            return DotForm("cols", batch, m, k, True, syk, sxk, syb, sxb, scm, scb)
        return None
    if sxk == 1 and syk == 1:  # m == 1: the rows of y^T against x
        return DotForm("rows", batch, n, k, True, syn, 0, syb, sxb, scn, scb)
    if syn == 1:
        return DotForm("cols", batch, n, k, False, sxk, syk, sxb, syb, scn, scb)
    return None


def loads_aligned(ptr: int, ld: int, sb: int, elem: int, rows: bool) -> bool:
    """Whether a Dot operand's 16-byte loads are aligned: its base, and (for a rows operand)
    its row and batch strides."""
    v = VEC16_BYTES
    return ptr % v == 0 and (not rows or ((ld * elem) % v == 0 and (sb * elem) % v == 0))


def form_aligned(form: DotForm, x_ptr: int, y_ptr: int, elem: int) -> tuple[bool, bool]:
    """Whether the Dot kernel's 16-byte loads of ``form``'s A and B are aligned, for a
    product's operands at ``x_ptr`` and ``y_ptr`` (0: fresh arrays)."""
    a_ptr, b_ptr = (y_ptr, x_ptr) if form.swap else (x_ptr, y_ptr)
    rows = form.shape == "rows"
    return (loads_aligned(a_ptr, form.lda, form.sa, elem, True) if rows else True,
            loads_aligned(b_ptr, form.ldb, form.sb, elem, True))


def form_of(x, y) -> tuple[DotForm, tuple] | None:
    """The Dot form of ``x @ y`` for arrays (anything with shape, strides and itemsize) of
    (batch, M, K) x (batch, K, N) or (M, K) x (K, N), with the C-contiguous output a call
    writes, and that output's shape; None when it has none (or is empty)."""
    item = x.itemsize
    if x.ndim == 2:
        (m, k), n = x.shape, y.shape[1]
        batch, xs = 1, (0,) + tuple(v // item for v in x.strides)
        ys, shape = (0,) + tuple(v // item for v in y.strides), (m, n)
    else:
        batch, m, k = x.shape
        n = y.shape[2]
        if y.shape[0] != batch:
            return None
        xs = tuple(v // item for v in x.strides)
        ys = tuple(v // item for v in y.strides)
        shape = (batch, m, n)
    if min(batch, m, n, k) == 0:
        return None
    form = dot_form(batch, m, n, k, xs, ys, (m * n, n, 1))
    return None if form is None else (form, shape)
