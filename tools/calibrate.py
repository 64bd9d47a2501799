"""Fit the cost model's constants to measured GEMM times.

    python -m tools.calibrate [--json docs/benchmarks/gemm-h200.json]

For every row of the benchmark JSON whose mode is ``data_parallel``, ``stream_k`` or
``hybrid`` it rebuilds the schedule the GPU ran: :func:`skcontract.kernels.resolve.resolve_gemm`
(``reduction="deterministic"``, the catalogue's entries at their declared occupancy;
``--occupancy DTYPE=N`` overrides) on a 132-SM CC 9.0 device under the cost model in effect
at measurement time (:data:`MEASURED_UNDER`). Then it fits

    time = a + sum over waves of max over CTAs (c_g * k-iterations + b' * partials + d' * merges)

(:func:`heuristics.predict`; ``b' = b * scale``, ``d' = d * scale`` for the tile and
accumulator; ``c_g`` is one coefficient per (dtype class, tile), from which ``c``,
``DTYPE_SLOWDOWN`` and the tile efficiencies are read back) by minimising the squared *log*
error. The model is piecewise linear (a max over CTAs), so the fit alternates: find each
row's critical CTA under the current constants, then one Gauss-Newton step on the log error
solved as a non-negative least-squares problem, until the constants and the critical CTAs
stop changing. NumPy only.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from skcontract.bench.timing import geomean
from skcontract.kernels.catalogue import CXX_TYPES, entries_for
from skcontract.kernels.resolve import resolve_gemm, rows_off_lines
from skcontract.schedule import GemmProblem, schedule_problem
from skcontract.schedule.device import DeviceInfo
from skcontract.schedule.heuristics import (DEFAULT_COST, MEASURED_H200_COST, REF_TILE,
                                            CostModel, iteration_cost, partial_wave_scale,
                                            row_costs)

DEFAULT_JSON = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "gemm-h200.json"
FORCED_MODES = ("data_parallel", "stream_k", "hybrid")
"""Modes whose rows are fitted (``auto`` rows are checks: they ran one of these schedules)."""

SM_COUNT = 132
COMPUTE_CAPABILITY = (9, 0)

LOG_TOL = 1e-10
"""Stop when the mean squared log error improves by less than this."""
MAX_ITERATIONS = 200


def dtype_class(dtype: str) -> str:
    return "16bit" if dtype in ("float16", "bfloat16") else dtype


def _vol(tile) -> float:
    return tile[0] * tile[1] * tile[2] / float(np.prod(REF_TILE))


# ---------------------------------------------------------------------------------------
# Rebuilding what ran
# ---------------------------------------------------------------------------------------
MEASURED_UNDER = MEASURED_H200_COST
"""The cost model in effect when docs/benchmarks/gemm-h200.json was measured: auto rows and
every choice the launcher made (tiles, grids) came from it."""


def measurement_device(dtype: str, occupancy: dict | None = None,
                       cost: CostModel = MEASURED_UNDER) -> DeviceInfo:
    d = DeviceInfo.h200(ctas_per_sm=(occupancy or {}).get(dtype, 1))
    return replace(d, name="NVIDIA H200 (as measured)", sms=SM_COUNT,
                   compute_capability=COMPUTE_CAPABILITY, cost=cost)


def rebuild(row: dict, occupancy: dict | None = None, cost: CostModel = MEASURED_UNDER,
            mode: str | None = None):
    """The schedule the GPU ran for ``row`` (or would run with ``cost`` / ``mode``)."""
    dt = row["dtype"]
    problem = GemmProblem(int(row["m"]), int(row["n"]), int(row["k"]),
                          batch=int(row.get("batch", 1)), dtype=dt)
    device = measurement_device(dt, occupancy, cost)
    # the benchmark's operands are C-contiguous: B's rows are N elements apart
    b_off = rows_off_lines(0, problem.n, problem.k * problem.n if problem.batch > 1 else 0,
                           CXX_TYPES[dt][1])
    if occupancy is None:  # the catalogue's entries at their declared occupancy
        return resolve_gemm(problem, device, mode=mode or row["mode"],
                            b_off_lines=b_off).schedule
    options = [replace(b.option(), ctas_per_sm=occupancy.get(dt, b.ctas_per_sm))
               for b in entries_for(dt, b_off_lines=b_off)]
    return schedule_problem(problem, device, mode=mode or row["mode"],
                            reduction="deterministic", tiles=options)


# ---------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------
@dataclass
class Sample:
    """One measured schedule: per-CTA features and the time it took."""

    key: tuple                 # (class, batch, m, n, k, dtype, mode)
    group: tuple               # (dtype class, tile, efficiency): its c-coefficient
    dtype: str
    tile: tuple
    feats: np.ndarray          # (waves, resident, 3): partials * b-scale, merges * d-scale, iters
    us: float


def cta_features(s) -> np.ndarray:
    """(waves, resident, 3) per-CTA features of a Schedule: b-units (partial tiles written,
    scaled to a 128x128 fp32 tile), d-units (peers merged, scaled likewise) and k-iterations,
    padded with zero CTAs to whole waves of ``device.resident_ctas``."""
    if s.small_tile is not None:
        raise ValueError("calibration does not handle HyTiS schedules (two tile sizes)")
    # the model's own terms (heuristics.row_costs) under unit constants: b and d come out
    # as partial-tile counts scaled to a 128x128 fp32 tile and by the entry's fixup cost
    # (so the fitted b and d stay the model's, which each family scales), c as plain
    # k-iterations
    unit = CostModel(a=0.0, b=1.0, c=1.0, d=1.0)
    rc = row_costs(s.table, s.tile, None, s.problem.dtype, s.accumulator_dtype, unit, 1.0,
                   fixup_cost=s.fixup_cost, cluster=s.reduction == "cluster")
    # a partial data-parallel wave's k-iterations count at the model's scale for them, so
    # the fitted c stays a full wave's (heuristics.partial_wave_scale)
    scale = partial_wave_scale(s.table, s.grid, s.device.resident_ctas, s.solo_fraction,
                               s.tile[2])
    part, merge, iters = rc.write, rc.d * (rc.chain + rc.pooled), rc.iters * scale
    cta = np.repeat(np.arange(s.grid), np.diff(s.cta_offsets))
    f = np.stack([np.bincount(cta, weights=w.astype(float), minlength=s.grid)
                  for w in (part, merge, iters)], axis=1)
    resident = s.device.resident_ctas
    pad = (-s.grid) % resident if s.grid > resident else 0
    if s.grid <= resident:
        return f[None]
    return np.concatenate([f, np.zeros((pad, 3))]).reshape(-1, resident, 3)


def load_rows(path: str) -> tuple[dict, list[dict]]:
    with open(path) as f:
        data = json.load(f)
    return data, data["rows"]


def row_key(r: dict) -> tuple:
    return (r["class"], int(r.get("batch", 1)), int(r["m"]), int(r["n"]), int(r["k"]),
            r["dtype"])


def samples_from_rows(rows, occupancy: dict | None = None, modes=FORCED_MODES) -> list[Sample]:
    out = []
    for r in rows:
        if r["mode"] not in modes or not (r.get("us") or 0) > 0 or r["us"] != r["us"]:
            continue
        s = rebuild(r, occupancy)
        out.append(Sample(row_key(r) + (r["mode"],),
                          (dtype_class(r["dtype"]), s.tile, s.tile_efficiency),
                          r["dtype"], s.tile, cta_features(s), float(r["us"])))
    return out


# ---------------------------------------------------------------------------------------
# The model as a vector of parameters: theta = (a, b, d, c_g for each group)
# ---------------------------------------------------------------------------------------
def group_coefficient(model: CostModel, group: tuple, dtype: str) -> float:
    """c_g: the model's time of one k-iteration of the group's tile (at the kernel's own
    efficiency, group[2], when it has one)."""
    return iteration_cost(group[1], dtype, model, group[2])


def theta_of(model: CostModel, groups: list, dtypes: dict) -> np.ndarray:
    return np.array([model.a, model.b, model.d] +
                    [group_coefficient(model, g, dtypes[g]) for g in groups])


def _critical(samples, groups_index, theta):
    """Predicted times and each row's feature vector at its critical CTAs."""
    n_par = 3 + len(groups_index)
    X = np.zeros((len(samples), n_par))
    for i, sm in enumerate(samples):
        g = groups_index[sm.group]
        w = np.array([theta[1], theta[2], theta[3 + g]])
        per = sm.feats @ w                      # (waves, resident)
        crit = per.argmax(axis=1)
        fc = sm.feats[np.arange(len(per)), crit].sum(axis=0)
        X[i, 0] = 1.0
        X[i, 1], X[i, 2], X[i, 3 + g] = fc
    return X @ theta, X


def nnls(A: np.ndarray, y: np.ndarray, max_iter: int = 500) -> np.ndarray:
    """Non-negative least squares min ||A x - y||, x >= 0 (Lawson-Hanson active set)."""
    m, n = A.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = A.T @ (y - A @ x)
    tol = 10 * np.finfo(float).eps * np.linalg.norm(A, 1) * max(m, n)
    for _ in range(max_iter):
        if passive.all() or w[~passive].max(initial=-np.inf) <= tol:
            break
        j = np.argmax(np.where(passive, -np.inf, w))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], y, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        w = A.T @ (y - A @ x)
    return x


def log_errors(samples, groups_index, theta) -> np.ndarray:
    pred, _ = _critical(samples, groups_index, theta)
    y = np.array([s.us for s in samples])
    return np.log(np.maximum(pred, 1e-12) / y)


@dataclass
class FitResult:
    model: CostModel
    theta: np.ndarray
    groups: list
    before: np.ndarray          # log errors under the starting model
    after: np.ndarray           # log errors under the fitted model
    iterations: int
    samples: list


def fit(samples: list[Sample], start: CostModel = DEFAULT_COST,
        fit_groups=None) -> FitResult:
    """Fit (a, b, d, c_g) to ``samples`` by Gauss-Newton on the squared log error, each step a
    non-negative least-squares problem at the current critical CTAs (see module docstring)."""
    groups = sorted({s.group for s in samples}, key=lambda g: (g[0] != "16bit", g))
    dtypes = {}
    for s in samples:
        dtypes.setdefault(s.group, s.dtype)
    gi = {g: i for i, g in enumerate(groups)}
    theta = theta_of(start, groups, dtypes)
    free = np.ones(len(theta), dtype=bool)
    if fit_groups is not None:
        for g, i in gi.items():
            free[3 + i] = g in fit_groups
    y = np.array([s.us for s in samples])
    before = log_errors(samples, gi, theta)
    obj = float(np.mean(before ** 2))
    it = 0
    for it in range(1, MAX_ITERATIONS + 1):
        pred, X = _critical(samples, gi, theta)
        J = X / pred[:, None]                      # d log(pred) / d theta
        r = np.log(pred / y)
        # Gauss-Newton: minimise ||J theta' - (J theta - r)||, theta' >= 0; J theta == 1
        target = J @ theta - r - J[:, ~free] @ theta[~free]
        colscale = np.linalg.norm(J[:, free], axis=0)
        colscale[colscale == 0] = 1.0
        new = theta.copy()
        new[free] = nnls(J[:, free] / colscale, target) / colscale
        step = new - theta
        t = 1.0
        while True:  # backtracking: the max may switch CTAs along the step
            cand = theta + t * step
            e = log_errors(samples, gi, cand)
            o = float(np.mean(e ** 2))
            if o <= obj or t < 1e-4:
                break
            t *= 0.5
        if o > obj:
            break
        done = obj - o < LOG_TOL
        theta, obj = cand, o
        if done:
            break
    after = log_errors(samples, gi, theta)
    return FitResult(model_from_theta(theta, groups, dtypes, start), theta, groups, before,
                     after, it, samples)


def _entry_efficiency(group) -> float:
    """The catalogue efficiency a group's rows ran with (1 when the entry declares none)."""
    return 1.0 if group[2] is None else float(group[2])


def model_from_theta(theta, groups, dtypes, start: CostModel = DEFAULT_COST) -> CostModel:
    """Read a, b, c, d, DTYPE_SLOWDOWN and tile efficiencies back from the coefficients.

    c is the 16-bit (slowdown 1) reference: taken from a 16-bit 128x128 group, rescaled to
    REF_TILE and divided by its entry's efficiency (the portable entry's, 1, when its rows
    are there). A dtype's slowdown comes from its 128x128 group; the efficiency of its other
    tiles from their own coefficients."""
    a, b, d = (float(x) for x in theta[:3])
    coef = {g: float(theta[3 + i]) for i, g in enumerate(groups)}
    c = start.c
    ref16 = sorted((g for g in groups if g[0] == "16bit" and g[1][:2] == (128, 128)),
                   key=lambda g: _entry_efficiency(g) != 1.0)
    if ref16:
        g = ref16[0]
        c = coef[g] / (_vol(g[1]) * _entry_efficiency(g))
    slowdown, eff = [], []
    for dt in sorted({g[0] for g in groups} - {"16bit"}):
        entry = [g for g in groups if g[0] == dt and g[1][:2] == (128, 128)]
        if entry:
            sd = coef[entry[0]] / (c * _vol(entry[0][1]) * _entry_efficiency(entry[0]))
        else:
            sd = start.dtype_slowdown(dt)
        slowdown.append((dt, round(sd, 4)))
        for g in groups:
            if g[0] == dt and g[1][:2] != (128, 128):
                eff.append((dt, g[1][0], g[1][1], round(coef[g] / (c * _vol(g[1]) * sd), 4)))
    return CostModel(a=round(a, 4), b=round(b, 4), c=round(c, 5), d=round(d, 4),
                     slowdown=tuple(slowdown), tile_efficiency=tuple(eff))


# ---------------------------------------------------------------------------------------
# Evaluation: what auto picks with a model, and what that measured
# ---------------------------------------------------------------------------------------
def evaluate(rows, model: CostModel, occupancy: dict | None = None) -> dict:
    """Per (shape, dtype): the mode auto picks with ``model``, and the measured time of the
    forced-mode row for that mode; the JSON's auto row for the old auto.

    ``same_schedule`` says whether the new pick's split table is the one the forced row ran
    (a stream_k grid or an fp32/fp64 tile the new model chooses differently was not measured;
    the forced row is then the nearest measurement)."""
    by = {}
    for r in rows:
        by.setdefault(row_key(r), {})[r["mode"]] = r
    cases = []
    for key, modes in by.items():
        if not all(m in modes for m in FORCED_MODES + ("auto",)):
            continue
        any_row = modes["data_parallel"]
        new = rebuild(any_row, occupancy, cost=model, mode="auto")
        ran = rebuild(modes[new.mode], occupancy) if new.mode in modes else None
        same = ran is not None and ran.tile == new.tile and ran.grid == new.grid and \
            np.array_equal(ran.table, new.table)
        meas_new = modes[new.mode]["us"] if new.mode in modes else float("nan")
        cases.append(dict(key=key, cls=key[0], new_mode=new.mode, new_tile=new.tile,
                          new_grid=new.grid, same_schedule=same,
                          dp_us=modes["data_parallel"]["us"], old_auto_us=modes["auto"]["us"],
                          new_auto_us=meas_new, new_pred_us=new.predicted_time_us,
                          reason=new.reason))
    classes = {}
    for c in cases:
        classes.setdefault(c["cls"], []).append(c)
    summary = {cls: dict(n=len(cs),
                         old=geomean([c["dp_us"] / c["old_auto_us"] for c in cs]),
                         new=geomean([c["dp_us"] / c["new_auto_us"] for c in cs]),
                         best=geomean([c["dp_us"] / min(by[c["key"]][m]["us"]
                                                         for m in FORCED_MODES) for c in cs]))
               for cls, cs in classes.items()}
    return dict(cases=cases, classes=summary)


# ---------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------
def describe_model(m: CostModel) -> str:
    s = f"a={m.a:.4g} b={m.b:.4g} c={m.c:.4g} d={m.d:.4g} us"
    sd = {dt: m.dtype_slowdown(dt) for dt in ("float32", "float64")}
    s += "; slowdown " + ", ".join(f"{k}={v:.3g}" for k, v in sd.items())
    if m.tile_efficiency:
        s += "; tile efficiency " + ", ".join(f"{dt} {bm}x{bn}={v:.3g}"
                                              for dt, bm, bn, v in m.tile_efficiency)
    return s


def error_line(e: np.ndarray) -> str:
    a = np.abs(e)
    return (f"median |log err| {np.median(a):.3f} (x{math.exp(np.median(a)):.3f}), "
            f"max {a.max():.3f} (x{math.exp(a.max()):.2f}), rms {np.sqrt(np.mean(e**2)):.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=DEFAULT_JSON)
    ap.add_argument("--occupancy", action="append", default=[],
                    help="DTYPE=N CTAs per SM the GPU scheduled with (default: each "
                         "catalogue entry's declared occupancy)")
    ap.add_argument("--eval", action="store_true",
                    help="also show auto's picks with the fitted model vs the JSON's auto")
    args = ap.parse_args(argv)
    occ = {}
    for o in args.occupancy:
        k, v = o.split("=")
        occ[k] = int(v)
    data, rows = load_rows(args.json)
    samples = samples_from_rows(rows, occ or None)
    res = fit(samples)
    print(f"source: {args.json} (measured {data.get('date')}, commit {data.get('commit')}, "
          f"{data.get('device')}); {len(samples)} rows; occupancy {occ}")
    print(f"before: {describe_model(DEFAULT_COST)}")
    print(f"        {error_line(res.before)}")
    print(f"after:  {describe_model(res.model)}   ({res.iterations} iterations)")
    print(f"        {error_line(res.after)}")
    print(f"        {res.model!r}")
    worst = np.argsort(-np.abs(res.after))[:8]
    print("largest residuals after the fit:")
    for i in worst:
        s = samples[i]
        print(f"  {s.key}  measured {s.us:8.1f} us  predicted x{math.exp(res.after[i]):.2f}")
    if args.eval:
        ev = evaluate(rows, res.model, occ)
        print("\nclass: geomean measured DP / auto   (old auto -> new auto; best forced mode)")
        for cls, v in ev["classes"].items():
            print(f"  {cls:<16} n={v['n']:<3} old {v['old']:.3f}  new {v['new']:.3f}  "
                  f"best {v['best']:.3f}")
        for c in ev["cases"]:
            print(f"  {c['key']}  old auto {c['old_auto_us']:8.1f}  new "
                  f"{c['new_mode']:<13} {c['new_auto_us']:8.1f}  DP {c['dp_us']:8.1f}"
                  f"{'' if c['same_schedule'] else '  (schedule differs from the forced row)'}")


if __name__ == "__main__":
    main()
