"""The shape-class benchmark's table and report (the timing itself runs on the device)."""
import numpy as np
import pytest

from skcontract.bench import shapes
from skcontract.bench.einsum import output_shape
from skcontract.parse import parse_equation

ISSUE_EXAMPLES = {((5000, 3000), (3000, 700)), ((4096, 32, 32), (4096, 32, 32)),
                  ((1152, 1152), (1152, 1152)), ((8192,), (8192,)), ((16384, 64), (16384, 64))}
"""Shapes the issue measured the cliffs on: the benchmark must not be built from them."""


def test_at_least_ten_classes_of_several_rows():
    classes = {}
    for c in shapes.CASES:
        classes.setdefault(c.cls, []).append(c)
    assert len(classes) >= 10
    assert all(len(rows) >= 2 for rows in classes.values()), {
        k: len(v) for k, v in classes.items()}


@pytest.mark.parametrize("case", shapes.CASES, ids=lambda c: f"{c.cls}-{c.expr}")
def test_every_row_is_a_valid_product_from_a_named_source(case):
    parse_equation(case.expr, case.shapes)  # raises on a shape that does not fit
    assert case.source and case.dtype in ("float16", "float32", "float64")
    assert case.shapes not in ISSUE_EXAMPLES
    if case.op != "einsum":
        assert case.expr == "mk,kn->mn" and case.op in ("gemm-torch", "gemm-cupy")


CONV_ISSUE_EXAMPLES = {((32, 256, 28, 28), 256), ((32, 256, 28, 28), 32), ((64, 1024, 14, 14), 1),
                       ((1, 256, 14, 14), 1), ((8, 256, 32, 32), 1), ((4, 128, 128, 128), 1)}
"""(input, groups) of the layers the convolution issue measured its cliffs on."""


def test_gpu_convolution_classes_cover_what_users_run():
    classes = {c.cls for c in shapes.CONV_GPU_CASES}
    assert classes >= {"conv-dense", "conv-pointwise", "conv-grouped", "conv-depthwise",
                       "conv-batch1", "conv-dilated", "conv-strided", "conv-large-kernel",
                       "conv-fp32", "conv-nchw"}
    layouts = {(c.dtype, c.layout) for c in shapes.CONV_GPU_CASES}
    assert {("float16", "NHWC"), ("bfloat16", "NHWC"), ("float32", "NCHW"), ("float16", "NCHW"),
            ("bfloat16", "NCHW")} <= layouts


@pytest.mark.parametrize("case", shapes.CONV_GPU_CASES, ids=lambda c: f"{c.cls}-{c.x}")
def test_every_gpu_convolution_row_is_a_valid_layer(case):
    g = shapes.conv_geometry(case.x, case.w, stride=case.stride, padding=case.padding,
                             dilation=case.dilation, groups=case.groups)
    assert g.p > 0 and g.q > 0 and case.source
    assert (case.x, case.groups) not in CONV_ISSUE_EXAMPLES
    assert shapes.conv_flops(case) == 2.0 * np.prod((g.n, g.k, g.p, g.q)) * \
        case.w[1] * case.w[2] * case.w[3]
    if case.cls == "conv-depthwise":
        assert case.groups == case.x[1] == case.w[0] and case.w[1] == 1
    if case.cls == "conv-dilated":
        assert case.dilation > 1


def test_rows_off_16_bytes_are_off_16_bytes():
    """Each row of that class has an operand or output row (its innermost extent) that is
    not a multiple of 16 bytes."""
    for c in shapes.CASES:
        if c.cls == "rows-off-16B":
            item = np.dtype(c.dtype).itemsize
            rows = [s[-1] for s in c.shapes] + [output_shape(c.expr, c.shapes)[-1]]
            assert any(n * item % 16 for n in rows), c


def test_report_and_summary():
    row = dict(zip(shapes.ROW_KEYS, ("outer", "einsum", "i,j->ij", [[4], [8]], "float32",
                                     "x", 2.0, "torch.einsum", 3.0, 1.5, 5.0, 6.0, 100.0,
                                     1e-7)))
    slow = dict(row, ratio=0.5, gbps=50.0)
    doc = {"date": "2026-12-06", "commit": "abc", "device": "NVIDIA H100 80GB HBM3",
           "copy_gbps": 3000.0, "rows": [row, slow]}
    summary = shapes.class_summary(doc["rows"])
    assert summary["outer"]["worst"] == 0.5 and summary["outer"]["min_gbps"] == 50.0
    assert abs(summary["outer"]["geomean"] - (1.5 * 0.5) ** 0.5) < 1e-12
    text = shapes.render_markdown(doc)
    assert "| outer | 2 | 0.87 | 0.50 | 50 |" in text
    assert shapes.default_name(doc["device"]) == "shapes-h100"
    assert shapes.default_name("NVIDIA H200") == "shapes-h200"


def test_cpu_convolution_rows_run_here():
    """``--cpu`` needs no GPU: a short run of one class writes its rows."""
    pytest.importorskip("torch")
    import json
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        shapes.main(["--cpu", "--classes", "conv-cpu-pointwise", "--reps", "1", "--out", out])
        doc = json.load(open(f"{out}/shapes-cpu.json"))
    assert doc["device"].startswith("CPU ") and len(doc["rows"]) == 2
    for row in doc["rows"]:
        assert row["class"] == "conv-cpu-pointwise" and row["rel_err"] < 1e-5
        assert row["us"] > 0 and row["peer_us"] > 0 and row["ratio"] > 0


def test_cpu_channels_last_and_dilated_rows_run_as_named():
    """A channels-last row hands both sides channels-last arrays; a dilated row dilates."""
    pytest.importorskip("torch")
    case = next(c for c in shapes.CONV_CPU_CASES if c.cls == "conv-cpu-channels-last")
    small = case._replace(x=(1,) + case.x[1:2] + (9, 9))
    row = shapes.measure_conv_cpu(small, 1, print)
    assert "channels-last" in row["expr"] and row["rel_err"] < 1e-5
    dilated = shapes.ConvCase("conv-cpu-dilated", (1, 4, 12, 12), (4, 4, 3, 3), 1, 2, 1,
                              "a test", dilation=2)
    row = shapes.measure_conv_cpu(dilated, 1, print)
    assert "dilation 2" in row["expr"] and row["rel_err"] < 1e-5


def test_conv_cpu_classes_are_from_named_layers():
    classes = {c.cls for c in shapes.CONV_CPU_CASES}
    assert {"conv-cpu-dense", "conv-cpu-pointwise", "conv-cpu-depthwise",
            "conv-cpu-grouped", "conv-cpu-strided", "conv-cpu-batch1", "conv-cpu-dilated",
            "conv-cpu-large-kernel", "conv-cpu-channels-last"} <= classes
    for c in shapes.CONV_CPU_CASES:
        assert c.source and c.x[1] == c.w[1] * c.groups and c.w[0] % c.groups == 0


def test_a_partial_run_merges_into_an_earlier_one():
    def row(cls, us, commit=None):
        r = dict(zip(shapes.ROW_KEYS, (cls, "einsum", "ij,jk->ik", [[2, 3], [3, 4]], "float16",
                                       "x", us, "torch.einsum", 1.0, 1.0 / us, us, 1.0, None,
                                       0.0)))
        return r if commit is None else dict(r, commit=commit)
    earlier = {"commit": "aaa", "device": "H100", "date": "d0",
               "rows": [row("a", 1.0), row("b", 2.0), row("c", 3.0)]}
    run = {"commit": "bbb", "device": "H100", "date": "d1",
           "rows": [row("b", 0.5, "bbb"), row("d", 4.0, "bbb")]}
    doc = shapes.merged(earlier, run)
    assert [(r["class"], r["us"], r["commit"]) for r in doc["rows"]] == [
        ("a", 1.0, "aaa"), ("b", 0.5, "bbb"), ("c", 3.0, "aaa"), ("d", 4.0, "bbb")]
    assert doc["commit"] == "aaa, bbb" and doc["date"] == "d1"
