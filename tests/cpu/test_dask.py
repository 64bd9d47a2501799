"""skcontract.dask: contractions of dask arrays as lazy dask arrays, one task per range of
slices, planned on the client; against numpy on the threaded scheduler and on local
distributed clusters (threads, and worker processes)."""
import pickle

import numpy as np
import pytest
from opt_einsum.testing import rand_equation

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

import skcontract  # noqa: E402
from skcontract import contract_path  # noqa: E402
from skcontract import dask as skd  # noqa: E402


def _network(n, seed, d_max=5, n_out=2):
    eq, shapes = rand_equation(n, 3, n_out=n_out, d_min=2, d_max=d_max, seed=seed,
                               return_size_dict=False)
    rng = np.random.default_rng(seed)
    return eq, [rng.standard_normal(s) for s in shapes]


def _chunked(ops, seed):
    """Dask arrays of ``ops`` in chunks of random sizes (so that rechunking is tested)."""
    rng = np.random.default_rng(seed)
    return [da.from_array(x, chunks=tuple(int(rng.integers(1, d + 1)) if d else 1
                                          for d in x.shape)) for x in ops]


def _check(got, eq, ops):
    ref = np.einsum(eq, *ops, optimize=True)
    assert isinstance(got, np.ndarray) or np.isscalar(got)
    scale = np.abs(ref).max() if ref.size else 1.0
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * max(scale, 1))


def _limits(eq, ops):
    """None (unsliced) and two limits the whole plan is sliced under."""
    _, plan = contract_path(eq, *ops)
    big = plan.largest_intermediate
    return [None, max(big // 3, 8), max(big // 17, 8)]


@pytest.mark.parametrize("seed", range(5))
def test_random_networks_on_the_threaded_scheduler(seed):
    eq, ops = _network(6, seed)
    dops = _chunked(ops, seed)
    sliced = 0
    with dask.config.set(scheduler="threads"):
        for limit in _limits(eq, ops):
            for tasks in (None, 1, 3, 8):
                lay = skd.layout(eq, *dops, memory_limit=limit, tasks=tasks)
                sliced += lay.plan.slicing is not None
                r = skd.contract(eq, *dops, memory_limit=limit, tasks=tasks)
                assert isinstance(r, da.Array) and r.shape == lay.plan.output_shape
                _check(r.compute(), eq, ops)
    assert sliced >= 8


@pytest.fixture
def thread_client():
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=2,
                            dashboard_address=":0") as client:
        yield client


@pytest.fixture
def process_client():
    with distributed.Client(processes=True, n_workers=2, threads_per_worker=1,
                            dashboard_address=":0") as client:
        yield client


@pytest.mark.parametrize("seed", range(5, 9))
def test_random_networks_on_a_local_cluster(thread_client, seed):
    eq, ops = _network(7, seed)
    dops = _chunked(ops, seed)
    assert skd.default_tasks() == 4  # the client's worker threads
    for limit in _limits(eq, ops):
        for tasks in (None, 2, 5):
            r = skd.contract(eq, *dops, memory_limit=limit, tasks=tasks)
            _check(thread_client.compute(r).result(), eq, ops)


def test_worker_processes_compile_the_client_plans(process_client):
    eq, ops = _network(6, 11)
    dops = [x.persist() for x in _chunked(ops, 11)]
    limit = _limits(eq, ops)[1]
    lay = skd.layout(eq, *dops, memory_limit=limit, tasks=4)
    assert lay.plan.slicing is not None and lay.tasks > 1
    for tasks in (4, None):
        r = skd.contract(eq, *dops, memory_limit=limit, tasks=tasks)
        _check(r.compute(), eq, ops)
    # each worker compiled the plans it ran, once, under the client's keys
    keys = process_client.run(lambda: sorted(skd._COMPILED))
    ran = set().union(*map(set, keys.values()))
    assert ran & {b.key for b in lay.blocks.values()}


def test_a_plan_and_its_layout_pickle():
    eq, ops = _network(6, 3)
    lay = skd.layout(eq, *ops, memory_limit=_limits(eq, ops)[2], tasks=4)
    for block in lay.blocks.values():
        assert pickle.loads(pickle.dumps(block.plan)) == block.plan
    assert pickle.loads(pickle.dumps(lay.plan)) == lay.plan


def _graph_tasks(x):
    return len(x.__dask_graph__())


def test_the_graph_has_one_task_per_block_and_a_sum_tree():
    """Operands already chunked as the layout wants: the graph is their chunks, one
    skcontract task per block, and dask's sum (a task a partial, then a tree)."""
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in [(30, 40), (40, 50), (50, 20)]]
    eq = "ij,jk,kl->il"
    lay = skd.layout(eq, *ops, memory_limit=300, tasks=4)
    # sliced over j (contracted) and l (output): 2 x 2 tasks, partials summed over j
    assert lay.plan.slicing.labels == ("j", "l")
    assert dict(lay.chunks) == {"j": (20, 20), "l": (10, 10)} and lay.summed == ("j",)
    dops = [da.from_array(x, chunks=c) for x, c in zip(ops, lay.operand_chunks())]
    inputs = sum(_graph_tasks(x) for x in dops)
    r = skd.contract(eq, *dops, memory_limit=300, tasks=4, split_every=2)
    layers = r.__dask_graph__().layers
    ours = [k for k in layers if k.startswith("skcontract-")]
    assert len(ours) == 1 and len(layers[ours[0]]) == lay.tasks == 4
    # dask's sum: a task for each partial, then one for each of the output's 2 blocks
    assert _graph_tasks(r) == inputs + 4 + 4 + 2
    _check(r.compute(scheduler="sync"), eq, ops)


def test_output_blocks_need_no_sum():
    rng = np.random.default_rng(1)
    ops = [rng.standard_normal((64, 16)), rng.standard_normal((16, 16)),
           rng.standard_normal((16, 8))]
    eq = "ij,jk,kl->il"
    lay = skd.layout(eq, *ops, tasks=4)
    # unsliced, cut to spread: i repeats no FLOPs and is an output label
    assert lay.plan.slicing is None and lay.chunks == (("i", (16, 16, 16, 16)),)
    assert lay.summed == ()
    dops = [da.from_array(x, chunks=c) for x, c in zip(ops, lay.operand_chunks())]
    r = skd.contract(eq, *dops, tasks=4)
    assert _graph_tasks(r) == sum(_graph_tasks(x) for x in dops) + 4
    _check(r.compute(scheduler="sync"), eq, ops)


def test_a_small_contraction_is_one_task_by_default():
    eq, ops = _network(5, 2)
    assert skd.layout(eq, *ops).tasks == 1
    assert skd.layout(eq, *ops, tasks=1, memory_limit=_limits(eq, ops)[2]).tasks == 1


def test_the_default_tasks_leave_blas_its_threads(monkeypatch):
    def no_client():
        raise ValueError("no client")
    monkeypatch.setattr(distributed, "default_client", no_client)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(skd.os, "cpu_count", lambda: 8)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert skd.default_tasks("numpy", np.float64) == 4
    assert skd.default_tasks("numpy", np.int32) == 8  # integer products do not use BLAS
    assert skd.default_tasks("cupy", np.float32) == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert skd.default_tasks("numpy", np.float64) == 1


def test_einsum_dispatches_dask_arrays():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((6, 7)), rng.standard_normal((7, 4))
    r = skcontract.einsum("ij,jk->ik", da.from_array(a, chunks=3), b)
    assert isinstance(r, da.Array)
    np.testing.assert_allclose(r.compute(), a @ b, rtol=1e-12)
    # the interleaved form with any hashable labels
    r = skcontract.einsum(da.from_array(a, chunks=2), [0, ("x", 1)], b, [("x", 1), 700],
                          [0, 700], memory_limit=8)
    np.testing.assert_allclose(r.compute(), a @ b, rtol=1e-12)
    r = skd.contract(da.from_array(a, chunks=2), [0, ("x", 1)], b, [("x", 1), 700],
                     [0, 700], memory_limit=8, tasks=3)
    np.testing.assert_allclose(r.compute(), a @ b, rtol=1e-12)
    with pytest.raises(TypeError, match="out="):
        skcontract.einsum("ij,jk->ik", da.from_array(a), b, out=np.empty((6, 4)))
    with pytest.raises(ValueError, match="order"):
        skcontract.einsum("ij,jk->ik", da.from_array(a), b, order="Q")
    with pytest.raises(TypeError, match="Cannot cast"):
        skcontract.einsum("ij,jk->ik", da.from_array(a), b, dtype=np.float32)


@pytest.mark.parametrize("eq,shapes", [
    ("ii->i", [(5, 5)]),
    ("ii", [(6, 6)]),
    ("...ij,...jk->...ik", [(3, 1, 4, 5), (7, 5, 2)]),
    ("ij,ij->ij", [(4, 5), (1, 5)]),
    ("i,j->ij", [(7,), (6,)]),
    ("ij,jk->", [(4, 5), (5, 6)]),
    ("ij,jk", [(0, 5), (5, 6)]),
])
def test_numpy_forms(eq, shapes):
    rng = np.random.default_rng(len(eq))
    ops = [rng.standard_normal(s) for s in shapes]
    dops = [da.from_array(x, chunks=2) for x in ops]
    for tasks in (1, 3):
        r = skd.contract(eq, *dops, tasks=tasks)
        got = r.compute(scheduler="sync")
        assert got.shape == np.einsum(eq, *ops).shape
        _check(got, eq, ops)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.complex64, np.int32, bool])
def test_dtypes_as_skcontract_einsum(dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((6, 9)) * 4).astype(dtype)
    b = (rng.standard_normal((9, 5)) * 4).astype(dtype)
    r = skd.contract("ij,jk->ik", da.from_array(a, chunks=4), da.from_array(b, chunks=4),
                     memory_limit=15, tasks=3)
    got = r.compute(scheduler="sync")
    want = skcontract.einsum("ij,jk->ik", a, b)
    assert got.dtype == want.dtype == np.einsum("ij,jk->ik", a, b).dtype
    if np.dtype(dtype).kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:  # float16: each task's partial summed in float32, rounded once
        wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        exact = np.einsum("ij,jk->ik", a.astype(wide), b.astype(wide))
        tol = 1e-3 if dtype == np.float16 else 1e-5
        np.testing.assert_allclose(got, exact.astype(got.dtype), rtol=tol, atol=tol * 10)


def test_the_benchmark_tool_runs():
    from tools import bench_dask
    rows = bench_dask.main(["--n", "48", "--chunk", "16", "--reps", "1", "--workers", "1"])
    names = [r[0] for r in rows]
    assert names[0] == "numpy.einsum(optimize=True)" and len(rows) == 6
    assert all(r[1] > 0 and r[2] >= r[1] for r in rows)


def test_exact_is_a_precision_on_dask_too():
    """precision="exact" (exact float32, named explicitly) is accepted as einsum takes it;
    an unknown precision stays a ValueError naming the accepted ones."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((4, 5))
    got = skd.contract("ij,jk->ik", da.from_array(a, chunks=3), b, precision="exact")
    np.testing.assert_allclose(got.compute(), a @ b)
    with pytest.raises(ValueError, match="'exact'"):
        skd.contract("ij,jk->ik", da.from_array(a, chunks=3), b, precision="fast")


@pytest.mark.parametrize("eq,shapes,chunks", [
    ("ij,jk,kl->il", [(30, 20), (20, 25), (25, 10)], (7, 6)),
    ("i,i->", [(50,), (50,)], (9,)),
    ("bij,jk->bik", [(3, 8, 9), (9, 4)], (2, 3, 4)),
])
def test_one_task_joins_the_operands_blocks_itself(eq, shapes, chunks, process_client):
    rng = np.random.default_rng(3)
    ops = [rng.standard_normal(s) for s in shapes]
    dops = [da.from_array(x, chunks=chunks[:x.ndim]) for x in ops]
    assert not skd.layout(eq, *dops, tasks=1).chunks
    r = skd.contract(eq, *dops, tasks=1)
    assert r.npartitions == 1
    # the operands' blocks and the one task: no rechunk in between
    assert len(r.__dask_graph__()) == sum(x.npartitions for x in dops) + 1
    want = np.einsum(eq, *ops)
    for got in (r.compute(scheduler="sync"), r.compute(scheduler="threads"),
                process_client.compute(r).result()):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_conj_on_dask_arrays():
    """conj= on a dask call conjugates the named operands lazily (a list operand too)."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((4, 6)) + 1j * rng.standard_normal((4, 6))
    v = [1 + 1j, 2, 3 - 1j, 0.5j, 1, -1]
    d = da.from_array(a, chunks=(2, 3))
    got = skcontract.einsum("ij,j->i", d, v, conj=(0, 1))
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(scheduler="threads"),
                               np.conj(a) @ np.conj(np.array(v)))
