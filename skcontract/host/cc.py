"""C kernels for the CPU, compiled at first use by the host's C compiler and loaded with
ctypes: the CPU's counterpart of the GPU's NVRTC path (:mod:`skcontract.kernels.jit`).

NumPy has no operation that runs a direct convolution near memory speed, and BLAS only
helps where a product is large; the CPU routes that need a loop of their own (the
depthwise and grouped convolutions, and one-group ones on large maps) are C sources in
``c/``, built here for the machine they run on
(``-O3 -march=native``) into a shared library kept under the kernel cache
(:func:`~skcontract.kernels.jit.cache_dir`, ``host/``). The library's name hashes the
source, the compiler's identity, the flags, the machine and its CPU's feature flags, so a
cache shared between machines never hands one a library built for another's instructions.

Where no C compiler is found, the build fails, or ``SKCONTRACT_HOST_KERNELS=0``, a route
has no library (:func:`load` gives None, :func:`why_not` says why) and its caller runs
the NumPy form instead: the results agree, only the speed differs. A build is tried once a
process; libraries load once a process.

>>> lib = load("conv")   # None where the host cannot build it
>>> lib is None or hasattr(lib, "depthwise_f32")
True
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

from ..kernels.jit import cache_dir

__all__ = ["load", "why_not", "compiler", "SOURCE_DIR"]

SOURCE_DIR = Path(__file__).with_name("c")
"""The C sources, one library each (``<name>.c``)."""
FLAGS = ("-O3", "-std=gnu11", "-shared", "-fPIC")
"""Every build's flags: GNU C for the vector extensions the kernels use."""
NATIVE_FLAGS = ("-march=native",)
"""Tried first, then without: the machine's own vector width (a compiler that cannot name
the host's architecture builds the portable code)."""
BUILD_TIMEOUT_S = 120
"""A build that takes longer is abandoned and the route runs its NumPy form."""
ENV_SWITCH = "SKCONTRACT_HOST_KERNELS"
"""Set to 0 to run every CPU route's NumPy form (no compiler is looked for)."""

_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL | None] = {}
_REASONS: dict[str, str] = {}


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's threads: a build one of them held the lock
    for would never release it."""
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def compiler() -> str | None:
    """The C compiler: ``$CC``, else the one Python was built with, else ``cc``, ``gcc``
    or ``clang`` on the PATH; None where there is none (and on Windows, whose compiler
    takes other flags)."""
    if sys.platform == "win32":
        return None
    named = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "")
    candidates = [named.split()[0]] if named.strip() else []
    for cc in candidates + ["cc", "gcc", "clang"]:
        found = shutil.which(cc)
        if found:
            return found
    return None


def load(name: str) -> ctypes.CDLL | None:
    """The library built from ``c/<name>.c`` for this machine, or None where it cannot be
    built here (:func:`why_not`)."""
    with _LOCK:
        if name not in _LOADED:
            _LOADED[name] = _build_and_load(name)
        return _LOADED[name]


def why_not(name: str) -> str | None:
    """Why :func:`load` gives no library for ``name`` (None where it gives one)."""
    load(name)
    return _REASONS.get(name)


def _build_and_load(name: str) -> ctypes.CDLL | None:
    if os.environ.get(ENV_SWITCH, "1").strip() == "0":
        return _without(name, f"{ENV_SWITCH}=0")
    cc = compiler()
    if cc is None:
        return _without(name, "no C compiler found (set CC to one)")
    source = SOURCE_DIR / f"{name}.c"
    text = source.read_bytes()
    errors = []
    for extra in (NATIVE_FLAGS, ()):
        flags = FLAGS + extra
        target = _library_path(name, cc, flags, text)
        if not target.exists():
            error = _build(cc, flags, source, target)
            if error:
                errors.append(error)
                continue
        try:
            return ctypes.CDLL(str(target))
        except OSError as e:
            errors.append(f"{target} does not load: {e}")
    return _without(name, f"{cc} could not build {source.name}: {errors[-1]}")


def _without(name: str, reason: str) -> None:
    _REASONS[name] = reason
    return None


def _library_path(name: str, cc: str, flags: tuple, text: bytes) -> Path:
    """Where the library of this source, compiler, flags and machine is kept."""
    key = hashlib.sha256()
    for part in (text, _identity(cc).encode(), " ".join(flags).encode(),
                 platform.machine().encode(), _cpu_features().encode()):
        key.update(part)
        key.update(b"\0")
    return _folder() / f"{name}-{key.hexdigest()[:20]}.so"


def _folder() -> Path:
    """The cache's ``host/`` folder, or a temporary one where it cannot be written."""
    folder = cache_dir() / "host"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="skcontract-host-"))


def _identity(cc: str) -> str:
    """The compiler's path and its version line."""
    try:
        run = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return f"{cc} {run.stdout.splitlines()[0] if run.stdout else ''}"
    except (OSError, subprocess.SubprocessError):
        return cc


def _cpu_features() -> str:
    """The CPU's feature flags (Linux's /proc/cpuinfo; the processor's name elsewhere):
    what ``-march=native`` builds for."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _build(cc: str, flags: tuple, source: Path, target: Path) -> str | None:
    """Build ``source`` into ``target`` (written whole or not at all); the error or None."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".so.tmp")
    os.close(fd)
    try:
        run = subprocess.run([cc, *flags, "-o", tmp, str(source)], capture_output=True,
                             text=True, timeout=BUILD_TIMEOUT_S)
        if run.returncode != 0:
            said = (run.stderr or run.stdout).strip().splitlines()
            return said[-1] if said else f"exit status {run.returncode}"
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
