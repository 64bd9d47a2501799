"""Einsum benchmark: skcontract against torch.einsum, cupy.einsum and opt_einsum with CuPy.

``python -m skcontract bench einsum [--corpus PATH] [--out DIR] [--name NAME] [--reps N]
[--dtypes float32,float16]``

Every einsum expression of the corpus, in each dtype, on the same random CuPy arrays (torch
sees them through DLPack, without a copy). Per row:

- ``call_us``: host wall time per ``skcontract.einsum`` call (plan cached after the first);
  ``expr_call_us``: per call of a ``skcontract.contract_expression`` planned once;
- ``us``: device time per call of that expression (CUDA-graph replay; see ``timing``);
- ``torch_call_us`` / ``torch_us``: the same two measures of ``torch.einsum``;
- ``cupy_call_us``: ``cupy.einsum``; ``oe_call_us``: ``opt_einsum.contract(...,
  backend='cupy')``, both per call as a user calls them;
- ``gbps``: the operands read once and the result written once over ``us``, the floor any
  implementation pays; ``rel_err``: against float64 on the GPU, checked before timing.

Writes ``<name>.json`` ({"date", "commit", "device", "rows"}), ``<name>.md`` and
``<name>.png`` (speed-ups over torch.einsum per expression) into ``--out``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import sys
from pathlib import Path

import numpy as np
import opt_einsum

from ..contract import contract_expression, einsum
from ..parse import parse_equation
from .timing import (add_corpus_arguments, call_time_us, device_name, expression_times,
                     guarded, run_commit, torch_graph_us)

DEFAULT_CORPUS = Path(__file__).with_name("corpus.json")
DEFAULT_DTYPES = ("float32", "float16")
#: every row has these keys (None where a measure failed)
ROW_KEYS = ("expr", "shapes", "dtype", "call_us", "expr_call_us", "us", "torch_call_us",
            "torch_us", "cupy_call_us", "oe_call_us", "gbps", "rel_err")
#: a row is "small" when its device time is under this (the per-call targets' class)
SMALL_DEVICE_US = 50.0


def load_cases(corpus_path, dtypes=DEFAULT_DTYPES):
    """(expr, shapes, dtype) for every einsum entry of the corpus and every dtype."""
    corpus = json.loads(Path(corpus_path).read_text())
    return [(e["expr"], tuple(tuple(s) for s in e["shapes"]), dt)
            for e in corpus["einsum"] for dt in dtypes]


def output_shape(expr: str, shapes) -> tuple[int, ...]:
    """The shape ``expr`` produces from operands of ``shapes``."""
    eq = parse_equation(expr, shapes)
    return tuple(eq.sizes[label] for label in eq.output)


def traffic_bytes(expr: str, shapes, itemsize: int) -> int:
    """Bytes read and written when every operand is read once and the result written once;
    an operand with a repeated label is read along its diagonal only."""
    eq = parse_equation(expr, shapes)
    read = 0
    for term, shape in zip(eq.inputs, shapes):
        first = {}
        for label, n in zip(term, shape):
            first.setdefault(label, n)
        read += math.prod(first.values())
    return (read + math.prod(output_shape(expr, shapes))) * itemsize


def gbps(nbytes: int, us: float | None) -> float | None:
    """Bandwidth in GB/s of moving ``nbytes`` in ``us`` microseconds."""
    return nbytes / us / 1e3 if us else None


def measure(expr: str, shapes, dtype: str, reps: int, log) -> dict:
    """One row: ours and the peers on the same arrays (needs CuPy, torch and a GPU)."""
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library

    rs = cupy.random.RandomState(1234)
    ops = [rs.standard_normal(s, dtype=cupy.float32).astype(dtype) for s in shapes]
    tops = [torch.from_dlpack(x) for x in ops]
    ref = cupy.einsum(expr, *[x.astype(cupy.float64) for x in ops])
    stream = cupy.cuda.Stream(non_blocking=True)
    sync = stream.synchronize
    ours = contract_expression(expr, *shapes, dtype=np.dtype(dtype))
    row = dict(expr=expr, shapes=[list(s) for s in shapes], dtype=dtype)
    times = expression_times(lambda: ours(*ops), ref, stream, reps, log)
    row.update(rel_err=times["rel_err"], us=times["us"], expr_call_us=times["call_us"])
    calls = times["calls"]
    with stream:
        row["call_us"] = guarded(log, "skcontract.einsum",
                                  lambda: call_time_us(lambda: einsum(expr, *ops), sync))
        row["cupy_call_us"] = guarded(log, "cupy.einsum",
                                       lambda: call_time_us(lambda: cupy.einsum(expr, *ops), sync))
        row["oe_call_us"] = guarded(log, "opt_einsum+cupy", lambda: call_time_us(
            lambda: opt_einsum.contract(expr, *ops, backend="cupy"), sync))
    row["torch_us"] = guarded(log, "torch.einsum device time",
                               lambda: torch_graph_us(lambda: torch.einsum(expr, *tops),
                                                      calls, reps))
    row["torch_call_us"] = guarded(log, "torch.einsum", lambda: call_time_us(
        lambda: torch.einsum(expr, *tops), torch.cuda.synchronize))
    row["gbps"] = gbps(traffic_bytes(expr, shapes, np.dtype(dtype).itemsize), row["us"])
    return {k: row.get(k) for k in ROW_KEYS}


def _ratio(num, den) -> float | None:
    return num / den if num and den else None


def summary_lines(rows) -> list[str]:
    """The figures the targets read: per-call and device-time speed-ups over torch.einsum."""
    call = [(_ratio(r["torch_call_us"], r["call_us"]), r) for r in rows]
    call = [(x, r) for x, r in call if x]
    small = [(x, r) for x, r in call if r["us"] is not None and r["us"] < SMALL_DEVICE_US]
    lines = []
    for what, xs in (("per call vs torch.einsum", call),
                     (f"per call vs torch.einsum, device time < {SMALL_DEVICE_US:g} us", small)):
        if xs:
            worst, r = min(xs, key=lambda t: t[0])
            lines.append(f"- {what}: worst {worst:.2f}x faster (`{r['expr']}` {r['dtype']})")
    dev = [x for x in (_ratio(r["torch_us"], r["us"]) for r in rows) if x]
    if dev:
        lines.append(f"- device time vs torch.einsum: worst {min(dev):.2f}x, "
                     f"best {max(dev):.2f}x faster")
    return lines


def _fmt(x, digits=1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render_markdown(doc) -> str:
    """The JSON document as a Markdown report: summary, then one row per measurement."""
    lines = [f"# Einsum on {doc['device']} ({doc['date']}, commit {doc['commit']})", "",
             "Call times are host wall time per call (us); device times are CUDA-graph "
             "replays (median, us). Speed-up = torch.einsum time / ours (>1: we are faster). "
             "GB/s: operands read once and the result written once, over our device time.",
             "", *summary_lines(doc["rows"]), "",
             "| expr | shapes | dtype | einsum call | expression call | torch call | "
             "cupy call | opt_einsum call | device us | torch us | GB/s | call speed-up | "
             "device speed-up | rel err |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: |"]
    for r in doc["rows"]:
        shapes = ", ".join("x".join(map(str, s)) for s in r["shapes"])
        err = "-" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        lines.append(
            f"| `{r['expr']}` | {shapes} | {r['dtype']} | {_fmt(r['call_us'])} | "
            f"{_fmt(r['expr_call_us'])} | {_fmt(r['torch_call_us'])} | "
            f"{_fmt(r['cupy_call_us'])} | {_fmt(r['oe_call_us'])} | {_fmt(r['us'])} | "
            f"{_fmt(r['torch_us'])} | {_fmt(r['gbps'], 0)} | "
            f"{_fmt(_ratio(r['torch_call_us'], r['call_us']), 2)} | "
            f"{_fmt(_ratio(r['torch_us'], r['us']), 2)} | {err} |")
    return "\n".join(lines) + "\n"


def write_plot(path, rows) -> bool:
    """Speed-ups over torch.einsum per expression, per call and in device time (log scale)."""
    try:
        import matplotlib  # optional dependency (the plot extra)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional dependency (the plot extra)
    except ImportError:
        return False
    exprs = list(dict.fromkeys(r["expr"] for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, axes = plt.subplots(2, 1, figsize=(max(8, len(exprs) * 0.9), 7), sharex=True)
    width = 0.8 / max(len(dtypes), 1)
    for ax, (num, den, label) in zip(axes, (("torch_call_us", "call_us", "per call"),
                                            ("torch_us", "us", "device time"))):
        for i, dt in enumerate(dtypes):
            by = {r["expr"]: _ratio(r[num], r[den]) for r in rows if r["dtype"] == dt}
            ys = [by.get(e) or float("nan") for e in exprs]
            ax.bar([x + (i - (len(dtypes) - 1) / 2) * width for x in range(len(exprs))], ys,
                   width=width, label=dt)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_ylabel(f"torch / ours, {label}")
        ax.legend(fontsize=8)
    axes[-1].set_xticks(range(len(exprs)))
    axes[-1].set_xticklabels(exprs, rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(out, name, rows, plot=True) -> dict:
    """Write ``<name>.json`` and ``<name>.md`` (and the plot) under ``out``; return the doc."""
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
    p = argparse.ArgumentParser(prog="python -m skcontract bench einsum",
                                description=__doc__.splitlines()[0])
    add_corpus_arguments(p, DEFAULT_CORPUS, "einsum-h200")
    p.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES),
                   help="comma-separated operand dtypes to time")
    args = p.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    cases = load_cases(args.corpus, args.dtypes.split(","))
    rows = []
    for i, (expr, shapes, dt) in enumerate(cases):
        row = measure(expr, shapes, dt, args.reps, log)
        rows.append(row)
        log(f"[{i + 1}/{len(cases)}] {expr} {dt}: call {_fmt(row['call_us'])} us "
            f"(torch {_fmt(row['torch_call_us'])}), device {_fmt(row['us'])} us "
            f"(torch {_fmt(row['torch_us'])}), {_fmt(row['gbps'], 0)} GB/s")
        write_all(args.out, args.name, rows, plot=False)  # partial results survive a timeout
    doc = write_all(args.out, args.name, rows)
    print("\n".join(summary_lines(doc["rows"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
