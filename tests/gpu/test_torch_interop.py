"""torch tensors in, torch tensors out (the device machine has torch; CI's does not)."""
from __future__ import annotations

import pytest

import skcontract

torch = pytest.importorskip("torch")

CASES = [("ij,jk->ik", [(30, 40), (40, 20)]), ("bij,bjk->bik", [(3, 8, 5), (3, 5, 6)]),
         ("i,i->", [(17,), (17,)]), ("ij->j", [(6, 7)])]


# bfloat16 tensors (neither NumPy nor CuPy has the dtype) are computed in float32 and the
# result rounded to bfloat16, on either device
DEVICE_DTYPES = [("cpu", "float32"), ("cpu", "float64"), ("cpu", "bfloat16"),
                 ("cuda", "float16"), ("cuda", "float32"), ("cuda", "float64"),
                 ("cuda", "bfloat16")]


@pytest.mark.parametrize("device,dtype", DEVICE_DTYPES)
@pytest.mark.parametrize("subscripts,shapes", CASES)
def test_torch_in_torch_out(subscripts, shapes, dtype, device):
    g = torch.Generator().manual_seed(len(subscripts))
    ops = [torch.randn(s, generator=g).to(getattr(torch, dtype)).to(device) for s in shapes]
    ops[0].requires_grad_(dtype not in ("bfloat16", "float16"))
    got = skcontract.einsum(subscripts, *ops)
    want = torch.einsum(subscripts, *[o.detach().double() for o in ops])
    assert isinstance(got, torch.Tensor)
    assert got.device.type == device and got.dtype == getattr(torch, dtype)
    assert got.shape == want.shape
    tol = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2}[dtype]
    err = (got.double() - want).norm() / max(float(want.norm()), 1e-300)
    assert float(err) <= tol


def test_torch_out_and_expressions():
    a, b = torch.randn(20, 30), torch.randn(30, 10)
    out = torch.empty(20, 10)
    assert skcontract.einsum("ij,jk->ik", a, b, out=out) is out
    torch.testing.assert_close(out, a @ b)
    expr = skcontract.contract_expression("ij,jk->ik", (20, 30), (30, 10))
    got = expr(a.cuda(), b.cuda())
    assert isinstance(got, torch.Tensor) and got.is_cuda
    torch.testing.assert_close(got.cpu(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_lazy_conjugate_is_read_as_its_values(device):
    """torch's conj() is a view with a bit set, not new values (neither NumPy nor DLPack
    takes it): it is read as the values it stands for, with conj= and in an expression."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(4, 5, generator=g, dtype=torch.complex64).to(device)
    b = torch.randn(5, 3, generator=g, dtype=torch.complex64).to(device)
    x = a.conj()
    assert x.is_conj()
    got = skcontract.einsum("ij,jk->ik", x, b)
    want = x.resolve_conj().cpu().numpy() @ b.cpu().numpy()
    assert got.device.type == device
    assert float(abs(got.cpu().numpy() - want).max()) < 1e-4
    # the bit read as conj= reads an operand (on the GPU: the embedding's signs), and
    # conj= of a lazy conjugate reads the values beneath it
    got = skcontract.einsum("ij,jk->ik", x, b.conj(), conj=(0,))
    want = a.cpu().numpy() @ b.conj().resolve_conj().cpu().numpy()
    assert float(abs(got.cpu().numpy() - want).max()) < 1e-4
    expr = skcontract.contract_expression("ij,jk->ik", (4, 5), (5, 3), conj=(1,))
    got = expr(x, b)
    want = x.resolve_conj().cpu().numpy() @ b.conj().resolve_conj().cpu().numpy()
    assert float(abs(got.cpu().numpy() - want).max()) < 1e-4


def test_conv2d_reads_a_lazy_conjugate_on_the_cpu():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 4, 6, 6, generator=g, dtype=torch.complex64)
    w = torch.randn(6, 2, 3, 3, generator=g, dtype=torch.complex64)
    got = skcontract.conv2d(x.conj(), w, groups=2)
    want = torch.nn.functional.conv2d(x.conj().resolve_conj(), w, groups=2)
    assert float((got - want).abs().max()) < 1e-4


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ki", [(50, 60), (60, 70)]),                   # tensordot, then transpose
    ("abc,bcd,de->ea", [(6, 8, 10), (8, 10, 12), (12, 4)]),
    ("bij,bjk->bik", [(4, 32, 48), (4, 48, 16)]),          # einsum (a batch label)
    ("ii->i", [(9, 9)])])
def test_opt_einsum_contract_on_cuda_tensors(subscripts, shapes, dtype):
    """skcontract as opt_einsum's backend on CUDA torch tensors: the result a CUDA tensor
    of the operands' dtype, equal to torch's in float64."""
    import opt_einsum
    g = torch.Generator().manual_seed(53)
    ops = [torch.randn(s, generator=g).to(getattr(torch, dtype)).cuda() for s in shapes]
    got = opt_einsum.contract(subscripts, *ops, backend="skcontract")
    want = torch.einsum(subscripts, *[o.double() for o in ops])
    assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == ops[0].dtype
    tol = {"float16": 5e-3, "float32": 1e-5, "float64": 1e-12}[dtype]
    err = (got.double() - want).norm() / want.norm()
    assert float(err) <= tol
