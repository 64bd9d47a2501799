"""Complex benchmark: complex64 / complex128 products on our kernels against cuBLAS.

``python -m skcontract bench complex [--out DIR] [--reps N]`` times each case's product by
einsum (a contract expression, CUDA-graph replay) and by each peer: cuBLAS's CGEMM exact
and CGEMM with TF32 (complex64), ZGEMM (complex128), all through torch.einsum (torch's
CUDA-graph replay), and the errors of both against a complex128 reference. complex128
rows use integer data (re and im in [-8, 8]), whose products and sums are exact in
float64, so their reference is exact; complex64 rows use normal data, and one row data of
a wide exponent range (A's rows scaled by 2^-20 .. 2^20). The memory-bound cases (matrix
times vector, dots: the Dot kernel) have one peer, torch.einsum (cuBLAS's GEMV and dots),
and their bandwidth (``gbps``: operands read once, the result written once) is held to the
device-to-device copy's, timed in the same run (``copy_gbps``). One row per (case, peer):
``us`` ours, ``peer_us`` the peer's, ``ratio`` = peer_us / us, ``rel_err`` / ``peer_rel_err``
(2-norm, relative). Writes ``complex-<device>.json`` and ``.md`` into ``--out``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..contract import contract_expression
from .einsum import gbps, traffic_bytes
from .shapes import copy_gbps
from .timing import (DEFAULT_REPS, device_name, expression_times, geomean, guarded, rel_err,
                     run_commit, torch_graph_us)


class Case(NamedTuple):
    expr: str
    shapes: tuple
    dtype: str
    data: str  # "normal", "wide" or "integers"
    source: str
    memory_bound: bool = False
    conj: tuple = ()  # operands read conjugated (einsum's conj=; torch's conj())


CASES = (
    Case("mk,kn->mn", ((4096, 4096), (4096, 4096)), "complex64", "normal",
         "4096-dimensional unitaries composed (quantum dynamics)"),
    Case("mk,kn->mn", ((4096, 4096), (4096, 4096)), "complex64", "wide",
         "the same on data of a wide exponent range"),
    Case("abc,cd->abd", ((1024, 2, 1024), (1024, 1024)), "complex64", "normal",
         "an MPS site tensor (bond 1024) times a bond matrix (TEBD)"),
    Case("bij,bjk->bik", ((256, 256, 256), (256, 256, 256)), "complex64", "normal",
         "256 x 256 transfer matrices at 256 frequencies (scattering)"),
    Case("abij,ijcd->abcd", ((32, 32, 64, 64), (64, 64, 32, 32)), "complex64", "normal",
         "a PEPS double-layer contraction (bonds 32 and 64)"),
    Case("ki,kj->ij", ((8192, 1024), (8192, 1024)), "complex64", "normal",
         "overlaps <v_i|w_j> of 1024 states in 8192 dimensions (subspace diagonalisation)",
         conj=(0,)),
    Case("mk,kn->mn", ((2048, 2048), (2048, 2048)), "complex128", "integers",
         "a 2048-orbital complex Hamiltonian times its eigenvectors"),
    Case("bij,bjk->bik", ((64, 384, 384), (64, 384, 384)), "complex128", "integers",
         "band-structure blocks at 64 k-points"),
    Case("ij,j->i", ((16384, 16384), (16384,)), "complex64", "normal",
         "a dense 16384-state Hamiltonian times a state (a Krylov step)", True),
    Case("i,ij->j", ((16384,), (16384, 16384)), "complex64", "normal",
         "a bra times the same operator (a row vector times a matrix)", True),
    Case("bj,bj->b", ((1024, 65536), (1024, 65536)), "complex64", "normal",
         "1024 overlaps of 16-qubit states", True),
    Case("bj,bj->b", ((1024, 65536), (1024, 65536)), "complex64", "normal",
         "the same as inner products <a_b|c_b> (the bra conjugated)", True, (0,)),
    Case("bij,bj->bi", ((32, 2048, 2048), (32, 2048)), "complex128", "normal",
         "k-point Hamiltonians (2048 bands, 32 k-points) times trial vectors", True),
)
"""The benchmark's products."""

PEERS = {"complex64": (("cuBLAS CGEMM (torch.einsum)", False),
                       ("cuBLAS CGEMM TF32 (torch.einsum, allow_tf32)", True)),
         "complex128": (("cuBLAS ZGEMM (torch.einsum)", False),)}
"""dtype -> (peer name, torch's allow_tf32) of each peer of a product that is not memory-bound."""
MEMORY_BOUND_PEERS = (("cuBLAS GEMV / dot (torch.einsum)", False),)
"""The memory-bound cases' peer (TF32 changes nothing there)."""
WIDE_EXPONENTS = 20
"""The wide-range data's rows are scaled by 2^e, e uniform in [-this, this]."""
INTEGER_RANGE = 8
"""Integer data: re and im uniform in [-this, this]."""
ROW_KEYS = ("expr", "conj", "shapes", "dtype", "data", "source", "us", "call_us", "peer",
            "peer_us", "ratio", "gbps", "rel_err", "peer_rel_err", "commit")


def operands(case: Case):
    """The case's operands (CuPy) and their complex128 reference product."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    rng = np.random.default_rng(2026)
    host = []
    for i, s in enumerate(case.shapes):
        if case.data == "integers":
            x = rng.integers(-INTEGER_RANGE, INTEGER_RANGE + 1, s) + \
                1j * rng.integers(-INTEGER_RANGE, INTEGER_RANGE + 1, s)
        else:
            x = rng.standard_normal(s) + 1j * rng.standard_normal(s)
            if case.data == "wide" and i == 0:
                x = x * np.exp2(rng.integers(-WIDE_EXPONENTS, WIDE_EXPONENTS + 1,
                                             s[:-1] + (1,)))
        host.append(x.astype(case.dtype))
    ops = [cupy.asarray(x) for x in host]
    ref = cupy.einsum(case.expr, *[(x.conj() if i in case.conj else x).astype(cupy.complex128)
                                   for i, x in enumerate(ops)])
    return ops, ref


def measure(case: Case, reps: int, log) -> list[dict]:
    """The case's rows, one per peer (needs CuPy, torch and a GPU)."""
    import cupy  # optional dependency: only the GPU path needs CuPy
    import torch  # the benchmark's peer; not a dependency of the library

    ops, ref = operands(case)
    ours = contract_expression(case.expr, *case.shapes, dtype=np.dtype(case.dtype),
                               conj=case.conj)
    times = expression_times(lambda: ours(*ops), ref, cupy.cuda.Stream(non_blocking=True),
                             reps, log)
    calls = times.pop("calls")
    # (torch's conj() is lazy: cuBLAS reads the conjugate where it can)
    tops = [torch.from_dlpack(x).conj() if i in case.conj else torch.from_dlpack(x)
            for i, x in enumerate(ops)]
    rows = []
    moved = traffic_bytes(case.expr, case.shapes, np.dtype(case.dtype).itemsize)
    for peer, tf32 in (MEMORY_BOUND_PEERS if case.memory_bound else PEERS[case.dtype]):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            def call():
                return torch.einsum(case.expr, *tops)
            peer_err = guarded(log, peer, lambda: rel_err(cupy.asarray(call()), ref))
            peer_us = guarded(log, peer, lambda: torch_graph_us(call, calls, reps))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        row = {**case._asdict(), "shapes": [list(s) for s in case.shapes],
               "conj": list(case.conj), **times,
               "peer": peer, "peer_us": peer_us, "peer_rel_err": peer_err}
        row["ratio"] = peer_us / row["us"] if row.get("us") and peer_us else None
        row["gbps"] = gbps(moved, row.get("us")) if case.memory_bound else None
        rows.append({k: row.get(k) for k in ROW_KEYS})
    return rows


def _fmt(x, digits=1, exp=False) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}e}" if exp else f"{x:.{digits}f}"


def marked(expr: str, conj) -> str:
    """``expr`` with each operand read conjugated marked ``*`` (as a plan's steps are).

    >>> marked("ki,kj->ij", [0])
    'ki*,kj->ij'
    """
    inputs, output = expr.split("->")
    return ",".join(t + ("*" if i in conj else "")
                    for i, t in enumerate(inputs.split(","))) + "->" + output


def render_markdown(doc) -> str:
    rows = doc["rows"]
    lines = [f"# Complex products on {doc['device']} ({doc['date']}, commit {doc['commit']})",
             "", "Ratio: the peer's device time over ours (CUDA-graph replay, both sides; "
             "above 1: faster). Errors: 2-norm, relative to a complex128 reference (exact "
             "for the integer data). `*`: an operand read conjugated (ours: `conj=`; the "
             "peer's: torch's lazy `conj()`).", "", "| peer | rows | geomean |", "| --- | ---: | ---: |"]
    for peer in dict.fromkeys(r["peer"] for r in rows):
        ratios = [r["ratio"] for r in rows if r["peer"] == peer and r["ratio"]]
        lines.append(f"| {peer} | {len(ratios)} | {_fmt(geomean(ratios), 2)} |")
    bandwidths = [r["gbps"] for r in rows if r.get("gbps")]
    copy = doc.get("copy_gbps")
    if bandwidths and copy:
        lines += ["", f"Memory-bound rows: the slowest {_fmt(min(bandwidths), 0)} GB/s, "
                  f"{_fmt(100 * min(bandwidths) / copy, 0)}% of the device-to-device copy's "
                  f"{_fmt(copy, 0)} GB/s (timed in the same run)."]
    lines += ["", "| expr | shapes | dtype | data | ours us | peer | peer us | ratio | GB/s | "
              "our err | peer err | source |",
              "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        shapes = " x ".join("x".join(map(str, s)) for s in r["shapes"])
        lines.append(f"| `{marked(r['expr'], r.get('conj') or ())}` | {shapes} | "
                     f"{r['dtype']} | {r['data']} | "
                     f"{_fmt(r['us'])} | {r['peer']} | {_fmt(r['peer_us'])} | "
                     f"{_fmt(r['ratio'], 2)} | {_fmt(r.get('gbps'), 0)} | "
                     f"{_fmt(r['rel_err'], 1, True)} | {_fmt(r['peer_rel_err'], 1, True)} | "
                     f"{r['source']} |")
    return "\n".join(lines) + "\n"


def default_name(device: str) -> str:
    """``complex-h100`` / ``complex-h200`` from the device's name; ``complex-gpu`` else."""
    low = device.lower()
    return next((f"complex-{p}" for p in ("h100", "h200") if p in low), "complex-gpu")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract bench complex",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/benchmarks",
                   help="folder the JSON and Markdown are written to (default: docs/benchmarks)")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS,
                   help=f"timed repetitions of each row, the median kept (default: {DEFAULT_REPS})")
    p.add_argument("--memory-bound", action="store_true",
                   help="only the memory-bound cases (the Dot kernel's)")
    args = p.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    device = device_name()
    doc = {"date": _dt.date.today().isoformat(), "commit": run_commit(), "device": device,
           "copy_gbps": copy_gbps(args.reps), "rows": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = default_name(device)
    cases = [c for c in CASES if c.memory_bound or not args.memory_bound]
    for i, case in enumerate(cases):
        for row in measure(case, args.reps, log):
            row["commit"] = doc["commit"]
            doc["rows"].append(row)
            log(f"[{i + 1}/{len(cases)}] {case.expr} {case.dtype} {case.data}: ours "
                f"{_fmt(row['us'])} us, {row['peer']} {_fmt(row['peer_us'])} us, "
                f"x{_fmt(row['ratio'], 2)}")
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1))  # partial results
        (out / f"{name}.md").write_text(render_markdown(doc))          # survive a timeout
    print(render_markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
