"""Launch a compiled KernelSpec over a Schedule's split table.

:class:`LaunchPlan` is everything fixed for one (problem, layout, schedule): the compiled
kernel, the table and CTA offsets on the device (uploaded once), buffer sizes. ``plan.launch``
binds pointers and launches; that is the whole warm path. The plan launches the schedule it
is given and nothing else; :func:`record_launches` lets a caller see what ran.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from ..schedule.table import NUM_COLUMNS
from . import jit, tma, workspace
from .jit import CompiledKernel

try:  # the driver's launch, for BoundLaunch (cuda-bindings is a dependency of the GPU extra)
    from cuda.bindings import driver as _driver
    from cuda.bindings.driver import cuLaunchKernel as _launch_kernel
    from cuda.bindings.driver import cuLaunchKernelEx as _launch_kernel_ex
    _SUCCESS = _driver.CUresult.CUDA_SUCCESS
    _NO_CONTEXT = _driver.CUresult.CUDA_ERROR_INVALID_CONTEXT
except ImportError:  # pragma: no cover - the CPU-only install has no GPU to launch on
    _driver = _launch_kernel = _launch_kernel_ex = _SUCCESS = _NO_CONTEXT = None

_RECORDERS: list[list] = []
_SMS: dict = {}


class Launch(NamedTuple):
    """What one launch ran (see :func:`record_launches`): ``grid`` is the schedule's (its
    work units), ``ctas`` the CTAs launched (twice the units for a cluster pair),
    ``tma_store`` whether the epilogue stored C by TMA (a Wgmma launch,
    :func:`.tma.output_map`), ``programmatic`` whether it launched with programmatic stream
    serialization (it may start before the previous kernel of its stream ends)."""

    kernel: str
    grid: int
    tile: tuple
    mode: str
    reduction: str
    digest: str
    ctas: int = 0
    tma_store: bool = False
    programmatic: bool = False


class CoResidencyError(RuntimeError):
    """A schedule whose splits wait has more CTAs than the device keeps resident for its
    kernel (clusters count as the driver places them: never across a GPC)."""


@contextmanager
def record_launches():
    """Collect a :class:`Launch` for every kernel launched inside the ``with`` block.

    >>> with record_launches() as launches:
    ...     pass
    >>> launches
    []
    """
    log: list = []
    _RECORDERS.append(log)
    try:
        yield log
    finally:
        _RECORDERS.remove(log)


def record_direct(kernel: str, blocks: int) -> None:
    """Tell the :func:`record_launches` blocks that a direct kernel (no schedule: outer
    products, small batched products, depthwise convolutions) launched ``blocks`` blocks."""
    rec = Launch(kernel, blocks, (), "direct", "none", "", blocks)
    for log in _RECORDERS:
        log.append(rec)


class LaunchPlan:
    __slots__ = ("kernel", "schedule", "table", "offsets", "grid", "ws_elems", "staging_elems",
                 "num_locks", "accumulator_dtype", "scalar_dtype", "device_id", "tile_order",
                 "batch",
                 "tensor_maps", "map_source", "cluster_dims", "programmatic", "_bound")

    def __init__(self, kernel: CompiledKernel, schedule, device_id: int, stream=None):
        import cupy  # optional dependency: only the GPU path needs CuPy

        spec = kernel.spec
        if spec.protocol != schedule.protocol:
            raise ValueError(f"kernel {spec.name} runs the {spec.protocol!r} protocol; the "
                             f"schedule needs {schedule.protocol!r}")
        if tuple(schedule.tile) != spec.entry.tile:
            raise ValueError(f"kernel {spec.name} has tile {spec.entry.tile}; the "
                             f"schedule's is {tuple(schedule.tile)}")
        self.kernel, self.schedule, self.device_id = kernel, schedule, device_id
        table = schedule.table if len(schedule.table) else np.zeros((1, NUM_COLUMNS), np.int32)
        # uploaded once, then read by launches on any stream: wait for the copies to land
        # (unless the stream is being captured, where the copy is ordered in the graph)
        stream = stream if stream is not None else cupy.cuda.get_current_stream()
        with stream:
            self.table = cupy.asarray(table)
            self.offsets = cupy.asarray(schedule.cta_offsets)
        if not stream.is_capturing():
            stream.synchronize()
        # CTAs: a cluster entry runs each of the schedule's work units on CLUSTER of them,
        # each with its own fixup lock a tile
        cluster = spec.entry.CLUSTER
        self.grid = int(schedule.grid) * cluster
        # the cluster protocol's clusters, set at launch: one a tile, its splits' CTAs
        self.cluster_dims = schedule.cluster_size
        # launched with programmatic stream serialization (cuLaunchKernelEx's attribute; a
        # CPU-only install without cuda.bindings launches through CuPy, without it)
        self.programmatic = programmatic(kernel.arch)
        self._bound: dict = {}  # launch's BoundLaunch of a cuLaunchKernelEx plan, by arguments
        self.tile_order = np.int32(schedule.tile_order)
        slot = spec.slot_elems
        self.ws_elems = schedule.workspace_slots * slot
        self.staging_elems = schedule.staging_slots * slot
        self.num_locks = schedule.num_locks * cluster
        self.accumulator_dtype = np.dtype(spec.accumulator_dtype)
        self.scalar_dtype = np.dtype(spec.scalar_dtype)  # alpha's and beta's
        self.batch = schedule.problem.batch
        self.tensor_maps = spec.entry.TENSOR_MAPS  # the kernel takes TMA maps (A, B, C)
        # (a_ptr, b_ptr) -> the maps, for operands that are not a GEMM's strided matrices (a
        # convolution's input and filters: .conv sets it); None: the GEMM maps
        self.map_source = None
        resident = kernel.occupancy * sm_count(device_id)
        if kernel.clusters is not None:  # clusters never straddle a GPC: the driver counts
            resident = min(resident, kernel.clusters * cluster)
        if schedule.waits and self.grid > resident:
            raise CoResidencyError(
                f"co-residency: {self.grid} CTAs but only {resident} resident for "
                f"{spec.name}; waiting splits could deadlock")

    def bind(self, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta,
             conv=None) -> "BoundLaunch | None":
        """This plan with every argument but the operand pointers fixed (a cached call's
        warm path, :class:`BoundLaunch`); None without cuda.bindings' launch. ``conv``: an
        im2col kernel's packed geometry, as for :meth:`launch`."""
        if _launch_kernel is None:
            return None
        if self.kernel.spec.im2col and conv is None:
            raise ValueError(f"{self.kernel.spec.name} needs the convolution's geometry "
                             "(conv=)")
        return BoundLaunch(self, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta, conv)

    def record(self, tma_store: bool = False) -> None:
        """Tell the :func:`record_launches` blocks that this plan launched."""
        s = self.schedule
        rec = Launch(self.kernel.spec.name, int(s.grid), tuple(s.tile), str(s.mode),
                     str(s.reduction), s.digest(), self.grid, tma_store, self.programmatic)
        for log in _RECORDERS:
            log.append(rec)

    def launch(self, a_ptr, b_ptr, c_ptr, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta,
               stream, conv=None) -> None:
        """Launch on these operands. ``conv``: the packed geometry an im2col kernel takes
        after the common arguments (:func:`.conv.conv_shape`)."""
        spec = self.kernel.spec
        if _has_attributes(self):  # which only cuLaunchKernelEx takes
            self._bound_launch(m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta, conv)(
                a_ptr, b_ptr, c_ptr, stream)
            return
        pool = workspace.get(self.device_id, stream, spec.accumulator_dtype,
                             workspace_elems=self.ws_elems, staging_elems=self.staging_elems,
                             num_locks=self.num_locks)
        scalar = self.scalar_dtype.type
        args = (np.uint64(a_ptr), np.uint64(b_ptr), np.uint64(c_ptr), self.table, self.offsets,
                pool.workspace, pool.staging, pool.locks, np.int32(m), np.int32(n), np.int32(k),
                self.tile_order, np.int64(lda), np.int64(ldb), np.int64(ldc), np.int64(sa),
                np.int64(sb), np.int64(sc), scalar(alpha), scalar(beta))
        store = np.int32(0)
        if self.tensor_maps:
            try:
                c_map, store = self.output_map(c_ptr, m, n, ldc, sc, beta)
            except tma.NoContext:  # the map is this thread's first CUDA call
                jit.bind_context(self.device_id)
                c_map, store = self.output_map(c_ptr, m, n, ldc, sc, beta)
            args += (*self.maps(a_ptr, b_ptr, m, n, k, lda, ldb, sa, sb), c_map, store)
        if spec.im2col:
            if conv is None:
                raise ValueError(f"{spec.name} needs the convolution's geometry (conv=)")
            args += (conv,)
        self.kernel.function((self.grid,), (spec.threads,), args, shared_mem=spec.smem_bytes,
                             stream=stream)
        if _RECORDERS:
            self.record(bool(store))

    def _bound_launch(self, *args) -> "BoundLaunch":
        """The BoundLaunch of these arguments (made once; conv's packed geometry by value)."""
        key = tuple(bytes(a) if isinstance(a, (np.ndarray, np.void)) else a for a in args)
        bound = self._bound.get(key)
        if bound is None:
            bound = self.bind(*args)
            if bound is None:
                raise RuntimeError(f"{self.kernel.spec.name} launches in clusters, through "
                                   "cuLaunchKernelEx: install cuda-bindings")
            if len(self._bound) >= BOUND_EX_LAUNCHES:
                self._bound.clear()
            self._bound[key] = bound
        return bound

    def maps(self, a_ptr, b_ptr, m, n, k, lda, ldb, sa, sb) -> tuple:
        """The TMA descriptors of the operands (cached by :mod:`.tma`)."""
        if self.map_source is not None:
            return self.map_source(a_ptr, b_ptr)
        return tma.gemm_maps(self.kernel.spec, a_ptr, b_ptr, self.batch, m, n, k, lda, ldb,
                             sa, sb)

    def output_map(self, c_ptr, m, n, ldc, sc, beta) -> tuple:
        """C's descriptor and whether the epilogue stores through it (an int32): 0 with
        :data:`.tma.NO_MAP` where :func:`.tma.output_map` declines."""
        c = tma.output_map(self.kernel.spec, c_ptr, self.batch, m, n, ldc, sc, beta)
        return (tma.NO_MAP, np.int32(0)) if c is None else (c, np.int32(1))


# Slots of the kernel arguments (every entry shares the first 20) in BoundLaunch's buffer:
# one 8-byte slot each, a 4-byte argument in the slot's low half (little-endian); the TMA
# arguments of the Wgmma entries follow (three maps as pointers to 128 bytes each, then the
# store flag), then a convolution entry's ConvShape as a pointer to its packed bytes.
_A, _B, _C, _TABLE, _OFFSETS, _WS, _STAGING, _LOCKS = range(8)
_INT32_SLOTS = range(8, 12)   # m, n, k, tile_order
_INT64_SLOTS = range(12, 18)  # lda, ldb, ldc, sa, sb, sc
_ALPHA, _BETA = 18, 19
_NUM_ARGS = 20
_MAP_A, _MAP_B, _MAP_C, _STORE_TMA = 20, 21, 22, 23  # the Wgmma entries' TMA arguments
BOUND_EX_LAUNCHES = 8
"""Argument sets (shapes, strides, alpha, beta) a plan launched with attributes (clusters,
programmatic serialization) keeps a BoundLaunch for in :meth:`LaunchPlan.launch`, which
launches it through cuLaunchKernelEx."""
PROGRAMMATIC_LAUNCH = True
"""Whether kernels built for sm_90 or later launch with programmatic stream serialization
(read when a LaunchPlan is made: plans cached before a change keep their setting until
``gemm.clear_plans()`` / ``ops.conv2d_gpu.clear_plans()``)."""
PROGRAMMATIC_MIN_ARCH = 90
"""The first architecture with ``griddepcontrol``: every kernel waits in it for the previous
kernel of its stream (``follow_previous_grid``, ``fixup.cuh``); before it the wait compiles to
nothing and the launch is plain."""
BOUND_OUTPUT_MAPS = 8
"""Output pointers whose C descriptors a BoundLaunch keeps: a caller that holds its last
few results gets a new buffer each call, from a few the pool cycles through."""


class BoundLaunch:
    """A LaunchPlan with every argument but the operand pointers fixed: a call writes three
    pointers (and the fixup pool's) into a packed argument buffer and launches it through
    ``cuLaunchKernel`` (cuda.bindings; ``cuLaunchKernelEx`` for a plan with launch attributes:
    clusters, programmatic serialization), which costs less host time than a CuPy kernel call,
    whose arguments are converted on every launch. Calls from several threads take turns
    (the buffer is copied by the launch)."""

    __slots__ = ("plan", "_buf", "_slots", "_ptrs", "_addr", "_func", "_lock", "_pool_args",
                 "_threads", "_smem", "_pool", "_maps", "_store_tma", "_map_args", "_map_key",
                 "_out_args", "_out_key", "_out_maps", "_conv", "_config", "_config_stream")

    def __init__(self, plan: LaunchPlan, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta,
                 conv=None):
        self.plan = plan
        buf = self._buf = np.zeros(_NUM_ARGS, np.uint64)
        buf[_TABLE], buf[_OFFSETS] = plan.table.data.ptr, plan.offsets.data.ptr
        as32 = buf.view(np.int32)
        for slot, v in zip(_INT32_SLOTS, (m, n, k, int(plan.tile_order))):
            as32[2 * slot] = v
        buf.view(np.int64)[list(_INT64_SLOTS)] = (lda, ldb, ldc, sa, sb, sc)
        scalar = plan.scalar_dtype
        for slot, v in ((_ALPHA, alpha), (_BETA, beta)):
            buf[slot:slot + 1].view(np.uint8)[:scalar.itemsize] = \
                np.array([v], scalar).view(np.uint8)
        self._slots = memoryview(buf).cast("B").cast("Q")  # cheaper item writes than numpy's
        ptrs = [buf.ctypes.data + 8 * i for i in range(_NUM_ARGS)]
        # TMA arguments: three maps and the store flag, written when the pointers change;
        # C's by pointer from a small cache, as calls that keep their results alternate
        # between output buffers
        self._maps = np.zeros(3, tma.TMA_MAP_DTYPE) if plan.tensor_maps else None
        self._store_tma = np.zeros(1, np.int32)
        self._map_args = (m, n, k, lda, ldb, sa, sb)
        self._out_args = (m, n, ldc, sc, beta)
        self._map_key = self._out_key = None
        self._out_maps: dict = {}
        if self._maps is not None:
            ptrs += [0] * (_STORE_TMA + 1 - _NUM_ARGS)
            for i, slot in enumerate((_MAP_A, _MAP_B, _MAP_C)):
                ptrs[slot] = self._maps.ctypes.data + i * tma.TMA_MAP_BYTES
            ptrs[_STORE_TMA] = self._store_tma.ctypes.data
        self._conv = None if conv is None else np.frombuffer(bytes(conv), np.uint8).copy()
        if self._conv is not None:  # the last argument
            ptrs.append(self._conv.ctypes.data)
        self._ptrs = np.array(ptrs, np.uint64)
        self._addr = int(self._ptrs.ctypes.data)
        self._func = int(plan.kernel.function.ptr)
        self._threads = plan.kernel.spec.threads
        self._smem = plan.kernel.spec.smem_bytes
        self._lock = threading.Lock()
        spec = plan.kernel.spec
        self._pool_args = dict(workspace_elems=plan.ws_elems, staging_elems=plan.staging_elems,
                               num_locks=plan.num_locks)
        self._pool_args["accumulator_dtype"] = spec.accumulator_dtype
        self._pool = (None, None)  # (stream handle, generation) and that stream's pool
        self._config = _launch_config(plan) if _has_attributes(plan) else None
        self._config_stream = None  # the stream pointer self._config's hStream holds

    def has_pool(self, stream) -> bool:
        """Whether this launch holds its fixup pool for ``stream``: a call on a stream it
        does not fetches the pool, which allocates where the pool is new or too small (so
        a caller capturing a graph makes that call under a capture-safe allocator)."""
        return self._pool[0] == (stream.ptr, workspace.generation())

    def __call__(self, a_ptr: int, b_ptr: int, c_ptr: int, stream) -> None:
        plan = self.plan
        # the pool of this stream, fetched (and grown to fit) when the stream changes; a
        # pool only grows, so it keeps fitting, and its ptrs follow its growth. The key and
        # the pool are one tuple, read once: a call never pairs a stream with another's pool
        key = (stream.ptr, workspace.generation())
        cached_key, pool = self._pool
        if key != cached_key:
            pool = workspace.get(plan.device_id, stream, **self._pool_args)
            self._pool = (key, pool)
        with self._lock:
            slots = self._slots
            slots[_A], slots[_B], slots[_C] = a_ptr, b_ptr, c_ptr
            slots[_WS], slots[_STAGING], slots[_LOCKS] = pool.ptrs
            if self._maps is not None and (self._map_key != (a_ptr, b_ptr) or
                                           self._out_key != c_ptr):
                try:
                    self._encode_maps(a_ptr, b_ptr, c_ptr)
                except tma.NoContext:  # the maps are this thread's first CUDA call
                    jit.bind_context(plan.device_id)
                    self._encode_maps(a_ptr, b_ptr, c_ptr)
            err = self._launch(stream)
            if err == _NO_CONTEXT:  # a warm launch is this thread's first CUDA call
                jit.bind_context(plan.device_id)
                err = self._launch(stream)
        if err != _SUCCESS:
            raise RuntimeError(f"launch of {plan.kernel.spec.name} failed: {err!r}")
        if _RECORDERS:
            plan.record(bool(self._store_tma[0]))

    def _launch(self, stream):
        """The driver's launch on the bound arguments (under the lock): its CUresult."""
        if self._config is None:
            (err,) = _launch_kernel(self._func, self.plan.grid, 1, 1, self._threads, 1, 1,
                                    self._smem, stream.ptr, self._addr, 0)
            return err
        if self._config_stream != stream.ptr:
            self._config.hStream = _driver.CUstream(stream.ptr)
            self._config_stream = stream.ptr
        (err,) = _launch_kernel_ex(self._config, self._func, self._addr, 0)
        return err

    def _encode_maps(self, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        """The TMA maps of the operands at these addresses, where they moved."""
        if self._map_key != (a_ptr, b_ptr):
            self._maps[0], self._maps[1] = self.plan.maps(a_ptr, b_ptr, *self._map_args)
            self._map_key = (a_ptr, b_ptr)
        if self._out_key != c_ptr:
            self._out_c(c_ptr)

    def _out_c(self, c_ptr: int) -> None:
        """C's map and store flag into the arguments (under the lock)."""
        found = self._out_maps.get(c_ptr)
        if found is None:
            if len(self._out_maps) >= BOUND_OUTPUT_MAPS:
                self._out_maps.clear()
            found = self._out_maps[c_ptr] = self.plan.output_map(c_ptr, *self._out_args)
        self._maps[2], self._store_tma[0] = found
        self._out_key = c_ptr


class DirectBound:
    """A direct kernel's launch (no split table, no fixup pool: the small-batched kernel;
    ``function_ptr``, its CUfunction, :func:`.jit.function_pointer`) with every argument but
    the three operand pointers fixed, launched through
    ``cuLaunchKernel`` as :class:`BoundLaunch` is: its arguments are ``(a, b, c, *args)``,
    each of ``args`` a NumPy scalar of the kernel's parameter type, in its own 8-byte slot
    (the driver reads each parameter from its own address, as many bytes as the kernel's
    signature gives it). Calls from several threads take turns."""

    __slots__ = ("_buf", "_slots", "_ptrs", "_addr", "_func", "_grid", "_threads", "_smem",
                 "_device_id", "_name", "_lock")

    def __init__(self, function_ptr: int, name: str, grid: int, threads: int, smem: int, args,
                 device_id: int):
        if _launch_kernel is None:
            raise RuntimeError("a bound launch needs cuda-bindings: pip install "
                               "'skcontract[cuda13]'")
        buf = self._buf = np.zeros(3 + len(args), np.uint64)
        for i, v in enumerate(args, start=3):
            raw = np.asarray(v).tobytes()
            buf[i:i + 1].view(np.uint8)[:len(raw)] = np.frombuffer(raw, np.uint8)
        self._slots = memoryview(buf).cast("B").cast("Q")
        self._ptrs = np.array([buf.ctypes.data + 8 * i for i in range(len(buf))], np.uint64)
        self._addr = int(self._ptrs.ctypes.data)
        self._func = function_ptr
        self._grid, self._threads, self._smem = grid, threads, smem
        self._device_id, self._name = device_id, name
        self._lock = threading.Lock()

    def __call__(self, a_ptr: int, b_ptr: int, c_ptr: int, stream) -> None:
        with self._lock:
            slots = self._slots
            slots[0], slots[1], slots[2] = a_ptr, b_ptr, c_ptr
            (err,) = _launch_kernel(self._func, self._grid, 1, 1, self._threads, 1, 1,
                                    self._smem, stream.ptr, self._addr, 0)
            if err == _NO_CONTEXT:  # a warm launch is this thread's first CUDA call
                jit.bind_context(self._device_id)
                (err,) = _launch_kernel(self._func, self._grid, 1, 1, self._threads, 1, 1,
                                        self._smem, stream.ptr, self._addr, 0)
        if err != _SUCCESS:
            raise RuntimeError(f"launch of {self._name} failed: {err!r}")
        if _RECORDERS:
            record_direct(self._name, self._grid)


def programmatic(arch: str) -> bool:
    """Whether a kernel compiled for ``arch`` (``sm_90a``, ``sm_80``) launches with
    programmatic stream serialization: sm_90 and later, where cuLaunchKernelEx exists."""
    level = int("".join(ch for ch in arch[len("sm_"):] if ch.isdigit()))
    return PROGRAMMATIC_LAUNCH and _launch_kernel_ex is not None and \
        level >= PROGRAMMATIC_MIN_ARCH


def _has_attributes(plan: LaunchPlan) -> bool:
    """Whether ``plan`` launches with attributes (clusters, programmatic serialization)."""
    return plan.cluster_dims > 1 or plan.programmatic


def _launch_config(plan: LaunchPlan):
    """cuLaunchKernelEx's configuration of ``plan``'s launch (the stream is set per call):
    in clusters of ``plan.cluster_dims`` CTAs, and with programmatic stream serialization
    where ``plan.programmatic`` (the kernel may start before the previous one in the stream
    ends, and waits for it in ``griddepcontrol.wait``)."""
    config = _driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = plan.grid, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = plan.kernel.spec.threads, 1, 1
    config.sharedMemBytes = plan.kernel.spec.smem_bytes
    ids = _driver.CUlaunchAttributeID
    attrs = []
    if plan.cluster_dims > 1:
        attr = _driver.CUlaunchAttribute()
        attr.id = ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = \
            plan.cluster_dims, 1, 1
        attrs.append(attr)
    if plan.programmatic:
        attr = _driver.CUlaunchAttribute()
        attr.id = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        attrs.append(attr)
    config.attrs = attrs
    config.numAttrs = len(attrs)
    return config


def sm_count(device_id: int) -> int:
    """The SMs of CuPy device ``device_id`` (asked once)."""
    n = _SMS.get(device_id)
    if n is None:
        import cupy  # optional dependency: only the GPU path needs CuPy
        n = _SMS[device_id] = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
    return n


class Binding(NamedTuple):
    """A call replayed on new operands with the same shapes, strides, dtypes and 16-byte
    alignment as the call that made it: allocate the output, launch (the warm path of a
    plan step; see :func:`skcontract.kernels.gemm.gemm`'s ``bind``)."""

    launch: BoundLaunch
    swapped: bool       # the kernel's A is the product's second operand
    out_shape: tuple
    out_dtype: object
    empty: object       # cupy.empty

    def __call__(self, x, y, stream):
        out = self.empty(self.out_shape, self.out_dtype)
        a, b = (y, x) if self.swapped else (x, y)
        self.launch(a.data.ptr, b.data.ptr, out.data.ptr, stream)
        return out
