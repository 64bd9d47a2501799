"""Error and device time of float32 products by K: 3xTF32 against exact float32 (GPU).

    python -m tools.x3_sweep [--mn 2048] [--ks 16,32,64,128,256,1024,4096] [--reps 7]

For each K and each kind of data (``normal``: standard normal; ``positive``: uniform on
[0, 1), whose products all add, so the split's dropped small x small parts, which shrink
every product, add too; ``wide``: normal times 2^u, u uniform on [-20, 20]), one JSON line:
``einsum('ij,jk->ik')`` on CuPy arrays at precision "exact" (our FFMA), "3xtf32" and the
default (None), and cuBLAS's exact SGEMM (``cupy.matmul``): each one's largest element
error relative to the largest reference element (``max_*``) and relative Frobenius error
(``fro_*``) against the float64 product, and device time (``us_*``, the benchmarks' CUDA-
graph replay). The default precision's K threshold
(:data:`skcontract.kernels.resolve.X3_DEFAULT_MIN_K`) is read off these lines: the K from
which 3xTF32's errors are no larger than exact float32's on every kind of data.
"""
from __future__ import annotations

import argparse
import json

KINDS = ("normal", "positive", "wide")
WIDE_EXPONENT = 20


def _operand(cupy, rng, shape, kind):
    if kind == "positive":
        return rng.random(shape, dtype=cupy.float32)
    x = rng.standard_normal(shape, dtype=cupy.float32)
    if kind == "wide":
        x *= cupy.exp2(rng.uniform(-WIDE_EXPONENT, WIDE_EXPONENT, shape)).astype(cupy.float32)
    return x


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.x3_sweep")
    p.add_argument("--mn", type=int, default=2048)
    p.add_argument("--ks", default="16,32,64,128,256,1024,4096")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args(argv)
    import cupy

    import skcontract
    from skcontract.bench.timing import calls_for, device_time_us

    stream = cupy.cuda.Stream(non_blocking=True)
    rng = cupy.random.default_rng(0)
    mn = args.mn
    for k in (int(v) for v in args.ks.split(",")):
        for kind in args.kinds.split(","):
            a, b = _operand(cupy, rng, (mn, k), kind), _operand(cupy, rng, (k, mn), kind)
            ref = cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64))
            scale, norm = float(cupy.abs(ref).max()), float(cupy.linalg.norm(ref))
            calls = calls_for(2.0 * mn * mn * k)
            row = {"m": mn, "n": mn, "k": k, "data": kind}
            cases = {
                "exact": lambda: skcontract.einsum("ij,jk->ik", a, b, precision="exact"),
                "x3": lambda: skcontract.einsum("ij,jk->ik", a, b, precision="3xtf32"),
                "default": lambda: skcontract.einsum("ij,jk->ik", a, b),
                "cublas": lambda: cupy.matmul(a, b)}
            for name, fn in cases.items():
                with stream:
                    out = fn().astype(cupy.float64)
                    stream.synchronize()
                    row[f"max_{name}"] = float(cupy.abs(out - ref).max()) / scale
                    row[f"fro_{name}"] = float(cupy.linalg.norm(out - ref)) / norm
                    row[f"us_{name}"] = round(device_time_us(fn, stream, calls, args.reps), 2)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
