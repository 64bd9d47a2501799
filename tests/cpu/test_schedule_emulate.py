"""The CPU emulator: every schedule computes A @ B; the fixup protocols are checked."""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skcontract.dtypes import accumulator_dtype
from skcontract.schedule import (MODES, DeviceInfo, ProtocolViolation, ScheduleDeadlock,
                                 emulate, grouped_problem, schedule_gemm, schedule_problem,
                                 timeline)
from skcontract.schedule import table as T

SMALL_TILES = [(16, 16, 8), (32, 16, 16), (16, 32, 8), (32, 32, 16)]


def toy(sms, ctas_per_sm=1):
    return dataclasses.replace(DeviceInfo.h200(), name=f"toy-{sms}", sms=sms,
                               ctas_per_sm=ctas_per_sm)


def int_operands(rng, batch, m, n, k):
    # small integers: float64 sums are exact in any order, so results must be *equal*
    a = rng.integers(-4, 5, (batch, m, k)).astype(np.float64)
    b = rng.integers(-4, 5, (batch, k, n)).astype(np.float64)
    return a, b


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 80), n=st.integers(1, 80), k=st.integers(1, 300),
       batch=st.integers(1, 3), mode=st.sampled_from(MODES + ("auto",)),
       reduction=st.sampled_from(["atomic", "deterministic", "arrival"]),
       tile=st.sampled_from(SMALL_TILES), sms=st.integers(1, 9), cps=st.integers(1, 2),
       grid=st.sampled_from([None, 1, 3, 5]), seed=st.integers(0, 2**16))
def test_emulated_result_equals_reference(m, n, k, batch, mode, reduction, tile, sms, cps,
                                         grid, seed):
    dev = toy(sms, cps)
    if grid is not None and grid > dev.resident_ctas and reduction != "atomic":
        grid = dev.resident_ctas
    s = schedule_gemm(m, n, k, batch=batch, device=dev, mode=mode, tile=tile, grid=grid,
                      reduction=reduction, dtype="float64")
    rng = np.random.default_rng(seed)
    a, b = int_operands(rng, batch, m, n, k)
    ref = a @ b
    for sd in (seed, seed + 1):
        c = emulate(s, a, b, seed=sd, dispatch="random" if not s.waits else "in_order")
        assert c.shape == ref.shape
        np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("mode, extra", [("stream_k", {}), ("stream_k", {"groups": 2}),
                                         ("hybrid", {}), ("split_k", {"splits": 3}),
                                         ("aligned", {"splits": 2})])
def test_deterministic_is_bitwise_stable_across_interleavings(mode, extra):
    dev = toy(7)  # 15 tiles = 2 waves + 1: hybrid runs one DP wave
    m, n, k = 70, 45, 700
    s = schedule_gemm(m, n, k, device=dev, mode=mode, tile=(16, 16, 8),
                      reduction="deterministic", dtype="float64", **extra)
    assert s.mode == mode and s.num_fixup_tiles > 0
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    ref = a @ b
    results = [emulate(s, a, b, seed=sd) for sd in range(6)]
    results += [emulate(s, a, b, seed=sd, dispatch="random") for sd in range(3)]
    for r in results[1:]:
        assert r.tobytes() == results[0].tobytes()
    np.testing.assert_allclose(results[0], ref, rtol=1e-12, atol=1e-10)


def test_atomic_merges_in_a_random_order():
    dev = toy(8)
    m, n, k = 48, 48, 2048
    s = schedule_gemm(m, n, k, device=dev, mode="split_k", tile=(16, 16, 8), splits=16,
                      reduction="atomic", dtype="float32")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    outs = [emulate(s, a, b, seed=sd) for sd in range(6)]
    for c in outs:  # float32 sums, as the kernels' accumulators
        assert c.dtype == np.float32
        assert np.all(np.abs(c - ref) <= 1e-5 * scale)
    # different arrival orders round differently somewhere
    assert len({c.tobytes() for c in outs}) > 1


def test_float16_accumulates_in_float32():
    dev = toy(4)
    m, n, k = 40, 24, 520
    s = schedule_gemm(m, n, k, device=dev, mode="stream_k", tile=(16, 16, 16),
                      reduction="deterministic")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = emulate(s, a, b)
    assert c.dtype == np.float32
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)
    assert emulate(s, a, b, out_dtype=np.float16).dtype == np.float16


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32",
                                   "complex64"])
def test_the_emulator_accumulates_as_the_kernels(dtype):
    """The emulator's sums are in :func:`skcontract.dtypes.accumulator_dtype` of the
    operands, the dtype the kernels accumulate in (and the plan shows)."""
    s = schedule_gemm(16, 16, 64, device=toy(2), mode="split_k", tile=(16, 16, 8), splits=2,
                      reduction="deterministic", dtype=dtype)
    a = np.ones((16, 64), dtype)
    assert emulate(s, a, a.T.copy()).dtype == accumulator_dtype(dtype)


def test_int8_sums_wrap_in_int32():
    """int8 products accumulate in int32, wrapping as the kernels' do."""
    s = schedule_gemm(1, 1, 2 ** 18, device=toy(1), mode="data_parallel", tile=(16, 16, 8),
                      dtype="int8")
    a = np.full((1, 2 ** 18), 127, np.int8)
    b = np.full((2 ** 18, 1), 127, np.int8)
    want = (np.int64(127 * 127) * 2 ** 18 + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert emulate(s, a, b)[0, 0] == want


def test_grouped_gemm_emulation():
    p = grouped_problem([(50, 30, 200), (7, 64, 200), (33, 1, 200)], dtype="float64")
    rng = np.random.default_rng(4)
    a = [rng.integers(-3, 4, (m, k)).astype(np.float64) for m, n, k in p.groups]
    b = [rng.integers(-3, 4, (k, n)).astype(np.float64) for m, n, k in p.groups]
    for mode in ("stream_k", "hybrid", "data_parallel", "hytis", "split_k"):
        for red in ("atomic", "deterministic"):
            s = schedule_problem(p, toy(5), mode=mode, tile=(16, 16, 8), reduction=red)
            out = emulate(s, a, b, seed=7)
            for x, y, c in zip(a, b, out):
                np.testing.assert_array_equal(c, x @ y)


def test_batched_broadcast_operand():
    s = schedule_gemm(20, 30, 100, batch=4, device=toy(3), mode="stream_k", tile=(16, 16, 8))
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (4, 20, 100)).astype(np.float64)
    b = rng.integers(-3, 4, (100, 30)).astype(np.float64)  # shared B
    np.testing.assert_array_equal(emulate(s, a, b), a @ b)
    with pytest.raises(ValueError, match="expected"):
        emulate(s, a[:, :, :50], b)


# ---------------------------------------------------------------------------------------
# lock protocol, co-residency, deadlocks
# ---------------------------------------------------------------------------------------
def lecture_schedule():
    """3 tiles of 90 k-tiles on 4 units (CUTLASS lecture), deterministic fixup."""
    return schedule_gemm(384, 128, 90 * 64, device=toy(4), mode="stream_k",
                         tile=(128, 128, 64), reduction="deterministic", groups=1,
                         dtype="float64")


def operands_for(s, seed=0):
    rng = np.random.default_rng(seed)
    p = s.problem
    return (rng.integers(-2, 3, (p.m, p.k)).astype(np.float64),
            rng.integers(-2, 3, (p.k, p.n)).astype(np.float64))


def test_non_resident_producer_is_reported_as_deadlock():
    s = lecture_schedule()
    a, b = operands_for(s)
    np.testing.assert_array_equal(emulate(s, a, b, resident=1), a @ b)  # in-order: fine
    with pytest.raises(ScheduleDeadlock, match="not resident"):
        emulate(s, a, b, resident=1, dispatch="reverse")


def test_circular_waits_are_reported_as_deadlock():
    s = lecture_schedule()
    t = s.expanded().table.copy()
    # CTA 1 runs [publish tile 1, wait tile 0]; CTA 2 runs [publish tile 2, wait tile 1].
    # Reverse both CTAs so each waits before it publishes: CTA 2 waits on CTA 1 which
    # waits on CTA 0 (fine), but make CTA 0 also wait on CTA 2's tile by swapping rows.
    o = s.cta_offsets
    rows = list(range(len(t)))
    rows[o[1]:o[2]] = rows[o[1]:o[2]][::-1]
    rows[o[2]:o[3]] = rows[o[2]:o[3]][::-1]
    bad = dataclasses.replace(s, table=t[rows])
    a, b = operands_for(s)
    # all 4 CTAs resident: CTA 1 waits for tile 0 (CTA 0 publishes it: fine), ... still
    # resolvable, so restrict residency to force CTA 1 and 2 to spin together
    with pytest.raises(ScheduleDeadlock):
        emulate(bad, a, b, resident=2, dispatch="reverse")
    cyclic = dataclasses.replace(s, table=_cycle(t, o))
    with pytest.raises(ScheduleDeadlock):
        timeline(cyclic)
    with pytest.raises(ScheduleDeadlock, match="lock"):
        emulate(cyclic, a, b, seed=3)  # all CTAs resident, still stuck: reported, no hang


def _cycle(t, o):
    """CTA 1 waits on tile 1 (published by CTA 1 itself, later) -> circular."""
    t = t.copy()
    lo, hi = o[1], o[2]
    t[lo:hi] = t[lo:hi][::-1]  # wait (tile 0 tail) first, publish (tile 1 head) second
    # make tile 0's tail depend on tile 1's head by pointing its lock/slot there
    wait = lo
    t[wait, T.TILE] = t[hi - 1, T.TILE]
    t[wait, T.SPLIT] = 1
    return t


def test_early_waiter_is_a_protocol_violation():
    s = lecture_schedule()
    t = s.expanded().table.copy()
    # pretend the final split of tile 1 starts at k = 0: it would proceed while the
    # workspace holds nothing -> "proceeded early"
    r = int(np.nonzero((t[:, T.TILE] == 1) & (t[:, T.SPLIT] == 1))[0][0])
    t[r, T.FLAGS] &= ~T.FLAG_FIRST
    t[r, T.K0] = 0
    bad = dataclasses.replace(s, table=t)
    a, b = operands_for(s)
    seen = set()
    for seed in range(8):
        # either it runs before the producer (and is caught proceeding early), or after
        # (and then waits forever for lock == 0): never a silent wrong answer
        with pytest.raises((ProtocolViolation, ScheduleDeadlock)) as e:
            emulate(bad, a, b, seed=seed)
        seen.add(e.type)
    assert ProtocolViolation in seen


def test_locks_are_reset_and_slots_freed():
    s = lecture_schedule()
    a, b = operands_for(s)
    np.testing.assert_array_equal(emulate(s, a, b), a @ b)  # check_end ran inside
    t = s.expanded().table.copy()
    t[t[:, T.SPLIT] == 1, T.FLAGS] &= ~T.FLAG_FINAL  # nobody resets the lock
    with pytest.raises(ProtocolViolation):
        emulate(dataclasses.replace(s, table=t), a, b)


def test_timeline_hides_waits_with_backward_walk():
    s = lecture_schedule()
    tl = timeline(s)
    assert np.all(tl["end"] >= tl["wait_end"]) and np.all(tl["wait_end"] >= tl["compute_end"])
    assert float(tl["end"].max()) < 90  # faster than one DP tile (90 k-iterations)


@pytest.mark.parametrize("groups", [None, 2])
def test_emulated_shared_sum_is_stable_and_sums_in_split_order(groups):
    dev = toy(9)
    m, n, k = 32, 32, 2000  # 4 tiles over 9 CTAs
    kw = dict(device=dev, mode="stream_k", tile=(16, 16, 8), dtype="float64", groups=groups)
    shared = schedule_gemm(m, n, k, reduction="arrival", **kw)
    chain = schedule_gemm(m, n, k, reduction="deterministic", grid=shared.grid, **kw)
    assert shared.shared_sum and np.array_equal(shared.table[:, T.K0], chain.table[:, T.K0])
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    want = emulate(chain, a, b).tobytes()
    for sd in range(6):
        assert emulate(shared, a, b, seed=sd).tobytes() == want
    np.testing.assert_allclose(emulate(shared, a, b), a @ b, rtol=1e-12, atol=1e-10)


def test_shared_sum_without_co_residency_is_reported_as_deadlock():
    s = schedule_gemm(64, 64, 4000, device=toy(9), mode="stream_k", tile=(16, 16, 8),
                      reduction="arrival", dtype="float64")
    a, b = operands_for(s)
    np.testing.assert_array_equal(emulate(s, a, b), a @ b)
    with pytest.raises(ScheduleDeadlock, match="shared sum"):
        emulate(s, a, b, resident=1)


def test_timeline_shared_sum_waits_for_the_slowest_peer():
    s = schedule_gemm(64, 64, 4000, device=toy(9), mode="stream_k", tile=(16, 16, 8),
                      reduction="arrival", dtype="float64")
    tl = timeline(s)
    tiles = s.expanded().table[:, T.TILE]
    for tile in set(tiles.tolist()) - {-1}:
        rows = tiles == tile
        assert np.all(tl["sum_start"][rows] >= tl["end"][rows].max())  # after the last arrival
        assert np.all(tl["sum_end"][rows] > tl["sum_start"][rows])


@pytest.mark.parametrize("splits", [2, 4, 8, 16])
def test_emulated_cluster_sum_is_stable_and_exact(splits):
    """The cluster reduction: a tile's S splits on one cluster's CTAs (CTA c is split
    c % S), each summing its share in split order: the same bits whatever the interleaving
    and the order clusters start in."""
    m, n, k = 40, 24, 16 * 8 * 16  # 3 x 2 tiles of 16 x 16, P = 128 k-iterations
    s = schedule_gemm(m, n, k, device=toy(200), mode="aligned", reduction="cluster",
                      tile=(16, 16, 8), splits=splits, dtype="float64")
    assert (s.mode, s.reduction, s.splits_per_tile, s.cluster_size) == \
        ("aligned", "cluster", splits, splits)
    assert s.workspace_slots == 0 and s.num_locks == 0 and not s.waits
    assert np.array_equal(s.table[:, T.SPLIT], np.arange(s.grid) % splits)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    want = emulate(s, a, b).tobytes()
    for sd, dispatch in enumerate(["in_order", "reverse", "random", "random"]):
        assert emulate(s, a, b, seed=sd, dispatch=dispatch).tobytes() == want
    np.testing.assert_allclose(emulate(s, a, b), a @ b, rtol=1e-12, atol=1e-10)
    # the emulator starts clusters whole: fewer resident CTAs than a cluster is a deadlock
    with pytest.raises(ScheduleDeadlock):
        emulate(s, a, b, resident=splits - 1)


def test_cluster_sum_takes_cluster_sizes_and_the_aligned_split_only():
    kw = dict(device=toy(200), tile=(16, 16, 8), dtype="float64", reduction="cluster")
    # P = 96: S = 16 leaves 6 k-iterations a split (12 leaves 8), S = 5 does not divide P
    s = schedule_gemm(32, 32, 768, mode="aligned", splits=16, **kw)
    assert s.splits_per_tile == 12
    assert schedule_gemm(32, 32, 768, mode="aligned", splits=5, **kw).splits_per_tile == 4
    for mode in ("stream_k", "split_k", "hybrid"):
        with pytest.raises(ValueError, match="reduction='cluster'.*aligned"):
            schedule_gemm(32, 32, 768, mode=mode, **kw)
    s = schedule_gemm(32, 32, 768, mode="auto", **kw)
    assert s.mode in ("aligned", "data_parallel") and s.reduction in ("cluster", "atomic")
