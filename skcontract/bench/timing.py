"""How every benchmark times a call on the GPU, the same way for us and for the peers.

Device time: the median over ``reps`` of a CUDA-graph replay of ``calls`` back-to-back
calls, divided by ``calls`` (events around back-to-back launches when the call cannot be
captured). Call time: host wall clock over many calls closed by one synchronise, which is
what a Python caller feels.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import time

#: device work per graph replay the call count aims at (seconds)
REPLAY_SECONDS = 2e-3
#: throughput the call count is sized with (FLOP/s); only the number of calls depends on it
SIZING_FLOPS = 300e12
MIN_CALLS, MAX_CALLS = 3, 50
#: calls averaged by call_time_us
CALL_TIME_CALLS = 50


def print_report(text: str, out: str | None) -> None:
    """Print a benchmark's Markdown report, and write it to ``out`` when given."""
    print(text)
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"written to {out}")


def positive_int(text: str) -> int:
    """An argparse type: an int of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def calls_for(flops: float) -> int:
    """Calls per replay: about ``REPLAY_SECONDS`` of work, between MIN_CALLS and MAX_CALLS."""
    return int(min(MAX_CALLS, max(MIN_CALLS, REPLAY_SECONDS * SIZING_FLOPS / max(flops, 1))))


def calls_per_replay(one_call_us: float) -> int:
    """Calls in one timed replay of a call that took ``one_call_us``: about
    ``REPLAY_SECONDS`` of device work, between MIN_CALLS and MAX_CALLS."""
    return int(min(MAX_CALLS, max(MIN_CALLS, REPLAY_SECONDS * 1e6 / max(one_call_us, 1e-3))))


def expression_times(fn, ref, stream, reps: int, log) -> dict:
    """On the CuPy ``stream``: ``fn()``'s relative error against the float64 ``ref``
    (``rel_err``), its device time a call (``us``, :func:`device_time_us`), its host time
    a call (``call_us``) and the calls a replay held (``calls``); a figure whose measure
    raised is None (logged)."""
    sync = stream.synchronize
    with stream:
        out = {"rel_err": guarded(log, "skcontract", lambda: rel_err(fn(), ref))}
        one = guarded(log, "skcontract", lambda: call_time_us(fn, sync, 1))
        calls = out["calls"] = calls_per_replay(one or REPLAY_SECONDS * 1e6)
        out["us"] = guarded(log, "skcontract device time",
                            lambda: device_time_us(fn, stream, calls, reps))
        out["call_us"] = guarded(log, "skcontract call", lambda: call_time_us(fn, sync))
    return out


def device_time_us(fn, stream, calls: int, reps: int) -> float:
    """Median per-call device time of ``fn`` (CUDA graph replay on the CuPy ``stream``)."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    with stream:
        fn()  # warm: compile, allocate pools
        stream.synchronize()
        graph = _capture(fn, stream, calls)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        times = []
        for _ in range(reps):
            start.record(stream)
            if graph is not None:
                graph.launch(stream)
            else:
                for _ in range(calls):
                    fn()
            stop.record(stream)
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / calls)
        return statistics.median(times)


def _capture(fn, stream, calls: int):
    """A graph of ``calls`` calls of ``fn``, or None when ``fn`` cannot be captured."""
    try:
        stream.begin_capture()
        for _ in range(calls):
            fn()
        return stream.end_capture()
    except Exception:  # noqa: BLE001 - capture unsupported: the caller times launches
        try:
            stream.end_capture()
        except Exception:  # noqa: BLE001 - capture already ended by the failure
            pass
        return None


def call_time_us(fn, sync, calls: int = CALL_TIME_CALLS) -> float:
    """Mean host wall time per call of ``fn`` over ``calls`` calls and one ``sync``."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e6 / calls


def torch_graph_us(fn, calls: int, reps: int) -> float:
    """Median per-call device time of a torch call (torch's CUDA graph replay)."""
    import torch  # the benchmarks' peer; not a dependency of the library

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # captured on the warm-up stream: a call that keeps per-stream state (our fixup pools)
    # finds it warm there
    with torch.cuda.graph(graph, stream=side):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def rel_err(x, ref) -> float:
    """Relative error (2-norm) of the CuPy array ``x`` against the float64 (complex128)
    ``ref``."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    den = float(cupy.linalg.norm(ref.ravel())) or 1.0
    return float(cupy.linalg.norm((x.astype(ref.dtype) - ref).ravel())) / den


def guarded(log, what, fn):
    """``fn()``, or None (logged) when it raises: one failing peer does not end the run."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported in the log and as a missing figure
        log(f"   {what} failed: {type(e).__name__}: {e}")
        return None


def geomean(xs) -> float:
    """Geometric mean of the positive finite values of ``xs`` (NaN when there are none)."""
    xs = [x for x in xs if x and x == x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def run_commit() -> str:
    """The commit measured: $SKCONTRACT_COMMIT, else git's short HEAD, else 'unknown'."""
    commit = os.environ.get("SKCONTRACT_COMMIT")
    if commit:
        return commit
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def device_name() -> str:
    """The current CUDA device's name."""
    import cupy  # optional dependency: only the GPU path needs CuPy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


DEFAULT_REPS = 7
"""Timed repetitions of each benchmark row; the median is kept."""


def add_corpus_arguments(p: argparse.ArgumentParser, corpus, name: str) -> None:
    """The options every corpus benchmark takes: its corpus, where its files go, their
    base name and the repetitions of each row."""
    p.add_argument("--corpus", default=os.environ.get("SKCONTRACT_BENCH_CORPUS", corpus),
                   help="the benchmark corpus JSON (default: the packaged one, or "
                        "$SKCONTRACT_BENCH_CORPUS)")
    p.add_argument("--out", default="docs/benchmarks",
                   help="folder the JSON, Markdown and plot are written to (default: "
                        "docs/benchmarks)")
    p.add_argument("--name", default=name, help=f"the files' base name (default: {name})")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS,
                   help="timed repetitions of each row, the median kept (default: "
                        f"{DEFAULT_REPS})")
