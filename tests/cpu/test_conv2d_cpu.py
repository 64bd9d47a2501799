"""The CPU convolution's chunks (skcontract/ops/conv2d_cpu.py): bands of rows and groups of
images compute the definition, and the memory a call takes stays bounded."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from skcontract import conv2d
from skcontract.ops import conv2d_cpu
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import direct

CASES = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((3, 4, 11, 9), (6, 4, 3, 3), 1, 1, 1, 1),              # dense, same padding
    ((2, 4, 13, 12), (6, 2, 3, 2), (2, 2), (2, 0), 1, 2),   # strided, grouped
    ((2, 3, 10, 14), (4, 3, 3, 3), (1, 2), 1, (2, 1), 1),   # strides differ, dilated
    ((2, 6, 9, 9), (12, 1, 3, 3), 1, 1, 1, 6),              # depthwise, 2 outputs a channel
    ((1, 5, 12, 12), (5, 1, 5, 5), (2, 2), 2, 1, 5),        # depthwise, strided
    ((2, 3, 16, 16), (8, 3, 7, 7), (2, 2), 3, 1, 1),        # a stem
]


@pytest.mark.parametrize("budget", [1, 4000, 10**9], ids=["rows", "images", "whole"])
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CASES)
def test_every_chunking_computes_the_definition(monkeypatch, budget, xs, ws, stride,
                                                padding, dilation, groups):
    monkeypatch.setattr(conv2d_cpu, "CHUNK_BYTES", budget)
    monkeypatch.setattr(conv2d_cpu, "DEPTHWISE_CHUNK_BYTES", budget)
    rng = np.random.default_rng(sum(xs))
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    g = conv_geometry(xs, ws, stride, padding, dilation, groups)
    got = conv2d(x, w, None, stride, padding, dilation, groups)
    ref = direct(x, w, None, g.stride, g.padding, g.dilation, groups)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_chunks_cover_the_output_once():
    g = conv_geometry((5, 8, 30, 30), (8, 8, 3, 3), padding=1)
    for budget in (1, 10**5, 10**6, 10**9):
        seen = np.zeros((g.n, g.p), int)
        for c in conv2d_cpu._chunks(g, 8, budget):
            assert c.n1 - c.n0 == 1 or (c.p0, c.p1) == (0, g.p)
            seen[c.n0:c.n1, c.p0:c.p1] += 1
        assert (seen == 1).all(), budget


def test_the_memory_beside_input_and_output_is_one_chunk():
    """A 7x7 convolution of a 9.6 MB input: the peak allocated during the call is the output
    and at most CHUNK_BYTES beside it (an im2col gather would take 49 copies of the input)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16, 96, 96))
    w = rng.standard_normal((16, 16, 7, 7))
    out_bytes = 4 * 16 * 96 * 96 * 8
    tracemalloc.start()
    try:
        conv2d(x, w, None, 1, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= out_bytes + conv2d_cpu.CHUNK_BYTES * 1.1, (peak, out_bytes)
