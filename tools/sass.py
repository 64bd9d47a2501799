"""Read a kernel's machine code without a GPU: compile a KernelSpec through NVRTC to a cubin,
disassemble it with ``nvdisasm`` and count the instructions of its inner loops.

    python -m tools.sass '<catalogue entry as JSON>' [--protocol P] [--layouts A,B] [--arch sm_90a]
                         [--dump FILE]

For each loop (a backward branch) that holds math instructions (DMMA / HMMA / IMMA / FFMA /
DFMA) it prints the loop's size, the count of each opcode and the instructions per math
instruction: the number that ncu's "issued instructions" divides into; for FFMA loops, the
share of FFMAs whose three reads meet in one register bank (:func:`fma_bank_conflicts`),
one cause of what ncu counts as dispatch stalls. ``nvdisasm`` comes
with the CUDA toolkit or the ``nvidia-cuda-nvdisasm`` wheel; this is a developer tool, not
a dependency.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from skcontract.kernels import jit, nvrtc, specs
from skcontract.kernels.catalogue import Entry

MATH_OPCODES = ("DMMA", "HMMA", "IMMA", "HGMMA", "FFMA", "DFMA")
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?"
                   r"(.*?);")
_TARGET = re.compile(r"`\(\.L_x_(\d+)\)|0x([0-9a-f]+)")
_LABEL = re.compile(r"^\.L_x_(\d+):")


def find_nvdisasm() -> str:
    path = shutil.which("nvdisasm")
    if path:
        return path
    for site in map(Path, sys.path):
        for cand in site.glob("nvidia/cu*/bin/nvdisasm"):
            return str(cand)
    raise FileNotFoundError("nvdisasm not found: install the CUDA toolkit or "
                            "`pip install nvidia-cuda-nvdisasm`")


def cubin_of(spec: specs.KernelSpec, arch: str) -> bytes:
    """The cubin the library builds for ``spec`` on ``arch`` (jit.compile_cubin)."""
    return nvrtc.compile_cubin(jit.render_source(spec), spec.name, [spec.name_expression],
                             jit.compile_options(arch)).cubin


def disassemble(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([find_nvdisasm(), "-c", f.name], check=True,
                              capture_output=True, text=True).stdout


def parse(sass: str):
    """[(address, opcode, full text)] and {label number: address}."""
    instrs, labels, pending = [], {}, []
    for line in sass.splitlines():
        lab = _LABEL.match(line.strip())
        if lab:
            pending.append(int(lab.group(1)))
            continue
        m = _LINE.search(line)
        if m:
            addr = int(m.group(1), 16)
            for p in pending:
                labels[p] = addr
            pending = []
            instrs.append((addr, m.group(3), line.strip()))
    return instrs, labels


def loops(instrs, labels):
    """(start, end) address ranges of backward branches, innermost first."""
    out = []
    for addr, op, text in instrs:
        if op != "BRA":
            continue
        t = _TARGET.search(text.split("BRA", 1)[1])
        if not t:
            continue
        target = labels.get(int(t.group(1))) if t.group(1) else int(t.group(2), 16)
        if target is not None and target <= addr:
            out.append((target, addr))
    return sorted(set(out), key=lambda r: r[1] - r[0])


_FMA_OPERANDS = re.compile(r"FFMA\S*\s+[^,]+,\s*([^,]+),\s*([^,]+),\s*([^,;]+)")
_REGISTER = re.compile(r"^-?\|?(R\d+)\|?(\.reuse)?$")
REGISTER_BANKS = 2
"""Register banks an FFMA's operands are read from (register number modulo this), the
model of the Volta-and-later register file that microbenchmarks found (Jia et al.,
"Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018): a bank serves
two of an instruction's reads a cycle, so an FFMA waits when its three reads all fall in
one bank. Hopper's is not documented."""


def fma_bank_conflicts(instrs, start: int, end: int) -> tuple[int, int]:
    """(FFMAs, FFMAs with a bank conflict) among ``instrs`` in [start, end]: a conflict is
    three source registers read from one bank (:data:`REGISTER_BANKS`), counting neither
    RZ, a constant or an immediate, nor an operand the previous instruction, an FFMA,
    flagged ``.reuse`` in the same slot (served by the operand reuse cache). A static
    count: ptxas' order, not the issue order."""
    fmas = conflicts = 0
    cached = (None, None, None)
    for addr, op, text in instrs:
        if not start <= addr <= end:
            continue
        m = _FMA_OPERANDS.search(text) if op == "FFMA" else None
        if m is None:
            cached = (None, None, None)
            continue
        regs, flags = [], []
        for token in m.groups():
            r = _REGISTER.match(token.strip())
            regs.append(r.group(1) if r else None)
            flags.append(bool(r and r.group(2)))
        read = [r for slot, r in enumerate(regs) if r is not None and cached[slot] != r]
        banks = collections.Counter(int(r[1:]) % REGISTER_BANKS for r in set(read))
        fmas += 1
        conflicts += max(banks.values(), default=0) >= 3
        cached = tuple(r if f else None for r, f in zip(regs, flags))
    return fmas, conflicts


def report(spec: specs.KernelSpec, arch: str = "sm_90a", dump: str | None = None) -> str:
    sass = disassemble(cubin_of(spec, arch))
    if dump:
        Path(dump).write_text(sass)
    instrs, labels = parse(sass)
    lines = [f"{spec.name} ({arch}): {len(instrs)} instructions"]
    for start, end in loops(instrs, labels):
        body = [op for a, op, _ in instrs if start <= a <= end]
        hist = collections.Counter(body)
        math = sum(hist[o] for o in MATH_OPCODES)
        if not math:
            continue
        top = " ".join(f"{o}:{c}" for o, c in hist.most_common(12))
        line = (f"  loop {start:#x}-{end:#x}: {len(body)} instr, {math} math, "
                f"{len(body) / math:.2f} per math | {top}")
        fmas, conflicts = fma_bank_conflicts(instrs, start, end)
        if fmas:
            line += f" | FFMA bank conflicts {conflicts} ({conflicts / fmas:.1%})"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("entry", help="a catalogue entry's fields as JSON "
                                 "(Entry.to_dict(), with its 'family')")
    p.add_argument("--protocol", default="deterministic")
    p.add_argument("--layouts", default="row,row", help="A,B layouts")
    p.add_argument("--arch", default="sm_90a")
    p.add_argument("--dump", help="write the whole disassembly here")
    args = p.parse_args(argv)
    entry = Entry.from_dict(json.loads(args.entry))
    la, lb = args.layouts.split(",")
    spec = specs.specialise(entry, protocol=args.protocol, a_layout=la, b_layout=lb)
    print(report(spec, args.arch, args.dump))
    return 0


if __name__ == "__main__":
    sys.exit(main())
