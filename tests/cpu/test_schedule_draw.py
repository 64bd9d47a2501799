"""Pictures of schedules, the corpus report (tools.cost_report)."""
import builtins
import json

import numpy as np
import pytest

from skcontract.schedule import DeviceInfo, draw_schedule, schedule_gemm
from tools.cost_report import corpus_shapes, load_corpus, main, markdown


def test_draw_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    ss = [schedule_gemm(2176, 1024, 4096, tile=(128, 128, 64), mode=m)
          for m in ("data_parallel", "stream_k", "hybrid")]
    path = tmp_path / "s.png"
    draw_schedule(ss, str(path))
    assert path.stat().st_size > 10_000
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_draw_on_an_axes_and_waits_marked():
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    import dataclasses
    from skcontract.schedule.heuristics import DEFAULT_COST
    # the guessed constants charge writing a partial (b > 0), so a waiter outlasts its
    # publisher's compute; the H200's measured b is 0 (writes overlap), which leaves no wait
    dev = dataclasses.replace(DeviceInfo.h200(), sms=4, cost=DEFAULT_COST)
    s = schedule_gemm(384, 128, 90 * 64, tile=(128, 128, 64), device=dev, mode="split_k",
                      splits=2, reduction="deterministic")
    ax = Figure().subplots()
    out = draw_schedule(s, ax)
    assert out is ax
    faces = [tuple(c[:3]) for coll in ax.collections for c in coll.get_facecolors()]
    assert (1.0, 0.0, 0.0) in faces  # a red wait


def test_draw_without_matplotlib_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def fake(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match="pip install"):
        draw_schedule(schedule_gemm(256, 256, 256, tile=(128, 128, 64)), None)


def test_report_covers_every_gemm_shape():
    """One row a shape, naming the entry gemm would launch for contiguous operands: a
    cluster pair where B's rows start off lines (1000^3), the Dot family for one row."""
    corpus = load_corpus()  # the package's own corpus, the default of --corpus
    text = markdown(corpus, DeviceInfo.h200())
    n = len(list(corpus_shapes(corpus)))
    assert text.count("\n| ") == n + 2  # a row a shape + header + separator
    assert "| exact-waves | 1536 x 1408 x 4096 | Wgmma 128x128x64 | data_parallel |" in text
    assert "| 1000 x 1000 x 1000 | WgmmaPair 256x64x64 |" in text
    assert "| 1 x 8192 x 8192 | Dot " in text


def test_report_reads_the_corpus_given(tmp_path, capsys):
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"gemm": [{"class": "one", "shapes": [[256, 256, 256]]}]}))
    main(["--corpus", str(path)])
    assert capsys.readouterr().out.count("| one | 256 x 256 x 256 |") == 1


def test_report_parses_batched_entries():
    corpus = {"gemm": [{"class": "b", "shapes": [{"batch": 4, "mnk": [8, 9, 10]}, [1, 2, 3]]}]}
    assert list(corpus_shapes(corpus)) == [("b", 4, 8, 9, 10), ("b", 1, 1, 2, 3)]


def test_a_picture_of_many_tiles_merges_each_ctas_whole_tiles():
    """Beyond MAX_SINGLE_BARS rows, a CTA's consecutive whole tiles are one bar: 16471 tiles
    become one bar a CTA (they took 9 s to draw one by one)."""
    from skcontract.schedule import draw
    from skcontract.schedule.emulate import timeline

    s = schedule_gemm(23168, 23168, 1024, dtype="float16", device=DeviceInfo.h200(),
                      tiles=[(128, 128, 64), (128, 256, 64)]).expanded()
    assert len(s.table) > draw.MAX_SINGLE_BARS and s.num_fixup_tiles == 0
    tl = timeline(s)
    bars = draw._bars(s, tl, list(range(len(s.table))))
    assert len(bars) == s.grid
    ends = {round(y + 0.4): x + w for x, y, w, *_ in bars}
    assert max(ends.values()) == float(np.nanmax(tl["end"]))
    few = draw._bars(s, tl, list(range(100)))  # under the cap: a bar a tile
    assert len(few) == 100
