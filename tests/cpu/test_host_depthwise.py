"""The CPU's depthwise convolution in C (skcontract/host/depthwise.py, host/c/depthwise.c)
and the host compiler that builds it (skcontract/host/cc.py): both forms against the float64
definition at every stride, dilation, padding and layout, threads that split the planes
without changing a bit, and the NumPy form wherever the library cannot be built."""
from __future__ import annotations

import numpy as np
import pytest

from skcontract import conv2d
from skcontract.host import cc, depthwise
from skcontract.ops import conv2d_cpu
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import direct

needs_library = pytest.mark.skipif(cc.load("depthwise") is None,
                                   reason=f"no host library: {cc.why_not('depthwise')}")

CASES = [  # (x shape, R x S, stride, padding, dilation)
    ((2, 5, 12, 11), (3, 3), 1, 1, 1),                  # a few channels, same padding
    ((1, 37, 9, 10), (3, 3), 1, 1, 1),                  # a partial block of lanes
    ((3, 2, 30, 33), (5, 5), 1, 2, 1),                  # rows past a block of the grid
    ((2, 19, 17, 23), (4, 2), (2, 3), (1, 2), (2, 1)),  # every stride and dilation differ
    ((2, 6, 13, 12), (3, 3), 2, 1, 1),                  # MobileNet's strided depthwise
    ((1, 4, 8, 8), (7, 7), 1, 3, 1),                    # ConvNeXt's 7 x 7 on a small map
    ((2, 3, 6, 7), (2, 4), 1, "same", (1, 2)),          # uneven padding, dilated columns
    ((2, 3, 5, 6), (2, 2), 1, 4, 1),                    # padding wider than the filter
    ((1, 1, 7, 9), (3, 1), (1, 2), 0, 1),               # one channel, no padding
    ((2, 17, 1, 1), (3, 3), 1, 1, 1),                   # one pixel
]


def _case(xs, rs, stride, padding, dilation, dtype, seed=0):
    rng = np.random.default_rng(seed + sum(xs))
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((xs[1], 1) + rs).astype(dtype)
    g = conv_geometry(xs, w.shape, stride, padding, dilation, xs[1])
    return x, w, g, direct(x, w, None, g.stride, g.padding, g.dilation, xs[1])


def _close(got, ref, dtype):
    tol = 2e-6 if np.dtype(dtype) == np.float32 else 1e-13
    assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def _poisoned_scratch(aligned):
    """Thread buffers full of NaN: padding the kernel does not zero shows."""
    def poisoned(elems, dtype):
        buf = aligned(elems, dtype)
        buf.fill(np.nan)
        return buf
    return poisoned


@needs_library
@pytest.mark.parametrize("form", ["planes", "lanes"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,rs,stride,padding,dilation", CASES)
def test_each_form_computes_the_definition(monkeypatch, form, dtype, xs, rs, stride, padding,
                                           dilation):
    monkeypatch.setattr(depthwise, "_aligned", _poisoned_scratch(depthwise._aligned))
    x, w, g, ref = _case(xs, rs, stride, padding, dilation, dtype)
    _close(depthwise.depthwise_cpu(x, w, g, form), ref, dtype)


@needs_library
@pytest.mark.parametrize("form", ["planes", "lanes"])
@pytest.mark.parametrize("layout", ["NHWC", "strided", "reversed"])
def test_the_input_is_read_at_its_strides(form, layout):
    x, w, g, _ = _case((2, 20, 9, 11), (3, 3), 1, 1, 1, "float64")
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    elif layout == "strided":
        x = np.repeat(x, 2, axis=3)[..., ::2]
    else:
        x = np.ascontiguousarray(x[:, ::-1, ::-1])[:, ::-1, ::-1]
    ref = direct(x, w, None, g.stride, g.padding, g.dilation, g.groups)
    _close(depthwise.depthwise_cpu(x, w, g, form), ref, "float64")


@needs_library
@pytest.mark.parametrize("form", ["planes", "lanes"])
def test_threads_split_the_work_without_changing_a_bit(monkeypatch, form):
    """Each output is summed by one thread in tap order: any split gives the same bits."""
    x, w, g, _ = _case((3, 21, 10, 9), (5, 3), 1, (2, 1), 1, "float32")
    monkeypatch.setattr(depthwise, "THREAD_MIN_TAPS", 1)
    results = []
    for threads in ("1", "2", "5"):
        monkeypatch.setenv(depthwise.THREADS_ENV, threads)
        results.append(depthwise.depthwise_cpu(x, w, g, form))
    assert all(np.array_equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("xs,rs,form", [
    ((8, 144, 56, 56), (3, 3), "planes"),  # MobileNetV2's 3 x 3 on 56 x 56
    ((8, 96, 56, 56), (7, 7), "planes"),   # ConvNeXt-T stage 1
    ((8, 576, 14, 14), (3, 3), "planes"),  # MobileNetV2's 3 x 3 on 14 x 14
    ((8, 384, 14, 14), (7, 7), "lanes"),   # ConvNeXt-T stage 3: most of the grid thrown away
    ((1, 960, 7, 7), (5, 5), "lanes"),     # EfficientNet's 5 x 5 on 7 x 7
])
def test_small_maps_with_wide_filters_take_the_lanes_form(xs, rs, form):
    g = conv_geometry(xs, (xs[1], 1) + rs, 1, rs[0] // 2, 1, xs[1])
    assert depthwise.form_of(g) == form


@needs_library
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_conv2d_runs_depthwise_layers_on_the_kernel(monkeypatch, dtype):
    calls = []
    kernel = conv2d_cpu.depthwise_cpu
    monkeypatch.setattr(conv2d_cpu, "depthwise_cpu",
                        lambda *args: calls.append(args[0].dtype) or kernel(*args))
    x, w, g, _ = _case((2, 8, 10, 10), (3, 3), 1, 1, 1, dtype)
    bias = np.arange(8, dtype=dtype)
    got = conv2d(x, w, bias, 1, 1, 1, 8)
    ref = direct(x, w, bias, g.stride, g.padding, g.dilation, 8)
    tol = 2e-3 if dtype == "float16" else 2e-6 if dtype == "float32" else 1e-13
    assert calls == [np.dtype("float32" if dtype == "float16" else dtype)]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_other_dtypes_take_the_numpy_form():
    x, w, g, _ = _case((1, 3, 5, 5), (3, 3), 1, 1, 1, "float64")
    assert depthwise.depthwise_cpu(x.astype(np.complex128), w.astype(np.complex128), g) is None


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A host compiler with nothing loaded or refused yet, its cache under ``tmp_path``."""
    monkeypatch.setattr(cc, "_LOADED", {})
    monkeypatch.setattr(cc, "_REASONS", {})
    monkeypatch.setenv("SKCONTRACT_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_without_a_compiler_the_numpy_form_runs(monkeypatch, fresh):
    monkeypatch.setattr(cc, "compiler", lambda: None)
    x, w, g, ref = _case((2, 4, 7, 7), (3, 3), 1, 1, 1, "float64")
    assert depthwise.depthwise_cpu(x, w, g) is None
    assert "no C compiler" in cc.why_not("depthwise")
    np.testing.assert_allclose(conv2d(x, w, None, 1, 1, 1, 4), ref, rtol=1e-12)


def test_the_switch_turns_the_library_off(monkeypatch, fresh):
    monkeypatch.setenv(cc.ENV_SWITCH, "0")
    assert cc.load("depthwise") is None and cc.ENV_SWITCH in cc.why_not("depthwise")


@pytest.mark.skipif(cc.compiler() is None, reason="no C compiler on this machine")
def test_a_source_that_does_not_build_says_why(monkeypatch, fresh):
    (fresh / "broken.c").write_text("int f(void) { return missing; }\n")
    monkeypatch.setattr(cc, "SOURCE_DIR", fresh)
    assert cc.load("broken") is None
    assert "could not build broken.c" in cc.why_not("broken")
    assert not list((fresh / "host").glob("*.so*"))  # no half-written library left


@needs_library
def test_a_library_is_built_once_and_kept(monkeypatch, fresh):
    builds = []
    build = cc._build
    monkeypatch.setattr(cc, "_build", lambda *args: builds.append(args) or build(*args))
    assert cc.load("depthwise") is not None
    kept = list((fresh / "host").glob("depthwise-*.so"))
    assert len(builds) == 1 and len(kept) == 1
    monkeypatch.setattr(cc, "_LOADED", {})  # a new process: the kept library loads
    assert cc.load("depthwise") is not None and len(builds) == 1
