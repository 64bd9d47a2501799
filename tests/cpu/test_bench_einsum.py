"""The einsum benchmark's bookkeeping: cases, traffic, call counts, report (the timing runs
only on the device)."""
import json

import pytest

from skcontract.bench import einsum as bench


def _row(expr="ij,ij->i", dtype="float32", **figures):
    row = dict.fromkeys(bench.ROW_KEYS)
    row.update(expr=expr, shapes=[[4, 8], [4, 8]], dtype=dtype)
    row.update(figures)
    return row


def test_cases_cover_every_corpus_expression_in_every_dtype():
    corpus = json.loads(bench.DEFAULT_CORPUS.read_text())["einsum"]
    cases = bench.load_cases(bench.DEFAULT_CORPUS, ("float32", "float16"))
    assert len(cases) == 2 * len(corpus)
    assert {(c[0], c[2]) for c in cases} == {(e["expr"], dt) for e in corpus
                                             for dt in ("float32", "float16")}
    assert all(isinstance(s, tuple) for _, shapes, _ in cases for s in shapes)


@pytest.mark.parametrize("expr, shapes, out", [
    ("ij,ij->i", ((8192, 8192), (8192, 8192)), (8192,)),
    ("i,i->", ((16,), (16,)), ()),
    ("ii->i", ((5, 5),), (5,)),
    ("...ij,...jk->...ik", ((4, 8, 2, 3), (4, 8, 3, 5)), (4, 8, 2, 5)),
    ("aib,bjc,ckd->aijkd", ((1, 6, 2), (2, 7, 3), (3, 8, 1)), (1, 6, 7, 8, 1)),
])
def test_output_shape(expr, shapes, out):
    assert bench.output_shape(expr, shapes) == out


def test_traffic_counts_operands_once_and_the_result_once():
    # 2 operands of 8192^2 float32 and an 8192-vector result
    assert bench.traffic_bytes("ij,ij->i", ((8192, 8192),) * 2, 4) == (2 * 8192**2 + 8192) * 4
    assert bench.traffic_bytes("i,i->", ((10,), (10,)), 2) == 21 * 2
    # a diagonal reads n of the n x n elements
    assert bench.traffic_bytes("ii->i", ((4096, 4096),), 4) == 2 * 4096 * 4
    assert bench.gbps(4_000_000, 1000.0) == 4.0   # 4 MB in 1 ms
    assert bench.gbps(10, None) is None


def test_calls_per_replay_aims_at_the_replay_length_within_bounds():
    from skcontract.bench import timing
    assert timing.calls_per_replay(100.0) == int(timing.REPLAY_SECONDS * 1e6 / 100.0)
    assert timing.calls_per_replay(1e-6) == timing.MAX_CALLS
    assert timing.calls_per_replay(1e6) == timing.MIN_CALLS


def test_summary_names_the_worst_rows():
    rows = [_row("ij,jk->ik", call_us=10.0, torch_call_us=30.0, us=5.0, torch_us=5.0),
            _row("i,i->", call_us=20.0, torch_call_us=30.0, us=40.0, torch_us=20.0),
            _row("bij,bjk->bik", call_us=100.0, torch_call_us=80.0, us=90.0, torch_us=99.0)]
    text = "\n".join(bench.summary_lines(rows))
    assert "per call vs torch.einsum: worst 0.80x faster (`bij,bjk->bik` float32)" in text
    assert "device time < 50 us: worst 1.50x faster (`i,i->` float32)" in text
    assert "worst 0.50x, best 1.10x" in text


def test_markdown_has_a_line_per_row_and_dashes_for_missing_figures():
    rows = [_row(call_us=10.0, torch_call_us=30.0, us=2.0, torch_us=4.0, gbps=3500.0,
                 rel_err=1e-7),
            _row("i,i->", "float16")]
    text = bench.render_markdown({"device": "GPU", "date": "2026-12-01", "commit": "abc",
                                  "rows": rows})
    lines = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert len(lines) == 2
    assert "| 3.00 | 2.00 | 1.0e-07 |" in lines[0] and "| 3500 |" in lines[0]
    assert lines[1].endswith("| - | - | - |")


def test_plot_is_written_when_matplotlib_is_there(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(call_us=10.0, torch_call_us=30.0, us=2.0, torch_us=4.0),
            _row(dtype="float16", call_us=10.0, torch_call_us=5.0)]
    assert bench.write_plot(tmp_path / "e.png", rows)
    assert (tmp_path / "e.png").stat().st_size > 0
