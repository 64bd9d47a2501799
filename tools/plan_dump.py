"""Plans as text: does a change to the planner leave every plan as it was?

``python -m tools.plan_dump OUT`` plans a fixed corpus with ``contract_path`` and writes one
JSON line a case to OUT: the arguments, and the path, the plan's table and the repr of its
steps. The corpus: products with broadcast, diagonal, ellipsis and size-0/1 dimensions at
several sizes, random networks (some under a memory limit), several dtypes and optimisers,
as shapes and as arrays; each case is planned twice, the second time after contract_path's
kept plans are forgotten (the size-free forms kept, as for a new size of a known structure).
Run it on the checkout before the change and on the one after.

``--device NAME`` (repeatable: "h200", "h100") plans the corpus for that preset too (after
the cases above): each record then also holds every GEMM-class step's launch (its schedule's
summary, table digest, predicted time, efficiency and waves, the candidates priced, and
the kernel), so that a change to the scheduler or the cost model can be compared as well.

``python -m tools.plan_dump --compare OLD NEW`` lists the cases whose plans differ; exit
status 1 where any does.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import zlib

import numpy as np
from opt_einsum.testing import rand_equation

from skcontract import contract as C
from skcontract.contract import contract_path

PRODUCTS = ["bij,bjk->bik", "ij,jk->ik", "ij,jk", "ii->i", "ii", "ij,ij->", "i,j->ij",
            "abc,cd->abd", "...ij,...jk->...ik", "ab,bc,cd,de,ef,fg->ag", "ijk,jkl->il",
            "bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd", "ij,j->i", "i,i->", "iij,jk->ik",
            "abcd,cdef->abef", "a,a,a->a", "ab,ab,ab->", "ijk->kji", "ij,kl->ijkl",
            "xyz,zw,wx->y", "ji,jk->ik", "cba,cb->a"]
SIZES = [1, 2, 3, 5, 8, 16, 64, 100, 256]
DTYPES = (None, "float32", "complex128", "int32")
NETWORKS = 60
SEED = 1


def _product_cases(rng: random.Random):
    """(subscripts, shapes, keywords) of each product at six random sizes, planned with the
    default optimiser and with optimize=True."""
    for eq in PRODUCTS:
        terms = eq.split("->")[0].split(",")
        for _ in range(6):
            size = {}
            for t in terms:
                for c in t.replace("...", ""):
                    size.setdefault(c, rng.choice(SIZES))
            ell = tuple(rng.choice([1, 2, 4]) for _ in range(rng.randint(0, 2)))
            shapes = [(ell if "..." in t else ()) + tuple(size[c] for c in t.replace("...", ""))
                      for t in terms]
            yield eq, shapes, {}
            yield eq, shapes, {"optimize": True}


def _network_cases(rng: random.Random):
    """Random networks, some with the greedy optimiser and some under a memory limit."""
    for seed in range(NETWORKS):
        eq, shapes = rand_equation(rng.randint(3, 12), rng.randint(2, 4), n_out=rng.randint(0, 3),
                                   d_min=1, d_max=9, seed=seed)[:2]
        yield eq, shapes, {}
        if seed % 3 == 0:
            yield eq, shapes, {"optimize": "greedy"}
        if seed % 5 == 0:
            yield eq, shapes, {"memory_limit": max(2, max(int(np.prod(s)) for s in shapes))}


def cases():
    """Every (subscripts, shapes, keywords) of the corpus."""
    rng = random.Random(SEED)
    yield from _product_cases(rng)
    yield from _network_cases(rng)
    yield "ij,jk->ik", [(1, 5), (5, 7)], {}
    yield "bij,bjk->bik", [(1, 3, 4), (6, 4, 2)], {}
    yield "ij,jk->ik", [(0, 5), (5, 7)], {}


def _planned(subscripts, operands, keywords) -> dict:
    try:
        path, plan = contract_path(subscripts, *operands, **keywords)
    except Exception as e:  # noqa: BLE001 - an error is a result to compare too
        return {"error": f"{type(e).__name__}: {e}"}
    record = {"path": repr(path), "table": str(plan), "steps": repr(plan.steps)}
    if keywords.get("device") is not None:
        record["launches"] = _launches(plan)
    return record


def _launches(plan) -> list:
    """Each GEMM-class step's launch as text (None for the others): its schedule's summary,
    table digest, predicted time, efficiency and waves, candidates and kernel, or why the
    step has none."""
    out = []
    for step in plan.steps:
        launch = getattr(step, "launch", None)
        schedule = getattr(launch, "schedule", None)
        if schedule is None:
            out.append(step.unscheduled if launch is None else repr(launch))
            continue
        out.append([schedule.summary(), schedule.digest(), repr(schedule.predicted_time_us),
                    repr(schedule.predicted_efficiency), repr(schedule.waves),
                    repr(schedule.candidates), repr(launch.spec)])
    return out


def _picked(eq, shapes) -> list:
    """The dtypes a case is planned with: None, and the others a checksum picks (all of
    them for a quarter of the cases)."""
    return [dt for dt in DTYPES if dt is None or
            zlib.crc32(repr((eq, shapes, dt)).encode()) % 4 == 0]


def records(devices=()):
    """One record a case and planning (fresh, then from kept forms): shapes with the dtypes
    :func:`_picked` picks, and arrays; then, for each of ``devices``, the shapes planned for
    that preset, with the launches (:func:`_launches`)."""
    for again in (False, True):
        if again:
            C._PATHS.clear()
        for eq, shapes, kw in cases():
            for dt in _picked(eq, shapes):
                args = dict(kw, shapes=True, dtype=dt)
                yield {"case": repr((eq, shapes, args, again)),
                       **_planned(eq, shapes, args)}
            arrays = [np.broadcast_to(np.zeros((), np.float64), s) for s in shapes]
            yield {"case": repr((eq, shapes, kw, "arrays", again)), **_planned(eq, arrays, kw)}
    for device in devices:
        for eq, shapes, kw in cases():
            for dt in _picked(eq, shapes):
                args = dict(kw, shapes=True, dtype=dt, device=device)
                yield {"case": repr((eq, shapes, args)), **_planned(eq, shapes, args)}


def compare(old: str, new: str) -> int:
    """Print the cases whose records differ between two dumps; 1 where any does."""
    with open(old) as f:
        before = [json.loads(line) for line in f]
    with open(new) as f:
        after = [json.loads(line) for line in f]
    if [r["case"] for r in before] != [r["case"] for r in after]:
        print("the dumps hold different cases")
        return 1
    differ = [b["case"] for b, a in zip(before, after) if a != b]
    for case in differ:
        print("differs:", case)
    print(f"{len(before)} cases, {len(differ)} differ")
    return 1 if differ else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.plan_dump",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="the JSON-lines file to write")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--device", action="append", default=[], metavar="NAME",
                    help="plan the corpus for this device preset too (h200, h100)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("give OUT, or --compare OLD NEW")
    n = 0
    with open(args.out, "w") as f:
        for record in records(args.device):
            f.write(json.dumps(record) + "\n")
            n += 1
    print(f"{n} cases written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
