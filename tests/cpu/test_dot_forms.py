"""Memory-bound products: which have a Dot form, how it maps onto the kernel's arguments,
and how plans resolve them to the Dot entries (CPU only)."""
import numpy as np
import pytest

from skcontract.contract import contract_path
from skcontract.kernels import catalogue
from skcontract.kernels.forms import form_of
from skcontract.kernels.forms import DotForm, dot_form
from skcontract.kernels.resolve import resolve_dot
from skcontract.schedule import DeviceInfo

H200 = DeviceInfo.h200()


def _emulate(form: DotForm, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Run a form the way sk_dot.cuh reads memory (flat buffers, element strides) and
    return the outputs in (batch, outputs) order."""
    a, b = (y, x) if form.swap else (x, y)
    fa, fb = a.ravel(order="K"), b.ravel(order="K")
    assert a.flags.c_contiguous or a.flags.f_contiguous
    out = np.zeros((form.batch, form.outputs))
    for bi in range(form.batch):
        for r in range(form.outputs):
            if form.shape == "rows":
                xs = fa[bi * form.sa + r * form.lda + np.arange(form.k)]
                ys = fb[bi * form.sb + r * form.ldb + np.arange(form.k)]
            else:
                xs = fa[bi * form.sa + form.lda * np.arange(form.k)]
                ys = fb[bi * form.sb + form.ldb * np.arange(form.k) + r]
            out[bi, r] = xs @ ys
    return out


CASES = [
    ((6, 1, 5), (6, 5, 1), "C", "C", "rows"),     # batched dots
    ((7, 5), (5, 1), "C", "C", "rows"),           # matrix-vector
    ((1, 5), (5, 7), "C", "F", "rows"),           # vector-matrix, k contiguous
    ((7, 5), (5, 1), "F", "C", "cols"),           # matrix-vector, m contiguous
    ((1, 5), (5, 7), "C", "C", "cols"),           # vector-matrix, n contiguous
    ((3, 1, 5), (3, 5, 7), "C", "C", "cols"),     # batched vector-matrix
]


@pytest.mark.parametrize("xs,ys,xo,yo,shape", CASES)
def test_forms_address_the_same_elements_as_the_product(xs, ys, xo, yo, shape):
    rng = np.random.default_rng(0)
    x = np.asarray(rng.standard_normal(xs), order=xo)
    y = np.asarray(rng.standard_normal(ys), order=yo)
    if yo == "F" and y.ndim == 2:
        y = np.asfortranarray(y)
    form, out_shape = form_of(x, y)
    assert form.shape == shape and out_shape == np.matmul(x, y).shape
    ref = np.matmul(x, y).reshape(form.batch, form.outputs)
    np.testing.assert_allclose(_emulate(form, x, y), ref, rtol=1e-12)


def test_products_without_a_form():
    # M and N both > 1: compute-bound, a GEMM kernel's
    assert dot_form(1, 8, 8, 64, (0, 64, 1), (0, 8, 1), (0, 8, 1)) is None
    # neither operand contiguous along k, nor the matrix along its outputs
    assert dot_form(1, 7, 1, 5, (0, 10, 2), (0, 1, 1), (0, 1, 1)) is None
    # negative strides
    assert dot_form(1, 7, 1, 5, (0, 5, -1), (0, 1, 1), (0, 1, 1)) is None
    # a reduction too long for the kernel's 32-bit positions
    k = 2**31 - 1
    assert dot_form(1, 1, 1, k, (0, k, 1), (0, 1, 1), (0, 1, 1)) is None


@pytest.mark.parametrize("subscripts,shapes,shape,tile_rows", [
    ("ij,ij->i", [(8192, 8192)] * 2, "rows", 8),
    ("i,i->", [(1 << 24,)] * 2, "rows", 1),
    ("ij,j->i", [(8192, 8192), (8192,)], "rows", 8),
    ("ji,j->i", [(8192, 8192), (8192,)], "cols", 1),
    ("j,jk->k", [(8192,), (8192, 8192)], "cols", 1),
])
def test_memory_bound_steps_plan_on_the_dot_entries(subscripts, shapes, shape, tile_rows):
    _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=np.float32, device="h200")
    (step,) = plan.steps
    s = step.schedule
    assert f"Dot {shape} kernel" in s.reason
    assert s.tile in {b.tile for b in catalogue.dot_entries("float32", shape)}
    assert s.tile[0] == tile_rows
    # the one long dot splits over k across the GPU, and the fixup is reproducible
    if subscripts == "i,i->":
        assert s.grid > H200.sms and str(s.reduction) != "atomic"
    # Dot kernels merge output sums: the last arrival sums them, no shared sum, no chain
    assert not s.shared_sum
    if s.mode != "data_parallel":
        assert str(s.reduction) == "arrival"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_long_dot_splits_over_every_resident_cta(dtype):
    """The one-row tile's k-iteration is one sweep of its warps, so a 16M-element dot has
    enough k-iterations (MIN_ITERS_PER_SPLIT a split) for a split on (nearly) every resident
    CTA, each split a partial of one output."""
    rows1 = catalogue.dot_entries(dtype, "rows")[1]
    assert rows1.bm == 1
    assert rows1.bk == catalogue.dot.DOT_WARPS * 32 * rows1.per_lane * catalogue.dot.DOT_ROW_SWEEPS
    n = 1 << 24
    r = resolve_dot(dot_form(1, 1, 1, n, (0, n, 1), (0, 1, 1), (0, 1, 1)), dtype, H200)
    assert r.schedule.grid >= 0.9 * rows1.ctas_per_sm * H200.sms
    assert r.entry.slot_elems(None) == 1  # a split's partial: the tile's one output sum
    cols = catalogue.dot_entries(dtype, "cols")[0]
    assert cols.slot_elems(None) == cols.bn


def test_explicit_dot_protocols_are_kept():
    """auto trades the deterministic chain for the (also reproducible) arrival merge; an
    explicit mode runs the protocol asked for."""
    n = 1 << 20
    form = dot_form(1, 1, 1, n, (0, n, 1), (0, 1, 1), (0, 1, 1))
    chain = resolve_dot(form, "float32", H200, mode="stream_k", reduction="deterministic")
    assert str(chain.schedule.reduction) == "deterministic"
    auto = resolve_dot(form, "float32", H200, reduction="deterministic")
    assert str(auto.schedule.reduction) == "arrival"


def test_gemms_stay_on_the_gemm_entries():
    _, plan = contract_path("ij,jk->ik", (512, 512), (512, 512), shapes=True,
                            dtype=np.float32, device="h200")
    assert "Dot" not in plan.steps[0].schedule.reason
    _, plan = contract_path("ij,j->i", (64, 64), (64,), shapes=True, dtype=np.int8,
                            device="h200")
    assert "Dot" not in plan.steps[0].schedule.reason  # no int8 Dot kernel


def test_dot_efficiency_prices_the_bytes_read():
    rows8, rows1, cols = catalogue.DOT_CATALOGUE["float32"]
    form = dot_form(1, 1, 1, 1 << 24, (0, 1 << 24, 1), (0, 1, 1), (0, 1, 1))
    r = resolve_dot(form, "float32", H200, mode="data_parallel")
    # one CTA reads 128 MiB alone: the model's time is at least that at one SM's bandwidth
    per_sm = catalogue.calibration.COPY_BANDWIDTH_BYTES_PER_S / H200.sms
    assert r.schedule.predicted_time_us > 0.9 * (2 * 4 * (1 << 24)) / per_sm * 1e6
    assert rows8.bytes_per_iteration() == 2 * 8 * 512 * 4
    assert cols.bytes_per_iteration() == 128 * 64 * 4
    # the same bytes cost the same model time whatever the tile's shape
    per_byte = [b.efficiency * b.bm * b.bn * b.bk / b.bytes_per_iteration()
                for b in (rows8, rows1, cols)]
    assert max(per_byte) == pytest.approx(min(per_byte))
