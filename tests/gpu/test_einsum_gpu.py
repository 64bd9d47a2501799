"""einsum on CuPy arrays: the CuPy backend against a float64 NumPy reference."""
from __future__ import annotations

import numpy as np
import pytest

import skcontract

# (subscripts, shapes): GEMM-class steps (on our kernels) and the other kinds (CuPy ops).
CASES = [
    ("ij,jk->ik", [(300, 200), (200, 170)]),
    ("ij,jk->ik", [(2176, 256), (256, 1024)]),      # wave-quantized tile count
    ("bij,bjk->bik", [(6, 65, 129), (6, 129, 33)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 64, 40), (2, 3, 80, 40)]),
    ("ij,j->i", [(513, 257), (257,)]),
    ("i,i->", [(4099,), (4099,)]),
    ("ij,jk,kl->il", [(64, 96), (96, 32), (32, 80)]),
    ("abcd,cdef->abef", [(6, 7, 8, 9), (8, 9, 5, 4)]),
    ("ijk,jkl->il", [(16, 17, 18), (17, 18, 19)]),
    ("i,j->ij", [(33,), (45,)]),
    ("ij,ij->ij", [(31, 37), (31, 37)]),
    ("ii->i", [(77, 77)]),
    ("...ij,...jk->...ik", [(2, 3, 20, 30), (2, 3, 30, 10)]),
    # a batch of A's leading M labels, B broadcast (batch stride 0), and of B's N labels
    ("ijkl,jm->iklm", [(3, 24, 8, 9), (24, 40)]),
    ("jk,ijl->ikl", [(20, 30), (5, 20, 66)]),
    ("ijkl,jm,kn,lo->imno", [(4, 16, 8, 8), (16, 8), (8, 8), (8, 8)]),
]
TOL = {"float16": 3e-3, "float32": 1e-5, "float64": 1e-12, "complex64": 1e-5, "int32": 0}


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("subscripts,shapes", CASES)
def test_einsum_cupy_matches_float64_reference(subscripts, shapes, dtype):
    import cupy
    rng = np.random.default_rng(len(subscripts) + sum(map(len, shapes)))
    ops = []
    for s in shapes:
        x = rng.integers(-3, 4, size=s) if dtype == "int32" else rng.standard_normal(s)
        if dtype == "complex64":
            x = x + 1j * rng.standard_normal(s)
        ops.append(x.astype(dtype))
    got = skcontract.einsum(subscripts, *[cupy.asarray(o) for o in ops])
    assert isinstance(got, cupy.ndarray)
    want_dtype = np.einsum(subscripts, *ops).dtype
    assert got.dtype == want_dtype
    ref = np.einsum(subscripts, *[o.astype(np.complex128 if dtype == "complex64"
                                           else np.float64) for o in ops])
    got = cupy.asnumpy(got).astype(ref.dtype)
    if TOL[dtype] == 0:
        assert np.array_equal(got, ref)
    else:
        err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300)
        assert err <= TOL[dtype], (subscripts, dtype, err)


def test_contract_expression_on_gpu_reuses_the_plan():
    import cupy
    expr = skcontract.contract_expression("bij,bjk->bik", (4, 96, 64), (4, 64, 80),
                                          backend="cupy")
    rng = np.random.default_rng(1)
    for _ in range(3):
        a = rng.standard_normal((4, 96, 64)).astype(np.float32)
        b = rng.standard_normal((4, 64, 80)).astype(np.float32)
        out = cupy.full((4, 96, 80), cupy.nan, dtype=cupy.float32)
        r = expr(cupy.asarray(a), cupy.asarray(b), out=out)
        assert r is out
        np.testing.assert_allclose(cupy.asnumpy(out), a.astype(np.float64) @ b, rtol=1e-4,
                                   atol=1e-4)


def test_numpy_inputs_stay_on_the_cpu_unless_asked():
    import cupy
    a = np.random.default_rng(2).standard_normal((40, 30))
    assert isinstance(skcontract.einsum("ij,jk->ik", a, a.T), np.ndarray)
    got = skcontract.einsum("ij,jk->ik", cupy.asarray(a), cupy.asarray(a.T), backend="cupy")
    np.testing.assert_allclose(cupy.asnumpy(got), a @ a.T, rtol=1e-12)


def test_demo_runs_on_the_gpu():
    from skcontract.demo import run_demo
    assert run_demo("cupy") == 0


def test_float16_sums_accumulate_in_float32_on_the_gpu():
    import cupy
    ones = cupy.ones(5000, dtype=cupy.float16)
    assert float(skcontract.einsum("i->", ones)) == 5000.0
    assert float(skcontract.einsum("i,i->", ones, ones)) == 5000.0


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("subscripts,shapes", [
    (",ab,a->", [(), (2, 3), (2,)]), ("aab,aab->", [(2, 2, 1), (2, 2, 2)]),
    ("a,,aab,->", [(2,), (), (2, 2, 3), ()]), (",b,acb->", [(), (3,), (2, 3, 3)]),
    ("ab,a->", [(40, 70), (40,)]), ("ab->a", [(9, 300)])])
def test_integer_sums_stay_in_their_dtype(subscripts, shapes, dtype):
    """Integer sums wrap in the operands' width, as numpy.einsum's do, and hand the next
    step (an int8 product on the tensor cores) operands of one dtype: a sum widened to
    int64 beside an int8 operand was read as int8 bytes, a wrong result."""
    import cupy
    rng = np.random.default_rng(5)
    ops = [rng.integers(-100, 100, s).astype(dtype) for s in shapes]
    for optimize in (False, True):
        got = skcontract.einsum(subscripts, *[cupy.asarray(o) for o in ops], optimize=optimize)
        ref = np.einsum(subscripts, *ops)
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(cupy.asnumpy(got), ref)


def test_a_launch_refuses_operands_of_two_dtypes():
    import cupy
    from skcontract.kernels.bound import run_step
    a = cupy.ones((64, 64), cupy.int8)
    _, plan = skcontract.contract_path("ij,jk->ik", a, a, device="gpu")
    launch = plan.steps[0].launch
    with pytest.raises(TypeError, match="dtypes int8 and int64"):
        run_step(launch, a, a.astype(cupy.int64))


@pytest.mark.parametrize("shapes", [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0)),
                                    ((2, 0, 5), (2, 5, 3))])
def test_zero_size_operands(shapes):
    """Empty operands give numpy's result (zeros or an empty array), no launch."""
    import cupy
    sa, sb = shapes
    sub = "bij,bjk->bik" if len(sa) == 3 else "ij,jk->ik"
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    got = skcontract.einsum(sub, cupy.asarray(a), cupy.asarray(b))
    want = np.einsum(sub, a, b)
    assert got.shape == want.shape and np.array_equal(cupy.asnumpy(got), want)
    from skcontract.kernels.gemm import gemm
    if len(sa) == 2:
        out = gemm(cupy.asarray(a), cupy.asarray(b))
        assert np.array_equal(cupy.asnumpy(out), want)


def test_a_step_beyond_the_kernels_index_runs_on_cupy(monkeypatch):
    """A product whose dimension or tile walk passes the kernels' 32-bit index runs on
    cupy.matmul: the planner refuses it (TableOverflow), the plan says CuPy runs it, and
    the backend runs it so instead of raising."""
    import cupy
    from skcontract.kernels import resolve
    from skcontract.schedule.table import TableOverflow

    def refuse(*args, **kwargs):
        raise TableOverflow("beyond the kernels' index")

    monkeypatch.setattr(resolve, "resolve_product", refuse)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((23, 137)), rng.standard_normal((137, 31))
    expr = skcontract.contract_expression("ij,jk->ik", a.shape, b.shape, dtype="float32",
                                          backend="cupy")
    assert expr.plan.steps[0].launch is None and "CuPy runs it" in repr(expr)
    got = expr(cupy.asarray(a, "float32"), cupy.asarray(b, "float32"))
    ref = a @ b
    assert np.linalg.norm(cupy.asnumpy(got) - ref) <= 1e-5 * np.linalg.norm(ref)


@pytest.mark.parametrize("subscripts,shape,dtype,order", [
    ("ij->j", (4096, 1000), "float16", "C"),      # column sums: the Dot cols kernel
    ("ij->i", (1000, 4096), "float32", "C"),      # row sums: the Dot rows kernel
    ("abc->c", (16, 64, 300), "float64", "C"),
    ("abc->", (16, 64, 300), "float32", "C"),     # everything summed
    ("ij->j", (4096, 1000), "float16", "F"),      # not as planned: CuPy's sum
])
def test_sums_run_on_the_dot_kernel(subscripts, shape, dtype, order):
    import cupy

    from skcontract.kernels.launch import record_launches
    x = cupy.random.RandomState(5).standard_normal(shape, dtype=cupy.float32).astype(dtype)
    if order == "F":
        x = cupy.asfortranarray(x)
    want = np.einsum(subscripts, cupy.asnumpy(x).astype(np.float64))
    for _ in range(2):
        with record_launches() as launches:
            got = skcontract.einsum(subscripts, x)
        assert got.dtype == x.dtype and got.shape == want.shape
        tol = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[dtype]
        err = np.abs(cupy.asnumpy(got).astype(np.float64) - want).max() / np.abs(want).max()
        assert err <= tol, err
        assert [r.kernel.startswith("dot_") for r in launches] == ([True] if order == "C"
                                                                  else [])


def test_einsum_in_a_thread_new_to_cuda():
    # a thread that has not called the CUDA runtime has no current context: a warm call's
    # first CUDA call there may be the launch itself (the output and the fixup pool come
    # from caches; a direct kernel's through CuPy), a cold one's a module load or an
    # occupancy query (jit's memo cleared)
    import threading

    import cupy

    from skcontract.kernels import jit

    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in [(256, 384), (384, 320)])
    x, y = cupy.asarray(a), cupy.asarray(b)
    p, q = (rng.standard_normal((512, 8, 8)).astype(np.float32) for _ in range(2))
    pd, qd = cupy.asarray(p), cupy.asarray(q)
    skcontract.einsum("ij,jk->ik", x, y)
    skcontract.einsum("bij,bjk->bik", pd, qd)  # the small-batched direct kernel
    cupy.cuda.Device().synchronize()
    found = {}

    def run(key, fn):
        def body():
            try:
                found[key] = cupy.asnumpy(fn())
            except Exception as e:  # noqa: BLE001 - the test reports it below
                found[key] = e
        thread = threading.Thread(target=body)
        thread.start()
        thread.join()
        assert not isinstance(found[key], Exception), found[key]

    run("warm", lambda: skcontract.einsum("ij,jk->ik", x, y))
    run("direct", lambda: skcontract.einsum("bij,bjk->bik", pd, qd))
    memo = dict(jit._MEMO)
    jit._MEMO.clear()
    try:
        run("cold", lambda: skcontract.einsum("ij,jk->ik", x[:200], y[:, :288]))
    finally:
        jit._MEMO.update(memo)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for key, want in (("warm", ref), ("cold", ref[:200, :288])):
        np.testing.assert_allclose(found[key], want, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    want = np.matmul(p.astype(np.float64), q.astype(np.float64))
    np.testing.assert_allclose(found["direct"], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
