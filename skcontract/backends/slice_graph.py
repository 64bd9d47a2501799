"""A sliced plan's slices on CuPy, replayed as one CUDA graph a slice.

Run one by one, a slice costs the host a launch or more for every step, a few
microseconds each: a circuit of 766 steps spends milliseconds of Python a slice while its
GPU work takes a fraction of that. Here the steps that vary with the slice are captured
once, as one graph, and replayed for every slice; the host's work a slice is a copy of each
sliced operand's chunk into a fixed buffer (the graph reads those), the replay, and the
slice's sum into the output.

::

    call:  slice 0 (eager, on the staged chunks: every launch planned, pools made)
           capture the varying steps once          (nothing runs; one graph)
           for each later slice:
               stage chunks -> replay graph -> output[chunk] += result

The captured steps allocate from a pool of their own (:class:`cupy.cuda.MemoryPool` over
the caller's allocator): the graph's buffers keep their addresses while it lives, and its
freed ones are reused within the capture as the eager loop reuses them, so the working set
stays the eager loop's. The work runs on a stream of this thread's own (a capture needs
one other than the legacy default stream), ordered after the caller's current stream and
before its later work. A plan whose steps cannot be captured (an operation that waits for
the host) runs the eager loop, and stays on it.
"""
from __future__ import annotations

import threading

import cupy

from .steps import SliceSteps, _compile_sliced

GRAPH_MIN_SLICES = 4
"""Slices a call must run for its varying steps to be captured: below, capturing (a slice's
host work again) saves less than it costs."""

_LOCAL = threading.local()


def _side_stream():
    """This thread's stream on the current device, made once (launches keep their fixup
    pools by stream: one stream a thread and device keeps one pool a launch)."""
    streams = getattr(_LOCAL, "streams", None)
    if streams is None:
        streams = _LOCAL.streams = {}
    dev = cupy.cuda.runtime.getDevice()
    stream = streams.get(dev)
    if stream is None:
        stream = streams[dev] = cupy.cuda.Stream(non_blocking=True)
    return stream


def compile_sliced(plan, ops):
    """``run(arrays, slices=None)``, as :func:`~.steps.compile_plan`'s for a sliced plan,
    replaying a graph of the varying steps where a call runs :data:`GRAPH_MIN_SLICES`
    slices or more."""
    sliced = SliceSteps(plan, ops)
    eager = _compile_sliced(plan, ops)
    state = {"capturable": True}

    def run(arrays, slices=None):
        picked = sliced.ranges if slices is None else [sliced.ranges[i] for i in slices]
        if len(picked) < GRAPH_MIN_SLICES or not state["capturable"]:
            return eager(arrays, slices)
        caller = cupy.cuda.get_current_stream()
        side = _side_stream()
        side.wait_event(caller.record())
        with side:
            value = _replayed(sliced, arrays, picked, side, slices is not None)
        if value is None:
            state["capturable"] = False
            with side:
                value = eager(arrays, slices)
        caller.wait_event(side.record())
        return value
    return run


def _staging(sliced: SliceSteps, arrays, r: dict) -> list:
    """A contiguous buffer for each operand viewed at a chunk (None for the others)."""
    views = sliced.views(arrays, r)
    return [cupy.empty(v.shape, v.dtype) if cut else None
            for v, cut in zip(views, sliced.cuts)]


def _stage(sliced: SliceSteps, staged: list, arrays, r: dict) -> list:
    """Slice ``r``'s chunks copied into ``staged``: the operands as the steps read them."""
    views = sliced.views(arrays, r)
    for buf, v in zip(staged, views):
        if buf is not None:
            buf[...] = v
    return [v if buf is None else buf for buf, v in zip(staged, views)]


def _replayed(sliced: SliceSteps, arrays, picked: list, stream, partial: bool):
    """The slices ``picked``: the first eager, the others by replaying a graph of the
    varying steps; None where the steps cannot be captured (nothing is summed then)."""
    staged = _staging(sliced, arrays, picked[0])
    slots = [None] * sliced.n_slots
    slots[:sliced.n] = _stage(sliced, staged, arrays, picked[0])
    part = sliced.run(slots, first=True)
    total, dtype = sliced.add(None, part, picked[0]), part.dtype
    part = None
    sliced.drop(slots)
    pool = cupy.cuda.MemoryPool(allocator=cupy.cuda.get_allocator())
    graph, part = _capture(sliced, slots, stream, pool)
    if graph is None:
        return None
    for r in picked[1:]:
        _stage(sliced, staged, arrays, r)
        graph.launch(stream)
        total = sliced.add(total, part, r)
    # the graph's buffers, freed on return, go back to this stream's free lists: work
    # queued on it later runs after the last replay
    return sliced.finish(total, dtype, partial)


def _capture(sliced: SliceSteps, slots: list, stream, pool):
    """``(graph, result)``: the varying steps captured on ``stream`` (their buffers from
    ``pool``) and the view of the result each replay writes; ``(None, None)`` where a step
    cannot be captured."""
    try:
        with cupy.cuda.using_allocator(pool.malloc):
            stream.begin_capture()  # CuPy's relaxed mode: the pool may allocate
            part = sliced.run(slots, first=False)
            graph = stream.end_capture()
        sliced.drop(slots)
        return graph, part
    except Exception:  # noqa: BLE001 - a step the graph cannot hold: the eager loop runs
        try:
            stream.end_capture()
        except Exception:  # noqa: BLE001 - the failure ended the capture already
            pass
        sliced.drop(slots)
        return None, None
