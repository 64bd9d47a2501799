"""DeviceInfo: what the scheduler needs to know about a GPU."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .heuristics import MEASURED_COST_DEVICE_NAMES, MEASURED_H200_COST

# Accumulator dtypes with a device-wide atomic add on compute capability >= 6.0
# (red.global.add.{f32,f64,s32,u64}); fp16/bf16 pairs exist from 9.0 but we accumulate
# those in fp32 anyway, so they never need one.
_ATOMIC_ACCUMULATORS = frozenset({"float32", "float64", "int32", "int64", "uint32", "uint64"})

H200_SMS = 132
H200_L2_BYTES = 60 * 1024 * 1024
H200_SMEM_PER_SM = 228 * 1024
H200_MAX_THREADS_PER_SM = 2048
H200_RESIDENT_CLUSTERS = ((2, 66), (3, 39), (4, 30), (5, 22), (6, 17), (7, 15), (8, 15),
                          (9, 9), (10, 7), (11, 7), (12, 7), (13, 7), (14, 7), (15, 7), (16, 7))
"""(CTAs a cluster, clusters resident at once) of a kernel of one CTA an SM on the H200: the
driver's cuOccupancyMaxActiveClusters (clusters never straddle a GPC, whose SMs are not all
alike: 4 x 30 = 120 and 16 x 7 = 112 of 132 SMs). Two CTAs an SM hold at least twice as many
(the driver: 132, 79, 62, 47, 39, 32, 30, 23, 21, 16, 16, 14, 14, 14, 14; evidence:
docs/benchmarks/calibration.md)."""
H100_L2_BYTES = 50 * 1024 * 1024
"""The H100 SXM differs from the H200 in memory (and its L2 here); SMs and SM are the same."""
H200_MEMORY_BYTES = 143771 * 2**20
H100_MEMORY_BYTES = 81559 * 2**20
"""Device memory of the presets: what the driver reports of an H200 and an H100 SXM."""
DEVICE_NAMES = ("h200", "h100", "gpu")
"""Device names the public entry points accept besides a DeviceInfo."""


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU as the scheduler sees it.

    >>> d = DeviceInfo.h200()
    >>> d.sms, d.compute_capability
    (132, (9, 0))
    >>> d.has_atomic("float32"), d.has_atomic("complex64")
    (True, False)
    """

    name: str
    sms: int
    compute_capability: tuple[int, int]
    l2_bytes: int
    smem_per_sm: int
    max_threads_per_sm: int = 2048
    # Resident CTAs per SM for the kernel configuration being scheduled (the scheduler sets
    # it from each kernel's declared occupancy).
    ctas_per_sm: int = 1
    atomic_accumulators: frozenset = field(default=_ATOMIC_ACCUMULATORS)
    # Cost-model constants fitted to this device (skcontract.schedule.heuristics.CostModel);
    # None uses the named initial guesses in heuristics.py.
    cost: object = None
    # (CTAs a cluster, clusters resident at one CTA an SM) as the driver counts them; ()
    # where unknown (auto then plans no cluster reduction, which a caller may still force)
    resident_clusters: tuple = ()
    # Device memory in bytes (0: unknown), what a fractional memory_limit is a share of
    memory_bytes: int = 0

    def __post_init__(self):
        for name in ("sms", "l2_bytes", "smem_per_sm", "max_threads_per_sm", "ctas_per_sm"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"DeviceInfo.{name} must be a positive int, got {v!r}")
        cc = self.compute_capability
        if not (isinstance(cc, tuple) and len(cc) == 2
                and all(isinstance(x, (int, np.integer)) and x >= 0 for x in cc)):
            raise ValueError(f"DeviceInfo.compute_capability must be (major, minor), got "
                             f"{cc!r}")

    @classmethod
    def named(cls, device) -> "DeviceInfo":
        """``device`` as a DeviceInfo: one itself, or a name: "h200" / "h100" (presets with
        the H200's fitted cost model), "gpu" (the current CUDA device, through CuPy).

        >>> DeviceInfo.named("h100").name, DeviceInfo.named("h200").sms
        ('NVIDIA H100 (preset)', 132)
        """
        if isinstance(device, cls):
            return device
        if not isinstance(device, str):
            raise TypeError(f"device must be a DeviceInfo or one of {DEVICE_NAMES}, got "
                            f"{type(device).__name__}")
        key = device.lower()
        if key == "h200":
            return cls.h200()
        if key == "h100":
            return replace(cls.h200(), name="NVIDIA H100 (preset)", l2_bytes=H100_L2_BYTES,
                           memory_bytes=H100_MEMORY_BYTES)
        if key == "gpu":
            return cls._current_gpu()
        raise ValueError(f"unknown device {device!r}; use a DeviceInfo or one of "
                         f"{DEVICE_NAMES}")

    @classmethod
    def _current_gpu(cls) -> "DeviceInfo":
        """The current CUDA device (``device="gpu"``); ImportError without CuPy and
        RuntimeError without a device, each saying what to do instead."""
        try:
            import cupy  # optional: only a live device needs it
        except ImportError:
            raise ImportError(f"device='gpu' reads the current CUDA device through CuPy, which "
                              "is not installed (pip install 'skcontract[cuda13]'); plan for a "
                              f"preset with one of {DEVICE_NAMES[:-1]} instead") from None
        try:
            return cls.from_cupy()
        except cupy.cuda.runtime.CUDARuntimeError as e:
            raise RuntimeError(f"device='gpu': no CUDA device to read ({e}); plan for a "
                               f"preset with one of {DEVICE_NAMES[:-1]} instead") from None

    @classmethod
    def h200(cls, ctas_per_sm: int = 1) -> "DeviceInfo":
        """The H200 preset, with the cost model fitted to it (heuristics.MEASURED_H200_COST)."""
        return cls("NVIDIA H200 (preset)", H200_SMS, (9, 0), H200_L2_BYTES,
                   H200_SMEM_PER_SM, H200_MAX_THREADS_PER_SM, ctas_per_sm,
                   cost=MEASURED_H200_COST, resident_clusters=H200_RESIDENT_CLUSTERS,
                   memory_bytes=H200_MEMORY_BYTES)

    @classmethod
    def from_cupy(cls, device_id: int | None = None, ctas_per_sm: int = 1) -> "DeviceInfo":
        """Read a live device through CuPy (raises ImportError without CuPy).

        A device whose name contains "H200" or "H100" (heuristics.MEASURED_COST_DEVICE_NAMES)
        gets the cost model fitted to the H200; any other keeps ``cost=None`` (the guesses).
        """
        import cupy  # optional: only a live device needs it

        dev_id = cupy.cuda.runtime.getDevice() if device_id is None else device_id
        p = cupy.cuda.runtime.getDeviceProperties(dev_id)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        cost = MEASURED_H200_COST if any(t in name for t in MEASURED_COST_DEVICE_NAMES) else None
        h200 = "H200" in name and p["multiProcessorCount"] == H200_SMS  # not a MIG slice
        clusters = H200_RESIDENT_CLUSTERS if h200 else ()
        return cls(name, p["multiProcessorCount"], (p["major"], p["minor"]),
                   p["l2CacheSize"], p["sharedMemPerMultiprocessor"],
                   p["maxThreadsPerMultiProcessor"], ctas_per_sm, cost=cost,
                   resident_clusters=clusters, memory_bytes=int(p["totalGlobalMem"]))

    @property
    def resident_ctas(self) -> int:
        """CTAs that can be resident at once: the ceiling on units that may wait."""
        return self.sms * self.ctas_per_sm

    def clusters_resident(self, size: int) -> int:
        """Clusters of ``size`` CTAs resident at once at this occupancy (0: unknown)."""
        return dict(self.resident_clusters).get(size, 0) * self.ctas_per_sm

    @property
    def arch(self) -> str:
        """The NVRTC target: sm_90a on compute capability 9.0 (wgmma, setmaxnreg)."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"

    def has_atomic(self, dtype) -> bool:
        """Whether accumulators of ``dtype`` can be merged with a device atomic add."""
        return np.dtype(dtype).name in self.atomic_accumulators

    def with_occupancy(self, ctas_per_sm: int) -> "DeviceInfo":
        return replace(self, ctas_per_sm=ctas_per_sm)

    def with_clusters(self, cluster: int) -> "DeviceInfo":
        """The device as work units of ``cluster`` SMs each (a cluster of CTAs runs one unit;
        the schedule's grid and co-residency count units)."""
        return self if cluster == 1 else replace(self, sms=self.sms // cluster)
