"""OUTER steps on the outer-product kernel (skcontract/kernels/outer.py) against numpy: every
dtype and store width, batches and broadcast batches, operands laid out as views."""
import numpy as np
import pytest

import skcontract

cupy = pytest.importorskip("cupy")


def _layout(x, how):
    if how == "reversed":
        return cupy.flip(cupy.flip(x).copy())
    if how == "strided":
        big = cupy.zeros(tuple(2 * s for s in x.shape), x.dtype)
        big[(slice(None, None, 2),) * x.ndim] = x
        return big[(slice(None, None, 2),) * x.ndim]
    return x


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("subscripts,shapes", [
    ("i,j->ij", [(300,), (1024,)]), ("i,j->ij", [(257,), (333,)]),   # whole and odd rows
    ("bi,bj->bij", [(6, 40), (6, 128)]), ("ab,cd->abcd", [(3, 5), (8, 16)]),
    ("i,j->ji", [(100,), (256,)])])
@pytest.mark.parametrize("how", ["C", "strided", "reversed"])
def test_outer_products_match_numpy(subscripts, shapes, dtype, how):
    """Bitwise numpy's products (one rounding of the exact product in every dtype)."""
    rng = np.random.default_rng(len(subscripts))
    host = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ops = [_layout(cupy.asarray(h), how) for h in host]
    out = skcontract.einsum(subscripts, *ops)
    np.testing.assert_array_equal(cupy.asnumpy(out), np.einsum(subscripts, *host))


def test_an_outer_step_runs_on_the_kernel(monkeypatch):
    """The step's launch runs, not CuPy's multiply."""
    from skcontract.kernels import outer
    ran = []
    real = outer.run_outer
    monkeypatch.setattr("skcontract.backends.cupy_backend.run_outer",
                        lambda *a: ran.append(1) or real(*a))
    x, y = cupy.arange(128, dtype=cupy.float32), cupy.arange(256, dtype=cupy.float32)
    expr = skcontract.contract_expression("i,j->ij", x.shape, y.shape, dtype=np.float32)
    np.testing.assert_array_equal(cupy.asnumpy(expr(x, y)),
                                  np.multiply.outer(cupy.asnumpy(x), cupy.asnumpy(y)))
    assert ran


def test_a_broadcast_batch_operand():
    x = cupy.broadcast_to(cupy.arange(64, dtype=cupy.float32)[None], (5, 64))
    y = cupy.random.standard_normal((5, 96), dtype=cupy.float32)
    got = skcontract.einsum("bi,bj->bij", x, y)
    np.testing.assert_array_equal(cupy.asnumpy(got), np.einsum("bi,bj->bij", cupy.asnumpy(x),
                                                               cupy.asnumpy(y)))
