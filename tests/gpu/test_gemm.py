"""GPU correctness of the Stream-K GEMM engine (skcontract.kernels.gemm).

Every dtype x layout x fixup on edge shapes, every dtype x mode x reduction, bitwise
reproducibility of the deterministic protocols, a worst-case co-residency run, beta / alpha,
column-major outputs, broadcast batches and a hand-built split table.
"""
from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
import pytest

from skcontract.kernels.launch import record_launches

from .helpers import (EDGE_SHAPES, LAYOUTS, TOL, as_bytes, poisoned, rand, rel_error,
                      schedule_gemm, to64)

DTYPES = ["float16", "bfloat16", "float32", "float64"]
MODES = ["data_parallel", "stream_k", "hybrid", "split_k", "aligned", "auto"]


def _gemm(*args, **kwargs):
    from skcontract.kernels.gemm import gemm
    return gemm(*args, **kwargs)


def _reference(a, b):
    import cupy
    return cupy.matmul(to64(a), to64(b))


def _check(dtype, batch, m, n, k, *, layout=("C", "C"), mode="stream_k",
           reduction="deterministic", out_order="C", seed=0, tile=None):
    shape_a = (batch, m, k) if batch > 1 else (m, k)
    shape_b = (batch, k, n) if batch > 1 else (k, n)
    a = rand(shape_a, dtype, layout[0], seed)
    b = rand(shape_b, dtype, layout[1], seed + 1)
    out = poisoned((batch, m, n) if batch > 1 else (m, n), a, out_order)
    _gemm(a, b, out, mode=mode, reduction=reduction, tile=tile)
    err = rel_error(out, _reference(a, b))
    assert err <= TOL[dtype], (dtype, batch, m, n, k, layout, mode, reduction, err)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fix", [("stream_k", "deterministic"), ("stream_k", "atomic"),
                                 ("stream_k", "arrival"), ("aligned", "deterministic")])
def test_layouts_fixups_edges(dtype, layout, fix):
    for batch, m, n, k in EDGE_SHAPES:
        _check(dtype, batch, m, n, k, layout=layout, mode=fix[0], reduction=fix[1])


def _entries(dtype):
    from skcontract.kernels.catalogue import entries_for
    return entries_for(dtype, cc=90)


def _tiles(dtype):
    return [b.tile for b in _entries(dtype)]


@pytest.mark.parametrize("dtype,entry", [(d, e) for d in DTYPES for e in _entries(d)],
                         ids=lambda x: getattr(x, "name", x))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_tile(dtype, entry, layout):
    """Every catalogue entry the launcher may pick, forced, on every layout and fixup; an
    entry that runs 16-byte aligned operands only refuses the others with ValueError."""
    for fix in [("stream_k", "deterministic"), ("stream_k", "atomic"), ("aligned", "deterministic"),
                ("data_parallel", "deterministic")]:
        for batch, m, n, k in [(1, 1, 300, 40), (1, 300, 1, 72), (1, 257, 383, 3000),
                               (1, 7, 1000, 2000), (3, 130, 70, 900), (1, 256, 384, 3072)]:
            try:
                _check(dtype, batch, m, n, k, layout=layout, mode=fix[0], reduction=fix[1],
                       tile=(*entry.tile, entry.ctas_per_sm, entry.CLUSTER))
            except ValueError as e:  # only for entries that need aligned operands
                assert entry.vec16_only and "kernel with tile" in str(e), e


def _pairs(dtype):
    from skcontract.kernels.catalogue import all_entries
    return [b for b in all_entries() if b.FAMILY == "WgmmaPair" and b.dtype == dtype]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cta_tile", [(128, 128), (128, 256), (64, 64), (128, 64)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cluster_pairs(dtype, cta_tile, layout):
    """The WgmmaPair entries (two CTAs a work unit, B's k-tiles shared by multicast), forced:
    a unit whose second CTA lies partly (M = 200, 104) or wholly (M = 104 of 256-row units,
    40) past the rows, B narrower than one CTA's part (N = 40, 24), K ending inside a k-tile's
    second half (936), a batch, many Stream-K splits whose fixups wait at every unit
    resident; every fixup; deterministic runs bitwise reproducible."""
    entry = next(b for b in _pairs(dtype) if (b.bm, b.bn) == cta_tile)
    tile = (*entry.tile, 1, entry.CLUSTER)
    shapes = [(1, 200, 136, 2000), (1, 104, 40, 512), (1, 40, 200, 936), (1, 40, 24, 936),
              (3, 264, 264, 640), (1, 1056, 1056, 4096), (1, 4224, 1096, 2048)]
    for mode, reduction in [("data_parallel", "deterministic"), ("stream_k", "deterministic"),
                            ("stream_k", "atomic"), ("stream_k", "arrival"),
                            ("hybrid", "arrival"), ("split_k", "deterministic")]:
        for batch, m, n, k in shapes:
            out = _check(dtype, batch, m, n, k, layout=layout, mode=mode, reduction=reduction,
                         tile=tile)
            if reduction == "deterministic" and m == 1056:
                with record_launches() as launches:
                    again = _check(dtype, batch, m, n, k, layout=layout, mode=mode,
                                   reduction=reduction, tile=tile)
                assert as_bytes(out) == as_bytes(again), (dtype, cta_tile, layout, mode)
                ran = launches[0]
                assert ran.kernel.startswith("wgmmapair") and ran.ctas == 2 * ran.grid


def test_vec16_only_entry_refuses_misaligned_operands():
    """The fp64 two-CTA entry runs 16-byte aligned operands only: forced on a misaligned
    one, gemm says so instead of running a kernel that was never checked for it."""
    entry = next(e for e in _entries("float64") if e.vec16_only)
    a = rand((256, 1001), "float64", "C", 3)   # rows of 1001 doubles: not 16-byte multiples
    b = rand((1001, 384), "float64", "C", 4)
    out = poisoned((256, 384), a)
    with pytest.raises(ValueError, match="kernel with tile"):
        _gemm(a, b, out, tile=entry.tile)
    _gemm(a, b, out)  # auto plans on the other entries
    assert rel_error(out, _reference(a, b)) <= TOL["float64"]


def test_hytis_is_refused_where_no_kernel_has_a_small_tile():
    """The float32 and float64 kernels run one tile shape per launch: HyTiS's second tile
    does not exist for them (the 16-bit Wgmma 128 x 256 entry's: test_wgmma.py)."""
    for dtype in ("float32", "float64"):
        a, b = rand((2176, 256), dtype, "C", 1), rand((256, 1024), dtype, "C", 2)
        with pytest.raises(ValueError, match="one tile shape per launch"):
            _gemm(a, b, poisoned((2176, 1024), a), mode="hytis")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reduction", ["deterministic", "atomic", "arrival"])
def test_modes(dtype, mode, reduction):
    for batch, m, n, k in [(1, 300, 500, 2048), (1, 1000, 1000, 1000), (1, 128, 128, 8192),
                           (2, 256, 384, 1536), (1, 33, 2000, 4096)]:
        _check(dtype, batch, m, n, k, mode=mode, reduction=reduction)


SUBNORMAL_SCALE = 2.0 ** -140
"""Operand A's scale in the subnormal test: products and sums of 64 of them stay below
float32's smallest normal (2^-126), where flushing to zero would make them 0."""


@pytest.mark.parametrize("mode,reduction", [("data_parallel", "deterministic"),
                                            ("stream_k", "deterministic"),
                                            ("stream_k", "arrival"), ("auto", None)])
@pytest.mark.parametrize("m,n,k", [(256, 256, 64), (8, 512, 64), (1, 700, 64)])
def test_float32_keeps_subnormals(mode, reduction, m, n, k):
    """Our kernels build with -ftz=false (CuPy's own compile flushes float32 subnormals):
    subnormal products and sums come out as numpy computes them, to a few of their ulps
    (2^-149). The atomic protocol is left out: PTX's float atomic add flushes them."""
    import cupy
    rng = np.random.default_rng(11)
    a_host = (rng.uniform(0.5, 1.0, (m, k)) * SUBNORMAL_SCALE).astype(np.float32)
    b_host = rng.uniform(0.5, 1.0, (k, n)).astype(np.float32)
    assert np.all(np.abs(a_host) < np.finfo(np.float32).tiny)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    out = poisoned((m, n), a)
    forced = {} if reduction is None else {"reduction": reduction}
    _gemm(a, b, out, mode=mode, **forced)
    ref = a_host.astype(np.float64) @ b_host.astype(np.float64)
    got = cupy.asnumpy(out).astype(np.float64)
    assert np.all(got > 0), "subnormal results flushed to zero"
    np.testing.assert_allclose(got, ref, rtol=0, atol=k * 2.0 ** -149)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_leading_dimensions(dtype):
    """Odd leading dimensions / offsets take the element-wise loader."""
    m, n, k = 190, 170, 530
    a_full = rand((m, k + 3), dtype, "C", 3)
    b_full = rand((k + 1, n + 5), dtype, "C", 4)
    a, b = a_full[:, 1:k + 1], b_full[1:, 2:n + 2]   # misaligned pointers and ld
    out = poisoned((m, n), a)
    _gemm(a, b, out, mode="stream_k")
    assert rel_error(out, _reference(a, b)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_alpha_beta_and_col_major_out(dtype):
    m, n, k = 300, 200, 1500
    a, b = rand((m, k), dtype, "C", 5), rand((k, n), dtype, "C", 6)
    for order in ("C", "F"):
        c0 = rand((m, n), dtype, order, 7)
        ref = 2.0 * _reference(a, b) + 0.5 * to64(c0)
        c = c0.clone() if hasattr(c0, "clone") else c0.copy(order=order)
        _gemm(a, b, c, alpha=2.0, beta=0.5, mode="stream_k")
        assert rel_error(c, ref) <= TOL[dtype], order
        out = poisoned((m, n), a, order)
        _gemm(a, b, out, mode="hybrid", reduction="atomic")
        assert rel_error(out, _reference(a, b)) <= TOL[dtype], order


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_batch(dtype):
    """A batch stride of 0 (one A shared by every batch entry)."""
    m, n, k, batch = 100, 150, 2000, 4
    a = rand((m, k), dtype, "C", 8)
    b = rand((batch, k, n), dtype, "C", 9)
    out = poisoned((batch, m, n), b)
    _gemm(a, b, out, mode="stream_k")
    import cupy
    ref = cupy.matmul(to64(a)[None], to64(b))
    assert rel_error(out, ref) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["stream_k", "hybrid", "aligned", "split_k"])
def test_deterministic_bitwise(dtype, mode):
    m, n, k = 700, 600, 6000
    a, b = rand((m, k), dtype, "C", 10), rand((k, n), dtype, "C", 11)
    outs = []
    for _ in range(10):
        out = poisoned((m, n), a)
        _gemm(a, b, out, mode=mode, reduction="deterministic")
        outs.append(as_bytes(out))
    assert all(o == outs[0] for o in outs), "deterministic mode changed between runs"
    assert rel_error(out, _reference(a, b)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(128, 128, 20000), (1, 4096, 8192), (300, 200, 12000)])
def test_shared_sum_bitwise_reproducible(dtype, shape):
    """Arrival's shared sum (many peers per tile, CTAs spanning tiles) is right and bitwise
    the same run after run."""
    m, n, k = shape
    a, b = rand((m, k), dtype, "C", 14), rand((k, n), dtype, "C", 15)
    outs = []
    for _ in range(5):
        out = poisoned((m, n), a)
        _gemm(a, b, out, mode="stream_k", reduction="arrival")
        outs.append(as_bytes(out))
    assert all(o == outs[0] for o in outs), "shared sum changed between runs"
    assert rel_error(out, _reference(a, b)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F", "offset"])
def test_shared_sum_peers_store_their_shares(dtype, order):
    """Each peer of a shared-sum tile stores its share of the sum through the epilogue
    (fragments of other threads than its own): alpha and beta applied once per element, a
    column-major out (the transposed problem) and one whose rows start off the column pairs'
    alignment (element stores)."""
    m, n, k = 136, 72, 12000
    a, b = rand((m, k), dtype, "C", 18), rand((k, n), dtype, "C", 19)
    if order == "offset":
        out = rand((m, n + 1), dtype, "C", 20)[:, 1:]
    else:
        out = rand((m, n), dtype, order, 20)
    before = to64(out).copy()
    _gemm(a, b, out, alpha=2.0, beta=0.5, mode="stream_k", reduction="arrival")
    assert rel_error(out, 2.0 * _reference(a, b) + 0.5 * before) <= TOL[dtype]


def test_auto_leaves_a_pair_the_device_cannot_keep_resident(monkeypatch):
    """auto plans the cluster pairs for half the SMs' clusters; on a device that keeps fewer
    resident (here: the driver's count patched to one), a pair schedule whose splits wait is
    planned again without the pair, with a warning, and runs right."""
    from skcontract.kernels import bound, jit
    from skcontract.kernels import gemm as G
    monkeypatch.setattr(jit, "_MEMO", {})
    monkeypatch.setattr(jit, "max_active_clusters", lambda *args: 1)
    monkeypatch.setattr(G, "_LAUNCHES", {})
    monkeypatch.setattr(bound, "_PLANS", {})
    m, n, k = 2000, 3000, 5000  # auto: the 256 x 256 pair, hybrid, deterministic
    a, b = rand((m, k), "float16", "C", 21), rand((k, n), "float16", "C", 22)
    out = poisoned((m, n), a)
    with pytest.warns(RuntimeWarning, match="co-residency"), record_launches() as launched:
        _gemm(a, b, out)
    assert [x.kernel.startswith("wgmma_") for x in launched] == [True], launched
    assert rel_error(out, _reference(a, b)) <= TOL["float16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_auto_picks_shared_sum_for_one_tile(dtype):
    """auto with deterministic on a strong-scaling shape runs the arrival shared sum."""
    import cupy
    from skcontract.kernels import gemm as G
    m, n, k = 128, 128, 16384
    a, b = rand((m, k), dtype, "C", 16), rand((k, n), dtype, "C", 17)
    out = poisoned((m, n), a)
    _gemm(a, b, out)
    launch = next(x for key, x in G._LAUNCHES.items()
                  if (key[1].dtype, key[1].batch, key[1].m, key[1].n, key[1].k) ==
                  (dtype, 1, m, n, k))
    assert launch.schedule.reduction == "arrival" and launch.schedule.shared_sum
    assert launch.spec.protocol == "arrival"
    assert rel_error(out, _reference(a, b)) <= TOL[dtype]
    cupy.cuda.runtime.deviceSynchronize()


@pytest.mark.parametrize("dtype,index", [(d, i) for d in ["float16", "float32", "float64"]
                                         for i in range(len(_tiles(d)))])
@pytest.mark.parametrize("reduction", ["deterministic", "arrival"])
def test_worst_case_coresidency(dtype, index, reduction):
    """One tile, as many Stream-K units as can be resident, fewest iterations per split:
    the longest chain of waiting splits (deterministic), or every resident CTA waiting for
    all the others (arrival's shared sum). Must complete (and be right)."""
    import cupy
    from skcontract.kernels import jit, specs
    from skcontract.kernels.gemm import device_info
    from skcontract.schedule.heuristics import MIN_ITERS_PER_SPLIT
    entry = _entries(dtype)[index]
    kern = jit.get_kernel(specs.specialise(entry, protocol=reduction, a_layout="row",
                                           b_layout="row"))
    assert kern.occupancy >= entry.ctas_per_sm
    # a cluster entry's units are resident pairs of SMs
    dev = device_info(cupy.cuda.runtime.getDevice()).with_occupancy(entry.ctas_per_sm)
    resident = dev.with_clusters(entry.CLUSTER).resident_ctas
    m, n = entry.tile[:2]
    k = entry.bk * MIN_ITERS_PER_SPLIT * resident
    a, b = rand((m, k), dtype, "C", 12), rand((k, n), dtype, "C", 13)
    sched = schedule_gemm(m, n, k, device=dev, mode="stream_k", tiles=[entry.option()],
                          grid=resident, reduction=reduction, dtype=dtype)
    assert sched.grid == resident and len(sched.table) >= resident
    assert sched.waits
    out = poisoned((m, n), a)
    with record_launches() as ran:
        _gemm(a, b, out, schedule=sched)
    cupy.cuda.runtime.deviceSynchronize()
    assert ran[0].ctas == entry.CLUSTER * ran[0].grid  # the entry's own kernel
    assert rel_error(out, _reference(a, b)) <= 4 * TOL[dtype]


def test_hand_built_data_parallel_table():
    """The kernel walks any table: a 2-CTA DP table built here by hand."""
    from skcontract.schedule import DeviceInfo, GemmProblem, Schedule
    m, n, k = 256, 128, 96
    rows = [[0, 0, 0, 128, 128, 0, k, 3, -1, -1, 1, 0],
            [0, 128, 0, 128, 128, 0, k, 3, -1, -1, 1, 0]]
    sched = Schedule(GemmProblem(m, n, k, dtype="float16"), DeviceInfo.h200(), "data_parallel",
                     (128, 128, 32), 2, "deterministic", np.array(rows, np.int32),
                     np.array([0, 1, 2], np.int32))
    a, b = rand((m, k), "float16", "C", 14), rand((k, n), "float16", "C", 15)
    out = poisoned((m, n), a)
    _gemm(a, b, out, schedule=sched)
    assert rel_error(out, _reference(a, b)) <= TOL["float16"]


@pytest.mark.parametrize("m,n,k,layout,out_order,beta", [
    (256, 192, 320, ("C", "C"), None, 0.0),     # a GEMM into a new output
    (256, 192, 320, ("F", "C"), "F", 0.0),      # a column-major out: b^T a^T
    (256, 192, 320, ("C", "F"), "C", 0.5),      # into out, reading it
    (1, 3000, 512, ("C", "F"), None, 0.0),      # a Dot form (swapped operands)
    (4000, 1, 512, ("C", "C"), "C", 0.0),       # a Dot form, rows
])
def test_warm_calls_replay_on_new_operands(m, n, k, layout, out_order, beta):
    """A gemm() call laid out as an earlier one replays its launch (one launch, no
    planning) on the new operands' values and addresses, into the caller's out or a new one."""
    import cupy
    for seed in (0, 10, 20):  # new buffers each round, same layouts
        a = rand((m, k), "float32", layout[0], seed)
        b = rand((k, n), "float32", layout[1], seed + 1)
        out = None if out_order is None else poisoned((m, n), a, out_order)
        if beta:
            out[...] = rand((m, n), "float32", out_order, seed + 2)
        want = _reference(a, b) + (beta * out.astype(cupy.float64) if beta else 0)
        with record_launches() as launches, _cold_path_fails(warm=seed > 0):
            got = _gemm(a, b, out, beta=beta)
        assert len(launches) == 1
        assert out is None or got is out
        assert rel_error(got, want) <= TOL["float32"], (seed, rel_error(got, want))


@contextlib.contextmanager
def _cold_path_fails(warm: bool):
    """Inside, gemm()'s planning path raises when ``warm``: the call must be a replay."""
    from skcontract.kernels import gemm as module
    if not warm:
        yield
        return
    with mock.patch.object(module, "_gemm", side_effect=AssertionError("not replayed")):
        yield


def test_warm_calls_on_torch_tensors():
    """(Rows on 16 bytes: operands copied onto them are not replayed.)"""
    torch = pytest.importorskip("torch")
    for seed in (0, 1, 2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.randn((300, 200), device="cuda", generator=g, dtype=torch.float16)
        b = torch.randn((200, 128), device="cuda", generator=g, dtype=torch.float16)
        out = torch.empty((300, 128), device="cuda", dtype=torch.float16)
        with _cold_path_fails(warm=seed > 0):
            assert _gemm(a, b, out) is out
        want = a.double() @ b.double()
        assert float((out.double() - want).norm() / want.norm()) <= TOL["float16"]


def test_a_cupy_array_times_a_torch_tensor_warm():
    """A CuPy ``a`` and a CUDA torch ``b``: a torch tensor out, cold and warm (the warm
    call allocates its output from the torch operand)."""
    import cupy
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(6)
    a = cupy.asarray(np.random.default_rng(6).standard_normal((300, 256)), cupy.float16)
    b = torch.randn((256, 128), device="cuda", generator=g).to(torch.float16)
    want = cupy.asnumpy(a).astype(np.float64) @ b.double().cpu().numpy()
    for warm in (False, True):
        with _cold_path_fails(warm=warm):
            got = _gemm(a, b)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float16
        err = np.linalg.norm(got.double().cpu().numpy() - want) / np.linalg.norm(want)
        assert err <= TOL["float16"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8"])
def test_torch_tensors_in_give_a_torch_tensor_out(dtype):
    """Without out, cold and warm: a new torch tensor of the operands' output dtype (int32
    for int8), batched and broadcast too; bfloat16 needs no out on torch tensors."""
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(5)
    tdt = getattr(torch, dtype)
    for shape_a, shape_b in (((300, 256), (256, 128)), ((3, 130, 64), (1, 64, 72))):
        if dtype == "int8":  # B column-major: wgmma reads int8 K-major, with no copy
            a = torch.randint(-8, 8, shape_a, device="cuda", generator=g, dtype=tdt)
            b = torch.randint(-8, 8, shape_b[:-2] + shape_b[:-3:-1], device="cuda",
                              generator=g, dtype=tdt).transpose(-1, -2)
        else:
            a = torch.randn(shape_a, device="cuda", generator=g).to(tdt)
            b = torch.randn(shape_b, device="cuda", generator=g).to(tdt)
        want = a.double() @ b.double()
        for warm in (False, True):
            # the batched case's warm call is checked for its result, not for a replay
            with _cold_path_fails(warm=warm and len(shape_a) == 2):
                got = _gemm(a, b)
            assert isinstance(got, torch.Tensor) and got.device == a.device
            assert got.dtype == (torch.int32 if dtype == "int8" else tdt)
            assert got.shape == want.shape
            err = float((got.double() - want).norm() / want.norm())
            assert err <= TOL["bfloat16" if dtype == "bfloat16" else "float16"]


@pytest.mark.parametrize("shape_a,shape_b,orders", [
    ((300, 512), (512, 1001), ("C", "C")),      # B's rows off 16 bytes
    ((300, 197), (197, 256), ("C", "C")),       # A's rows off
    ((300, 197), (197, 1001), ("C", "F")),      # A's rows and B's columns off
    ((4, 130, 99), (4, 99, 72), ("C", "C")),    # batched, A's rows off
    ((4, 130, 96), (1, 96, 1001), ("F", "C")),  # a broadcast B, its rows off
])
def test_rows_off_16_bytes_run_on_aligned_copies(shape_a, shape_b, orders):
    """Operands whose rows miss 16 bytes, copied into padded rows where the plan says so,
    give the product: through gemm() and einsum, twice each (no replay on the copies)."""
    import cupy

    import skcontract
    from skcontract.kernels.operands import describe, product_of
    from skcontract.kernels.resolve import device_info, resolve_product
    a = rand(shape_a, "float16", orders[0], 3)
    b = rand(shape_b, "float16", orders[1], 4)
    if shape_b[0] == 1:
        b = cupy.broadcast_to(b, (shape_a[0],) + shape_b[1:])
    launch = resolve_product(product_of(describe(a), describe(b)),
                             device_info(cupy.cuda.runtime.getDevice()))
    want = _reference(a, b)
    for _ in range(2):
        with record_launches() as launches:
            got = _gemm(a, b)
        assert rel_error(got, want) <= TOL["float16"]
        if any(launch.aligned_copies):
            assert launches[-1].kernel.startswith("wgmma"), launches[-1].kernel
        got = skcontract.einsum("...ij,...jk->...ik", a, b)
        assert rel_error(got, want) <= TOL["float16"]
