"""Time gemm per operand layout against cuBLAS (not a pytest module).

    python -m tools.time_layouts [--dtypes float32] [--shapes 1024x1024x1024,...]

For each shape: cuBLAS (torch.matmul, CUDA-graph replay) on row-major operands, then our
``gemm`` (auto) with A and B each row- or column-major (the kernel reads both without
copies; the layout decides the shared-memory staging and the fragment loads).
"""
from __future__ import annotations

import argparse
import sys

from skcontract.bench.timing import calls_for, device_time_us, torch_graph_us
from skcontract.kernels import gemm as G


def main(argv=None) -> int:
    import cupy
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--shapes", default="1024x1024x1024,2304x2304x4096")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    stream = cupy.cuda.Stream(non_blocking=True)
    for dtype in args.dtypes.split(","):
        tdt = getattr(torch, dtype)
        for shape in args.shapes.split(","):
            m, n, k = map(int, shape.split("x"))
            gen = torch.Generator(device="cuda").manual_seed(1)
            a = torch.randn((m, k), device="cuda", generator=gen, dtype=tdt)
            b = torch.randn((k, n), device="cuda", generator=gen, dtype=tdt)
            c = torch.empty((m, n), device="cuda", dtype=tdt)
            calls = calls_for(2.0 * m * n * k)
            cub = torch_graph_us(lambda: torch.matmul(a, b, out=c), calls, args.reps)
            line = [f"{dtype} {shape}: cublas {cub:.1f} us"]
            for la in ("row", "col"):
                for lb in ("row", "col"):
                    x = a if la == "row" else a.t().contiguous().t()
                    y = b if lb == "row" else b.t().contiguous().t()
                    us = device_time_us(lambda: G.gemm(x, y, c), stream, calls, args.reps)
                    line.append(f"{la[0]}{lb[0]} {us:.1f} ({cub / us:.2f})")
            print("  ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
