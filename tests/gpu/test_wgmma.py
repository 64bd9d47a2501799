"""GPU correctness of the Wgmma family (sm_90a: TMA + wgmma, warp-specialised).

Every tile (the paired 128 x 64 entry included), both 16-bit dtypes, every operand layout,
every fixup protocol and mode, edge shapes (one row, K shorter than a k-tile, ragged
tiles), batches with broadcast operands, bitwise reproducibility, and auto's choice of the
family on a Hopper GPU.
"""
from __future__ import annotations

import pytest

from skcontract.kernels.launch import record_launches
from skcontract.kernels.resolve import device_info, resolve_gemm
from skcontract.schedule import GemmProblem
from skcontract.schedule import table as T

from .helpers import TOL, as_bytes, launch_chain, poisoned, rand, rel_error, to64

cupy = pytest.importorskip("cupy")

DTYPES = ["float16", "bfloat16"]
LAYOUTS = [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")]
# every Wgmma tile of the catalogue
TILES = [(128, 128, 64), (128, 256, 64), (64, 256, 64), (64, 128, 64), (128, 64, 64),
         (64, 64, 64)]
# (batch, m, n, k): every extent a multiple of 8 elements, so that TMA's 16-byte strides hold
SHAPES = [
    (1, 8, 64, 64),          # one ragged tile, one k-tile
    (1, 64, 128, 16),        # K shorter than a k-tile
    (1, 136, 264, 72),       # ragged in M, N and K
    (1, 1000, 1000, 1000),
    (1, 256, 512, 8192),     # few tiles, long K: Stream-K splits and shared sums
    (3, 200, 136, 520),      # batched
    (1, 64, 128, 16384),     # one tile, many peers: the 64x128 tile's shared sum goes
                             # through the ring as scratch (groups of peers)
    (1, 24, 200, 520),       # A narrower than a tile: K-major boxes of 24 rows
    (1, 264, 16, 1000),      # B narrower than a tile: K-major boxes of 16 rows
]
FIXUPS = [("stream_k", "deterministic"), ("stream_k", "atomic"), ("stream_k", "arrival"),
          ("split_k", "deterministic"), ("hybrid", "arrival"), ("data_parallel", "deterministic")]


def _on_hopper():
    return cupy.cuda.Device().compute_capability == "90"


pytestmark = pytest.mark.skipif(not _on_hopper(), reason="the Wgmma family needs sm_90a")


def _gemm(*args, **kwargs):
    from skcontract.kernels.gemm import gemm
    return gemm(*args, **kwargs)


def _run(dtype, batch, m, n, k, layout, tile, mode, reduction, out_order="C", seed=0):
    a = rand((batch, m, k) if batch > 1 else (m, k), dtype, layout[0], seed)
    b = rand((batch, k, n) if batch > 1 else (k, n), dtype, layout[1], seed + 1)
    out = poisoned((batch, m, n) if batch > 1 else (m, n), a, out_order)
    with record_launches() as launched:
        _gemm(a, b, out, mode=mode, reduction=reduction, tile=tile)
    assert [x.kernel.split("_")[0] for x in launched] == ["wgmma"], launched
    ref = cupy.matmul(to64(a), to64(b))
    return out, rel_error(out, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t[0]}x{t[1]}")
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join(l))
@pytest.mark.parametrize("fix", FIXUPS, ids=lambda f: "-".join(f))
def test_layouts_modes_fixups(dtype, tile, layout, fix):
    for batch, m, n, k in SHAPES:
        _, err = _run(dtype, batch, m, n, k, layout, tile, *fix)
        assert err <= TOL[dtype], (batch, m, n, k, err)


# products whose schedules on 128 x 64 the model gives the paired entry: Stream-K, split-K
# and hybrid with split tiles (their fixups wait at 264 CTAs) on a 4224 x 1096 x 2048;
# data-parallel on whole waves of 264 tiles; ragged in N (and K)
PAIRED_SPLIT = (1, 4224, 1096, 2048)
PAIRED_WAVES = [(1, 8448, 1000, 520), (3, 1408, 1000, 200)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join(l))
@pytest.mark.parametrize("fix", FIXUPS, ids=lambda f: "-".join(f))
def test_the_paired_128x64_entry(dtype, layout, fix):
    """The paired 128 x 64 entry (three stages, two CTAs an SM, registers traded between the
    warpgroups) runs every layout, mode and fixup where a wave of its tiles offers it."""
    mode, reduction = fix
    for batch, m, n, k in PAIRED_WAVES if mode == "data_parallel" else [PAIRED_SPLIT]:
        with record_launches() as launched:
            _, err = _run(dtype, batch, m, n, k, layout, (128, 64, 64), *fix)
        assert "_c2_" in launched[0].kernel and launched[0].mode == mode, launched[0]
        assert err <= TOL[dtype], (batch, m, n, k, err)


# products with a partial last wave of 128 x 256 tiles, which HyTiS runs as twice as many
# 128 x 128 tiles in the same launch (sk_wgmma.cuh, SMALL_BN): a full wave and its tail (162
# tiles: 60 small), ragged M, N and K (small tiles cut by the edges), batched, fewer tiles
# than SMs (every tile small), and B narrower than a small tile
HYTIS_SHAPES = [(1, 2304, 2304, 520), (1, 2200, 2312, 200), (3, 1032, 1032, 136),
                (1, 1000, 136, 264), (1, 520, 72, 64)]


def _small_rows(dtype, batch, m, n, k):
    """The small rows of the HyTiS table gemm plans for the product (on this device)."""
    s = resolve_gemm(GemmProblem(m, n, k, batch=batch, dtype=dtype), device_info(0),
                     mode="hytis").schedule
    return int(((s.table[:, T.FLAGS] & T.FLAG_SMALL) != 0).sum())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join(l))
def test_hytis_small_tiles(dtype, layout):
    """The 128 x 256 kernel runs a HyTiS table's small rows (half of B loaded, wgmma
    m64n128 on half the accumulators, half the columns stored) beside its full tiles, in
    every layout, stored by TMA."""
    for batch, m, n, k in HYTIS_SHAPES:
        assert _small_rows(dtype, batch, m, n, k) > 0
        with record_launches() as launched:
            _, err = _run(dtype, batch, m, n, k, layout, None, "hytis", "deterministic")
        ran = launched[0]
        assert ran.mode == "hytis" and ran.tile[:2] == (128, 256) and ran.tma_store, ran
        assert err <= TOL[dtype], (batch, m, n, k, err)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hytis_stored_by_the_threads(dtype):
    """Where the epilogue's threads store C (beta != 0), a small row stores its half."""
    a, b = rand((2200, 200), dtype, "C", 7), rand((200, 2312), dtype, "C", 8)
    out = rand((2200, 2312), dtype, "C", 9)
    old = to64(out).copy()
    with record_launches() as launched:
        _gemm(a, b, out, alpha=0.5, beta=-1.5, mode="hytis")
    assert launched[0].mode == "hytis" and not launched[0].tma_store, launched
    assert rel_error(out, 0.5 * cupy.matmul(to64(a), to64(b)) - 1.5 * old) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_column_major_out_and_broadcast_batch(dtype):
    _, err = _run(dtype, 1, 520, 264, 1024, ("C", "C"), TILES[0], "stream_k", "deterministic",
                  out_order="F")
    assert err <= TOL[dtype]
    a = rand((200, 512), dtype, "C", 5)          # broadcast over the batch of b
    b = rand((4, 512, 136), dtype, "C", 6)
    out = poisoned((4, 200, 136), a)
    _gemm(a, b, out, tile=TILES[0], mode="stream_k")
    ref = cupy.matmul(to64(a)[None], to64(b))
    assert rel_error(out, ref) <= TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["deterministic", "arrival"])
def test_bitwise_reproducible(dtype, reduction):
    first = None
    for _ in range(10):
        out, err = _run(dtype, 1, 256, 512, 8192, ("C", "C"), TILES[1], "stream_k", reduction)
        assert err <= TOL[dtype]
        first = first if first is not None else as_bytes(out)
        assert as_bytes(out) == first


# (batch, m, n, k, tile, splits): a tile's splits on clusters of 2 to 16 CTAs; ragged M, N
# and K; a batch; several tiles a launch
CLUSTER_CASES = [(1, 128, 128, 16384, (64, 64, 64), 8), (1, 128, 128, 16384, (64, 64, 64), 16),
                 (1, 136, 264, 4032, (128, 64, 64), 3), (3, 200, 136, 1000, (128, 64, 64, 2), 2),
                 (1, 56, 512, 4608, (64, 64, 64), 9), (1, 520, 72, 2048, (128, 64, 64), 4),
                 (1, 64, 192, 4480, (64, 64, 64), 7)]
"""(batch, M, N, K, tile, S): cluster sizes that divide the shares of the tile's vectors and
sizes that do not (3, 7, 9), both occupancies, one and two consumer warpgroups, ragged edges
and K, a batch."""


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "".join(l))
def test_cluster_reduction(dtype, layout):
    """The cluster protocol (a tile's splits sum in the shared memory of one cluster's CTAs):
    every layout, CLUSTER_CASES; the launch is the aligned split in clusters of S."""
    for batch, m, n, k, tile, splits in CLUSTER_CASES:
        a = rand((batch, m, k) if batch > 1 else (m, k), dtype, layout[0], 3)
        b = rand((batch, k, n) if batch > 1 else (k, n), dtype, layout[1], 4)
        out = poisoned((batch, m, n) if batch > 1 else (m, n), a)
        grid = batch * -(-m // tile[0]) * -(-n // tile[1]) * splits
        with record_launches() as launched:
            _gemm(a, b, out, mode="aligned", reduction="cluster", tile=tile, grid=grid)
        (run,) = launched
        assert "_cluster_" in run.kernel and run.reduction == "cluster", run
        assert run.ctas == grid and run.mode == "aligned", run
        err = rel_error(out, cupy.matmul(to64(a), to64(b)))
        assert err <= TOL[dtype], (batch, m, n, k, tile, err)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cluster_reduction_is_bitwise_reproducible(dtype):
    a = rand((256, 8192), dtype, "C", 7)
    b = rand((8192, 512), dtype, "C", 8)
    first = None
    for _ in range(10):
        out = poisoned((256, 512), a)
        _gemm(a, b, out, mode="aligned", reduction="cluster", tile=(128, 64, 64), grid=64)
        first = first if first is not None else as_bytes(out)
        assert as_bytes(out) == first


@pytest.mark.parametrize("shape_a,shape_b,family", [
    ((4096, 4096), (4096, 4096), "wgmma_"),   # aligned: auto picks the Hopper family
    ((300, 1001), (1001, 200), "wgmma"),      # rows of 1001 halves: copied onto 16 bytes
])
def test_auto_family_follows_alignment(shape_a, shape_b, family):
    """Auto runs the Hopper family on aligned rows, and on rows that miss 16 bytes once
    they are copied into rows padded to 16 bytes (the copies are priced cheaper than the
    portable family on the operands as they lie)."""
    a, b = rand(shape_a, "float16", "C", 1), rand(shape_b, "float16", "C", 2)
    with record_launches() as launched:
        out = _gemm(a, b)
    assert launched[-1].kernel.startswith(family), launched
    assert rel_error(out, cupy.matmul(to64(a), to64(b))) <= TOL["float16"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t[0]}x{t[1]}")
def test_alpha_beta_and_unaligned_out(dtype, tile):
    """The staged epilogue applies alpha and beta in fp32, and stores element by element
    where a row of out is not 8-byte aligned (a view one column into a wider array)."""
    m, n, k = 200, 136, 512
    a, b = rand((m, k), dtype, "C", 7), rand((k, n), dtype, "C", 8)
    wide = rand((m, n + 3), dtype, "C", 9)
    out = wide[:, 1:n + 1]
    before = to64(out).copy()
    _gemm(a, b, out, alpha=0.5, beta=-1.5, tile=tile, mode="stream_k")
    ref = 0.5 * cupy.matmul(to64(a), to64(b)) - 1.5 * before
    assert rel_error(out, ref) <= TOL[dtype]
    assert rel_error(wide[:, :1], to64(rand((m, n + 3), dtype, "C", 9))[:, :1]) == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t[0]}x{t[1]}")
def test_narrow_operands_with_column_major_out(dtype, tile):
    """A column-major out swaps the operands (out^T = b^T a^T): the narrow operand becomes
    the kernel's B, whose K-major box stops at its 16 rows."""
    for layout in LAYOUTS:
        _, err = _run(dtype, 1, 16, 520, 1024, layout, tile, "stream_k", "deterministic",
                      out_order="F")
        assert err <= TOL[dtype], (layout, err)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t[0]}x{t[1]}")
@pytest.mark.parametrize("mode", ["stream_k", "data_parallel"])
def test_the_tma_store_writes_only_the_view(dtype, tile, mode):
    """An aligned out (a view into a wider, poisoned-around array, batched) is stored by TMA
    (the launch says so); the store stops at the view's extents, so the columns beside it
    and the batch after it keep their values."""
    batch, m, n, k = 3, 200, 136, 520
    a = rand((batch, m, k), dtype, "C", 11)
    b = rand((batch, k, n), dtype, "C", 12)
    wide = rand((batch + 1, m, n + 8), dtype, "C", 13)  # rows 16 bytes longer than out's
    before = to64(wide).copy()
    out = wide[:batch, :, :n]
    with record_launches() as launched:
        _gemm(a, b, out, alpha=0.5, tile=tile, mode=mode)
    assert [x.tma_store for x in launched] == [True], launched
    assert rel_error(out, 0.5 * cupy.matmul(to64(a), to64(b))) <= TOL[dtype]
    after = to64(wide)
    assert bool((after[:batch, :, n:] == before[:batch, :, n:]).all())
    assert bool((after[batch] == before[batch]).all())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["beta", "row-stride", "offset", "rows-backwards"])
def test_the_threads_store_where_tma_cannot(dtype, order):
    """beta != 0, rows not 16 bytes apart, a base not on 16 bytes, or rows backwards (a
    map's strides are unsigned): the epilogue's threads store C (the launch says so), with
    the same result."""
    m, n, k = 264, 136, 1000
    a, b = rand((m, k), dtype, "C", 14), rand((k, n), dtype, "C", 15)
    wide = rand((m, n + (4 if order == "row-stride" else 8)), dtype, "C", 16)
    out = wide[:, 4:n + 4] if order == "offset" else wide[:, :n]
    if order == "rows-backwards":
        if hasattr(out, "flip"):
            pytest.skip("torch tensors (bfloat16 here) have no negative strides")
        out = out[::-1]
    before = to64(out).copy()
    beta = -1.0 if order == "beta" else 0.0
    with record_launches() as launched:
        _gemm(a, b, out, beta=beta, tile=TILES[0], mode="stream_k")
    assert [x.tma_store for x in launched] == [False], launched
    assert rel_error(out, cupy.matmul(to64(a), to64(b)) + beta * before) <= TOL[dtype]



# (mode, reduction, tile, grid) of the reading launches: every fixup, a data-parallel grid and
# the cluster launch (4 tiles in clusters of 2)
CHAINED = [("data_parallel", "deterministic", (128, 128, 64), None),
           ("stream_k", "deterministic", (128, 128, 64), None),
           ("stream_k", "arrival", (64, 64, 64), None),
           ("aligned", "cluster", (64, 64, 64), 8)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,reduction,tile,grid", CHAINED, ids=lambda v: str(v))
def test_back_to_back_launches_wait_for_each_other(dtype, mode, reduction, tile, grid):
    """Wgmma kernels launch with programmatic stream serialization: each may start while
    the previous one runs and must wait for it before touching global memory. With every
    plan made beforehand (a plan's first call synchronises), four launches follow each other
    with no synchronisation: a long product writes P, the next reads P (read after write), a
    long product reads Q, and a short one then overwrites Q (write after read)."""
    from skcontract.kernels import launch
    assert launch._launch_kernel_ex is not None and launch.PROGRAMMATIC_LAUNCH
    a, b = rand((1024, 8192), dtype, "C", 11), rand((8192, 1024), dtype, "C", 12)
    c = rand((1024, 128), dtype, "C", 13)
    q, d = rand((128, 8192), dtype, "C", 14), rand((8192, 128), dtype, "C", 15)
    x, y = rand((128, 64), dtype, "C", 16), rand((64, 8192), dtype, "C", 17)
    p, pc, qd = poisoned((1024, 1024), a), poisoned((128, 128), a), poisoned((128, 128), a)
    q_scratch = poisoned((128, 8192), a)
    read = dict(mode=mode, reduction=reduction, tile=tile, grid=grid)
    steps = [lambda: _gemm(a, b, p, mode="stream_k", reduction="arrival"),  # writes P
             lambda: _gemm(p[:128], c, pc, **read),                          # reads P
             lambda: _gemm(q, d, qd, **read),                                # reads Q
             lambda: _gemm(x, y, q)]                                         # writes Q
    q_before = to64(q)
    launched = launch_chain(steps, lambda: _gemm(x, y, q_scratch), (p, pc, qd))
    assert [r.kernel.split("_")[0] for r in launched] == ["wgmma"] * 4, launched
    assert rel_error(pc, cupy.matmul(to64(p[:128]), to64(c))) <= TOL[dtype]
    assert rel_error(qd, cupy.matmul(q_before, to64(d))) <= TOL[dtype]
    assert rel_error(q, cupy.matmul(to64(x), to64(y))) <= TOL[dtype]
