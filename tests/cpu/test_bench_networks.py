"""The networks benchmark's generators and rows (tiny networks; the full run is a tool)."""
from collections import Counter

import numpy as np
import pytest

from skcontract import einsum
from skcontract.bench import networks as nw
from skcontract.bench import networks_run


@pytest.mark.parametrize("net", [
    nw.random_regular(12, bond=2, seed=1), nw.lattice(3, 4, bond=2),
    nw.peps_norm(2, 3, bond=2), nw.circuit(2, 3, depth=4), nw.circuit(2, 3, depth=4,
                                                                   open_qubits=2)],
    ids=lambda n: n.name)
def test_every_label_joins_two_tensors_or_one_and_the_output(net):
    held = Counter(x for t in net.inputs for x in t)
    assert all(n + (x in net.output) == 2 for x, n in held.items())
    assert set(held) == set(net.sizes)
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in net.shapes()]
    np.testing.assert_allclose(einsum(net.subscripts(), *ops),
                               np.einsum(net.subscripts(), *ops, optimize="greedy"),
                               rtol=1e-9)


def test_the_full_networks_have_their_sizes():
    assert len(nw.random_regular().inputs) == 250 and len(nw.random_regular().sizes) == 375
    assert len(nw.lattice().inputs) == 100 and set(nw.lattice().sizes.values()) == {8}
    assert len(nw.peps_norm().inputs) == 72
    closed, opened = nw.circuit(), nw.circuit(open_qubits=6)
    assert closed.dtype == "complex64" and closed.output == () and len(opened.output) == 6


def test_rows_under_a_limit_and_cotengra_beside_them():
    pytest.importorskip("cotengra")
    net = nw.lattice(4, 4, bond=4)
    logs = []
    rows = nw.measure(net, "1MiB", 0.2, logs.append)
    planners = [r["planner"] for r in rows]
    assert planners == ["auto", "hyper", "cotengra"]
    for r in rows:
        assert r["limit_bytes"] == 2**20 and r["flops"] > 0 and r["slices"] >= 1
        assert r["predicted_peak_bytes"] is None or r["predicted_peak_bytes"] <= 2**20
        assert r["overhead"] >= 1.0
    assert "ours / cotengra FLOPs" in nw.render_markdown(
        {"device": "CPU", "date": "d", "commit": "c", "max_time": 0.2, "rows": rows})
    for r in rows:  # the GPU half's plans, made again from a row's path and slices
        assert len(r["path"]) == len(net.inputs) - 1
        _, plan = networks_run.ours(net, r, backend="numpy")
        assert (plan.slicing.num_slices if plan.slicing else 1) == r["slices"]


def test_the_gpu_half_runs_a_rows_plan_and_cotengras_alike():
    """A row's plan made again from its path and slices (ours) and cotengra's tree of the
    same path and slices give the network's value (NumPy here, CuPy on the GPU)."""
    pytest.importorskip("cotengra")
    net = nw.lattice(3, 4, bond=3)
    rows = nw.measure(net, "2kB", 0.2, lambda msg: None)
    rng = np.random.default_rng(2)
    ops = [rng.standard_normal(s).astype(np.float32) for s in net.shapes()]
    want = np.einsum(net.subscripts(), *[x.astype(np.float64) for x in ops], optimize="greedy")
    for r in rows:
        run, warm, predicted = networks_run.runner(net, r, r["slices"], backend="numpy")
        got = run(*ops)
        if r["slices"] > 1:  # the warm-up call runs one slice
            assert not np.allclose(warm(*ops), want, rtol=1e-3)
        assert predicted is None or predicted <= 2000
        np.testing.assert_allclose(got, want, rtol=1e-4)
        if r["slices"] > 1:  # a partial sum over the first slices is not the value
            part = networks_run.runner(net, r, 1, backend="numpy")[0](*ops)
            assert not np.allclose(part, want, rtol=1e-3)
    assert any(r["chunks"] for r in rows)  # the limit slices
