"""The command line: `python -m skcontract demo | explain | bench`."""
from __future__ import annotations

import pytest

from skcontract.__main__ import main


def test_demo_checks_every_case_on_the_cpu(capsys):
    assert main(["demo", "--backend", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "backend = numpy" in out and "4/4 demo einsums match numpy" in out
    assert "MISMATCH" not in out and "BATCHED_GEMM" in out


def test_explain_prints_the_plan_and_draws(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "s.png"
    assert main(["explain", "ij,jk->ik", "2176x4096", "4096x1024", "--draw", str(png)]) == 0
    out = capsys.readouterr().out
    assert "GEMM" in out and "grid=" in out and "i=2176" in out
    assert png.stat().st_size > 10_000


def test_explain_refuses_a_drawing_without_gemm(tmp_path):
    with pytest.raises(ValueError, match="no GEMM-class step"):
        main(["explain", "ii->i", "5x5", "--draw", str(tmp_path / "x.png")])


def test_bench_gemm_without_a_gpu_says_so(capsys, monkeypatch):
    import skcontract.demo
    monkeypatch.setattr(skcontract.demo, "gpu_available", lambda: False)
    assert main(["bench", "gemm"]) == 2
    assert "needs CuPy and an NVIDIA GPU" in capsys.readouterr().err
