"""Device time of ``conv2d`` on a few layers under forced schedules, against cuDNN (GPU).

    python -m tools.time_conv --layers 1x512x7x7x512x3x3x1x1,32x64x56x56x64x3x3x1x1 \\
        --dtypes float16 --variants auto,stream_k:64x128x64,data_parallel:128x64x64

A layer is N x C x H x W x K x R x S x stride x padding (as the corpus' conv2d entries), then
optionally x groups; a
variant is ``mode`` or ``mode:BMxBNxBK[xCTAs]`` (the entry to force). Operands are torch tensors,
channels-last unless ``--nchw``. Prints one JSON line per (layer, dtype, variant): the
CUDA-graph replay time in microseconds (the median of ``--reps``), cuDNN's (TF32 off, as the
benchmark's) on the same operands by the same method, the ratio, and the launch that ran
(entry, mode, grid, whether its epilogue stored by TMA).
``--reduction`` and ``--grids`` (a comma list, each variant timed at each) force the fixup
and the grid.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys

from skcontract.bench.timing import calls_for, torch_graph_us
from skcontract.kernels.launch import record_launches
from skcontract.ops.conv2d import conv2d


def _variant(text: str):
    mode, _, tile = text.partition(":")
    return mode, (tuple(int(v) for v in tile.split("x")) if tile else None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.time_conv")
    p.add_argument("--layers", required=True, help="comma list of NxCxHxWxKxRxSxstridexpad")
    p.add_argument("--dtypes", default="float16")
    p.add_argument("--variants", default="auto", help="comma list of mode[:BMxBNxBK[xCTAs]]")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--nchw", action="store_true")
    p.add_argument("--reduction", default="deterministic", help="the fixup of split tiles")
    p.add_argument("--grids", default=None, help="comma list of grids to force")
    args = p.parse_args(argv)
    grids = [None] if args.grids is None else [int(v) for v in args.grids.split(",")]
    import torch  # the peer, and the operands' maker (CuPy has no bfloat16)
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = False  # exact fp32, as ours and the benchmark's peer
    torch.backends.cudnn.benchmark = True  # as the shape-class benchmark's peer
    for text in args.layers.split(","):
        n, c, h, w, k, r, s, stride, pad, *grouped = (int(v) for v in text.split("x"))
        groups = grouped[0] if grouped else 1
        for dtype in args.dtypes.split(","):
            gen = torch.Generator(device="cuda").manual_seed(0)
            dt = getattr(torch, dtype)
            x = torch.randn((n, c, h, w), device="cuda", generator=gen).to(dt)
            wt = torch.randn((k, c // groups, r, s), device="cuda", generator=gen).to(dt)
            if not args.nchw:
                x = x.to(memory_format=torch.channels_last)
                wt = wt.to(memory_format=torch.channels_last)
            calls = calls_for(2.0 * n * c * h * w * k * r * s / stride ** 2 / groups)
            cudnn = torch_graph_us(lambda: F.conv2d(x, wt, None, stride, pad, 1, groups), calls,
                                   args.reps)
            for variant, grid in itertools.product(args.variants.split(","), grids):
                mode, tile = _variant(variant)
                run = lambda: conv2d(x, wt, None, stride, pad, 1, groups, mode=mode,  # noqa: E731
                                     tile=tile, reduction=args.reduction, grid=grid)
                try:
                    with record_launches() as launches:
                        run()
                    us = torch_graph_us(run, calls, args.reps)
                except (ValueError, RuntimeError) as e:
                    print(json.dumps({"layer": text, "dtype": dtype, "variant": variant,
                                      "grid": grid, "error": str(e)[:200]}), flush=True)
                    continue
                got = launches[0]
                print(json.dumps({"layer": text, "dtype": dtype, "variant": variant, "us": us,
                                  "cudnn_us": cudnn, "vs_cudnn": cudnn / us,
                                  "kernel": got.kernel, "mode": got.mode, "grid": got.grid,
                                  "tile": "x".join(map(str, got.tile)),
                                  "tma_store": got.tma_store}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
