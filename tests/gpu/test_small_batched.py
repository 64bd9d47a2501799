"""Batches of small products on the small-batched kernel (skcontract/kernels/small_batched.py)
against a float64 reference: every dtype, operand layouts (dense ones staged by vectors,
others element by element), broadcast operands, a batch over one CTA's products, and a plan
called with another dtype (planned again)."""
import numpy as np
import pytest

import skcontract
from skcontract.kernels import small_batched
from skcontract.plan import peak

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
    assert got.shape == ref.shape and got.dtype == np.dtype(dtype) and err <= TOL[dtype]


def test_the_small_kernel_runs(monkeypatch):
    ran = []
    real = small_batched.bind_small
    monkeypatch.setattr("skcontract.backends.cupy_backend.bind_small",
                        lambda *a: ran.append(1) or real(*a))
    x = cupy.random.standard_normal((5000, 3, 3), dtype=cupy.float32)
    got = skcontract.einsum("bij,bjk->bik", x, x)
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(x), cupy.asnumpy(x)),
                               rtol=1e-5, atol=1e-5)
    assert ran


@pytest.mark.parametrize("fold", [False, True])
def test_a_call_like_the_last_replays_its_launch(monkeypatch, fold):
    """The second call on operands laid out as the first's replays the bound launch (no
    planning, no binding made): the kernel runs on the new operands' addresses."""
    monkeypatch.setattr(small_batched, "FOLD", fold)
    monkeypatch.setattr(peak, "SMALL_FOLDS", fold)
    _forget_plans()
    from skcontract.kernels.launch import record_launches
    subscripts, shapes = ("ij,jk->ik", [(65536, 8), (8, 8)]) if fold else \
        ("bij,bjk->bik", [(3000, 5, 7), (3000, 7, 3)])
    expr = skcontract.contract_expression(subscripts, *shapes, dtype=np.float32)
    bound = []
    monkeypatch.setattr("skcontract.backends.cupy_backend.bind_small",
                        lambda *a: bound.append(1) or small_batched.bind_small(*a))
    for _ in range(3):
        ops = [cupy.random.standard_normal(s, dtype=cupy.float32) for s in shapes]
        with record_launches() as launched:
            got = expr(*ops)
        assert len(launched) == 1 and "small_batched" in launched[0].kernel, launched
        ref = np.einsum(subscripts, *[cupy.asnumpy(o).astype(np.float64) for o in ops])
        np.testing.assert_allclose(cupy.asnumpy(got), ref, rtol=1e-5, atol=1e-5)
    assert len(bound) == 1   # the first call binds; the others replay
    _forget_plans()


def test_a_broadcast_operand():
    a = cupy.broadcast_to(cupy.random.standard_normal((1, 4, 6), dtype=cupy.float64),
                          (3000, 4, 6))
    b = cupy.random.standard_normal((3000, 6, 5), dtype=cupy.float64)
    got = skcontract.einsum("bij,bjk->bik", a, b)
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(a), cupy.asnumpy(b)),
                               rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(65536, 8), (8, 8)]),              # a bond-2 network's step
    ("ij,jk->ik", [(25025, 3), (3, 3)]),              # 25 rows a product
    ("ij,jk->ik", [(40000, 5), (5, 7)]),              # 40000 = 2^6 5^4: 32 rows
    ("abc,cd->abd", [(512, 64, 32), (32, 32)]),       # the largest product, one a CTA
    ("ij,kj->ik", [(65536, 16), (4, 16)]),            # B column-major
    ("ji,jk->ik", [(8, 65536), (8, 4)])])             # A column-major: staged by columns
@pytest.mark.parametrize("how", ["C", "F", "strided", "reversed", "offset"])
def test_tall_products_folded_into_small_ones_match_float64(folding, subscripts, shapes, dtype,
                                                            how):
    """A's rows FOLD_ROWS at a time, each block a product with the one B staged once a
    CTA; A laid out otherwise than planned (the other major, strided, off 16 bytes) still
    folds, staged element by element."""
    rng = np.random.default_rng(8)
    host = [rng.standard_normal(s) for s in shapes]
    got, ref, err = _on_the_small_kernel(subscripts, host, dtype, how, np.float64)
    assert got.shape == ref.shape and got.dtype == np.dtype(dtype) and err <= TOL[dtype]


def _on_the_small_kernel(subscripts, host, dtype, how, wide):
    """einsum of the NumPy arrays ``host`` as ``dtype`` CuPy arrays laid out ``how``, every
    launch the small-batched kernel's: ``(result, reference in wide, relative error)``."""
    from skcontract.kernels.launch import record_launches
    ops = [_layout(cupy.asarray(h.astype(dtype)), how) for h in host]
    with record_launches() as launched:
        got = skcontract.einsum(subscripts, *ops)
    assert launched and all("small_batched" in x.kernel for x in launched), launched
    ref = np.einsum(subscripts, *[h.astype(dtype).astype(wide) for h in host])
    err = np.linalg.norm(cupy.asnumpy(got).astype(wide) - ref) / np.linalg.norm(ref)
    return got, ref, err


def test_a_batch_with_one_b_stages_it_once():
    a = cupy.random.standard_normal((3000, 4, 6), dtype=cupy.float32)
    b = cupy.broadcast_to(cupy.random.standard_normal((1, 6, 5), dtype=cupy.float32),
                          (3000, 6, 5))
    launch = small_batched.plan_small("float32", 3000, 4, 5, 6, shared_b=True)
    got = small_batched.run_small(launch, a, b)
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(a), cupy.asnumpy(b)),
                               rtol=1e-5, atol=1e-5)
    # a B of its own for every product is not the launch's: the caller runs it
    assert small_batched.run_small(launch, a, cupy.ascontiguousarray(b)) is None


def test_a_folded_launch_takes_one_b_only():
    launch = small_batched.SmallLaunch("float32", 1024, 32, 8, 8, 13, True, True)
    a = cupy.random.standard_normal((32768, 8), dtype=cupy.float32)
    b = cupy.random.standard_normal((8, 8), dtype=cupy.float32)
    got = small_batched.run_small(launch, a, b)
    assert got.shape == (32768, 8)
    np.testing.assert_allclose(cupy.asnumpy(got), cupy.asnumpy(a) @ cupy.asnumpy(b),
                               rtol=1e-5, atol=1e-5)
    # a batch of B (matmul: (1024, 32768, 8)) is no folded product
    assert small_batched.run_small(launch, a, cupy.broadcast_to(b, (1024, 8, 8))) is None


def test_an_expression_planned_for_float64_runs_float32_operands():
    expr = skcontract.contract_expression("bij,bjk->bik", (2000, 4, 4), (2000, 4, 4))
    x = cupy.random.standard_normal((2000, 4, 4), dtype=cupy.float32)
    got = expr(x, x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(cupy.asnumpy(x), cupy.asnumpy(x)),
                               rtol=1e-5, atol=1e-5)


COMPLEX_TOL = {"complex64": 1e-5, "complex128": 1e-12}


def _forget_plans():
    """Drop the process's plans (einsum's warm calls, the paths, the prepared plans and the
    launches), so that a planning switch applies to the next call."""
    from skcontract import contract, planning, warm
    from skcontract.kernels import gemm
    warm.WARM.clear()
    contract._PATHS.clear()
    planning.prepare_cached.cache_clear()
    gemm.clear_plans()


@pytest.fixture
def folding(monkeypatch):
    """Tall products folded into batches of small ones (small_batched.FOLD, and the peak
    model with it)."""
    _forget_plans()
    monkeypatch.setattr(small_batched, "FOLD", True)
    monkeypatch.setattr(peak, "SMALL_FOLDS", True)
    yield
    _forget_plans()


@pytest.fixture
def single_complex(monkeypatch):
    """The kernel taking complex products of any batch (small_batched.SINGLE_COMPLEX, and
    the peak model with it)."""
    monkeypatch.setattr(small_batched, "SINGLE_COMPLEX", True)
    monkeypatch.setattr(peak, "SMALL_COMPLEX_DTYPES", frozenset(small_batched.COMPLEX_TYPES))
    _forget_plans()
    yield
    _forget_plans()


@pytest.mark.parametrize("dtype", list(COMPLEX_TOL))
@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(2, 2), (2, 2)]),                       # a gate on a qubit
    ("ij,jk->ik", [(8, 2), (2, 8)]),
    ("abc,cd->abd", [(4, 8, 4), (4, 16)]),                 # a batch folded into M
    ("bij,bjk->bik", [(3, 5, 7), (3, 7, 9)]),              # a few products
    ("bij,bjk->bik", [(700, 4, 4), (700, 4, 4)]),          # many: vectors staged
    ("bij,bjk->bki", [(300, 32, 5), (300, 5, 32)])])
@pytest.mark.parametrize("how", ["C", "F", "strided", "offset"])
def test_small_complex_products_match_complex128(single_complex, subscripts, shapes, dtype,
                                                 how):
    """Complex products on the small-batched kernel, down to one 2 x 2 product (the random
    circuits' gates), each launch the kernel's own (no embedding)."""
    rng = np.random.default_rng(11)
    host = [rng.standard_normal(s) + 1j * rng.standard_normal(s) for s in shapes]
    got, ref, err = _on_the_small_kernel(subscripts, host, dtype, how, np.complex128)
    assert got.shape == ref.shape and got.dtype == np.dtype(dtype)
    assert err <= COMPLEX_TOL[dtype], err


def test_a_conjugated_small_complex_product(single_complex):
    """``conj=(0,)``: the step conjugates A into a copy, the small kernel multiplies."""
    rng = np.random.default_rng(12)
    a, b = (rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4)) for _ in range(2))
    got = skcontract.einsum("ij,jk->ik", cupy.asarray(a.astype(np.complex64)),
                            cupy.asarray(b.astype(np.complex64)), conj=(0,))
    ref = np.conj(a.astype(np.complex64)).astype(np.complex128) @ b.astype(np.complex64)
    np.testing.assert_allclose(cupy.asnumpy(got), ref, rtol=1e-5, atol=1e-5)
