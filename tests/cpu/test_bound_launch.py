"""BoundLaunch (the warm path's packed launch) without a GPU: the driver's launch and the
fixup pools are stand-ins, so the test reads exactly what cuLaunchKernel would be handed."""
import ctypes
import inspect
import re
from types import SimpleNamespace

import numpy as np
import pytest

from skcontract.kernels import launch, workspace
from skcontract.kernels.jit import LoadedModule


def _arr(ptr):
    return SimpleNamespace(data=SimpleNamespace(ptr=ptr))


def _plan(acc=np.float32):
    scalar = np.dtype(acc).type(0).real.dtype  # a complex accumulator's alpha is real
    spec = SimpleNamespace(threads=256, smem_bytes=1024, accumulator_dtype=np.dtype(acc).name,
                           scalar_dtype=scalar.name, name="kernel")
    kernel = SimpleNamespace(spec=spec, function=SimpleNamespace(ptr=0xF00))
    return SimpleNamespace(table=_arr(0x1000), offsets=_arr(0x2000), tile_order=np.int32(3),
                           accumulator_dtype=np.dtype(acc), scalar_dtype=scalar, kernel=kernel,
                           ws_elems=10, staging_elems=0,
                           num_locks=1, device_id=0, grid=7, tensor_maps=False,
                           cluster_dims=1, programmatic=False)


@pytest.fixture
def driver(monkeypatch):
    """Records, per launch, the 20 argument slots (as raw uint64) and the stream; pools are
    per stream pointer, with addresses 100 * stream + 1, 2, 3."""
    launches, pools = [], {}

    def fake_launch(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_uint64 * 20).from_address(params)
        slots = [ctypes.c_uint64.from_address(p).value for p in ptrs]
        launches.append(SimpleNamespace(slots=slots, stream=stream, grid=gx, block=bx,
                                        smem=smem, func=func))
        return (0,)

    def fake_get(device_id, stream, accumulator_dtype, **sizes):
        s = stream.ptr
        pools.setdefault(s, SimpleNamespace(ptrs=(100 * s + 1, 100 * s + 2, 100 * s + 3)))
        return pools[s]

    monkeypatch.setattr(launch, "_launch_kernel", fake_launch)
    monkeypatch.setattr(launch, "_SUCCESS", 0)
    monkeypatch.setattr(workspace, "get", fake_get)
    return launches


def _as(v, dtype):
    return np.array([v], np.uint64).view(dtype)[0]


@pytest.mark.parametrize("acc,scalar", [(np.float32, np.float32), (np.float64, np.float64),
                                        (np.int32, np.int32), (np.complex64, np.float32),
                                        (np.complex128, np.float64)])
def test_arguments_are_packed_as_the_kernel_signature_reads_them(driver, acc, scalar):
    bound = launch.BoundLaunch(_plan(acc), 5, 6, 7, 11, 12, 13, 14, 15, 16, 2, 3)
    bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=9))
    (l,) = driver
    s = l.slots
    assert s[:8] == [0xA0, 0xB0, 0xC0, 0x1000, 0x2000, 901, 902, 903]
    assert [int(_as(v, np.int32)) for v in s[8:12]] == [5, 6, 7, 3]  # low 4 bytes
    assert [int(_as(v, np.int64)) for v in s[12:18]] == [11, 12, 13, 14, 15, 16]
    assert [_as(v, scalar) for v in s[18:20]] == [scalar(2), scalar(3)]
    assert (l.stream, l.grid, l.block, l.smem, l.func) == (9, 7, 256, 1024, 0xF00)


def test_each_launch_gets_its_own_streams_pool(driver):
    bound = launch.BoundLaunch(_plan(), 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0)
    for stream in (1, 2, 1, 1, 2):
        bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=stream))
    for l in driver:
        assert l.slots[5:8] == [100 * l.stream + 1, 100 * l.stream + 2, 100 * l.stream + 3]


def test_a_reset_pool_is_fetched_again(driver, monkeypatch):
    bound = launch.BoundLaunch(_plan(), 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0)
    bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=4))
    monkeypatch.setattr(workspace, "get", lambda *a, **k: SimpleNamespace(ptrs=(7, 8, 9)))
    bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=4))   # same stream, same generation
    monkeypatch.setattr(workspace, "_GENERATION", [workspace.generation() + 1])
    bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=4))   # after a reset
    assert [l.slots[5:8] for l in driver] == [[401, 402, 403], [401, 402, 403], [7, 8, 9]]


def test_no_binding_without_the_drivers_launch(monkeypatch):
    monkeypatch.setattr(launch, "_launch_kernel", None)
    plan = SimpleNamespace()
    assert launch.LaunchPlan.bind(plan, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0) is None


def _fake_maps(plan, encoded=None, store=1):
    """plan.maps and plan.output_map stand-ins: each map is 128 copies of its pointer's low
    byte; ``encoded`` records what each was asked."""
    from skcontract.kernels import tma

    def one(p):
        return np.frombuffer(bytes([p & 0xFF]) * tma.TMA_MAP_BYTES, tma.TMA_MAP_DTYPE)[0]

    def maps(a_ptr, b_ptr, *args):
        if encoded is not None:
            encoded.append(("ab", a_ptr, b_ptr, args))
        return one(a_ptr), one(b_ptr)

    def output_map(c_ptr, *args):
        if encoded is not None:
            encoded.append(("c", c_ptr, args))
        return one(c_ptr), np.int32(store)

    plan.tensor_maps, plan.maps, plan.output_map = True, maps, output_map
    return plan


def _read_tma_args(params, extra=0):
    """The three maps and the store flag a packed launch hands the kernel, then ``extra``
    bytes of the argument after them."""
    from skcontract.kernels import tma
    ptrs = (ctypes.c_uint64 * (launch._STORE_TMA + 2)).from_address(params)
    got = [ctypes.string_at(ptrs[i], tma.TMA_MAP_BYTES)
           for i in (launch._MAP_A, launch._MAP_B, launch._MAP_C)]
    got.append(ctypes.c_int32.from_address(ptrs[launch._STORE_TMA]).value)
    if extra:
        got.append(ctypes.string_at(ptrs[launch._STORE_TMA + 1], extra))
    return got


@pytest.mark.parametrize("store", [0, 1])
def test_tensor_maps_follow_the_operand_pointers(driver, monkeypatch, store):
    """A kernel that takes TMA maps gets four more argument slots: A's, B's and C's maps
    (128 bytes each) and the epilogue's store flag. A's and B's are encoded (plan.maps) when
    their pointers change; C's (plan.output_map) once per output pointer the launch has
    kept, as callers cycle through a few output buffers."""
    encoded = []
    plan = _fake_maps(_plan(), encoded, store)
    bound = launch.BoundLaunch(plan, 5, 6, 7, 11, 12, 13, 14, 15, 16, 2, 3)
    captured = []
    real = launch._launch_kernel

    def read_maps(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        captured.append(_read_tma_args(params))
        return real(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra)

    monkeypatch.setattr(launch, "_launch_kernel", read_maps)
    calls = [(0xA1, 0xB1, 0xC1), (0xA1, 0xB1, 0xC1), (0xA2, 0xB1, 0xC1), (0xA2, 0xB1, 0xC2),
             (0xA2, 0xB1, 0xC1), (0xA2, 0xB1, 0xC2)]
    for ptrs in calls:
        bound(*ptrs, SimpleNamespace(ptr=9))
    assert encoded == [("ab", 0xA1, 0xB1, (5, 6, 7, 11, 12, 14, 15)),  # m, n, k, lda, ldb, sa, sb
                       ("c", 0xC1, (5, 6, 13, 16, 3)),                   # m, n, ldc, sc, beta
                       ("ab", 0xA2, 0xB1, (5, 6, 7, 11, 12, 14, 15)),
                       ("c", 0xC2, (5, 6, 13, 16, 3))]
    for got, (a, b, c) in zip(captured, calls):
        assert got == [bytes([a & 0xFF]) * 128, bytes([b & 0xFF]) * 128,
                       bytes([c & 0xFF]) * 128, store]


def test_the_output_maps_kept_are_bounded(driver):
    encoded = []
    bound = launch.BoundLaunch(_fake_maps(_plan(), encoded), 5, 6, 7, 11, 12, 13, 14, 15, 16,
                               2, 3)
    for c in range(2 * launch.BOUND_OUTPUT_MAPS):
        bound(0xA1, 0xB1, 0xC00 + c, SimpleNamespace(ptr=9))
    assert len(bound._out_maps) <= launch.BOUND_OUTPUT_MAPS
    bound(0xA1, 0xB1, 0xC00, SimpleNamespace(ptr=9))  # dropped with the others: asked again
    assert [e[1] for e in encoded if e[0] == "c"].count(0xC00) == 2


def test_an_im2col_kernel_gets_its_geometry_by_value(driver, monkeypatch):
    """sk_conv's ConvShape is one more argument: a pointer to the packed bytes handed to
    bind, which stay put for every later call."""
    from skcontract.kernels.conv import CONV_SHAPE_ARG
    conv = np.frombuffer(bytes(range(CONV_SHAPE_ARG.itemsize)), CONV_SHAPE_ARG)[0]
    bound = launch.BoundLaunch(_plan(), 5, 6, 7, 11, 12, 13, 14, 15, 16, 2, 3, conv)
    captured = []
    real = launch._launch_kernel

    def read_conv(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_uint64 * (launch._NUM_ARGS + 1)).from_address(params)
        captured.append(ctypes.string_at(ptrs[launch._NUM_ARGS], CONV_SHAPE_ARG.itemsize))
        return real(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra)

    monkeypatch.setattr(launch, "_launch_kernel", read_conv)
    for c_ptr in (0xC0, 0xC1):
        bound(0xA0, 0xB0, c_ptr, SimpleNamespace(ptr=9))
    assert captured == [bytes(range(CONV_SHAPE_ARG.itemsize))] * 2
    assert [l.slots[2] for l in driver] == [0xC0, 0xC1]


def test_an_im2col_plan_binds_only_with_its_geometry(driver):
    plan = SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(im2col=True,
                                                                        name="sk_conv")))
    with pytest.raises(ValueError, match="geometry"):
        launch.LaunchPlan.bind(plan, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0)


def test_a_tma_convolution_gets_its_maps_then_its_geometry(driver, monkeypatch):
    """sk_wgmma_conv takes the three TMA maps and the store flag, then the ConvShape."""
    from skcontract.kernels.conv import CONV_SHAPE_ARG
    plan = _fake_maps(_plan())
    conv = np.frombuffer(bytes([7]) * CONV_SHAPE_ARG.itemsize, CONV_SHAPE_ARG)[0]
    bound = launch.BoundLaunch(plan, 5, 6, 7, 11, 12, 13, 14, 15, 16, 2, 3, conv)
    captured = []
    real = launch._launch_kernel

    def read(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        captured.append(_read_tma_args(params, CONV_SHAPE_ARG.itemsize))
        return real(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra)

    monkeypatch.setattr(launch, "_launch_kernel", read)
    bound(0xA1, 0xB1, 0xC0, SimpleNamespace(ptr=9))
    assert captured == [[b"\xa1" * 128, b"\xb1" * 128, b"\xc0" * 128, 1,
                         bytes([7]) * CONV_SHAPE_ARG.itemsize]]


def test_max_active_clusters_asks_the_driver_for_the_kernels_clusters(monkeypatch):
    """A cluster kernel's resident clusters come from cuOccupancyMaxActiveClusters, asked
    with a launch of one cluster of the kernel's block and shared memory; a failure is an
    error, not a guess."""
    from cuda.bindings import driver as cu

    from skcontract.kernels import jit
    seen = []

    def fake(func, config):
        seen.append((int(func), config.gridDimX, config.blockDimX, config.sharedMemBytes,
                     config.numAttrs))
        return cu.CUresult.CUDA_SUCCESS, 66

    monkeypatch.setattr(cu, "cuOccupancyMaxActiveClusters", fake)
    assert jit.max_active_clusters(0xF00, 384, 200_000, 2) == 66
    assert seen == [(0xF00, 2, 384, 200_000, 0)]
    monkeypatch.setattr(cu, "cuOccupancyMaxActiveClusters",
                        lambda func, config: (cu.CUresult.CUDA_ERROR_INVALID_CLUSTER_SIZE, 0))
    with pytest.raises(RuntimeError, match="cuOccupancyMaxActiveClusters"):
        jit.max_active_clusters(0xF00, 384, 200_000, 2)


@pytest.mark.parametrize("clusters,programmatic", [(1, False), (9, False), (1, True),
                                                   (9, True)])
def test_attributes_go_through_the_extended_launch(driver, monkeypatch, clusters, programmatic):
    """A plan in clusters or with programmatic stream serialization (a kernel built for sm_90
    or later: it waits for the previous kernel itself) launches through cuLaunchKernelEx with
    exactly those attributes, on the stream of each call; a plain plan through
    cuLaunchKernel."""
    from cuda.bindings import driver as cu
    seen, streams = [], []

    def fake_ex(config, func, params, extra):
        seen.append({int(a.id): a for a in config.attrs[:config.numAttrs]})
        streams.append(int(config.hStream))
        return (0,)

    monkeypatch.setattr(launch, "_launch_kernel_ex", fake_ex)
    plan = _plan()
    plan.cluster_dims, plan.programmatic = clusters, programmatic
    bound = launch.BoundLaunch(plan, 5, 6, 7, 11, 12, 13, 14, 15, 16, 2, 3)
    for stream in (9, 9, 10):
        bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=stream))
    ids = cu.CUlaunchAttributeID
    if clusters == 1 and not programmatic:
        assert not seen and len(driver) == 3  # the plain launch
        return
    assert streams == [9, 9, 10]
    attrs = seen[0]
    assert not driver  # not the plain launch
    assert (int(ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) in attrs) == (clusters > 1)
    if clusters > 1:
        assert attrs[int(ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)].value.clusterDim.x == 9
    serial = int(ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
    assert (serial in attrs) == programmatic
    if programmatic:
        assert attrs[serial].value.programmaticStreamSerializationAllowed == 1


def test_every_family_waits_for_the_previous_grid():
    """Kernels built for sm_90 and later launch with programmatic serialization, so every
    family's kernel must wait for the previous kernel before any global access but the read
    of its first split-table row: its split walk's entry is FollowPreviousGrid
    (griddepcontrol.wait) with its fixup protocol, and nothing else waits."""
    from skcontract.kernels import jit, specs
    seen = set()
    for spec in specs.all_specs():
        family = type(spec.entry)
        if family in seen:
            continue
        seen.add(family)
        source = jit.render_source(spec)
        assert "FollowPreviousGrid<Cfg::REDUCTION" in source, family.__name__
        assert "follow_previous_grid<Cfg::" not in source, family.__name__
        # the portable GEMM kernels (several CTAs an SM, one planned) signal the next grid
        # only at their exit; the others as they start (but under the deterministic fixup)
        at_exit = "FollowPreviousGrid<Cfg::REDUCTION, false, false>()" in source
        assert at_exit == (family.ENTRY_HEADER == "sk_gemm.cuh"), family.__name__
    assert len(seen) >= 6, seen


@pytest.mark.parametrize("arch,expected", [("sm_90a", True), ("sm_90", True), ("sm_100a", True),
                                           ("sm_89", False), ("sm_80", False)])
def test_programmatic_launch_from_sm_90(monkeypatch, arch, expected):
    """griddepcontrol exists from sm_90: earlier targets launch plainly."""
    monkeypatch.setattr(launch, "_launch_kernel_ex", object())
    assert launch.programmatic(arch) is expected
    monkeypatch.setattr(launch, "PROGRAMMATIC_LAUNCH", False)
    assert launch.programmatic(arch) is False


@pytest.mark.parametrize("cls", [launch.LaunchPlan, launch.BoundLaunch])
def test_every_attribute_set_has_a_slot(cls):
    """The launch classes keep their attributes in __slots__: one set without a slot fails
    at construction, which needs a GPU, so the CPU checks the source."""
    source = inspect.getsource(cls)
    assigned = set(re.findall(r"\bself\.(\w+)\s*(?:\[[^\]]*\])?\s*=(?!=)", source))
    assigned |= {m for group in re.findall(r"\bself\.(\w+)\s*,\s*self\.(\w+)\s*=", source)
                 for m in group}
    assert assigned and assigned <= set(cls.__slots__), assigned - set(cls.__slots__)


def test_a_loaded_module_looks_each_function_up_once():
    """A direct kernel's launch asks for its function on every call: the driver is asked
    once a name (by its lowered name)."""
    asked = []

    class Raw:
        def get_function(self, name):
            asked.append(name)
            return object()

    module = LoadedModule(Raw(), {"skc::k<float>": "_Z1kIfEvv"})
    first = module.get_function("skc::k<float>")
    assert module.get_function("skc::k<float>") is first
    assert module.get_function("plain") is module.get_function("plain")
    assert asked == ["_Z1kIfEvv", "plain"]


def _signature_types(header: str, kernel: str) -> list[str]:
    """The parameter types of ``kernel`` in the CUDA header ``header`` (kernels/cuda/)."""
    from pathlib import Path
    import skcontract.kernels
    text = (Path(skcontract.kernels.__file__).parent / "cuda" / header).read_text()
    params = re.search(rf"\b{kernel}\(([^)]*)\)\s*{{", text).group(1)
    return [" ".join(p.split()[:-1]) for p in params.split(",")]


def test_the_small_kernel_s_arguments_are_typed_as_its_signature():
    from skcontract.kernels import small_batched
    types = _signature_types("small_batched.cuh", "small_batched")
    sizes = {"int": np.int32, "long long": np.int64}
    launch = small_batched.SmallLaunch("float32", 1000, 4, 5, 6, 7, shared_b=True)
    args = small_batched.kernel_arguments(launch, (24, 6, 1), (0, 5, 1))
    assert len(types) == 3 + len(args)
    assert all("*" in t for t in types[:3])
    assert [type(a) for a in args] == [sizes[t] for t in types[3:]]
    assert [int(a) for a in args] == [1000, 4, 5, 6, 24, 6, 1, 0, 5, 1, 7, 0]
    unshared = small_batched.SmallLaunch("float32", 1000, 4, 5, 6, 7)
    assert int(small_batched.kernel_arguments(unshared, (24, 6, 1), (30, 5, 1))[-1]) == 30


def test_a_direct_launch_packs_each_argument_in_its_slot(monkeypatch):
    launches = []

    def fake_launch(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_uint64 * 6).from_address(params)   # 3 pointers, 3 arguments
        launches.append(SimpleNamespace(
            slots=[ctypes.c_uint64.from_address(p).value for p in ptrs], stream=stream,
            grid=gx, block=bx, smem=smem, func=func))
        return (0,)

    monkeypatch.setattr(launch, "_launch_kernel", fake_launch)
    monkeypatch.setattr(launch, "_SUCCESS", 0)
    args = (np.int32(-5), np.int64(2**40 + 3), np.int32(7))
    bound = launch.DirectBound(0xF00, "direct", 11, 256, 4096, args, 0)
    log = []
    monkeypatch.setattr(launch, "_RECORDERS", [log])
    bound(0xA0, 0xB0, 0xC0, SimpleNamespace(ptr=9))
    bound(0xA1, 0xB1, 0xC1, SimpleNamespace(ptr=9))
    first, second = launches
    assert first.slots[:3] == [0xA0, 0xB0, 0xC0] and second.slots[:3] == [0xA1, 0xB1, 0xC1]
    s = second.slots
    assert (int(_as(s[3], np.int32)), int(_as(s[4], np.int64)), int(_as(s[5], np.int32))) == \
        (-5, 2**40 + 3, 7)
    assert (first.stream, first.grid, first.block, first.smem, first.func) == \
        (9, 11, 256, 4096, 0xF00)
    assert [(x.kernel, x.grid) for x in log] == [("direct", 11)] * 2


def test_the_cufunction_behind_a_raw_kernel_or_a_function():
    from skcontract.kernels.jit import cu_function
    function = SimpleNamespace(ptr=0xF00)
    assert cu_function(function) is function
    assert cu_function(SimpleNamespace(kernel=function)) is function   # cupy.RawKernel
    with pytest.raises(RuntimeError, match="CUfunction"):
        cu_function(SimpleNamespace(kernel=None))
