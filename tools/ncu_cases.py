"""Kernels for Nsight Compute, one launch each inside a profiler range (not a pytest module).

    ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats ... \\
        python -m tools.ncu_cases [--cases fp64-2304:auto,fp64-2304:cublas,...]

A case is ``<dtype>-<shape>:<kernel>`` (dtype fp16, bf16, fp32, fp64, or tf32 / 3xtf32: float32
at that precision with B column-major, cuBLAS then in tf32 / exact float32), shape a name of
SHAPES, MxNxK or BxMxNxK (a batch), kernel ``auto`` (our
``gemm``, which picks among the shipped kernels), a schedule mode of ours (``stream_k``,
``data_parallel``, ...) or ``cublas`` (torch.matmul); ``<dtype>-<shape>:<mode>:BMxBNxBK``
forces our tile too (``x1x2`` after it: a cluster pair, as gemm's ``tile=`` names one). Every case is planned,
compiled and run once before the range opens, so the range holds exactly one launch of each;
``SKCONTRACT_PRINT_KERNEL=1`` names the kernel each ``auto`` case runs.
"""
from __future__ import annotations

import argparse
import sys

from skcontract.kernels import gemm as G

SHAPES = {"1024": (1024, 1024, 1024), "2304": (2304, 2304, 4096), "128": (128, 128, 16384),
          "gemv": (1, 8192, 8192), "1000": (1000, 1000, 1000),
          "decode16": (16, 4096, 4096), "decode64": (64, 2112, 7168)}
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
          "tf32": "float32", "3xtf32": "float32"}
PRECISIONS = ("tf32", "3xtf32")
"""The float32 precisions a case may name (B column-major: the K-major operand they read)."""
DEFAULT_CASES = ("fp64-2304:auto,fp64-2304:cublas,fp64-1024:auto,fp64-1024:cublas,"
                 "fp32-gemv:auto,fp32-gemv:cublas,fp32-2304:auto,fp32-2304:cublas")
KERNELS = ("auto", "cublas", "stream_k", "data_parallel", "hybrid", "split_k")


def build(case):
    """A function that launches the case's kernel once on the current stream."""
    import torch

    shape_dtype, kernel, *forced = case.split(":")
    tile = tuple(int(v) for v in forced[0].split("x")) if forced else None
    if kernel not in KERNELS:
        raise ValueError(f"{case}: the kernel is one of {KERNELS}")
    dt, shape = shape_dtype.split("-")
    dtype = DTYPES[dt]
    dims = SHAPES[shape] if shape in SHAPES else tuple(int(v) for v in shape.split("x"))
    lead, (m, n, k) = tuple(dims[:-3]), dims[-3:]  # BxMxNxK: a batch of products
    tdt = getattr(torch, dtype)
    a = torch.randn((*lead, m, k), device="cuda", dtype=torch.float64).to(tdt)
    b = torch.randn((*lead, k, n), device="cuda", dtype=torch.float64).to(tdt)
    c = torch.empty((*lead, m, n), device="cuda", dtype=tdt)
    precision = dt if dt in PRECISIONS else None
    if precision is not None:
        b = b.t().contiguous().t()

    def cublas():
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.matmul(a, b, out=c)

    if kernel == "cublas":
        fn = cublas
    else:
        fn = lambda: G.gemm(a, b, c, mode=kernel, tile=tile, precision=precision)  # noqa: E731
    fn()  # plans and compiles now, outside the profiled range (gemm keeps the plan)
    return fn


def main(argv=None) -> int:
    import cupy

    p = argparse.ArgumentParser()
    p.add_argument("--cases", default=DEFAULT_CASES)
    args = p.parse_args(argv)
    fns = [build(c) for c in args.cases.split(",")]
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.profiler.start()
    for fn in fns:
        fn()
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
