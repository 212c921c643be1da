"""``harness detect`` end to end on the session's tiny sweep: its tables, page and manifest, a rerun
that computes nothing, and its refusals in one line."""

import json

import pandas as pd

from harness.cli import main
from tests.support import one_line_error


def test_detect_writes_its_tables_and_resumes(tiny_run, tmp_path, capsys):
    out = tmp_path / "detect"
    assert main(["detect", str(tiny_run), "--out", str(out)]) == 0
    for name in ("detector.parquet", "detector_scores.parquet", "detector_heads.parquet", "detector.md",
                 "figures/detector_roc.png", "manifest.json", "status.json"):
        assert (out / name).is_file(), name
    scores = pd.read_parquet(out / "detector_scores.parquet")
    conditions = pd.read_parquet(tiny_run / "conditions.parquet")
    bc = conditions[conditions.group != "A"]
    assert len(scores) == 3 * len(bc)  # every B/C condition, by each detector
    assert set(scores.detector) == {"focus_score", "capture_heads", "capture_all"}
    assert set(scores.split) == {"choose", "test"} and scores.score.notna().all()
    per_set = scores.groupby("prefix_id").split.nunique()
    assert (per_set == 1).all()  # a prefix is on one side only
    table = pd.read_parquet(out / "detector.parquet")
    assert set(table.split) == {"halves"} and table.auroc.between(0, 1).all()
    assert table.note_1pct.str.startswith("too few negatives").all()  # 20 inputs: no threshold is printed
    page = (out / "detector.md").read_text()
    assert "Attention Tracker" in page and "too few negatives" in page
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"] == len(bc)
    stored = sorted((out / "results").glob("*.npz"))
    assert len(stored) == len(bc)
    # a rerun reads every input back and writes the same tables
    mtimes = [p.stat().st_mtime_ns for p in stored]
    assert main(["detect", str(tiny_run), "--out", str(out)]) == 0
    assert [p.stat().st_mtime_ns for p in stored] == mtimes
    pd.testing.assert_frame_equal(pd.read_parquet(out / "detector_scores.parquet"), scores)


def test_detect_refuses_in_one_line(tiny_run, tmp_path, capsys):
    assert "no conditions.parquet here, so it is not a run directory" in one_line_error(
        capsys, ["detect", str(tmp_path), "--out", str(tmp_path / "o")])
    (tmp_path / "bare").mkdir()  # a table without the manifest that holds the run's config
    for name in ("conditions.parquet", "status.json"):
        (tmp_path / "bare" / name).write_bytes((tiny_run / name).read_bytes())
    assert "has no manifest.json" in one_line_error(capsys, ["detect", str(tmp_path / "bare"), "--out",
                                                             str(tmp_path / "o")])
    error = one_line_error(capsys, ["detect", str(tiny_run), "--out", str(tiny_run / "d")])
    assert "own output never goes inside a run" in error
    assert "--batch-size" in one_line_error(capsys, ["detect", str(tiny_run), "--out", str(tmp_path / "o"),
                                                     "--batch-size", "0"])


def test_the_head_table_takes_models_of_different_shapes():
    import numpy as np

    from harness.runs.detect import head_table

    inputs = pd.DataFrame({"input": [0, 1, 2], "group": ["B", "C", "B"], "prompt_id": "p", "unit": ["a", "b", "c"],
                           "attack": None})
    arrays = [np.zeros((3, 2, 3)), np.ones((3, 2, 3)), np.full((3, 1, 4), 2.0)]  # 2 layers x 3 heads, 1 x 4
    table = head_table(inputs, arrays)
    assert table.groupby("input").size().to_dict() == {0: 6, 1: 6, 2: 4}
    assert table[table.input == 2].capture.eq(2.0).all() and table[table.input == 1].task_mass.eq(1.0).all()
