"""Which kernels cuDNN runs for the corpus' conv2d layers (GPU): the peer's algorithm, named.

    python -m tools.cudnn_kernels [--dtypes float32] [--nchw]

Runs ``torch.nn.functional.conv2d`` on each corpus layer (``cudnn.benchmark`` on, TF32 off,
as ``python -m skcontract bench conv2d``) under ``torch.profiler`` and prints one JSON line
per (layer, dtype): the CUDA kernels of one warm call and their device times. The names say
the algorithm (implicit GEMM, Winograd, FFT, and the layout transposes around them).
"""
from __future__ import annotations

import argparse
import json
import sys

from skcontract.bench.conv2d import load_layers


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.cudnn_kernels")
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--nchw", action="store_true", help="NCHW (default: channels-last)")
    args = p.parse_args(argv)
    import torch  # the peer
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    for layer in load_layers():
        n, c, h, w, k, r, s, stride, pad = layer
        for dtype in args.dtypes.split(","):
            dt = getattr(torch, dtype)
            x = torch.randn((n, c, h, w), device="cuda").to(dt)
            wt = torch.randn((k, c, r, s), device="cuda").to(dt)
            if not args.nchw:
                x = x.to(memory_format=torch.channels_last)
                wt = wt.to(memory_format=torch.channels_last)
            for _ in range(3):  # benchmark mode picks its algorithm on the first calls
                F.conv2d(x, wt, None, stride, pad)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                F.conv2d(x, wt, None, stride, pad)
                torch.cuda.synchronize()
            kernels = [(e.key, round(e.device_time_total, 1)) for e in prof.key_averages()
                       if e.device_time_total > 0]
            print(json.dumps({"layer": "x".join(map(str, layer)), "dtype": dtype,
                              "layout": "NCHW" if args.nchw else "NHWC",
                              "kernels": kernels}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
