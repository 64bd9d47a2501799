"""Device time of depthwise convolutions on the direct kernels, against cuDNN (GPU).

    python -m tools.time_depthwise --layers 64x144x56x56x3x1x1,32x96x56x56x7x1x3 \\
        --dtypes float16,bfloat16 --variants auto,vec

A layer is N x C x H x W x R x stride x padding: a depthwise convolution (groups = C) of a
square R x R filter, channels-last. A variant is ``auto`` (conv2d as it plans the layer),
``vec`` (the vector kernel for any filter, forced where the square or the tensor-core kernel
would run), ``square`` (the square kernel forced; the layer is skipped where it has no
instantiation of its filter), ``wide`` (the square kernel on packs of 8 16-bit channels,
where it has them) or ``mma`` (the tensor-core kernel forced; skipped where it does not take
the layer). Prints
one JSON line per (layer, dtype, variant): the CUDA-graph replay time in microseconds (the
median of ``--reps``), cuDNN's (``cudnn.benchmark`` on) on the same operands by the same
method, the ratio, the GB/s of moving the input, the filters and the output once, the
kernel that ran and the error against float64.
"""
from __future__ import annotations

import argparse
import json
import sys

from skcontract.bench.timing import calls_per_replay, torch_graph_us
from skcontract.kernels import torch_cuda
from skcontract.kernels import depthwise_mma
from skcontract.kernels.depthwise import (WIDE_FILTERS, DepthwiseLaunch, fixed_filter,
                                          run_depthwise)
from skcontract.kernels.launch import record_launches, sm_count
from skcontract.kernels.operands import describe
from skcontract.ops.conv2d import conv2d, conv_geometry

DEFAULT_LAYERS = ("64x144x56x56x3x1x1,64x240x28x28x5x1x2,32x96x56x56x7x1x3,64x96x112x112x3x2x1,"
                  "64x144x56x56x5x2x2,32x384x14x14x7x1x3,64x960x7x7x3x1x1,16x256x28x28x13x1x6")
"""MobileNetV2's 3x3 (stride 1 and 2, and a late 7x7-pixel block), EfficientNet-B0's 5x5
(stride 1 and 2), ConvNeXt-T's 7x7 (stages 1 and 3), RepLKNet's 13x13."""


def _forced(x, w, g, dtype, square=False, mma=False, wide=False):
    """A call of the vector kernel for any filter (``square``: the square kernel, on wide
    packs where ``wide``; ``mma``: the tensor-core kernel) on channels-last ``x``: it
    launches the kernel and returns the output it wrote."""
    import torch  # the operands' maker

    launch = DepthwiseLaunch(g, dtype, True, True, square, mma, wide)
    out = torch.empty((g.n, g.p, g.q, g.k), device="cuda", dtype=x.dtype).permute(0, 3, 1, 2)
    X, Wt, O = describe(x), describe(w), describe(out)
    dev = x.device.index or 0
    sms = sm_count(dev)

    def run():
        run_depthwise(launch, X, Wt, None, O, dev, torch_cuda.current_stream(dev), sms)
        return out
    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.time_depthwise")
    p.add_argument("--layers", default=DEFAULT_LAYERS, help="comma list of NxCxHxWxRxstridexpad")
    p.add_argument("--dtypes", default="float16")
    p.add_argument("--variants", default="auto,vec")
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args(argv)
    import torch  # the peer, and the operands' maker
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    for text in args.layers.split(","):
        n, c, h, wd, r, stride, pad = (int(v) for v in text.split("x"))
        for dtype in args.dtypes.split(","):
            gen = torch.Generator(device="cuda").manual_seed(0)
            dt = getattr(torch, dtype)
            x = torch.randn((n, c, h, wd), device="cuda", generator=gen).to(dt)
            x = x.to(memory_format=torch.channels_last)
            w = torch.randn((c, 1, r, r), device="cuda", generator=gen).to(dt)
            g = conv_geometry(tuple(x.shape), tuple(w.shape), stride, pad, 1, c)
            moved = (x.numel() + w.numel() + n * c * g.p * g.q) * x.element_size()
            want = F.conv2d(x.double(), w.double(), None, stride, pad, 1, c)
            calls = calls_per_replay(20.0)
            cudnn = torch_graph_us(lambda: F.conv2d(x, w, None, stride, pad, 1, c), calls,
                                   args.reps)
            for variant in args.variants.split(","):
                if variant == "auto":
                    run = lambda: conv2d(x, w, None, stride, pad, 1, c)  # noqa: E731
                elif variant == "vec":
                    run = _forced(x, w, g, dtype)
                elif variant == "square":
                    if fixed_filter(g) is None:
                        continue
                    run = _forced(x, w, g, dtype, square=True)
                elif variant == "wide":
                    if fixed_filter(g) not in WIDE_FILTERS or dtype not in ("float16",
                                                                            "bfloat16"):
                        continue
                    run = _forced(x, w, g, dtype, square=True, wide=True)
                elif variant == "mma":
                    if not depthwise_mma.takes(g, dtype):
                        continue
                    run = _forced(x, w, g, dtype, mma=True)
                else:
                    raise SystemExit(f"--variants: {variant!r} is not auto, vec, square, wide "
                                     "or mma")
                with record_launches() as launches:
                    got = run()
                torch.cuda.synchronize()
                us = torch_graph_us(run, calls, args.reps)
                row = {"layer": text, "dtype": dtype, "variant": variant, "us": us,
                       "cudnn_us": cudnn, "vs_cudnn": cudnn / us, "gbps": moved / us / 1e3,
                       "kernel": launches[0].kernel if launches else None}
                row["rel_err"] = float((got.double() - want).norm() / want.norm())
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
