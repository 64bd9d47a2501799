"""Run-time compilation of KernelSpecs through CuPy (NVRTC), with our own cache key.

* Headers are inlined into the source handed to CuPy (CuPy's disk cache hashes only the
  source text, not headers found through ``-I``), so any header change is a new kernel.
* :func:`cache_key` hashes every source + header, the options, the NVRTC and CuPy versions
  and the target arch. It names the manifest written under ``SKCONTRACT_CACHE_DIR``.
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
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from ..schedule.types import CLUSTER
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
    opts = ["-std=c++17", f"-arch={arch}"]
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


def cupy_version() -> str:
    try:
        import cupy  # optional dependency: only the GPU path needs CuPy
        return cupy.__version__
    except Exception:  # noqa: BLE001
        return "none"


def cache_key(spec: KernelSpec, options: tuple[str, ...], arch: str) -> str:
    h = hashlib.sha256()
    for path in header_files():
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(spec.cfg_source().encode())
    h.update(repr(options).encode())
    h.update(f"nvrtc={nvrtc_version()} cupy={cupy_version()} arch={arch}".encode())
    return h.hexdigest()[:32]


def cache_dir() -> Path | None:
    d = os.environ.get("SKCONTRACT_CACHE_DIR")
    return Path(d) if d else None


@contextmanager
def _cupy_cache_dir(path: Path | None):
    """Point CuPy's kernel cache at ``path/cupy`` for the duration of one compile."""
    if path is None:
        yield
        return
    old = os.environ.get("CUPY_CACHE_DIR")
    os.environ["CUPY_CACHE_DIR"] = str(path / "cupy")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUPY_CACHE_DIR", None)
        else:
            os.environ["CUPY_CACHE_DIR"] = old


def _write_manifest(path: Path, key: str, spec: KernelSpec, options, arch: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{key}.json"
    if target.exists():
        return
    data = {"key": key, "spec": spec.to_dict(), "name": spec.name, "options": list(options),
            "arch": arch, "nvrtc": nvrtc_version(), "cupy": cupy_version()}
    fd, tmp = tempfile.mkstemp(dir=path, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, target)  # atomic


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
    key = cache_key(spec, options, arch)
    source = render_source(spec)
    cdir = cache_dir()
    with _cupy_cache_dir(cdir):
        module = cupy.RawModule(code=source, options=options,
                                name_expressions=[spec.name_expression])
        function = module.get_function(spec.name_expression)
    if cdir is not None:
        _write_manifest(cdir, key, spec, options, arch)
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


def get_module(header: str, name_expressions: tuple[str, ...], device_id: int):
    """The CuPy RawModule of an auxiliary kernel header (one that is no catalogue entry:
    ``fold_copy.cuh``), its headers inlined, with ``name_expressions`` instantiated;
    compiled once a device."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    key = (header, name_expressions, device_id)
    module = _MODULES.get(key)
    if module is None:
        with cupy.cuda.Device(device_id), _cupy_cache_dir(cache_dir()):
            module = cupy.RawModule(code=inline_headers(header),
                                    options=compile_options(device_arch(device_id)),
                                    name_expressions=list(name_expressions))
        _MODULES[key] = module
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
    """Compile specs into CuPy's disk cache in parallel processes (each a CUDA context)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(jobs) as pool:
        return pool.map(_warm_one, [s.to_dict() for s in spec_list], chunksize=1)

