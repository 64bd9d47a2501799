"""Complex contractions on the real kernels (skcontract/kernels/embed.py): the embedding kernel
against its NumPy reference, and einsum's complex64 / complex128 products against a complex128
(NumPy) reference, with errors no larger than cuBLAS's (CuPy's matmul) on the same operands."""
import numpy as np
import pytest

import skcontract
from skcontract.kernels import embed
from skcontract.kernels.launch import record_launches

cupy = pytest.importorskip("cupy")

ERROR_SLACK = 2.0
"""Our error may be this multiple of cuBLAS's on the same operands (both tiny)."""
ERROR_FLOOR = {"complex64": 1e-6, "complex128": 1e-14}
"""An error below this passes whatever cuBLAS's."""


def crand(shape, dtype, seed, layout="C"):
    """Random complex operand (NumPy, for the reference) and its GPU copy laid out as
    ``layout``: "C", "F" (matrices column-major), "strided" (every other element),
    "broadcast" (a batch repeating one matrix)."""
    rng = np.random.default_rng(seed)
    if layout == "broadcast":
        one = (rng.standard_normal(shape[1:]) + 1j * rng.standard_normal(shape[1:]))
        host = np.broadcast_to(one.astype(dtype), shape)
        return host, cupy.broadcast_to(cupy.asarray(host[0]), shape)
    host = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    dev = cupy.asarray(host)
    if layout == "F":
        dev = cupy.ascontiguousarray(dev.swapaxes(-1, -2)).swapaxes(-1, -2)
    elif layout == "strided":
        big = cupy.zeros(tuple(2 * s for s in shape), dtype)
        big[(slice(None, None, 2),) * len(shape)] = dev
        dev = big[(slice(None, None, 2),) * len(shape)]
    return host, dev


def rel_err(got, ref) -> float:
    got = cupy.asnumpy(got).astype(np.complex128)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape,layout", [((5, 7), "C"), ((64, 96), "C"), ((33, 70), "F"),
                                          ((40, 17), "strided"), ((3, 20, 9), "C"),
                                          ((4, 30, 50), "broadcast")])
@pytest.mark.parametrize("conj", [(False, False), (True, False), (False, True), (True, True)])
def test_the_embedding_kernel_writes_the_reference(dtype, shape, layout, conj):
    host, dev = crand(shape, dtype, 1, layout)
    ld = embed.embedded_ld(shape[-2], dtype)
    got = cupy.asnumpy(embed.embed(dev, ld, *conj))
    mats = host if host.ndim == 3 else host[None]
    want = np.stack([embed.reference(m, *conj) for m in mats])
    np.testing.assert_array_equal(got.reshape(want.shape), want)


SHAPES = [("ij,jk->ik", [(300, 200), (200, 100)]), ("ij,jk->ik", [(128, 128), (128, 128)]),
          ("ij,jk->ik", [(77, 33), (33, 51)]),          # odd k: A's rows off 16 bytes
          ("bij,bjk->bik", [(6, 40, 64), (6, 64, 90)]), ("bij,jk->bik", [(5, 30, 64), (64, 20)]),
          ("ij,jk,kl->il", [(64, 256), (256, 48), (48, 96)]),
          ("abc,cbd->ad", [(20, 8, 30), (30, 8, 24)])]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layouts", [("C", "C"), ("F", "F"), ("F", "C"), ("C", "strided")])
@pytest.mark.parametrize("subscripts,shapes", SHAPES)
def test_complex_einsum_matches_numpy(subscripts, shapes, layouts, dtype):
    """Every layout pair (both embedding sides and the copy of A), batches, broadcasts and
    odd sizes, against a complex128 reference; the error no larger than cuBLAS's."""
    ops = [crand(s, dtype, i, lay) for i, (s, lay) in
           enumerate(zip(shapes, layouts + layouts[-1:]))]
    ref = np.einsum(subscripts, *[h.astype(np.complex128) for h, _ in ops])
    with record_launches() as launched:
        got = skcontract.einsum(subscripts, *[d for _, d in ops])
    assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
    assert launched, "a complex product ran on CuPy"
    theirs = cupy.einsum(subscripts, *[d for _, d in ops])
    assert rel_err(got, ref) <= max(ERROR_SLACK * rel_err(theirs, ref), ERROR_FLOOR[dtype])


@pytest.mark.parametrize("precision,family", [(None, "wgmmatf32x3"), ("exact", "ffma")])
def test_complex64_precisions(precision, family):
    """complex64 at float32 accuracy on 3xTF32 by default, exact FFMA at "exact"; both
    within cuBLAS's CGEMM error, on data of a wide exponent range too."""
    rng = np.random.default_rng(3)
    scale = np.exp2(rng.integers(-20, 20, (256, 1)))
    a = ((rng.standard_normal((256, 512)) + 1j * rng.standard_normal((256, 512))) * scale)
    b = rng.standard_normal((512, 192)) + 1j * rng.standard_normal((512, 192))
    da, db = cupy.asarray(a.astype(np.complex64)), cupy.asarray(b.astype(np.complex64))
    ref = a.astype(np.complex64).astype(np.complex128) @ b.astype(np.complex64)
    with record_launches() as launched:
        got = skcontract.einsum("ij,jk->ik", da, db, precision=precision)
    assert launched[-1].kernel.startswith(family), launched
    cublas = rel_err(cupy.matmul(da, db), ref)
    assert rel_err(got, ref) <= max(ERROR_SLACK * cublas, ERROR_FLOOR["complex64"])


def test_complex_expression_replays_stay_right():
    """A contract expression run three times on new operands (the embedding runs every
    call: nothing of the first call's operands is kept)."""
    expr = skcontract.contract_expression("ij,jk->ik", (96, 64), (64, 80), dtype=np.complex64)
    for seed in range(3):
        (ha, da), (hb, db) = crand((96, 64), "complex64", seed), \
            crand((64, 80), "complex64", seed + 10)
        got = expr(da, db)
        assert rel_err(got, ha.astype(np.complex128) @ hb) <= 1e-5


DOT_SHAPES = [("ij,j->i", [(333, 4099), (4099,)]),          # a matrix times a vector
              ("bij,bj->bi", [(3, 130, 515), (3, 515)]),     # batched
              ("bj,bj->b", [(37, 1000), (37, 1000)]),        # a batch of dots
              ("j,j->", [(1 << 20,), (1 << 20,)]),           # one long dot, split over CTAs
              ("j,jk->k", [(3001,), (3001, 1029)]),          # a vector times a matrix
              ("i,ij->j", [(7,), (7, 5)])]                   # tiny, odd
POISON_BYTES = 1 << 26
"""Bytes of NaN left in the memory pool's free blocks before a call (its outputs are
allocated there: an element the kernel does not write reads as NaN)."""


def _poison_pool():
    junk = cupy.full(POISON_BYTES // 4, np.nan, np.float32)
    del junk


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layout", ["C", "strided"])
@pytest.mark.parametrize("subscripts,shapes", DOT_SHAPES)
def test_memory_bound_complex_products_run_on_the_dot_kernel(subscripts, shapes, layout,
                                                                dtype):
    """Matrix-vector products and dots of complex operands on the Dot kernel (operands read
    as they lie; strided ones too, as the plan copies or reads them), against a complex128
    reference, the error no larger than CuPy's; the arrival fixup's sum is the same bits on
    a second call."""
    ops = [crand(s, dtype, i, layout) for i, s in enumerate(shapes)]
    ref = np.einsum(subscripts, *[h.astype(np.complex128) for h, _ in ops])
    _poison_pool()
    with record_launches() as launched:
        got = skcontract.einsum(subscripts, *[d for _, d in ops])
    assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
    if layout == "C":
        assert [x.kernel.startswith(f"dot_{dtype}_") for x in launched] == [True], launched
    theirs = cupy.einsum(subscripts, *[d for _, d in ops])
    assert rel_err(got, ref) <= max(ERROR_SLACK * rel_err(theirs, ref), ERROR_FLOOR[dtype])
    again = skcontract.einsum(subscripts, *[d for _, d in ops])
    assert bool((again == got).all())


def test_complex128_off_16_bytes_runs_on_cupy():
    """A complex128 view of float64 memory starting at an odd float64 (8 bytes past 16):
    the Dot kernel reads 16-byte elements by 16-byte loads only, so the step is planned
    again for these operands and CuPy runs it, on a copy of the operand (cuBLAS refuses
    complex128 off 16 bytes), right."""
    rng = np.random.default_rng(5)
    floats = cupy.asarray(rng.standard_normal(2 * 300 * 100 + 1))
    a = floats[1:].view(cupy.complex128).reshape(300, 100)
    assert a.data.ptr % 16 == 8
    hx, x = crand((100,), "complex128", 6)
    with record_launches() as launched:
        got = skcontract.einsum("ij,j->i", a, x)
    assert not any(x.kernel.startswith("dot_complex128") for x in launched), launched
    assert rel_err(got, cupy.asnumpy(a) @ hx) <= ERROR_FLOOR["complex128"]


def _off_16(rng, shape):
    """A complex128 array of ``shape`` viewing float64 memory 8 bytes past 16, and its
    values on the host."""
    floats = cupy.asarray(rng.standard_normal(2 * int(np.prod(shape)) + 1))
    a = floats[1:].view(cupy.complex128).reshape(shape)
    assert a.data.ptr % 16 == 8
    return a, cupy.asnumpy(a)


@pytest.mark.parametrize("transposed", [False, True])
def test_complex128_off_16_bytes_through_the_real_form(transposed):
    """complex128 products of operands 8 bytes off 16, embedded (the embedding copies its
    operand first: as words, since a copy of whole misaligned elements faults) or read as
    real pairs, right; the context is still usable after (a fault would end it)."""
    rng = np.random.default_rng(9)
    a, ha = _off_16(rng, (70, 90))
    if transposed:  # B column-major (its pairs along k): the transposed product, A embedded
        bt, hbt = _off_16(rng, (50, 90))
        b, hb = bt.T, hbt.T
    else:
        b, hb = _off_16(rng, (90, 50))
    got = skcontract.einsum("ij,jk->ik", a, b)
    assert rel_err(got, ha @ hb) <= ERROR_FLOOR["complex128"]
    assert float(cupy.abs(cupy.ones(3) * 2).sum()) == 6.0


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("subscripts,shapes", [
    ("i,i->", [(70000,), (70000,)]), ("bj,bj->b", [(64, 3000), (64, 3000)]),
    ("ij,j->i", [(500, 700), (700,)]), ("j,ij->i", [(700,), (500, 700)]),
    ("i,ij->j", [(500,), (500, 700)]), ("ji,j->i", [(500, 700), (500,)]),
])
@pytest.mark.parametrize("conj", [(0,), (1,), (0, 1)])
def test_the_dot_kernel_reads_conjugated_operands(monkeypatch, subscripts, shapes, dtype,
                                                  conj):
    """A memory-bound complex step's conjugated operands are read by the Dot kernel's
    CONJ_A / CONJ_B build (in the form's order, swapped or not; DOT_READS_CONJUGATED on),
    no copy made, right against the conjugates' product (in complex128)."""
    from skcontract.kernels import step_launch
    monkeypatch.setattr(step_launch, "DOT_READS_CONJUGATED", True)
    ops = [crand(s, dtype, 20 + i) for i, s in enumerate(shapes)]
    hosts = [h.astype(np.complex128) for h, _ in ops]
    ref = np.einsum(subscripts, *[np.conj(h) if i in conj else h for i, h in enumerate(hosts)])
    with record_launches() as launched:
        got = skcontract.einsum(subscripts, *[d for _, d in ops], conj=conj)
    assert [x.kernel for x in launched if x.kernel.startswith("dot_")], launched
    assert all("_conj" in x.kernel for x in launched if x.kernel.startswith("dot_")), launched
    assert rel_err(got, ref) <= ERROR_FLOOR[dtype]
