"""Networks benchmark, the GPU half: the plans ``bench networks`` wrote, run on CuPy, against
cotengra's own path and slices run by cotengra on CuPy, on the same GPU and operands.

``python -m skcontract bench networks-run --plans FILE [--out DIR] [--name NAME]
[--networks A,B] [--limits 1GiB,8GiB] [--planners auto,hyper,cotengra] [--max-flops F]``

``FILE`` is the JSON ``bench networks`` writes (its rows carry each plan's path and sliced
labels), so the search runs once, on any machine, and the GPU runs the plans it found. Each
row's plan is made again from its path and slices (no search) at its limit, for the GPU.
Operands are random and scaled so that a closed network's value stays near 1 (each tensor's
entries of deviation ``prod(d ** -1/4)`` over its legs' sizes ``d``). The batched product is
left out: its operands alone outgrow a GPU, and the slicer bounds the working set, not them.

Each row is timed over a whole call, synchronised, after a call of one slice (kernels
compiled, pools made), and then called again under the CuPy allocations' high-water mark
(:func:`~skcontract.bench.memory.cupy_peak`), kept out of the time.
A row of more than :data:`MAX_TIMED_SLICES` slices is timed over its first ones (the partial
sum ``expr(..., slices=range(n))``, cotengra's ``contract_slice``), its seconds scaled to
all. Rows: ``network``, ``limit``, ``planner`` (auto, hyper: ours; cotengra: cotengra's
contract), ``slices``, ``timed_slices``, ``steps``, ``flops``, ``predicted_peak_bytes`` (the
peak model's, of the plan as this GPU runs it, sliced or not), ``peak_bytes`` (measured),
``keeps_limit`` (the measured peak under the limit), ``seconds``, ``us_per_slice``,
``host_us_one_slice`` (the host's time to enqueue a call of one slice, the steps that run
once included, the GPU idle: :func:`_host_seconds`), ``tflops``, ``diff`` (the relative
difference between this row's value and the cotengra row's of the same network and limit,
where both ran every slice). Writes
``<name>.json`` and ``<name>.md``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ..contract import contract_expression
from ..plan.plan import executor_bytes
from ..plan.slicing import budget_of
from .memory import cupy_peak
from .networks import NETWORKS, LIMITS, Network
from .timing import device_name, geomean, run_commit

MAX_FLOPS = 2e14
"""Rows whose timed slices take more FLOPs are left out (minutes each on one GPU)."""
MAX_TIMED_SLICES = 64
"""A row of more slices is timed over its first this many and its seconds scaled to all
(``timed_slices``; its value is then a partial sum, compared with no other row's). The
scaling counts a call's one-time work (steps that run once) that many times over: an upper
bound."""
PLANNERS = ("auto", "hyper", "cotengra")
"""The planners of ``bench networks``' rows (``--planners`` runs some of them)."""
SKIPPED = ("batched",)
"""Networks whose operands alone outgrow one GPU."""


def operands(net: Network, seed: int = 0) -> list:
    """Random CuPy operands of ``net``, each tensor's entries of deviation
    ``prod(d ** -0.25)`` over its legs (a closed network's value near 1)."""
    import cupy  # optional dependency: only the GPU half runs

    rng = cupy.random.RandomState(seed)
    real = "float32" if net.dtype in ("float32", "complex64") else "float64"
    out = []
    for term, shape in zip(net.inputs, net.shapes()):
        scale = float(np.prod([net.sizes[x] ** -0.25 for x in term]))
        x = rng.standard_normal(shape, dtype=real) * scale
        if net.dtype.startswith("complex"):
            x = (x + 1j * rng.standard_normal(shape, dtype=real) * scale) / np.sqrt(2)
        out.append(x.astype(net.dtype))
    return out


HOST_REPEATS = 5
"""Calls of one slice whose host time is measured (the least is kept)."""


def _host_seconds(warm) -> float:
    """The host's seconds to enqueue a call of one slice (``warm()``, compiled; the steps
    that run once included), the least of :data:`HOST_REPEATS` calls each after the device
    is idle: the time the Python side takes, whatever the GPU's (a slice's launches stay
    under the launch queue's depth)."""
    import cupy  # optional dependency: only the GPU half runs

    best = float("inf")
    for _ in range(HOST_REPEATS):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        warm()
        best = min(best, time.perf_counter() - t0)
    cupy.cuda.Device().synchronize()
    return best


def _timed(run, warm) -> tuple[object, float, int, float]:
    """``run()``'s value and seconds, after ``warm()`` (one slice: kernels compiled, pools
    made), its measured peak bytes in a call of its own (the peak counter's host work
    kept out of the time), and the host's seconds for a call of one slice
    (:func:`_host_seconds`)."""
    import cupy  # optional dependency: only the GPU half runs

    warm()
    cupy.cuda.Device().synchronize()
    host = _host_seconds(warm)
    t0 = time.perf_counter()
    value = run()
    cupy.cuda.Device().synchronize()
    seconds = time.perf_counter() - t0
    value = cupy.asarray(value).astype(cupy.complex128)
    with cupy_peak() as mem:
        run()
        cupy.cuda.Device().synchronize()
    return value, seconds, mem.peak, host


def ours(net: Network, row: dict, backend: str = "cupy"):
    """The row's plan, made again from its path and slices for ``backend``: ``(expression,
    plan)``."""
    expr = contract_expression(net.subscripts(), *net.shapes(), dtype=net.dtype,
                               optimize=[tuple(p) for p in row["path"]],
                               memory_limit=row["limit"], backend=backend,
                               slicing=row["chunks"] or False)
    return expr, expr.plan


def planned(name: str, limit: str, plans: str, planner: str = "hyper"):
    """The ``planner`` row of network ``name`` (a :data:`~.networks.NETWORKS` key) at
    ``limit`` in the plans file ``plans``, made again for CuPy on random operands:
    ``(network, row, expression, plan, operands)`` (for the tools that profile one)."""
    net = NETWORKS[name]()
    rows = json.loads(Path(plans).read_text())["rows"]
    row = next(r for r in rows if (r["network"], r["limit"], r["planner"]) ==
               (net.name, limit, planner))
    expr, plan = ours(net, row)
    return net, row, expr, plan, operands(net)


def cotengra_tree(net: Network, row: dict):
    """cotengra's tree of the row's path with its sliced labels removed."""
    import cotengra as ctg  # optional extra: the peer

    inputs = [tuple(t) for t in net.subscripts().split("->")[0].split(",")]
    output = tuple(net.subscripts().split("->")[1])
    sizes = {s: d for t, shape in zip(inputs, net.shapes()) for s, d in zip(t, shape)}
    tree = ctg.ContractionTree.from_path(inputs, output, sizes,
                                         path=[tuple(p) for p in row["path"]])
    for ind in row["chunks"]:
        tree.remove_ind_(ind)
    return tree


def runner(net: Network, row: dict, timed: int, backend: str = "cupy"):
    """``(run, warm, predicted peak bytes)``: ``run(*arrays)`` runs the row's plan over its
    first ``timed`` slices (all: the result), ours or cotengra's (``row["planner"]``);
    ``warm(*arrays)`` its first slice."""
    slices = row["slices"]
    if row["planner"] == "cotengra":
        tree = cotengra_tree(net, row)
        warm = (lambda *arrays: tree.contract_slice(arrays, 0, backend=backend)) \
            if slices > 1 else (lambda *arrays: tree.contract(arrays, backend=backend))
        if timed == slices:
            return (lambda *arrays: tree.contract(arrays, backend=backend)), warm, \
                row["predicted_peak_bytes"]
        return (lambda *arrays: sum(tree.contract_slice(arrays, i, backend=backend)
                                    for i in range(timed))), warm, row["predicted_peak_bytes"]
    expr, plan = ours(net, row, backend)
    predicted = executor_bytes(plan) if plan.slicing is None else plan.slicing.peak_bytes
    warm = lambda *arrays: expr(*arrays, slices=[0])  # noqa: E731 - one slice
    if timed == slices:
        return expr, warm, predicted
    return (lambda *arrays: expr(*arrays, slices=range(timed))), warm, predicted


def run_network(net: Network, limit: str, rows: list[dict], log) -> list[dict]:
    """The planners' rows of ``net`` at ``limit``, run on the same operands."""
    import cupy  # optional dependency: only the GPU half runs

    arrays = operands(net)
    results, out = {}, []
    budget = budget_of(limit, []).bytes
    for row in rows:
        planner = row["planner"]
        timed = min(row["slices"], MAX_TIMED_SLICES)
        try:
            run, warm, predicted = runner(net, row, timed)
            value, seconds, peak, host = _timed(lambda: run(*arrays),  # noqa: B023 - now
                                                lambda: warm(*arrays))  # noqa: B023
        except Exception as e:  # noqa: BLE001 - a failing row is logged, the others run
            log(f"   {planner} failed: {type(e).__name__}: {e}")
            continue
        seconds *= row["slices"] / timed
        if timed == row["slices"]:
            results[planner] = value
        out.append({"network": net.name, "limit": limit, "planner": planner,
                    "slices": row["slices"], "timed_slices": timed, "steps": len(row["path"]),
                    "flops": row["flops"], "predicted_peak_bytes": predicted,
                    "peak_bytes": int(peak), "keeps_limit": peak <= budget,
                    "seconds": seconds, "us_per_slice": seconds / row["slices"] * 1e6,
                    "host_us_one_slice": host * 1e6,
                    "tflops": row["flops"] / seconds / 1e12})
        log(f"   {planner:<9} {seconds:12.3f} s  {row['slices']:>9,} slices  peak "
            f"{peak:,} (predicted {predicted})")
    ref = results.get("cotengra")
    for r in out:
        if ref is not None and r["planner"] in results:
            got = results[r["planner"]]
            r["diff"] = float(cupy.linalg.norm(got - ref) / max(cupy.linalg.norm(ref), 1e-300))
    return out


def _timed_flops(row: dict) -> float:
    """The FLOPs of the slices a row times."""
    return row["flops"] * min(row["slices"], MAX_TIMED_SLICES) / row["slices"]


def summary(rows) -> list[str]:
    """Per network and limit: cotengra's seconds over our best of the rows whose measured
    peak keeps the limit (above 1: ours faster), and the rows whose peak broke it."""
    out = []
    keys = dict.fromkeys((r["network"], r["limit"]) for r in rows)
    speedups = []
    for net, limit in keys:
        mine = {r["planner"]: r for r in rows if (r["network"], r["limit"]) == (net, limit)}
        kept = [mine[p]["seconds"] for p in ("auto", "hyper")
                if p in mine and mine[p]["keeps_limit"]]
        broke = [p for p, r in mine.items() if not r["keeps_limit"]]
        note = f" (measured peak over the limit: {', '.join(broke)})" if broke else ""
        if "cotengra" in mine and kept and mine["cotengra"]["keeps_limit"]:
            speedups.append(mine["cotengra"]["seconds"] / min(kept))
            out.append(f"{net} at {limit}: cotengra-on-CuPy / ours {speedups[-1]:.2f}x{note}")
        else:
            out.append(f"{net} at {limit}: no pair of rows keeps the limit{note}")
    if speedups:
        out.append(f"over the pairs that keep the limit: geomean {geomean(speedups):.2f}x, "
                   f"median {statistics.median(speedups):.2f}x")
    return out


def render_markdown(doc) -> str:
    lines = [f"# Networks run on the GPU ({doc['device']}, {doc['date']}, commit "
             f"{doc['commit']})", "",
             f"Plans from `{doc['plans']}` (commit {doc['plans_commit']}). cotengra: its own "
             "path and slices, run by cotengra with CuPy arrays. Peak: the CuPy allocations' "
             "high-water mark of the timed call (operands not counted).", "",
             "| network | limit | planner | slices (timed) | steps | FLOPs | seconds | "
             "us / slice | host us, one-slice call | TFLOP/s | predicted peak | measured peak | "
             "diff vs cotengra |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for r in doc["rows"]:
        pred = "-" if r["predicted_peak_bytes"] is None else f"{r['predicted_peak_bytes']:,}"
        diff = f"{r['diff']:.1e}" if "diff" in r else "-"
        timed = "" if r["timed_slices"] == r["slices"] else f" ({r['timed_slices']})"
        over = "" if r.get("keeps_limit", True) else " (over)"
        lines.append(f"| {r['network']} | {r['limit']} | {r['planner']} | {r['slices']:,}{timed} "
                     f"| {r['steps']} | {r['flops']:.3e} | {r['seconds']:.3f} | "
                     f"{r['us_per_slice']:,.1f} | {_host(r)} | {r['tflops']:.2f} | {pred} | "
                     f"{r['peak_bytes']:,}{over} | {diff} |")
    lines += ["", *[f"- {x}" for x in summary(doc["rows"])]]
    return "\n".join(lines) + "\n"


def _host(row) -> str:
    """A row's host microseconds for a call of one slice, or '-' (a run from before they
    were measured)."""
    us = row.get("host_us_one_slice")
    return "-" if us is None else f"{us:,.1f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract bench networks-run",
                                description=__doc__.splitlines()[0])
    p.add_argument("--plans", required=True, help="the JSON bench networks wrote")
    p.add_argument("--out", default="docs/benchmarks", help="output folder")
    p.add_argument("--name", default=None,
                   help="the files' base name (default: networks-<device>)")
    p.add_argument("--networks", default=None,
                   help=f"comma-separated networks (default: all in FILE; have "
                        f"{','.join(NETWORKS)})")
    p.add_argument("--limits", default=",".join(LIMITS), help="comma-separated limits")
    p.add_argument("--max-flops", type=float, default=MAX_FLOPS,
                   help=f"leave out rows planned above this many FLOPs (default {MAX_FLOPS:g})")
    p.add_argument("--planners", default=",".join(PLANNERS),
                   help=f"comma-separated planners whose rows run (default: all, "
                        f"{','.join(PLANNERS)})")
    args = p.parse_args(argv)
    planners = args.planners.split(",")
    if set(planners) - set(PLANNERS):
        p.error(f"unknown planners {sorted(set(planners) - set(PLANNERS))}; have {PLANNERS}")
    plans = json.loads(Path(args.plans).read_text())
    keys = args.networks.split(",") if args.networks else \
        [k for k in NETWORKS if k not in SKIPPED]
    unknown = set(keys) - set(NETWORKS)
    if unknown:
        p.error(f"unknown networks {sorted(unknown)}; have {sorted(NETWORKS)}")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    device = device_name()
    doc = {"date": _dt.date.today().isoformat(), "commit": run_commit(), "device": device,
           "plans": args.plans, "plans_commit": plans.get("commit"), "rows": []}
    name = args.name or f"networks-{device.split()[1].lower() if ' ' in device else 'gpu'}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for key in keys:
        net = NETWORKS[key]()
        for limit in args.limits.split(","):
            rows = [r for r in plans["rows"] if r["network"] == net.name
                    and r["limit"] == limit and "path" in r and r["planner"] in planners
                    and _timed_flops(r) <= args.max_flops]
            if not rows:
                continue
            log(f"{net.name} at {limit}: {', '.join(r['planner'] for r in rows)}")
            doc["rows"] += run_network(net, limit, rows, log)
            (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
            (out / f"{name}.md").write_text(render_markdown(doc))
    print(render_markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
