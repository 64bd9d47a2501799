"""The scheduler's split tables: invariants (property-based), modes, auto, edge cases."""
import dataclasses
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcontract.schedule import (MIN_ITERS_PER_SPLIT, MODES, DeviceInfo, GemmProblem,
                                 can_apply_stream_k, conv_problem, grouped_problem,
                                 schedule_gemm, schedule_problem,
                                 validate_schedule)
from skcontract.contract import contract_path
from skcontract.kernels.resolve import resolve_gemm
from skcontract.kinds import Kind
from skcontract.schedule import table as T
from skcontract.schedule.check import InvalidSchedule
from skcontract.schedule.heuristics import schedule_key, selection_key
from skcontract.schedule.scheduler import NO_TILES
from skcontract.schedule.swizzle import tile_order
from skcontract.schedule.types import TileOption

H200 = DeviceInfo.h200()
TILES = [(128, 128, 64), (128, 256, 64), (64, 64, 32), (32, 32, 16)]
MENU = {
    "float16": ((128, 128, 64), (128, 256, 64)),
    "float32": ((128, 128, 64), (128, 256, 64), (128, 128, 32), (64, 128, 32)),
    "float64": ((128, 128, 64), (128, 256, 64), (64, 128, 32), (64, 64, 32)),
}
"""Tiles the tests that let auto choose one plan on (the scheduler has no menu of its own)."""


def toy(sms, ctas_per_sm=1):
    return dataclasses.replace(H200, name=f"toy-{sms}", sms=sms, ctas_per_sm=ctas_per_sm)


def check_public_contract(s):
    """Every split as the public contract describes it, cross-checked with the table."""
    p = s.problem
    rows = s.splits()
    assert len(rows) == len(s.expanded().table)
    ctas = [r.cta for r in rows]
    assert ctas == sorted(ctas) and (not ctas or (0 <= ctas[0] and ctas[-1] < s.grid))
    for r in rows[:: max(1, len(rows) // 50)]:
        m, n, k = p.shape(r.batch)
        assert r.first == (r.k0 == 0) and r.final == (r.k1 == k)
        assert r.bm == min(s.tile[0] if not r.small else s.small_tile[0], m - r.m0) or r.small
        assert r.bn == min(s.tile[1] if not r.small else s.small_tile[1], n - r.n0) or r.small
        assert all(isinstance(getattr(r, f), (int, bool)) for f in r._fields)


# ---------------------------------------------------------------------------------------
# property: the table of every mode x reduction x tile x grid is a valid decomposition
# ---------------------------------------------------------------------------------------
dims = st.integers(1, 3000)


@settings(max_examples=160, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=dims, n=dims, k=st.integers(1, 4000), batch=st.integers(1, 8),
       mode=st.sampled_from(MODES + ("auto",)),
       reduction=st.sampled_from(["atomic", "deterministic", "arrival"]),
       tile=st.sampled_from(TILES), grid=st.sampled_from([None, 1, 7, 66, 132]),
       sms=st.sampled_from([132, 8]))
def test_table_invariants(m, n, k, batch, mode, reduction, tile, grid, sms):
    dev = H200 if sms == 132 else toy(sms)
    try:
        s = schedule_gemm(m, n, k, batch=batch, device=dev, mode=mode, tile=tile, grid=grid,
                          reduction=reduction)
    except ValueError as e:
        # only refused when splits would wait on a grid larger than the resident CTAs
        assert "deadlock" in str(e)
        assert reduction == "deterministic" and grid > dev.resident_ctas
        return
    # coverage of every (element, k) exactly once, one final per tile, flags, peers, slots,
    # MIN_ITERS_PER_SPLIT, publish-before-wait order, residency of waiters:
    validate_schedule(s)
    assert s.mode in MODES
    assert s.tile == tile
    if mode not in ("auto", "aligned", "hytis", "data_parallel") and s.mode == mode:
        assert s.grid <= (grid or dev.resident_ctas)
    if s.waits:
        assert s.grid <= dev.resident_ctas
    t = s.expanded().table
    iters = -(-(t[:, T.K1] - t[:, T.K0]) // tile[2])
    assert np.all(iters[t[:, T.PEERS] > 1] >= MIN_ITERS_PER_SPLIT)
    if s.mode == "data_parallel" or s.mode == "hytis":
        assert np.all(t[:, T.PEERS] == 1)
    if s.mode == "hybrid":
        assert np.all(t[:, T.PEERS] <= 3)  # each SK unit holds 1 to 2 tiles
    assert 0.0 < s.predicted_efficiency <= 1.0
    check_public_contract(s)


@settings(max_examples=60, deadline=None)
@given(tm=st.integers(1, 70), tn=st.integers(1, 70), lsw=st.integers(0, 4),
       raster=st.sampled_from("MN"))
def test_swizzle_is_a_permutation(tm, tn, lsw, raster):
    mi, ni = tile_order(tm, tn, lsw, raster)
    ids = mi * tn + ni
    assert sorted(ids.tolist()) == list(range(tm * tn))


def test_swizzle_bands():
    mi, ni = tile_order(8, 16, log_swz=2, raster="N")
    # band of 4 tile rows walked along N: the first 8 tiles are rows 0..3 of columns 0, 1
    assert list(zip(mi[:8].tolist(), ni[:8].tolist())) == [
        (0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1), (2, 1), (3, 1)]
    mi, ni = tile_order(16, 8, log_swz=1, raster="M")
    assert list(zip(mi[:4].tolist(), ni[:4].tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]


# ---------------------------------------------------------------------------------------
# modes: the shapes docs/design/stream_k.md describes
# ---------------------------------------------------------------------------------------
def test_data_parallel_round_robin_and_wave_efficiency():
    s = schedule_gemm(2176, 1024, 4096, mode="data_parallel", tile=(128, 128, 64))
    assert s.grid == 132 and s.num_splits == 136
    assert np.all(s.expanded().table[:, T.PEERS] == 1)
    assert np.diff(s.expanded().cta_offsets).tolist() == [2] * 4 + [1] * 128
    # launched as one range row per CTA: the table does not grow with the tiles
    assert s.num_rows == 132 and np.all(s.table[:, T.FLAGS] & T.FLAG_RANGE)
    assert s.predicted_efficiency == pytest.approx(136 / (2 * 132))
    assert s.waves == pytest.approx(2.0)


def _busiest(s, k_iters):
    """The most a CTA of data-parallel schedule ``s`` has to do: per tile, its k-iterations
    plus its output's share of a full tile."""
    e = s.expanded()
    cost = k_iters + e.table[:, T.BM] * e.table[:, T.BN] / (s.tile[0] * s.tile[1])
    return np.add.reduceat(cost, e.cta_offsets[:-1]).max()


def test_auto_data_parallel_grid_spreads_the_edge_tiles():
    # MobileNetV2's expansion as a GEMM: 3 columns of tiles, the last 16 wide; at 264 CTAs
    # every CTA's tiles sit at one place of the raster's 12-tile bands, so 88 CTAs store
    # only edge tiles
    dev = toy(132, ctas_per_sm=2)
    auto = schedule_gemm(200704, 144, 24, device=dev, mode="data_parallel",
                         tile=(128, 64, 64))
    full = schedule_gemm(200704, 144, 24, device=dev, mode="data_parallel",
                         tile=(128, 64, 64), grid=264)
    assert auto.grid < 264 and _busiest(auto, 1) < 0.9 * _busiest(full, 1)
    # no edge tiles: every CTA's tiles are full, all resident CTAs run
    even = schedule_gemm(200704, 128, 24, device=dev, mode="data_parallel",
                         tile=(128, 64, 64))
    assert even.grid == 264


def test_stream_k_units_are_equal_ranges():
    s = schedule_gemm(2176, 1024, 4096, mode="stream_k", tile=(128, 128, 64), groups=1)
    t = s.expanded().table
    per_cta = np.add.reduceat((t[:, T.K1] - t[:, T.K0]) // 64, s.cta_offsets[:-1])
    total = 136 * 64
    # equal shares u*T/g, boundaries moved by at most MIN/2 to keep >= MIN per split
    assert per_cta.sum() == total
    assert per_cta.max() - per_cta.min() <= MIN_ITERS_PER_SPLIT + 1
    assert s.groups == 1 and s.mode == "stream_k"


def test_stream_k_walk_order_publish_before_wait():
    dev = toy(4)
    s = schedule_gemm(384, 128, 90 * 64, device=dev, mode="stream_k", tile=(128, 128, 64),
                      reduction="deterministic", groups=1)
    # the lecture example: 3 tiles of 90 k-tiles on 4 units
    assert s.grid == 4
    rows = s.splits()
    assert [(r.cta, r.m0, r.k0 // 64, r.k1 // 64) for r in rows] == [
        (0, 0, 0, 67), (1, 128, 0, 45), (1, 0, 67, 90), (2, 256, 0, 22), (2, 128, 45, 90),
        (3, 256, 22, 90)]
    assert s.num_locks == 3 and s.workspace_slots == 3


def test_hybrid_has_dp_waves_after_two_tile_stream_k():
    s = schedule_gemm(4352, 1024, 4096, mode="hybrid", tile=(128, 128, 64), groups=1)
    # 272 tiles = 2 waves + 8: one DP wave, 140 tiles over 132 Stream-K units
    assert s.mode == "hybrid"
    t = s.expanded().table
    dp = t[:, T.PEERS] == 1
    for c in range(s.grid):
        lo, hi = s.cta_offsets[c], s.cta_offsets[c + 1]
        kinds = dp[lo:hi].tolist()
        assert kinds[-1] is True  # the DP tile comes after the CTA's Stream-K splits
    assert np.count_nonzero(dp) >= 132
    assert t[:, T.PEERS].max() <= 2


def test_hybrid_degenerates_to_dp_when_tail_is_large():
    s = schedule_gemm(1280, 2560, 4096, mode="hybrid", tile=(128, 128, 64))
    assert s.mode == "data_parallel" and "half" in s.reason


def test_split_k_and_aligned():
    s = schedule_gemm(256, 256, 4096, mode="split_k", tile=(128, 128, 64), splits=4,
                      reduction="deterministic")
    assert s.mode == "split_k" and s.splits_per_tile == 4 and s.num_splits == 16
    assert np.all(s.expanded().table[:, T.PEERS] == 4)
    a = schedule_gemm(256, 256, 4096, mode="aligned", tile=(128, 128, 64), splits=4)
    assert a.mode == "aligned" and a.reduction == "arrival" and a.grid == 16
    assert a.workspace_slots == 16 and a.num_locks == 4
    # S must divide P = 64 and leave >= 8 per split: 5 -> 4
    b = schedule_gemm(256, 256, 4096, mode="aligned", tile=(128, 128, 64), splits=5)
    assert b.splits_per_tile == 4
    # P = 12: no S > 1 keeps 8 iterations per split
    c = schedule_gemm(256, 256, 768, mode="aligned", tile=(128, 128, 64))
    assert c.mode == "data_parallel"


def test_hytis_retiles_the_partial_wave():
    s = schedule_gemm(2176, 1024, 4096, mode="hytis", tile=(128, 256, 64))
    # 68 big tiles < 132: all of it is the partial wave
    assert s.mode == "hytis" and s.small_tile is not None
    small = (s.expanded().table[:, T.FLAGS] & T.FLAG_SMALL) != 0
    assert small.all() and np.all(s.expanded().table[:, T.PEERS] == 1)
    s2 = schedule_gemm(4352, 1024, 4096, mode="hytis", tile=(128, 128, 64))
    small = (s2.expanded().table[:, T.FLAGS] & T.FLAG_SMALL) != 0
    assert np.count_nonzero(~small) == 264  # two full waves keep the big tile
    assert s2.workspace_slots == 0 and s2.num_locks == 0
    validate_schedule(s2)


def test_hytis_on_a_kernels_small_tile_ranks_beside_hybrid():
    """Auto's nudge: hytis on a kernel's own small tile (a schedule with small_efficiency)
    needs no more lead over data-parallel than hybrid does; on a small tile the scheduler
    chose it keeps its place last, and the other modes keep theirs."""
    assert selection_key("hytis", 100.0, kernel_small_tile=True) == \
        selection_key("hybrid", 100.0)
    assert selection_key("hytis", 100.0) > selection_key("split_k", 100.0) > \
        selection_key("stream_k", 100.0) > selection_key("hybrid", 100.0) > \
        selection_key("data_parallel", 100.0)
    own = TileOption((128, 256, 64), small_tiles=((128, 128),), small_efficiency=0.37)
    s = schedule_gemm(3200, 3200, 3200, mode="hytis", tiles=[own])
    assert s.small_efficiency == 0.37 and schedule_key(s) == \
        selection_key("hybrid", s.predicted_time_us)
    assert schedule_key(schedule_gemm(3200, 3200, 3200, mode="hytis",
                                      tile=(128, 256, 64))) > s.predicted_time_us * 1.04


def test_grouped_gemm_batch_is_group():
    p = grouped_problem([(300, 200, 512), (64, 1000, 512), (1, 77, 512)])
    assert p.kind is Kind.BATCHED_GEMM  # its groups are the table's batch entries
    s = schedule_problem(p, toy(16), tile=(64, 64, 32), mode="stream_k")
    validate_schedule(s)
    assert set(s.expanded().table[:, T.BATCH].tolist()) == {0, 1, 2}
    g1 = s.expanded().table[s.expanded().table[:, T.BATCH] == 1]
    assert g1[:, T.M0].max() < 64 and (g1[:, T.N0] + g1[:, T.BN]).max() == 1000
    ragged = grouped_problem([(300, 200, 512), (64, 1000, 100)])
    r = schedule_problem(ragged, toy(16), tile=(64, 64, 32), mode="stream_k")
    assert r.mode in ("hytis", "data_parallel") and "ragged" in r.reason
    validate_schedule(r)


def test_conv_problem_is_implicit_gemm():
    p = conv_problem(2, 3, 9, 9, 5, 3, 3, stride=2, padding=1)
    assert (p.m, p.n, p.k) == (2 * 5 * 5, 5, 27)
    s = schedule_problem(p, H200, tiles=MENU["float16"])
    validate_schedule(s)


# ---------------------------------------------------------------------------------------
# auto, applicability, fallbacks
# ---------------------------------------------------------------------------------------
def test_auto_exact_waves_is_dp():
    s = schedule_gemm(1536, 1408, 4096, tile=(128, 128, 64))  # 12 x 11 = 132 tiles
    assert s.mode == "data_parallel" and "exact waves" in s.reason
    assert s.predicted_efficiency == pytest.approx(1.0)


def test_auto_wave_quantized_uses_stream_k_family():
    s = schedule_gemm(2176, 1024, 4096, tile=(128, 128, 64))
    assert s.mode in ("stream_k", "hybrid")
    dp = next(c for c in s.candidates if c.mode == "data_parallel")
    assert s.predicted_time_us < dp.predicted_time_us
    assert sum(c.chosen for c in s.candidates) == 1
    assert min(c.relative_time for c in s.candidates) == pytest.approx(1.0)
    assert "vs data_parallel" in s.reason


def test_auto_few_tiles_long_k_splits_k():
    s = schedule_gemm(128, 128, 16384, tiles=MENU["float16"])
    assert s.mode in ("stream_k", "split_k") and 1 < s.grid <= 132
    assert s.tile in MENU["float16"]


def test_auto_short_k_is_dp():
    s = schedule_gemm(1024, 1024, 64, batch=48, tile=(128, 128, 64))
    assert s.mode == "data_parallel" and "k-iterations" in s.reason


def test_forced_choices_are_honoured():
    s = schedule_gemm(1000, 1000, 1000, mode="stream_k", tile=(64, 64, 32), grid=50,
                      reduction="deterministic")
    assert (s.mode, s.tile, s.grid, s.reduction) == ("stream_k", (64, 64, 32), 50,
                                                     "deterministic")
    d = schedule_gemm(1000, 1000, 1000, mode="data_parallel", tile=(64, 64, 32), grid=1000)
    assert d.grid == 1000  # a plain (non-persistent) launch is allowed without waits


@pytest.mark.parametrize("option, value", [
    ("swizzle", -1), ("swizzle", 8), ("swizzle", 2.5), ("raster", "X"), ("groups", 0)])
def test_a_tile_walk_outside_what_the_kernels_decode_is_refused(option, value):
    """The kernels decode the walk from one int (the band's log2 below RASTER_M_BIT, the
    raster above): a swizzle outside it would make them take other tiles than the table."""
    with pytest.raises(ValueError, match=option):
        schedule_gemm(1000, 1000, 1000, mode="stream_k", tile=(128, 128, 64),
                      **{option: value})
    s = schedule_gemm(1000, 1000, 1000, mode="stream_k", tile=(128, 128, 64), swizzle=7,
                      raster="M", groups=1)
    assert (s.log_swizzle, s.raster, s.groups) == (7, "M", 1)
    assert s.tile_order == T.tile_order_code(7, "M")


def test_deterministic_grid_above_residency_is_refused():
    with pytest.raises(ValueError, match="deadlock"):
        schedule_gemm(1000, 1000, 4000, mode="stream_k", grid=200, reduction="deterministic",
                      tiles=MENU["float16"])
    s = schedule_gemm(1000, 1000, 4000, mode="stream_k", grid=200, reduction="atomic",
                      tile=(64, 64, 32))
    assert s.grid == 200 and not s.waits


@pytest.mark.parametrize("facts, ok, word", [
    (dict(kind="GEMM"), True, "applies"),
    (dict(kind="ELEMENTWISE"), False, "no reduction"),
    (dict(kind="OUTER"), False, "no reduction"),
    (dict(kind="GEMM", associative=False), False, "associative"),
    (dict(kind="GEMM", accumulator_dtype="complex128"), False, "atomic"),
    (dict(kind="GEMM", accumulator_dtype="complex128", reduction="deterministic"), True,
     "workspace"),
    (dict(kind="BATCHED_GEMM", ragged_k=True), False, "ragged"),
    (dict(kind="CONV", fused_consumer=True), False, "fused"),
    (dict(kind="GEMV", dtype="float16"), True, "float32"),
])
def test_can_apply(facts, ok, word):
    got, why = can_apply_stream_k(device=H200, **facts)
    assert got is ok and word in why


def test_fallback_chain_records_reason():
    s = schedule_gemm(2176, 1024, 4096, dtype="complex128", mode="stream_k", tile=(128, 128, 64))
    assert s.mode == "hytis" and "not applicable" in s.reason and "atomic" in s.reason
    s = schedule_gemm(1536, 1408, 4096, mode="stream_k", tile=(128, 128, 64),
                      associative=False)
    assert s.mode == "data_parallel" and "associative" in s.reason  # no partial wave
    s = schedule_gemm(2176, 1024, 4096, associative=False, tile=(128, 128, 64))
    assert s.mode == "hytis" and "not applicable" in s.reason
    s = schedule_gemm(2176, 1024, 4096, dtype="complex128", reduction="deterministic",
                      tile=(128, 128, 64))
    assert s.mode in ("stream_k", "hybrid")
    s = schedule_gemm(2176, 1024, 4096, tile=(128, 128, 64), fragment_accumulators=True)
    assert s.mode in ("aligned", "data_parallel")


def test_summary():
    s = schedule_problem(GemmProblem(256, 256, 4096, batch=8), H200, tiles=MENU["float16"])
    assert s.problem.batch == 8
    line = s.summary()
    assert s.mode in line and "grid=" in line and "eff=" in line and "\n" not in line


def test_the_scheduler_plans_on_the_tiles_it_is_given():
    """No menu of its own: without tile options it refuses, and names where the GPU's
    come from."""
    with pytest.raises(ValueError, match="resolve_gemm") as e:
        schedule_gemm(512, 512, 512)
    assert str(e.value) == NO_TILES
    with pytest.raises(ValueError, match="BM, BN, BK"):
        schedule_gemm(512, 512, 512, tile=(128, 128))
    assert schedule_gemm(512, 512, 512, tile=(128, 128), tiles=MENU["float16"]).tile == \
        (128, 128, 64)


def test_schedule_is_immutable():
    s = schedule_gemm(512, 512, 512, tile=(128, 128, 64))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.mode = "x"
    with pytest.raises(ValueError):
        s.table[0, 0] = 1
    with pytest.raises(ValueError):
        s.cta_offsets[0] = 1


# ---------------------------------------------------------------------------------------
# edge cases
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [
    (300, 200, 40),      # K < BK
    (300, 200, 1000),    # K not a multiple of BK
    (1, 4096, 4096),     # M = 1 (GEMV)
    (4096, 1, 4096),     # N = 1
    (100, 100, 5000),    # one tile
    (640, 640, 2048),    # fewer tiles than SMs
    (1536, 1408, 1024),  # exactly one wave
    (3072, 2816, 512),   # exactly four waves
])
@pytest.mark.parametrize("reduction", ["atomic", "deterministic", "arrival"])
def test_edge_cases(shape, mode, reduction):
    s = schedule_gemm(*shape, mode=mode, tile=(128, 128, 64), reduction=reduction)
    validate_schedule(s)
    m, n, k = shape
    if k < 64:
        assert np.all(s.expanded().table[:, T.PEERS] == 1) and np.all(s.expanded().table[:, T.K1] == k)
    if m <= 128 and n <= 128 and s.mode != "hytis":
        assert set(s.expanded().table[:, T.M0].tolist()) == {0}


def test_8192_cubed_table_builds_fast():
    for mode in ("data_parallel", "stream_k", "hybrid", "auto"):
        t0 = time.perf_counter()
        s = schedule_gemm(8192, 8192, 8192, tile=(128, 128, 64), mode=mode)
        dt = time.perf_counter() - t0
        assert dt < 1.0, (mode, dt)
        assert s.num_tiles == 4096
    validate_schedule(s)


def test_min_iters_moves_boundaries_to_tile_edges():
    # P = 12 < 2 * MIN: interior boundaries cannot leave 8 on both sides -> whole tiles
    s = schedule_gemm(1000, 1000, 768, mode="stream_k", tile=(128, 128, 64))
    t = s.expanded().table
    assert np.all(t[:, T.PEERS] == 1)
    # few iterations: grid shrinks so each unit keeps >= MIN iterations
    s = schedule_gemm(128, 128, 64 * 40, mode="stream_k", tile=(128, 128, 64), grid=132)
    assert s.grid == 40 // MIN_ITERS_PER_SPLIT and "grid" in s.reason
    validate_schedule(s)


def test_problem_validation():
    with pytest.raises(ValueError):
        GemmProblem(0, 1, 1)
    with pytest.raises(ValueError):
        schedule_gemm(10, 10, 10, mode="nope", tile=(128, 128, 64))
    with pytest.raises(ValueError):
        schedule_gemm(10, 10, 10, reduction="nope", tile=(128, 128, 64))
    with pytest.raises(ValueError):
        schedule_gemm(10, 10, 10, tile=(0, 1, 1))


# ---------------------------------------------------------------------------------------
# shared sum: arrival tables whose peers share the final sum
# ---------------------------------------------------------------------------------------
def test_shared_sum_flag_only_when_every_cta_is_resident():
    s = schedule_gemm(128, 128, 16384, mode="stream_k", tile=(64, 64, 16), reduction="arrival",
                      dtype="float64")
    multi = s.expanded().table[:, T.PEERS] > 1
    assert s.shared_sum and s.waits and s.grid <= H200.resident_ctas
    assert np.array_equal((s.expanded().table[:, T.FLAGS] & T.FLAG_SHARED_SUM) != 0, multi)
    validate_schedule(s)
    # aligned with more units than resident CTAs: nobody may wait, so the last arrival sums
    big = schedule_gemm(4096, 4096, 8192, mode="aligned", splits=2, tile=(128, 128, 64))
    assert big.grid > H200.resident_ctas and not big.shared_sum and not big.waits
    validate_schedule(big)


def test_auto_deterministic_weighs_the_shared_sum():
    """One tile with many peers: the deterministic chain merges 100+ partials one after the
    other, the shared sum in one pass; auto picks it. Many tiles: the chain stays."""
    one = schedule_gemm(128, 128, 16384, dtype="float64", reduction="deterministic",
                        tiles=MENU["float64"])
    assert (one.mode, one.reduction) == ("stream_k", "arrival") and one.shared_sum
    chain = [c for c in one.candidates if c.mode == "stream_k" and c.note != "shared sum"
             and c.tile == one.tile]
    assert chain and min(c.predicted_time_us for c in chain) > one.predicted_time_us
    many = schedule_gemm(2176, 1024, 4096, tile=(128, 128, 64), reduction="deterministic")
    assert many.reduction == "deterministic"


def test_auto_weighs_the_cluster_sum_where_the_device_counts_its_clusters():
    """Few tiles of a long K: auto weighs the aligned split summed in each cluster's shared
    memory (bitwise reproducible, as deterministic asks) on entries whose kernels run it,
    and only where the device says how many clusters stay resident; all of them must."""
    problem = GemmProblem(49, 512, 4608, 1, "float16")  # the batch-1 7 x 7 x 512 layer
    s = resolve_gemm(problem, H200).schedule
    assert (s.mode, s.reduction) == ("aligned", "cluster")
    assert s.grid <= H200.clusters_resident(s.splits_per_tile) * s.splits_per_tile
    assert any(c.note == "cluster sum" for c in s.candidates)
    unknown = dataclasses.replace(H200, resident_clusters=())
    s = resolve_gemm(problem, unknown).schedule
    assert s.reduction != "cluster"
    assert not any(c.note == "cluster sum" for c in s.candidates)
    # many tiles: the chain or the shared sum stays
    assert resolve_gemm(GemmProblem(2176, 1024, 4096, 1, "float16"),
                        H200).schedule.reduction != "cluster"
    # 8 tiles: clusters of 16 would not all be resident (7 are), so 8 a tile at most
    s = resolve_gemm(GemmProblem(64, 512, 8192, 1, "float16"), H200, mode="aligned",
                     reduction="cluster", tile=(64, 64, 64), splits=16).schedule
    assert s.splits_per_tile == 8 and s.grid == 64


def test_shared_sum_needs_residency_not_an_order_of_visits():
    """A CTA arrives on all its tiles before it waits: even one CTA running both splits of a
    tile is fine. Only a grid larger than the resident CTAs is refused."""
    from skcontract.schedule.emulate import emulate
    s = schedule_gemm(100, 100, 4000, mode="split_k", splits=2, grid=1, tile=(128, 128, 64),
                      reduction="arrival", dtype="float64")
    assert s.num_fixup_tiles == 1 and s.shared_sum and s.grid == 1
    validate_schedule(s)
    rng = np.random.default_rng(0)
    a, b = rng.integers(-3, 4, (100, 4000)).astype(float), rng.integers(-3, 4, (4000, 100)).astype(float)
    np.testing.assert_array_equal(emulate(s, a, b), a @ b)
    ok = schedule_gemm(128, 256, 8192, mode="stream_k", tile=(64, 64, 16), reduction="arrival",
                       dtype="float64", grid=20)
    assert ok.shared_sum
    validate_schedule(ok)
    with pytest.raises(InvalidSchedule, match="resident"):
        validate_schedule(dataclasses.replace(ok, device=toy(4)))
    t = ok.expanded().table.copy()
    t[:, T.FLAGS] |= T.FLAG_SHARED_SUM  # also on single-split tiles: refused
    if np.any(ok.expanded().table[:, T.PEERS] == 1):
        with pytest.raises(InvalidSchedule, match="exactly"):
            validate_schedule(dataclasses.replace(ok.expanded(), table=t))



@pytest.mark.parametrize("m,n,k,batch", [(64, 64, 2**31 + 4096, 1), (2**31 + 7, 64, 64, 1),
                                         (64, 64, 64, 2**31)])
def test_a_problem_beyond_32_bit_tables_is_refused(m, n, k, batch):
    """The kernels read the split table as 32-bit ints: a larger coordinate would wrap
    (K1 negative, a tile outside the matrix), so the problem is refused."""
    with pytest.raises(ValueError, match="32-bit"):
        schedule_gemm(m, n, k, batch=batch, dtype="float32", tiles=MENU["float32"])


def test_a_range_row_walking_past_32_bits_is_refused():
    """A range row's last tile position (first + (count - 1) x stride) is a 32-bit value
    in the kernel too: a walk past INDEX_MAX is refused as a TableOverflow (a ValueError)."""
    from skcontract.schedule.table import TableOverflow
    with pytest.raises(TableOverflow, match="range row"):
        schedule_gemm(65536, 1, 2, batch=270000, tile=(1, 1, 2), dtype="float16",
                      mode="data_parallel")


def test_a_plan_step_beyond_32_bit_tables_has_no_schedule():
    """An einsum step whose merged K exceeds the tables' range gets no schedule: the GPU
    backend runs it on its documented fallback."""
    _, plan = contract_path("ijk,njk->in", (256, 50000, 50000), (256, 50000, 50000),
                            shapes=True, dtype="float32")
    (step,) = plan.steps
    assert step.k == 2_500_000_000 and step.schedule is None


def test_a_cluster_larger_than_the_resident_ctas_is_not_planned():
    """On a device that does not count its clusters, a cluster must still fit in its
    resident CTAs (else its CTAs wait for peers that never start); the checker says so."""
    dev = DeviceInfo("3-SM device", 3, (9, 0), 8 << 20, 228 * 1024)
    s = schedule_gemm(128, 128, 8192, reduction="cluster", device=dev, tiles=MENU["float16"])
    validate_schedule(s)
    assert s.splits_per_tile <= dev.resident_ctas
    big = schedule_gemm(128, 128, 8192, reduction="cluster", device=DeviceInfo.h200(),
                        tiles=MENU["float16"])
    assert big.splits_per_tile > dev.resident_ctas
    with pytest.raises(InvalidSchedule, match="resident"):
        validate_schedule(dataclasses.replace(big, device=dev))
