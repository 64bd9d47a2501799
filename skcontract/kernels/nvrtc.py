"""Compiling a CUDA translation unit with NVRTC (cuda.bindings), in this process or a child.

The library compiles its kernels in a child process (:func:`compile_isolated`): a compile
through cuda.bindings' NVRTC leaves process-wide state behind, and on the H200 (NVRTC 13,
torch 2.11) importing torch after it fails to parse torch's own operator schemas. The
child runs this file as a script, by path: it imports nothing from the package (neither
the package's import cost nor another checkout's ``skcontract`` in the working directory
can reach it), and it drops its own directory from ``sys.path`` before importing
cuda.bindings (the kernels' ``cuda/`` folder lives beside it).

This module imports only the standard library at load time, so that it runs as that
script; ``jit`` re-exports what the package uses.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

COMPILE_TIMEOUT_S = 900
"""Seconds a child compile may take before :func:`compile_isolated` gives up on it (the
largest kernels compile in under a minute)."""


class CompileError(RuntimeError):
    """NVRTC refused a kernel's source, or the compile child failed; the message says how."""


class Compiled(NamedTuple):
    """One translation unit compiled: the cubin, each name expression's lowered (mangled)
    name, and NVRTC's log (ptxas's registers and spills with ``--ptxas-options=-v``)."""

    cubin: bytes
    lowered: dict
    log: str


def compile_cubin(source: str, label: str, name_expressions, options) -> Compiled:
    """Compile ``source`` with NVRTC in this process for the ``-arch`` in ``options`` (no GPU
    needed), instantiating ``name_expressions``. CompileError with NVRTC's log if it fails.
    The tools call it; the library calls :func:`compile_isolated`."""
    from cuda.bindings import nvrtc  # optional dependency: the GPU path's (and the CPU check's)

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{label}.cu".encode(), 0, [], [])
    if err != ok:
        raise CompileError(f"nvrtcCreateProgram({label}): {err}")
    try:
        for expr in name_expressions:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, expr.encode())
            if err != ok:
                raise CompileError(f"nvrtcAddNameExpression({expr}): {err}")
        opts = [o.encode() for o in options]
        (cerr,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log = log.decode(errors="replace").rstrip("\x00")
        if cerr != ok:
            raise CompileError(f"{label} does not compile ({cerr}):\n{log}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        lowered = {}
        for expr in name_expressions:
            err, name = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
            if err != ok:
                raise CompileError(f"nvrtcGetLoweredName({expr}): {err}")
            lowered[expr] = name.decode()
        return Compiled(cubin, lowered, log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_isolated(source: str, label: str, name_expressions, options) -> Compiled:
    """:func:`compile_cubin` in a child Python process (this file as a script): it costs a
    Python start (a few tenths of a second) on a kernel's first use only."""
    request = json.dumps({"source": source, "label": label, "names": list(name_expressions),
                          "options": list(options)})
    with tempfile.TemporaryDirectory(prefix="skcontract-") as tmp:
        target = Path(tmp) / "kernel.cubin"
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(target)],
                                  input=request, capture_output=True, text=True, cwd=tmp,
                                  timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CompileError(f"{label}: the compile took over {COMPILE_TIMEOUT_S} s") from None
        lines = proc.stdout.strip().splitlines()
        try:
            reply = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise CompileError(f"{label}: the compile child exited {proc.returncode} with no "
                               f"reply:\n{proc.stderr.strip()}") from None
        if "error" in reply:
            raise CompileError(reply["error"])
        return Compiled(target.read_bytes(), reply["lowered"], reply["log"])


def _child(target: str) -> int:
    """The child of :func:`compile_isolated`: a JSON request on stdin, the cubin to
    ``target``, a JSON reply (lowered names and log, or the error) on stdout's last line."""
    request = json.loads(sys.stdin.read())
    try:
        built = compile_cubin(request["source"], request["label"], request["names"],
                              request["options"])
    except CompileError as e:
        print(json.dumps({"error": str(e)}))
        return 1
    Path(target).write_bytes(built.cubin)
    print(json.dumps({"lowered": built.lowered, "log": built.log}))
    return 0


if __name__ == "__main__":
    # this file's folder, which Python puts first for a script: its cuda/ holds the
    # kernels, not cuda.bindings
    if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(_child(sys.argv[1]))
