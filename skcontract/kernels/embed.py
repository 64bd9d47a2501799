"""Complex matrix products on the real kernels (``cuda/complex_embed.cuh``).

A complex product ``C = A B`` (m x n x k) runs as one real product of the real dtype: A read
as the m x 2k real matrix of its (re, im) pairs, C written as m x 2n, and B *embedded*: each
element b becomes the 2 x 2 real block [[re b, im b], [-im b, re b]] of a 2k x 2n real
matrix B', which a kernel writes K-major (the layout every real entry reads, the tf32 ones
included). The real product does the complex product's four real multiply-adds per complex
one, so it runs at the real kernels' rate: complex64 on the float32 entries (3xTF32 tensor
cores at float32 accuracy by default, tf32, or the exact FFMA kernels), complex128 on the
float64 (DMMA) entries, under the same Stream-K schedules, with the deterministic fixups.

A's pairs must lie along k (A row-major); where instead B's do (B column-major), the
transposed product ``C^T = B^T A^T`` runs, A embedded; where neither does, A is first copied
row-major. Of two ways, the one that embeds the operand of fewer elements runs. A product
with a Dot form (a matrix-vector product, memory-bound) has no real form worth running (it
would read the matrix once per output part): the Dot kernel reads it as it lies
(:func:`.resolve.complex_dot`).

The plan side (:func:`embedding`) is pure Python; :func:`embed` and :func:`real_view` run on
the GPU (CuPy imported inside).

>>> from skcontract.kernels.operands import Product
>>> e = embedding(Product("complex64", 1, 300, 200, 100, ("row", "row"), (True, True)))
>>> e.side, (e.real.m, e.real.n, e.real.k), e.real.layouts
('B', (300, 400, 200), ('row', 'col'))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import jit
from .operands import Product, contiguous, rows_off_lines
from .specs import VEC16_BYTES

HEADER = "complex_embed.cuh"
NAMES = ("skc::complex_embed<float>", "skc::complex_embed<double>")
"""The embedding kernel's instantiations, complex64's then complex128's."""
REAL_OF = {"complex64": "float32", "complex128": "float64"}
"""Complex dtypes with a real form -> the real dtype their products run in."""
TILE = 32
"""Rows and columns of the block a CTA of the embedding moves (EMBED_TILE)."""
THREADS = 256
"""Threads of a CTA of the embedding (EMBED_TILE x EMBED_ROWS)."""
MAX_GRID_Y = 65535
"""Matrices one launch of the embedding takes (the grid's y extent)."""
EMBEDDED = "B"
"""The side whose operand is embedded where A's pairs lie along k: ``C = A_r B'``."""
TRANSPOSED = "A"
"""The side whose operand is embedded in the transposed product ``C^T = B^T_r A'``."""


@dataclass(frozen=True)
class Embedding:
    """How a complex product runs as a real one: ``side`` names the embedded operand
    (:data:`EMBEDDED`: B; :data:`TRANSPOSED`: A, the real product being ``C^T = B^T A^T``);
    ``copy``: the other operand is first copied row-major (its pairs lie along k in
    neither operand); ``real``: the real product the launch runs, its A the read operand's
    pairs, its B the embedded matrix (K-major, rows padded to 16 bytes: ``ld``)."""

    side: str
    copy: bool
    real: Product
    ld: int

    def describe(self, dtype: str) -> str:
        """The form in words, as a plan step's reason names it."""
        r = self.real
        how = "B embedded" if self.side == EMBEDDED else "A embedded, C^T = B^T A^T"
        copied = "; A copied row-major" if self.copy else ""
        return (f"{dtype} as {r.dtype} {r.m} x {r.n} x {r.k} ({how}{copied})")


def embedding(product: Product) -> Embedding | None:
    """The real form of the complex ``product`` (:class:`Embedding`), None where it has
    none worth running (a dtype without one, or a Dot form)."""
    real = REAL_OF.get(product.dtype)
    if real is None or product.form is not None:
        return None
    (la, lb), (va, vb) = product.layouts, product.vec16
    ma, mb = product.matrices
    a_reads, b_reads = la == "row", lb == "col"
    embed_b = a_reads and not (b_reads and ma * product.m < mb * product.n)
    if embed_b or not b_reads:
        rows, cols, read_vec, held = product.m, product.n, va, (ma, mb)
        copy = not a_reads
        if copy:
            read_vec = (product.k * np.dtype(product.dtype).itemsize) % VEC16_BYTES == 0
        side = EMBEDDED
    else:
        rows, cols, read_vec, held, copy = product.n, product.m, vb, (mb, ma), False
        side = TRANSPOSED
    elem = np.dtype(real).itemsize
    ld = embedded_ld(product.k, product.dtype)
    batch_stride = 2 * cols * ld if held[1] > 1 else 0
    real_product = Product(real, product.batch, rows, 2 * cols, 2 * product.k,
                           ("row", "col"), (read_vec, True), None, (True, True),
                           rows_off_lines(0, ld, batch_stride, elem), held)
    return Embedding(side, copy, real_product, ld)


def embedded_ld(k: int, dtype: str) -> int:
    """The row stride of the embedded matrix of a ``dtype`` (complex) operand of ``k`` rows:
    its 2 k real elements rounded up to whole 16-byte vectors."""
    per = VEC16_BYTES // np.dtype(REAL_OF[dtype]).itemsize
    return -(-2 * k // per) * per


def embed(x, ld: int, conj_read: bool = False, conj_embedded: bool = False):
    """The real matrices B' of the complex CuPy array ``x`` (batch, k, cols), or (k, cols)),
    K-major: a (batch, 2 k, 2 cols) view, column-major, of dense rows of ``ld`` real
    elements (:func:`embedding`'s ``ld``). A batch that repeats one matrix (stride 0) is
    embedded once and read back with a batch stride of 0. ``conj_read`` / ``conj_embedded``:
    the product reads the other operand / ``x`` conjugated (:func:`reference`'s blocks)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    if x.data.ptr % x.itemsize:  # the kernel reads (re, im) pairs as one aligned vector
        x = contiguous(x)
    lead = x.shape[:-2]
    k, cols = x.shape[-2:]
    broadcast = bool(lead) and x.strides[0] == 0
    matrices = 1 if broadcast or not lead else lead[0]
    real = cupy.dtype(REAL_OF[x.dtype.name])
    w = cupy.empty((matrices, 2 * cols, ld), dtype=real)
    item = x.itemsize
    sb = x.strides[0] // item if lead and not broadcast else 0
    sk, sq = x.strides[-2] // item, x.strides[-1] // item
    fn = jit.get_module(HEADER, NAMES, x.device.id).get_function(
        NAMES[tuple(REAL_OF).index(x.dtype.name)])
    blocks = -(-k // TILE) * -(-cols // TILE)
    p_fast = np.int32(abs(sk) <= abs(sq))
    x3 = x if lead else x[None]
    for b0 in range(0, matrices, MAX_GRID_Y):
        n = min(MAX_GRID_Y, matrices - b0)
        fn((blocks, n), (THREADS,),
           (x3[b0:b0 + n], w[b0:b0 + n], np.int32(k), np.int32(cols), np.int64(sb),
            np.int64(sk), np.int64(sq), np.int64(ld), np.int64(2 * cols * ld), p_fast,
            np.int32(conj_read), np.int32(conj_embedded)))
    bt = w[..., :2 * k].swapaxes(-1, -2)
    if not lead:
        return bt[0]
    return cupy.broadcast_to(bt, lead + bt.shape[-2:]) if broadcast else bt


def real_view(x):
    """The CuPy complex array ``x`` (its last axis of unit stride) read as real pairs: the
    last axis twice as long, the other strides the same in bytes."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    real = cupy.dtype(REAL_OF[x.dtype.name])
    shape = x.shape[:-1] + (2 * x.shape[-1],)
    strides = x.strides[:-1] + (real.itemsize,)
    return cupy.ndarray(shape, real, x.data, strides=strides)


def reference(b: np.ndarray, conj_read: bool = False,
              conj_embedded: bool = False) -> np.ndarray:
    """B' of the NumPy complex matrix ``b`` (k x cols) as :func:`embed` writes it, dense
    (2 k x 2 cols): the identity the kernel implements, for tests and readers. The real
    product of A's pairs (m x 2 k) and B' is the pairs of ``A @ b``; of ``conj(A) @ b`` with
    ``conj_read``, of ``A @ conj(b)`` with ``conj_embedded``.

    >>> a, b = np.array([[1 + 2j]]), np.array([[3 - 1j]])
    >>> pairs = np.array([[1.0, 2.0]]) @ reference(b, conj_read=True)
    >>> bool(complex(*pairs[0]) == (np.conj(a) @ b)[0, 0])
    True
    """
    k, cols = b.shape
    b = np.conj(b) if conj_embedded else b
    s = -1 if conj_read else 1
    out = np.empty((2 * k, 2 * cols), dtype=b.real.dtype)
    out[0::2, 0::2], out[0::2, 1::2] = b.real, b.imag
    out[1::2, 0::2], out[1::2, 1::2] = -s * b.imag, s * b.real
    return out
