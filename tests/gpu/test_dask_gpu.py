"""skcontract.dask on CuPy blocks (as dask-cuda workers hold them): the tasks run the cupy
backend, the result is a dask array of CuPy chunks equal to numpy's."""
import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
da = pytest.importorskip("dask.array")

from skcontract import dask as skd  # noqa: E402


@pytest.mark.parametrize("limit,tasks", [(None, None), (None, 3), (2000, None), (2000, 4)])
def test_cupy_blocks_run_on_the_gpu(limit, tasks):
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s).astype(np.float32) for s in [(64, 48), (48, 80), (80, 32)]]
    dops = [da.from_array(cupy.asarray(x), chunks=16, asarray=False) for x in ops]
    lay = skd.layout("ij,jk,kl->il", *dops, memory_limit=limit, tasks=tasks)
    assert lay.backend == "cupy"
    r = skd.contract("ij,jk,kl->il", *dops, memory_limit=limit, tasks=tasks)
    assert isinstance(r._meta, cupy.ndarray)
    got = r.compute(scheduler="threads")
    assert isinstance(got, cupy.ndarray)
    ref = np.einsum("ij,jk,kl->il", *[x.astype(np.float64) for x in ops])
    np.testing.assert_allclose(cupy.asnumpy(got), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
