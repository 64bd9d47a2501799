"""The peak model against the peaks measured on a GPU: the plans of
docs/benchmarks/networks-plans-cpu.json, run on an H100 (docs/benchmarks/networks-h100.json,
the CuPy allocations' high-water mark), predicted again for that device. The lattice, PEPS
and circuit rows (float32, complex64).

Those rows were measured at 96d0229, whose slice loop kept every result of a step that
runs once; the model is checked in those terms (:func:`_then`), and the executor's own
prediction, which keeps only the ones a varying step reads, is no larger."""
import json
from pathlib import Path

import pytest

from skcontract import contract_expression
from skcontract.bench import networks as nw
from skcontract.plan.peak import executor_peak, view_copies
from skcontract.plan.plan import beside_bytes, executor_bytes, step_itemsize

BENCH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
NETS = {n.name: n for n in (nw.lattice(), nw.peps_norm(), nw.circuit(),
                            nw.circuit(open_qubits=6))}


def _rows():
    plans = json.loads((BENCH / "networks-plans-cpu.json").read_text())["rows"]
    measured = json.loads((BENCH / "networks-h100.json").read_text())["rows"]
    for m in measured:
        if m["network"] in NETS and m["planner"] != "cotengra":
            plan = next(r for r in plans if (r["network"], r["limit"], r["planner"]) ==
                        (m["network"], m["limit"], m["planner"]))
            yield pytest.param(m, plan, id=f"{m['network']} {m['limit']} {m['planner']}")


def _then(plan) -> int:
    """The model's peak of ``plan`` with every result of a step that runs once kept
    through the slices (as the measured slice loop kept them); an unsliced plan's steps
    all run once, each result going after its last reader."""
    eq = plan.equation
    varies = plan.step_varies() if plan.slicing else (True,) * len(plan.steps)
    once = frozenset(s.result for s, v in zip(plan.steps, varies) if not v)
    steps = executor_peak(plan.steps, len(eq.inputs), varies, plan.result,
                          step_itemsize(plan.dtype, plan.device), True,
                          view_copies(plan.steps, eq.inputs, eq.shapes), kept=once)
    return steps + (beside_bytes(eq, plan.dtype, plan.device) if plan.slicing else 0)


@pytest.mark.parametrize("measured,row", list(_rows()))
def test_the_model_predicts_the_peak_the_gpu_measured(measured, row):
    net = NETS[measured["network"]]
    expr = contract_expression(net.subscripts(), *net.shapes(), dtype=net.dtype,
                               optimize=[tuple(p) for p in row["path"]],
                               slicing=row["chunks"] or False, device="h100")
    then = _then(expr.plan)
    assert measured["peak_bytes"] <= then <= 1.1 * measured["peak_bytes"], then
    assert executor_bytes(expr.plan) <= then
