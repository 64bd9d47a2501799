"""The engine's promises on the GPU: what a plan shows is what launches; each catalogue entry
has the occupancy it declares; fixup buffers stay clean across streams and CUDA graphs."""
from __future__ import annotations

import numpy as np
import pytest

import skcontract

from .helpers import TOL, poisoned, rand, rel_error, to64

GPU_MODES = ["auto", "data_parallel", "stream_k", "hybrid", "split_k", "aligned"]
SHAPES = [(2176, 1024, 512), (256, 256, 8192), (1, 4096, 4096), (8, 4096, 2048)]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("mode", GPU_MODES)
@pytest.mark.parametrize("reduction", ["deterministic", "arrival", "atomic"])
def test_the_schedule_shown_is_the_schedule_launched(dtype, mode, reduction):
    """For every mode: the schedule in ``explain`` and in a ContractExpression's plan is the
    one the launcher runs (kernel tile, grid and split-table digest), and the result is
    right."""
    import cupy
    from skcontract.kernels.launch import record_launches

    for m, n, k in SHAPES:
        a = rand((m, k), dtype, "C", m + k)
        b = rand((k, n), dtype, "C", n + k)
        plan = skcontract.explain("ij,jk->ik", a, b, mode=mode, reduction=reduction)
        expr = skcontract.contract_expression("ij,jk->ik", (m, k), (k, n), dtype=dtype,
                                              backend="cupy", mode=mode, reduction=reduction)
        shown = plan.steps[0].schedule
        assert shown is not None
        assert expr.plan.steps[0].schedule.digest() == shown.digest()
        assert shown.summary() in repr(expr)
        with record_launches() as launches:
            got = expr(a, b)
        cupy.cuda.runtime.deviceSynchronize()
        assert [(x.tile, x.grid, x.digest) for x in launches] == \
            [(tuple(shown.tile), shown.grid, shown.digest())], (m, n, k)
        assert rel_error(got, cupy.matmul(to64(a), to64(b))) <= TOL[dtype]


@pytest.mark.parametrize("subscripts,shapes,dtype", [
    ("bij,bjk->bik", [(6, 300, 520), (6, 520, 130)], "float32"),     # batched
    ("ij,j->i", [(4096, 1536), (1536,)], "float64"),                    # GEMV
    ("ij,kj->ik", [(300, 1001), (200, 1001)], "float64"),               # rows not vec16
    ("ij,jk->ik", [(1000, 1000), (1000, 1000)], "int8"),                # int8 -> int32 kernel
    ("abcd,cdef->abef", [(6, 7, 8, 9), (8, 9, 5, 4)], "float16"),       # folded labels
])
def test_every_step_kind_launches_what_its_plan_shows(subscripts, shapes, dtype):
    """Each GEMM-class step of a contract expression on CuPy arrays launches the schedule its
    plan step carries (digest and grid), one launch per such step."""
    import cupy
    from skcontract.kernels.launch import record_launches

    rng = np.random.default_rng(7)
    ops = [cupy.asarray((rng.integers(-3, 4, s) if dtype == "int8" else
                         rng.standard_normal(s)).astype(dtype)) for s in shapes]
    expr = skcontract.contract_expression(subscripts, *shapes, dtype=dtype, backend="cupy")
    shown = [s.schedule for s in expr.plan.steps if s.schedule is not None]
    assert shown
    with record_launches() as launches:
        got = expr(*ops)
    cupy.cuda.runtime.deviceSynchronize()
    assert [(x.grid, x.digest) for x in launches] == [(s.grid, s.digest()) for s in shown]
    want = np.einsum(subscripts, *[cupy.asnumpy(o).astype(np.float64) for o in ops])
    got = cupy.asnumpy(got).astype(np.float64)
    if dtype == "int8":  # numpy's int8 einsum wraps; compare modulo 2^8
        assert np.array_equal(got.astype(np.int64) % 256, want.astype(np.int64) % 256)
    else:
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err <= {"float16": 3e-3, "float32": 1e-5, "float64": 1e-12}[dtype]


def test_einsum_launches_the_plan_of_contract_path():
    """A plain einsum call on CuPy arrays runs what contract_path prints for them."""
    import cupy
    from skcontract.kernels.launch import record_launches

    a, b = rand((8, 300, 520), "float32", "C", 1), rand((8, 520, 130), "float32", "C", 2)
    _, plan = skcontract.contract_path("bij,bjk->bik", a, b)
    with record_launches() as launches:
        skcontract.einsum("bij,bjk->bik", a, b)
    cupy.cuda.runtime.deviceSynchronize()
    s = plan.steps[0].schedule
    assert [(x.grid, x.digest) for x in launches] == [(s.grid, s.digest())]


def test_every_entry_has_the_occupancy_it_declares():
    """Every catalogue entry offered on this GPU, in every specialisation the launcher can
    build: the compiled kernel fits at least ``ctas_per_sm`` CTAs per SM (the schedules'
    co-residency rests on it), and exactly that many for row-major 16-byte aligned operands
    under the einsum's protocol (so schedules use the GPU as planned; K-major-only entries:
    row-major A, column-major B)."""
    import cupy
    from skcontract.kernels import jit, specs

    cc = int(cupy.cuda.Device().compute_capability)
    short = []
    for spec in specs.all_specs():
        if not spec.entry.offered_on(cc):
            continue
        occ = jit.get_kernel(spec).occupancy
        if occ < spec.ctas_per_sm:
            short.append((spec.name, occ))
    assert not short, short
    for entry in {s.entry for s in specs.all_specs() if s.entry.offered_on(cc)}:
        la, lb = ("row", "row") if ("row", "row") in entry.layouts() else entry.layouts()[0]
        spec = specs.specialise(entry, protocol="deterministic", a_layout=la, b_layout=lb)
        assert jit.get_kernel(spec).occupancy == entry.ctas_per_sm, entry.name


@pytest.mark.parametrize("reduction", ["deterministic", "arrival", "atomic"])
def test_fixup_buffers_stay_clean_on_two_streams_and_in_a_graph(reduction):
    """Locks, counters and staging slots are zero after every launch: the same Stream-K
    schedule runs back to back on two streams and replays from a CUDA graph, each result
    right (a lock left set would hang or corrupt the next launch)."""
    import cupy
    from skcontract.kernels.gemm import gemm

    m, n, k = 256, 256, 8192
    a, b = rand((m, k), "float32", "C", 3), rand((k, n), "float32", "C", 4)
    ref = cupy.matmul(to64(a), to64(b))
    s1, s2 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    outs = [poisoned((m, n), a) for _ in range(4)]
    cupy.cuda.runtime.deviceSynchronize()  # operands and poison are written on the null stream
    for i, out in enumerate(outs):
        gemm(a, b, out, mode="stream_k", reduction=reduction, stream=(s1, s2)[i % 2])
    s1.synchronize()
    s2.synchronize()
    for out in outs:
        assert rel_error(out, ref) <= TOL["float32"]
    out = poisoned((m, n), a)
    cupy.cuda.runtime.deviceSynchronize()
    gemm(a, b, out, mode="stream_k", reduction=reduction, stream=s1)  # plan and buffers
    s1.synchronize()
    with s1:
        s1.begin_capture()
        gemm(a, b, out, mode="stream_k", reduction=reduction, stream=s1)
        graph = s1.end_capture()
    for _ in range(3):
        out[...] = np.nan
        cupy.cuda.runtime.deviceSynchronize()
        graph.launch(s1)
        s1.synchronize()
        assert rel_error(out, ref) <= TOL["float32"]


def test_a_schedule_for_other_operands_is_refused():
    """gemm(schedule=...) checks that the schedule is one for these operands."""
    from skcontract.kernels.gemm import gemm
    from skcontract.kernels.resolve import resolve_gemm
    from skcontract.kernels.gemm import device_info
    from skcontract.schedule import GemmProblem
    import cupy

    dev = device_info(cupy.cuda.runtime.getDevice())
    r = resolve_gemm(GemmProblem(256, 256, 512, dtype="float32"), dev)
    a, b = rand((256, 512), "float32", "C", 1), rand((512, 384), "float32", "C", 2)
    with pytest.raises(ValueError, match="schedule is for"):
        gemm(a, b, schedule=r)
    with pytest.raises(TypeError, match="takes float32"):
        gemm(a.astype("float64"), rand((512, 256), "float64", "C", 3), schedule=r)


def test_an_expression_runs_where_its_arrays_live():
    """contract_expression without a backend: CuPy arrays run on the GPU, with the schedules
    of plan_for('cupy'); NumPy arrays on the CPU."""
    import cupy
    from skcontract.kernels.launch import record_launches

    expr = skcontract.contract_expression("ij,jk->ik", (300, 520), (520, 130), dtype="float32")
    a = np.random.default_rng(3).standard_normal((300, 520)).astype(np.float32)
    b = np.random.default_rng(4).standard_normal((520, 130)).astype(np.float32)
    with record_launches() as launches:
        got = expr(cupy.asarray(a), cupy.asarray(b))
    cupy.cuda.runtime.deviceSynchronize()
    assert isinstance(got, cupy.ndarray)
    s = expr.plan_for("cupy").steps[0].schedule
    assert [(x.grid, x.digest) for x in launches] == [(s.grid, s.digest())]
    np.testing.assert_allclose(cupy.asnumpy(got), a.astype(np.float64) @ b, rtol=1e-4,
                               atol=1e-4)
    assert isinstance(expr(a, b), np.ndarray)
