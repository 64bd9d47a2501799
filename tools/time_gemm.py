"""Device time of ``gemm`` (auto) on a few shapes, for A/B runs of two trees (GPU).

    PYTHONPATH=<tree> python -m tools.time_gemm --shapes 4x4096x4096,16x4096x4096 \\
        --dtypes float32,float64 [--reps 15]

Prints one JSON line per (shape, dtype): CUDA-graph replay time in microseconds (the median
of ``--reps``), timed by this checkout's ``skcontract/bench/timing.py`` whatever the tree. It imports ``skcontract`` from
whatever tree ``PYTHONPATH`` names first, so running it alternately over two trees in one
device session compares them on the same machine state.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

#: this checkout's timing helpers, loaded by path: the tree being timed may predate them
TIMING_PY = Path(__file__).resolve().parents[1] / "skcontract" / "bench" / "timing.py"


def _timing():
    spec = importlib.util.spec_from_file_location("_skcontract_timing", TIMING_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.time_gemm")
    p.add_argument("--shapes", required=True, help="comma list of MxNxK")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--tag", default="")
    args = p.parse_args(argv)
    import cupy  # optional dependency: this tool times the GPU

    # imported here, after PYTHONPATH picked the tree to time; both trees are timed by this
    # checkout's helpers, so they time alike
    import skcontract
    from skcontract.kernels.gemm import gemm
    timing = _timing()

    stream = cupy.cuda.Stream(non_blocking=True)
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        for dtype in args.dtypes.split(","):
            rs = cupy.random.RandomState(0)
            a = rs.standard_normal((m, k)).astype(dtype)
            b = rs.standard_normal((k, n)).astype(dtype)
            c = cupy.empty((m, n), dtype=dtype)
            calls = timing.calls_for(2.0 * m * n * k)
            us = timing.device_time_us(lambda: gemm(a, b, c), stream, calls, args.reps)
            print(json.dumps({"tag": args.tag, "tree": skcontract.__file__, "shape": shape,
                              "dtype": dtype, "us": us}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
