"""Compile kernel specs into the kernel cache (jit.cache_dir) ahead of a run, in parallel
processes (GPU).

    python -m tools.warm_kernels [--warm all|representative|default-tiles] [--jobs 8]
                                 [--dtypes float32,float64] [--families WgmmaPair]

``all`` is every spec the launcher can choose (specs.all_specs()), ``default-tiles`` those
of the entries auto plans over (all but :data:`~skcontract.kernels.catalogue.PENDING`'s),
and ``representative`` the CI compile set. Each line of output is one spec, ``ok`` with its
occupancy or ``FAIL`` with the error; the exit status is 1 if any failed.
"""
from __future__ import annotations

import argparse
import sys

from skcontract.kernels import jit, specs
from skcontract.kernels.catalogue import PENDING


def select(which: str, dtypes: str = "", families: str = "") -> list[specs.KernelSpec]:
    """The specs ``--warm which`` compiles, kept to the comma lists ``dtypes`` and
    ``families`` (catalogue family names) if given."""
    if which == "representative":
        todo = specs.representative_specs()
    else:
        todo = specs.all_specs()
    if which == "default-tiles":
        pending = {b for entries in PENDING.values() for b in entries}
        todo = [s for s in todo if s.entry not in pending]
    if dtypes:
        keep = set(dtypes.split(","))
        todo = [s for s in todo if s.dtype_in in keep]
    if families:
        keep = set(families.split(","))
        todo = [s for s in todo if s.entry.FAMILY in keep]
    return todo


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.warm_kernels",
                                description=__doc__.splitlines()[0])
    p.add_argument("--warm", choices=["all", "representative", "default-tiles"], default="all")
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--dtypes", default="", help="comma list of input dtypes (default: all)")
    p.add_argument("--families", default="", help="comma list of families (default: all)")
    args = p.parse_args(argv)
    lines = jit.warm(select(args.warm, args.dtypes, args.families), args.jobs)
    for line in lines:
        print(line)
    bad = [x for x in lines if x.startswith("FAIL")]
    print(f"warmed {len(lines) - len(bad)}/{len(lines)} kernels")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
