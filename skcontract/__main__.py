"""`python -m skcontract demo | explain | explain-conv2d | bench`.

User mistakes print one line and exit with status 2, as argparse's own do; every
subcommand's ``--help`` works without a GPU.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from ._version import __version__
from . import demo as _demo
from .bench.complex import main as bench_complex
from .bench.conv2d import main as bench_conv2d
from .bench.einsum import main as bench_einsum
from .bench.gemm import main as bench_gemm
from .bench.networks import main as bench_networks
from .bench.networks_run import main as bench_networks_run
from .bench.overhead import main as bench_overhead
from .bench.shapes import main as bench_shapes
from .bench.tf32_int8 import main as bench_tf32_int8
from .explain import explain, explain_conv2d
from .dtypes import EXACT
from .kernels.catalogue import PRECISIONS
from .schedule.device import DEVICE_NAMES

HELP = ("-h", "--help")
#: benchmarks that time the GPU, by name
GPU_BENCHES = {"gemm": bench_gemm, "einsum": bench_einsum, "conv2d": bench_conv2d,
               "tf32_int8": bench_tf32_int8, "shapes": bench_shapes, "complex": bench_complex,
               "networks-run": bench_networks_run}


def _shape(text: str) -> tuple[int, ...]:
    """'128x64' -> (128, 64); 'scalar' -> ()."""
    if text == "scalar":
        return ()
    try:
        return tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r} is not like 128x64 (or 'scalar')") \
            from None


def _ints(text: str) -> int | tuple[int, ...]:
    """'2' -> 2; '2x1' -> (2, 1): a conv2d stride, padding or dilation."""
    try:
        values = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int or like 2x1") from None
    return values[0] if len(values) == 1 else values


def _padding(text: str) -> int | str | tuple[int, ...]:
    """A conv2d padding: 'valid', 'same', an int or like 1x2."""
    return text if text in ("valid", "same") else _ints(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m skcontract",
                                     description="skcontract command line")
    parser.add_argument("--version", action="version", version=f"skcontract {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a few einsums, print their plans, check them")
    demo.add_argument("--backend", choices=["numpy", "cupy"], default=None,
                      help="force a backend (default: the GPU when one is present)")
    ex = sub.add_parser("explain", help="print the plan of an einsum over shapes")
    ex.add_argument("subscripts", help="einsum subscripts, such as 'ij,jk->ik' (labels: "
                    "ASCII letters or unicode characters from U+00C0 on, such as 'αβ,βγ->αγ')")
    ex.add_argument("shapes", nargs="+", type=_shape, help="operand shapes such as 128x64")
    ex.add_argument("--dtype", default="float64", help="operand dtype (default float64)")
    ex.add_argument("--device", default="h200", choices=DEVICE_NAMES,
                    help="the GPU to plan for (default: the H200 preset)")
    ex.add_argument("--optimize", default="adaptive",
                    help="path optimiser (einsum's optimize=: adaptive, greedy, auto, ...)")
    ex.add_argument("--precision", default=None, choices=(EXACT,) + PRECISIONS,
                    help="how float32 steps run (default: at float32 accuracy, 3xtf32 "
                         "where offered and the sum is long enough, else exact; complex64 "
                         "steps likewise, whatever the sum); other dtypes run exactly "
                         "whatever it says")
    ex.add_argument("--draw", default=None, help="write a picture of the schedules")
    exc = sub.add_parser("explain-conv2d", help="print the GPU plan of a conv2d over shapes")
    exc.add_argument("input", type=_shape, help="input shape NxCxHxW (or CxHxW), such as "
                                                "32x64x56x56")
    exc.add_argument("weight", type=_shape, help="weight shape KxCxRxS (C: channels a group), "
                                                 "such as 64x64x3x3")
    exc.add_argument("--bias", action="store_true", help="a bias is added")
    exc.add_argument("--stride", type=_ints, default=1, help="an int or like 2x1 (default 1)")
    exc.add_argument("--padding", type=_padding, default=0,
                     help="an int, like 1x2, 'valid' or 'same' (default 0)")
    exc.add_argument("--dilation", type=_ints, default=1, help="an int or like 2x1 (default 1)")
    exc.add_argument("--groups", type=int, default=1, help="channel groups (default 1)")
    exc.add_argument("--dtype", default="float16",
                     help="float16 (default), bfloat16, float32 or float64")
    exc.add_argument("--device", default="h200", choices=DEVICE_NAMES + ("cpu",),
                     help="the GPU to plan for (default: the H200 preset), or cpu: what "
                          "conv2d runs on NumPy arrays on this machine")
    exc.add_argument("--channels-last", action="store_true",
                     help="channels-last input and weight (default: contiguous NCHW)")
    bench = sub.add_parser("bench", help="run a benchmark (overhead, networks and shapes --cpu "
                           "run without a GPU)")
    bench.add_argument("what", choices=[*GPU_BENCHES, "overhead", "networks"],
                       help="which benchmark: the GEMM, einsum, conv2d or tf32 / int8 corpus, "
                            "the shape classes (shapes) or complex products (complex) "
                            "against the peers, the per-call overhead, large networks "
                            "planned under memory limits (networks) or those plans run on "
                            "the GPU against cotengra (networks-run)")
    bench.add_argument("rest", nargs=argparse.REMAINDER,
                       help="the benchmark's own arguments (see bench gemm --help)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.backend == "cupy" and not _demo.gpu_available():
            parser.exit(2, f"{parser.prog} demo: error: --backend cupy needs CuPy and an "
                           "NVIDIA GPU (pip install 'skcontract[cuda13]')\n")
        return _demo.run_demo(args.backend)
    if args.command == "explain":
        try:
            dtype = np.dtype(args.dtype)
            print(explain(args.subscripts, *args.shapes, shapes=True, draw=args.draw,
                          device=args.device, optimize=args.optimize, dtype=dtype,
                          precision=args.precision))
            if args.precision is not None and dtype not in (np.float32, np.complex64):
                print(f"{parser.prog} explain: note: --precision {args.precision} is for "
                      f"float32 steps; {dtype} steps run exactly, on the GPU and the CPU",
                      file=sys.stderr)
        except (ValueError, TypeError, KeyError, OSError, ImportError) as e:
            message = e.args[0] if isinstance(e, KeyError) and e.args else e
            parser.exit(2, f"{parser.prog} explain: error: {message}\n")
        return 0
    if args.command == "explain-conv2d":
        try:
            print(explain_conv2d(args.input, args.weight, args.bias, args.stride, args.padding,
                                 args.dilation, args.groups, args.dtype, args.device,
                                 channels_last=args.channels_last))
        except (ValueError, TypeError, ImportError, RuntimeError) as e:
            parser.exit(2, f"{parser.prog} explain-conv2d: error: {e}\n")
        return 0
    if args.what in GPU_BENCHES:
        cpu_only = args.what == "shapes" and "--cpu" in args.rest
        if not (cpu_only or _demo.gpu_available() or set(HELP) & set(args.rest)):
            parser.exit(2, f"{parser.prog} bench {args.what}: error: needs CuPy and an NVIDIA "
                           "GPU (pip install 'skcontract[cuda13]')\n")
        return GPU_BENCHES[args.what](args.rest)
    if args.what == "networks":
        return bench_networks(args.rest)
    return bench_overhead(args.rest)


if __name__ == "__main__":
    sys.exit(main())
