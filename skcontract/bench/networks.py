"""Networks benchmark: large contractions planned under memory limits, against cotengra.

``python -m skcontract bench networks [--out DIR] [--name NAME] [--max-time S]
[--networks A,B] [--limits 1GiB,8GiB]``

Networks generated in code (no downloads): a random 3-regular graph of 250 tensors (bond 2),
a 10 x 10 lattice (bond 8), the norm of a 6 x 6 PEPS (bond 5, physical 2), a 6 x 6 random
quantum circuit of depth 14 (complex64; closed, and with six output qubits open), and a dense
batched product whose operands are larger than a GPU (its output fits 8 GiB, not 1 GiB: a
planner that cannot keep a limit logs why and gives no row). Each is planned at each memory
limit (bytes of the peak working set, :mod:`skcontract.plan.slicing`) three ways:

- ``auto``: skcontract's default path (opt_einsum's) and its slicer;
- ``hyper``: ``optimize="hyper"``: cotengra's hyper-optimiser (``--max-time`` seconds), the
  path sliced after the search and cotengra's search that slices as it goes, the cheaper;
- ``cotengra``: cotengra alone, the same search time, slicing with reconfiguration
  (``slicing_reconf_opts``) to the largest intermediate of skcontract's ``hyper`` plan; its
  path and slices are then planned by skcontract, so that both sides' FLOPs are counted
  alike (2 per multiply-add, steps that hold no sliced label once). Its search is timed as
  ours (:func:`~skcontract.plan.path.timed_search`): stopped at the time on a pool of its
  own. Left to itself, cotengra runs on past its time to the next finished trial and leaves
  its running trials on its shared pool, where they take the CPUs from the rows after it.

Rows: ``network``, ``tensors``, ``limit``, ``limit_bytes``, ``planner``, ``planning_s``,
``slices``, ``flops`` (every slice's), ``overhead`` (FLOPs over the unsliced plan's of the
same path), ``largest_intermediate`` (elements, a slice's), ``predicted_peak_bytes`` (the
peak model's, for the sliced plans; None for an unsliced one), ``path`` and ``chunks`` (the
sliced labels, opt_einsum's symbols, and their chunks: what
:mod:`skcontract.bench.networks_run` runs on the GPU); cotengra's rows say whether its
slices keep the limit by skcontract's peak model (``fits``). Writes ``<name>.json`` and
``<name>.md``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from opt_einsum import get_symbol

from ..contract import contract_path
from ..plan.path import hyper, timed_search
from ..plan.slicing import budget_of
from .timing import run_commit

LIMITS = ("1GiB", "8GiB")
"""The memory limits every network is planned at (bytes of the peak working set)."""
HYPER_SECONDS = 10.0
"""Search time of the ``hyper`` and ``cotengra`` planners a network and limit (the same
for both)."""


class Network(NamedTuple):
    """A contraction: terms of labels (ints), the output's labels, label sizes, dtype."""

    name: str
    inputs: tuple
    output: tuple
    sizes: dict
    dtype: str

    def subscripts(self) -> str:
        """The einsum string (labels as opt_einsum's symbols)."""
        sym = {lab: get_symbol(i) for i, lab in enumerate(sorted(self.sizes))}
        lhs = ",".join("".join(sym[x] for x in t) for t in self.inputs)
        return f"{lhs}->{''.join(sym[x] for x in self.output)}"

    def shapes(self) -> list[tuple]:
        return [tuple(self.sizes[x] for x in t) for t in self.inputs]


def random_regular(n: int = 250, degree: int = 3, bond: int = 2, seed: int = 250) -> Network:
    """A random ``degree``-regular graph of ``n`` tensors, a bond of ``bond`` an edge
    (a configuration-model pairing, drawn again until it has no loop or double edge)."""
    rng = np.random.default_rng(seed)
    while True:
        stubs = rng.permutation(np.repeat(np.arange(n), degree))
        edges = {tuple(sorted(p)) for p in stubs.reshape(-1, 2).tolist()}
        if len(edges) == n * degree // 2 and all(a != b for a, b in edges):
            break
    terms = [[] for _ in range(n)]
    for label, (a, b) in enumerate(sorted(edges)):
        terms[a].append(label)
        terms[b].append(label)
    return Network(f"random 3-regular n={n}", tuple(map(tuple, terms)), (),
                   {x: bond for x in range(len(edges))}, "float32")


def _grid_edges(rows: int, cols: int):
    """The nearest-neighbour edges of a rows x cols grid, as pairs of site numbers."""
    for r in range(rows):
        for c in range(cols):
            if c + 1 < cols:
                yield r * cols + c, r * cols + c + 1
            if r + 1 < rows:
                yield r * cols + c, (r + 1) * cols + c


def lattice(rows: int = 10, cols: int = 10, bond: int = 8) -> Network:
    """A closed rows x cols square lattice of tensors, a bond of ``bond`` an edge."""
    terms = [[] for _ in range(rows * cols)]
    for label, (a, b) in enumerate(_grid_edges(rows, cols)):
        terms[a].append(label)
        terms[b].append(label)
    return Network(f"lattice {rows}x{cols} bond {bond}", tuple(map(tuple, terms)), (),
                   {x: bond for x in range(label + 1)}, "float32")


def peps_norm(rows: int = 6, cols: int = 6, bond: int = 5, phys: int = 2) -> Network:
    """<psi|psi> of a rows x cols PEPS: a ket and a bra layer of tensors, each site's pair
    joined by its physical index."""
    edges = list(_grid_edges(rows, cols))
    sites = rows * cols
    ket = [[] for _ in range(sites)]
    bra = [[] for _ in range(sites)]
    sizes = {}
    for e, (a, b) in enumerate(edges):
        for layer, offset in ((ket, 0), (bra, len(edges))):
            layer[a].append(offset + e)
            layer[b].append(offset + e)
            sizes[offset + e] = bond
    for s in range(sites):
        p = 2 * len(edges) + s
        ket[s].append(p)
        bra[s].append(p)
        sizes[p] = phys
    return Network(f"PEPS norm {rows}x{cols} bond {bond}",
                   tuple(map(tuple, ket + bra)), (), sizes, "float32")


def circuit(rows: int = 6, cols: int = 6, depth: int = 14, open_qubits: int = 0,
            seed: int = 14) -> Network:
    """A random circuit on a rows x cols grid of qubits: |0> inputs, each cycle a
    one-qubit gate on every qubit and two-qubit gates on one of four coupler patterns (as
    Google's random circuits), then <0| on all but the last ``open_qubits`` qubits, whose
    wires stay open (the output)."""
    rng = np.random.default_rng(seed)
    n = rows * cols
    wire = list(range(n))  # the label each qubit's wire carries now
    nxt = n
    terms = [(q,) for q in range(n)]  # the |0> inputs
    patterns = [[(a, b) for a, b in _grid_edges(rows, cols)
                 if (b - a == 1) == (k < 2) and (min(a % cols, a // cols) + k) % 2 == 0]
                for k in range(4)]
    for cycle in range(depth):
        for q in range(n):
            terms.append((wire[q], nxt))
            wire[q], nxt = nxt, nxt + 1
        pairs = patterns[cycle % 4] if patterns[cycle % 4] else patterns[0]
        for a, b in pairs:
            if rng.random() < 0.9:  # a coupler left out now and then
                terms.append((wire[a], wire[b], nxt, nxt + 1))
                wire[a], wire[b], nxt = nxt, nxt + 1, nxt + 2
    closed = n - open_qubits
    terms += [(wire[q],) for q in range(closed)]
    output = tuple(wire[q] for q in range(closed, n))
    name = f"circuit {rows}x{cols} depth {depth}" + (f", {open_qubits} open" if open_qubits
                                                       else "")
    return Network(name, tuple(terms), output, {x: 2 for x in range(nxt)}, "complex64")


def batched_product(batch: int = 128, side: int = 2048, inner: int = 65536) -> Network:
    """``bij,bjk->bik`` in float32 with a long inner dimension: operands of 69 GB each,
    larger together than one GPU's memory, and a 2.1 GB output (which a limit must hold:
    below it, the plan is refused)."""
    return Network(f"batched product {batch}x{side}x{side}x{inner}", ((0, 1, 2), (0, 2, 3)),
                   (0, 1, 3), {0: batch, 1: side, 2: inner, 3: side}, "float32")


NETWORKS = {"regular": random_regular, "lattice": lattice, "peps": peps_norm,
            "circuit": circuit, "circuit-open": lambda: circuit(open_qubits=6),
            "batched": batched_product}
"""The networks by the name ``--networks`` takes."""

def _plan(net: Network, limit, optimize, slicing=True, device=None):
    t0 = time.perf_counter()
    _, plan = contract_path(net.subscripts(), *net.shapes(), shapes=True, dtype=net.dtype,
                            memory_limit=limit, optimize=optimize, slicing=slicing,
                            device=device)
    return plan, time.perf_counter() - t0


def _row(net: Network, limit: str, planner: str, plan, seconds: float) -> dict:
    s = plan.slicing
    slices = 1 if s is None else s.num_slices
    overhead = 1.0 if s is None else s.overhead
    return {"network": net.name, "tensors": len(net.inputs), "limit": limit,
            "limit_bytes": _bytes(limit), "planner": planner, "planning_s": seconds,
            "slices": slices, "flops": float(plan.flops if s is None else s.flops),
            "overhead": overhead, "largest_intermediate": int(plan.largest_intermediate),
            "predicted_peak_bytes": None if s is None else int(s.peak_bytes),
            "path": [list(pair) for pair in plan.path],
            "chunks": {} if s is None else dict(s.chunks)}


def _bytes(limit: str) -> int:
    """A byte budget's bytes ("1GiB", "512MiB", "2kB": :func:`.slicing.budget_of`'s units)."""
    return budget_of(limit, []).bytes


def cotengra_row(net: Network, limit: str, target_size: int, max_time: float,
                 device=None) -> dict:
    """cotengra's search with slicing and reconfiguration to ``target_size`` elements, its
    path and slices then planned by skcontract (FLOPs counted alike; the peak model of
    ``device``'s executor)."""
    sym = {lab: get_symbol(i) for i, lab in enumerate(sorted(net.sizes))}
    inputs = [tuple(sym[x] for x in t) for t in net.inputs]
    sizes = {sym[x]: d for x, d in net.sizes.items()}
    opt = hyper(max_time=max_time, slicing_reconf_opts={"target_size": target_size})
    t0 = time.perf_counter()
    tree = timed_search(opt, inputs, tuple(sym[x] for x in net.output), sizes, max_time)
    seconds = time.perf_counter() - t0
    sliced = {ind: 1 for ind in tree.sliced_inds}
    path = list(tree.get_path())
    try:  # its slices must keep the limit as skcontract's do
        plan, _ = _plan(net, limit, path, slicing=sliced or True, device=device)
        fits = True
    except ValueError:
        plan, _ = _plan(net, None, path, slicing=sliced or True, device=device)
        fits = False
    return dict(_row(net, limit, "cotengra", plan, seconds), fits=fits)


def measure(net: Network, limit: str, max_time: float, log, device=None) -> list[dict]:
    """The network's three rows at ``limit``, planned for ``device``'s executor (None: the
    host's, NumPy)."""
    rows = []
    for planner, optimize in (("auto", "auto"), ("hyper", hyper(max_time=max_time))):
        try:
            plan, seconds = _plan(net, limit, optimize, device=device)
        except ValueError as e:  # a limit the planner's path and slicer do not keep
            log(f"   {planner} failed: {e}")
            continue
        rows.append(_row(net, limit, planner, plan, seconds))
    if rows:
        try:
            rows.append(cotengra_row(net, limit, rows[-1]["largest_intermediate"], max_time,
                                     device))
        except Exception as e:  # noqa: BLE001 - a failing peer is a missing row, logged
            log(f"   cotengra failed: {type(e).__name__}: {e}")
    for r in rows:
        log(f"   {r['planner']:<9} {r['planning_s']:7.2f} s  {r['slices']:>9,} slices  "
            f"FLOPs {r['flops']:.3e}  x{r['overhead']:.2f}  largest "
            f"{r['largest_intermediate']:,}")
    return rows


def summary(rows) -> list[str]:
    """Per network and limit: our best FLOPs over cotengra's (below 1: fewer)."""
    out = []
    keys = dict.fromkeys((r["network"], r["limit"]) for r in rows)
    for net, limit in keys:
        mine = {r["planner"]: r for r in rows if (r["network"], r["limit"]) == (net, limit)}
        if "cotengra" in mine:
            ours = min(mine[p]["flops"] for p in ("auto", "hyper") if p in mine)
            missed = "" if mine["cotengra"].get("fits", True) else \
                " (cotengra's slices miss the limit)"
            out.append(f"{net} at {limit}: ours / cotengra FLOPs "
                       f"{ours / mine['cotengra']['flops']:.3f}{missed}")
    return out


def render_markdown(doc) -> str:
    lines = [f"# Networks planned under memory limits ({doc['device']}, {doc['date']}, "
             f"commit {doc['commit']})", "",
             f"Search time of `hyper` and `cotengra`: {doc['max_time']} s each. FLOPs: every "
             "slice's, counted by skcontract for both (2 a multiply-add).", "",
             "| network | tensors | limit | planner | planning s | slices | FLOPs | overhead "
             "| largest | predicted peak bytes | keeps the limit |",
             "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in doc["rows"]:
        peak = "-" if r["predicted_peak_bytes"] is None else f"{r['predicted_peak_bytes']:,}"
        lines.append(f"| {r['network']} | {r['tensors']} | {r['limit']} | {r['planner']} | "
                     f"{r['planning_s']:.2f} | {r['slices']:,} | {r['flops']:.3e} | "
                     f"{r['overhead']:.2f} | {r['largest_intermediate']:,} | {peak} | "
                     f"{'no' if r.get('fits') is False else 'yes'} |")
    lines += ["", *[f"- {x}" for x in summary(doc["rows"])]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m skcontract bench networks",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/benchmarks",
                   help="folder the JSON and Markdown are written to (default: docs/benchmarks)")
    p.add_argument("--name", default="networks-cpu",
                   help="the files' base name (default: networks-cpu, planning only)")
    p.add_argument("--max-time", type=float, default=HYPER_SECONDS,
                   help=f"search seconds of hyper and cotengra (default {HYPER_SECONDS})")
    p.add_argument("--networks", default=",".join(NETWORKS),
                   help=f"comma-separated networks (default: all: {','.join(NETWORKS)})")
    p.add_argument("--limits", default=",".join(LIMITS),
                   help=f"comma-separated memory limits (default: {','.join(LIMITS)})")
    p.add_argument("--device", default=None, choices=("h100", "h200"),
                   help="plan for this GPU's executor (the plans bench networks-run runs; "
                        "default: the host's, NumPy)")
    args = p.parse_args(argv)
    unknown = set(args.networks.split(",")) - set(NETWORKS)
    if unknown:
        p.error(f"unknown networks {sorted(unknown)}; have {sorted(NETWORKS)}")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    planned_for = f"planned for the {args.device.upper()}" if args.device else "planning only"
    doc = {"date": _dt.date.today().isoformat(), "commit": run_commit(),
           "device": f"CPU {platform.machine()} ({planned_for})", "max_time": args.max_time,
           "planned_for": args.device, "rows": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for key in args.networks.split(","):
        net = NETWORKS[key]()
        for limit in args.limits.split(","):
            log(f"{net.name} ({len(net.inputs)} tensors, {len(net.sizes)} labels) at {limit}")
            doc["rows"] += measure(net, limit, args.max_time, log, args.device)
            (out / f"{args.name}.json").write_text(json.dumps(doc, indent=1))
            (out / f"{args.name}.md").write_text(render_markdown(doc))
    print(render_markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
