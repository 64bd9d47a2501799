"""Device time of the Dot kernel's memory-bound products under several schedules, against
the copy bandwidth measured in the same run.

``python -m tools.time_dot [--reps 7] [--plain]``

For each case (a product in the Dot kernel's forms), every schedule in ``SCHEDULES``
(resolve_dot's options: mode, reduction, grid) is timed by CUDA-graph replay; one line per
(case, schedule) with us and GB/s (operand bytes read once over the time), plus the
device-to-device copy of the same bytes (read + write) as the bandwidth reference.
"""
from __future__ import annotations

import argparse

import cupy

from skcontract.bench.timing import device_time_us
from skcontract.kernels.dot import matvec
from skcontract.kernels.forms import form_of
from skcontract.kernels import launch
from skcontract.kernels.gemm import device_info
from skcontract.kernels.resolve import resolve_dot

CASES = {  # name -> (x shape, y shape, dtype, x order)
    "i,i-> 16M fp32": ((1, 1 << 24), (1 << 24, 1), "float32", "C"),
    "i,i-> 16M fp16": ((1, 1 << 24), (1 << 24, 1), "float16", "C"),
    "ij,ij->i 8192^2 fp16": ((8192, 1, 8192), (8192, 8192, 1), "float16", "C"),
    "j,jk->k 8192^2 fp32": ((1, 8192), (8192, 8192), "float32", "C"),
    "ji,j->i 8192^2 fp16": ((8192, 8192), (8192, 1), "float16", "F"),
}
SCHEDULES = [
    {},
    {"mode": "stream_k", "reduction": "arrival", "grid": 264},
    {"mode": "stream_k", "reduction": "arrival", "grid": 528},
    {"mode": "stream_k", "reduction": "deterministic"},
    {"mode": "split_k", "reduction": "arrival"},
    {"mode": "data_parallel"},
]
CALLS = 20


def _operands(xs, ys, dtype, order):
    rs = cupy.random.RandomState(0)
    x = rs.standard_normal(xs, dtype=cupy.float32).astype(dtype)
    if order == "F":
        x = cupy.asfortranarray(x)
    return x, rs.standard_normal(ys, dtype=cupy.float32).astype(dtype)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--plain", action="store_true",
                    help="launch without programmatic stream serialization")
    args = ap.parse_args(argv)
    launch.PROGRAMMATIC_LAUNCH = not args.plain
    stream = cupy.cuda.Stream(non_blocking=True)
    for name, (xs, ys, dtype, order) in CASES.items():
        x, y = _operands(xs, ys, dtype, order)
        nbytes = x.nbytes + y.nbytes
        src = cupy.empty(nbytes // 4, cupy.float32)
        dst = cupy.empty_like(src)
        copy_us = device_time_us(lambda: cupy.copyto(dst, src), stream, CALLS, args.reps)
        print(f"{name}: copy of {nbytes / 1e6:.0f} MB {copy_us:.1f} us "
              f"({2 * nbytes / copy_us / 1e3:.0f} GB/s read + write)", flush=True)
        form, _ = form_of(x, y)
        for opts in SCHEDULES:
            try:
                r = resolve_dot(form, dtype, device_info(0), **opts)
                us = device_time_us(lambda: matvec(x, y, r), stream, CALLS, args.reps)
                s = r.schedule
                print(f"  {str(s.mode):13} {str(s.reduction):13} grid={s.grid:5} "
                      f"tile={s.tile} {us:8.1f} us {nbytes / us / 1e3:6.0f} GB/s  {opts}",
                      flush=True)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"  {opts}: {type(e).__name__}: {e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
