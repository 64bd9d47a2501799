"""The Dot family (memory-bound products) on the GPU: every form, layout, alignment, mode and
fixup against a float64 reference, outputs poisoned first; bitwise reproducibility; einsum
and explain run and show it."""
import numpy as np
import pytest

from tests.gpu.helpers import TOL

DTYPES = ["float16", "float32", "float64"]

# name -> (x shape, y shape, x order, y order): x (batch, M, K) / (M, K), y (.., K, N)
CASES = {
    "batched dots": ((37, 1, 1000), (37, 1000, 1), "C", "C"),
    "one long dot": ((1, 1 << 20), (1 << 20, 1), "C", "C"),
    "gemv rows": ((333, 4099), (4099, 1), "C", "C"),
    "gemv rows batched": ((3, 130, 515), (3, 515, 1), "C", "C"),
    "vector x matrix, k-contiguous": ((1, 2050), (2050, 301), "C", "F"),
    "gemv, m-contiguous": ((1000, 777), (777, 1), "F", "C"),
    "vector x matrix, n-contiguous": ((1, 3001), (3001, 1029), "C", "C"),
    "vector x matrix, batched": ((2, 1, 64), (2, 64, 300), "C", "C"),
    "k = 1": ((50, 1), (1, 1), "C", "C"),
}


def _rand(shape, dtype, order, seed):
    import cupy
    x = cupy.random.RandomState(seed).standard_normal(shape, dtype=cupy.float32).astype(dtype)
    if order == "F":
        x = cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    return x


def _check(r, x, y, dtype):
    import cupy
    ref = cupy.matmul(x.astype(cupy.float64), y.astype(cupy.float64))
    scale = float(cupy.abs(x.astype(cupy.float64)) .max() * cupy.abs(y.astype(cupy.float64)).max())
    k = x.shape[-1]
    err = float(cupy.abs(r.astype(cupy.float64) - ref).max()) / (scale * max(k, 1) ** 0.5)
    assert not bool(cupy.isnan(r).any()), "an output was never written"
    assert err < TOL[dtype], err


def _poisoned(shape, dtype):
    import cupy
    return cupy.full(shape, cupy.nan, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_matvec_matches_float64(case, dtype):
    from skcontract.kernels.dot import matvec
    from skcontract.kernels.launch import record_launches
    xs, ys, xo, yo = CASES[case]
    x, y = _rand(xs, dtype, xo, 1), _rand(ys, dtype, yo, 2)
    out = _poisoned(xs[:-1] + ys[-1:], dtype)
    with record_launches() as launches:
        r = matvec(x, y, out=out)
    assert r is out
    assert [launch.kernel.startswith("dot_") for launch in launches] == [True]
    _check(r, x, y, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_misaligned_operands_take_the_element_wise_loads(dtype):
    from skcontract.kernels.dot import matvec
    from skcontract.kernels.launch import record_launches
    x = _rand((65, 1001), dtype, "C", 3)[1:, 1:]     # rows start off 16 bytes
    y = _rand((1001, 1), dtype, "C", 4)[1:]
    with record_launches() as launches:
        r = matvec(x, y, out=_poisoned((64, 1), dtype))
    assert launches[0].kernel.endswith("_v1x1")
    _check(r, x, y, dtype)
    w = _rand((1001, 300), dtype, "C", 5)[:, 1:]        # columns off 16 bytes
    v = _rand((1, 1001), dtype, "C", 6)
    r = matvec(v, w, out=_poisoned((1, 299), dtype))
    _check(r, v, w, dtype)


MODES = [("data_parallel", "deterministic"), ("stream_k", "deterministic"),
         ("stream_k", "arrival"), ("stream_k", "atomic"), ("split_k", "deterministic"),
         ("hybrid", "deterministic")]


@pytest.mark.parametrize("mode,reduction", MODES)
@pytest.mark.parametrize("case", ["one long dot", "gemv rows", "vector x matrix, n-contiguous"])
def test_every_mode_and_fixup(case, mode, reduction):
    from skcontract.kernels.dot import matvec
    from skcontract.kernels.forms import form_of
    from skcontract.kernels.gemm import device_info
    from skcontract.kernels.resolve import resolve_dot
    dtype = "float32"
    xs, ys, xo, yo = CASES[case]
    x, y = _rand(xs, dtype, xo, 7), _rand(ys, dtype, yo, 8)
    form, _ = form_of(x, y)
    resolved = resolve_dot(form, dtype, device_info(0), mode=mode, reduction=reduction)
    r = matvec(x, y, resolved, out=_poisoned((x.shape[0], y.shape[1]), dtype))
    _check(r, x, y, dtype)


@pytest.mark.parametrize("reduction", ["deterministic", "arrival"])
def test_split_dots_are_bitwise_reproducible(reduction):
    import cupy
    from skcontract.kernels.dot import matvec
    from skcontract.kernels.forms import form_of
    from skcontract.kernels.gemm import device_info
    from skcontract.kernels.resolve import resolve_dot
    x, y = _rand((1, 1 << 22), "float32", "C", 9), _rand((1 << 22, 1), "float32", "C", 10)
    form, _ = form_of(x, y)
    resolved = resolve_dot(form, "float32", device_info(0), mode="stream_k",
                           reduction=reduction)
    assert resolved.schedule.num_fixup_tiles > 0
    first = matvec(x, y, resolved)
    for _ in range(9):
        assert bool(cupy.array_equal(matvec(x, y, resolved), first))


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,ij->i", [(1000, 513), (1000, 513)]),
    ("i,i->", [(1 << 20,), (1 << 20,)]),
    ("ij,j->i", [(700, 300), (300,)]),
    ("ji,j->i", [(300, 700), (300,)]),
    ("j,jk->k", [(300,), (300, 701)]),
    ("bij,bij->b", [(5, 33, 65), (5, 33, 65)]),
])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_einsum_runs_what_explain_shows(subscripts, shapes, dtype):
    import cupy
    import skcontract
    from skcontract.kernels.launch import record_launches
    ops = [_rand(s, dtype, "C", i) for i, s in enumerate(shapes)]
    expr = skcontract.contract_expression(subscripts, *shapes, dtype=dtype, backend="cupy")
    step = expr.plan.steps[0]
    assert "Dot" in step.schedule.reason
    with record_launches() as launches:
        r = expr(*ops)
    assert [x.digest for x in launches] == [step.schedule.digest()]
    ref = np.einsum(subscripts, *[cupy.asnumpy(a).astype(np.float64) for a in ops])
    got = cupy.asnumpy(r).astype(np.float64)
    scale = np.sqrt(max(step.k, 1)) * np.abs(ref).max()
    assert np.abs(got - ref).max() / max(scale, 1e-30) < TOL[dtype]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("case", ["gemv rows", "gemv rows batched", "gemv, m-contiguous",
                                  "vector x matrix, n-contiguous", "vector x matrix, batched",
                                  "batched dots"])
def test_gemm_runs_matrix_vector_products_on_dot(case, dtype):
    """gemm's auto mode runs M = 1 / N = 1 products on the Dot family (as einsum does), on
    CuPy or torch operands, with alpha / beta applied; forced modes keep the GEMM tiles."""
    from skcontract.kernels.gemm import gemm
    from skcontract.kernels.launch import record_launches
    from tests.gpu.helpers import poisoned, rand, rel_error, to64
    xs, ys, xo, yo = CASES[case]
    x, y = rand(xs, dtype, xo, 11), rand(ys, dtype, yo, 12)
    shape = xs[:-1] + ys[-1:]
    c0 = rand(shape, dtype, "C", 13)
    out = poisoned(shape, x)
    out[...] = c0
    with record_launches() as launches:
        gemm(x, y, out, alpha=0.5, beta=-2.0)
    assert [launch.kernel.startswith("dot_") for launch in launches] == [True]
    ref = 0.5 * (to64(x) @ to64(y)) - 2.0 * to64(c0)
    assert rel_error(out, ref) <= TOL[dtype]
    with record_launches() as launches:
        gemm(x, y, poisoned(shape, x), mode="stream_k")
    assert not launches[0].kernel.startswith("dot_")


def test_gemm_binding_replays_the_dot_launch():
    import cupy
    from skcontract.kernels.gemm import gemm
    x, y = _rand((333, 4099), "float32", "C", 14), _rand((4099, 1), "float32", "C", 15)
    out, binding = gemm(x, y, bind=True)
    assert binding is not None
    y2 = _rand((4099, 1), "float32", "C", 16)
    again = binding(x, y2, cupy.cuda.get_current_stream())
    _check(out, x, y, "float32")
    _check(again, x, y2, "float32")
