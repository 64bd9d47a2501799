"""The peak model against the peaks measured on a GPU: the plans of
docs/benchmarks/networks-plans-cpu.json, run on an H100 (docs/benchmarks/networks-h100.json,
the CuPy allocations' high-water mark), predicted again for that device. The lattice and
PEPS rows (float32; the circuits' plans take seconds to build)."""
import json
from pathlib import Path

import pytest

from skcontract import contract_expression
from skcontract.bench import networks as nw
from skcontract.plan.plan import executor_bytes

BENCH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
NETS = {n.name: n for n in (nw.lattice(), nw.peps_norm())}


def _rows():
    plans = json.loads((BENCH / "networks-plans-cpu.json").read_text())["rows"]
    measured = json.loads((BENCH / "networks-h100.json").read_text())["rows"]
    for m in measured:
        if m["network"] in NETS and m["planner"] != "cotengra":
            plan = next(r for r in plans if (r["network"], r["limit"], r["planner"]) ==
                        (m["network"], m["limit"], m["planner"]))
            yield pytest.param(m, plan, id=f"{m['network']} {m['limit']} {m['planner']}")


@pytest.mark.parametrize("measured,row", list(_rows()))
def test_the_model_predicts_the_peak_the_gpu_measured(measured, row):
    net = NETS[measured["network"]]
    expr = contract_expression(net.subscripts(), *net.shapes(), dtype=net.dtype,
                               optimize=[tuple(p) for p in row["path"]],
                               slicing=row["chunks"] or False, device="h100")
    predicted = executor_bytes(expr.plan)
    assert measured["peak_bytes"] <= predicted <= 1.1 * measured["peak_bytes"], predicted
