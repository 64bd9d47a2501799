"""Where the host time of one warm einsum call goes, on the GPU.

``python -m tools.profile_call [--expr ij,jk->ik] [--shapes 64x64,64x64] [--dtype float32]
[--calls 2000] [--top 25]``

Times ``skcontract.einsum`` and a ``contract_expression`` per call (plans cached), then
profiles the expression's calls with cProfile and prints the functions with the most own
time. No synchronisation inside the timed loop (a call is its host time).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import cupy

import skcontract


def _per_call_us(fn, calls: int) -> float:
    fn()
    cupy.cuda.get_current_stream().synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expr", default="ij,jk->ik")
    ap.add_argument("--shapes", default="64x64,64x64")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    rs = cupy.random.RandomState(0)
    ops = [rs.standard_normal(s, dtype=cupy.float32).astype(args.dtype) for s in shapes]
    expr = skcontract.contract_expression(args.expr, *shapes, dtype=args.dtype)
    print(f"{args.expr} {args.shapes} {args.dtype}: einsum "
          f"{_per_call_us(lambda: skcontract.einsum(args.expr, *ops), args.calls):.1f} us, "
          f"expression {_per_call_us(lambda: expr(*ops), args.calls):.1f} us, "
          f"cupy.empty {_per_call_us(lambda: cupy.empty(shapes[0], args.dtype), args.calls):.1f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        expr(*ops)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        skcontract.einsum(args.expr, *ops)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
