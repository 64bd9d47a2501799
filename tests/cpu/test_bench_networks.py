"""The networks benchmark's generators and rows (tiny networks; the full run is a tool)."""
from collections import Counter

import numpy as np
import pytest

from skcontract import einsum
from skcontract.bench import networks as nw


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
