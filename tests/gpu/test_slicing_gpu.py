"""Sliced plans on CuPy arrays: results against a float64 reference, the memory measured
while they run (the CuPy allocations' high-water mark) under every limit tried, partial sums
over ranges of slices."""
import numpy as np
import pytest
from opt_einsum.testing import rand_equation

cupy = pytest.importorskip("cupy")

from skcontract import contract_expression, contract_path, einsum  # noqa: E402
from skcontract.bench.memory import cupy_peak  # noqa: E402
from skcontract.kernels import workspace  # noqa: E402
from skcontract.plan.slicing import budget_of  # noqa: E402

from .helpers import TOL  # noqa: E402


def _network(n, seed, dtype):
    eq, shapes = rand_equation(n, 3, n_out=2, d_min=2, d_max=9, seed=seed,
                               return_size_dict=False)
    rng = np.random.default_rng(seed)
    return eq, [(0.5 * rng.standard_normal(s)).astype(dtype) for s in shapes]  # no float16 overflow


def _close(got, ref, dtype):
    got = cupy.asnumpy(got).astype(np.float64)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err <= 10 * TOL[dtype], err


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("seed", range(4))
def test_sliced_networks_match_float64(seed, dtype):
    """Random networks of 8 tensors at a half and a seventh of their largest intermediate:
    sliced on the GPU, the float64 result's, twice (the second call warm)."""
    eq, ops = _network(8, seed, dtype)
    ref = np.einsum(eq, *[x.astype(np.float64) for x in ops], optimize=True)
    dev = [cupy.asarray(x) for x in ops]
    _, whole = contract_path(eq, *ops)
    for limit in (whole.largest_intermediate // 2, whole.largest_intermediate // 7):
        expr = contract_expression(eq, *[x.shape for x in ops], memory_limit=limit,
                                   dtype=dtype, backend="cupy")
        assert expr.plan.slicing is not None, (eq, limit)
        for _ in range(2):
            got = expr(*dev)
            assert isinstance(got, cupy.ndarray) and got.dtype == np.dtype(dtype)
            _close(got, ref, dtype)


CHAIN = "ab,bc,cd,de->ae"
CHAIN_SHAPES = [(1536, 1024), (1024, 2048), (2048, 1536), (1536, 768)]
"""A chain whose output holds 4.5 MiB in float32 (float16 slices are summed in float32)
and whose unsliced plan fits none of the limits below."""
LIMITS = {"float32": ("14MiB", "10MiB", "6MiB"), "float16": ("12MiB", "10MiB", "9MiB")}
"""Byte budgets each dtype's plan is sliced under (each slices more than the last)."""


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_measured_peak_keeps_every_limit(dtype):
    """The bytes CuPy allocates while a sliced plan runs stay under each byte budget: on a
    warm call, and on the first beside the fixup pools it grows (kept for later calls on
    the stream, as cuBLAS keeps its workspace); the result is the float64 one's."""
    rng = np.random.default_rng(3)
    ops = [(0.25 * rng.standard_normal(s)).astype(dtype) for s in CHAIN_SHAPES]  # no overflow
    ref = np.einsum(CHAIN, *[x.astype(np.float64) for x in ops], optimize=True)
    dev = [cupy.asarray(x) for x in ops]
    for limit in LIMITS[dtype]:
        budget = budget_of(limit, []).bytes
        expr = contract_expression(CHAIN, *CHAIN_SHAPES, memory_limit=limit, dtype=dtype,
                                   backend="cupy")
        sliced = expr.plan.slicing
        assert sliced is not None and sliced.peak_bytes <= budget
        for call in ("first", "warm"):
            cupy.cuda.Device().synchronize()
            if call == "first":  # pools an earlier test left would be replaced, not grown:
                workspace.reset()  # the old buffer's bytes would count against the budget
            pools = workspace.held_bytes()
            with cupy_peak() as mem:
                got = expr(*dev)
                cupy.cuda.Device().synchronize()
            grown = workspace.held_bytes() - pools
            assert 0 < mem.peak - grown <= budget, (limit, call, mem.peak, grown,
                                                    sliced.peak_bytes)
            _close(got, ref, dtype)


def test_partial_sums_over_ranges_add_up_on_the_gpu():
    rng = np.random.default_rng(5)
    shapes = [(40, 96), (96, 64), (64, 50)]
    ops = [cupy.asarray(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    expr = contract_expression("ij,jk,kl->il", *shapes, slicing={"j": 16, "l": 10},
                               backend="cupy")
    n = expr.plan.slicing.num_slices
    assert n == 30
    parts = [expr(*ops, slices=r) for r in (range(0, 7), range(7, 23), range(23, n))]
    assert all(isinstance(p, cupy.ndarray) and p.dtype == np.float32 for p in parts)
    ref = np.einsum("ij,jk,kl->il", *[cupy.asnumpy(x).astype(np.float64) for x in ops])
    _close(parts[0] + parts[1] + parts[2], ref, "float32")
    _close(expr(*ops), ref, "float32")


def test_einsum_keeps_a_byte_budget_on_the_gpu():
    """einsum(..., memory_limit="...MiB") on CuPy arrays: planned for the GPU, sliced, the
    result the float64 one's, a warm call's peak measured under the budget."""
    rng = np.random.default_rng(7)
    ops = [cupy.asarray(rng.standard_normal(s).astype(np.float32)) for s in CHAIN_SHAPES]
    ref = np.einsum(CHAIN, *[cupy.asnumpy(x).astype(np.float64) for x in ops], optimize=True)
    einsum(CHAIN, *ops, memory_limit="8MiB")  # planned, kernels compiled, pools grown
    cupy.cuda.Device().synchronize()
    with cupy_peak() as mem:
        got = einsum(CHAIN, *ops, memory_limit="8MiB")
        cupy.cuda.Device().synchronize()
    assert mem.peak <= budget_of("8MiB", []).bytes
    _close(got, ref, "float32")


def test_sliced_calls_on_a_callers_stream_and_inside_its_capture():
    """On a non-blocking caller's stream the slices are ordered after its work and before
    its later work; inside the caller's own capture the call is captured with it, and the
    caller's graph replays the product of its inputs."""
    rng = np.random.default_rng(11)
    shapes = [(64, 96), (96, 80), (80, 48)]
    host = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ref = np.einsum("ab,bc,cd->ad", *[x.astype(np.float64) for x in host], optimize=True)
    expr = contract_expression("ab,bc,cd->ad", *shapes, dtype="float32", backend="cupy",
                               slicing={"b": 8})
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        ops = [cupy.asarray(x) for x in host]  # made on the caller's stream
        got = expr(*ops) * 1  # read on it
        stream.synchronize()
        _close(got, ref, "float32")
        stream.begin_capture()
        got = expr(*ops)
        graph = stream.end_capture()
        for x, h in zip(ops, host):
            x[...] = cupy.asarray(2 * h)
        graph.launch(stream)
        stream.synchronize()
    _close(got, 8 * ref, "float32")
