"""The CPU's direct convolutions in C (skcontract/host/depthwise.py, host/grouped.py,
host/c/conv.c) and the host compiler that builds them (skcontract/host/cc.py): each form
against the float64 definition at every stride, dilation, padding, group shape and layout,
threads that split the work without changing a bit, the memory a call takes, and the NumPy
form wherever the library cannot be built."""
from __future__ import annotations

import ctypes
import tracemalloc

import numpy as np
import pytest

from skcontract import conv2d
from skcontract.host import call, cc, depthwise, grouped, parallel
from skcontract.ops import conv2d_cpu
from skcontract.ops.conv2d import conv_geometry
from tests.conv_reference import direct

needs_library = pytest.mark.skipif(cc.load("conv") is None,
                                   reason=f"no host library: {cc.why_not('conv')}")

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


def _dw(x, w, g, form=None):
    """The depthwise kernel as conv2d's plan would run it (``form`` forced where given)."""
    run = depthwise.depthwise_run(g, x.dtype, depthwise.channels_contiguous(x), form)
    return None if isinstance(run, str) else depthwise.depthwise_cpu(x, w, g, run)


def _gr(x, w, g):
    """The grouped kernel as conv2d's plan would run it."""
    run = grouped.grouped_run(g, x.dtype, depthwise.channels_contiguous(x))
    return None if isinstance(run, str) else grouped.grouped_cpu(x, w, g, run)


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
    monkeypatch.setattr(call, "aligned", _poisoned_scratch(parallel.aligned))
    x, w, g, ref = _case(xs, rs, stride, padding, dilation, dtype)
    _close(_dw(x, w, g, form), ref, dtype)


@needs_library
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,rs,stride,padding,dilation", CASES + [
    ((2, 35, 20, 40), (3, 5), 1, (1, 2), 1),  # interior blocks of pixels and a border
    ((1, 16, 9, 30), (3, 3), (1, 2), 1, (1, 3)),  # strided, dilated interior
])
def test_channels_last_inputs_are_read_as_they_lie(dtype, xs, rs, stride, padding, dilation):
    """The "nhwc" form: a channels-last input in, a channels-last output out, no copy."""
    x, w, g, ref = _case(xs, rs, stride, padding, dilation, dtype)
    last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    got = _dw(last, w, g)
    _close(got, ref, dtype)
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous


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
    _close(_dw(x, w, g, form), ref, "float64")


@needs_library
@pytest.mark.parametrize("form", ["planes", "lanes", "nhwc"])
def test_threads_split_the_work_without_changing_a_bit(monkeypatch, form):
    """Each output is summed by one thread in a fixed order: any split gives the same
    bits."""
    x, w, g, _ = _case((3, 21, 10, 19), (5, 3), 1, (2, 1), 1, "float32")
    if form == "nhwc":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    monkeypatch.setattr(parallel, "THREAD_MIN_TAPS", 1)
    results = []
    for threads in ("1", "2", "5"):
        monkeypatch.setenv(parallel.THREADS_ENV, threads)
        results.append(_dw(x, w, g, form))
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


GROUPED_CASES = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 12, 9, 11), (16, 3, 3, 2), (2, 1), (1, 0), (1, 2), 4),  # strides, dilation differ
    ((1, 64, 14, 14), (64, 16, 3, 3), 1, 1, 1, 4),      # ResNeXt-like, 8 outputs a block
    ((2, 8, 10, 9), (20, 4, 3, 3), 1, 1, 1, 2),         # 10 a group: blocks of 8, 1 and 1
    ((2, 6, 7, 8), (18, 1, 3, 3), 1, 1, 1, 6),          # depthwise with 3 outputs a channel
    ((2, 8, 6, 7), (8, 2, 4, 2), 1, "same", 1, 4),      # uneven padding
    ((1, 4, 16, 16), (8, 2, 5, 5), 2, 2, 1, 2),         # strided 5 x 5
    ((2, 6, 3, 3), (6, 3, 3, 3), 1, 3, 1, 2),           # padding wider than the map
    ((2, 5, 9, 8), (7, 5, 3, 3), 1, 1, 1, 1),           # one group
    ((1, 3, 23, 21), (9, 3, 7, 7), 2, 3, 1, 1),         # a stem: one group, strided 7 x 7
]


@needs_library
@pytest.mark.parametrize("band", ["rows", "whole"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", GROUPED_CASES)
def test_the_grouped_kernel_computes_the_definition(monkeypatch, band, dtype, xs, ws, stride,
                                                    padding, dilation, groups):
    """In bands of one output row (padding rows past one band hold another's data unless
    zeroed) and whole."""
    monkeypatch.setattr(call, "aligned", _poisoned_scratch(parallel.aligned))
    monkeypatch.setattr(grouped, "BAND_BYTES", 1 if band == "rows" else 1 << 30)
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    g = conv_geometry(xs, ws, stride, padding, dilation, groups)
    ref = direct(x, w, None, g.stride, g.padding, g.dilation, groups)
    _close(_gr(x, w, g), ref, dtype)
    if dtype == "float64":  # channels-last (in and out), and a view of every other column
        last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        got = _gr(last, w, g)
        _close(got, ref, dtype)
        assert got.transpose(0, 2, 3, 1).flags.c_contiguous
        _close(_gr(np.repeat(x, 2, axis=3)[..., ::2], w, g), ref, dtype)


@needs_library
def test_grouped_threads_split_the_work_without_changing_a_bit(monkeypatch):
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((3, 12, 9, 10)), rng.standard_normal((12, 4, 3, 3))
    g = conv_geometry(x.shape, w.shape, 1, 1, 1, 3)
    monkeypatch.setattr(parallel, "THREAD_MIN_TAPS", 1)
    results = []
    for threads in ("1", "2", "4"):
        monkeypatch.setenv(parallel.THREADS_ENV, threads)
        results.append(_gr(x, w, g))
    assert all(np.array_equal(results[0], r) for r in results[1:])


@needs_library
@pytest.mark.parametrize("ws,groups", [((64, 1, 7, 7), 64), ((64, 16, 3, 3), 4)])
def test_the_memory_beside_the_output_is_a_buffer_a_thread(monkeypatch, ws, groups):
    """A 6.4 MB input: the call's peak beside the output is each thread's buffer (a group's
    padded planes and grids, a few of its planes), far below the input."""
    monkeypatch.setenv(parallel.THREADS_ENV, "2")
    x = np.random.default_rng(2).standard_normal((2, 64, 80, 80)).astype(np.float32)
    w = np.ones(ws, np.float32)
    conv2d(x, w, None, 1, ws[2] // 2, 1, groups)  # the library loaded, the pool started
    tracemalloc.start()
    try:
        out = conv2d(x, w, None, 1, ws[2] // 2, 1, groups)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    plane = 96 * 96 * 4  # a padded plane, with slack
    buffer = (64 // groups + 1) * plane  # a group's planes and its grids
    assert peak <= out.nbytes + 2 * 2 * buffer, (peak, out.nbytes)
    assert peak - out.nbytes < x.nbytes / 2


@needs_library
def test_conv2d_runs_grouped_layers_on_the_kernel(monkeypatch):
    calls = []
    kernel = conv2d_cpu.grouped_cpu
    monkeypatch.setattr(conv2d_cpu, "grouped_cpu",
                        lambda *args: calls.append(args[0].shape) or kernel(*args))
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((2, 8, 9, 9)), rng.standard_normal((8, 2, 3, 3))
    got = conv2d(x, w, None, 1, 1, 1, 4)
    assert calls == [x.shape]
    _close(got, direct(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 4), "float64")
    calls.clear()
    wide = rng.standard_normal((2, 128, 4, 4))  # one group, a small map: BLAS
    conv2d(wide, np.ones((8, 128, 3, 3)), None, 1, 1, 1, 1)
    conv2d(x, np.ones((6, 8, 1, 1)), None, 1, 0, 1, 1)  # pointwise: one product an image
    conv2d(x, np.ones((8, 2, 1, 1)), None, 1, 0, 1, 4)  # grouped pointwise too
    assert calls == []


@pytest.mark.parametrize("xs,ws,stride,takes", [
    ((8, 64, 56, 56), (64, 64, 3, 3), 1, True),       # ResNet-50 stage 1: few channels
    ((4, 128, 112, 112), (128, 128, 3, 3), 1, True),  # VGG-16 block 2: a large map
    ((8, 128, 56, 56), (128, 128, 3, 3), 2, True),    # strided
    ((8, 3, 224, 224), (64, 3, 7, 7), 2, True),       # the stem
    ((8, 128, 28, 28), (128, 128, 3, 3), 1, False),   # ResNet-50 stage 2: BLAS
    ((8, 512, 7, 7), (512, 512, 3, 3), 1, False),     # stage 4: BLAS
    ((8, 512, 14, 14), (512, 16, 3, 3), 1, True),     # grouped: always
])
def test_one_group_layers_take_the_kernel_where_it_measured_faster(xs, ws, stride, takes):
    g = conv_geometry(xs, ws, stride, ws[2] // 2, 1, xs[1] // ws[1])
    assert grouped.kernel_takes(g) is takes


def test_other_dtypes_take_the_numpy_form():
    x, w, g, _ = _case((1, 3, 5, 5), (3, 3), 1, 1, 1, "float64")
    assert _dw(x.astype(np.complex128), w.astype(np.complex128), g) is None
    assert _gr(x.astype(np.complex64), w.astype(np.complex64), g) is None


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
    assert _dw(x, w, g) is None
    assert "no C compiler" in cc.why_not("conv")
    np.testing.assert_allclose(conv2d(x, w, None, 1, 1, 1, 4), ref, rtol=1e-12)


def test_the_switch_turns_the_library_off(monkeypatch, fresh):
    monkeypatch.setenv(cc.ENV_SWITCH, "0")
    assert cc.load("conv") is None and cc.ENV_SWITCH in cc.why_not("conv")


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
    assert cc.load("conv") is not None
    kept = list((fresh / "host").glob("conv-*.so"))
    assert len(builds) == 1 and len(kept) == 1
    monkeypatch.setattr(cc, "_LOADED", {})  # a new process: the kept library loads
    assert cc.load("conv") is not None and len(builds) == 1


@needs_library
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_a_forked_child_runs_the_kernels_on_threads_of_its_own(monkeypatch):
    """The parent's pool is started before the fork; the child's threads are its own."""
    import multiprocessing as mp

    monkeypatch.setattr(parallel, "THREAD_MIN_TAPS", 1)
    x, w, g, ref = _case((2, 16, 12, 12), (3, 3), 1, 1, 1, "float64")
    _close(_dw(x, w, g), ref, "float64")  # the parent's pool started
    with mp.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_dw, (x, w, g)).get(timeout=60)
    _close(got, ref, "float64")


def test_planes_past_the_buffer_bound_take_the_numpy_form(monkeypatch):
    """A huge plane (one large image) would need a buffer past MAX_SCRATCH_BYTES a thread:
    the kernels decline it and conv2d's bounded NumPy chunks run it."""
    monkeypatch.setattr(parallel, "MAX_SCRATCH_BYTES", 4096)
    x, w, g, ref = _case((1, 2, 40, 40), (3, 3), 1, 1, 1, "float64")
    assert _dw(x, w, g) is None
    wide = np.ones((2, 1, 3, 3))
    assert _gr(x, wide, conv_geometry(x.shape, wide.shape, 1, 1, 1, 2)) is None
    _close(conv2d(x, w, None, 1, 1, 1, 2), ref, "float64")


def test_the_python_side_mirrors_the_library_constants():
    lib = cc.load("conv")
    if lib is None:
        pytest.skip(f"no host library: {cc.why_not('conv')}")
    for name, value in (("host_vector_bytes", parallel.VECTOR_BYTES),
                        ("host_planes_block_vectors", depthwise.PLANES_BLOCK_VECTORS)):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_ssize_t
        assert fn() == value, name


def test_filters_past_the_tap_bound_take_the_numpy_form(monkeypatch):
    """The planes forms keep an offset a tap on the stack: a huge filter is refused."""
    monkeypatch.setattr(call, "MAX_TAPS", 8)
    x, w, g, ref = _case((1, 2, 9, 9), (3, 3), 1, 1, 1, "float64")
    assert "taps" in depthwise.depthwise_run(g, x.dtype)
    assert "taps" in grouped.grouped_run(conv_geometry((1, 2, 9, 9), (2, 2, 3, 3), 1, 1), x.dtype)
    _close(conv2d(x, w, None, 1, 1, 1, 2), ref, "float64")


@needs_library
def test_at_interpreter_shutdown_the_calling_thread_runs_every_range(monkeypatch):
    """No new thread starts at shutdown (the pool refuses work): the ranges run here."""
    class Closed:
        def submit(self, *args):
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(parallel, "_pool", lambda: Closed())
    monkeypatch.setattr(parallel, "THREAD_MIN_TAPS", 1)
    monkeypatch.setenv(parallel.THREADS_ENV, "4")
    x, w, g, ref = _case((2, 16, 12, 12), (3, 3), 1, 1, 1, "float64")
    _close(_dw(x, w, g), ref, "float64")


@pytest.mark.skipif(cc.compiler() is None or not hasattr(__import__("os"), "fork"),
                    reason="needs a C compiler and fork")
def test_a_child_forked_during_a_build_builds_for_itself(monkeypatch, fresh):
    """The build's lock, held by a thread the child does not have, is the child's anew."""
    import multiprocessing as mp

    with cc._LOCK:  # a parent thread in the middle of a build
        ctx = mp.get_context("fork")
        with ctx.Pool(1) as pool:
            got = pool.apply_async(_builds).get(timeout=120)
    assert got == (cc.load("conv") is not None)


def _builds() -> bool:
    return cc.load("conv") is not None


def test_the_thread_count_follows_the_caller_s_caps(monkeypatch):
    monkeypatch.delenv(parallel.THREADS_ENV, raising=False)
    monkeypatch.setenv(parallel.OMP_ENV, "3,2")  # OpenMP's nested form: the outer level
    assert parallel.host_threads() == 3
    monkeypatch.setenv(parallel.THREADS_ENV, "1")  # ours first
    assert parallel.host_threads() == 1
    monkeypatch.delenv(parallel.THREADS_ENV)
    monkeypatch.setenv(parallel.OMP_ENV, "nonsense")
    assert parallel.host_threads() >= 1
