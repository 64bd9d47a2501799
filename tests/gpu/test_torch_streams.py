"""Calls on CUDA torch tensors run on torch's current stream and are captured by
``torch.cuda.graph``: a replay computes the product of the inputs at replay time."""
from __future__ import annotations

import pytest

import skcontract
from skcontract.kernels import workspace
from skcontract.kernels.gemm import gemm
from tests.gpu.helpers import TOL

torch = pytest.importorskip("torch")

SLEEP_CYCLES = 200_000_000
"""torch.cuda._sleep's spin on the caller's stream before it writes the inputs (about a
tenth of a second): work on another stream would read the inputs before they are written."""


def _rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


def _err(got, want) -> float:
    return float((got.double() - want).norm() / want.norm())


EINSUMS = [  # a GEMM, one with Stream-K fixups (one tile, long K), a batched GEMM, a Dot
    ("ij,jk->ik", (256, 192), (192, 128), torch.float16),
    ("ij,jk->ik", (128, 16384), (16384, 128), torch.float32),
    ("bij,bjk->bik", (8, 64, 96), (8, 96, 80), torch.float32),
    ("ij,j->i", (3000, 1024), (1024,), torch.float32),
]


def _capture(fn, warm=3):
    """``fn()`` warmed on a side stream, then captured: (graph, the captured result)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fn()
    return graph, result


@pytest.mark.parametrize("subscripts,sa,sb,dtype", EINSUMS)
@pytest.mark.parametrize("how", ["einsum", "expression"])
def test_graph_replays_compute_the_new_inputs(subscripts, sa, sb, dtype, how):
    a, b = _rand(sa, dtype, 1), _rand(sb, dtype, 2)
    if how == "einsum":
        def fn():
            return skcontract.einsum(subscripts, a, b)
    else:
        expr = skcontract.contract_expression(subscripts, sa, sb)

        def fn():
            return expr(a, b)
    graph, out = _capture(fn)
    for seed in (3, 5):
        a.copy_(_rand(sa, dtype, seed))
        b.copy_(_rand(sb, dtype, seed + 1))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        want = torch.einsum(subscripts, a.double(), b.double())
        assert _err(out, want) <= TOL[str(dtype).split(".")[1]]


@pytest.mark.parametrize("k", [256, 16384])  # one with a Stream-K fixup pool
def test_gemm_into_out_is_captured(k):
    """The capture replays the warm call (remembered on the warm-up's stream) on torch's
    capture stream, whose fixup pool is new: with the pools forgotten first, the pool is
    made inside the capture whatever ran before in this process."""
    workspace.reset()
    a, b = _rand((384, k), torch.float16, 1), _rand((k, 320), torch.float16, 2)
    c = torch.empty((384, 320), device="cuda", dtype=torch.float16)
    graph, _ = _capture(lambda: gemm(a, b, out=c))
    a.copy_(_rand((384, k), torch.float16, 7))
    c.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(c, a.double() @ b.double()) <= TOL["float16"]


def test_conv2d_is_captured():
    x = _rand((4, 32, 20, 20), torch.float16, 1)
    w = _rand((64, 32, 3, 3), torch.float16, 2)
    graph, out = _capture(lambda: skcontract.conv2d(x, w, padding=1))
    x.copy_(_rand((4, 32, 20, 20), torch.float16, 9))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    want = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    assert _err(out, want) <= TOL["float16"]


@pytest.mark.parametrize("what", ["einsum", "gemm", "conv2d"])
def test_calls_run_on_a_non_default_torch_stream(what):
    """The inputs are written on the caller's stream after a spin; a call that ran on any
    other stream would read them before they are written."""
    stream = torch.cuda.Stream()
    if what == "conv2d":
        sa, sb = (2, 16, 12, 12), (32, 16, 3, 3)
    else:
        sa, sb = (512, 256), (256, 384)
    a, b = _rand(sa, torch.float32, 1), _rand(sb, torch.float32, 2)
    new_a = _rand(sa, torch.float32, 3)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        if what == "conv2d":
            skcontract.conv2d(a, b)  # warm: the timed call takes the warm path
        torch.cuda._sleep(SLEEP_CYCLES)
        a.copy_(new_a)
        if what == "einsum":
            got = skcontract.einsum("ij,jk->ik", a, b)
        elif what == "gemm":
            got = torch.empty((sa[0], sb[1]), device="cuda")
            gemm(a, b, out=got)
        else:
            got = skcontract.conv2d(a, b)
    stream.synchronize()
    if what == "conv2d":
        want = torch.nn.functional.conv2d(new_a.double(), b.double())
    else:
        want = new_a.double() @ b.double()
    assert _err(got, want) <= TOL["float32"]
