"""GPU correctness of ``gemm(..., precision="3xtf32")``: float32 operands at float32 accuracy
on tf32 wgmma (sm_90; each operand split into a tf32 big and small part in shared memory,
three products a k step), the exact FFMA entries elsewhere.

Accuracy is checked against a float64 reference two ways: the relative Frobenius error is
within float32's tolerance (TOL), and the largest element error is within
ACCURACY_FACTOR of exact float32's (cuBLAS's SGEMM through CuPy, and our FFMA) on the same
operands, while tf32's is far outside it (the split is really used). Every entry is forced
on more than a wave of its tiles under each fixup it runs; layouts, modes, batches, edges,
non-finite operands and the longest chain of waiting splits as for tf32 (determinism:
test_tf32_int8.py).
Outputs are poisoned first (NaN), so an unwritten element fails.
"""
from __future__ import annotations

import pytest

from skcontract.kernels.launch import record_launches
from skcontract.kernels.resolve import K_MAJOR, step_operands

from .helpers import EDGE_SHAPES, LAYOUTS, TOL, poisoned, rand, rel_error, schedule_gemm, to64

X3 = "3xtf32"
TOL_X3 = TOL["float32"]
ACCURACY_FACTOR = 2.0  # the issue's bound: 3xTF32's error within 2x of exact float32's


def _x3_family() -> str:
    """The family that runs aligned 3xTF32 products on the current device."""
    import cupy
    from skcontract.kernels.resolve import compute_capability, device_info
    cc = compute_capability(device_info(cupy.cuda.runtime.getDevice()))
    return "WgmmaTf32x3" if cc >= 90 else "Ffma"


def _require_wgmma() -> None:
    """Skip a test of the 3xTF32 entries themselves off sm_90 (the exact ones run there)."""
    if _x3_family() != "WgmmaTf32x3":
        pytest.skip("the 3xTF32 entries run on sm_90")


@pytest.fixture(autouse=True)
def _fresh_plans():
    """Each test plans its own products, so the last plan is the last call's."""
    from skcontract.kernels import gemm as g
    g.clear_plans()


def _gemm(*args, **kwargs):
    from skcontract.kernels.gemm import gemm
    return gemm(*args, **kwargs)


def _last_spec():
    from skcontract.kernels import gemm as g
    return list(g._LAUNCHES.values())[-1].spec


def max_error(out, ref) -> float:
    """The largest element error relative to the largest reference element."""
    import cupy
    o = to64(out)
    if not bool(cupy.isfinite(o).all()):
        return float("inf")
    return float(cupy.abs(o - ref).max() / cupy.abs(ref).max())


def _shapes(batch, m, n, k):
    lead = (batch,) if batch > 1 else ()
    return (*lead, m, k), (*lead, k, n), (*lead, m, n)


def _check(batch, m, n, k, *, layout=("C", "C"), out_order="C", seed=0, **kw):
    import cupy
    sa, sb, sc = _shapes(batch, m, n, k)
    a, b = rand(sa, "float32", layout[0], seed), rand(sb, "float32", layout[1], seed + 1)
    out = poisoned(sc, a, out_order)
    _gemm(a, b, out, precision=X3, **kw)
    err = rel_error(out, cupy.matmul(to64(a), to64(b)))
    assert err <= TOL_X3, (batch, m, n, k, layout, out_order, kw, err)
    return err


@pytest.mark.parametrize("shape", [(1024, 1024, 4096), (256, 384, 16384), (300, 500, 2048)])
def test_accuracy_is_float32s(shape):
    """The largest error is within ACCURACY_FACTOR of exact float32's (cuBLAS and ours);
    tf32's, on the same operands, is not."""
    import cupy
    m, n, k = shape
    a, b = rand((m, k), "float32", "C", 30), rand((k, n), "float32", "F", 31)
    ref = cupy.matmul(to64(a), to64(b))
    out = poisoned((m, n), a)
    _gemm(a, b, out, precision=X3)
    assert _last_spec().entry.FAMILY == _x3_family()
    ours = max_error(out, ref)
    cublas = max_error(cupy.matmul(a, b), ref)
    out32 = poisoned((m, n), a)
    _gemm(a, b, out32)
    ffma = max_error(out32, ref)
    out_tf32 = poisoned((m, n), a)
    _gemm(a, b, out_tf32, precision="tf32")
    tf32 = max_error(out_tf32, ref)
    exact = min(cublas, ffma)
    assert ours <= ACCURACY_FACTOR * exact, (ours, cublas, ffma)
    assert tf32 > 10 * ACCURACY_FACTOR * exact, (tf32, exact)


def test_precision_arguments():
    """precision=None is exact FFMA, "tf32" the tf32 entries, allow_tf32=True the same as
    "tf32"; an unknown precision or a conflicting pair is a ValueError; other dtypes
    ignore it."""
    import cupy
    a, b = rand((256, 512), "float32", "C", 1), rand((512, 192), "float32", "F", 2)
    for kw, family in (({}, "Ffma"), ({"precision": X3}, _x3_family()),
                       ({"allow_tf32": True}, None), ({"precision": "tf32"}, None)):
        out = poisoned((256, 192), a)
        _gemm(a, b, out, mode="stream_k", **kw)
        spec = _last_spec()
        if family is not None:
            assert spec.entry.FAMILY == family, (kw, spec.name)
        else:
            assert spec.entry.FAMILY in ("WgmmaTf32", "Tf32"), (kw, spec.name)
    with pytest.raises(ValueError, match="precision"):
        _gemm(a, b, precision="fp32x3")
    with pytest.raises(ValueError, match="allow_tf32"):
        _gemm(a, b, allow_tf32=True, precision=X3)
    h = rand((64, 64), "float16", "C", 3)
    out = _gemm(h, h, precision=X3)  # ignored: float16 runs its own entries
    assert _last_spec().entry.dtype == "float16"
    assert rel_error(out, cupy.matmul(to64(h), to64(h))) <= TOL["float16"]


def _x3_entries():
    from skcontract.kernels import catalogue
    return [b for b in catalogue.CATALOGUE[catalogue.TF32X3] if b.FAMILY == "WgmmaTf32x3"]


@pytest.mark.parametrize("entry", _x3_entries(), ids=lambda b: b.name)
def test_every_entry(entry):
    """Each 3xTF32 entry forced on few tiles of long K (Stream-K splits them over many CTAs)
    and a ragged last k-tile, under each fixup it runs, in every layout (A and B read in
    place K-major; MN-major ones, whose copy would cost more than TURN_COST_SHARE of such
    a product, turned K-major in the stages)."""
    _require_wgmma()
    m, n, k = 2 * entry.bm, 4 * entry.bn, 64 * entry.bk + 8
    for red in ("deterministic", "atomic", "arrival"):
        if red not in entry.protocols():
            continue
        for la, lb in entry.layouts():
            layout = ({"row": "C", "col": "F"}[la], {"row": "C", "col": "F"}[lb])
            _check(1, m, n, k, layout=layout, mode="stream_k", reduction=red,
                   tile=(*entry.tile, entry.ctas_per_sm))
            spec = _last_spec()
            assert spec.entry == entry, spec.name
            assert spec.entry.transposes(spec) == (layout != ("C", "F")), (layout, spec.name)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fix", [("data_parallel", "deterministic"), ("stream_k", "atomic"),
                                 ("hybrid", "deterministic"), ("split_k", "atomic"),
                                 ("aligned", "deterministic")])
def test_layouts_fixups_edges(layout, fix):
    for batch, m, n, k in EDGE_SHAPES:
        _check(batch, m, n, k, layout=layout, mode=fix[0], reduction=fix[1])


@pytest.mark.parametrize("out_order", ["C", "F"])
def test_auto_alpha_beta_broadcast(out_order):
    import cupy
    m, n, k = 300, 200, 1500
    a, b = rand((m, k), "float32", "C", 5), rand((k, n), "float32", "C", 6)
    c0 = rand((m, n), "float32", out_order, 7)
    c = c0.copy(order=out_order)
    _gemm(a, b, c, alpha=2.0, beta=0.5, precision=X3)
    assert rel_error(c, 2.0 * cupy.matmul(to64(a), to64(b)) + 0.5 * to64(c0)) <= TOL_X3
    bb = rand((4, k, n), "float32", "C", 9)
    out = poisoned((4, m, n), a)
    _gemm(a, bb, out, mode="stream_k", precision=X3)
    assert rel_error(out, cupy.matmul(to64(a)[None], to64(bb))) <= TOL_X3
    _check(1, 1000, 1000, 1000, mode="auto", out_order=out_order)


def test_unaligned_operands_are_copied_onto_16_bytes():
    """Operands off 16 bytes cannot be TMA-loaded: they are copied into rows padded to 16
    bytes and the 3xTF32 entries run them, at float32 accuracy."""
    import cupy
    _require_wgmma()
    m, n, k = 190, 170, 530
    a = rand((m, k + 3), "float32", "C", 3)[:, 1:k + 1]
    b = rand((k + 1, n + 5), "float32", "C", 4)[1:, 2:n + 2]
    out = poisoned((m, n), a)
    _gemm(a, b, out, mode="stream_k", precision=X3)
    assert _last_spec().entry.FAMILY == "WgmmaTf32x3"
    assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= TOL_X3


def test_rows_off_16_bytes_are_copied_k_major():
    """A row-major B of 1001 columns (rows off 16 bytes, which TMA cannot read) is copied
    K-major, whose rows of K floats lie on 16 bytes: the 3xTF32 entries run it, not the
    exact fallback; and a plan of the same product says so."""
    _require_wgmma()
    from skcontract import contract_path
    m, n, k = 384, 1001, 1024
    _check(1, m, n, k, mode="stream_k")
    spec = _last_spec()
    assert spec.entry.FAMILY == "WgmmaTf32x3" and not spec.entry.transposes(spec), spec.name
    a, b = rand((m, k), "float32", "C", 3), rand((k, n), "float32", "C", 4)
    _, plan = contract_path("ij,jk->ik", a, b, precision=X3)
    assert plan.steps[0].schedule.reason.endswith("B copied K-major for 3xtf32")


def test_cluster_sum_on_turned_operands():
    """The cluster protocol's aligned split on operands turned K-major in the stages."""
    _require_wgmma()
    for layout in (("C", "C"), ("F", "F")):
        _check(1, 136, 264, 4032, layout=layout, mode="aligned", reduction="cluster",
               tile=(64, 64, 32))
        spec = _last_spec()
        assert spec.protocol == "cluster" and spec.entry.transposes(spec), spec.name


@pytest.mark.parametrize("b_order", ["F", "C"])
def test_non_finite_operands_propagate(b_order):
    """Infinities and NaNs give numpy's results: an infinity in A times a finite B element
    is an infinity of their product's sign, times a tf32-exact one too (whose small part is
    0: inf x 0 in the big x small product would be NaN), inf - inf is NaN, a NaN spreads
    (one whose payload lies in the bits tf32 ignores too); every other element keeps
    float32's accuracy. B column-major is read K-major as it lies; row-major, at this shape
    (a copy dear against the product), turned K-major in the stages."""
    import cupy
    import numpy as np
    m, n, k = 256, 256, 1024
    a, b = rand((m, k), "float32", "C", 14), rand((k, n), "float32", b_order, 15)
    a[3, 100] = float("nan")
    a[5, 10] = cupy.asarray(np.uint32(0x7F800001)).view(cupy.float32)  # NaN, low payload
    a[7, 200] = float("inf")
    a[9, 300] = -float("inf")
    b[200, :64] = cupy.asarray(np.resize([1.0, -0.5, 2.0, -4.0], 64), cupy.float32)
    b[200, 64] = 0.0  # inf x 0: NaN
    b[500, 100] = float("inf")  # an infinity in B: rows 7 and 9 have two infinite products
    out = poisoned((m, n), a)
    _gemm(a, b, out, precision=X3)
    spec = _last_spec()
    assert spec.entry.FAMILY == "WgmmaTf32x3" or _x3_family() != "WgmmaTf32x3", spec.name
    if _x3_family() == "WgmmaTf32x3":
        assert spec.entry.transposes(spec) is (b_order == "C"), spec.name
    o, ref = cupy.asnumpy(out).astype(np.float64), cupy.asnumpy(cupy.matmul(to64(a), to64(b)))
    finite = np.isfinite(ref)
    assert np.isinf(ref[7, :64]).all() and np.isnan(ref[7, 64]) and np.isnan(ref[5]).all()
    assert np.array_equal(np.isnan(o), np.isnan(ref)), np.argwhere(np.isnan(o) != np.isnan(ref))
    inf = np.isinf(ref)
    assert np.array_equal(o[inf], ref[inf])
    assert np.abs(o[finite] - ref[finite]).max() <= TOL_X3 * np.abs(ref[finite]).max() * 10


def test_worst_case_coresidency():
    """The longest chain of waiting splits (one tile over every resident CTA) finishes."""
    _require_wgmma()
    import cupy
    from skcontract.kernels import jit, specs
    from skcontract.kernels.gemm import device_info
    from skcontract.schedule.heuristics import MIN_ITERS_PER_SPLIT
    entry = _x3_entries()[0]
    kern = jit.get_kernel(specs.specialise(entry, protocol="deterministic", a_layout="row",
                                           b_layout="col"))
    assert kern.occupancy >= entry.ctas_per_sm
    dev = device_info(cupy.cuda.runtime.getDevice()).with_occupancy(entry.ctas_per_sm)
    resident = dev.resident_ctas
    m, n, k = entry.bm, entry.bn, entry.bk * MIN_ITERS_PER_SPLIT * resident
    sched = schedule_gemm(m, n, k, device=dev, mode="stream_k", tile=entry.tile,
                          grid=resident, reduction="deterministic", dtype="float32")
    assert sched.grid == resident and len(sched.table) >= resident
    a, b = rand((m, k), "float32", "C", 12), rand((k, n), "float32", "F", 13)
    out = poisoned((m, n), a)
    _gemm(a, b, out, schedule=sched, precision=X3)
    cupy.cuda.runtime.deviceSynchronize()
    assert _last_spec().entry == entry
    assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= 4 * TOL_X3


EINSUM_CASES = [  # (subscripts, shapes, turned): whether the step's operands are turned
    # K-major in the stages (each of these copies would cost more than TURN_COST_SHARE of
    # its product) or read K-major as they lie
    ("ij,jk->ik", ((384, 1024), (1024, 320)), True),
    ("ij,kj->ik", ((384, 1024), (320, 1024)), False),
    ("bij,bjk->bik", ((3, 256, 512), (3, 512, 192)), True),
    ("ijk,jkl->il", ((96, 32, 64), (32, 64, 160)), True),
    ("ji,jk->ik", ((1024, 384), (1024, 320)), True),       # A and B turned
    ("jk,ijl->ikl", ((512, 96), (3, 512, 160)), True),     # a batch of B's, A broadcast
]


@pytest.mark.parametrize("case", range(len(EINSUM_CASES)))
def test_einsum_at_a_precision(case):
    """einsum(precision=) runs float32 steps on the precision's entries: "3xtf32" within
    ACCURACY_FACTOR of exact float32's largest error (our exact einsum and cuBLAS's), on
    the layouts the plan says (turned in the stages or read K-major as they lie),
    "tf32" far outside it (so tf32 really ran); the step names its precision; a warm call
    and contract_expression on CuPy arrays give the same bits."""
    import cupy
    from skcontract import contract_expression, contract_path, einsum
    sub, shapes, turned = EINSUM_CASES[case]
    a, b = rand(shapes[0], "float32", "C", 40 + case), rand(shapes[1], "float32", "C", 50)
    ref = cupy.einsum(sub, to64(a), to64(b))
    exact = min(max_error(einsum(sub, a, b), ref), max_error(cupy.einsum(sub, a, b), ref))
    with record_launches() as launched:
        ours = einsum(sub, a, b, precision=X3)
    if _x3_family() == "WgmmaTf32x3":  # the plan's layouts are the ones the launch reads
        planned = contract_path(sub, a, b, precision=X3)[1].steps[0]
        spec = planned.launch.spec
        assert [x.kernel for x in launched] == [spec.name]
        sees = step_operands(planned, 90)[0]
        assert (spec.entry.transposes(spec), sees != K_MAJOR) == (turned, turned), spec.name
    assert max_error(ours, ref) <= ACCURACY_FACTOR * exact, (sub, max_error(ours, ref), exact)
    assert bool((einsum(sub, a, b, precision=X3) == ours).all())  # warm, deterministic
    expr = contract_expression(sub, *shapes, dtype="float32", precision=X3)
    assert bool((expr(a, b) == ours).all())
    (step,) = expr.plan_for("cupy").steps
    _, plan = contract_path(sub, a, b, precision=X3)
    assert plan.steps[0].precision == step.precision == (X3 if _x3_family() != "Ffma"
                                                         else None)
    tf32 = max_error(einsum(sub, a, b, precision="tf32"), ref)
    assert tf32 > 10 * ACCURACY_FACTOR * exact, (sub, tf32, exact)


def test_einsum_at_a_precision_keeps_memory_bound_steps_exact():
    """A matrix-vector step runs on the Dot family, exactly: the same bits as without a
    precision; a float64 expression ignores it."""
    import cupy
    from skcontract import einsum
    a, x = rand((512, 768), "float32", "C", 60), rand((768,), "float32", "C", 61)
    assert bool((einsum("ij,j->i", a, x, precision=X3) == einsum("ij,j->i", a, x)).all())
    d = rand((128, 96), "float32", "C", 62).astype(cupy.float64)
    assert bool((einsum("ij,kj->ik", d, d, precision="tf32") == einsum("ij,kj->ik", d, d)).all())


def test_einsum_at_a_precision_from_other_plans_and_arrays():
    """A broadcast (stride-0) batch operand gives the bits of its dense copy; a float64-
    planned expression called with float32 CuPy arrays and torch tensors run at the
    precision too (float32's accuracy); a vector-matrix step is the exact Dot's."""
    import cupy
    import torch
    from skcontract import contract_expression, einsum
    a, b = rand((2, 256, 512), "float32", "C", 70), rand((512, 192), "float32", "C", 71)
    wide = cupy.broadcast_to(b, (2, 512, 192))  # a stride-0 batch
    want = einsum("bij,bjk->bik", a, cupy.ascontiguousarray(wide), precision=X3)
    ref = cupy.einsum("bij,jk->bik", to64(a), to64(b))
    bound = ACCURACY_FACTOR * max_error(einsum("bij,jk->bik", a, b), ref)
    assert max_error(want, ref) <= bound
    assert bool((einsum("bij,bjk->bik", a, wide, precision=X3) == want).all())
    expr = contract_expression("bij,bjk->bik", a.shape, wide.shape, precision=X3)  # float64
    assert max_error(expr(a, wide), ref) <= bound
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    got = einsum("bij,bjk->bik", ta, tb.expand(2, 512, 192), precision=X3)
    assert isinstance(got, torch.Tensor) and max_error(cupy.asarray(got), ref) <= bound
    x = rand((512,), "float32", "C", 72)
    assert bool((einsum("j,jk->k", x, b, precision=X3) == einsum("j,jk->k", x, b)).all())


def test_gemm_with_a_plain_schedule_at_a_precision():
    """A plan's plain Schedule at "3xtf32" runs the 3xTF32 entry the schedule's tile names
    on a row-major B (turned K-major in the stages), as a Resolved one does."""
    import cupy
    from skcontract import contract_path
    _require_wgmma()
    a, b = rand((384, 1024), "float32", "C", 80), rand((1024, 320), "float32", "C", 81)
    _, plan = contract_path("ij,jk->ik", a, b, precision=X3)
    out = poisoned((384, 320), a)
    _gemm(a, b, out, schedule=plan.steps[0].schedule, precision=X3)
    assert _last_spec().entry.FAMILY == "WgmmaTf32x3"
    ref = cupy.matmul(to64(a), to64(b))
    assert max_error(out, ref) <= ACCURACY_FACTOR * max_error(cupy.matmul(a, b), ref)
