"""Compile KernelSpecs through NVRTC with no GPU (CI's check).

``python -m tools.compile_check`` compiles the representative specs (every catalogue entry)
for sm_90a and sm_80; ``--sampled`` the sample CI compiles (:func:`sampled_specs`);
``--all`` every spec the launcher can choose (specs.all_specs()), the one command that
compiles everything. Each spec is built for the targets it is offered on
(``KernelSpec.min_cc``). The compiles run in worker subprocesses, one a core (NVRTC has been
seen to crash on bad code: a compile that kills its worker is compiled again alone in a
fresh one). ``--ptxas-options=-v`` is read for registers, shared memory and spills; a
spill, a ptxas error, a crash, (on sm_90a) registers and shared memory that leave room for
fewer CTAs per SM than the catalogue entry declares (``ctas_per_sm``), or a register count
other than the one an entry's register split needs (``launch_registers``) fail the spec and
name it. Exit status 0 only if every spec passed. ``--text-hashes OUT.json`` also writes the
sha256 of every ``.text`` section (a kernel's SASS) of each compile, by target and spec: two
trees' files, compared with ``diff``, say which kernels' machine code a change touched.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from skcontract.kernels import jit, nvrtc, specs
from skcontract.kernels.catalogue import ARCH_CC, VEC16_BYTES

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
    cpu_seconds: float | None = None
    """The compile's CPU time in its worker process (wall ``seconds`` grow with other load)."""
    text: dict | None = None
    """sha256 of each ``.text`` section of the cubin, by section name (:func:`text_sections`)."""


@dataclass(frozen=True)
class Source:
    """A translation unit that is no catalogue spec (an auxiliary copy kernel, a probe or
    traced build): check() compiles it, instantiating ``name_expressions``, for the targets
    of compute capability ``min_cc`` or more, and fails it on a compile error or a spill."""

    name: str
    source: str
    name_expressions: tuple[str, ...]
    min_cc: int = 0

    def offered_on(self, cc: int | None) -> bool:
        return cc is None or cc >= self.min_cc


def compile_one(spec: specs.KernelSpec, arch: str) -> dict:
    """Compile in this process with cuda.bindings.nvrtc; returns registers/spills/log."""
    return compile_source(jit.render_source(spec), spec.name, (spec.name_expression,), arch)


def compile_source(source: str, name: str, name_expressions, arch: str) -> dict:
    """Compile a translation unit as the library does (jit.compile_cubin), instantiating
    ``name_expressions``: ``{"compiled", "log", "cubin_bytes", "text"}`` (the log holds
    ptxas's registers and spills; ``text``, :func:`text_sections` of the cubin)."""
    options = jit.compile_options(arch) + ("--ptxas-options=-v",)
    try:
        built = nvrtc.compile_cubin(source, name, name_expressions, options)
    except nvrtc.CompileError as e:
        return {"compiled": False, "log": str(e)}
    return {"compiled": True, "log": built.log, "cubin_bytes": len(built.cubin),
            "text": text_sections(built.cubin)}


def text_sections(cubin: bytes) -> dict[str, str]:
    """sha256 of each ``.text`` section (a kernel's machine code) of an ELF64 cubin, by
    section name."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
               for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name_off, _type, _flags, _addr, off, size, *_ in headers:
        start = names_at + name_off
        name = cubin[start:cubin.index(b"\0", start)].decode()
        if name.startswith(".text"):
            out[name] = hashlib.sha256(cubin[off:off + size]).hexdigest()
    return out


def copy_kind(spec: specs.KernelSpec, operand: str) -> str:
    """How the kernel of ``spec`` copies operand ``"a"`` or ``"b"`` into shared memory:
    ``"vec16"`` (16-byte vectors) or ``"element"`` (element-wise: a misaligned operand's,
    or an x-contiguous one's of a one-row tile)."""
    vec = spec.a_vec if operand == "a" else spec.b_vec
    return "vec16" if vec * spec.elem_bytes >= VEC16_BYTES else "element"


def compile_cost(item) -> float:
    """A rough guess at the CPU time of one compile of ``item`` (a KernelSpec or a
    :class:`Source`), for one target: check() starts the costliest first, and
    :func:`sampled_specs` picks the cheapest specs that cover what it needs. ptxas's work
    grows with the accumulators a thread keeps and the elements it copies a stage, more for
    element-wise copies and an im2col A. Fitted by eye to NVRTC 13's times on the
    representative set (about 1.7 units a second; within a factor of two of that)."""
    if isinstance(item, Source):
        return 0.5
    spec = item
    element = sum(copy_kind(spec, op) == "element" for op in ("a", "b"))
    work = (spec.bm * spec.bn + (spec.bm + spec.bn) * spec.bk) / spec.threads
    return 0.1 + work / 80 * (1 + 0.3 * element) * (1.5 if spec.im2col else 1.0)


def _child_env() -> dict:
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(ROOT) + (os.pathsep + path if path else ""))


def _request(item, arch: str) -> dict:
    """The JSON job a ``--serve`` worker compiles."""
    if isinstance(item, Source):
        return {"source": item.source, "label": item.name,
                "names": list(item.name_expressions), "arch": arch}
    return {"spec": item.to_dict(), "arch": arch}


_REPLY = "@compile_check "
"""Prefix of a ``--serve`` worker's reply line (anything else it prints is not a reply)."""


class _Worker:
    """A ``--serve`` subprocess that compiles one job after another: the Python start and
    the package's import (a few tenths of a second of CPU) are paid once a worker, not once
    a compile. A compile that kills it or runs past the timeout ends the worker; the next
    job starts a new one."""

    def __init__(self):
        self.proc = None
        self.stderr = None

    def _start(self):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.compile_check", "--serve"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, text=True, cwd=ROOT, env=_child_env())

    def compile(self, request: dict, timeout: float):
        """``(reply, error)``: the worker's reply (compile_source's dict and its
        ``cpu_seconds``) and None, or None and why there is none (the worker died or ran
        past ``timeout`` seconds; it is gone then)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        proc, expired = self.proc, threading.Event()

        def expire():
            expired.set()
            proc.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                if line.startswith(_REPLY):
                    return json.loads(line[len(_REPLY):]), None
        except OSError:  # the worker is gone (a broken pipe)
            pass
        finally:
            timer.cancel()
        self.stderr.seek(0)
        log = self.stderr.read()[-2000:]
        self.close()
        if expired.is_set():
            return None, f"timed out after {timeout}s"
        return None, f"worker exited {proc.returncode}: {log}"

    def close(self):
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.close()  # the worker's loop ends at EOF
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        proc.stdout.close()
        self.stderr.close()


def _serve() -> int:
    """``--serve``: a JSON job (:func:`_request`) a line on stdin, a reply line each."""
    for line in sys.stdin:
        job = json.loads(line)
        t0 = time.process_time()
        if "spec" in job:
            reply = compile_one(specs.KernelSpec.from_dict(job["spec"]), job["arch"])
        else:
            reply = compile_source(job["source"], job["label"], job["names"], job["arch"])
        reply["cpu_seconds"] = time.process_time() - t0
        print(_REPLY + json.dumps(reply), flush=True)
    return 0


def _result(item, arch: str, data: dict, dt: float) -> Result:
    """The verdict on one compile's reply (compile_source's dict)."""
    log = data["log"]
    cpu = data.get("cpu_seconds")
    text = data.get("text")
    if not data["compiled"]:
        return Result(item.name, arch, False, None, None, dt, "compile failed:\n" + log[-4000:],
                      cpu_seconds=cpu)
    regs = [int(r) for r in _REG_RE.findall(log)]
    spills = [int(a) + int(b) for a, b in _SPILL_RE.findall(log)]
    spill = max(spills) if spills else None
    if isinstance(item, Source):
        ok = spill == 0
        msg = "" if ok else ("register spills:\n" if spill else "no ptxas report in log:\n") \
            + log[-2000:]
        return Result(item.name, arch, ok, max(regs) if regs else None, spill, dt, msg,
                      cpu_seconds=cpu, text=text)
    spec = item
    static = max([int(x) for x in _SMEM_RE.findall(log)] or [0])
    occ = occupancy(max(regs), spec.threads, spec.smem_bytes + static, arch) if regs else 0
    ok = spill == 0 and (arch != "sm_90a" or occ >= spec.ctas_per_sm)
    want_regs = spec.entry.launch_registers
    if ok and want_regs is not None and regs and max(regs) != want_regs:
        return Result(spec.name, arch, False, max(regs), spill, dt,
                      f"{max(regs)} registers; the kernel's register split needs {want_regs}",
                      occ, cpu, text)
    if spill is None:
        msg = "no ptxas report in log:\n" + log[-2000:]
    elif spill:
        msg = "register spills:\n" + log[-2000:]
    elif not ok:
        msg = (f"{max(regs)} registers and {spec.smem_bytes + static} bytes of shared memory "
               f"fit {occ} CTAs per SM; the entry declares {spec.ctas_per_sm}")
    else:
        msg = ""
    return Result(spec.name, arch, ok, max(regs) if regs else None, spill, dt, msg, occ, cpu,
                  text)


def _report(r: Result) -> None:
    status = "ok  " if r.ok else "FAIL"
    lines = [f"{status} {r.arch:7s} regs={r.registers} spill={r.spill_bytes} "
             f"occ={r.occupancy} {r.seconds:5.1f}s {r.spec}"]
    if not r.ok:
        lines.append("     " + r.message.replace("\n", "\n     "))
    print("\n".join(lines), flush=True)  # one write: the threads' lines do not interleave


def check(spec_list, archs=ARCHS, jobs: int | None = None, timeout: float = 600.0,
          verbose: bool = True) -> list[Result]:
    """Compile each spec of ``spec_list`` (KernelSpecs, or :class:`Source` units) for each
    of ``archs`` it is offered on, ``jobs`` compiles at a time (default: one a CPU core), the
    costliest first (:func:`compile_cost`) so that no core idles at the end, each printed
    as it finishes when ``verbose``; the results in the order of ``spec_list`` x ``archs``.
    Each of the ``jobs`` threads feeds one ``--serve`` worker process; a compile that kills
    its worker is compiled again alone in a fresh worker, so that the verdict is its own."""
    jobs = jobs or max(1, os.cpu_count() or 1)
    work = [(s, a) for s in spec_list for a in archs
            if (s if isinstance(s, Source) else s.entry).offered_on(ARCH_CC.get(a))]
    order = sorted(range(len(work)), key=lambda i: -compile_cost(work[i][0]))
    local, workers = threading.local(), []

    def expired(error: str) -> bool:
        return error.startswith("timed out")

    def run(i: int) -> Result:
        result = compile_item(*work[i])
        if verbose:  # as they finish: --all runs for the best part of an hour
            _report(result)
        return result

    def compile_item(item, arch: str) -> Result:
        if not hasattr(local, "worker"):
            local.worker = _Worker()
            workers.append(local.worker)
        t0 = time.perf_counter()
        reply, error = local.worker.compile(_request(item, arch), timeout)
        if reply is None and not expired(error):
            alone = _Worker()  # the compile that killed the worker, or one before it?
            try:
                reply, error = alone.compile(_request(item, arch), timeout)
            finally:
                alone.close()
        if reply is None:
            return Result(item.name, arch, False, None, None, time.perf_counter() - t0, error)
        return _result(item, arch, reply, time.perf_counter() - t0)

    try:
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            done = dict(zip(order, ex.map(run, order)))
    finally:
        for w in workers:
            w.close()
    return [done[i] for i in range(len(work))]


def coverage(spec: specs.KernelSpec) -> set[tuple]:
    """What compiling ``spec`` (for every target its entry is offered on) exercises, as
    :func:`sampled_specs` counts it: per kernel family (``Entry.FAMILY``) its dtype,
    fixup protocol, each operand's layout and copy (:func:`copy_kind`) and the targets;
    where the kernel has them, its im2col A (and that A's copy), its merged-groups
    convolution kernel (each of its fixups), its in-stage transposers,
    its register split and its HyTiS small tile."""
    entry, fam = spec.entry, spec.entry.FAMILY
    out = {("dtype", fam, entry.dtype), ("protocol", fam, spec.protocol),
           ("A layout", fam, spec.a_layout), ("B layout", fam, spec.b_layout),
           ("A copy", fam, copy_kind(spec, "a")), ("B copy", fam, copy_kind(spec, "b"))}
    out |= {("target", fam, a) for a in ARCHS if entry.offered_on(ARCH_CC.get(a))}
    if spec.im2col:
        out |= {("im2col", fam), ("im2col A copy", fam, copy_kind(spec, "a"))}
    if spec.merged:
        out.add(("merged groups", fam, spec.protocol))
    if entry.transposes(spec):
        out.add(("transposes", fam))
    split = getattr(entry, "register_split_of", lambda s: None)(spec)
    if split:
        out.add(("register split", fam, tuple(split)))
        if spec.merged:  # its recomputation within the consumers' traded registers
            out.add(("merged register split", fam, tuple(split)))
    if getattr(entry, "small_bn_of", lambda s: 0)(spec):
        out.add(("small tile", fam))
    return out


def sampled_specs() -> list[specs.KernelSpec]:
    """The specs CI compiles (tests/cpu/test_kernels_compile.py): few, and between them
    all that :func:`coverage` counts in ``specs.all_specs()``.

    Per kernel family (``Entry.FAMILY``): every dtype it has, every fixup protocol its
    entries run (``entry.protocols()``, the ``cluster`` reduction included), both layouts of
    each operand, 16-byte and element-wise copies of each operand where it has both, its
    convolution (im2col) entry, aligned and not, where it has one, and every register split
    its kernels take (the register-trading Wgmma entries' at one and two CTAs an SM, the
    pairs', tf32's, and the transposing 3xTF32 kernel's); the Wgmma kernels' in-stage
    transposers (3xTF32 on an MN-major operand) and HyTiS small tile. The cluster pairs are a
    family of their own (``WgmmaPair``). check() builds each spec for sm_90a and for sm_80
    where its entry is offered there (``min_cc``), so every family is built for each target
    it runs on.

    Why a sample: ``all_specs()`` is some 1800 specs (about 3000 compiles: most of an hour
    on 2 cores, ``python -m tools.compile_check --all``, the one command that compiles
    everything), and the representative set, every catalogue entry at least once, 145 specs
    (224 compiles: a few minutes, ``python -m tools.compile_check``); CI's 2 cores compile
    this one in under half a minute. What it leaves out is what tells the entries of one
    family and dtype apart (tile, stages, occupancy) and the combinations of the features
    above (the (A, B) layout pairs, a protocol with each copy): the two tools compile those.

    Chosen greedily: the spec that adds the most features not yet covered per unit of
    compiling (:func:`compile_cost`, times its targets), the first such in
    ``all_specs()``'s order, until all are covered; so the sample leans on each family's
    smallest tiles. A new family, dtype, protocol, layout, copy or convolution entry enters
    it by itself, and the test beside CI's compile checks the coverage against
    ``all_specs()``. Every spec in it is one the launcher can choose: a spill there is a
    real failure, whatever the sample's choice.
    """
    candidates = specs.all_specs()
    pool = [(s, coverage(s), compile_cost(s) * sum(s.entry.offered_on(ARCH_CC.get(a))
                                                   for a in ARCHS))
            for s in candidates]
    wanted = set().union(*(c for _, c, _ in pool))
    out, covered = [], set()
    while covered < wanted:
        spec, cov, _ = max(pool, key=lambda p: len(p[1] - covered) / p[2])
        out.append(spec)
        covered |= cov
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.compile_check")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true",
                       help="every spec the launcher can choose (specs.all_specs())")
    which.add_argument("--sampled", action="store_true",
                       help="CI's sample (sampled_specs()): every family, dtype, protocol, "
                            "layout, copy and im2col entry at least once")
    p.add_argument("--arch", action="append", help="target(s); default sm_90a and sm_80")
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--text-hashes", metavar="OUT.json",
                   help="write the sha256 of each compile's .text sections (its SASS) there, "
                        "by target and spec")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        return _serve()
    if args.one:
        spec = specs.KernelSpec.from_dict(json.loads(args.one))
        print(json.dumps(compile_one(spec, (args.arch or ["sm_90a"])[0])))
        return 0
    if args.all:
        spec_list = specs.all_specs()
    elif args.sampled:
        spec_list = sampled_specs()
    else:
        spec_list = specs.representative_specs()
    results = check(spec_list, tuple(args.arch) if args.arch else ARCHS, args.jobs)
    if args.text_hashes:
        hashes = {f"{r.arch} {r.spec}": r.text for r in results}
        Path(args.text_hashes).write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    bad = [r for r in results if not r.ok]
    print(f"{len(results) - len(bad)}/{len(results)} compiles passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
