"""The developer tools of tools/: the library imports none of them; the kernel warmer's spec
selection (no GPU needed to choose the specs)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skcontract.kernels import catalogue, specs
from skcontract.kernels.resolve import resolve_gemm
from skcontract.schedule import DeviceInfo, GemmProblem
from skcontract.schedule.table import RANGE_FIRST
from tools import time_gemm, trace_kernel, warm_kernels


def test_the_library_imports_no_tools():
    code = ("import sys, skcontract, skcontract.schedule, skcontract.kernels, "
            "skcontract.kernels.gemm, skcontract.kernels.jit; "
            "print([m for m in sys.modules if m == 'tools' or m.startswith('tools.')])")
    root = Path(__file__).resolve().parents[2]  # this checkout's skcontract
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out.strip() == "[]"


def test_warm_selects_every_entrys_specializations():
    every = specs.all_specs()
    assert warm_kernels.select("all") == every
    assert {s.entry for s in every} == set(catalogue.all_entries())
    pending = {b for entries in catalogue.PENDING.values() for b in entries}
    offered = warm_kernels.select("default-tiles")
    assert offered == [s for s in every if s.entry not in pending]
    assert {s.entry for s in offered} == set(catalogue.all_entries()) - pending
    assert warm_kernels.select("representative") == specs.representative_specs()
    fp64 = warm_kernels.select("all", "float64")
    assert fp64 and all(s.dtype_in == "float64" for s in fp64)
    pairs = warm_kernels.select("all", families="WgmmaPair")
    assert pairs and all(s.entry.FAMILY == "WgmmaPair" for s in pairs)


def test_trace_report_aligns_ctas_by_their_clocks():
    """Two CTAs 1 us apart, 2 GHz clocks: each event's time from the first CTA's start and
    each phase's length per CTA; unset stamps leave an event out."""
    stamps = np.zeros((2, trace_kernel.TRACE_SLOTS), np.uint64)
    ev = {name: trace_kernel.FIRST_CLOCK_SLOT + i for i, name in enumerate(trace_kernel.EVENTS)}
    for cta, (gt0, clk0, landed_us) in enumerate([(1000, 50000, 1.0), (2000, 900000, 2.0)]):
        stamps[cta, 0], stamps[cta, 1] = gt0, gt0 + 10000
        stamps[cta, ev["start"]], stamps[cta, ev["end"]] = clk0, clk0 + 20000
        stamps[cta, ev["first_landed"]] = clk0 + int(landed_us * 2000)
    rows = {line.split()[0]: line.split()[1:] for line in trace_kernel.report(stamps)[2:]}
    assert rows["first_landed"] == ["2", "1.00", "2.00", "3.00"]
    assert rows["end"] == ["2", "10.00", "10.50", "11.00"]
    assert "mainloop_done" not in rows
    phase = next(line for line in trace_kernel.report(stamps) if line.startswith("first k-tile"))
    assert phase.split()[-4:] == ["2", "1.00", "1.50", "2.00"]
    stamps[1, ev["start"]] = 0  # a CTA without its start stamp is left out
    rows = {line.split()[0]: line.split()[1:] for line in trace_kernel.report(stamps)[2:]}
    assert rows["first_landed"] == ["1", "1.00", "1.00", "1.00"]
    stamps[0, ev["end"]] = 0
    assert "no CTA stamped" in trace_kernel.report(stamps)[0]


def test_trace_report_keeps_nanoseconds_of_real_timestamps():
    """The globaltimer counts ns since the epoch (about 1.8e18, where float64 steps by 256
    ns) and the SM clock from the GPU's start: a 0.1 us phase still reads 0.10."""
    stamps = np.zeros((1, trace_kernel.TRACE_SLOTS), np.uint64)
    ev = {name: trace_kernel.FIRST_CLOCK_SLOT + i for i, name in enumerate(trace_kernel.EVENTS)}
    gt0, clk0 = 1_800_000_000_000_000_123, 987_654_321_987
    stamps[0, 0], stamps[0, 1] = gt0, gt0 + 5000
    stamps[0, ev["start"]], stamps[0, ev["end"]] = clk0, clk0 + 10000  # 2 GHz
    stamps[0, ev["first_split"]] = clk0 + 200
    rows = {line.split()[0]: line.split()[1:] for line in trace_kernel.report(stamps)[2:]}
    assert rows["first_split"] == ["1", "0.10", "0.10", "0.10"]


def test_ncu_stalls_reads_the_source_page_per_kernel():
    """tools.ncu_stalls: a kernel's instructions from ncu's source-page CSV (thousands with
    commas, non-CSV lines skipped), its samples in all, and the top instruction first with
    its largest stall reasons."""
    from tools import ncu_stalls
    head = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
            '"stall_long_sb","stall_wait","stall_wait (Not Issued)"')
    lines = ["==PROF== Connected to process 1\n", '"Kernel Name","k1",\n', head + "\n",
             '"0x10","HGMMA.64x64x16.F32 R24","1,200","30,720","0","900","5"\n',
             '"0x20","BRA !P0","300","30,208","250","10","0"\n',
             '"Kernel Name","k2",\n', head + "\n", '"0x10","EXIT","0","128","0","0","0"\n']
    k1, k2 = ncu_stalls.read(lines)
    assert (k1.name, len(k1.rows), k1.total()) == ("k1", 2, 1500.0)
    assert (k2.name, k2.total()) == ("k2", 0.0)
    out = ncu_stalls.report(k1, top=1)
    assert "1500 samples" in out[0] and out[1].startswith("stalls: wait 60.7%, long_sb 16.7%")
    assert len(out) == 3 and "HGMMA" in out[2] and " 80.0% " in out[2]
    assert out[2].endswith("wait=900")


def test_plot_probes_groups_medians_by_shape_and_tile():
    """tools.plot_probes: a (shape, tile) group's median time per probe, cuBLAS's median on
    the shape, groups in the order asked for (a missing probe is left out, not zero)."""
    from tools import plot_probes
    rows = [{"shape": "512x1024x8192", "tile": [64, 64, 64], "probe": p, "us": us,
             "torch_us": 17.0 + i}
            for i, (p, us) in enumerate([("none", 23.0), ("none", 22.0), ("none", 30.0),
                                         ("loads", 20.7), ("mma", 20.1)])]
    rows.append({"shape": "8x256x256x4096", "tile": [128, 64, 64, 1, 2], "us": 14.0})
    first, second = plot_probes.groups(rows, ["8x256x256x4096:128x64x64x1x2",
                                              "512x1024x8192:64x64x64"])
    assert first == {"label": "128x64x64x1x2\n8x256x256x4096", "times": {"none": 14.0},
                     "peer": None}
    assert second["times"] == {"none": 23.0, "loads": 20.7, "mma": 20.1}
    assert second["peer"] == 19.0
    assert [g["label"] for g in plot_probes.groups(rows)] == [
        "64x64x64\n512x1024x8192", "128x64x64x1x2\n8x256x256x4096"]


def test_time_gemm_stages_swaps_the_entries_a_tile_forces_and_puts_them_back():
    def picked(tile):
        return resolve_gemm(GemmProblem(512, 1024, 8192, dtype="float16"),
                            DeviceInfo.h200(), tile=tile).entry

    before = catalogue.entries_for("float16", cc=90)
    for tile in [(64, 64, 64, 1, 1), (128, 64, 64, 1, 2)]:  # the 64x64 CTA; its pair
        with time_gemm._stages_swapped(tile, 5):
            assert picked(tile).stages == 5
            changed = [b for b in catalogue.entries_for("float16", cc=90) if b not in before]
            assert changed == [picked(tile)]
        assert catalogue.entries_for("float16", cc=90) == before
    with pytest.raises(ValueError, match="at least two stages"):
        with time_gemm._stages_swapped((64, 64, 64, 1, 1), 1):
            pass
    with pytest.raises(ValueError, match="no catalogue entry"):
        with time_gemm._stages_swapped((48, 48, 64), 5):
            pass
    assert catalogue.entries_for("float16", cc=90) == before


def test_ktile_report_times_loads_gaps_and_k_tiles_in_flight():
    """One CTA at 2 GHz issuing a k-tile every 1 us, each landing 1.5 us later (the next
    issue finds one in flight); a CTA that stamped nothing is left out."""
    kst = np.zeros((2, 8, 2), np.uint64)
    for t in range(4):
        kst[0, t] = (1000 + 2000 * t, 4000 + 2000 * t)
    # a row: its name in 16 columns, the quantiles over every k-tile | from k-tile 1 on
    rows = {line[:16].strip(): [part.split() for part in line[16:].split("|")]
            for line in trace_kernel.ktile_report(kst, 2.0, 1)[1:]}
    assert rows["load (us)"] == [["1.500"] * 5, ["1.500"] * 5]
    assert rows["issue gap (us)"][1] == ["1.000"] * 5
    assert rows["in flight"] == [["0.000", "0.300", "1.000", "1.000", "1.000"], ["1.000"] * 5]
    assert "4 stamped in 1 CTAs" in trace_kernel.ktile_report(kst, 2.0, 1)[0]
    assert "no k-tile" in trace_kernel.ktile_report(np.zeros((1, 8, 2), np.uint64), 2.0, 0)[0]


def test_time_gemm_walk_plans_the_forced_tile_with_the_groups_and_walk_asked():
    assert time_gemm.parse_walk("auto:N:3") == (None, "N", 3)
    assert time_gemm.parse_walk("1:auto:auto") == (1, None, None)
    for bad in ("1:N", "x:N:3", "1:Q:3"):
        with pytest.raises(ValueError, match="--walk"):
            time_gemm.parse_walk(bad)
    for bad in ((0, "N", 3), (1, "N", -1), (1, "N", 8)):  # the kernels decode swizzles 0 - 7
        with pytest.raises(ValueError, match="groups|swizzle"):  # the scheduler refuses them
            time_gemm.walk_schedule(1056, 1056, 8192, 1, "float16", "stream_k",
                                    (128, 128, 64), None, None, bad)
    # 81 whole tiles on 81 CTAs: Stream-K's auto groups deal CTA c tile 3 (c mod 27) + c // 27
    # (the range rows' first tile); one group deals CTA c tile c, as data-parallel does
    auto = time_gemm.walk_schedule(1056, 1056, 8192, 1, "float16", "stream_k", (128, 128, 64),
                                   81, "deterministic", (None, None, None)).schedule
    one = time_gemm.walk_schedule(1056, 1056, 8192, 1, "float16", "stream_k", (128, 128, 64),
                                  81, "deterministic", (1, "M", 0)).schedule
    first = RANGE_FIRST
    assert auto.groups == 3 and auto.table[:3, first].tolist() == [0, 3, 6]
    assert (one.groups, one.raster, one.log_swizzle) == (1, "M", 0)
    assert one.table[:, first].tolist() == list(range(81))


@pytest.mark.parametrize("dtype, tile", [("float16", (128, 64, 64)), ("float32", (8, 256, 16)),
                                         ("float16", (128, 64, 64, 1, 2))])
def test_time_gemm_walk_at_auto_plans_what_the_forced_tile_plans(dtype, tile):
    """An all-auto walk is the plain --tile row's plan: the entry at its own occupancy (two
    CTAs an SM for these), so the walks compare with it."""
    m, n, k = 512, 1024, 8192
    walked = time_gemm.walk_schedule(m, n, k, 1, dtype, "stream_k", tile, None, None,
                                     (None, None, None))
    plain = resolve_gemm(GemmProblem(m, n, k, dtype=dtype), DeviceInfo.h200(), mode="stream_k",
                         tile=tile, layouts=("row", "row"))
    assert walked.entry == plain.entry
    assert walked.schedule.digest() == plain.schedule.digest()
    assert walked.schedule.grid == plain.schedule.grid


def test_sm_placement_probe_compiles_and_joins_clusters_into_gpcs():
    from tools import sm_placement
    assert b"sm_probe" in sm_placement.compile_probe("sm_90a")  # the kernel, by its name
    # clusters never straddle a GPC: SMs that shared one in any launch are one GPC's
    assert sm_placement.gpc_groups([[0, 1], [2, 3], [1, 4], [5]]) == [[0, 1, 4], [2, 3], [5]]
