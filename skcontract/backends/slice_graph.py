"""A sliced plan's slices on CuPy, replayed as one CUDA graph a slice.

Run one by one, a slice costs the host a launch or more for every step, a few
microseconds each: a circuit of 766 steps spends milliseconds of Python a slice while its
GPU work takes a fraction of that. Here the steps that vary with the slice are captured
once, as one graph, and replayed for every slice; the host's work a slice is a copy of each
sliced operand's chunk that changed into a fixed buffer (the graph reads those), the
replay, and the slice's sum into the output.

::

    call:  slice 0 (eager, on the staged chunks: every launch planned, pools made)
           capture the varying steps once          (nothing runs; one graph)
           for each later slice:
               stage changed chunks -> replay graph -> output[chunk] += result

The captured steps allocate from a pool of their own (:class:`cupy.cuda.MemoryPool` over
the caller's allocator): the graph's buffers keep their addresses while it lives, whatever
other threads free or allocate, and its freed ones are reused within the capture as the
eager loop reuses them. The staged chunks are the graph path's own memory: a plan whose
slices keep a byte budget (``Slicing.budget_bytes``) replays only where its predicted peak
and the staged chunks fit the budget together. The work runs on a stream of this thread's
own (a capture needs one other than the legacy default stream), ordered after the caller's
current stream and before its later work; the output is allocated on the caller's stream.

The eager loop (:func:`~.steps.compile_plan`'s) runs instead: below
:data:`GRAPH_MIN_SLICES` slices; inside a caller's own capture (a CuPy or torch graph
being recorded); on memory another allocator owns (torch's, CUDA's stream-ordered pool),
whose stream rules the side stream would break; where the budget leaves no room for the
staged chunks; and for good once a plan's steps could not be captured (a step that waits
for the host).
"""
from __future__ import annotations

import threading

import cupy

from ..kernels import torch_cuda, workspace
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
    replaying a graph of the varying steps where a call may (see the module docstring)."""
    sliced = SliceSteps(plan, ops)
    eager = _compile_sliced(plan, ops, sliced)
    state = {"capturable": True}

    def run(arrays, slices=None):
        picked = sliced.ranges if slices is None else [sliced.ranges[i] for i in slices]
        caller = cupy.cuda.get_current_stream()
        if not (state["capturable"] and len(picked) >= GRAPH_MIN_SLICES
                and _may_replay(sliced, arrays, picked[0], caller)):
            return eager(arrays, slices)
        total = sliced.zeros()  # on the caller's stream: the caller's memory
        side = _side_stream()
        side.wait_event(caller.record())
        try:
            with side:
                done, dtype = _replayed(sliced, arrays, picked, side, total)
        finally:
            caller.wait_event(side.record())
        if not done:
            state["capturable"] = False
            return eager(arrays, slices)
        return sliced.finish(total, dtype, slices is not None)
    return run


def _may_replay(sliced: SliceSteps, arrays, first: dict, caller) -> bool:
    """Whether this call may run on the side stream and replay a graph (the module
    docstring's rules but the slice count and a failed capture)."""
    try:
        if caller.is_capturing():
            return False
    except cupy.cuda.runtime.CUDARuntimeError:  # another stream's capture forbids the query
        return False
    alloc = cupy.cuda.get_allocator()
    if alloc is torch_cuda.torch_malloc or \
            isinstance(getattr(alloc, "__self__", None), cupy.cuda.MemoryAsyncPool):
        return False
    budget = sliced.plan.slicing.budget_bytes
    if budget is None:
        return True
    staged = sum(v.nbytes for v, cut in zip(sliced.views(arrays, first), sliced.cuts) if cut)
    return sliced.plan.slicing.peak_bytes + staged <= budget


def _replayed(sliced: SliceSteps, arrays, picked: list, stream, total):
    """The slices ``picked`` summed into ``total``: the first eager, the others by replaying
    a graph of the varying steps. ``(done, the slices' dtype)``; not done where the steps
    cannot be captured (``total`` is then partly summed: the caller discards it)."""
    views = sliced.views(arrays, picked[0])
    staged = [cupy.empty(v.shape, v.dtype) if cut else None
              for v, cut in zip(views, sliced.cuts)]
    at = [None] * len(staged)  # the chunk each buffer holds
    slots = [None] * sliced.n_slots
    slots[:sliced.n] = _stage(sliced, staged, at, arrays, picked[0])
    part = sliced.run(slots, first=True)
    sliced.add(total, part, picked[0])
    dtype, part = part.dtype, None
    sliced.drop(slots)
    pool = cupy.cuda.MemoryPool(allocator=cupy.cuda.get_allocator())
    graph, part = _capture(sliced, slots, stream, pool)
    if graph is None:
        return False, dtype
    for r in picked[1:]:
        _stage(sliced, staged, at, arrays, r)
        graph.launch(stream)
        sliced.add(total, part, r)
    return True, dtype


def _stage(sliced: SliceSteps, staged: list, at: list, arrays, r: dict) -> list:
    """Slice ``r``'s chunks copied into ``staged`` where a buffer holds another chunk (an
    operand not cut by the labels that changed keeps its copy): the operands as the steps
    read them."""
    views = sliced.views(arrays, r)
    for i, (buf, v, cut) in enumerate(zip(staged, views, sliced.cuts)):
        if buf is not None:
            chunk = tuple((lab, r[lab].start) for _, lab in cut)
            if at[i] != chunk:
                buf[...] = v
                at[i] = chunk
    return [v if buf is None else buf for buf, v in zip(staged, views)]


def _capture(sliced: SliceSteps, slots: list, stream, pool):
    """``(graph, result)``: the varying steps captured on ``stream`` (their buffers from
    ``pool``) and the view of the result each replay writes; ``(None, None)`` where a step
    cannot be captured, or where the capture kept memory of the pool's beyond the result
    (a buffer made for later calls, such as a grown fixup pool, whose zeroing the graph
    holds: the fixup pools are then forgotten, to be made again, and the pool is kept)."""
    graph = part = None
    try:
        with cupy.cuda.using_allocator(pool.malloc):
            stream.begin_capture()  # CuPy's relaxed mode: the pool may allocate
            try:
                part = sliced.run(slots, first=False)
            finally:
                graph = stream.end_capture()
    except Exception:  # noqa: BLE001 - a step the graph cannot hold: the eager loop runs
        graph = part = None
    finally:
        sliced.drop(slots)
    if part is not None and pool.used_bytes() > part.data.mem.size:
        workspace.reset()
        _KEPT.append(pool)
        graph = part = None
    return graph, part


_KEPT: list = []
"""Pools whose capture kept memory beyond its result, never freed (what holds that memory
may still point at it)."""
