"""The CPU convolution's chunks and layouts (skcontract/ops/conv2d_cpu.py): groups, bands
of rows and groups of images compute the definition in each product form, and the memory a
call takes stays bounded."""
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
    ((2, 24, 7, 6), (5, 24, 3, 3), 1, 1, 1, 1),             # wide: a product a filter row
    ((2, 4, 13, 12), (6, 2, 3, 2), (2, 2), (2, 0), 1, 2),   # strided, grouped
    ((2, 3, 10, 14), (4, 3, 3, 3), (1, 2), 1, (2, 1), 1),   # strides differ, dilated
    ((2, 6, 9, 9), (12, 1, 3, 3), 1, 1, 1, 6),              # depthwise, 2 outputs a channel
    ((2, 5, 12, 12), (5, 1, 5, 5), 1, 2, (2, 1), 5),        # depthwise, dilated rows
    ((1, 5, 12, 12), (5, 1, 5, 5), (2, 2), 2, 1, 5),        # depthwise, strided
    ((2, 8, 6, 7), (8, 2, 4, 2), 1, "same", 1, 4),          # grouped, uneven padding
    ((2, 2, 6, 7), (3, 2, 2, 4), 1, "same", (1, 2), 1),     # uneven padding, dilated columns
    ((2, 3, 5, 6), (4, 3, 2, 2), 1, 4, 1, 1),               # padding wider than the filter
    ((2, 4, 5, 9), (4, 2, 1, 3), 1, (0, 1), 1, 2),          # one filter row
    ((2, 3, 16, 16), (8, 3, 7, 7), (2, 2), 3, 1, 1),        # a stem
]


@pytest.mark.parametrize("budget", [1, 4000, 10**9], ids=["rows", "images", "whole"])
@pytest.mark.parametrize("block", [8, 2048], ids=["blocks", "one-block"])
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CASES)
def test_every_chunking_computes_the_definition(monkeypatch, budget, block, xs, ws, stride,
                                                padding, dilation, groups):
    for name in ("CHUNK_BYTES", "DENSE_CHUNK_BYTES", "GROUPED_CHUNK_BYTES"):
        monkeypatch.setattr(conv2d_cpu, name, budget)
    monkeypatch.setattr(conv2d_cpu, "PRODUCT_BLOCK", block)
    rng = np.random.default_rng(sum(xs))
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    g = conv_geometry(xs, ws, stride, padding, dilation, groups)
    got = conv2d(x, w, None, stride, padding, dilation, groups)
    ref = direct(x, w, None, g.stride, g.padding, g.dilation, groups)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("caller", [1, 10**9], ids=["caller-blocks", "long-calls"])
@pytest.mark.parametrize("narrow", [0, 10**9], ids=["row-products", "rows-in-product"])
def test_both_product_forms_compute_the_definition(monkeypatch, narrow, caller):
    monkeypatch.setattr(conv2d_cpu, "NARROW_INNER", narrow)
    monkeypatch.setattr(conv2d_cpu, "CALLER_MIN_BLOCK", caller)
    monkeypatch.setattr(conv2d_cpu, "BLAS_CALLER_PRODUCT", 3000)  # blocks of a few columns
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((2, 6, 9, 8)), rng.standard_normal((9, 2, 3, 5))
    got = conv2d(x, w, None, 1, (1, 2), (1, 1), 3)
    ref = direct(x, w, None, (1, 1), (1, 1, 2, 2), (1, 1), 3)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("groups", [1, 4])
def test_chunks_cover_the_output_once(monkeypatch, stride, groups):
    g = conv_geometry((5, 8, 30, 30), (8, 8 // groups, 3, 3), stride, padding=1,
                      groups=groups)
    plan = conv2d_cpu._rows_plan(g, np.float64)
    for budget in (1, 10**5, 10**6, 10**9):
        for name in ("CHUNK_BYTES", "DENSE_CHUNK_BYTES", "GROUPED_CHUNK_BYTES"):
            monkeypatch.setattr(conv2d_cpu, name, budget)
        chunks = conv2d_cpu._rows_chunks(g, plan, 8) if stride == 1 else \
            conv2d_cpu._gathered_chunks(g, 8)
        seen = np.zeros((g.n, g.p, g.groups), int)
        for c in chunks:
            assert c.n1 - c.n0 == 1 or (c.p0, c.p1) == (0, g.p)
            seen[c.n0:c.n1, c.p0:c.p1, c.g0:c.g1] += 1
        assert (seen == 1).all(), budget


@pytest.mark.parametrize("xs,ws,stride,groups", [
    ((4, 16, 96, 96), (16, 16, 7, 7), 1, 1),   # an im2col gather would take 49 input copies
    ((4, 16, 96, 96), (16, 1, 7, 7), 1, 16),   # depthwise: 7 planes a channel
    ((4, 16, 96, 96), (32, 16, 7, 7), 2, 1),   # strided: gathered windows, 12 input copies
])
def test_the_memory_beside_input_and_output_is_one_chunk(xs, ws, stride, groups):
    """A 7x7 convolution of a 9.4 MB input: the peak allocated during the call is the output
    and at most CHUNK_BYTES beside it."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    g = conv_geometry(xs, ws, stride, 3, 1, groups)
    out_bytes = g.n * g.k * g.p * g.q * 8
    tracemalloc.start()
    try:
        conv2d(x, w, None, stride, 3, 1, groups)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= out_bytes + conv2d_cpu.CHUNK_BYTES * 1.1, (peak, out_bytes)
