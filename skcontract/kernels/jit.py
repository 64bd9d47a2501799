"""Run-time compilation of KernelSpecs through NVRTC (cuda.bindings), with our own cache.

* We compile with NVRTC ourselves and load the cubin with ``cupy.RawModule(path=...)``:
  CuPy's own compile appends ``-ftz=true`` to every program, which flushes float32
  subnormals to zero; our kernels keep them, as numpy does (``-ftz=false``), and the
  compile check and ``tools.sass`` build exactly what runs (:mod:`.nvrtc`). The library
  compiles in a child process (:func:`.nvrtc.compile_isolated`), which NVRTC's side
  effects cannot reach past.
* Headers are inlined into the source, so any header change is a new source and a new key.
* :func:`cache_key` hashes the whole source, the name expressions, the options, the NVRTC
  version and the target arch. It names the cubin, the lowered kernel names and the
  manifest kept under :func:`cache_dir`.
* An in-memory memo keyed by the device id, the spec and the debug, trace and probe builds
  makes a warm call a dict lookup.

Environment variables (docs/gpu.md has the table): ``SKCONTRACT_CACHE_DIR``,
``SKCONTRACT_PRINT_KERNEL``, ``SKCONTRACT_DEBUG_SPIN``, ``SKCONTRACT_TRACE`` (kernels that
stamp their phases, read by ``tools/trace_kernel.py``), ``SKCONTRACT_PROBE`` (Wgmma kernels
that run one half of their mainloop, timed by ``tools/time_gemm.py --probe``).
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import re
import sys
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

from ..schedule.types import CLUSTER
from .nvrtc import CompileError, compile_isolated
from .specs import KernelSpec

CUDA_DIR = Path(__file__).with_name("cuda")
ENTRY_HEADER = "sk_gemm.cuh"
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


@lru_cache(maxsize=None)
def inline_headers(entry: str = ENTRY_HEADER) -> str:
    """The entry header with every ``#include "x.cuh"`` replaced by x.cuh's text (once)."""
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:
            return f"// (already included: {name})\n"
        seen.add(name)
        text = (CUDA_DIR / name).read_text()
        text = text.replace("#pragma once", f"// ---- {name} ----")
        return _INCLUDE_RE.sub(lambda m: expand(m.group(1)), text)

    return expand(entry)


def header_files() -> list[Path]:
    return sorted(CUDA_DIR.glob("*.cuh"))


def render_source(spec: KernelSpec) -> str:
    """The whole translation unit for one spec: inlined headers + its Cfg struct."""
    return (f"// skcontract kernel {spec.name}\n" + inline_headers(spec.entry_header) + "\n"
            + spec.cfg_source())


def debug_spin_enabled() -> bool:
    return os.environ.get("SKCONTRACT_DEBUG_SPIN", "0") not in ("", "0")


def trace_enabled() -> bool:
    return os.environ.get("SKCONTRACT_TRACE", "0") not in ("", "0")


PROBES = {"loads": "-DSKCONTRACT_PROBE_LOADS_ONLY", "mma": "-DSKCONTRACT_PROBE_MMA_ONLY"}
"""``SKCONTRACT_PROBE`` -> the define of a probe build (sk_wgmma.cuh): the Wgmma mainloop's
loads alone (the consumers issue no wgmma) or its wgmmas alone (the producer loads the ring
once, then marks its stages full without loading). For timing what bounds a tile; a probe
build's outputs are wrong."""


def probe() -> str | None:
    """The probe build ``SKCONTRACT_PROBE`` asks for (a key of :data:`PROBES`), or None."""
    name = os.environ.get("SKCONTRACT_PROBE", "")
    if name in ("", "0", "none"):
        return None
    if name not in PROBES:
        raise ValueError(f"SKCONTRACT_PROBE={name!r}: expected one of {sorted(PROBES)}")
    return name


def compile_options(arch: str, *, debug: bool = False, trace: bool = False,
                    probe_build: str | None = None) -> tuple[str, ...]:
    """NVRTC options. ``arch`` like ``sm_90a`` (DeviceInfo.arch) or ``sm_80``;
    ``probe_build``: a key of :data:`PROBES`."""
    opts = ["-std=c++17", f"-arch={arch}", "-ftz=false"]  # float32 subnormals kept
    if debug:
        opts.append("-DSKCONTRACT_DEBUG_SPIN")
    if trace:
        opts.append("-DSKCONTRACT_TRACE")
    if probe_build is not None:
        opts.append(PROBES[probe_build])
    return tuple(opts)


def nvrtc_version() -> str:
    try:
        from cuda.bindings import nvrtc  # optional dependency: NVRTC for the version string
        _, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception:  # noqa: BLE001 - fall back to CuPy's view
        try:
            import cupy  # optional dependency: only the GPU path needs CuPy
            return ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
        except Exception:  # noqa: BLE001
            return "unknown"


def cache_key(source: str, name_expressions, options, arch: str) -> str:
    """The cache's name for a translation unit: a hash of its whole source (headers inlined),
    the instantiated name expressions, the options, the NVRTC version and the arch."""
    h = hashlib.sha256(source.encode())
    h.update(repr((tuple(name_expressions), tuple(options), nvrtc_version(), arch)).encode())
    return h.hexdigest()[:32]


def cache_dir() -> Path:
    """Where compiled kernels are kept across processes: ``SKCONTRACT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/skcontract`` (``~/.cache/skcontract``); a per-process temporary
    folder where no home is known or the folder cannot be written (:func:`load_module`)."""
    d = os.environ.get("SKCONTRACT_CACHE_DIR")
    if d:
        return Path(d).absolute()
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        return Path(base or Path.home() / ".cache").absolute() / "skcontract"
    except RuntimeError:  # no home directory
        return _scratch_dir()


_SCRATCH: list = []


def _scratch_dir() -> Path:
    """A temporary folder for this process's kernels, removed at exit."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="skcontract-kernels-"))
    return Path(_SCRATCH[0].name)


CACHE_FILE_MODE = 0o644
"""The cache's files are readable by everyone, as a shared cache folder needs."""


def _write_atomic(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, CACHE_FILE_MODE)
        os.replace(tmp, target)  # atomic: a concurrent reader sees the whole file or none
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class LoadedModule:
    """A loaded cubin whose functions are asked for by their name expressions (as CuPy's
    ``RawModule(code=..., name_expressions=...)`` takes them)."""

    __slots__ = ("raw", "lowered")

    def __init__(self, raw, lowered: dict):
        self.raw, self.lowered = raw, lowered

    def get_function(self, name_expression: str):
        return self.raw.get_function(self.lowered.get(name_expression, name_expression))

    def get_global(self, name: str):
        return self.raw.get_global(name)


def _cached(root: Path, key: str, name_expressions) -> LoadedModule | None:
    """The module kept under ``key``, loaded, or None where it is missing or unreadable."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    cubin, meta = root / f"{key}.cubin", root / f"{key}.json"
    try:
        lowered = json.loads(meta.read_text()).get("lowered")
        if not isinstance(lowered, dict) or set(lowered) != set(name_expressions):
            return None
        module = LoadedModule(cupy.RawModule(path=str(cubin)), lowered)
        for expr in name_expressions:  # loads the cubin: a damaged one fails here
            module.get_function(expr)
        return module
    except (OSError, ValueError, cupy.cuda.driver.CUDADriverError):
        return None


_UNWRITABLE: set = set()
"""Cache folders this process failed to write (it keeps its kernels in :func:`_scratch_dir`)."""


def _keep(root: Path, key: str, cubin: bytes, meta: bytes) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _write_atomic(root / f"{key}.cubin", cubin)
    _write_atomic(root / f"{key}.json", meta)  # last: a complete entry has both


def load_module(source: str, label: str, name_expressions, options, key: str,
                manifest: dict | None = None) -> LoadedModule:
    """The module of ``source`` from the cache (:func:`cache_dir`), compiled (in a child
    process) and kept there first where it is missing or damaged: ``<key>.cubin`` with
    ``<key>.json`` (the lowered names and ``manifest``: what was built, for people reading
    the cache). A cache folder that cannot be written is replaced, with a warning, by a
    temporary one for this process."""
    root = cache_dir()
    for where in (root, _scratch_dir()) if root in _UNWRITABLE else (root,):
        module = _cached(where, key, name_expressions)
        if module is not None:
            return module
    built = compile_isolated(source, label, name_expressions, options)
    data = json.dumps({"key": key, "lowered": built.lowered, "options": list(options),
                       "nvrtc": nvrtc_version(), **(manifest or {})}, indent=1).encode()
    if root not in _UNWRITABLE:
        try:
            _keep(root, key, built.cubin, data)
        except OSError as e:
            _UNWRITABLE.add(root)
            warnings.warn(f"skcontract: cannot write the kernel cache {root} ({e}); this "
                          f"process keeps its kernels in {_scratch_dir()} (set "
                          f"SKCONTRACT_CACHE_DIR to a writable folder)", RuntimeWarning,
                          stacklevel=3)
    if root in _UNWRITABLE:
        root = _scratch_dir()
        _keep(root, key, built.cubin, data)
    module = _cached(root, key, name_expressions)
    if module is None:
        raise CompileError(f"{label}: the cubin just built under {root} does not load")
    return module


class RegisterCountError(RuntimeError):
    """A kernel whose warpgroups trade registers compiled to another register count than
    the trade assumes (a different compiler): launching it could wait forever."""


class CompiledKernel:
    """A loaded kernel plus what the launcher needs about it: ``occupancy`` (CTAs an SM) and,
    for a kernel launched in clusters, ``clusters`` (how many can be resident at once)."""

    __slots__ = ("spec", "function", "key", "arch", "occupancy", "module", "clusters")

    def __init__(self, spec, module, function, key, arch, occupancy, clusters=None):
        self.spec, self.module, self.function = spec, module, function
        self.key, self.arch, self.occupancy = key, arch, occupancy
        self.clusters = clusters


def allow_large_clusters(function_ptr: int) -> None:
    """Let the kernel at ``function_ptr`` launch in clusters beyond the portable 8 CTAs."""
    from cuda.bindings import driver as cu  # optional dependency: the GPU path's

    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    (err,) = cu.cuFuncSetAttribute(cu.CUfunction(function_ptr), attr, 1)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED): {err}")


def max_active_clusters(function_ptr: int, threads: int, smem: int, cluster: int) -> int:
    """Clusters of ``cluster`` CTAs of the kernel at ``function_ptr`` (whose cluster size is
    compiled in) that the current device holds at once: the driver's count, which knows
    the GPCs (clusters never straddle one), unlike CTAs an SM times SMs. RuntimeError if
    the driver cannot say."""
    from cuda.bindings import driver as cu  # optional dependency: the GPU path's

    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = cluster, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes = smem
    config.numAttrs = 0
    err, count = cu.cuOccupancyMaxActiveClusters(cu.CUfunction(function_ptr), config)
    if err != cu.CUresult.CUDA_SUCCESS or count < 1:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters: {err} ({count} clusters)")
    return int(count)


_MEMO: dict = {}


def get_kernel(spec: KernelSpec, device_id: int | None = None) -> CompiledKernel:
    """Compile (or fetch) ``spec`` for the current CuPy device. Warm calls are a dict lookup."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    dev = device_id if device_id is not None else cupy.cuda.runtime.getDevice()
    debug, traced, probed = debug_spin_enabled(), trace_enabled(), probe()
    memo_key = (dev, spec, debug, traced, probed)
    hit = _MEMO.get(memo_key)
    if hit is not None:
        return hit
    arch = device_arch(dev)
    options = compile_options(arch, debug=debug, trace=traced, probe_build=probed)
    source = render_source(spec)
    key = cache_key(source, [spec.name_expression], options, arch)
    module = load_module(source, spec.name, [spec.name_expression], options, key,
                         {"name": spec.name, "spec": spec.to_dict(), "arch": arch})
    function = module.get_function(spec.name_expression)
    from cupy.cuda import driver  # optional dependency: only the GPU path needs CuPy
    smem = spec.smem_bytes
    function.max_dynamic_shared_size_bytes = smem  # RawKernel: sets the CUfunction attribute
    # The underlying cupy.cuda.function.Function launches on an explicit stream.
    raw = getattr(function, "kernel", None)
    launcher = raw if raw is not None and hasattr(raw, "ptr") else function
    ptr = getattr(launcher, "ptr", None)
    if ptr is None:
        raise RuntimeError("cannot reach the CUfunction of the compiled kernel")
    want_regs = spec.base.launch_registers
    if want_regs is not None and function.num_regs != want_regs:
        raise RegisterCountError(f"kernel {spec.name} compiled to {function.num_regs} "
                                 f"registers a thread; its register split needs {want_regs}")
    if spec.protocol == CLUSTER:  # clusters of up to 16 CTAs (types.CLUSTER_SPLITS)
        allow_large_clusters(int(ptr))
    occupancy = driver.occupancyMaxActiveBlocksPerMultiprocessor(ptr, spec.threads, smem)
    if occupancy < 1:
        raise RuntimeError(f"kernel {spec.name} cannot be resident (occupancy 0)")
    cluster = spec.base.CLUSTER
    clusters = (max_active_clusters(int(ptr), spec.threads, smem, cluster) if cluster > 1
                else None)
    function = launcher
    compiled = CompiledKernel(spec, module, function, key, arch, occupancy, clusters)
    _MEMO[memo_key] = compiled
    return compiled


def device_arch(device_id: int) -> str:
    """The NVRTC target of a CuPy device: ``sm_90a`` on compute capability 9.0 (the Wgmma
    family's instructions need it), else ``sm_<cc>``."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    cc = cupy.cuda.Device(device_id).compute_capability  # e.g. "90"
    return "sm_90a" if cc == "90" else f"sm_{cc}"


_MODULES: dict = {}


def get_module(header: str, name_expressions: tuple[str, ...], device_id: int) -> LoadedModule:
    """The module of an auxiliary kernel header (one that is no catalogue entry:
    ``fold_copy.cuh``), its headers inlined, with ``name_expressions`` instantiated;
    compiled once a device (and kept in :func:`cache_dir`)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    memo = (header, name_expressions, device_id)
    module = _MODULES.get(memo)
    if module is None:
        arch = device_arch(device_id)
        options = compile_options(arch)
        source = inline_headers(header)
        key = cache_key(source, name_expressions, options, arch)
        with cupy.cuda.Device(device_id):
            module = load_module(source, Path(header).stem, list(name_expressions), options,
                                 key, {"header": header, "arch": arch})
        _MODULES[memo] = module
    return module


def print_kernel(msg: str) -> None:
    if os.environ.get("SKCONTRACT_PRINT_KERNEL", "0") not in ("", "0"):
        print(f"[skcontract] {msg}", file=sys.stderr)


def _warm_one(spec_dict) -> str:
    spec = KernelSpec.from_dict(spec_dict)
    try:
        k = get_kernel(spec)
        return f"ok   occ={k.occupancy} {spec.name}"
    except Exception as e:  # noqa: BLE001 - report and go on
        return f"FAIL {spec.name}: {type(e).__name__}: {str(e)[:2000]}"


def warm(spec_list, jobs: int = 8) -> list[str]:
    """Compile and load specs in parallel processes (each a CUDA context), keeping the cubins in
    :func:`cache_dir`."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(jobs) as pool:
        return pool.map(_warm_one, [s.to_dict() for s in spec_list], chunksize=1)

