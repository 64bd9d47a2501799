"""GEMM benchmark: our Stream-K family kernels vs cuBLAS (torch.matmul, cupy.matmul).

``python -m skcontract bench gemm [--quick] [--corpus PATH] [--out DIR] [--reps N]``

For every GEMM shape of the corpus (bf16 and fp16; fp32 and fp64 on the listed subset) it
times our ``data_parallel``, ``stream_k``, ``hybrid`` and ``auto`` schedules and cuBLAS in
the same run. Device time: the median over repetitions of a CUDA-graph replay of ``calls``
back-to-back calls (falls back to events around back-to-back launches if capture fails),
divided by ``calls``. Call time: host wall clock over many calls with one synchronise.
The GPU's clock drifts over a case's measurements (power and heat: 4096^3 measured the same
schedule 7% slower after three other modes than right after cuBLAS), so cuBLAS is timed
again right before each of our modes, and each row's ``cublas_us`` is that adjacent time;
a mode's speed-up over another is the ratio of their speed-ups over their own cuBLAS times.
Writes ``gemm-h200.json`` ({"date","commit","device","rows"}), ``gemm-h200.md`` and
``gemm-h200.png`` (ratio to cuBLAS per shape, grouped by class) into ``--out``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

from ..kernels.gemm import gemm
from .timing import (add_corpus_arguments, calls_for, call_time_us, device_name,
                     device_time_us, geomean, run_commit, torch_graph_us)

DEFAULT_CORPUS = Path(__file__).with_name("corpus.json")
OUR_MODES = ("data_parallel", "stream_k", "hybrid", "auto")
QUICK_CLASSES = {"wave-quantized": 3, "exact-waves": 2, "strong-scaling": 2, "decode-gemv": 1,
                 "batched": 1, "tail-half-full": 1}
TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32",
                "float64": "float64"}


def load_cases(corpus_path, quick=False):
    corpus = json.loads(Path(corpus_path).read_text())
    cases = []
    for group in corpus["gemm"]:
        cls = group["class"]
        shapes = group["shapes"][:QUICK_CLASSES.get(cls, 1)] if quick else group["shapes"]
        for s in shapes:
            if isinstance(s, dict):
                (m, n, k), batch = s["mnk"], s.get("batch", 1)
            else:
                (m, n, k), batch = s, 1
            for dt in ("bfloat16", "float16"):
                cases.append((cls, batch, m, n, k, dt))
    subset = corpus.get("gemm_fp32_fp64_subset", [])
    if quick:
        subset = subset[:2]
    for m, n, k in subset:
        cls = _class_of(corpus, m, n, k)
        for dt in ("float32", "float64"):
            cases.append((cls, 1, m, n, k, dt))
    return cases


def _class_of(corpus, m, n, k):
    for group in corpus["gemm"]:
        for s in group["shapes"]:
            if not isinstance(s, dict) and list(s) == [m, n, k]:
                return group["class"]
    return "fp32-fp64-subset"


def run_case(cls, batch, m, n, k, dtype, reps, log):
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library


    tdt = getattr(torch, TORCH_DTYPES[dtype])
    gen = torch.Generator(device="cuda").manual_seed(1234)
    shp_a = (batch, m, k) if batch > 1 else (m, k)
    shp_b = (batch, k, n) if batch > 1 else (k, n)
    a = torch.randn(shp_a, device="cuda", generator=gen, dtype=torch.float32).to(tdt)
    b = torch.randn(shp_b, device="cuda", generator=gen, dtype=torch.float32).to(tdt)
    c = torch.empty((batch, m, n) if batch > 1 else (m, n), device="cuda", dtype=tdt)
    torch.cuda.synchronize()
    flops = 2.0 * batch * m * n * k
    calls = calls_for(flops)
    rows = []
    # cuBLAS through torch (graph replay) and CuPy
    def cublas():
        torch.matmul(a, b, out=c)

    cublas_us = torch_graph_us(cublas, calls, reps)
    torch_call = call_time_us(cublas, torch.cuda.synchronize)
    ref = torch.matmul(a.double(), b.double())
    cp_stream = cupy.cuda.Stream(non_blocking=True)
    cupy_us = float("nan")
    if dtype != "bfloat16":
        ca, cb = cupy.asarray(a), cupy.asarray(b)
        cc = cupy.empty(tuple(c.shape), dtype=ca.dtype)
        try:
            cupy_us = device_time_us(lambda: cupy.matmul(ca, cb, out=cc), cp_stream, calls, reps)
        except Exception as e:  # noqa: BLE001
            log(f"   cupy.matmul failed: {e}")
    base = dict(**{"class": cls}, batch=batch, m=m, n=n, k=k, dtype=dtype)
    rows.append(dict(base, mode="cublas_torch", us=cublas_us, call_us=torch_call,
                     cublas_us=cublas_us, tflops=flops / cublas_us / 1e6))
    rows.append(dict(base, mode="cublas_cupy", us=cupy_us, call_us=None, cublas_us=cublas_us,
                     tflops=flops / cupy_us / 1e6 if cupy_us == cupy_us else None))
    for mode in OUR_MODES:
        def fn(mode=mode):
            gemm(a, b, c, mode=mode, reduction="deterministic")
        adjacent_us = torch_graph_us(cublas, calls, reps)  # cuBLAS right before this mode
        try:
            us = device_time_us(fn, cp_stream, calls, reps)
            with cp_stream:
                call_us = call_time_us(fn, cp_stream.synchronize)
                c.fill_(float("nan"))
                cp_stream.synchronize()
                fn()
                cp_stream.synchronize()
            err = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
        except Exception as e:  # noqa: BLE001
            log(f"   {mode} failed: {type(e).__name__}: {e}")
            us, call_us, err = float("nan"), float("nan"), float("nan")
        rows.append(dict(base, mode=mode, us=us, call_us=call_us, cublas_us=adjacent_us,
                         tflops=flops / us / 1e6 if us == us else None, rel_err=err))
    return rows


def summarize(rows):
    """Geomean ratios the report asks for (speed-ups: >1 means faster)."""
    by = {}
    for r in rows:
        by[(r["class"], r["batch"], r["m"], r["n"], r["k"], r["dtype"], r["mode"])] = r
    out = {}
    keys = {(r["class"], r["batch"], r["m"], r["n"], r["k"], r["dtype"]) for r in rows}

    def vs_cublas(kk, mode):  # speed-up of mode over the cuBLAS time measured next to it
        r = by.get(kk + (mode,))
        if not r or not r["us"] or not r.get("cublas_us"):
            return None
        return r["cublas_us"] / r["us"]

    def ratio(kk, num, den):  # speed-up of num over den, each against its adjacent cuBLAS
        a, b = vs_cublas(kk, num), vs_cublas(kk, den)
        return None if a is None or b is None else a / b

    def summary(ks):
        return {"auto_vs_cublas": geomean([vs_cublas(k, "auto") for k in ks]),
                "auto_vs_dp": geomean([ratio(k, "auto", "data_parallel") for k in ks]),
                "stream_k_vs_dp": geomean([ratio(k, "stream_k", "data_parallel") for k in ks]),
                "hybrid_vs_dp": geomean([ratio(k, "hybrid", "data_parallel") for k in ks]),
                "n": len(ks)}

    dtypes = sorted({k[5] for k in keys})
    for cls_ in sorted({k[0] for k in keys}):
        for dt in dtypes:
            ks = [k for k in keys if k[0] == cls_ and k[5] == dt]
            if ks:
                out[f"{cls_}/{dt}"] = summary(ks)
    for dt in dtypes:
        out[f"all/{dt}"] = summary([k for k in keys if k[5] == dt])
    return out


def write_markdown(path, doc, summary):
    lines = [f"# GEMM on {doc['device']} ({doc['date']}, commit {doc['commit']})", "",
             "Device time per call (us, CUDA-graph replay, median); speed-up = cuBLAS time / "
             "ours (>1: we are faster). cuBLAS = torch.matmul, timed again right before each "
             "of our rows (its `cuBLAS us`); a mode's speed-up over data-parallel is the "
             "ratio of their speed-ups over cuBLAS.", ""] + (
                 [doc["merged"], ""] if doc.get("merged") else []) + [
             "## Geomean speed-ups", "",
             "| class / dtype | n | auto vs cuBLAS | auto vs DP | stream_k vs DP | hybrid vs DP |",
             "| --- | --- | --- | --- | --- | --- |"]
    for k, v in summary.items():
        lines.append(f"| {k} | {v['n']} | {v['auto_vs_cublas']:.3f} | {v['auto_vs_dp']:.3f} | "
                     f"{v['stream_k_vs_dp']:.3f} | {v['hybrid_vs_dp']:.3f} |")
    lines += ["", "## All rows", "",
              "| class | batch | m | n | k | dtype | mode | us | call us | cuBLAS us | TFLOP/s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["rows"]:
        f = lambda x, p=1: "-" if x is None or x != x else f"{x:.{p}f}"  # noqa: E731
        lines.append(f"| {r['class']} | {r['batch']} | {r['m']} | {r['n']} | {r['k']} | "
                     f"{r['dtype']} | {r['mode']} | {f(r['us'])} | {f(r['call_us'])} | "
                     f"{f(r['cublas_us'])} | {f(r['tflops'])} |")
    Path(path).write_text("\n".join(lines) + "\n")


def write_plot(path, rows):
    try:
        import matplotlib  # optional dependency (the plot extra)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # optional dependency (the plot extra)
    except ImportError:
        return False
    dtypes = [d for d in ("bfloat16", "float16", "float32", "float64")
              if any(r["dtype"] == d for r in rows)]
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(16, 3.2 * len(dtypes)), squeeze=False)
    for ax, dt in zip(axes[:, 0], dtypes):
        shapes, seen = [], set()
        for r in rows:
            key = (r["class"], r["batch"], r["m"], r["n"], r["k"])
            if r["dtype"] == dt and key not in seen:
                seen.add(key)
                shapes.append(key)
        shapes.sort(key=lambda s: s[0])
        x = range(len(shapes))
        for i, mode in enumerate(OUR_MODES):
            ys = []
            for s in shapes:
                r = next((r for r in rows if r["dtype"] == dt and r["mode"] == mode and
                          (r["class"], r["batch"], r["m"], r["n"], r["k"]) == s), None)
                ys.append(r["cublas_us"] / r["us"] if r and r["us"] and r["us"] == r["us"]
                          else float("nan"))
            ax.bar([xi + (i - 1.5) * 0.2 for xi in x], ys, width=0.2, label=mode)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{s[0]}\n{s[1]}x{s[2]}x{s[3]}x{s[4]}" if s[1] > 1 else
                            f"{s[0]}\n{s[2]}x{s[3]}x{s[4]}" for s in shapes],
                           rotation=90, fontsize=6)
        ax.set_ylabel(f"{dt}: cuBLAS / ours")
        ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _write_all(args, rows, plot=True):
    doc = {"date": _dt.date.today().isoformat(), "commit": run_commit(), "device": device_name(),
           "rows": [{k: r.get(k) for k in ("class", "batch", "m", "n", "k", "dtype", "mode",
                                           "us", "call_us", "cublas_us", "tflops")}
                    for r in rows]}
    measured = {r["dtype"] for r in doc["rows"]}
    doc["sources"] = {dt: {"date": doc["date"], "commit": doc["commit"]} for dt in measured}
    if getattr(args, "merge", None):
        old = json.loads(Path(args.merge).read_text())
        kept = [r for r in old["rows"] if r["dtype"] not in measured]
        if kept:
            # a kept row's run: the one the merged file names for its dtype (itself a merge,
            # perhaps), else the merged file's own
            own = {"date": old.get("date"), "commit": old.get("commit")}
            old_sources = old.get("sources", {})
            runs: dict = {}
            for dt in sorted({r["dtype"] for r in kept}):
                src = doc["sources"][dt] = old_sources.get(dt, own)
                runs.setdefault((src["date"], src["commit"]), []).append(dt)
            where = "; ".join(f"rows for {', '.join(dts)} kept from the run of {date} (commit "
                              f"{commit})" for (date, commit), dts in runs.items())
            doc["merged"] = (f"Rows for {', '.join(sorted(measured))} measured in this run; "
                             f"{where}. Every ratio compares to cuBLAS measured in the same run "
                             f"as the row (for rows of this run, right before the row).")
            doc["rows"] = kept + doc["rows"]
            rows = [dict(r) for r in kept] + list(rows)
    for r in doc["rows"]:  # strict JSON: NaN -> null
        for key, v in r.items():
            if isinstance(v, float) and v != v:
                r[key] = None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(doc, indent=1))
    summary = summarize(rows)
    write_markdown(out / f"{args.name}.md", doc, summary)
    if plot:
        write_plot(out / f"{args.name}.png", rows)
    (out / f"{args.name}-errors.json").write_text(json.dumps(
        [{k: r.get(k) for k in ("class", "m", "n", "k", "dtype", "mode", "rel_err")}
         for r in rows if "rel_err" in r]))
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract bench gemm")
    add_corpus_arguments(p, DEFAULT_CORPUS, "gemm-h200")
    p.add_argument("--quick", action="store_true", help="a few shapes per class")
    p.add_argument("--dtypes", default="bfloat16,float16,float32,float64",
                   help="comma-separated operand dtypes to time")
    p.add_argument("--merge", default=None,
                   help="an earlier JSON whose rows of the dtypes not measured now are kept")
    args = p.parse_args(argv)

    import torch  # the benchmark's peer; not a dependency of the library

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    dtypes = set(args.dtypes.split(","))
    cases = [c for c in load_cases(args.corpus, args.quick) if c[5] in dtypes]
    rows = []
    for i, (cls, batch, m, n, k, dt) in enumerate(cases):
        t0 = time.perf_counter()
        case_rows = run_case(cls, batch, m, n, k, dt, args.reps, log)
        rows += case_rows
        auto = next(r for r in case_rows if r["mode"] == "auto")
        dp = next(r for r in case_rows if r["mode"] == "data_parallel")
        log(f"[{i + 1}/{len(cases)}] {cls} {batch}x{m}x{n}x{k} {dt}: cuBLAS "
            f"{auto['cublas_us']:.1f}us auto {auto['us']:.1f}us DP {dp['us']:.1f}us "
            f"err {auto.get('rel_err', float('nan')):.1e} ({time.perf_counter() - t0:.1f}s)")
        torch.cuda.empty_cache()
        _write_all(args, rows, plot=False)  # partial results survive a timeout
    summary = _write_all(args, rows)
    print("\nclass/dtype                       n  auto/cuBLAS  auto/DP  SK/DP  hybrid/DP")
    for k, v in summary.items():
        print(f"{k:32s} {v['n']:2d}  {v['auto_vs_cublas']:10.3f} {v['auto_vs_dp']:8.3f} "
              f"{v['stream_k_vs_dp']:6.3f} {v['hybrid_vs_dp']:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
