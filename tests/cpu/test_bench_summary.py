"""The GEMM benchmark's summary arithmetic (the GPU part runs only on the device)."""
import math

from skcontract.bench.gemm import summarize


def _row(cls, dtype, mode, us, cublas_us=10.0):
    return dict(**{"class": cls}, batch=1, m=256, n=256, k=256, dtype=dtype, mode=mode,
                us=us, cublas_us=cublas_us)


def test_summary_geomeans_are_speedups_per_class_and_overall():
    rows = [_row("wave", "float16", "data_parallel", 40.0),
            _row("wave", "float16", "stream_k", 20.0),
            _row("wave", "float16", "hybrid", 40.0),
            _row("wave", "float16", "auto", 20.0),
            _row("wave", "float16", "cublas_torch", 10.0)]
    other = [dict(r, m=512, **{"class": "exact"}) for r in rows]
    other[3]["us"] = 80.0   # auto half as fast as DP on the second class
    s = summarize(rows + other)
    assert s["wave/float16"]["auto_vs_dp"] == 2.0
    assert s["wave/float16"]["auto_vs_cublas"] == 0.5
    assert s["exact/float16"]["auto_vs_dp"] == 0.5
    assert math.isclose(s["all/float16"]["auto_vs_dp"], 1.0)
    assert s["all/float16"]["stream_k_vs_dp"] == 2.0 and s["all/float16"]["n"] == 2


def test_each_row_is_compared_with_its_adjacent_cublas_time():
    """The clock drifts between measurements: a row's speed-ups use the cuBLAS time taken
    right before it, and mode-vs-mode ratios compare speed-ups, not raw times."""
    rows = [_row("wave", "float16", "cublas_torch", 10.0),
            _row("wave", "float16", "data_parallel", 20.0, cublas_us=10.0),
            _row("wave", "float16", "stream_k", 22.0, cublas_us=11.0),  # a slower clock
            _row("wave", "float16", "hybrid", 20.0),
            _row("wave", "float16", "auto", 24.0, cublas_us=12.0)]
    s = summarize(rows)["wave/float16"]
    assert s["auto_vs_cublas"] == 0.5
    assert s["auto_vs_dp"] == 1.0 and s["stream_k_vs_dp"] == 1.0


def test_a_merge_keeps_each_kept_dtypes_own_run(tmp_path, monkeypatch):
    """Rows kept from a file that was itself a merge name the run that measured them, not
    the merge that carried them."""
    import json
    from types import SimpleNamespace

    from skcontract.bench import gemm as bench
    monkeypatch.setattr(bench, "run_commit", lambda: "new")
    monkeypatch.setattr(bench, "device_name", lambda: "GPU")
    def row(dtype, us):
        return dict(_row("batched", dtype, "auto", us), call_us=us, tflops=1.0)

    old = {"date": "d2", "commit": "mid", "rows": [row("float32", 5.0), row("float16", 5.0)],
           "sources": {"float32": {"date": "d1", "commit": "first"},
                       "float16": {"date": "d2", "commit": "mid"}}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    args = SimpleNamespace(merge=str(tmp_path / "old.json"), out=str(tmp_path), name="g")
    bench._write_all(args, [row("float16", 4.0)], plot=False)
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["sources"]["float32"] == {"date": "d1", "commit": "first"}
    assert doc["sources"]["float16"]["commit"] == "new"
    assert "float32 kept from the run of d1 (commit first)" in doc["merged"]
    assert [r["dtype"] for r in doc["rows"]] == ["float32", "float16"]
