"""Device time of ``gemm`` (auto) on a few shapes, for A/B runs of two trees (GPU).

    PYTHONPATH=<tree> python -m tools.time_gemm --shapes 4x4096x4096,16x4096x4096 \\
        --dtypes float32,float64 [--reps 15]

Prints one JSON line per (shape, dtype): CUDA-graph replay time in microseconds (the median
of ``--reps``), timed by this checkout's ``skcontract/bench/timing.py`` whatever the tree;
``--peer`` adds torch.matmul (cuBLAS) on the same operands, timed by torch's graph replay,
and the ratio; ``--mode`` / ``--tile`` (BMxBNxBK) / ``--reduction`` force a schedule mode,
an entry or a fixup protocol.
16-bit operands are made by torch (CuPy has no bfloat16). It imports ``skcontract`` from
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
    p.add_argument("--peer", action="store_true", help="also time torch.matmul")
    p.add_argument("--mode", default="auto")
    p.add_argument("--tile", default=None, help="BMxBNxBK of the entry to force")
    p.add_argument("--reduction", default=None, choices=("deterministic", "arrival", "atomic"),
                   help="default: gemm's")
    args = p.parse_args(argv)
    tile = None if args.tile is None else tuple(int(x) for x in args.tile.split("x"))
    import cupy  # optional dependency: this tool times the GPU

    # imported here, after PYTHONPATH picked the tree to time; both trees are timed by this
    # checkout's helpers, so they time alike
    import skcontract
    from skcontract.kernels.gemm import gemm
    timing = _timing()

    stream = cupy.cuda.Stream(non_blocking=True)
    forced = {} if args.reduction is None else {"reduction": args.reduction}
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        for dtype in args.dtypes.split(","):
            a, b, c = _operands(m, n, k, dtype, args.peer)
            calls = timing.calls_for(2.0 * m * n * k)
            us = timing.device_time_us(lambda: gemm(a, b, c, mode=args.mode, tile=tile,
                                                    **forced),
                                       stream, calls, args.reps)
            row = {"tag": args.tag, "tree": skcontract.__file__, "shape": shape,
                   "dtype": dtype, "us": us, "tflops": 2e-6 * m * n * k / us}
            if args.peer:
                import torch  # the peer
                row["torch_us"] = timing.torch_graph_us(lambda: torch.matmul(a, b, out=c),
                                                        calls, args.reps)
                row["vs_torch"] = row["torch_us"] / us
            print(json.dumps(row), flush=True)
    return 0


def _operands(m, n, k, dtype, use_torch):
    """Random A (m x k), B (k x n) and an output C, as torch tensors for 16-bit dtypes or a
    torch peer, else CuPy arrays."""
    if use_torch or dtype in ("float16", "bfloat16"):
        import torch  # the peer, and CuPy has no bfloat16
        g = torch.Generator(device="cuda").manual_seed(0)
        dt = getattr(torch, dtype)
        a = torch.randn(m, k, device="cuda", generator=g).to(dt)
        b = torch.randn(k, n, device="cuda", generator=g).to(dt)
        return a, b, torch.empty(m, n, device="cuda", dtype=dt)
    import cupy  # optional dependency: this tool times the GPU
    rs = cupy.random.RandomState(0)
    return (rs.standard_normal((m, k)).astype(dtype), rs.standard_normal((k, n)).astype(dtype),
            cupy.empty((m, n), dtype=dtype))


if __name__ == "__main__":
    sys.exit(main())
