"""Time ``ij,jk,kl->il`` on dask arrays: skcontract.dask against numpy and dask's einsum.

    python -m tools.bench_dask [--n 2048] [--chunk 512] [--reps 3] [--workers 2]
    python -m tools.bench_dask --gpu --n 8192 [--chunk 4096] [--reps 5]

Rows: numpy.einsum (optimize=True) and skcontract.einsum in this process; then, on dask
arrays of ``--chunk`` square chunks, skcontract.dask.contract and dask.array.einsum on the
threaded scheduler and on a local ``distributed`` cluster of ``--workers`` single-threaded
worker processes (operands persisted on the workers first, the result gathered to the
client). Each case runs once to warm up, then ``--reps`` times, the cases interleaved, but
dask's einsum in a block of its own after them: its 640 tasks leave the process's memory
such that the next call's fresh allocations fault in slowly (skcontract.dask's, which joins
its blocks into new arrays, measured 0.31 s alone and 0.39-0.47 s right after it; NumPy's
unchanged), which would charge its cost to the case after it. The best and the median are
printed, and their ratios to numpy's. The task counts are those of the graphs before
dask's optimisation.

``--gpu``: float32 CuPy operands on one GPU. Rows: skcontract.einsum in this process, then
skcontract.dask.contract on dask arrays of CuPy chunks on the threaded scheduler, and on one
worker process of a dask-cuda ``LocalCUDACluster`` (a ``distributed`` ``LocalCluster`` of
one single-threaded worker where dask-cuda is not installed: the row says which), the
operands persisted on the worker first. Every case ends in ``.sum()`` of the result, read
back as a float, so that each time covers the GPU's work (CuPy's calls return before it is
done) and only a scalar leaves the worker. Ratios are to the in-process run. Last, one
more call on the worker with its tasks' compute time beside its wall time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


def _times(cases, reps):
    """Each case's times: one warm-up, then ``reps`` runs of each, interleaved (so that a
    loaded machine's drift falls on every case alike)."""
    for fn in cases.values():
        fn()
    out = {name: [] for name in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            t = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - t)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--chunk", type=int, default=None,
                    help="chunk side (512; with --gpu, n: one chunk an operand)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gpu", action="store_true", help="CuPy operands, one GPU worker")
    args = ap.parse_args(argv)
    if args.gpu:
        args.chunk = args.chunk or args.n
        return _gpu(args)
    args.chunk = args.chunk or 512

    import dask
    import dask.array as da
    import numpy as np
    from distributed import Client

    import skcontract
    from skcontract import dask as skd

    n, eq = args.n, "ij,jk,kl->il"
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((n, n)) for _ in range(3))
    rows = []

    def report(times, tasks):
        for name, ts in times.items():
            best, median = min(ts), statistics.median(ts)
            rows.append((name, best, median, tasks.get(name, "")))
            base = rows[0]
            print(f"{name:48s} {best:7.3f} s {median:7.3f} s  {best / base[1]:6.2f}x "
                  f"{median / base[2]:6.2f}x  {tasks.get(name, '')}", flush=True)

    print(f"{eq} at n={n}, float64, chunks of {args.chunk}; {os.cpu_count()} CPUs; "
          f"best and median of {args.reps} (and their ratios to numpy's)")
    ops = [da.from_array(x, chunks=args.chunk) for x in (a, b, c)]
    ours = skd.contract(eq, *ops)
    theirs = da.einsum(eq, *ops, optimize=True)
    print(skd.layout(eq, *ops))
    with dask.config.set(scheduler="threads"):
        tasks = {"skcontract.dask.contract, threads": f"{len(ours.__dask_graph__())} tasks",
                 "dask.array.einsum, threads": f"{len(theirs.__dask_graph__())} tasks"}
        report(_times({
            "numpy.einsum(optimize=True)": lambda: np.einsum(eq, a, b, c, optimize=True),
            "skcontract.einsum (in process)": lambda: skcontract.einsum(eq, a, b, c),
            "skcontract.dask.contract, threads": ours.compute}, args.reps), tasks)
        report(_times({"dask.array.einsum, threads": theirs.compute}, args.reps), tasks)
    with Client(processes=True, n_workers=args.workers, threads_per_worker=1,
                dashboard_address=":0") as client:
        client.wait_for_workers(args.workers)
        ops = [x.persist() for x in ops]
        ours = skd.contract(eq, *ops)
        theirs = da.einsum(eq, *ops, optimize=True)
        print(skd.layout(eq, *ops))
        name = f"{args.workers} worker processes"
        tasks = {f"skcontract.dask.contract, {name}": f"{len(ours.__dask_graph__())} tasks",
                 f"dask.array.einsum, {name}": f"{len(theirs.__dask_graph__())} tasks"}
        report(_times({f"skcontract.dask.contract, {name}": ours.compute}, args.reps), tasks)
        report(_times({f"dask.array.einsum, {name}": theirs.compute}, args.reps), tasks)
    return rows


def _gpu_cluster():
    """One worker process on this GPU: dask-cuda's LocalCUDACluster where it is installed,
    else distributed's LocalCluster of one single-threaded worker; and its name."""
    try:
        from dask_cuda import LocalCUDACluster
        return (LocalCUDACluster(n_workers=1, threads_per_worker=1, dashboard_address=":0"),
                "dask-cuda LocalCUDACluster, 1 worker")
    except Exception as e:  # not installed, or its own dependencies missing
        print(f"dask-cuda: {type(e).__name__}: {str(e)[:200]}; distributed's LocalCluster "
              "instead", flush=True)
    from distributed import LocalCluster
    return (LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                         dashboard_address=":0"), "distributed LocalCluster, 1 worker")


def _gpu(args):
    """The --gpu rows (the module's docstring)."""
    import cupy
    import dask
    import dask.array as da
    from distributed import Client

    import skcontract
    from skcontract import dask as skd

    n, eq = args.n, "ij,jk,kl->il"
    rng = cupy.random.default_rng(0)
    a, b, c = (rng.standard_normal((n, n), dtype=cupy.float32) for _ in range(3))
    rows = []

    def report(times):
        for name, ts in times.items():
            best, median = min(ts), statistics.median(ts)
            rows.append((name, best, median))
            print(f"{name:56s} {best * 1e3:9.2f} ms {median * 1e3:9.2f} ms  "
                  f"{best / rows[0][1]:6.3f}x {median / rows[0][2]:6.3f}x", flush=True)

    print(f"{eq} at n={n}, float32 on {cupy.cuda.runtime.getDeviceProperties(0)['name']}, "
          f"chunks of {args.chunk}; best and median of {args.reps} (ms), ratios to the "
          f"in-process run's")
    ops = [da.from_array(x, chunks=args.chunk, asarray=False) for x in (a, b, c)]
    ours = skd.contract(eq, *ops).sum()
    print(skd.layout(eq, *ops))
    with dask.config.set(scheduler="threads"):
        report(_times({
            "skcontract.einsum (in process)": lambda: float(skcontract.einsum(eq, a, b, c).sum()),
            "skcontract.dask.contract, threads": lambda: float(ours.compute())}, args.reps))
    cluster, name = _gpu_cluster()
    with cluster, Client(cluster) as client:
        client.wait_for_workers(1)
        ops = [x.persist() for x in ops]
        ours = skd.contract(eq, *ops).sum()
        print(skd.layout(eq, *ops))
        report(_times({f"skcontract.dask.contract, {name}": lambda: float(ours.compute())},
                      args.reps))
        _task_share(ours)
    return rows


def _task_share(result):
    """Print how much of one more ``result.compute()`` the worker spent in its tasks
    (distributed's task stream: each task's compute span), the rest being the scheduler's
    and the transfers' share."""
    from distributed import get_task_stream

    with get_task_stream() as stream:
        t0 = time.perf_counter()
        float(result.compute())
        wall = time.perf_counter() - t0
    spans = [(s["stop"] - s["start"]) for task in stream.data for s in task["startstops"]
             if s["action"] == "compute"]
    print(f"one more call: {wall * 1e3:.2f} ms wall, {len(spans)} task(s) computing for "
          f"{sum(spans) * 1e3:.2f} ms on the worker (longest {max(spans, default=0) * 1e3:.2f} "
          "ms)", flush=True)


if __name__ == "__main__":
    main()
