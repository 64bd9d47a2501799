"""The cost-model calibration (tools.calibrate) and the measured H200 model."""
import dataclasses

import numpy as np
import pytest

from skcontract.schedule import DeviceInfo, schedule_gemm
from skcontract.schedule.heuristics import (DEFAULT_COST, MEASURED_H200_COST, CostModel,
                                            cost_of, predict, rule_mode)
from tools import calibrate as C

SHAPES = [  # (m, n, k, batch): quantised, few-tile/long-K, many waves, exact waves; 256 x
    # 3584 at two K: Stream-K on the 128 x 128 pair (8192) and on the single tile (4096),
    # whose rows the fit needs to place b (without the 4096 row it stops at b = 0.81)
    (2176, 1024, 4096, 1), (1280, 2560, 4096, 1), (256, 256, 8192, 1), (128, 128, 16384, 1),
    (1000, 1000, 1000, 1), (3200, 3200, 3200, 1), (512, 1024, 4096, 1), (1536, 1408, 2048, 1),
    (256, 3584, 8192, 1), (256, 3584, 4096, 1), (2, 512, 512, 2048),
]


@pytest.fixture(scope="module", autouse=True)
def _each_row_scheduled_once():
    """C.rebuild(row) with its defaults is a function of the row's dtype, shape and mode
    alone (the schedule the measurement device gives it): the fits below and _rows ask it
    for the same rows again and again (some 300 calls for 70 rows), so each row is
    scheduled once for this module (the real rebuild; the same Schedule returned again)."""
    real, memo = C.rebuild, {}

    def rebuild(row, occupancy=None, cost=C.MEASURED_UNDER, mode=None):
        if occupancy is not None or cost is not C.MEASURED_UNDER or mode is not None:
            return real(row, occupancy, cost, mode)
        key = (row["dtype"], int(row["m"]), int(row["n"]), int(row["k"]),
               int(row.get("batch", 1)), row["mode"])
        if key not in memo:
            memo[key] = real(row)
        return memo[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "rebuild", rebuild)
        yield


def _rows(model: CostModel, dtype="float16"):
    """Synthetic benchmark rows: the time each forced schedule takes under ``model``."""
    rows = []
    for m, n, k, b in SHAPES:
        for mode in C.FORCED_MODES:
            r = {"class": "synthetic", "batch": b, "m": m, "n": n, "k": k, "dtype": dtype,
                 "mode": mode}
            s = C.rebuild(r)
            # the schedule's own device: a cluster pair's is one of units
            dev = dataclasses.replace(s.device, cost=model)
            r["us"] = predict(s.table, s.cta_offsets, s.grid, s.tile, None, dtype,
                              s.accumulator_dtype, dev, s.tile_efficiency, s.fixup_cost,
                              solo_fraction=s.solo_fraction).time_us
            rows.append(r)
    return rows


def test_features_reproduce_predict():
    # the fit's linear view of a schedule must be the model predict() evaluates
    model = CostModel(a=7.0, b=0.8, c=0.9, d=1.3)
    rows = _rows(model)
    samples = C.samples_from_rows(rows)
    groups = sorted({s.group for s in samples})
    theta = C.theta_of(model, groups, {g: "float16" for g in groups})
    e = C.log_errors(samples, {g: i for i, g in enumerate(groups)}, theta)
    assert np.max(np.abs(e)) < 1e-9


def test_fit_recovers_known_constants():
    true = CostModel(a=12.0, b=0.3, c=1.1, d=2.0)
    samples = C.samples_from_rows(_rows(true))
    res = C.fit(samples, start=DEFAULT_COST)   # start far away (a=4, c=0.35, ...)
    assert np.median(np.abs(res.before)) > 0.3  # the fit has something to do
    assert np.max(np.abs(res.after)) < 1e-3
    got = res.model
    for name in ("a", "c", "d"):
        assert getattr(got, name) == pytest.approx(getattr(true, name), rel=2e-2), name
    assert got.b == pytest.approx(true.b, abs=0.05)


def test_fit_recovers_slowdown():
    true = CostModel(a=10.0, b=0.2, c=1.0, d=1.0)
    rows = _rows(true)
    # fp32 rows timed with a slowdown of 4 on the 128x128 tile
    slow = CostModel(a=10.0, b=0.2, c=1.0, d=1.0, slowdown=(("float32", 4.0),))
    rows += [r for r in _rows(slow, "float32") if C.rebuild(r).tile[:2] == (128, 128)]
    res = C.fit(C.samples_from_rows(rows))
    assert res.model.dtype_slowdown("float32") == pytest.approx(4.0, rel=2e-2)
    assert res.model.c == pytest.approx(1.0, rel=2e-2)


def test_nnls_matches_constrained_solution():
    rng = np.random.default_rng(0)
    A = rng.random((30, 4))
    x_true = np.array([1.0, 0.0, 2.0, 0.5])
    x = C.nnls(A, A @ x_true)
    assert np.allclose(x, x_true, atol=1e-8)
    x = C.nnls(A, -A @ x_true)          # best non-negative fit of a negative target is 0
    assert np.all(x >= 0)


def test_h200_uses_measured_cost():
    assert DeviceInfo.h200().cost is MEASURED_H200_COST
    assert DeviceInfo.h200(2).cost is MEASURED_H200_COST
    assert cost_of(DeviceInfo.h200()) is MEASURED_H200_COST
    assert MEASURED_H200_COST != DEFAULT_COST
    # unknown devices keep the guesses; H100/H200 names without a cost get the measured one
    other = DeviceInfo("Some GPU", 100, (8, 0), 40 << 20, 164 << 10)
    assert cost_of(other) is DEFAULT_COST
    h100 = DeviceInfo("NVIDIA H100 80GB HBM3", 132, (9, 0), 50 << 20, 228 << 10)
    assert cost_of(h100) is MEASURED_H200_COST


def test_rules_kept_and_tail_rule_gone():
    assert rule_mode(264, 128, 132) and "exact" in rule_mode(264, 128, 132)
    assert rule_mode(200, 8, 132) and "k-iterations" in rule_mode(200, 8, 132)
    assert rule_mode(200, 128, 132) is None   # tail of 68 >= half a wave: model decides


def test_tail_half_full_now_stream_k_on_h200():
    # measured 1.32x faster than DP on the H200 (docs/benchmarks/cost-model-h200.md)
    s = schedule_gemm(1280, 2560, 4096, device=DeviceInfo.h200(), tile=(128, 128, 32),
                      reduction="deterministic")
    assert s.mode in ("stream_k", "hybrid")
