"""Compile KernelSpecs through NVRTC with no GPU (CI's check).

``python -m tools.compile_check`` compiles the representative specs for sm_90a
and sm_80; ``--all`` compiles every spec the launcher can choose (specs.all_specs()), each
for the targets it is offered on (``KernelSpec.min_cc``).
Each compile runs in its own subprocess (NVRTC has been seen to crash on bad code), several
in parallel. ``--ptxas-options=-v`` is read for registers, shared memory and spills; a
spill, a ptxas error, a crash, (on sm_90a) registers and shared memory that leave room for
fewer CTAs per SM than the catalogue entry declares (``ctas_per_sm``), or a register count
other than the one an entry's register split needs (``launch_registers``) fail the spec and
name it. Exit status 0 only if every spec passed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from skcontract.kernels import jit, nvrtc, specs
from skcontract.kernels.catalogue import ARCH_CC

ARCHS = ("sm_90a", "sm_80")
ROOT = Path(__file__).resolve().parents[1]
"""The checkout holding tools/ and skcontract/: each compile subprocess imports both from it."""
_SPILL_RE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_REG_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


@dataclass(frozen=True)
class SmLimits:
    """What one SM offers resident CTAs (the CUDA occupancy rules of one architecture)."""

    registers: int = 65536
    register_unit: int = 256        # registers are allocated per warp in these units
    max_warps: int = 64
    max_ctas: int = 32
    smem_bytes: int = 233472        # shared memory per SM
    smem_reserved_per_cta: int = 1024
    smem_unit: int = 128


SM_LIMITS = {"sm_90a": SmLimits(), "sm_80": SmLimits(smem_bytes=167936)}


def occupancy(registers: int, threads: int, smem_bytes: int, arch: str = "sm_90a") -> int:
    """CTAs of a kernel with these resources that fit on one SM of ``arch``."""
    lim = SM_LIMITS[arch]
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // lim.register_unit) * lim.register_unit
    by_regs = lim.registers // (per_warp * warps) if registers else lim.max_ctas
    smem = -(-(smem_bytes + lim.smem_reserved_per_cta) // lim.smem_unit) * lim.smem_unit
    return min(by_regs, lim.max_warps // warps, lim.smem_bytes // smem, lim.max_ctas)


@dataclass
class Result:
    spec: str
    arch: str
    ok: bool
    registers: int | None
    spill_bytes: int | None
    seconds: float
    message: str
    occupancy: int | None = None


def compile_one(spec: specs.KernelSpec, arch: str) -> dict:
    """Compile in this process with cuda.bindings.nvrtc; returns registers/spills/log."""
    return compile_source(jit.render_source(spec), spec.name, (spec.name_expression,), arch)


def compile_source(source: str, name: str, name_expressions, arch: str) -> dict:
    """Compile a translation unit as the library does (jit.compile_cubin), instantiating
    ``name_expressions``: ``{"compiled", "log", "cubin_bytes"}`` (the log holds ptxas's
    registers and spills)."""
    options = jit.compile_options(arch) + ("--ptxas-options=-v",)
    try:
        built = nvrtc.compile_cubin(source, name, name_expressions, options)
    except nvrtc.CompileError as e:
        return {"compiled": False, "log": str(e)}
    return {"compiled": True, "log": built.log, "cubin_bytes": len(built.cubin)}


def _run_subprocess(spec: specs.KernelSpec, arch: str, timeout: float) -> Result:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "tools.compile_check", "--one",
           json.dumps(spec.to_dict()), "--arch", arch]
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return Result(spec.name, arch, False, None, None, time.perf_counter() - t0,
                      f"timed out after {timeout}s")
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        return Result(spec.name, arch, False, None, None, dt,
                      f"subprocess exited {proc.returncode}: {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    log = data["log"]
    if not data["compiled"]:
        return Result(spec.name, arch, False, None, None, dt, "compile failed:\n" + log[-4000:])
    regs = [int(r) for r in _REG_RE.findall(log)]
    spills = [int(a) + int(b) for a, b in _SPILL_RE.findall(log)]
    spill = max(spills) if spills else None
    static = max([int(x) for x in _SMEM_RE.findall(log)] or [0])
    occ = occupancy(max(regs), spec.threads, spec.smem_bytes + static, arch) if regs else 0
    ok = spill == 0 and (arch != "sm_90a" or occ >= spec.ctas_per_sm)
    want_regs = spec.base.launch_registers
    if ok and want_regs is not None and regs and max(regs) != want_regs:
        return Result(spec.name, arch, False, max(regs), spill, dt,
                      f"{max(regs)} registers; the kernel's register split needs {want_regs}",
                      occ)
    if spill is None:
        msg = "no ptxas report in log:\n" + log[-2000:]
    elif spill:
        msg = "register spills:\n" + log[-2000:]
    elif not ok:
        msg = (f"{max(regs)} registers and {spec.smem_bytes + static} bytes of shared memory "
               f"fit {occ} CTAs per SM; the entry declares {spec.ctas_per_sm}")
    else:
        msg = ""
    return Result(spec.name, arch, ok, max(regs) if regs else None, spill, dt, msg, occ)


def check(spec_list, archs=ARCHS, jobs: int | None = None, timeout: float = 600.0,
          verbose: bool = True) -> list[Result]:
    jobs = jobs or max(1, os.cpu_count() or 1)
    work = [(s, a) for s in spec_list for a in archs if s.base.offered_on(ARCH_CC.get(a))]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        results = list(ex.map(lambda sa: _run_subprocess(sa[0], sa[1], timeout), work))
    if verbose:
        for r in results:
            status = "ok  " if r.ok else "FAIL"
            print(f"{status} {r.arch:7s} regs={r.registers} spill={r.spill_bytes} "
                  f"occ={r.occupancy} {r.seconds:5.1f}s {r.spec}", flush=True)
            if not r.ok:
                print("     " + r.message.replace("\n", "\n     "), flush=True)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.compile_check")
    p.add_argument("--all", action="store_true", help="every spec the launcher can choose")
    p.add_argument("--arch", action="append", help="target(s); default sm_90a and sm_80")
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        spec = specs.KernelSpec.from_dict(json.loads(args.one))
        print(json.dumps(compile_one(spec, (args.arch or ["sm_90a"])[0])))
        return 0
    spec_list = specs.all_specs() if args.all else specs.representative_specs()
    results = check(spec_list, tuple(args.arch) if args.arch else ARCHS, args.jobs)
    bad = [r for r in results if not r.ok]
    print(f"{len(results) - len(bad)}/{len(results)} compiles passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
