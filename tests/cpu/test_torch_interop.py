"""torch tensors at the front door (issue 49): skcontract as opt_einsum's backend, every
function opt_einsum calls on it, and conv2d's refusal of mixed array types. CPU tensors here;
CUDA tensors go through the same functions (skcontract.interop)."""
from __future__ import annotations

import re

import numpy as np
import opt_einsum
import pytest

import skcontract
from skcontract import conv2d

torch = pytest.importorskip("torch")

GEN = torch.Generator().manual_seed(49)


def _t(*shape, dtype=torch.float64):
    return torch.randn(*shape, generator=GEN, dtype=dtype)


def test_the_issue_s_call():
    got = opt_einsum.contract("ij,jk->ik", torch.ones(2, 3), torch.ones(3, 4),
                              backend="skcontract")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    torch.testing.assert_close(got, torch.full((2, 4), 3.0))


def test_opt_einsum_finds_every_function_it_calls_in_skcontract():
    """opt_einsum's backend protocol: it imports the module and calls its tensordot,
    transpose and einsum (opt_einsum.backends.dispatch.get_func)."""
    from opt_einsum.backends import dispatch
    for name in ("tensordot", "transpose", "einsum"):
        assert dispatch.get_func(name, "skcontract") is getattr(skcontract, name)
    assert dispatch.has_einsum("skcontract") and dispatch.has_tensordot("skcontract")


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(5, 6), (6, 7)]),
    ("ij,jk->ki", [(5, 6), (6, 7)]),                      # tensordot, then transpose
    ("ij,jk,kl->li", [(5, 6), (6, 7), (7, 3)]),
    ("abc,bcd,de->ea", [(3, 4, 5), (4, 5, 6), (6, 2)]),
    ("bij,bjk->bik", [(4, 5, 6), (4, 6, 3)]),             # einsum (a batch label)
    ("ij,ij->", [(5, 6), (5, 6)]),
    ("i,j->ji", [(4,), (3,)]),
    ("ii->i", [(4, 4)]),
    ("iij,jk->ki", [(3, 3, 4), (4, 5)]),
])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_opt_einsum_contract_on_torch_tensors(subscripts, shapes, dtype):
    ops = [_t(*s, dtype=dtype) for s in shapes]
    got = opt_einsum.contract(subscripts, *ops, backend="skcontract")
    want = torch.einsum(subscripts, *ops)
    assert isinstance(got, torch.Tensor) and got.dtype == want.dtype
    assert got.device == want.device
    torch.testing.assert_close(got, want)


def test_opt_einsum_contract_into_out_and_expressions_with_constants():
    a, b, c = _t(5, 6), _t(6, 7), _t(7, 3)
    want = torch.einsum("ij,jk,kl->li", a, b, c)
    out = torch.empty(3, 5, dtype=torch.float64)
    assert opt_einsum.contract("ij,jk,kl->li", a, b, c, out=out, backend="skcontract") is out
    torch.testing.assert_close(out, want)
    expr = opt_einsum.contract_expression("ij,jk,kl->li", a.shape, b, c.shape, constants=[1])
    torch.testing.assert_close(expr(a, c, backend="skcontract"), want)
    expr = opt_einsum.contract_expression("ij,jk,kl->li", a.shape, b.shape, c.shape)
    torch.testing.assert_close(expr(a, b, c, backend="skcontract"), want)


@pytest.mark.parametrize("axes", [None, (2, 0, 1), (-1, 0, 1), [1, 2, 0], (0, 1, 2),
                                  np.array([2, 1, 0])])
def test_transpose_permutes_torch_tensors_as_numpy_transposes(axes):
    t = torch.arange(24.0).reshape(2, 3, 4)
    got = skcontract.transpose(t, axes)
    want = np.transpose(t.numpy(), axes)
    assert isinstance(got, torch.Tensor) and got.data_ptr() == t.data_ptr()  # a view
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("axes", [(0,), (0, 0, 1), (0, 1, 3), (0, 1, -4), (True, False, True),
                                  (1.0, 0, 2), 5, "abc"])
def test_transpose_refuses_what_numpy_refuses(axes):
    t = torch.zeros(2, 3, 4)
    with pytest.raises(Exception) as theirs:
        np.transpose(t.numpy(), axes)
    with pytest.raises(theirs.type, match=re.escape(str(theirs.value))):
        skcontract.transpose(t, axes)


def test_transpose_of_a_scalar_and_a_matrix():
    assert skcontract.transpose(torch.tensor(2.0)).shape == ()
    assert skcontract.transpose(torch.tensor(2.0), ()).shape == ()
    assert skcontract.transpose(torch.zeros(2, 3)).shape == (3, 2)


@pytest.mark.parametrize("sa,sb,axes", [
    ((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (4, 5), 0),
    ((2, 3, 4), (4, 3), ([1, 2], [1, 0])), ((2, 3), (2, 3), 2),
])
def test_tensordot_on_torch_tensors_matches_torch(sa, sb, axes):
    a, b = _t(*sa), _t(*sb)
    got = skcontract.tensordot(a, b, axes)
    want = torch.tensordot(a, b, dims=axes)
    assert isinstance(got, torch.Tensor) and got.shape == want.shape
    torch.testing.assert_close(got, want)


def test_einsum_on_torch_tensors_takes_opt_einsum_s_keywords():
    a, b = _t(3, 4), _t(4, 5)
    out = torch.empty(3, 5, dtype=torch.float64)
    assert skcontract.einsum("ij,jk->ik", a, b, out=out) is out
    torch.testing.assert_close(out, a @ b)
    got = skcontract.einsum("ij,jk->ik", a.float(), b.float(), dtype=np.float64)
    assert got.dtype == torch.float64
    torch.testing.assert_close(skcontract.einsum("ij,jk->ik", a, b, order="C"), a @ b)


@pytest.mark.parametrize("which", ["weight", "bias", "input"])
def test_conv2d_refuses_torch_and_numpy_mixed_as_torch_does(which):
    x, w, b = torch.ones(1, 2, 5, 5), torch.ones(3, 2, 3, 3), torch.ones(3)
    args = {"input": x, "weight": w, "bias": b}
    args[which] = args[which].numpy()
    with pytest.raises(TypeError):  # torch's own refusal
        torch.nn.functional.conv2d(args["input"], args["weight"], args["bias"])
    with pytest.raises(TypeError, match=f"conv2d: {which} must be a torch tensor as "
                                        f"(input|weight) is, got numpy.ndarray"):
        conv2d(args["input"], args["weight"], args["bias"])


def test_conv2d_refuses_numpy_arrays_beside_a_torch_bias():
    with pytest.raises(TypeError, match="conv2d: input must be a torch tensor as bias is"):
        conv2d(np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32),
               torch.ones(3))


def test_conv2d_on_cpu_tensors_checks_the_gpu_options():
    x, w = torch.ones(1, 8, 6, 6), torch.ones(4, 8, 3, 3)
    with pytest.raises(ValueError, match="no float32 kernel with tile"):
        conv2d(x, w, tile=(7, 7, 7))
    with pytest.raises(ValueError, match="mode must be"):
        conv2d(x, w, mode="fast")
    torch.testing.assert_close(conv2d(x, w, mode="stream_k", tile=(128, 128, 32)),
                               torch.nn.functional.conv2d(x, w))
    xb, wb = x.bfloat16(), w.bfloat16()
    with pytest.raises(ValueError, match="no bfloat16 kernel with tile"):
        conv2d(xb, wb, tile=(7, 7, 7))
    xl = x.contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(conv2d(xl, w, mode="stream_k"), torch.nn.functional.conv2d(x, w))


def test_a_lazy_conjugate_meets_conj():
    """torch's conjugate bit is read as conj= reads an operand; conj= of a lazy conjugate
    reads the values beneath it (conjugating twice)."""
    a, b = _t(4, 5, dtype=torch.complex128), _t(5, 3, dtype=torch.complex128)
    torch.testing.assert_close(skcontract.einsum("ij,jk->ik", a.conj(), b),
                               a.conj().resolve_conj() @ b)
    torch.testing.assert_close(skcontract.einsum("ij,jk->ik", a.conj(), b, conj=(0,)), a @ b)
    torch.testing.assert_close(skcontract.einsum("ij,jk->ik", a, b.conj(), conj=(0,)),
                               a.conj().resolve_conj() @ b.conj().resolve_conj())

