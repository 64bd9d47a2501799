"""The kernel catalogue meets the scheduler (skcontract.kernels.resolve): every candidate is
a catalogue entry planned at its own occupancy and priced with its own efficiency, and the
tile the scheduler picks maps back to the entry that runs it."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from skcontract.kernels import catalogue
from skcontract.kernels.catalogue import LAYOUT_PAIRS
from skcontract.kernels.operands import Product
from skcontract.kernels.resolve import ctas_on, entry_for, resolve_gemm, step_operands
from skcontract.schedule import DeviceInfo, GemmProblem, schedule_gemm, schedule_problem
from skcontract.kernels.specs import specialise
from skcontract.schedule import table as T
from skcontract.schedule.heuristics import selection_key
from skcontract.schedule.scheduler import SPLITS_ONLY
from skcontract.schedule.types import TileOption

H200 = DeviceInfo.h200()


def _resolve(m, n, k, dtype, **kw):
    return resolve_gemm(GemmProblem(m, n, k, dtype=dtype), H200, **kw)


@pytest.mark.parametrize("dtype,gemv_tile", [("float32", (1, 1024, 8)),
                                             ("float64", (1, 512, 8))])
def test_auto_keeps_one_row_tiles_to_m_1(dtype, gemv_tile):
    """The one-row GEMV tiles read B once per row of the tile: auto (H200 model) picks them
    for a wide M = 1 product and the 8x256 skinny tile once M >= 2 (where one row per tile
    would stream B M times)."""
    assert _resolve(1, 8192, 8192, dtype).schedule.tile == gemv_tile
    for m in (2, 4, 8):
        assert _resolve(m, 8192, 8192, dtype).schedule.tile == (8, 256, 16), m


@pytest.mark.parametrize("shape,two_cta_wins", [((2304, 2304, 4096), True),
                                                ((1024, 1024, 1024), False),
                                                ((1000, 1000, 1000), False),
                                                ((128, 128, 16384), False)])
def test_model_orders_the_two_cta_fp64_entry_as_measured(shape, two_cta_wins):
    """The fp64 128x64x16 entry runs two CTAs per SM, the 128x64x32 one a single CTA; each is
    planned at its own occupancy with its own efficiency, and the model (H200) orders them
    as the H200 measured: the two-CTA entry ahead on the 5-wave 2304^2 x 4096 only."""
    def key(tile):
        s = _resolve(*shape, "float64", tile=tile).schedule
        return selection_key(s.mode, s.predicted_time_us)
    assert (key((128, 64, 16)) < key((128, 64, 32))) == two_cta_wins


def test_each_entry_is_planned_at_its_own_occupancy():
    for entry in catalogue.all_entries():
        if entry.dtype == "int8" or entry.FAMILY in ("Tf32", "Dot"):
            continue
        precision = next((p for p in catalogue.PRECISIONS if entry in catalogue.CATALOGUE[p]
                          and entry not in catalogue.CATALOGUE.get(entry.dtype, ())), None)
        named = (*entry.tile, entry.ctas_per_sm, entry.CLUSTER)
        r = _resolve(4096, 4096, 4096, entry.dtype, tile=named, precision=precision,
                     layouts=entry.layouts()[0])
        assert r.entry is entry  # a tile, occupancy and unit's CTAs name one entry
        short = _resolve(4096, 4096, 4096, entry.dtype, tile=entry.tile, precision=precision,
                         layouts=entry.layouts()[0]).entry
        # a tile names its entries of one CTA a unit where a single CTA's tile is a pair's
        # unit tile, else its entries of any occupancy (the model picks)
        assert short.tile == entry.tile and (short is entry or
                                             short.ctas_per_sm != entry.ctas_per_sm or
                                             short.CLUSTER < entry.CLUSTER)
        assert r.schedule.device.ctas_per_sm == r.entry.ctas_per_sm
        assert r.schedule.grid <= H200.sms * r.entry.ctas_per_sm
        assert r.schedule.tile_efficiency == r.entry.efficiency


def test_vec16_only_entries_need_aligned_operands_and_hopper():
    shared = [b for b in catalogue.CATALOGUE["float64"] if b.vec16_only]
    assert [(b.tile, b.ctas_per_sm, b.min_cc) for b in shared] == [((128, 64, 16), 2, 90)]
    assert shared[0] in catalogue.entries_for("float64", cc=90)
    assert shared[0] not in catalogue.entries_for("float64", cc=80)
    assert shared[0] not in catalogue.entries_for("float64", cc=90, vec16=False)
    r = _resolve(2304, 2304, 4096, "float64", vec16=False)
    assert not r.entry.vec16_only


def test_hytis_runs_on_the_entries_with_a_small_tile():
    """Only the 16-bit Wgmma 128 x 256 entry runs HyTiS's small tile (128 x 128, priced
    with the 128 x 128 entry's efficiency): a forced hytis plans on it, its data-parallel
    kernel is the one built with the small tile, and a convolution, whose kernels run one
    tile, never gets one. Elsewhere a forced hytis is refused, and a step that cannot split
    K says why it stays data-parallel."""
    for dtype in ("float16", "bfloat16"):
        r = _resolve(2304, 2304, 4096, dtype, mode="hytis")
        s = r.schedule
        assert (s.mode, s.tile, s.small_tile) == ("hytis", (128, 256, 64), (128, 128, 64))
        small = (s.table[:, T.FLAGS] & T.FLAG_SMALL) != 0
        assert int(small.sum()) == 60 and (s.table[small, T.BN] == 128).all()
        assert s.protocol == "none" and r.entry.small_bn == 128
        assert s.small_efficiency == catalogue.calibration.WGMMA_EFFICIENCY[128, 128, 1]
        spec = specialise(r.entry, protocol="none", a_layout="row", b_layout="col")
        assert "SMALL_BN = 128;" in spec.cfg_source() and r.entry.b_parts(spec) == 2
        split = specialise(r.entry, protocol="deterministic", a_layout="row", b_layout="col")
        assert "SMALL_BN = 0;" in split.cfg_source() and r.entry.b_parts(split) == 1
    # auto weighs it: on 3200^3 the model prices the 128 x 256 full waves and the small
    # tail (113 tiles of 128 x 128) below data-parallel 128 x 128 (measured 94.2 against
    # 96.4 us, docs/benchmarks/log.md)
    s = _resolve(3200, 3200, 3200, "float16").schedule
    assert (s.mode, s.tile, s.small_tile) == ("hytis", (128, 256, 64), (128, 128, 64))
    # only the small tile the kernel runs: another one asked for is refused (forced) or
    # leaves auto without hytis
    with pytest.raises(ValueError, match="not one the kernel runs"):
        _resolve(2304, 2304, 4096, "float16", mode="hytis", small_tile=(64, 128))
    assert _resolve(3200, 3200, 3200, "float16", small_tile=(64, 64)).schedule.mode != "hytis"
    assert not any(b.option().small_tiles for key, entries in catalogue.CATALOGUE.items()
                   for b in entries if key not in ("float16", "bfloat16"))
    for dtype in ("float32", "float64"):
        assert _resolve(2176, 1024, 4096, dtype).schedule.mode != "hytis"
        with pytest.raises(ValueError, match="one tile shape per launch"):
            _resolve(2176, 1024, 4096, dtype, mode="hytis")
    s = resolve_gemm(GemmProblem(2176, 1024, 4096, dtype="float32"), H200,
                     associative=False).schedule
    assert s.mode == "data_parallel" and "one tile shape per launch" in s.reason
    with pytest.raises(ValueError, match="one tile shape per launch"):
        resolve_gemm(GemmProblem(2304, 2304, 4096, dtype="float16"), H200, mode="hytis",
                     im2col="tma")


def test_unknown_dtype_and_tile_are_clear_errors():
    with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
        _resolve(64, 64, 64, "complex64")
    with pytest.raises(ValueError, match="no float16 kernel with tile"):
        _resolve(64, 64, 64, "float16", tile=(64, 64, 32))


def test_catalogue_entries_check_their_family_constraints():
    with pytest.raises(ValueError, match="8 warps"):
        catalogue.Ffma("float32", 128, 128, 32, 3, 2, 2)
    with pytest.raises(ValueError, match="mma_k == 8"):
        catalogue.Dmma("float64", 128, 64, 32, 3, 4, 2, mma_k=16, frag="vec")
    with pytest.raises(ValueError, match="takes"):
        catalogue.Mma16("float32", 128, 128, 32, 4, 2, 4)
    # a tile, occupancy and unit's CTAs name one entry of a catalogue key, or an earlier
    # one offered only where the later is too (a higher compute capability, aligned
    # operands or fewer layouts), which then runs (resolve_gemm and entry_for take the first)
    for key, entries in catalogue.CATALOGUE.items():
        for i, first in enumerate(entries):
            for later in entries[i + 1:]:
                if (first.tile, first.ctas_per_sm, first.CLUSTER) != \
                        (later.tile, later.ctas_per_sm, later.CLUSTER):
                    continue
                assert (first.min_cc > later.min_cc or first.vec16_only > later.vec16_only
                        or set(first.layouts()) < set(later.layouts())), (key, first, later)
    with pytest.raises(ValueError, match="min_waves"):
        catalogue.wgmma.wgmma_entry("float16", 128, 64, 3, ctas_per_sm=2, min_waves=-1)
    with pytest.raises(ValueError, match="two consumer warpgroups"):
        catalogue.wgmma.wgmma_entry("float16", 64, 128, 4, ctas_per_sm=2, trades_registers=True)
    with pytest.raises(ValueError, match="CTAs an SM"):
        catalogue.Wgmma("float16", 128, 128, 64, 6, 12, 1, ctas_per_sm=3, min_cc=90,
                        vec16_only=True, trades_registers=True)


@pytest.mark.parametrize("batch,m,n,k,paired", [
    (1, 1000, 1000, 1000, False),     # 128 tiles of 128 x 64: alone on an SM
    (1, 256, 256, 32768, False),
    (48, 1024, 1024, 64, True),       # 6144 tiles: paired on every SM
    (1, 401408, 64, 448, True),       # the stem's folded implicit GEMM
])
def test_the_paired_128x64_entry_needs_a_wave_of_tiles(batch, m, n, k, paired):
    """Two 128 x 64 entries: eight stages alone on an SM, three stages two an SM. Forced to
    the tile, auto gets the paired one only where its tiles fill a wave of 264 CTAs, and the
    entry the schedule maps back to is the one planned (by tile and occupancy)."""
    from skcontract.kernels.resolve import entry_for
    r = resolve_gemm(GemmProblem(m, n, k, batch=batch, dtype="float16"), H200,
                     tile=(128, 64, 64))
    assert r.entry.ctas_per_sm == (2 if paired else 1)
    assert r.schedule.device.ctas_per_sm == r.entry.ctas_per_sm
    assert entry_for(r.schedule, "float16", None, 90) == r.entry
    for ctas in (1, 2):  # (BM, BN, BK, CTAs an SM) forces one entry, on any product
        one = resolve_gemm(GemmProblem(m, n, k, batch=batch, dtype="float16"), H200,
                           tile=(128, 64, 64, ctas))
        assert one.entry.ctas_per_sm == one.schedule.device.ctas_per_sm == ctas


def test_step_operands_follow_the_plan_layouts():
    from skcontract.kernels.resolve import schedule_plan
    from skcontract.contract import contract_path

    _, plan = contract_path("ij,kj->ik", (256, 1001), (384, 1001), shapes=True,
                            dtype=np.float64)
    step = plan.steps[0]
    assert step_operands(step) == (("row", "col"), False)  # rows of 1001 doubles
    s = schedule_plan(plan, H200).steps[0].schedule
    assert s.tile != (128, 64, 16)  # the vec16-only entry is not planned


def test_plans_do_not_grow_with_the_problem():
    """A (10^6, 10^6) x (10^6, 10^6) product: 61 million output tiles, planned as range rows
    (a few per CTA) in well under a second and a few MB, whatever the dtype's entries."""
    import time
    import tracemalloc

    from skcontract import contract_path

    for dtype in (np.float16, np.float64):
        tracemalloc.start()
        t0 = time.perf_counter()
        _, plan = contract_path("ij,jk->ik", (10**6, 10**6), (10**6, 10**6), shapes=True,
                                dtype=dtype, device="h200")
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        s = plan.steps[0].schedule
        bm, bn, _ = s.tile
        assert s.num_tiles == (-(-10**6 // bm)) * (-(-10**6 // bn))
        assert s.num_rows <= 4 * s.grid
        assert seconds < 2.0 and peak < 50e6, (dtype, seconds, peak)


def test_tiles_that_cannot_win_are_not_built():
    """auto skips a tile option whose lower bound (its k-iterations spread perfectly over
    the resident CTAs) cannot beat the best schedule found: for a (10^6)^2 product the
    skinny and one-row fp32 tiles are never built, and the choice is the same as when every
    option is built."""
    from skcontract.schedule import schedule_problem

    big = GemmProblem(10**6, 10**6, 10**6, dtype="float32")
    r = resolve_gemm(big, H200)
    built_tiles = {c.tile for c in r.schedule.candidates}
    assert (8, 256, 16) not in built_tiles and (1, 1024, 8) not in built_tiles
    one_by_one = [schedule_problem(big, H200, tiles=[b.option()], reduction="deterministic")
                  for b in catalogue.entries_for("float32")]
    best = min(one_by_one, key=lambda s: selection_key(s.mode, s.predicted_time_us))
    assert (best.tile, best.mode, best.digest()) == (r.schedule.tile, r.schedule.mode,
                                                      r.schedule.digest())


def test_empty_steps_plan_no_launch():
    from skcontract import contract_path

    for shapes in [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0))]:
        _, plan = contract_path("ij,jk->ik", *shapes, shapes=True, dtype=np.float32)
        assert plan.steps[0].schedule is None


def test_occupancy_is_capped_by_the_devices_shared_memory():
    """An entry declared for two CTAs per SM on Hopper gets one where the SM's shared memory
    holds one (an A100-like device), and an entry whose stages do not fit is not offered."""
    import dataclasses

    from skcontract.kernels.resolve import ctas_on

    a100 = dataclasses.replace(H200, name="A100-like", sms=108, compute_capability=(8, 0),
                               smem_per_sm=164 * 1024)
    skinny = next(b for b in catalogue.entries_for("float32") if b.tile == (8, 256, 16))
    assert (ctas_on(skinny, H200), ctas_on(skinny, a100)) == (2, 1)
    s = resolve_gemm(GemmProblem(8, 65536, 1024, dtype="float32"), a100,
                     tile=(8, 256, 16)).schedule
    assert s.device.ctas_per_sm == 1 and s.grid <= a100.sms
    big = next(b for b in catalogue.entries_for("float64") if b.tile == (128, 64, 32))
    assert ctas_on(big, a100) == 0
    assert resolve_gemm(GemmProblem(2048, 2048, 2048, dtype="float64"), a100).entry != big


def test_hopper_entries_and_the_register_split_fallback(monkeypatch):
    """Aligned fp16 on compute capability 9.0 plans on Wgmma; an entry whose kernel compiles
    to another register count than its split needs is planned around, with a warning naming
    it, and the product planned again on the others (gemm.plan_launch, with the compiler and the
    upload stood in for); the catalogue still offers the entry."""
    from skcontract.kernels import bound, gemm, jit

    h200 = DeviceInfo.h200()
    problem = GemmProblem(4096, 4096, 4096, dtype="float16")
    first = resolve_gemm(problem, h200)
    assert first.entry.FAMILY == "Wgmma" and first.entry.launch_registers == 168
    built = []

    def fake_kernel(spec, dev):
        if spec.entry.launch_registers is not None:
            raise jit.RegisterCountError(f"kernel {spec.name} compiled to 170 registers")
        built.append(spec)
        return SimpleNamespace(spec=spec, occupancy=1)

    monkeypatch.setattr(gemm, "device_info", lambda dev: h200)
    monkeypatch.setattr(jit, "get_kernel", fake_kernel)
    monkeypatch.setattr(bound, "LaunchPlan", lambda kernel, schedule, dev, stream: (
        kernel.spec, schedule))
    monkeypatch.setattr(bound, "_PLANS", {})
    with pytest.warns(RuntimeWarning, match=f"planned again without {first.entry.name}"):
        launch, (spec, schedule) = gemm.plan_launch(
            Product("float16", 1, 4096, 4096, 4096, ("row", "row"), (True, True)), 0, None,
            mode="auto", reduction="deterministic", tile=None, grid=None)
    assert spec.entry.launch_registers is None and built == [spec] and launch.spec == spec
    assert first.entry in catalogue.entries_for("float16", cc=90)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,streams", [(16, 4096, True), (64, 2112, True),
                                          (4096, 32, True), (128, 4096, False),
                                          (1024, 1024, False)])
def test_memory_bound_products_get_the_streaming_entry(dtype, m, n, streams):
    """Skinny products (operand reuse below MEMORY_BOUND_REUSE) of few tiles are offered
    only the dtype's streaming Wgmma tile on Hopper; the others, and any forced tile, keep
    the whole catalogue."""
    r = resolve_gemm(GemmProblem(m, n, 4096, dtype=dtype), DeviceInfo.h200())
    assert catalogue.memory_bound(m, n) == streams
    offered = {tuple(c.tile[:2]) for c in r.schedule.candidates}
    assert (offered == {catalogue.gates.WGMMA_STREAMING_TILE}) == streams
    if streams:
        assert r.entry.tile[:2] == catalogue.gates.WGMMA_STREAMING_TILE
        forced = resolve_gemm(GemmProblem(m, n, 4096, dtype=dtype), DeviceInfo.h200(),
                              tile=(64, 256))
        assert forced.entry.tile[:2] == (64, 256)


@pytest.mark.parametrize("m,n,k,tile", [(4, 13824, 5120, (64, 128)),
                                        (8, 11008, 4096, (64, 128)),
                                        (16, 8192, 8192, (64, 64)),
                                        (4, 16384, 4096, (64, 128))])
def test_memory_bound_products_of_a_wave_run_one_data_parallel_wave(m, n, k, tile):
    """A decode product whose 64 x 64 tiles overflow a wave of SMs runs data-parallel on the
    narrowest streaming tile whose tiles fill between half the SMs and all of them."""
    device = DeviceInfo.h200()
    r = resolve_gemm(GemmProblem(m, n, k, dtype="float16"), device)
    tiles = catalogue.output_tiles(m, n, 1, tile)
    assert r.entry.tile[:2] == tile and str(r.schedule.mode) == "data_parallel"
    assert catalogue.gates.STREAMING_WAVE_MIN_SHARE * device.sms <= tiles <= device.sms
    assert "one data-parallel wave" in r.schedule.reason


@pytest.mark.parametrize("m,n,k", [(4, 4096, 4096), (16, 4096, 14336)])
def test_memory_bound_products_of_few_tiles_keep_stream_k(m, n, k):
    """Where no streaming tile fills half the SMs, the 64 x 64 entry's Stream-K spreads the
    product over all of them; a forced mode or grid keeps the rule out."""
    r = resolve_gemm(GemmProblem(m, n, k, dtype="float16"), DeviceInfo.h200())
    assert r.entry.streams and str(r.schedule.mode) != "data_parallel"
    decode = GemmProblem(4, 13824, 5120, dtype="float16")
    forced = resolve_gemm(decode, DeviceInfo.h200(), mode="stream_k")
    assert forced.entry.streams and str(forced.schedule.mode) == "stream_k"
    gridded = resolve_gemm(decode, DeviceInfo.h200(), grid=64)
    assert gridded.entry.streams and "one data-parallel wave" not in gridded.schedule.reason


def test_memory_bound_products_of_many_tiles_are_left_to_the_cost_model():
    """A tall memory-bound product whose streaming tiles fill more than
    STREAMING_MAX_WAVES waves (a 1 x 1 convolution's) is planned over every entry."""
    m, n, k = 100352, 64, 256
    device = DeviceInfo.h200()
    assert catalogue.memory_bound(m, n, k)
    assert not catalogue.streaming_wanted(m, n, k, 1, device.sms)
    r = resolve_gemm(GemmProblem(m, n, k, dtype="float16"), device)
    assert not r.entry.streams and r.entry.tile[:2] == (128, 64)


def test_memory_bound_rule_counts_the_elements_the_operands_hold():
    """An implicit GEMM's A is a view of fewer elements than M x K: the rule counts those
    (49 x 512 x 4608 reads its 2.4 M elements 97 times: memory-bound; twenty times fewer
    elements than (M + N) K would be read often enough not to be)."""
    m, n, k = 49, 512, 4608
    assert catalogue.memory_bound(m, n, k, operand_elems=49 * 512 + 512 * 4608)
    assert not catalogue.memory_bound(m, n, k, operand_elems=(m + n) * k // 20)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_memory_bound_products_without_a_streaming_entry_keep_the_catalogue(dtype):
    r = resolve_gemm(GemmProblem(16, 4096, 4096, dtype=dtype), DeviceInfo.h200())
    assert not r.entry.streams


@pytest.mark.parametrize("offer", [False, True])
def test_pending_entries_are_built_offered_on_request_and_forced_by_tile(offer, monkeypatch):
    pending = catalogue.Mma16("float16", 64, 128, 32, 4, 2, 2)
    monkeypatch.setitem(catalogue.PENDING, "float16", (pending,))
    monkeypatch.setattr(catalogue.offer, "OFFER_PENDING", offer)
    assert pending in catalogue.all_entries()
    assert (pending in catalogue.entries_for("float16", cc=90)) == offer
    r = resolve_gemm(GemmProblem(512, 512, 4096, dtype="float16"), DeviceInfo.h200(),
                     tile=pending.tile)
    assert r.entry is pending


def test_memory_bound_rule_skips_a_streaming_entry_that_does_not_fit():
    h200 = DeviceInfo.h200()
    streaming = next(b for b in catalogue.entries_for("float16", cc=90) if b.streams)
    assert ctas_on(streaming, h200) == 1
    # the largest SM, to a kilobyte, whose shared memory cannot hold the streaming entry
    small = dataclasses.replace(h200, smem_per_sm=h200.smem_per_sm // 2)
    while ctas_on(streaming, small) == 0:
        small = dataclasses.replace(small, smem_per_sm=small.smem_per_sm + 1024)
    small = dataclasses.replace(small, smem_per_sm=small.smem_per_sm - 1024)
    r = resolve_gemm(GemmProblem(16, 4096, 4096, dtype="float16"), small)
    assert not r.entry.streams
    fits = dataclasses.replace(small, smem_per_sm=small.smem_per_sm + 1024)
    assert resolve_gemm(GemmProblem(16, 4096, 4096, dtype="float16"), fits).entry.streams


@pytest.mark.parametrize("rows,tile_rows,box", [(16, 64, 16), (1, 64, 8), (7, 128, 8),
                                                (64, 64, 64), (100, 64, 64), (200, 256, 200)])
def test_kmajor_boxes_stop_at_the_operand(rows, tile_rows, box):
    from skcontract.kernels.tma import kmajor_box_rows
    assert kmajor_box_rows(rows, tile_rows) == box


def test_the_wgmma_fixup_cost_prices_its_partial_tiles():
    """Wgmma entries carry their family's partial-tile cost into the schedule, and the
    prediction charges it: the same split table costs more with it than at the model's."""
    from skcontract.schedule.heuristics import predict
    s = resolve_gemm(GemmProblem(256, 256, 32768, dtype="float16"), DeviceInfo.h200(),
                     mode="stream_k", tile=(128, 128, 64)).schedule
    assert s.fixup_cost == catalogue.calibration.WGMMA_FIXUP_COST > 1
    args = (s.table, s.cta_offsets, s.grid, s.tile, s.small_tile, "float16", s.accumulator_dtype,
            s.device.with_occupancy(1), s.tile_efficiency)
    assert predict(*args, fixup_cost=s.fixup_cost).time_us == \
        pytest.approx(s.predicted_time_us)
    assert predict(*args).time_us < s.predicted_time_us
    portable = resolve_gemm(GemmProblem(256, 256, 32768, dtype="float32"), DeviceInfo.h200(),
                            mode="stream_k").schedule
    assert portable.fixup_cost == 1.0


@pytest.mark.parametrize("bn", [128, 256])
def test_cluster_pairs_plan_one_unit_per_two_sms(bn):
    """A WgmmaPair entry is one work unit on two CTAs: the schedule's tile is 2 BM x BN
    (each CTA computes BM rows of it), its grid counts units (at most half the SMs), a
    workspace slot holds both halves, and it has no convolution entry."""
    pair = next(b for b in catalogue.all_entries()
                if b.FAMILY == "WgmmaPair" and b.dtype == "float16" and b.bn == bn)
    assert pair.CLUSTER == 2 and pair.bm == 128 and pair.tile == (256, bn, 64)
    assert pair.option().cluster == 2 and pair.option().tile == pair.tile
    assert pair.slot_elems(None) == 256 * bn and pair.IM2COL is None
    for mode in ("data_parallel", "stream_k", "hybrid", "split_k"):
        r = _resolve(2000, 3000, 5000, "float16", tile=pair.tile, mode=mode)
        assert r.entry is pair and tuple(r.schedule.tile) == pair.tile
        assert r.schedule.grid <= H200.sms // 2
        assert entry_for(r.schedule, "float16", None, 90) is pair  # a plan's launch
    with pytest.raises(ValueError, match="WgmmaPair"):
        catalogue.WgmmaPair("float16", 128, 64, 64, 4, 12, 1, ctas_per_sm=2, min_cc=90,
                            vec16_only=True)


def test_narrow_pairs_are_offered_where_b_rows_start_off_lines():
    """The narrow pairs share B's loads, which pay where B's rows start off the L2's lines:
    auto offers them only then (1000^3 fp16, B rows of 2000 bytes, takes the 128 x 64
    pair; the same product with B said to lie on lines keeps the single CTA's tile), a
    forced tile reaches them either way, and an einsum step's B is judged by its
    contiguous rows."""
    narrow = [b for b in catalogue.CATALOGUE["float16"] if b.b_off_lines_only]
    assert {(b.bm, b.bn, b.FAMILY) for b in narrow} == {(64, 64, "WgmmaPair"),
                                                       (128, 64, "WgmmaPair")}
    on = _resolve(1000, 1000, 1000, "float16", b_off_lines=False)
    off = _resolve(1000, 1000, 1000, "float16", b_off_lines=True)
    assert on.entry.FAMILY == "Wgmma" and off.entry in narrow and off.entry.bm == 128
    assert not any(b.b_off_lines_only for b in catalogue.entries_for("float16", cc=90,
                                                                    b_off_lines=False))
    assert _resolve(1024, 1024, 1024, "float16", tile=(256, 64, 64, 1, 2)).entry in narrow
    from skcontract.kernels.resolve import rows_off_lines
    assert rows_off_lines(0, 1000, 0, 2) and not rows_off_lines(0, 1024, 0, 2)
    assert not rows_off_lines(0, 0, 0, 2) and rows_off_lines(0, 40, 0, 4)
    assert rows_off_lines(16, 1024, 0, 2)  # a view off a line: every row starts off one
    assert rows_off_lines(0, 1024, 1000 * 1024 + 8, 2)  # the second batch's rows
    assert not rows_off_lines(0, 1024, 64 * 1024, 2)


def test_a_narrow_pair_is_its_own_entry():
    """The 64 x 64 pair's work unit is 128 x 64, the single 128 x 64 CTA's tile: the entry
    is named by its cluster too, so forcing (128, 64, 64, 1, CTAs a unit) reaches each,
    a plan's schedule says which it is for, and the launch finds that one. Each of the
    pair's CTAs loads half of B: half its rows K-major, half the k rows of its one 64-column
    box N-major."""
    pair = next(b for b in catalogue.all_entries()
                if b.FAMILY == "WgmmaPair" and b.dtype == "float16" and b.bm == 64)
    single = next(b for b in catalogue.all_entries()
                  if b.FAMILY == "Wgmma" and b.dtype == "float16" and b.tile == pair.tile
                  and b.ctas_per_sm == 1)
    for entry in (pair, single):
        r = _resolve(8 * 256, 256, 4096, "float16", tile=(*entry.tile, 1, entry.CLUSTER),
                     mode="data_parallel")
        assert r.entry is entry and r.schedule.cluster == entry.CLUSTER
        assert entry_for(r.schedule, "float16", None, 90) is entry
    # a schedule built by hand for a pair's tile on a device of units (no cluster named)
    wide = next(b for b in catalogue.all_entries()
                if b.FAMILY == "WgmmaPair" and b.dtype == "float16" and b.bn == 128)
    hand = schedule_gemm(512, 128, 8192, device=H200.with_clusters(2), mode="stream_k",
                         tile=wide.tile)
    assert hand.cluster == 1 and entry_for(hand, "float16", None, 90) is wide
    for short in ((128, 64), (128, 64, 64), (128, 64, 64, 1)):  # the single CTA's
        assert _resolve(512, 1024, 4096, "float16", tile=short).entry is single
    from skcontract.kernels.tma import load_box
    assert load_box(False, 1000, pair.bn, 64, pair.CLUSTER) == (64, 32, 1)
    assert load_box(True, 1000, pair.bn, 64, pair.CLUSTER) == (64, 32, 1)
    assert load_box(False, 1000, 128, 64, 2) == (64, 64, 1)
    assert load_box(True, 20, pair.bn, 64, pair.CLUSTER) == (64, 24, 1)


def test_auto_offers_the_pairs_only_for_few_waves():
    """The cluster pairs are offered to products of at most WGMMA_PAIR_MAX_WAVES waves of
    their units (auto takes the 256 x 256 pair on 2000 x 3000 x 5000: 96 units, 1.45 waves
    of 66), not to products of more (8192^3: 1024 units); a forced pair tile is planned
    whatever its waves."""
    pair = next(b for b in catalogue.CATALOGUE["float16"]
                if b.FAMILY == "WgmmaPair" and b.bn == 256)
    units = H200.sms // 2
    assert pair.max_waves == catalogue.gates.WGMMA_PAIR_MAX_WAVES
    assert pair.fills_waves(int(pair.max_waves * units), units)
    assert not pair.fills_waves(int(pair.max_waves * units) + 1, units)
    assert _resolve(2000, 3000, 5000, "float16").entry is pair
    assert _resolve(8192, 8192, 8192, "float16").entry.FAMILY == "Wgmma"
    forced = _resolve(8192, 8192, 8192, "float16", tile=pair.tile)
    assert forced.entry is pair and forced.schedule.grid <= units
    with pytest.raises(ValueError, match="max_waves"):
        dataclasses.replace(pair, max_waves=0.0)


def _pair_128():
    return next(b for b in catalogue.CATALOGUE["float16"]
                if b.FAMILY == "WgmmaPair" and (b.bm, b.bn) == (128, 128))


def _candidate_tiles(r) -> set:
    return {(s.tile, s.cluster) for s in r.schedule.candidates}


def test_the_128x128_pair_is_offered_only_to_long_loops():
    """The 128 x 128 pair is offered only where a tile's loop runs
    WGMMA_PAIR_MIN_K_ITERATIONS k-iterations or more (a last, partial k-tile counts): auto
    takes it on 1536^2 x 8192 (128 k-iterations) and does not plan it at all on 1536^2 x 4096
    (64); a forced pair tile is planned whatever its loop."""
    pair = _pair_128()
    floor = catalogue.gates.WGMMA_PAIR_MIN_K_ITERATIONS[128, 128]
    assert pair.min_k_iterations == floor
    assert pair.runs_long_enough(floor * pair.bk)
    assert pair.runs_long_enough(floor * pair.bk - pair.bk + 1)
    assert not pair.runs_long_enough((floor - 1) * pair.bk)
    assert _resolve(1536, 1536, 8192, "float16").entry is pair
    short = _resolve(1536, 1536, 4096, "float16")
    assert (pair.tile, 2) not in _candidate_tiles(short)
    assert _resolve(1536, 1536, 4096, "float16", tile=(*pair.tile, 1, 2)).entry is pair
    wide = next(b for b in catalogue.CATALOGUE["float16"]
                if b.FAMILY == "WgmmaPair" and b.bn == 256)
    assert wide.min_k_iterations == 0 and wide.runs_long_enough(1)
    with pytest.raises(ValueError, match="min_k_iterations"):
        dataclasses.replace(pair, min_k_iterations=-1)


def test_the_128x128_pair_runs_split_tiles_only():
    """The 128 x 128 pair is planned only where its tiles split (WGMMA_PAIR_SPLITS_ONLY):
    on 1536 x 1408 x 8192, one exact wave of its units, auto lists its data-parallel table
    with the reason and runs the single tile's; a forced data-parallel mode takes another
    entry, a forced pair tile runs data-parallel all the same."""
    pair = _pair_128()
    assert pair.splits_only and pair.option().splits_only
    r = _resolve(1536, 1408, 8192, "float16")
    assert r.entry is not pair and r.schedule.mode == "data_parallel"
    listed = [s for s in r.schedule.candidates if (s.tile, s.cluster) == (pair.tile, 2)]
    assert listed and all(s.mode != "data_parallel" or s.note == SPLITS_ONLY
                          for s in listed)
    assert _resolve(1536, 1536, 8192, "float16", mode="data_parallel").entry is not pair
    forced = _resolve(1536, 1536, 8192, "float16", mode="data_parallel",
                      tile=(*pair.tile, 1, 2))
    assert forced.entry is pair and forced.schedule.mode == "data_parallel"
    assert _resolve(1536, 1536, 8192, "float16", mode="hybrid").entry is pair


def test_a_splits_only_option_is_chosen_on_split_tables_alone():
    """A TileOption with splits_only is never auto's data-parallel pick, however cheap its
    efficiency, and still plans where it is the only option."""
    cheap = TileOption((128, 128, 64), efficiency=0.01, splits_only=True)
    plain = TileOption((128, 64, 64))
    exact = schedule_problem(GemmProblem(128 * 12, 128 * 11, 4096), H200,
                             tiles=[cheap, plain])
    assert exact.mode == "data_parallel" and exact.tile == plain.tile
    split = schedule_problem(GemmProblem(1536, 1536, 8192), H200, tiles=[cheap, plain])
    assert split.tile == cheap.tile and split.mode != "data_parallel"
    dp = schedule_problem(GemmProblem(1536, 1536, 8192), H200, tiles=[cheap, plain],
                          mode="data_parallel")
    assert dp.tile == plain.tile
    alone = schedule_problem(GemmProblem(128 * 12, 128 * 11, 4096), H200, tiles=[cheap])
    assert alone.tile == cheap.tile and alone.mode == "data_parallel"


def test_a_forced_tile_whose_kernel_reads_other_layouts_is_refused_by_name():
    """The tf32 entries read K-major operands only: forcing a tile of theirs on a row-major
    B names the layouts it reads."""
    with pytest.raises(ValueError, match=r"tile \(128, 256, 32\) reads .*'row', 'col'"):
        _resolve(4096, 4096, 1024, "float32", precision="tf32", layouts=("row", "row"),
                 tile=(128, 256, 32))
    r = _resolve(4096, 4096, 1024, "float32", precision="tf32", layouts=("row", "col"),
                 tile=(128, 256, 32))
    assert (r.entry.FAMILY, r.entry.bn) == ("WgmmaTf32", 256)


@pytest.mark.parametrize("dtype,wgmma,portable", [("float32", "WgmmaTf32", "Tf32"),
                                                  ("int8", "WgmmaInt8", "Imma")])
def test_tf32_and_int8_run_wgmma_only_on_k_major_operands(dtype, wgmma, portable):
    """tf32 and s8 wgmma read K-major operands only: a row-major A with a column-major B
    resolves to their Wgmma entries on the H200, any other layout pair to the portable
    entry (float32 with tf32 allowed)."""
    r = _resolve(2048, 2048, 2048, dtype, precision="tf32", layouts=("row", "col"))
    assert r.entry.FAMILY == wgmma
    for layouts in (("row", "row"), ("col", "col"), ("col", "row")):
        r = _resolve(2048, 2048, 2048, dtype, precision="tf32", layouts=layouts)
        assert r.entry.FAMILY == portable, layouts


@pytest.mark.parametrize("mode,reduction", [("aligned", "deterministic"),
                                            ("stream_k", "arrival"), ("auto", "deterministic"),
                                            ("hybrid", "atomic")])
def test_an_entry_is_planned_only_with_the_protocols_it_runs(mode, reduction):
    """The tf32 128 x 256 entry runs no arrival protocol (its kernel would spill): a
    schedule that needs arrival (the aligned split, a forced arrival) is planned on another
    entry, and the others may take it."""
    for shape in ((4096, 4096, 4096), (2304, 2304, 4096)):
        r = _resolve(*shape, "float32", precision="tf32", layouts=("row", "col"), mode=mode,
                     reduction=reduction)
        assert r.schedule.protocol in r.entry.protocols(), (shape, r.entry.name)
    wide = _resolve(4096, 4096, 4096, "float32", precision="tf32", layouts=("row", "col"),
                    tile=(128, 256, 32))
    assert "arrival" not in wide.entry.protocols() and wide.schedule.protocol != "arrival"


def test_3xtf32_runs_wgmma_on_aligned_operands_and_exact_float32_elsewhere():
    """precision="3xtf32": its Wgmma entries on the H200 for aligned operands of any layout
    (an MN-major one turned K-major in the stages: the spec says so); the exact FFMA entries
    for unaligned operands or before sm_90 (float32 accuracy either way)."""
    for layouts in LAYOUT_PAIRS:
        r = _resolve(2048, 2048, 2048, "float32", precision="3xtf32", layouts=layouts)
        assert r.entry.FAMILY == "WgmmaTf32x3", layouts
        spec = specialise(r.entry, protocol="none", a_layout=layouts[0], b_layout=layouts[1])
        assert r.entry.transposes(spec) == (layouts != ("row", "col")), layouts
    assert _resolve(2048, 2048, 2048, "float32", precision="3xtf32", layouts=("row", "col"),
                    vec16=False).entry.FAMILY == "Ffma"
    a100 = dataclasses.replace(H200, compute_capability=(8, 0))
    r = resolve_gemm(GemmProblem(2048, 2048, 2048, dtype="float32"), a100,
                     precision="3xtf32")
    assert r.entry.FAMILY == "Ffma"
    # other dtypes ignore a precision; an unknown one is refused by name
    assert _resolve(2048, 2048, 2048, "float16", precision="3xtf32").entry.dtype == "float16"
    with pytest.raises(ValueError, match="'fp32x3'"):
        _resolve(2048, 2048, 2048, "float32", precision="fp32x3")


def test_a_k_major_copy_counts_a_repeated_matrix_once():
    """The copy's elements, as gemm and the plan count them: each MN-major operand's
    matrices, one where its batch repeats it (copied once, read back with stride 0)."""
    from skcontract.kernels.resolve import TURN_COST_SHARE, k_major_copy_elems
    assert k_major_copy_elems(True, False, 256, 3584, 8192, 4, 1) == 4 * 256 * 8192
    assert k_major_copy_elems(False, True, 256, 3584, 8192, 4, 1) == 8192 * 3584
    assert k_major_copy_elems(True, True, 2, 3, 5, 1, 7) == 2 * 5 + 7 * 5 * 3
    assert k_major_copy_elems(False, False, 2, 3, 5, 9, 9) == 0
    # a repeated B of 4096^2 against 16 x 256 rows: cheap as one matrix, dear as sixteen
    flops = 2.0 * 16 * 256 * 4096 * 4096
    from skcontract.kernels.resolve import reads_k_major
    assert reads_k_major("float32", "3xtf32", 4096, 90, True,
                         k_major_copy_elems(False, True, 256, 4096, 4096, 16, 1), flops)
    assert not reads_k_major("float32", "3xtf32", 4096, 90, True,
                             k_major_copy_elems(False, True, 256, 4096, 4096, 16, 16), flops)
    assert 0 < TURN_COST_SHARE < 1


def test_a_plan_at_3xtf32_copies_only_operands_cheap_to_copy():
    """contract_path(precision="3xtf32") plans float32 GEMM steps on its entries: an
    MN-major operand whose copy costs less than TURN_COST_SHARE of the product is copied
    K-major (the reason says so); a dearer one (B of a 256-row product, A of a 256-column
    one) is read as it lies, its kernel turning it in the stages."""
    from skcontract.contract import contract_path
    from skcontract.kernels.resolve import resolve_step

    def step(subscripts, *shapes):
        _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=np.float32,
                                device="h200", precision="3xtf32")
        return plan.steps[0]

    for subscripts, shapes, layouts, copied in (
            ("ij,jk->ik", ((256, 8192), (8192, 3584)), ("row", "row"), ""),
            ("ji,jk->ik", ((8192, 3584), (8192, 256)), ("col", "row"), ""),
            ("ij,kj->ik", ((4096, 4096), (4096, 4096)), ("row", "col"), ""),
            ("ij,jk->ik", ((4096, 4096), (4096, 4096)), ("row", "col"), "B"),
            ("ji,jk->ik", ((4096, 4096), (4096, 4096)), ("row", "col"), "A and B")):
        s = step(subscripts, *shapes)
        assert step_operands(s, 90) == (layouts, True), subscripts
        assert type(resolve_step(s, H200).entry).__name__ == "WgmmaTf32x3"
        assert s.schedule.reason.endswith(f"; {copied} copied K-major for 3xtf32") if copied \
            else "copied" not in s.schedule.reason, (subscripts, shapes, s.schedule.reason)


def test_a_plan_at_tf32_runs_its_float32_steps_on_its_entries():
    """contract_path(precision="tf32") plans float32 GEMM steps on the tf32 entries, for
    K-major copies where the operands are not (the reason says which are copied), and the
    step names the precision; the exact plan of the same product does not."""
    precision, family = "tf32", "WgmmaTf32"
    from skcontract.contract import contract_path
    from skcontract.kernels.resolve import resolve_step

    def planned(subscripts, *shapes, **kw):
        _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=np.float32,
                                device="h200", **kw)
        return plan.steps[0]

    exact = planned("ij,jk->ik", (4096, 4096), (4096, 4096), precision="exact")
    assert exact.float32_precision is None and "tf32" not in str(exact.row())
    step = planned("ij,jk->ik", (4096, 4096), (4096, 4096), precision=precision)
    assert step.precision == precision
    assert step_operands(step, 90) == (("row", "col"), True)
    assert type(resolve_step(step, H200).entry).__name__ == family
    assert step.schedule.reason.endswith(f"; B copied K-major for {precision}")
    assert step.row()[-1].startswith(f"{precision}: ")
    both = planned("ji,jk->ik", (4096, 4096), (4096, 4096), precision=precision)
    assert both.schedule.reason.endswith(f"; A and B copied K-major for {precision}")
    k_major = planned("ij,kj->ik", (4096, 4096), (4096, 4096), precision=precision)
    assert "copied" not in k_major.schedule.reason and k_major.precision == precision


def test_float32_runs_on_3xtf32_by_default_from_its_k_threshold():
    """At the default precision a float32 step whose sum reaches X3_DEFAULT_MIN_K runs on
    the 3xTF32 entries where the device has them (its reason says so) and one shorter runs
    exactly, as "exact" runs every one; without the 3xTF32 tensor-core entries (sm_80) it
    runs exactly; a memory-bound step stays on the Dot family."""
    from skcontract.contract import contract_path
    from skcontract.dtypes import X3_DEFAULT_MIN_K

    def family(subscripts, *shapes, device="h200", **kw):
        _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=np.float32,
                                device=device, **kw)
        step = plan.steps[0]
        return step.launch.entry.FAMILY, step.schedule.reason

    k = X3_DEFAULT_MIN_K
    fam, reason = family("ij,jk->ik", (4096, k), (k, 4096))
    assert fam == "WgmmaTf32x3" and reason.startswith(f"float32 at 3xtf32 (K {k:,} >= {k:,})")
    assert family("ij,jk->ik", (4096, k // 2), (k // 2, 4096))[0] == "Ffma"
    assert family("ij,jk->ik", (4096, 4096), (4096, 4096), precision="exact")[0] == "Ffma"
    # a scheduled step asked for at "exact" says so, and planned again (other operands at
    # run time: replan.py) it stays exact
    from skcontract.kernels.resolve import resolve_step
    _, plan = contract_path("ij,jk->ik", (4096, 4096), (4096, 4096), shapes=True,
                            dtype=np.float32, device="h200", precision="exact")
    assert plan.steps[0].precision == "exact"
    assert resolve_step(plan.steps[0], DeviceInfo.h200()).entry.FAMILY == "Ffma"
    sm80 = dataclasses.replace(DeviceInfo.h200(), compute_capability=(8, 0))
    assert family("ij,jk->ik", (4096, 4096), (4096, 4096), device=sm80)[0] == "Ffma"
    assert family("ij,j->i", (4096, 4096), (4096,))[0] == "Dot"


def test_a_plan_at_a_precision_keeps_exact_steps_exact():
    """Where the precision's entries do not run a float32 step (a memory-bound step on the
    Dot family), the step says precision None; rows off 16 bytes, which TMA cannot read, are
    copied onto 16 bytes and run at the precision (3xTF32, whose kernels turn operands in
    their stages), or on the portable kernels of the precision where its Wgmma kernels read
    K-major copies only (tf32, whose K-major copies would still miss 16 bytes); other dtypes carry
    the precision but show none (their kernels ignore it)."""
    from skcontract.contract import contract_path

    def planned(subscripts, *shapes, dtype=np.float32):
        _, plan = contract_path(subscripts, *shapes, shapes=True, dtype=dtype,
                                device="h200", precision="3xtf32")
        return plan.steps[0]

    dot = planned("ij,j->i", (4096, 4096), (4096,))
    assert dot.precision is None and "Dot" in dot.schedule.reason
    for sub, shapes in (("j,jk->k", ((4096,), (4096, 4096))),  # the Dot family's own layout
                        ("ij,jk->ik", ((1, 4096), (4096, 4096)))):
        _, exact = contract_path(sub, *shapes, shapes=True, dtype=np.float32, device="h200")
        assert planned(sub, *shapes).row() == exact.steps[0].row()
    odd = planned("ij,jk->ik", (4096, 4095), (4095, 4096))
    assert odd.precision == "3xtf32" and odd.launch.aligned_copies == (True, False)
    assert "A copied into rows on 16 bytes" in odd.schedule.reason
    _, tf32 = contract_path("ij,jk->ik", (4096, 4095), (4095, 4096), shapes=True,
                            dtype=np.float32, device="h200", precision="tf32")
    assert tf32.steps[0].precision == "tf32" and "copied" not in tf32.steps[0].schedule.reason
    half = planned("ij,jk->ik", (4096, 4096), (4096, 4096), dtype=np.float16)
    _, exact = contract_path("ij,jk->ik", (4096, 4096), (4096, 4096), shapes=True,
                             dtype=np.float16, device="h200")
    assert half.row() == exact.steps[0].row()


@pytest.mark.parametrize("shape,grid", [((1056, 1056, 8192), 81), ((1152, 1152, 4096), 81),
                                        ((1408, 1152, 4096), 99), ((1024, 1536, 4096), 96)])
def test_a_partial_wave_of_long_loops_runs_data_parallel(shape, grid):
    """The products whose 128 x 128 tiles make one partial wave of loops of 64 k-iterations
    or more run data-parallel on that many CTAs (measured 9 - 18% faster than Stream-K on
    132, docs/benchmarks/log.md); 1024^3 (16 k-iterations) keeps a full wave of 128 x 64."""
    s = _resolve(*shape, "float16").schedule
    assert (s.mode, s.tile[:2], s.grid) == ("data_parallel", (128, 128), grid)
    s = _resolve(1024, 1024, 1024, "float16").schedule
    assert (s.mode, s.tile[:2], s.grid) == ("data_parallel", (128, 64), 128)
    s = _resolve(*shape, "float16", mode="stream_k").schedule  # measured on DP waves only
    assert (s.mode, s.grid) == ("stream_k", 132)
    s = _resolve(256, 3584, 8192, "float16", mode="data_parallel").schedule  # 56 CTAs: no
    assert (s.tile[:2], s.grid) == ((128, 64), 112)


def test_partial_wave_scale_prices_only_whole_tiles_of_long_loops():
    from skcontract.schedule.heuristics import SOLO_MIN_K_ITERATIONS, partial_wave_scale
    bk, k = 64, 64 * SOLO_MIN_K_ITERATIONS

    def table(k_end, tile=-1):
        t = np.zeros((1, T.NUM_COLUMNS), dtype=np.int32)
        t[0, T.K1], t[0, T.TILE] = k_end, tile
        return t

    assert partial_wave_scale(table(k), 81, 132, 0.65, bk) == pytest.approx(0.65)
    assert partial_wave_scale(table(k), 100, 132, 0.65, bk) == pytest.approx(100 / 132)
    assert partial_wave_scale(table(k), 132, 132, 0.65, bk) == 1.0  # a full wave
    assert partial_wave_scale(table(k), 56, 132, 0.65, bk) == 1.0  # too few SMs
    assert partial_wave_scale(table(k - bk), 81, 132, 0.65, bk) == 1.0  # a short loop
    assert partial_wave_scale(table(k, tile=0), 81, 132, 0.65, bk) == 1.0  # split tiles
    assert partial_wave_scale(table(k), 81, 132, 1.0, bk) == 1.0  # not measured apart
