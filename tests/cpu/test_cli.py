"""The command line: `python -m skcontract demo | explain | bench`."""
from __future__ import annotations

import re

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


@pytest.mark.parametrize("argv,needle", [
    (["explain", "ii->i", "5x5", "--draw", "{tmp}/x.png"], "no scheduled GEMM-class step"),
    (["explain", "ij,jk->ik", "128,64", "64,32"], "'128,64' is not like 128x64"),
    (["explain", "ij,jk->ik", "128x64", "32x32"], "label 'j'"),
    (["explain", "ij,jk->ik", "128x64"], "fewer operands"),
    (["explain", "ij,jk->ik", "128x64", "64x32", "--draw", "{tmp}/no/dir/x.png"],
     "No such file"),
    (["explain", "ij,jk->ik", "128x64", "64x32", "--optimize", "nope"], "'nope'"),
    (["explain", "ij,jk->ik", "128x64", "64x32", "--dtype", "str"], "dtype"),
    (["explain", "ij,jk->ik", "128x64", "64x32", "--device", "a100"], "invalid choice"),
    (["explain", "ij,jk->ik", "128x64", "64x32", "--precision", "fp8"], "invalid choice"),
    (["explain", "ij,jk->ik", "128x64", "64x32", "--draw", ""], "file path is empty"),
    (["explain", "ij,jk->ik", "9223372036854775808x2", "2x3"], "dimension above"),
    (["explain", "ij,jk->ik", "4611686018427387904x4", "4x2"], "more elements than"),
    (["bench", "overhead", "--repeat", "0"], "must be at least 1, got 0"),
    (["bench", "overhead", "--number", "-3"], "must be at least 1, got -3"),
])
def test_user_mistakes_print_one_line_and_exit_2(argv, needle, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("python -m skcontract")


def test_explain_takes_dtype_device_and_optimizer(capsys):
    assert main(["explain", "ij,jk,kl->il", "64x32", "32x48", "48x16", "--dtype", "float16",
                 "--device", "h100", "--optimize", "greedy"]) == 0
    out = capsys.readouterr().out
    assert "dtype float16" in out and "H100" in out and "sum assoc float32" in out


def test_explain_takes_a_precision(capsys):
    assert main(["explain", "ij,jk->ik", "4096x4096", "4096x4096", "--dtype", "float32",
                 "--precision", "3xtf32"]) == 0
    out = capsys.readouterr().out
    assert "3xtf32: " in out and "B copied K-major for 3xtf32" in out
    assert main(["explain", "ij,jk->ik", "256x8192", "8192x3584", "--dtype", "float32",
                 "--precision", "3xtf32"]) == 0  # B dear to copy: turned in the stages
    out = capsys.readouterr().out
    assert "3xtf32: " in out and "copied" not in out
    assert main(["explain", "ij,jk->ik", "4096x4096", "4096x4096", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out  # the default: 3xTF32 on a long sum, as its reason says
    assert "3xtf32: " not in out and "float32 at 3xtf32 (K 4,096 >= 2,048)" in out
    assert main(["explain", "ij,jk->ik", "4096x4096", "4096x4096", "--dtype", "float32",
                 "--precision", "exact"]) == 0
    assert "tf32" not in capsys.readouterr().out


def test_version(capsys):
    import skcontract
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and skcontract.__version__ in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"], ["explain", "--help"],
                                  ["bench", "--help"], ["bench", "gemm", "--help"],
                                  ["bench", "einsum", "--help"], ["bench", "overhead", "--help"],
                                  ["bench", "networks-run", "--help"]])
def test_every_help_works_without_a_gpu(argv, capsys, monkeypatch):
    import skcontract.demo
    monkeypatch.setattr(skcontract.demo, "gpu_available", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0 and "usage:" in capsys.readouterr().out


@pytest.mark.parametrize("what", ["gemm", "einsum"])
def test_gpu_benchmarks_without_a_gpu_say_so(what, capsys, monkeypatch):
    import skcontract.demo
    monkeypatch.setattr(skcontract.demo, "gpu_available", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        main(["bench", what])
    assert exit_.value.code == 2
    assert f"bench {what}: error: needs CuPy and an NVIDIA GPU" in capsys.readouterr().err


def test_bench_overhead_writes_no_file_unless_told(tmp_path, monkeypatch, capsys):
    import skcontract.bench.overhead as overhead
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(overhead, "CASES", overhead.CASES[:1])
    assert main(["bench", "overhead", "--repeat", "1", "--number", "1"]) == 0
    assert list(tmp_path.iterdir()) == []
    assert main(["bench", "overhead", "--repeat", "1", "--number", "1", "--out",
                 "t.md"]) == 0
    assert (tmp_path / "t.md").read_text().startswith("#")


def test_demo_on_cupy_without_a_gpu_says_so(capsys, monkeypatch):
    monkeypatch.setattr("skcontract.demo.gpu_available", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--backend", "cupy"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "needs CuPy and an NVIDIA GPU" in err and "Traceback" not in err


def test_the_license_the_metadata_names_ships_with_the_source():
    """pyproject.toml says Apache-2.0: the repository carries that license's text."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    assert 'license = "Apache-2.0"' in (root / "pyproject.toml").read_text()
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def _options_without_help(text: str) -> list[str]:
    """The options of an argparse --help text that carry no description."""
    lines = text.splitlines()
    bare = []
    for i, line in enumerate(lines):
        m = re.match(r"^  (-[\w-]+(?:, --[\w-]+)?(?: [A-Z_]+)?)(\s{2,}\S.*)?$", line)
        if m is None:
            continue
        described = m.group(2) is not None or (
            i + 1 < len(lines) and re.match(r"^ {10,}\S", lines[i + 1]) is not None)
        if not described:
            bare.append(m.group(1))
    return bare


@pytest.mark.parametrize("argv", [[], ["demo"], ["explain"], ["bench"], ["bench", "gemm"],
                                  ["bench", "einsum"], ["bench", "conv2d"],
                                  ["bench", "tf32_int8"], ["bench", "overhead"]])
def test_every_cli_option_says_what_it_does(argv, capsys):
    from skcontract.__main__ import main
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    text = capsys.readouterr().out
    assert "usage:" in text
    assert not _options_without_help(text), (argv, _options_without_help(text))


def test_explain_for_the_gpu_without_cupy_says_what_to_do(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", None)  # as on a machine without CuPy
    with pytest.raises(SystemExit) as e:
        main(["explain", "ij,jk->ik", "4x5", "5x6", "--device", "gpu"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "through CuPy, which is not installed" in err and "'h200'" in err
