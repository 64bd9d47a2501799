"""skcontract on dask arrays: a lazy contraction whose tasks each run skcontract on blocks.

:func:`contract` (and :func:`skcontract.einsum` given a dask array) returns a lazy dask
array. Everything is planned once, on the client (:func:`layout`):

1. the whole contraction is planned with ``memory_limit`` as the budget of one task
   (:func:`skcontract.plan.build_plan`); where it does not fit, the plan is sliced and
   ``plan.slicing`` names the sliced labels and their chunks;
2. the slices are grouped into ranges of consecutive slices, so that there are about
   ``tasks`` tasks (by default one for each thread of a ``distributed`` client's workers,
   and on a local scheduler as many as this process's BLAS leaves CPUs idle:
   :func:`default_tasks`); output labels are cut first (their blocks are
   only placed), then contracted ones (their partial results are summed). A plan that needs
   no slicing is cut only when it is worth spreading: ``tasks`` was given, or its FLOPs
   reach :data:`TASK_FLOPS` a task. It is cut on the label(s) that repeat the fewest
   FLOPs (priced on the plan's path), an output label where that ties;
3. each operand is rechunked so that every cut label is chunked by the tasks' ranges and
   every other axis is one chunk (an axis broadcast from size 1 is dropped first); a
   contraction of one task instead takes the operands' blocks as they are chunked and joins
   them in the task (:func:`_one_task`);
4. ``dask.array.blockwise`` runs one task per block, with output indices the output
   labels and the cut contracted labels (each task's partial keeps a length-1 axis for
   each), and ``.sum`` over those axes (``split_every``) adds the partials in a tree.

Each task runs a plan made on the client for its blocks' shapes (sliced as the whole plan
is, over the slices of its range), compiled on the worker by the backend of its blocks
(NumPy blocks: the numpy backend; CuPy blocks, as dask-cuda workers hold them: the cupy
backend) once per process and kept (:func:`_compiled`).

Dtypes follow :func:`skcontract.einsum`: the result dtype is numpy's (or ``dtype``), the
tasks compute in the backend's compute dtype (float16 in float32 on NumPy), partial results
are summed in it (float16 ones in float32, bool ones by ``any``) and rounded to the result
dtype once.
"""
from __future__ import annotations

import os
import sys
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import product as cartesian
from math import ceil, prod
from typing import Any, Mapping, NamedTuple

import numpy as np

try:
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
except ImportError as e:  # pragma: no cover - the optional extra
    raise ImportError("skcontract.dask needs dask: pip install 'skcontract[dask]'") from e

from .backends import backend_for, get_backend, plan_allocates
from .backends.steps import sum_dtype
from .dtypes import EXACT
from .kernels.catalogue import PRECISIONS
from .kernels.resolve import schedule_plan
from .parse import Subscripts, parse_equation, split_operands
from .plan import Plan, build_plan
from .plan.plan import with_launch_peak
from .plan.slicing import simulate
from .replan import Replans
from .schedule.device import DeviceInfo

__all__ = ["contract", "einsum", "layout", "Layout", "TASK_FLOPS", "default_tasks"]

TASK_FLOPS = 2**27
"""The FLOPs (about 10 ms of a CPU core) a task of a plan that needs no slicing should have
at least, when ``tasks`` is not given: a smaller contraction runs as one task."""

_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def default_tasks(backend: str = "numpy", dtype: Any = np.float64) -> int:
    """The tasks a contraction is spread over by default: the threads of the default
    ``distributed`` client's workers (whose BLAS runs one thread each: the nanny sets
    ``OMP_NUM_THREADS=1``); on a local scheduler, whose tasks share this process's BLAS
    threads, ``os.cpu_count()`` divided by those threads (``OPENBLAS_NUM_THREADS``,
    ``MKL_NUM_THREADS`` or ``OMP_NUM_THREADS``; all CPUs where none is set), so one task
    for a floating-point plan on the NumPy backend unless BLAS is limited, and one on the
    CuPy backend (one GPU)."""
    if "distributed" in sys.modules:  # no client exists unless distributed was imported
        from distributed import default_client
        try:
            client = default_client()
        except ValueError:
            client = None
        if client is not None:
            threads = sum(client.nthreads().values())
            if threads:
                return threads
    if backend != "numpy":
        return 1
    cpus = os.cpu_count() or 1
    if np.dtype(dtype).kind not in "fc":  # integer and bool products do not run in BLAS
        return cpus
    return max(1, cpus // _blas_threads(cpus))


def _blas_threads(cpus: int) -> int:
    """The threads a BLAS call of this process runs on, as the environment limits them."""
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        try:
            n = int(os.environ.get(name, ""))
        except ValueError:
            continue
        if n > 0:
            return min(n, cpus)
    return cpus


class BlockPlan(NamedTuple):
    """What a task runs on blocks of one set of shapes: ``plan``, compiled on the worker
    under ``key``; ``allocates``: whether its result is a new array (else it is copied)."""

    key: str
    plan: Plan
    allocates: bool


@dataclass(frozen=True)
class Layout:
    """How a contraction of dask arrays runs: ``plan`` is the whole contraction, planned
    under the per-task budget; ``subscripts`` its equation (after dropping the axes in
    ``squeeze``, each operand's axes broadcast from size 1); ``chunks`` each cut label with
    its blocks' sizes (the other labels are one block); ``summed`` the cut labels that are
    contracted (their partials are summed); ``blocks`` the plan of each operand-block shape;
    ``backend`` the backend the tasks run; ``dtype`` the result's, ``compute_dtype`` the
    tasks'."""

    plan: Plan
    subscripts: str
    squeeze: tuple[tuple[int, ...], ...]
    chunks: tuple[tuple[str, tuple[int, ...]], ...]
    summed: tuple[str, ...]
    blocks: Mapping[tuple, BlockPlan]
    backend: str
    dtype: np.dtype
    compute_dtype: np.dtype

    @property
    def tasks(self) -> int:
        """The contraction's tasks (blocks of the blockwise step)."""
        return prod(len(b) for _, b in self.chunks)

    def operand_chunks(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """The chunks each (squeezed) operand is rechunked to."""
        eq = self.plan.equation
        cut = dict(self.chunks)
        return tuple(tuple(cut.get(lab, (eq.sizes[lab],)) if d == eq.sizes[lab] else (d,)
                           for lab, d in zip(t, s))
                     for t, s in zip(eq.inputs, eq.shapes))

    def describe(self) -> str:
        eq = self.plan.equation
        if not self.chunks:
            cut = "one task"
        else:
            parts = [f"{x} ({eq.sizes[x]}) in {len(b)} block(s) of "
                     f"{'/'.join(str(n) for n in sorted(set(b), reverse=True))}"
                     for x, b in self.chunks]
            cut = f"{self.tasks} tasks: " + ", ".join(parts)
            if self.summed:
                cut += f"; partials summed over {', '.join(self.summed)}"
        inner = self.plan.slicing.describe() if self.plan.slicing is not None else \
            "no slicing"
        return (f"dask layout of {self.subscripts!r} on the {self.backend} backend: {cut}\n"
                f"the whole plan: {inner}")

    __str__ = describe


def contract(*operands, memory_limit=None, optimize="adaptive", split_every=None, tasks=None,
             dtype=None, casting="safe", backend=None, precision=None):
    """``contract(subscripts, *operands, memory_limit=None, optimize='adaptive',
    split_every=None, tasks=None, dtype=None, casting='safe', backend=None,
    precision=None)``: the contraction of dask arrays (or arrays, made dask arrays) as a
    lazy dask array (see the module).

    ``memory_limit``: the budget of one task, in any form :func:`skcontract.einsum` takes
    (elements, '512MiB', '80%' of the client's GPU or host); ``tasks``: about how many
    tasks to spread the work over (default :func:`default_tasks`, and one task for a plan
    that needs no slicing and has under :data:`TASK_FLOPS` a task); ``split_every``: the
    fan-in of the tree that sums partials (dask's); ``backend``: 'numpy' or 'cupy' for the
    tasks (by default the blocks' own: CuPy blocks run on the GPU); the interleaved form
    ``contract(a, [0, 1], b, [1, 2], [0, 2])`` works too.

    >>> import numpy as np, dask.array as da
    >>> a = da.ones((4, 6), chunks=2); b = da.ones((6, 3), chunks=3)
    >>> r = contract("ij,jk->ik", a, b)
    >>> r.shape, float(r.sum().compute())
    ((4, 3), 72.0)
    """
    arrays, lay = _prepared(operands, memory_limit, optimize, tasks, dtype, casting, backend,
                            precision)
    return _graph(arrays, lay, split_every)


def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize="adaptive",
           memory_limit=None, backend=None, precision=None, split_every=None, tasks=None):
    """:func:`skcontract.einsum` on operands of which one is a dask array: :func:`contract`.
    ``out`` cannot be a dask array's; ``order`` is checked and otherwise left to dask."""
    if out is not None:
        raise TypeError("einsum: out= is not supported for dask arrays (the result is lazy)")
    name = order.decode("latin-1") if isinstance(order, bytes) else order
    if (name.upper() if isinstance(name, str) else name) not in ("C", "F", "A", "K", None):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    return contract(*operands, memory_limit=memory_limit, optimize=optimize,
                    split_every=split_every, tasks=tasks, dtype=dtype, casting=casting,
                    backend=backend, precision=precision)


def layout(*operands, memory_limit=None, optimize="adaptive", tasks=None, dtype=None,
           casting="safe", backend=None, precision=None) -> Layout:
    """The :class:`Layout` :func:`contract` runs these operands (arrays of any kind with a
    shape and a dtype) in."""
    return _prepared(operands, memory_limit, optimize, tasks, dtype, casting, backend,
                     precision)[1]


def is_dask(x: Any) -> bool:
    """Whether ``x`` is a dask array (never imports dask itself)."""
    return type(x).__module__.startswith("dask.")


def _prepared(operands, memory_limit, optimize, tasks, dtype, casting, backend, precision):
    """The operands as dask arrays (broadcast axes dropped) and their :class:`Layout`."""
    subscripts, ops = split_operands(operands)
    if casting not in _CASTINGS:
        raise ValueError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', or "
                         f"'unsafe' (got {casting!r})")
    arrays = [x if is_dask(x) else da.asarray(x) for x in ops]
    eq = parse_equation(subscripts, [a.shape for a in arrays])
    res = np.result_type(*[a.dtype for a in arrays]) if dtype is None else np.dtype(dtype)
    for i, a in enumerate(arrays):
        if not np.can_cast(a.dtype, res, casting):
            raise TypeError(f"Cannot cast operand {i} from {a.dtype!r} to {res!r} according "
                            f"to the rule {casting!r}")
    if res.kind not in "biufc":
        raise TypeError(f"einsum on dask arrays does not support the dtype {res}")
    if precision is not None and precision != EXACT and precision not in PRECISIONS:
        raise ValueError(f"precision must be None (float32 accuracy), {EXACT!r} or one of "
                         f"{', '.join(map(repr, PRECISIONS))} (got {precision!r})")
    if backend is None:
        backend = backend_for([getattr(a, "_meta", a) for a in arrays])
    squeeze = tuple(tuple(ax for ax, (lab, d) in enumerate(zip(t, a.shape))
                          if d == 1 and eq.sizes[lab] != 1)
                    for t, a in zip(eq.inputs, arrays))
    terms = [tuple(lab for ax, lab in enumerate(t) if ax not in sq)
             for t, sq in zip(eq.inputs, squeeze)]
    text = ",".join("".join(t) for t in terms) + "->" + "".join(eq.output)
    subs = Subscripts(text, eq.legend)
    shapes = tuple(tuple(d for ax, d in enumerate(a.shape) if ax not in sq)
                   for a, sq in zip(arrays, squeeze))
    want = default_tasks(backend, res) if tasks is None else int(tasks)
    if want < 1:
        raise ValueError(f"tasks must be at least 1, got {tasks!r}")
    opt = _optimize_key(optimize)
    args = (subs, eq.legend, shapes, res, optimize if opt is None else opt, memory_limit,
            type(memory_limit), backend, precision, want, tasks is not None, squeeze)
    try:
        cacheable = (opt is not None or optimize is None) and hash(args) is not None
    except TypeError:  # an unhashable memory_limit: refused, with its own error, below
        cacheable = False
    lay = (_layout_cached if cacheable else _layout)(*args)
    arrays = [a[tuple(0 if ax in sq else slice(None) for ax in range(a.ndim))] if sq else a
              for a, sq in zip(arrays, squeeze)]
    return arrays, lay


def _optimize_key(optimize):
    """A hashable form of ``optimize`` (explicit paths as tuples), or None."""
    if isinstance(optimize, (bool, str)) or optimize is None:
        return optimize
    if isinstance(optimize, (list, tuple)):
        try:
            return tuple(s if isinstance(s, str) else tuple(int(x) for x in s)
                         for s in optimize)
        except TypeError:
            return None
    return None


def _device(backend: str):
    if backend == "numpy":
        return None
    try:
        return DeviceInfo.from_cupy()
    except Exception:  # no CuPy device on the client: plan for the preset
        return DeviceInfo.h200()


def _layout(subs, legend, shapes, res, optimize, memory_limit, limit_type, backend,
            precision, want, asked, squeeze) -> Layout:
    bk = get_backend(backend)
    cd = np.dtype(bk.compute_dtype(res))
    device = _device(backend)
    eq = parse_equation(subs, shapes)
    launches = None if backend == "numpy" else \
        (lambda plan: schedule_plan(plan, device, precision=precision))
    whole = build_plan(eq, cd, optimize=optimize, memory_limit=memory_limit, device=device,
                       schedule=launches)
    if whole.slicing is not None:
        cuts = _group_slices(whole, want)
    elif asked or whole.flops >= 2 * TASK_FLOPS:
        cuts = _cut_unsliced(whole, want if asked else min(want, whole.flops // TASK_FLOPS))
    else:
        cuts = {}
    chunks = tuple((x, cuts[x]) for x in sorted(cuts, key=str) if len(cuts[x]) > 1)
    summed = tuple(x for x, _ in chunks if x not in eq.output)
    blocks = {}
    for pick in cartesian(*[sorted(set(b)) for _, b in chunks]):
        sizes = dict(eq.sizes)
        sizes.update(zip((x for x, _ in chunks), pick))
        block_shapes = tuple(tuple(sizes[lab] if d == eq.sizes[lab] else d
                                   for lab, d in zip(t, s))
                             for t, s in zip(eq.inputs, eq.shapes))
        plan = whole if block_shapes == eq.shapes else _block_plan(
            whole, subs, block_shapes, cd, memory_limit, device, launches)
        if backend != "numpy":
            plan = with_launch_peak(schedule_plan(plan, device, precision=precision))
        blocks[block_shapes] = BlockPlan(uuid.uuid4().hex, plan, plan_allocates(plan))
    return Layout(whole, str(subs), squeeze, chunks, summed, blocks, backend, res, cd)


_layout_cached = lru_cache(maxsize=256)(_layout)


def _block_plan(whole: Plan, subs, shapes, dtype, memory_limit, device,
                launches=None) -> Plan:
    """The plan of a task's blocks: the whole plan's path, sliced as the whole plan is
    (over the slices its blocks hold); ``launches``: how a GPU schedules it
    (:func:`~skcontract.plan.build_plan`'s ``schedule``)."""
    eq = parse_equation(subs, shapes)
    inner = {} if whole.slicing is None else {
        x: c for x, c in whole.slicing.chunks if eq.sizes[x] > c}
    if not inner:
        return build_plan(eq, dtype, optimize=list(whole.path), device=device)
    try:
        return build_plan(eq, dtype, optimize=list(whole.path), memory_limit=memory_limit,
                          device=device, slicing=inner, schedule=launches)
    except ValueError:  # the block's own slices, where the whole plan's do not fit it
        return build_plan(eq, dtype, optimize="adaptive", memory_limit=memory_limit,
                          device=device, schedule=launches)


def _spread(n: int, parts: int) -> list[int]:
    """``n`` things in ``parts`` ranges as even as they go, the longer first."""
    q, r = divmod(n, parts)
    return [q + 1] * r + [q] * (parts - r)


def _group_slices(plan: Plan, want: int) -> dict:
    """Each sliced label's blocks, ranges of consecutive slices, for about ``want`` tasks:
    output labels first (their blocks are placed), then contracted ones (summed)."""
    sl = plan.slicing
    out = set(plan.output)
    order = sorted(sl.chunks, key=lambda xc: (xc[0] not in out, str(xc[0])))
    cuts, need = {}, want
    for x, c in order:
        n = sl.sizes[x] // c
        parts = max(1, min(n, need))
        cuts[x] = tuple(k * c for k in _spread(n, parts))
        need = ceil(need / parts)
    return cuts


def _cut_unsliced(plan: Plan, want: int) -> dict:
    """The blocks of labels cut to spread an unsliced plan over about ``want`` tasks: one
    label at a time, the one whose cut repeats the fewest FLOPs on the plan's path (priced
    as slices, :func:`skcontract.plan.slicing.simulate`), an output label where that ties,
    then the longest."""
    eq = plan.equation
    if want <= 1 or 0 in eq.sizes.values():
        return {}
    out = frozenset(eq.output)
    label_sets = [frozenset(t) for t in eq.inputs]
    terms = [t & out.union(*(u for j, u in enumerate(label_sets) if j != i))
             for i, t in enumerate(label_sets)]
    cuts: dict = {}
    need = want
    while need > 1:
        best = None
        for x in sorted(eq.sizes, key=str):
            if x in cuts or eq.sizes[x] < 2:
                continue
            parts = min(eq.sizes[x], need)
            trial = {**{y: max(b) for y, b in cuts.items()}, x: ceil(eq.sizes[x] / parts)}
            sizes = dict(eq.sizes, **trial)
            n = prod(len(b) for b in cuts.values()) * parts
            cost = simulate(terms, out, sizes, plan.path, frozenset(trial), n)
            rank = (cost.flops, x not in out, -eq.sizes[x])
            if best is None or rank < best[0]:
                best = (rank, x, parts)
        if best is None:
            break
        _, x, parts = best
        cuts[x] = tuple(_spread(eq.sizes[x], parts))
        need = ceil(need / parts)
    return cuts


def _graph(arrays, lay: Layout, split_every):
    """The dask array of the contraction laid out as ``lay`` on the (squeezed) ``arrays``."""
    if not lay.chunks:
        return _one_task(arrays, lay)
    eq = lay.plan.equation
    chunks = lay.operand_chunks()
    arrays = [a.rechunk(c) for a, c in zip(arrays, chunks)]
    out_ind = tuple(eq.output) + lay.summed
    pairs = [v for a, t in zip(arrays, eq.inputs) for v in (a, tuple(t))]
    bk = get_backend(lay.backend)
    meta = meta_from_array(bk.xp.empty((0,) * len(out_ind), lay.compute_dtype),
                           ndim=len(out_ind), dtype=lay.compute_dtype)
    name = "skcontract-" + tokenize(lay.subscripts, lay.backend, str(lay.compute_dtype),
                                    [(k, b.key) for k, b in lay.blocks.items()],
                                    [a.name for a in arrays])
    result = da.blockwise(
        _run_task, out_ind, *pairs, name=name, dtype=lay.compute_dtype, meta=meta,
        adjust_chunks={x: 1 for x in lay.summed}, concatenate=False,
        plans=dict(lay.blocks), backend=lay.backend, compute_dtype=lay.compute_dtype,
        extra_axes=len(lay.summed))
    if lay.summed:
        axes = tuple(range(len(eq.output), len(out_ind)))
        if lay.compute_dtype == bool:
            result = result.any(axis=axes, split_every=split_every)
        else:
            result = result.sum(axis=axes, split_every=split_every,
                                dtype=sum_dtype(lay.compute_dtype))
    return result if result.dtype == lay.dtype else result.astype(lay.dtype)


def _one_task(arrays, lay: Layout):
    """The dask array of a contraction laid out as one task: the task takes each operand's
    blocks as they are chunked and joins them itself (one copy each), where a rechunk to
    one chunk would join them in tasks of its own first."""
    eq = lay.plan.equation
    out_shape = tuple(eq.sizes[x] for x in eq.output)
    name = "skcontract-" + tokenize(lay.subscripts, lay.backend, str(lay.compute_dtype),
                                    [(k, b.key) for k, b in lay.blocks.items()],
                                    [a.name for a in arrays])
    run = partial(_run_task, plans=dict(lay.blocks), backend=lay.backend,
                  compute_dtype=lay.compute_dtype)
    graph = HighLevelGraph.from_collections(
        name, {(name,) + (0,) * len(out_shape): (run, *[a.__dask_keys__() for a in arrays])},
        dependencies=arrays)
    meta = meta_from_array(get_backend(lay.backend).xp.empty((0,) * len(out_shape),
                                                             lay.compute_dtype),
                           ndim=len(out_shape), dtype=lay.compute_dtype)
    result = da.Array(graph, name, chunks=tuple((d,) for d in out_shape), meta=meta)
    return result if result.dtype == lay.dtype else result.astype(lay.dtype)


def _joined(x, xp):
    """A task's operand: a block, or nested lists of blocks (one list level an axis, as
    :func:`_one_task` passes them; blockwise passes lists of one block) joined into one
    array."""
    if not isinstance(x, list):
        return x
    leaves = x
    while isinstance(leaves, list) and len(leaves) == 1:
        leaves = leaves[0]
    if not isinstance(leaves, list):
        return leaves
    if xp is np:
        return np.block(x)
    return _concatenated(x, xp, 0)


def _concatenated(x, xp, axis: int):
    """Nested lists of blocks, a level an axis from ``axis`` on, concatenated (for array
    modules without ``block``)."""
    if not isinstance(x, list):
        return x
    return xp.concatenate([_concatenated(p, xp, axis + 1) for p in x], axis=axis)


def _run_task(*blocks, plans=None, backend="numpy", compute_dtype=None, extra_axes=0):
    """One task: the plan of its blocks' shapes (``plans``: :attr:`Layout.blocks`) run on
    them, its result with a length-1 axis for each cut contracted label. The blocks of an
    operand come as nested lists (:func:`_joined`)."""
    bk = get_backend(backend)
    arrays = []
    for x in blocks:
        x = bk.asarray(_joined(x, bk.xp))
        arrays.append(x if x.dtype == compute_dtype else x.astype(compute_dtype))
    key, plan, allocates = plans[tuple(tuple(a.shape) for a in arrays)]
    r = _compiled(key, plan, backend)(arrays)
    if not allocates:
        r = r.copy()
    return r.reshape(tuple(r.shape) + (1,) * extra_axes) if extra_axes else r


_COMPILED: OrderedDict = OrderedDict()
"""The plans this process has compiled for tasks: key -> run (the newest last)."""
_COMPILED_MAX = 256
_LOCK = threading.Lock()


def _compiled(key: str, plan: Plan, backend: str):
    """``plan`` compiled by ``backend`` (with the re-planning hook a GPU backend takes),
    once per process: kept under ``key``, which the client made with the plan."""
    with _LOCK:
        run = _COMPILED.get(key)
        if run is not None:
            _COMPILED.move_to_end(key)
            return run
    run = get_backend(backend).compile(plan, replan=Replans(plan))
    with _LOCK:
        _COMPILED[key] = run
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    return run
