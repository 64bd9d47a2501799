"""Batches of small products planned for the small-batched kernel
(skcontract/kernels/small_batched.py): which steps it takes, what the plan prints (the GPU
tests run it: tests/gpu/test_small_batched.py)."""
import numpy as np
import pytest

import skcontract
from skcontract.kernels.small_batched import (FOLD_MIN_ROWS, FOLD_ROWS, MAX_DIM, MAX_PER_CTA,
                                              MIN_BATCH, STAGE_BYTES, SmallLaunch,
                                              plan_folded, plan_small)


@pytest.fixture
def folding(monkeypatch):
    """Tall products folded (small_batched.FOLD, and the peak model with it), the paths
    made before forgotten."""
    from skcontract import contract
    from skcontract.kernels import small_batched
    from skcontract.plan import peak
    monkeypatch.setattr(small_batched, "FOLD", True)
    monkeypatch.setattr(peak, "SMALL_FOLDS", True)
    contract._PATHS.clear()
    yield
    contract._PATHS.clear()


def _step(subscripts, shapes, dtype, **kw):
    ops = [np.zeros(s, dtype) for s in shapes]
    _, plan = skcontract.contract_path(subscripts, *ops, device="h100", **kw)
    return plan, plan.steps[0]


@pytest.mark.parametrize("subscripts,shapes,dtype,mnk", [
    ("bij,bjk->bik", [(100000, 3, 3), (100000, 3, 3)], np.float32, (3, 3, 3)),
    ("bij,bjk->bik", [(8192, 16, 16), (8192, 16, 16)], np.float32, (16, 16, 16)),
    ("bij,bj->bi", [(65536, 8, 8), (65536, 8)], np.float32, (8, 1, 8)),
    ("bij,bjk->bik", [(4096, 5, 7), (4096, 7, 6)], np.float64, (5, 6, 7)),
    ("bij,bjk->bik", [(512, 32, 32), (512, 32, 32)], np.float16, (32, 32, 32))])
def test_a_batch_of_small_products_carries_the_small_launch(subscripts, shapes, dtype, mnk):
    plan, step = _step(subscripts, shapes, dtype)
    launch = step.launch
    assert isinstance(launch, SmallLaunch) and (launch.m, launch.n, launch.k) == mnk
    assert launch.batch == step.batch and launch.smem_bytes <= STAGE_BYTES
    assert launch.summary() in str(plan)


@pytest.mark.parametrize("subscripts,shapes,dtype", [
    ("bij,bjk->bik", [(2048, 64, 64), (2048, 64, 64)], np.float16),       # tiles pay
    ("bij,bjk->bik", [(MIN_BATCH - 1, 3, 3), (MIN_BATCH - 1, 3, 3)], np.float32),
    ("bij,bjk->bik", [(1000, 3, 3), (1000, 3, 3)], np.int8),              # no such kernel
    ("bij,bjk->bik", [(1000, 3, MAX_DIM + 1), (1000, MAX_DIM + 1, 3)], np.float32)])
def test_steps_the_small_kernel_does_not_take(subscripts, shapes, dtype):
    _, step = _step(subscripts, shapes, dtype)
    assert not isinstance(step.launch, SmallLaunch)


def test_float32_runs_exactly_whatever_the_precision():
    _, step = _step("bij,bjk->bik", [(1000, 3, 3), (1000, 3, 3)], np.float32,
                    precision="3xtf32")
    assert isinstance(step.launch, SmallLaunch) and step.float32_precision is None


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("mnk", [(2, 2, 2), (3, 3, 3), (8, 1, 8), (16, 16, 16), (5, 6, 7),
                                 (32, 32, 31), (32, 32, 32)])
def test_a_cta_stages_as_many_products_as_fit(dtype, mnk):
    launch = plan_small(dtype, 10000, *mnk)
    fit = max(p for p in range(1, MAX_PER_CTA + 1)
              if p == 1 or SmallLaunch(dtype, 10000, *mnk, p).smem_bytes <= STAGE_BYTES)
    assert fit - 16 < launch.per_cta <= fit   # rounded to whole 16-byte runs
    assert launch.smem_bytes <= STAGE_BYTES or launch.per_cta == 1
    assert launch.smem_bytes <= 48 * 1024   # the most a kernel takes without opting in
    item = np.dtype(dtype).itemsize
    m, n, k = mnk
    if launch.per_cta >= 16:   # every CTA's run of a dense operand starts on 16 bytes
        assert launch.per_cta * m * k * item % 16 == 0 and launch.per_cta * k * n * item % 16 == 0


def test_the_stage_pads_a_rows_to_an_odd_stride_and_b_to_16_bytes():
    # 3 products of 4 x 6 float32 A (rows of 7 elements: 84 elements, 336 bytes), B from the
    # next 16 bytes (336), 3 x 6 x 5 elements of 4 bytes
    assert SmallLaunch("float32", 1000, 4, 5, 6, 3).smem_bytes == 336 + 3 * 6 * 5 * 4
    # 1 product of 3 x 3 float16 A: 9 elements, 18 bytes, rounded to 32
    assert SmallLaunch("float16", 1000, 3, 3, 3, 1).smem_bytes == 32 + 9 * 2


@pytest.mark.parametrize("n,jb", [(16, 4), (4, 4), (32, 4), (3, 1), (6, 1), (1, 1)])
def test_a_thread_computes_four_outputs_of_a_row_where_n_allows(n, jb):
    launch = plan_small("float32", 1000, 8, n, 8)
    assert launch.row_outputs == jb
    assert launch.kernel == f"skc::small_batched<float, float, {jb}>"


def test_batches_past_32_bit_counts_are_left_to_the_gemm_kernels():
    assert plan_small("float16", 2**31 - 1, 1, 1, 1) is not None
    assert plan_small("float16", 2**31 + 5, 1, 1, 1) is None


@pytest.mark.parametrize("subscripts,shapes,dtype,rows,nk", [
    ("ij,jk->ik", [(2**22, 8), (8, 8)], np.float32, 32, (8, 8)),    # a bond-2 network step
    ("ij,jk->ik", [(8294400, 3), (3, 3)], np.float32, 32, (3, 3)),  # a 4K image's colours
    ("ij,jk->ik", [(15625 * 16, 5), (5, 7)], np.float64, 25, (7, 5)),
    ("abc,cd->abd", [(4096, 8, 32), (32, 32)], np.float16, 32, (32, 32)),
    ("ij,kj->ik", [(65536, 16), (4, 16)], np.float32, 32, (4, 16)),  # B column-major
    ("ji,jk->ik", [(8, 2**20), (8, 8)], np.float32, 32, (8, 8))])     # A column-major
def test_a_tall_product_folds_into_a_batch_of_small_ones(folding, subscripts, shapes, dtype,
                                                         rows, nk):
    """M rows of at most MAX_DIM columns and K: A's rows taken FOLD_ROWS (or the most that
    divide M) at a time, each block a product with the one B, staged once a CTA."""
    plan, step = _step(subscripts, shapes, dtype)
    launch = step.launch
    assert isinstance(launch, SmallLaunch) and launch.folded and launch.shared_b
    assert (launch.batch * launch.m, launch.m, (launch.n, launch.k)) == (step.m, rows, nk)
    assert launch.smem_bytes <= STAGE_BYTES and launch.summary() in str(plan)
    assert "rows folded, one B" in launch.summary()


@pytest.mark.parametrize("subscripts,shapes,dtype", [
    ("ij,jk->ik", [(1000003, 8), (8, 8)], np.float32),        # M prime: no rows divide it
    ("ij,jk->ik", [(2**20, 33), (33, 8)], np.float32),        # K over MAX_DIM
    ("ij,jk->ik", [(2**20, 8), (8, 64)], np.float16),         # N over MAX_DIM
    ("ij,j->i", [(2**20, 16), (16,)], np.float32),            # a Dot form: the Dot kernel
    ("ij,jk->ik", [(MIN_BATCH * FOLD_ROWS - FOLD_ROWS, 8), (8, 8)], np.float32)])  # too few
def test_tall_products_the_fold_leaves_to_the_gemm_kernels(folding, subscripts, shapes, dtype):
    _, step = _step(subscripts, shapes, dtype)
    assert not isinstance(step.launch, SmallLaunch)


def test_tall_products_stay_on_the_gemm_kernels_while_the_fold_is_off():
    _, step = _step("ij,jk->ik", [(2**22, 8), (8, 8)], np.float32)
    assert not isinstance(step.launch, SmallLaunch)
    assert plan_folded("float32", 2**22, 8, 8) is None


def test_the_fold_takes_the_most_rows_that_divide_m(folding):
    assert plan_folded("float32", 2**20, 8, 8).m == FOLD_ROWS
    assert plan_folded("float32", 27 * 5**4, 8, 8).m == 27
    assert plan_folded("float32", 7 * 5**5, 8, 8).m == 25
    assert plan_folded("float32", 11 * 13 * 17 * 19, 8, 8).m == 19
    assert plan_folded("float32", 37 * 41 * 43, 8, 8) is None   # none from 8 to 32
    assert FOLD_MIN_ROWS <= 8


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("mnk", [(3, 3, 3), (32, 8, 8), (32, 32, 32), (5, 6, 7)])
def test_one_b_is_staged_once(dtype, mnk):
    m, n, k = mnk
    item = np.dtype(dtype).itemsize
    shared, each = plan_small(dtype, 10000, *mnk, shared_b=True), plan_small(dtype, 10000, *mnk)
    assert shared.per_cta >= each.per_cta
    assert shared.smem_bytes <= STAGE_BYTES or shared.per_cta == 1
    assert shared.smem_bytes == SmallLaunch(dtype, 10000, *mnk, shared.per_cta).smem_bytes - \
        (shared.per_cta - 1) * k * n * item
    if shared.per_cta < MAX_PER_CTA:   # one more product would not fit
        assert SmallLaunch(dtype, 10000, *mnk, shared.per_cta + 16, True).smem_bytes > \
            STAGE_BYTES


def test_a_b_repeated_over_the_batch_is_staged_once():
    from skcontract.kernels.operands import Product
    from skcontract.kernels.resolve import small_launch

    def product(b_matrices):
        return Product("float32", 4096, 4, 5, 6, ("row", "row"), (True, True),
                       matrices=(4096, b_matrices))
    assert small_launch(product(1)).shared_b
    assert not small_launch(product(4096)).shared_b


def test_single_complex_products_take_the_small_kernel_where_switched_on(monkeypatch):
    """small_batched.SINGLE_COMPLEX: complex products of any batch, down to one 2 x 2
    product, on the small kernel (its complex64_t / complex128_t builds); real ones keep
    MIN_BATCH. Off, a lone complex product keeps its real form's launch."""
    from skcontract import contract
    from skcontract.kernels import small_batched
    from skcontract.kernels.step_launch import StepLaunch

    def planned():
        contract._PATHS.clear()
        return skcontract.contract_path("ij,jk->ik", (2, 2), (2, 2), shapes=True,
                                        dtype=np.complex64, device="h100")[1].steps[0].launch

    monkeypatch.setattr(small_batched, "SINGLE_COMPLEX", False)
    assert plan_small("complex64", 1, 2, 2, 2) is None
    assert isinstance(planned(), StepLaunch) and planned().embed is not None
    monkeypatch.setattr(small_batched, "SINGLE_COMPLEX", True)
    launch = plan_small("complex64", 1, 2, 2, 2)
    assert isinstance(launch, SmallLaunch) and "complex64_t" in launch.kernel
    assert "complex128_t" in plan_small("complex128", 3, MAX_DIM, MAX_DIM, MAX_DIM).kernel
    assert plan_small("float32", 1, 2, 2, 2) is None
    assert plan_small("complex64", 1, MAX_DIM + 1, 2, 2) is None
    assert isinstance(planned(), SmallLaunch)


def test_the_peak_model_counts_no_real_form_for_small_complex_products(monkeypatch):
    """With the small kernel taking complex products, the peak model's
    SMALL_COMPLEX_DTYPES goes on with it: a lone 2 x 2 complex product holds its result
    alone, where its real form holds the embedded operand too."""
    from skcontract import contract
    from skcontract.kernels import small_batched
    from skcontract.plan import peak
    from skcontract.plan.plan import executor_bytes

    def held():
        contract._PATHS.clear()
        plan = skcontract.contract_path("ij,jk->ik", (2, 2), (2, 2), shapes=True,
                                        dtype=np.complex64, device="h100")[1]
        contract._PATHS.clear()
        return executor_bytes(plan)

    monkeypatch.setattr(small_batched, "SINGLE_COMPLEX", False)
    embedded = held()
    monkeypatch.setattr(small_batched, "SINGLE_COMPLEX", True)
    monkeypatch.setattr(peak, "SMALL_COMPLEX_DTYPES", frozenset(small_batched.COMPLEX_TYPES))
    assert held() == 2 * 2 * np.dtype(np.complex64).itemsize < embedded
