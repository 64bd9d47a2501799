"""The Wgmma epilogue's C descriptor (tma.output_map) without a GPU: the encoder is a
stand-in, so the tests read what the driver would be asked to encode, and when it is not."""
from types import SimpleNamespace

import pytest

from skcontract.kernels import tma


@pytest.fixture
def encoded(monkeypatch):
    calls = []

    def fake(ptr, dtype, dims, strides, box):
        calls.append((ptr, dtype, dims, strides, box))
        return "map"

    monkeypatch.setattr(tma, "operand_map", fake)
    return calls


SPEC = SimpleNamespace(elem_bytes=2, dtype_out="float16", entry=SimpleNamespace(tma_store=True))


def test_c_is_stored_through_a_map_of_its_rows_columns_and_batch(encoded):
    assert tma.output_map(SPEC, 0x1000, 3, 200, 136, 144, 200 * 144, 0.0) == "map"
    # (N, M, batch) innermost first; rows and batches apart in bytes; 64 x 64 boxes
    assert encoded == [(0x1000, "float16", (136, 200, 3), (288, 57600), (64, 64, 1))]


def test_one_matrix_gets_a_batch_of_one(encoded):
    tma.output_map(SPEC, 0x1000, 1, 8, 64, 64, 0, 0.0)
    assert encoded[0][2] == (64, 8, 1)


@pytest.mark.parametrize("ptr,ldc,batch,sc,beta,why", [
    (0x1000, 64, 1, 0, 0.5, "beta reads C"),
    (0x1008, 64, 1, 0, 0.0, "base off 16 bytes"),
    (0x1000, 68, 1, 0, 0.0, "rows 136 bytes apart"),
    (0x1000, 64, 2, 64 * 8 + 4, 0.0, "batches off 16 bytes"),
    (0x1000, -64, 1, 0, 0.0, "rows backwards (out[::-1])"),
    (0x1000, 64, 2, -64 * 8, 0.0, "batches backwards"),
    (0x1000, 64, 2, 0, 0.0, "every batch onto one matrix"),
])
def test_the_threads_store_what_tma_cannot(encoded, ptr, ldc, batch, sc, beta, why):
    assert tma.output_map(SPEC, ptr, batch, 8, 64, ldc, sc, beta) is None, why
    assert encoded == []


def test_small_products_keep_the_threads_store(encoded, monkeypatch):
    monkeypatch.setattr(tma, "STORE_MIN_OUTPUTS", 64 * 64 + 1)
    assert tma.output_map(SPEC, 0x1000, 1, 64, 64, 64, 0, 0.0) is None
    assert tma.output_map(SPEC, 0x1000, 1, 64, 65, 72, 0, 0.0) == "map"


@pytest.mark.parametrize("row_bytes,promotion", [(2048, 256), (2016, 256), (2000, 128),
                                                 (10000, 128), (16, 128), (32, 256)])
def test_rows_that_start_mid_sector_promote_128_bytes(row_bytes, promotion):
    assert tma.l2_promotion_bytes(row_bytes) == promotion


@pytest.mark.parametrize("key,family,element", [("tf32", "WgmmaTf32", "tf32"),
                                                ("3xtf32", "WgmmaTf32x3", "float32"),
                                                ("float16", "Wgmma", "float16")])
def test_operand_maps_read_the_entrys_element_type(encoded, key, family, element):
    """tf32 maps round the floats to tf32 as they load (TFLOAT32); the 3xTF32 entries' maps
    load them raw (FLOAT32), since their consumers split each float into two tf32 parts."""
    from skcontract.kernels import catalogue, specs
    entry = next(b for b in catalogue.CATALOGUE[key] if b.FAMILY == family)
    spec = specs.specialise(entry, protocol="none", a_layout="row", b_layout="col")
    tma.gemm_maps(spec, 0x1000, 0x2000, 1, 512, 512, 1024, 1024, 1024, 0, 0)
    assert [c[1] for c in encoded] == [element, element]
    assert element in tma._TMA_DTYPES


class _Names:
    """A stand-in enum: any member is its own name."""

    def __getattr__(self, name):
        return name


def test_a_thread_without_a_context_is_told_apart(monkeypatch):
    """The encoder's CUDA_ERROR_INVALID_CONTEXT (a thread's first CUDA call: a Dask worker's)
    raises NoContext, which the launch answers by binding the device's context and encoding
    again; any other refusal stays a plain RuntimeError."""
    results = []
    driver = SimpleNamespace(
        CUresult=SimpleNamespace(CUDA_SUCCESS=0, CUDA_ERROR_INVALID_CONTEXT=201),
        CUtensorMapDataType=_Names(), CUtensorMapInterleave=_Names(),
        CUtensorMapSwizzle=_Names(), CUtensorMapL2promotion=_Names(),
        CUtensorMapFloatOOBfill=_Names(), cuuint64_t=int, cuuint32_t=int,
        cuTensorMapEncodeTiled=lambda *args: (results.pop(0), None))
    monkeypatch.setattr(tma, "_driver", driver)
    tma.operand_map.cache_clear()
    results.append(201)
    with pytest.raises(tma.NoContext, match="cuTensorMapEncodeTiled"):
        tma.operand_map(0x1000, "float16", (64, 64, 1), (128, 8192), (64, 64, 1))
    results.append(1)
    with pytest.raises(RuntimeError) as refused:
        tma.operand_map(0x2000, "float16", (64, 64, 1), (128, 8192), (64, 64, 1))
    assert not isinstance(refused.value, tma.NoContext)
    tma.operand_map.cache_clear()
