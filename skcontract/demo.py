"""The demo behind `python -m skcontract demo`: a few einsums, their plans, a check each."""
from __future__ import annotations

import numpy as np

from .contract import contract_path, einsum
from .schedule.device import DeviceInfo

# (title, subscripts, operand shapes): small enough to run on a laptop CPU in a second.
DEMO_CASES = (
    ("matmul", "ij,jk->ik", [(384, 256), (256, 320)]),
    ("attention scores", "bhqd,bhkd->bhqk", [(2, 4, 128, 64), (2, 4, 128, 64)]),
    ("4-operand chain", "ij,jk,kl,lm->im", [(64, 512), (512, 32), (32, 512), (512, 48)]),
    ("trace", "ii->", [(500, 500)]),
)


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy  # optional dependency: only the GPU path needs CuPy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "run on the CPU"
        return False


def run_demo(backend: str | None = None) -> int:
    """Run every demo case; return 0 when each matches numpy.einsum in float64."""
    if backend is None:
        backend = "cupy" if gpu_available() else "numpy"
    xp, device = np, None
    if backend == "cupy":
        import cupy as xp  # optional dependency: only the GPU path needs CuPy
        device = DeviceInfo.from_cupy()
    print(f"skcontract demo: backend = {backend}"
          + (" (GPU)" if backend == "cupy" else " (CPU: no GPU present)"))
    rng = np.random.default_rng(0)
    failures = 0
    for title, subscripts, shapes in DEMO_CASES:
        operands = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        _, plan = contract_path(subscripts, *operands, device=device)
        got = einsum(subscripts, *[xp.asarray(o) for o in operands], backend=backend)
        got = got.get() if hasattr(got, "get") else np.asarray(got)
        ref = np.einsum(subscripts, *[o.astype(np.float64) for o in operands], optimize=True)
        err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))
        ok = err < 1e-5
        failures += not ok
        print(f"\n== {title}: {subscripts}  shapes {shapes}")
        print(plan)
        print(f"relative error vs numpy float64: {err:.2e}  {'OK' if ok else 'MISMATCH'}")
    print(f"\n{len(DEMO_CASES) - failures}/{len(DEMO_CASES)} demo einsums match numpy "
          f"(backend {backend})")
    return 1 if failures else 0
