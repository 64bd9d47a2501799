"""The launch a plan step carries (StepLaunch): made with the plan, shown by it, and what
the backend binds (no GPU needed to make or read one)."""
import sys

import numpy as np
import pytest

from skcontract import contract_path
from skcontract.kernels.catalogue import LAYOUT_PAIRS
from skcontract.kernels.resolve import step_operands
from skcontract.kernels.step_launch import StepLaunch
from skcontract.schedule import DeviceInfo

H200 = DeviceInfo.h200()


def _plan(subscripts, *shapes, dtype=np.float16, **kw):
    operands = [np.zeros(s, dtype) for s in shapes]
    return contract_path(subscripts, *operands, device="h200", **kw)[1]


@pytest.mark.parametrize("subscripts,shapes,dtype", [
    ("ij,jk->ik", [(512, 1024), (1024, 768)], np.float16),
    ("ij,kj->ik", [(512, 1024), (768, 1024)], np.float16),
    ("bij,bjk->bik", [(4, 256, 128), (4, 128, 64)], np.float32),
    ("ji,jk->ik", [(1000, 500), (1000, 300)], np.float64),
    ("ij,jk->ik", [(256, 256), (256, 256)], np.int8),
])
def test_a_gemm_step_carries_the_launch_of_its_schedule(subscripts, shapes, dtype):
    step = _plan(subscripts, *shapes, dtype=dtype).steps[0]
    launch = step.launch
    assert isinstance(launch, StepLaunch) and launch.form is None
    assert launch.schedule is step.schedule
    assert launch.entry.tile == tuple(step.schedule.tile)
    assert launch.spec.protocol == step.schedule.protocol
    assert launch.entry.dtype == np.dtype(dtype).name
    assert (launch.spec.a_layout, launch.spec.b_layout) in launch.entry.layouts()
    assert (launch.spec.a_layout, launch.spec.b_layout) == step_operands(step, 90)[0]
    # int8 reads K-major on Wgmma: a row-major B is copied column-major, as gemm() copies it
    assert launch.copies == ((False, True) if dtype == np.int8 else (False, False))


def test_a_memory_bound_step_carries_its_dot_form():
    step = _plan("ij,j->i", (8192, 4096), (4096,)).steps[0]
    assert step.launch.form is not None and step.launch.entry.FAMILY == "Dot"
    assert step.launch.form.shape == "rows" and step.launch.form.outputs == 8192


@pytest.mark.parametrize("precision,subscripts,copies", [
    ("tf32", "ij,jk->ik", (False, True)),
    ("tf32", "ji,jk->ik", (True, True)),
    ("3xtf32", "ij,kj->ik", (False, False)),
])
def test_the_k_major_copies_are_part_of_the_launch(precision, subscripts, copies):
    step = _plan(subscripts, (1024, 1024), (1024, 1024), dtype=np.float32,
                 precision=precision).steps[0]
    assert step.launch.copies == copies
    if any(copies):
        assert (step.launch.spec.a_layout, step.launch.spec.b_layout) == ("row", "col")


def test_the_plan_table_shows_the_kernel_that_launches():
    plan = _plan("ij,jk->ik", (512, 1024), (1024, 768))
    assert f"kernel {plan.steps[0].launch.spec.name}" in plan.table()


def test_equal_launches_share_a_key_and_the_step_shows_its_launchs_schedule():
    a = _plan("ij,jk->ik", (512, 1024), (1024, 768)).steps[0]
    b = _plan("ik,kj->ij", (512, 1024), (1024, 768)).steps[0]
    assert a.launch == b.launch and hash(a.launch) == hash(b.launch)
    other = _plan("ij,jk->ik", (512, 2048), (2048, 768)).steps[0]
    assert a.launch != other.launch
    from dataclasses import replace
    moved = replace(a, launch=other.launch)
    assert moved.schedule is other.launch.schedule and a.schedule is a.launch.schedule
    assert replace(a, launch=None).schedule is None


def test_every_layout_pair_of_a_16_bit_gemm_launches_as_planned():
    """The launch's layouts are the views' as the kernels read them, for the four
    orientations of a product's operands."""
    for sub in ("ij,jk->ik", "ij,kj->ik", "ji,jk->ik", "ji,kj->ik"):
        launch = _plan(sub, (640, 640), (640, 640)).steps[0].launch
        assert (launch.spec.a_layout, launch.spec.b_layout) in LAYOUT_PAIRS
        assert launch.spec.a_vec > 1 and launch.spec.b_vec > 1


def _operand(ptr, shape, strides, dtype="float16"):
    from skcontract.kernels.operands import Operand
    return Operand(ptr, shape, strides, dtype, 0)


def test_a_call_and_a_step_of_one_product_get_one_launch():
    """gemm()'s operands and an einsum step's views of the same product are one Product,
    planned by one function into equal launches."""
    from skcontract.kernels.operands import product_of
    from skcontract.kernels.resolve import resolve_product, step_product
    step = _plan("ij,jk->ik", (512, 1024), (1024, 768)).steps[0]
    call = product_of(_operand(4096, (512, 1024), (1024, 1)),
                      _operand(8192, (1024, 768), (768, 1)))
    assert call == step_product(step)
    assert resolve_product(call, H200) == step.launch


@pytest.mark.parametrize("a,b,why", [
    (((512, 1024), (1, 512)), ((1024, 768), (768, 1)), "col-major"),    # A transposed
    (((512, 1024), (1024, 1)), ((1024, 768), (770, 1)), "off 16 bytes"),  # B's rows off 16 B
])
def test_operands_laid_out_otherwise_are_not_the_launchs(a, b, why):
    """A launch runs the operands of its own Product only; the mismatch names both."""
    from skcontract.kernels.bound import OperandMismatch
    from skcontract.kernels.operands import product_of
    step = _plan("ij,jk->ik", (512, 1024), (1024, 768)).steps[0]
    got = product_of(_operand(0, *a), _operand(0, *b))
    assert not got.runs_as(step.launch.product)
    message = str(OperandMismatch(step.launch, got))
    assert why in message and step.launch.spec.name in message and "m=512" in message


def test_a_product_no_kernel_reads_as_it_lies_has_none():
    from skcontract.kernels.operands import product_of
    assert product_of(_operand(0, (64, 64), (128, 2)), _operand(0, (64, 64), (64, 1))) is None
    assert product_of(_operand(0, (64, 64), (-64, 1)), _operand(0, (64, 64), (64, 1))) is None


def test_a_given_schedule_for_other_operands_is_refused():
    """gemm(schedule=...)'s check, at the plan layer: a schedule whose kernel needs aligned
    operands, or one of another problem, is a ValueError naming it."""
    from skcontract.kernels.operands import Product
    from skcontract.kernels.resolve import Resolved, resolve_product
    step = _plan("ij,jk->ik", (512, 1024), (1024, 768)).steps[0]
    given = Resolved(step.schedule, step.launch.entry)
    assert step.launch.entry.vec16_only
    unaligned = Product("float16", 1, 512, 768, 1024, ("row", "row"), (False, True))
    with pytest.raises(ValueError, match="needs 16-byte aligned operands; these are "
                                         "float16 A row-major off 16 bytes"):
        resolve_product(unaligned, H200, schedule=given)
    with pytest.raises(ValueError, match="schedule is for"):
        resolve_product(Product("float16", 1, 256, 768, 1024, ("row", "row"), (True, True)),
                        H200, schedule=given)


def test_a_step_planned_again_is_recorded_with_what_ran():
    """Replans (the plan layer's hook): a step planned again for a call's operands gets the
    launch resolve_product plans for them, once, and a line naming the step, the operands
    and the kernel; the plan's options go with it, its precision stays the step's."""
    from skcontract.kernels.operands import Product
    from skcontract.kernels.resolve import resolve_product
    from skcontract.replan import Replans
    plan = _plan("ij,jk->ik", (512, 1024), (1024, 768))
    step = plan.steps[0]
    replans = Replans(plan, {"mode": "data_parallel", "precision": "tf32"}, device=H200)
    other = Product("float16", 1, 512, 768, 1024, ("col", "row"), (True, True))
    launch = replans(step, other, why="not the operands the plan assumed")
    assert replans(step, other) is launch and len(replans.ran) == 1
    assert launch == resolve_product(other, H200, mode="data_parallel")
    assert launch.schedule.mode == "data_parallel"
    line, = replans.lines()
    assert line.startswith("step 1 planned again for float16 A col-major, B row-major")
    assert launch.spec.name in line and "not the operands the plan assumed" in line


def test_a_step_no_kernel_takes_is_recorded_as_cupys():
    from skcontract.kernels.operands import Product
    from skcontract.replan import CUPY_RUNS, Replans
    plan = _plan("ij,jk->ik", (512, 1024), (1024, 768))
    replans = Replans(plan, device=H200)
    other = Product("int16", 1, 512, 768, 1024, ("row", "row"), (True, True))
    assert replans(plan.steps[0], other, why="another dtype") is None
    assert replans.lines()[0].endswith(CUPY_RUNS)


def test_launches_of_two_modes_with_one_table_are_two():
    """A launch records the mode it was planned with: split_k and stream_k schedules with the
    same split table are different launches (the bound cache keeps one for each)."""
    from dataclasses import replace
    step = _plan("ij,jk->ik", (512, 1024), (1024, 768)).steps[0]
    other = replace(step.launch, schedule=replace(step.schedule, mode="split_k"))
    assert str(step.schedule.mode) != "split_k" and other != step.launch


@pytest.mark.parametrize("subscripts,shapes,pads", [
    ("ij,jk->ik", [(512, 768), (768, 50257)], (False, True)),        # B's rows: a vocabulary
    ("bqk,bkd->bqd", [(96, 197, 197), (96, 197, 64)], (True, False)),  # A's rows: 197 tokens
    ("ij,kj->ik", [(1024, 1001), (2048, 1001)], (True, True)),       # both K-major, K odd
])
def test_rows_off_16_bytes_are_copied_onto_them_where_it_pays(subscripts, shapes, pads):
    """A 16-bit product whose operand rows miss 16 bytes runs on the Wgmma entries (which
    read rows on 16 bytes) after a copy of those operands into padded rows, where the
    copy's time and the Wgmma time undercut the portable kernel's; the plan says so."""
    step = _plan(subscripts, *shapes).steps[0]
    launch = step.launch
    assert launch.aligned_copies == pads and launch.copies == (False, False)
    assert launch.entry.FAMILY == "Wgmma" and launch.entry.vec16_only
    assert "copied into rows on 16 bytes" in launch.schedule.reason
    assert "copied into rows on 16 bytes" in str(_plan(subscripts, *shapes))


def test_aligned_rows_and_forced_tiles_are_not_copied():
    from skcontract.kernels.operands import Product
    from skcontract.kernels.resolve import resolve_product
    aligned = _plan("ij,jk->ik", (512, 768), (768, 50256)).steps[0].launch
    assert aligned.aligned_copies == (False, False)
    product = Product("float16", 1, 512, 50257, 768, ("row", "row"), (True, False))
    forced = resolve_product(product, H200, tile=(128, 128, 32))
    assert forced.aligned_copies == (False, False) and not forced.entry.vec16_only


def test_a_small_product_off_16_bytes_keeps_the_portable_kernel():
    """Where the copy costs more than it saves (a product of a few tiles with a large
    operand to copy), the operands are read as they lie."""
    from skcontract.kernels.operands import Product
    from skcontract.kernels.resolve import resolve_product
    product = Product("float16", 1, 64, 1001, 8192, ("row", "row"), (True, False))
    launch = resolve_product(product, H200)
    assert launch.aligned_copies == (False, False) and not launch.entry.vec16_only


@pytest.mark.parametrize("make", [
    lambda r: r.standard_normal((300, 197)),                            # rows of 197
    lambda r: np.asfortranarray(r.standard_normal((197, 1001))),        # columns of 197
    lambda r: r.standard_normal((4, 130, 99)),                          # a batch
    lambda r: np.broadcast_to(r.standard_normal((96, 1001)).astype(np.float16),
                              (4, 96, 1001)),                           # broadcast
    lambda r: r.standard_normal((4, 96, 130)).swapaxes(-1, -2),         # column-major batch
])
@pytest.mark.parametrize("kernel", ["declines", "copies"])
def test_aligned_copies_keep_values_and_layout_on_padded_rows(monkeypatch, make, kernel):
    """relayout.aligned's array logic, on NumPy standing in for CuPy: the same values, the
    same layout, every leading dimension and batch stride on 16 bytes (a broadcast batch
    stays one matrix); the line copy (pad_rows, a GPU kernel) stood in for by NumPy's copy
    into the padded buffer's first columns, or declining (the array library copies)."""
    monkeypatch.setitem(sys.modules, "cupy", np)
    from skcontract.kernels import relayout

    def pad_rows(x, out):
        if kernel == "declines":
            return False
        out[..., :x.shape[-1]] = x
        return True
    monkeypatch.setattr(relayout, "pad_rows", pad_rows)
    from skcontract.kernels.operands import matrix_layout
    x = make(np.random.default_rng(1)).astype(np.float16, copy=False)
    y = relayout.aligned(x)
    np.testing.assert_array_equal(y, x)
    lay = matrix_layout(x.shape[-2], x.shape[-1], x.strides[-2] // 2, x.strides[-1] // 2)
    assert matrix_layout(y.shape[-2], y.shape[-1], y.strides[-2] // 2,
                         y.strides[-1] // 2)[0] == lay[0]
    assert all(s % 16 == 0 for s in y.strides if s not in (0, 2))
    assert y.ndim < 3 or (y.strides[0] == 0) == (x.strides[0] == 0)


@pytest.mark.parametrize("subscripts,shape,dtype,form", [
    ("ij->j", (4096, 1024), np.float16, "cols"),   # summed axes lead: column sums
    ("ij->i", (1024, 4096), np.float32, "rows"),   # summed axes trail: row sums
    ("abc->c", (16, 32, 512), np.float64, "cols"),
    ("abc->a", (512, 32, 16), np.float32, "rows"),
])
def test_a_sum_runs_on_the_dot_kernel(subscripts, shape, dtype, form):
    """A UNARY step's sum over leading or trailing axes is a matrix-vector product with a
    vector of ones on the GPU: the step carries the Dot kernel's launch."""
    step = _plan(subscripts, shape, dtype=dtype).steps[0]
    assert step.kind == "UNARY" and step.launch is not None
    assert step.launch.entry.FAMILY == "Dot" and step.launch.form.shape == form
    assert step.launch.product.k == step.k and step.launch.product.m == step.m


@pytest.mark.parametrize("subscripts,shape,dtype", [
    ("ijk->j", (16, 64, 8), np.float32),   # summed axes on both sides of the kept one
    ("ii->i", (64, 64), np.float32),       # a diagonal
    ("ij->j", (64, 64), np.int32),         # no Dot kernel for the dtype
])
def test_other_unary_steps_have_no_launch(subscripts, shape, dtype):
    step = _plan(subscripts, shape, dtype=dtype).steps[0]
    assert step.launch is None


@pytest.mark.parametrize("subscripts,shape", [
    ("ij->j", (6, 5)), ("ij->i", (6, 5)), ("abc->c", (3, 4, 5)), ("abc->ab", (3, 4, 5)),
    ("abc->", (3, 4, 5)), ("abc->b", (3, 4, 5))])
def test_a_launched_sum_views_its_operand_as_the_product_it_planned(subscripts, shape):
    """The backend's side of a launched sum, on NumPy standing in for the GPU: the operand
    viewed as the (kept x summed) matrix the launch reads (a contiguous one), the sum
    reshaped to the kept axes; a non-contiguous operand, or summed axes between kept ones,
    summed by the backend's own sum."""
    from skcontract.backends.numpy_backend import OPS
    from skcontract.backends.steps import _step_fn
    calls = []

    def sum_for(step):
        def run(a):
            calls.append(a.shape)
            return a @ np.ones(a.shape[1])
        return run
    ops = OPS._replace(sum_for=sum_for)
    step = _plan(subscripts, shape, dtype=np.float32).steps[0]
    fn = _step_fn(step, ops)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = np.einsum(subscripts, x)
    np.testing.assert_allclose(fn(x), want, rtol=1e-5)
    assert len(calls) == (step.launch is not None)
    if calls:
        assert calls[0] == (step.m, step.k)
    np.testing.assert_allclose(fn(np.asfortranarray(x)), want, rtol=1e-5)
    assert len(calls) == (step.launch is not None)  # not contiguous: the backend's sum


def test_aligned_copies_of_torch_tensors():
    """bfloat16 tensors and tensors that need grad are copied by torch (CuPy takes
    neither), with the same values and layout on padded rows."""
    torch = pytest.importorskip("torch")
    from skcontract.kernels import relayout
    for t in (torch.randn(300, 197).to(torch.bfloat16),
              torch.randn(1001, 197).t().to(torch.bfloat16),        # column-major
              torch.randn(96, 1001, requires_grad=True).expand(4, 96, 1001),
              torch.randn(4, 130, 99).requires_grad_()):
        y = relayout.aligned(t)
        assert torch.equal(y, t.detach()) and not y.requires_grad
        assert all(s * y.element_size() % 16 == 0 for s in y.stride() if s not in (0, 1))
        assert (y.stride()[-1] == 1) == (t.stride()[-1] == 1)
