"""Complex products planned on the real kernels (skcontract/kernels/embed.py): the real form's
identity, the choice of the embedded operand, and the plans a GPU would launch (the GPU
tests run them: tests/gpu/test_complex.py)."""
import numpy as np
import pytest

import skcontract
from skcontract.kernels import embed
from skcontract.kernels.operands import Product


def _complex(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("conj_read,conj_embedded", [(False, False), (True, False),
                                                     (False, True), (True, True)])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (16, 9, 33)])
def test_the_real_form_is_the_complex_product(m, n, k, conj_read, conj_embedded):
    """A read as real pairs times B embedded (embed.reference, the kernel's layout) is C read
    as real pairs, to float64 rounding; with either operand conjugated, the product of the
    conjugates."""
    rng = np.random.default_rng(m * n * k)
    a, b = _complex(rng, (m, k)), _complex(rng, (k, n))
    c_pairs = a.view(np.float64) @ embed.reference(b, conj_read, conj_embedded)
    want = (np.conj(a) if conj_read else a) @ (np.conj(b) if conj_embedded else b)
    np.testing.assert_allclose(c_pairs.view(np.complex128), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layouts,m,n,side,copy", [
    (("row", "row"), 300, 200, "B", False),   # A's pairs lie along k
    (("col", "col"), 300, 200, "A", False),   # B's do: C^T = B^T A^T
    (("col", "row"), 300, 200, "B", True),    # neither: A copied row-major
    (("row", "col"), 300, 200, "B", False),   # both: the smaller embedded (B, k x 200)
    (("row", "col"), 100, 200, "A", False),   # both: A (100 x k) is smaller
])
def test_the_operand_embedded(layouts, m, n, side, copy):
    form = embed.embedding(Product("complex64", 1, m, n, 64, layouts, (True, True)))
    assert (form.side, form.copy) == (side, copy)
    rows, cols = (m, n) if side == "B" else (n, m)
    assert (form.real.dtype, form.real.m, form.real.n, form.real.k) == \
        ("float32", rows, 2 * cols, 128)
    assert form.real.layouts == ("row", "col") and form.real.vec16[1]


@pytest.mark.parametrize("k,ld", [(64, 128), (3, 8), (5, 12)])
def test_the_embedded_rows_lie_on_16_bytes(k, ld):
    """B' is written K-major in rows padded to 16 bytes (4 floats), whatever k."""
    form = embed.embedding(Product("complex64", 1, 8, 8, k, ("row", "row"), (False, True)))
    assert form.ld == ld and form.real.vec16 == (False, True)


def _step(subscripts, shapes, dtype, device="h100", **kw):
    ops = [np.zeros(s, dtype) for s in shapes]
    _, plan = skcontract.contract_path(subscripts, *ops, device=device, **kw)
    return plan.steps[0]


@pytest.mark.parametrize("precision,family", [(None, "WgmmaTf32x3"), ("3xtf32", "WgmmaTf32x3"),
                                              ("tf32", "WgmmaTf32"), ("exact", "Ffma")])
def test_complex64_runs_on_float32_entries(precision, family):
    """complex64 products run as float32 ones: at float32 accuracy by default (3xTF32 on
    the H100), on the exact FFMA kernels at "exact"."""
    step = _step("ij,jk->ik", [(512, 256), (256, 384)], np.complex64, precision=precision)
    launch = step.launch
    assert launch.embed is not None and launch.entry.dtype == "float32"
    assert launch.entry.FAMILY == family
    assert launch.schedule.problem.n == 768 and launch.schedule.problem.k == 512
    assert "complex64 as float32 512 x 768 x 512 (B embedded)" in step.row()[-1]


def test_complex128_runs_on_float64_entries():
    step = _step("bij,bjk->bik", [(4, 96, 64), (4, 64, 80)], np.complex128)
    assert step.launch.entry.dtype == "float64" and step.launch.embed.real.batch == 4
    assert step.launch.product.dtype == "complex128"


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("subscripts,shapes,shape", [
    ("ij,j->i", [(300, 100), (100,)], "rows"),         # a matrix times a vector
    ("bj,bj->b", [(64, 500), (64, 500)], "rows"),      # a batch of dots
    ("j,jk->k", [(100,), (100, 300)], "cols"),         # a vector times a matrix
])
def test_memory_bound_complex_steps_run_on_the_dot_kernel(subscripts, shapes, shape, dtype):
    """A memory-bound complex product reads its operands as they lie, on the Dot kernel of
    its own dtype (the real form would read the matrix twice), merging splits through the
    workspace: no atomic adds a complex pair as one."""
    step = _step(subscripts, shapes, dtype)
    launch = step.launch
    assert launch.embed is None and launch.form.shape == shape
    assert launch.entry.FAMILY == "Dot" and launch.entry.dtype == dtype
    assert launch.spec.dtype_out == dtype and launch.spec.scalar_dtype == \
        {"complex64": "float32", "complex128": "float64"}[dtype]
    assert str(launch.schedule.protocol) != "atomic" and "Dot" in step.row()[-1]


def test_complex_dot_kernels_have_no_atomic_fixup():
    from skcontract.kernels.catalogue import DOT_CATALOGUE
    for dtype in ("complex64", "complex128"):
        assert DOT_CATALOGUE[dtype] and all("atomic" not in e.protocols()
                                            for e in DOT_CATALOGUE[dtype])
    assert all("atomic" in e.protocols() for e in DOT_CATALOGUE["float32"])


def test_complex128_dots_read_16_bytes_and_only_operands_on_them():
    """complex128 elements are read whole, by 16-byte loads: the kernel is built with its
    vector loads on, and an operand off 16 bytes (a complex view of float64 memory at an
    odd element) gets no Dot launch, so CuPy runs it."""
    from skcontract.kernels.forms import dot_form
    from skcontract.kernels.resolve import complex_dot
    from skcontract.schedule import DeviceInfo
    step = _step("ij,j->i", [(300, 100), (100,)], np.complex128)
    cfg = step.launch.spec.cfg_source()
    assert "VEC_A = true" in cfg and "VEC_B = true" in cfg and step.launch.entry.aligned_only
    form = dot_form(1, 300, 1, 100, (0, 100, 1), (0, 1, 1), (0, 1, 1))
    off = Product("complex128", 1, 300, 1, 100, ("row", "row"), (False, True), form=form,
                  form_aligned=(False, True))
    assert complex_dot(off, DeviceInfo.h200()) is None
    aligned = Product("complex128", 1, 300, 1, 100, ("row", "row"), (True, True), form=form)
    assert complex_dot(aligned, DeviceInfo.h200()).entry.dtype == "complex128"


def test_exact_is_a_precision_everywhere():
    """"exact" is accepted on every path (the NumPy backend ignores precision); an unknown
    precision stays a ValueError naming the accepted ones."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    np.testing.assert_allclose(skcontract.einsum("ij,jk->ik", a, b, precision="exact"), a @ b)
    with pytest.raises(ValueError, match="'exact'"):
        skcontract.einsum("ij,jk->ik", a, b, precision="fast")
    step = _step("ij,jk->ik", [(512, 256), (256, 384)], np.float32, precision="exact")
    assert step.launch.entry.FAMILY == "Ffma" and step.float32_precision is None


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,j->i", [(300, 200), (200,)]),        # rows: the matrix is A
    ("i,ij->j", [(300,), (300, 200)]),        # cols: the vector is A
    ("j,ij->i", [(200,), (300, 200)]),        # rows with the operands swapped
])
def test_a_dot_launch_conjugates_in_its_form_s_order(monkeypatch, subscripts, shapes):
    """A complex Dot launch reads the step's conjugated operands on its kernel's CONJ_A /
    CONJ_B build, A and B in its form's order (swapped where the form says), copying
    nothing; with DOT_READS_CONJUGATED off the step copies them, and the plan's copy
    column says so."""
    from skcontract.kernels import step_launch
    _, plan = skcontract.contract_path(subscripts, *shapes, shapes=True, dtype="complex64",
                                       conj=(0,), device="h100")
    step = plan.steps[0]
    launch = step.launch
    assert launch.form is not None and step.conj == (True, False)
    assert launch.reads_conjugated and step.conj_copies == (False, False)
    conj = launch.conjugating((True, False)).spec
    assert conj.entry.conj == ((False, True) if launch.form.swap else (True, False))
    assert conj.name.replace("_conjB", "").replace("_conjA", "") == launch.spec.name
    monkeypatch.setattr(step_launch, "DOT_READS_CONJUGATED", False)
    assert not launch.reads_conjugated and step.conj_copies == (True, False)
