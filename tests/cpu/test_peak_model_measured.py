"""The peak model against the peaks measured on a GPU: the plans the run of
docs/benchmarks/networks-h100.json names (made for the H100 under the GPU peak model), run
on an H100 (the CuPy allocations' high-water mark), planned again from their paths and
slices and scheduled for that device. The lattice, PEPS and circuit rows (float32,
complex64).

A plan scheduled for the device shows the peak of its launches' own copies
(:func:`skcontract.plan.plan.with_launch_peak`): the measured one, to within a few bytes
(CuPy's allocations round to 512 bytes), on every row of ours. The bound the slicer takes
before scheduling (made again from the row's path and slices: a row's own is of the model
of its commit) is never below it."""
import json
from pathlib import Path

import pytest

from skcontract import contract_expression
from skcontract.bench import networks as nw
from skcontract.parse import parse_equation
from skcontract.plan.plan import build_plan, executor_bytes
from skcontract.schedule import DeviceInfo

BENCH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
NETS = {n.name: n for n in (nw.lattice(), nw.peps_norm(), nw.circuit(),
                            nw.circuit(open_qubits=6))}
ROUNDING = 512
"""Bytes a measured peak may differ from the model's: CuPy's pool rounds each allocation."""


def _rows():
    run = json.loads((BENCH / "networks-h100.json").read_text())
    plans = json.loads((BENCH.parent.parent / run["plans"]).read_text())["rows"]
    for m in run["rows"]:
        if m["network"] in NETS and m["planner"] != "cotengra":
            plan = next(r for r in plans if (r["network"], r["limit"], r["planner"]) ==
                        (m["network"], m["limit"], m["planner"]))
            yield pytest.param(m, plan, id=f"{m['network']} {m['limit']} {m['planner']}")


@pytest.mark.parametrize("measured,row", list(_rows()))
def test_the_scheduled_plan_shows_the_peak_the_gpu_measured(measured, row):
    net = NETS[measured["network"]]
    expr = contract_expression(net.subscripts(), *net.shapes(), dtype=net.dtype,
                               optimize=[tuple(p) for p in row["path"]],
                               memory_limit=row["limit"], slicing=row["chunks"] or False,
                               device="h100")
    plan = expr.plan
    shown = executor_bytes(plan) if plan.slicing is None else plan.slicing.peak_bytes
    assert abs(shown - measured["peak_bytes"]) <= ROUNDING, (shown, measured["peak_bytes"])
    # the slicer's bound before scheduling (the larger copy a launch might make), of the
    # same path and slices, under the model of this tree
    bound = build_plan(parse_equation(net.subscripts(), net.shapes()), net.dtype,
                       optimize=[tuple(p) for p in row["path"]], memory_limit=row["limit"],
                       slicing=row["chunks"] or False, device=DeviceInfo.named("h100"))
    assert shown <= (executor_bytes(bound) if bound.slicing is None else
                     bound.slicing.peak_bytes)
