"""conv2d against cuDNN (through torch) on the corpus' layers, in one run.

    python -m skcontract bench conv2d [--out DIR] [--modes auto,data_parallel]

Each corpus layer runs in float16 and bfloat16 channels-last (input and filters in torch's
``channels_last``) and in float32 NCHW (cuDNN with TF32 off: both sides exact fp32), on
CUDA torch tensors. Device time: torch's CUDA-graph replay of back-to-back calls, the same
method for both (median of ``--reps``); call time: host wall time per call. cuDNN runs with
``cudnn.benchmark`` on (its best algorithm for the shape). Writes ``conv2d-h200.json`` (rows:
shape, dtype, layout, mode, us, cudnn_us, ...), ``conv2d-h200.md`` and a plot.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from ..kernels.launch import record_launches
from ..ops.conv2d import conv2d, conv_geometry
from .timing import (add_corpus_arguments, call_time_us, calls_for, device_name, geomean,
                     run_commit, torch_graph_us)

DEFAULT_CORPUS = Path(__file__).with_name("corpus.json")
CONFIGS = (("float16", "NHWC"), ("bfloat16", "NHWC"), ("float32", "NCHW"))
"""(dtype, layout) pairs measured for every layer."""
LATE_LAYER = (1, 512, 7, 7, 512, 3, 3, 1, 1)
"""The batch-1 7x7x512 layer the issue's Stream-K target names."""


def load_layers(path=DEFAULT_CORPUS) -> list[tuple]:
    """The corpus' conv2d layers: (N, C, H, W, K, R, S, stride, padding)."""
    return [tuple(s) for s in json.loads(Path(path).read_text())["conv2d"]["shapes"]]


def flops(layer) -> float:
    n, c, h, w, k, r, s, stride, pad = layer
    g = conv_geometry((n, c, h, w), (k, c, r, s), stride=stride, padding=pad)
    return 2.0 * g.n * g.p * g.q * g.k * g.c * g.r * g.s


def measure(layer, dtype: str, layout: str, modes, reps: int, log) -> list[dict]:
    """One layer in one dtype and layout: cuDNN, then ours in each mode."""
    import torch  # the benchmark's peer; not a dependency of the library
    import torch.nn.functional as F

    n, c, h, w, k, r, s, stride, pad = layer
    tdt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((n, c, h, w), device="cuda", generator=gen).to(tdt)
    wt = (torch.randn((k, c, r, s), device="cuda", generator=gen) / (c * r * s) ** 0.5).to(tdt)
    if layout == "NHWC":
        x = x.to(memory_format=torch.channels_last)
        wt = wt.to(memory_format=torch.channels_last)
    fl = flops(layer)
    calls = calls_for(fl)
    sync = torch.cuda.synchronize
    ref = F.conv2d(x.double(), wt.double(), None, stride, pad)
    peer = lambda: F.conv2d(x, wt, None, stride, pad)  # noqa: E731
    cudnn_us = torch_graph_us(peer, calls, reps)
    cudnn_call = call_time_us(peer, sync)
    rows = []
    for mode in modes:
        ours = lambda: conv2d(x, wt, None, stride, pad, mode=mode)  # noqa: E731
        with record_launches() as launches:
            got = ours()
        err = float((got.double() - ref).abs().max() / ref.abs().max().clamp(min=1e-30))
        us = torch_graph_us(ours, calls, reps)
        row = dict(shape=list(layer), dtype=dtype, layout=layout, mode=mode, us=us,
                   cudnn_us=cudnn_us, call_us=call_time_us(ours, sync), cudnn_call_us=cudnn_call,
                   tflops=fl / us * 1e-6, cudnn_tflops=fl / cudnn_us * 1e-6, rel_err=err,
                   kernel=launches[0].kernel if launches else None,
                   schedule=f"{launches[0].mode} grid={launches[0].grid} tile="
                            f"{'x'.join(map(str, launches[0].tile))}" if launches else None)
        log(f"{'x'.join(map(str, layer))} {dtype} {layout} {mode}: {us:.1f} us (cuDNN "
            f"{cudnn_us:.1f}, x{cudnn_us / us:.2f}), err {err:.1e}, {row['schedule']}")
        rows.append(row)
    return rows


def summary_lines(rows) -> list[str]:
    """Geomean speed-up over cuDNN per (dtype, layout, mode), and the late layer's."""
    lines = []
    keys = dict.fromkeys((r["dtype"], r["layout"], r["mode"]) for r in rows)
    for dt, lay, mode in keys:
        sel = [r for r in rows if (r["dtype"], r["layout"], r["mode"]) == (dt, lay, mode)]
        gm = geomean([r["cudnn_us"] / r["us"] for r in sel])
        worst = min(sel, key=lambda r: r["cudnn_us"] / r["us"])
        late = [r for r in sel if tuple(r["shape"]) == LATE_LAYER]
        late_s = f"; batch-1 7x7x512 x{late[0]['cudnn_us'] / late[0]['us']:.2f}" if late else ""
        lines.append(f"- {dt} {lay} {mode}: geomean x{gm:.2f} cuDNN over {len(sel)} layers "
                     f"(worst x{worst['cudnn_us'] / worst['us']:.2f}, "
                     f"{'x'.join(map(str, worst['shape']))}){late_s}")
    return lines


def render_markdown(doc) -> str:
    lines = [f"# conv2d on {doc['device']} ({doc['date']}, commit {doc['commit']})", "",
             "Device time per call (us, CUDA-graph replay through torch, median), the same "
             "method for ours and cuDNN (torch.nn.functional.conv2d, cudnn.benchmark on, TF32 "
             "off). Speed-up = cuDNN / ours (>1: we are faster). Layer: N x C x H x W x K x R x "
             "S x stride x padding.", "", *summary_lines(doc["rows"]), "",
             "| layer | dtype | layout | mode | ours us | cuDNN us | speed-up | ours TFLOP/s | "
             "cuDNN TFLOP/s | call us | cuDNN call us | rel err | schedule |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| --- |"]
    for r in doc["rows"]:
        lines.append(
            f"| {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['layout']} | {r['mode']} "
            f"| {r['us']:.1f} | {r['cudnn_us']:.1f} | {r['cudnn_us'] / r['us']:.2f} | "
            f"{r['tflops']:.0f} | {r['cudnn_tflops']:.0f} | {r['call_us']:.1f} | "
            f"{r['cudnn_call_us']:.1f} | {r['rel_err']:.1e} | {r['schedule']} |")
    return "\n".join(lines) + "\n"


def write_plot(path, rows) -> bool:
    """Speed-up over cuDNN per layer, one bar per (dtype, mode)."""
    try:
        import matplotlib  # optional dependency (the plot extra)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional dependency (the plot extra)
    except ImportError:
        return False
    layers = list(dict.fromkeys("x".join(map(str, r["shape"])) for r in rows))
    series = list(dict.fromkeys((r["dtype"], r["mode"]) for r in rows))
    fig, ax = plt.subplots(figsize=(max(8, len(layers) * 1.4), 4.5))
    width = 0.8 / max(len(series), 1)
    for i, (dt, mode) in enumerate(series):
        by = {"x".join(map(str, r["shape"])): r["cudnn_us"] / r["us"] for r in rows
              if (r["dtype"], r["mode"]) == (dt, mode)}
        ax.bar([x + (i - (len(series) - 1) / 2) * width for x in range(len(layers))],
               [by.get(lay, float("nan")) for lay in layers], width=width,
               label=f"{dt} {mode}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("cuDNN time / ours")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels(layers, rotation=30, ha="right", fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(out, name, rows, plot=True) -> dict:
    doc = {"date": _dt.date.today().isoformat(), "commit": run_commit(),
           "device": device_name(), "rows": rows}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
    (out / f"{name}.md").write_text(render_markdown(doc))
    if plot:
        write_plot(out / f"{name}.png", rows)
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract bench conv2d",
                                description=__doc__.splitlines()[0])
    add_corpus_arguments(p, DEFAULT_CORPUS, "conv2d-h200")
    p.add_argument("--modes", default="auto,data_parallel",
                   help="comma-separated schedule modes to time beside cuDNN (default: "
                        "auto,data_parallel)")
    args = p.parse_args(argv)
    import torch  # the benchmark's peer; not a dependency of the library

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    rows = []
    for layer in load_layers(args.corpus):
        for dtype, layout in CONFIGS:
            rows += measure(layer, dtype, layout, args.modes.split(","), args.reps, log)
            write_all(args.out, args.name, rows, plot=False)  # partial results survive
    doc = write_all(args.out, args.name, rows)
    print("\n".join(summary_lines(doc["rows"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
