"""`python -m skcontract demo | explain | bench`."""
from __future__ import annotations

import argparse
import sys

from .bench.gemm import main as bench_gemm
from .bench.overhead import main as bench_overhead
from . import demo as _demo
from .explain import explain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skcontract",
                                     description="skcontract command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a few einsums, print their plans, check them")
    demo.add_argument("--backend", choices=["numpy", "cupy"], default=None,
                      help="force a backend (default: the GPU when one is present)")
    explain_cmd = sub.add_parser("explain", help="print the plan of an einsum over shapes")
    explain_cmd.add_argument("subscripts")
    explain_cmd.add_argument("shapes", nargs="+", help="operand shapes such as 128x64")
    explain_cmd.add_argument("--draw", default=None, help="write a picture of the schedules")
    bench = sub.add_parser("bench", help="run a benchmark on the GPU")
    bench.add_argument("what", choices=["gemm", "overhead"])
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if args.command == "demo":
        return _demo.run_demo(args.backend)
    if args.command == "explain":
        shapes = [tuple(int(d) for d in s.lower().split("x")) if s != "scalar" else ()
                  for s in args.shapes]
        print(explain(args.subscripts, *shapes, shapes=True, draw=args.draw))
        return 0
    if args.what == "gemm":
        if not _demo.gpu_available():
            print("bench gemm needs CuPy and an NVIDIA GPU (pip install -e '.[cuda13]')",
                  file=sys.stderr)
            return 2
        return bench_gemm(args.rest)
    return bench_overhead(args.rest)


if __name__ == "__main__":
    sys.exit(main())
