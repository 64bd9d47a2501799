"""The CPU convolution's chunks and layouts (skcontract/ops/conv2d_cpu.py): groups, bands
of rows and groups of images compute the definition in each form (the planes' two product
forms, the gathered taps over the grid and in place), and the memory a call takes stays
bounded."""
from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest

from skcontract import conv2d
from skcontract.ops import conv2d_cpu, conv_cpu_plan, conv_regions, cpu_buffers
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import direct

FORMS = ["planes", "grid", "in-place", "regions"]
"""The forms a layer can take: the planes of _conv_rows (stride one), gathered taps over
the grid or each image's windows in place (strided layers are gathered), or the tap
regions of conv_regions (any layer)."""

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


def _force(monkeypatch, form: str) -> None:
    """Run stride-one layers in ``form`` (one of :data:`FORMS`), whatever the rules say,
    grouped layers included (not on the C kernels: tests/cpu/test_host_kernels.py)."""
    monkeypatch.setattr(conv_cpu_plan, "_host_run", lambda *args: "the test's NumPy forms")
    monkeypatch.setattr(conv_regions, "takes", lambda g: form == "regions")
    monkeypatch.setattr(conv2d_cpu, "gathers",
                        lambda g: g.stride != (1, 1) or form != "planes")
    monkeypatch.setattr(conv2d_cpu, "INPLACE_MIN_Q", 1 if form == "in-place" else 10**9)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("budget", [1, 4000, 10**9], ids=["rows", "images", "whole"])
@pytest.mark.parametrize("block", [8, 2048], ids=["blocks", "one-block"])
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CASES)
def test_every_chunking_computes_the_definition(monkeypatch, form, budget, block, xs, ws,
                                                stride, padding, dilation, groups):
    _force(monkeypatch, form)
    for name in ("CHUNK_BYTES", "DENSE_CHUNK_BYTES", "GROUPED_CHUNK_BYTES"):
        monkeypatch.setattr(conv2d_cpu, name, budget)
    monkeypatch.setattr(conv_regions, "CHUNK_BYTES", budget)
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
    _force(monkeypatch, "planes")
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


@pytest.mark.parametrize("xs,ws,stride,groups,form", [
    ((4, 16, 96, 96), (16, 16, 7, 7), 1, 1, "planes"),  # im2col would take 49 input copies
    ((4, 16, 96, 96), (16, 1, 7, 7), 1, 16, "planes"),  # depthwise: 7 planes a channel
    ((4, 16, 96, 96), (32, 16, 7, 7), 2, 1, "grid"),    # strided: 12 input copies
    ((4, 16, 96, 96), (32, 16, 7, 7), 2, 1, "in-place"),
    ((4, 16, 96, 96), (16, 16, 7, 7), 1, 1, "grid"),    # stride one gathered: 49 copies
    ((4, 16, 96, 96), (16, 16, 7, 7), 1, 1, "regions"),  # 49 copies of the taps in bounds
    ((2, 256, 24, 24), (256, 256, 7, 7), 1, 1, "regions"),  # a 25 MB weight, reordered
])
def test_the_memory_beside_input_and_output_is_one_chunk(monkeypatch, xs, ws, stride,
                                                         groups, form):
    """A 7x7 convolution of a 9.4 MB input: the peak allocated during the call is the output
    and at most CHUNK_BYTES beside it, and a reordered copy of the filters, in whichever
    form it runs."""
    _force(monkeypatch, form)
    monkeypatch.setattr(cpu_buffers, "SCRATCH", threading.local())  # no buffer kept before
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
    assert peak <= out_bytes + w.nbytes + cpu_buffers.CHUNK_BYTES * 1.1, (peak, out_bytes)


def test_a_kept_buffer_serves_the_next_call_and_grows_only_when_too_small(monkeypatch):
    """Each thread keeps its chunk buffers: a second call of the same layer allocates
    nothing, a larger one replaces them, and a call of another dtype reads its own."""
    _force(monkeypatch, "planes")
    monkeypatch.setattr(cpu_buffers, "SCRATCH", threading.local())
    a, b = cpu_buffers.scratch(np.float64, 3, 5)
    assert a.shape == (3,) and b.shape == (5,) and a.dtype == np.float64
    kept = cpu_buffers.SCRATCH.buffer
    c, = cpu_buffers.scratch(np.complex64, 4)  # 32 bytes of the 64 kept
    assert cpu_buffers.SCRATCH.buffer is kept and np.shares_memory(c, kept)
    cpu_buffers.scratch(np.float32, 17)
    assert cpu_buffers.SCRATCH.buffer is not kept and cpu_buffers.SCRATCH.buffer.nbytes == 68
    monkeypatch.setattr(cpu_buffers, "SCRATCH", threading.local())
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 6, 40, 40)), rng.standard_normal((9, 2, 3, 3))
    peaks, results = [], []
    for _ in range(2):
        tracemalloc.start()
        try:
            results.append(conv2d(x, w, None, 1, 1, 1, 3))
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    first, again = results
    np.testing.assert_array_equal(first, again)
    kept = cpu_buffers.SCRATCH.buffer.nbytes
    assert kept > first.nbytes and peaks[1] < peaks[0] - 0.9 * kept, (peaks, kept)
    single = conv2d(x.astype(np.complex64), w.astype(np.complex64), None, 1, 1, 1, 3)
    np.testing.assert_allclose(single, first, rtol=1e-5, atol=1e-5 * np.abs(first).max())


@pytest.mark.parametrize("form", ["planes", "grid"])
def test_calls_on_several_threads_keep_their_own_buffers(monkeypatch, form):
    """Callers' threads convolving at once, each its own layer many times: every result is
    the one a lone call gives (a buffer kept for all threads would mix their chunks)."""
    _force(monkeypatch, form)
    monkeypatch.setattr(conv2d_cpu, "GROUPED_CHUNK_BYTES", 3000)
    rng = np.random.default_rng(23)
    layers = [(rng.standard_normal((2, 4, 12 + i, 9)), rng.standard_normal((4, 2, 3, 3)))
              for i in range(4)]
    alone = [conv2d(x, w, None, 1, 1, 1, 2) for x, w in layers]
    start, wrong = threading.Barrier(len(layers)), []

    def convolve(i):
        start.wait()
        for _ in range(20):
            if not np.array_equal(conv2d(*layers[i], None, 1, 1, 1, 2), alone[i]):
                wrong.append(i)

    threads = [threading.Thread(target=convolve, args=(i,)) for i in range(len(layers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64",
                                   "complex128"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "strided", "batch-1"])
def test_each_form_takes_every_dtype_and_layout(monkeypatch, form, dtype, layout):
    """Every dtype the CPU takes and inputs that are channels-last, a strided view or one
    image, in each form, against the float64 definition; NaN left in the output's and the
    chunk buffers' memory is overwritten or zeroed."""
    _force(monkeypatch, form)
    monkeypatch.setattr(conv2d_cpu, "GROUPED_CHUNK_BYTES", 3000)  # several chunks
    rng = np.random.default_rng(17)
    n = 1 if layout == "batch-1" else 3
    x = rng.standard_normal((n, 6, 11, 10)) + (1j if dtype[0] == "c" else 0) * \
        rng.standard_normal((n, 6, 11, 10))
    w = rng.standard_normal((4, 3, 3, 2))
    x, w = x.astype(dtype), w.astype(dtype)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    elif layout == "strided":
        x = np.repeat(x, 2, axis=3)[..., ::2]
    poison = threading.local()  # chunk buffers of NaN bytes: padding never zeroed shows
    poison.buffer = np.full(1 << 20, 255, np.uint8)
    monkeypatch.setattr(cpu_buffers, "SCRATCH", poison)
    monkeypatch.setattr(conv2d_cpu.np, "empty", _poisoned(np.empty))
    got = conv2d(x, w, None, 1, (2, 1), (1, 2), 2)
    monkeypatch.undo()
    ref = direct(x, w, None, (1, 1), (2, 2, 1, 1), (1, 2), 2)
    tol = 4e-3 if dtype == "float16" else 1e-5 if dtype in ("float32", "complex64") else 1e-12
    assert got.dtype == np.dtype(dtype) and np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def _poisoned(empty):
    """``np.empty`` whose floating arrays come filled with NaN (uninitialised memory that
    happened to hold NaN), so that an element never written shows."""
    def poisoned(*args, **kwargs):
        a = empty(*args, **kwargs)
        if a.dtype.kind in "fc":
            a.fill(np.nan)
        return a
    return poisoned


@pytest.mark.parametrize("xs,ws,groups,gathers", [
    ((8, 144, 56, 56), (144, 1, 3, 3), 144, False),  # MobileNetV2 depthwise
    ((8, 512, 14, 14), (512, 16, 3, 3), 32, False),  # ResNeXt-50 stage 3
    ((8, 64, 56, 56), (64, 64, 3, 3), 1, False),     # ResNet-50 stage 1
    ((8, 128, 28, 28), (128, 128, 3, 3), 1, False),  # ResNet-50 stage 2
    ((8, 256, 14, 14), (256, 256, 3, 3), 1, True),   # ResNet-50 stage 3
    ((8, 512, 7, 7), (512, 512, 3, 3), 1, True),     # ResNet-50 stage 4
])
def test_stride_one_layers_gather_where_the_filters_outweigh_the_input(xs, ws, groups,
                                                                       gathers):
    """ResNet-50's and the benchmarked stride-one layers (docs/benchmarks/shapes-cpu): the
    deep layers on 14 x 14 and 7 x 7 images gather their taps, the others run on the
    planes."""
    assert conv2d_cpu.gathers(conv_geometry(xs, ws, 1, 1, 1, groups)) == gathers


def test_the_bands_of_a_dilated_branch_hold_the_taps_that_read_in_bounds():
    """DeepLab's ASPP branch (33 rows, dilation 12, padding 12): three bands, the module's
    picture; and a band no tap reads in (padding wider than the reach) is left out."""
    assert conv_regions.bands(33, 33, 3, 1, 12, 12) == [
        conv_regions.Band(0, 12, 1, 3), conv_regions.Band(12, 21, 0, 3),
        conv_regions.Band(21, 33, 0, 2)]
    assert conv_regions.bands(9, 3, 3, 1, 1, 4) == [
        conv_regions.Band(2, 3, 2, 3), conv_regions.Band(3, 4, 1, 3),
        conv_regions.Band(4, 5, 0, 3), conv_regions.Band(5, 6, 0, 2),
        conv_regions.Band(6, 7, 0, 1)]
    for out, size, taps, stride, dilation, pad in [(33, 33, 3, 1, 12, 12), (7, 13, 5, 2, 3, 4),
                                                   (9, 3, 3, 1, 1, 4), (4, 9, 2, 3, 5, 0)]:
        covered = np.zeros((out, taps), bool)  # each (output, tap) pair reading in bounds
        for b in conv_regions.bands(out, size, taps, stride, dilation, pad):
            covered[b.lo:b.hi, b.t0:b.t1] = True
        read = np.arange(out)[:, None] * stride + np.arange(taps) * dilation - pad
        np.testing.assert_array_equal(covered, (read >= 0) & (read < size))


@pytest.mark.parametrize("xs,ws,padding,dilation,regions", [
    ((4, 256, 33, 33), (256, 256, 3, 3), 12, 12, True),  # DeepLab ASPP, dilation 12
    ((4, 256, 33, 33), (256, 256, 3, 3), 18, 18, True),  # and 18
    ((4, 256, 33, 33), (256, 256, 3, 3), 6, 6, False),   # and 6: 77% of its taps in bounds
    ((4, 512, 28, 28), (512, 512, 3, 3), 2, 2, False),   # DeepLab stage 4, dilation 2
    ((8, 512, 7, 7), (512, 512, 3, 3), 2, 2, False),     # small maps: too few taps skipped
    ((8, 64, 56, 56), (64, 64, 3, 3), 1, 1, False),      # ResNet-50 stage 1
    ((1, 1, 40, 40), (1, 1, 65, 65), 32, 1, False),      # a wide filter: copies of a few
    ((2, 16, 32, 32), (16, 16, 31, 31), 15, 1, False),   # elements, thousands of rectangles
])
def test_layers_whose_padding_holds_many_taps_run_by_regions(xs, ws, padding, dilation,
                                                             regions):
    g = conv_geometry(xs, ws, 1, padding, dilation, 1)
    assert conv_regions.takes(g) == regions
    assert not conv_regions.takes(conv_geometry(  # grouped: products too small a group
        (xs[0], xs[1], *xs[2:]), (ws[0], 1, *ws[2:]), 1, padding, dilation, xs[1]))
    plan = conv_cpu_plan.plan_conv2d_cpu(g, "float32")
    assert (plan.route == conv_cpu_plan.REGIONS) == regions
    assert ("tap regions" in str(plan)) == regions


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_regions_write_every_output_element_zeros_where_no_tap_reads(monkeypatch, dtype):
    """Padding wider than the filters' reach leaves rows and columns no tap reads in: the
    output there is zero (written, over a poisoned buffer)."""
    _force(monkeypatch, "regions")
    rng = np.random.default_rng(11)
    xs, ws = (2, 3, 3, 4), (4, 3, 3, 3)
    x = (rng.standard_normal(xs) + (1j * rng.standard_normal(xs) if dtype == np.complex64
                                    else 0)).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    g = conv_geometry(xs, ws, 1, 5, (2, 1), 1)  # rows 0 and 8, columns 0-2 and 9-11 read
    out = np.full((g.n, g.k, g.p, g.q), np.nan, dtype)  # only padding
    conv_regions.conv_regions(x, w, g, out)
    ref = direct(x, w, None, g.stride, g.padding, g.dilation, 1)
    assert (out[:, :, [0, 8]] == 0).all() and (out[:, :, :, [0, 1, 2, 9, 10, 11]] == 0).all()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
