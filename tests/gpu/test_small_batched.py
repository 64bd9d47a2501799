"""Batches of small products on the small-batched kernel (skcontract/kernels/small_batched.py)
against a float64 reference: every dtype, operand layouts (dense ones staged by vectors,
others element by element), broadcast operands, a batch over one CTA's products, and a plan
called with another dtype (planned again)."""
import numpy as np
import pytest

import skcontract
from skcontract.kernels import small_batched

from .helpers import TOL

cupy = pytest.importorskip("cupy")


def _layout(x, how):
    if how == "F":
        return cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    if how == "strided":
        big = cupy.zeros(tuple(2 * s for s in x.shape), x.dtype)
        big[(slice(None, None, 2),) * x.ndim] = x
        return big[(slice(None, None, 2),) * x.ndim]
    if how == "reversed":
        return cupy.flip(cupy.flip(x).copy())
    if how == "offset":   # dense, from one element past 16 bytes: the element-wise staging
        flat = cupy.empty(x.size + 1, x.dtype)
        flat[1:] = x.ravel()
        return flat[1:].reshape(x.shape)
    return x


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("subscripts,shapes", [
    ("bij,bjk->bik", [(1000, 3, 3), (1000, 3, 3)]),
    ("bij,bjk->bik", [(777, 16, 16), (777, 16, 16)]),
    ("bij,bjk->bik", [(300, 32, 5), (300, 5, 32)]),
    ("bij,bj->bi", [(4099, 8, 8), (4099, 8)]),
    ("bij,bjk->bki", [(600, 7, 9), (600, 9, 4)]),
    ("bij,bjk->bik", [(1001, 3, 5), (1001, 5, 7)]),       # runs whose vectors leave a tail
    ("bij,bjk->bik", [(2000, 32, 32), (2000, 32, 32)])])  # one or two products a CTA
@pytest.mark.parametrize("how", ["C", "F", "strided", "reversed", "offset"])
def test_small_products_match_float64(subscripts, shapes, dtype, how):
    rng = np.random.default_rng(7)
    host = [rng.standard_normal(s) for s in shapes]
    ops = [_layout(cupy.asarray(h.astype(dtype)), how) for h in host]
    got = skcontract.einsum(subscripts, *ops)
    ref = np.einsum(subscripts, *[h.astype(dtype).astype(np.float64) for h in host])
    err = np.linalg.norm(cupy.asnumpy(got).astype(np.float64) - ref) / np.linalg.norm(ref)
    assert got.dtype == np.dtype(dtype) and err <= TOL[dtype]


def test_the_small_kernel_runs(monkeypatch):
    ran = []
    real = small_batched.run_small
    monkeypatch.setattr("skcontract.backends.cupy_backend.run_small",
                        lambda *a: ran.append(1) or real(*a))
    x = cupy.random.standard_normal((5000, 3, 3), dtype=cupy.float32)
    got = skcontract.einsum("bij,bjk->bik", x, x)
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(x), cupy.asnumpy(x)),
                               rtol=1e-5, atol=1e-5)
    assert ran


def test_a_broadcast_operand():
    a = cupy.broadcast_to(cupy.random.standard_normal((1, 4, 6), dtype=cupy.float64),
                          (3000, 4, 6))
    b = cupy.random.standard_normal((3000, 6, 5), dtype=cupy.float64)
    got = skcontract.einsum("bij,bjk->bik", a, b)
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(a), cupy.asnumpy(b)),
                               rtol=1e-12)


def test_an_expression_planned_for_float64_runs_float32_operands():
    expr = skcontract.contract_expression("bij,bjk->bik", (2000, 4, 4), (2000, 4, 4))
    x = cupy.random.standard_normal((2000, 4, 4), dtype=cupy.float32)
    got = expr(x, x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(x), cupy.asnumpy(x)),
                               rtol=1e-5, atol=1e-5)
