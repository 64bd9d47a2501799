"""The memory a sliced plan's calls allocate on the GPU beside what the peak model predicts.

    python -m tools.slice_peaks

For a chain of four matrices (float32 and float16) at several byte budgets, one JSON line
each: the budget, the predicted peak, the CuPy allocations' high-water mark of the first
call and of a warm one (:func:`skcontract.bench.memory.cupy_peak`), and the bytes the
fixup pools hold after the calls (:mod:`skcontract.kernels.workspace`): what the model
leaves out.
"""
from __future__ import annotations

import json

import cupy
import numpy as np

from skcontract import contract_expression
from skcontract.bench.memory import cupy_peak
from skcontract.kernels import workspace
from skcontract.plan.slicing import budget_of

CHAIN = "ab,bc,cd,de->ae"
SHAPES = [(1536, 1024), (1024, 2048), (2048, 1536), (1536, 768)]
LIMITS = {"float32": ("14MiB", "10MiB", "6MiB"), "float16": ("12MiB", "10MiB", "9MiB")}


def main() -> None:
    rng = np.random.default_rng(3)
    for dtype, limits in LIMITS.items():
        ops = [cupy.asarray(rng.standard_normal(s).astype(dtype)) for s in SHAPES]
        for limit in limits:
            try:
                expr = contract_expression(CHAIN, *SHAPES, memory_limit=limit, dtype=dtype,
                                           backend="cupy")
            except ValueError as e:
                print(json.dumps({"dtype": dtype, "limit": limit, "error": str(e)}))
                continue
            peaks, grown = [], []
            for _ in range(2):
                cupy.cuda.Device().synchronize()
                pools = workspace.held_bytes()
                with cupy_peak() as mem:
                    expr(*ops)
                    cupy.cuda.Device().synchronize()
                peaks.append(mem.peak)
                grown.append(workspace.held_bytes() - pools)
            s = expr.plan.slicing
            print(json.dumps({"dtype": dtype, "limit": limit,
                              "budget": budget_of(limit, []).bytes,
                              "slices": None if s is None else s.num_slices,
                              "predicted": None if s is None else s.peak_bytes,
                              "first": peaks[0], "warm": peaks[1], "pools_grown": grown,
                              "pools": workspace.held_bytes()}), flush=True)


if __name__ == "__main__":
    main()
