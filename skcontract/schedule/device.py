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
    # Resident CTAs per SM for the kernel configuration being scheduled. The launcher
    # replaces it with the occupancy it queried for the real kernel (never assume).
    ctas_per_sm: int = 1
    atomic_accumulators: frozenset = field(default=_ATOMIC_ACCUMULATORS)
    # Cost-model constants measured on this device (skcontract.schedule.heuristics.CostModel);
    # None uses the named initial guesses in heuristics.py.
    cost: object = None

    @classmethod
    def h200(cls, ctas_per_sm: int = 1) -> "DeviceInfo":
        """The H200 preset, with the cost model measured on it (heuristics.MEASURED_H200_COST)."""
        return cls("NVIDIA H200 (preset)", H200_SMS, (9, 0), H200_L2_BYTES,
                   H200_SMEM_PER_SM, H200_MAX_THREADS_PER_SM, ctas_per_sm,
                   cost=MEASURED_H200_COST)

    @classmethod
    def from_cupy(cls, device_id: int | None = None, ctas_per_sm: int = 1) -> "DeviceInfo":
        """Read a live device through CuPy (raises ImportError without CuPy).

        A device whose name contains "H200" or "H100" (heuristics.MEASURED_COST_DEVICE_NAMES)
        gets the cost model measured on the H200; any other keeps ``cost=None`` (the guesses).
        """
        import cupy  # optional: only a live device needs it

        dev_id = cupy.cuda.runtime.getDevice() if device_id is None else device_id
        p = cupy.cuda.runtime.getDeviceProperties(dev_id)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        cost = MEASURED_H200_COST if any(t in name for t in MEASURED_COST_DEVICE_NAMES) else None
        return cls(name, p["multiProcessorCount"], (p["major"], p["minor"]),
                   p["l2CacheSize"], p["sharedMemPerMultiprocessor"],
                   p["maxThreadsPerMultiProcessor"], ctas_per_sm, cost=cost)

    @property
    def resident_ctas(self) -> int:
        """CTAs that can be resident at once: the ceiling on units that may wait."""
        return self.sms * self.ctas_per_sm

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
