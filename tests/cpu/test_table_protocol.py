"""The split table's one Python definition (schedule/table.py) and the kernels' C++ enums
name the same columns, flags and protocol codes; every schedule's protocol is one the
kernels run."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from skcontract.schedule import schedule_gemm
from skcontract.schedule import table as T

CUDA = Path(__file__).resolve().parents[2] / "skcontract" / "kernels" / "cuda"
DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design"


def _enum(text: str, prefix: str) -> dict[str, int]:
    """``NAME = value`` pairs of the C++ enum whose names start with ``prefix`` (implicit
    values count up from the previous one, as in C++)."""
    body = re.search(r"enum\s*:\s*int\s*\{([^}]*\b" + prefix + r"[^}]*)\}", text).group(1)
    out, value = {}, -1
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, expr = (x.strip() for x in item.partition("="))
        if expr and not expr.lstrip("-").isdigit():
            out[name] = expr  # another enumerator's name
            continue
        value = int(expr) if expr else value + 1
        out[name] = value
    return out


def test_columns_match_the_kernel_scheduler():
    cols = _enum((CUDA / "sk_scheduler.cuh").read_text(), "COL_")
    want = {f"COL_{n.upper()}": i for i, n in enumerate(T.COLUMN_NAMES)}
    want["NUM_COLUMNS"] = T.NUM_COLUMNS
    assert cols == want


def test_flags_match_the_kernel_scheduler():
    flags = _enum((CUDA / "sk_scheduler.cuh").read_text(), "FLAG_")
    assert flags == {f"FLAG_{n.upper()}": v for n, v in T.FLAGS_BY_NAME.items()}


def test_range_columns_and_tile_order_match_the_kernel_scheduler():
    text = (CUDA / "sk_scheduler.cuh").read_text()
    cols = _enum(text, "COL_RANGE_")
    named = _enum(text, "COL_")
    assert {k: named[v] if isinstance(v, str) else v for k, v in cols.items()} == {
        f"COL_{n.upper()}": c for n, c in T.RANGE_COLUMNS.items()}
    assert _enum(text, "RASTER_M_BIT") == {"RASTER_M_BIT": T.RASTER_M_BIT}
    assert T.tile_order_code(3, "M") == 3 | (1 << T.RASTER_M_BIT)


def test_protocol_codes_match_the_fixup():
    """The kernels' REDUCTION_<NAME> codes are generated from Protocol (protocol.cuh, which
    fixup.cuh includes), whose codes are the table's."""
    from skcontract.kernels import jit
    codes = _enum(jit.protocol_header(), "REDUCTION_")
    assert codes == {f"REDUCTION_{n.upper()}": v for n, v in T.PROTOCOL_CODES.items()}
    assert '#include "protocol.cuh"' in (CUDA / "fixup.cuh").read_text()
    assert "REDUCTION_CLUSTER = 4" in jit.inline_headers("sk_gemm.cuh")


@pytest.mark.parametrize("page,with_codes", [("architecture.md", True), ("stream_k.md", True),
                                             ("kernels.md", False)])
def test_the_design_pages_list_every_protocol(page, with_codes):
    """Where docs/design lists the kernels' REDUCTION constants, it lists each of them (with
    its code where it gives codes)."""
    text = (DESIGN / page).read_text()
    for name, code in T.PROTOCOL_CODES.items():
        want = f"REDUCTION_{name.upper()}" + (f" = {code}" if with_codes else "")
        assert want in text, f"{page} lacks {want}"


@pytest.mark.parametrize("mode,reduction", [("data_parallel", "deterministic"),
                                            ("stream_k", "atomic"),
                                            ("stream_k", "deterministic"),
                                            ("stream_k", "arrival"),
                                            ("aligned", "arrival")])
def test_every_schedule_names_a_protocol_the_kernels_run(mode, reduction):
    s = schedule_gemm(512, 384, 4096, mode=mode, reduction=reduction, tile=(128, 128, 32))
    want = "none" if mode == "data_parallel" else reduction
    assert s.protocol == want and s.protocol in T.PROTOCOL_CODES
