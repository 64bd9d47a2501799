"""The warm path of a plan step (a Binding per operand layout, replayed with one packed
cuLaunchKernel): replays launch what the first call launched and stay right across streams,
pool resets, misaligned operands and threads."""
import threading

import numpy as np
import pytest

from tests.gpu.helpers import TOL


def _rand(shape, dtype, seed):
    import cupy
    return cupy.random.RandomState(seed).standard_normal(shape, dtype=cupy.float32).astype(dtype)


def _check(r, a, b, dtype):
    import cupy
    ref = cupy.matmul(a.astype(cupy.float64), b.astype(cupy.float64)).ravel()
    err = float(cupy.linalg.norm(r.astype(cupy.float64).ravel() - ref) / cupy.linalg.norm(ref))
    assert err <= TOL[dtype], err


# a GEMM with a fixup (one 128x128 tile, K split over the GPU), a GEMM without, a Dot product
CASES = [("ij,jk->ik", (128, 16384), (16384, 128)), ("ij,jk->ik", (64, 64), (64, 64)),
         ("ij,j->i", (3000, 4096), (4096,))]


@pytest.mark.parametrize("subscripts,sa,sb", CASES)
def test_replays_launch_what_the_first_call_launched(subscripts, sa, sb):
    import skcontract
    from skcontract.kernels.launch import record_launches
    expr = skcontract.contract_expression(subscripts, sa, sb, dtype="float32", backend="cupy")
    a, b = _rand(sa, "float32", 1), _rand(sb, "float32", 2)
    with record_launches() as launches:
        first = expr(a, b)
        for _ in range(3):
            again = expr(a, b)
    assert len({x.digest for x in launches}) == 1 and len(launches) == 4
    assert bool((again == first).all())  # deterministic fixups: bitwise equal
    _check(first, a, b, "float32")


def test_streams_and_pool_resets():
    import cupy
    import skcontract
    from skcontract.kernels import workspace
    subscripts, sa, sb = CASES[0]
    expr = skcontract.contract_expression(subscripts, sa, sb, dtype="float32", backend="cupy")
    a, b = _rand(sa, "float32", 3), _rand(sb, "float32", 4)
    want = expr(a, b)
    # the operands and want are made on the null stream, which non-blocking streams do not
    # wait for: the caller orders them (under a loaded GPU a call on another stream can
    # otherwise read the operands before they are written)
    cupy.cuda.Device().synchronize()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    for i in range(6):
        if i == 3:
            cupy.cuda.Device().synchronize()
            workspace.reset()
        with streams[i % 2] as s:
            got = expr(a, b)
            s.synchronize()
        assert bool((got == want).all()), i


def test_a_misaligned_call_after_an_aligned_one():
    import skcontract
    expr = skcontract.contract_expression("ij,jk->ik", (64, 300), (300, 64), dtype="float16",
                                          backend="cupy")
    a, b = _rand((64, 300), "float16", 5), _rand((300, 64), "float16", 6)
    _check(expr(a, b), a, b, "float16")
    big = _rand((64 * 300 + 1,), "float16", 7)
    a2 = big[1:].reshape(64, 300)  # 2 bytes off a 16-byte boundary
    assert a2.data.ptr % 16
    _check(expr(a2, b), a2, b, "float16")
    _check(expr(a, b), a, b, "float16")


def test_threads_share_one_expression():
    import cupy
    import skcontract
    subscripts, sa, sb = CASES[0]
    expr = skcontract.contract_expression(subscripts, sa, sb, dtype="float32", backend="cupy")
    ops = [(_rand(sa, "float32", 10 + i), _rand(sb, "float32", 20 + i)) for i in range(4)]
    wants = [expr(a, b) for a, b in ops]
    errors = []

    def work(i):
        a, b = ops[i]
        with cupy.cuda.Stream(non_blocking=True) as s:
            for _ in range(30):
                got = expr(a, b)
            s.synchronize()
        if not bool((got == wants[i]).all()):
            errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert np.isfinite(cupy.asnumpy(wants[0])).all()


@pytest.mark.parametrize("subscripts,sa,sb,flip", [
    ("...ij,...jk->...ik", (4, 8, 64, 32), (4, 8, 32, 48), False),  # reshapes in and out
    ("abcd,cdef->abef", (8, 8, 16, 16), (16, 16, 8, 8), False),     # views of 2-D products
    ("abcd,cdef->abef", (8, 8, 16, 16), (16, 16, 8, 8), True),      # A's view is a copy
])
def test_replays_skip_the_views_of_the_operands(subscripts, sa, sb, flip):
    """A step's replay launches on the caller's operands and allocates its output in the
    step's shape (no reshape either side) when the first call's views were views; where a
    view was a copy (an operand whose strides no reshape can follow), every call copies,
    so new values in the operand reach the result."""
    import cupy

    import skcontract
    from skcontract.kernels.launch import record_launches
    a, b = _rand(sa, "float32", 5), _rand(sb, "float32", 6)
    if flip:  # same shape, strides a reshape of (ab) x (cd) cannot view
        a = cupy.ascontiguousarray(a.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    expr = skcontract.contract_expression(subscripts, sa, sb, dtype="float32",
                                          backend="cupy")
    ref = lambda: cupy.einsum(subscripts, a.astype(cupy.float64), b.astype(cupy.float64))
    with record_launches() as launches:
        first = expr(a, b)
        a[...] = _rand(sa, "float32", 7)  # new values, same buffer
        again = expr(a, b)
    assert len(launches) == 2 and again.shape == first.shape == ref().shape
    assert again.flags.c_contiguous
    err = float(cupy.linalg.norm(again - ref()) / cupy.linalg.norm(ref()))
    assert err <= TOL["float32"], err


@pytest.mark.parametrize("subscripts,sa,sb", [
    ("ab,b->a", (3, 2), (2,)),                  # the Dot family's rows kernel
    ("ij,jk->ik", (64, 96), (96, 32)),          # a GEMM
    ("bij,bjk->bik", (4, 16, 8), (4, 8, 24)),   # a batched GEMM
])
def test_replays_of_reversed_operands_copy_again(subscripts, sa, sb):
    """Operands with negative strides (no kernel reads them as they lie) are copied on
    every call, the replays included: a replay never launches on the reversed arrays'
    addresses as if they were the contiguous copies the first call launched on."""
    import cupy

    import skcontract

    def reversed_(shape, seed):
        return cupy.flip(cupy.ascontiguousarray(cupy.flip(_rand(shape, "float32", seed))))

    a, b = reversed_(sa, 8), reversed_(sb, 9)
    assert min(a.strides) < 0 and min(b.strides) < 0
    ref = cupy.einsum(subscripts, a.astype(cupy.float64), b.astype(cupy.float64))
    expr = skcontract.contract_expression(subscripts, sa, sb, dtype="float32",
                                          backend="cupy")
    for _ in range(3):
        got = expr(a, b)
        err = float(cupy.linalg.norm(got - ref) / cupy.linalg.norm(ref))
        assert err <= TOL["float32"], err
