"""tf32, 3xTF32 and int8 GEMM against cuBLAS in one run (device time by CUDA-graph replay).

    python -m skcontract bench tf32_int8 [--out DIR]

tf32: ``gemm(..., precision="tf32")`` vs torch.matmul with TF32 allowed, B row-major (which
our tf32 wgmma kernels copy to column-major first, inside the timed call) and column-major
(read in place). 3xTF32: ``gemm(..., precision="3xtf32")`` vs torch.matmul in exact float32
(cuBLAS SGEMM: what the precision stands in for), the same two layouts of B (a row-major B
copied where that is cheap, else turned K-major in the kernel's stages), and the
largest element error of ours, cuBLAS's exact float32 and our tf32 against a float64
reference, relative to the largest reference element. int8: ``gemm`` on
int8 operands (int32 out) vs ``torch._int_mm`` (cuBLASLt int8), B column-major on both sides
(torch._int_mm's layout). Writes tf32-int8-h200.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path

from ..kernels.gemm import gemm
from .timing import calls_for, device_time_us, torch_graph_us

SHAPES = [(1024, 1024, 1024), (2176, 1024, 4096), (2304, 2304, 4096), (4096, 4096, 4096),
          (256, 3584, 8192)]
REPS = 7


def _rows():
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library


    torch.backends.cuda.matmul.allow_tf32 = True
    stream = cupy.cuda.Stream(non_blocking=True)
    rs = cupy.random.RandomState(0)
    for m, n, k in SHAPES:
        flops = 2.0 * m * n * k
        calls = calls_for(flops)
        a32 = rs.standard_normal((m, k), dtype=cupy.float32)
        b32 = rs.standard_normal((k, n), dtype=cupy.float32)
        out32 = cupy.empty((m, n), cupy.float32)
        ours = device_time_us(lambda: gemm(a32, b32, out32, precision="tf32"), stream,
                              calls, REPS)
        ta, tb = torch.as_tensor(a32, device="cuda"), torch.as_tensor(b32, device="cuda")
        peer = torch_graph_us(lambda: torch.matmul(ta, tb), calls, REPS)
        yield ("tf32", m, n, k, ours, peer, flops)
        # B column-major (K-major), which tf32 wgmma reads in place: no copy on our side
        b32f = cupy.asfortranarray(b32)
        ours = device_time_us(lambda: gemm(a32, b32f, out32, precision="tf32"), stream,
                              calls, REPS)
        tbf = torch.as_tensor(b32f, device="cuda")
        peer = torch_graph_us(lambda: torch.matmul(ta, tbf), calls, REPS)
        yield ("tf32, B col-major", m, n, k, ours, peer, flops)
        torch.backends.cuda.matmul.allow_tf32 = False  # the exact SGEMM 3xTF32 stands in for
        for name, bx in (("3xtf32", b32), ("3xtf32, B col-major", b32f)):
            ours = device_time_us(lambda: gemm(a32, bx, out32, precision="3xtf32"), stream,
                                  calls, REPS)
            tbx = torch.as_tensor(bx, device="cuda")
            peer = torch_graph_us(lambda: torch.matmul(ta, tbx), calls, REPS)
            yield (name, m, n, k, ours, peer, flops)
        ACCURACY.append((m, n, k) + _errors(a32, b32f, ta, tbf))
        torch.backends.cuda.matmul.allow_tf32 = True
        a8 = rs.randint(-128, 128, (m, k)).astype(cupy.int8)
        b8 = rs.randint(-128, 128, (k, n)).astype(cupy.int8)
        out8 = cupy.empty((m, n), cupy.int32)
        b8 = cupy.asfortranarray(b8)  # cuBLASLt wants B column-major: both sides get it so
        ours = device_time_us(lambda: gemm(a8, b8, out8), stream, calls, REPS)
        ta8 = torch.as_tensor(a8, device="cuda")
        tb8 = torch.as_tensor(b8, device="cuda")
        peer = torch_graph_us(lambda: torch._int_mm(ta8, tb8), calls, REPS)
        yield ("int8", m, n, k, ours, peer, flops)


ACCURACY: list = []
"""(m, n, k, 3xTF32's, exact SGEMM's and tf32's largest error) of each shape, as _rows runs."""


def _errors(a, b, ta, tb) -> tuple[float, float, float]:
    """The largest element error of our 3xTF32, cuBLAS's exact float32 (torch) and our tf32
    products of ``a`` and ``b`` against float64, relative to the largest reference element."""
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer

    ref = cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64))
    scale = float(cupy.abs(ref).max())

    def err(x):
        return float(cupy.abs(x.astype(cupy.float64) - ref).max()) / scale

    torch.backends.cuda.matmul.allow_tf32 = False
    return (err(gemm(a, b, precision="3xtf32")), err(cupy.asarray(torch.matmul(ta, tb))),
            err(gemm(a, b, precision="tf32")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract.bench.tf32_int8")
    p.add_argument("--out", default="docs/benchmarks",
                   help="folder the JSON, Markdown and plot are written to (default: "
                        "docs/benchmarks)")
    args = p.parse_args(argv)
    lines = [f"# tf32, 3xTF32 and int8 GEMM on the H200 ({datetime.date.today()}, commit "
             f"{os.environ.get('SKCONTRACT_COMMIT', 'unknown')})", "",
             "Device time (us, CUDA-graph replay, median of 7); ratio = peer / ours "
             "(>1: we are faster). Peer: torch.matmul with TF32 allowed (tf32), in exact "
             "float32 (3xtf32: cuBLAS SGEMM); torch._int_mm (int8).", "",
             "| dtype | m | n | k | ours us | peer us | ratio | ours TFLOP/s (TOP/s) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for dt, m, n, k, ours, peer, flops in _rows():
        lines.append(f"| {dt} | {m} | {n} | {k} | {ours:.1f} | {peer:.1f} | {peer / ours:.2f} "
                     f"| {flops / ours / 1e6:.0f} |")
        print(lines[-1], flush=True)
    lines += ["", "Largest element error against float64, relative to the largest reference "
              "element (B column-major):", "",
              "| m | n | k | ours 3xtf32 | cuBLAS exact fp32 | ours / cuBLAS | ours tf32 |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for m, n, k, x3, sgemm, tf32 in ACCURACY:
        lines.append(f"| {m} | {n} | {k} | {x3:.2e} | {sgemm:.2e} | {x3 / sgemm:.2f} "
                     f"| {tf32:.2e} |")
        print(lines[-1], flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "tf32-int8-h200.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
