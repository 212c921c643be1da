"""The adversarial passes' cases of 2026-12-07 (issue 67): what pass 35 left (a status.json copied
from another run of the same size was read; a plan promised power 1 from a measure that never
varied; ``--out ./-`` was refused as standard output; ``model/tiny`` got run-directory advice), and
pass 36's causes below them."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.cli import main
from tests.support import FAST, one_line_error, sweep

THREE = [o for o in FAST if not o.startswith("prompts.limit")] + ["prompts.limit=3"]
ONE_TOKEN = [o for o in THREE if not o.startswith("decode.max_new_tokens")] + ["decode.max_new_tokens=1"]


@pytest.fixture(scope="module")
def one_token(tmp_path_factory):
    """A run whose edit distance is 0 in every condition: one new token, never changed by a prefix."""
    run = sweep(tmp_path_factory.mktemp("pass36") / "one", *ONE_TOKEN)
    import pandas as pd

    values = pd.read_parquet(run / "conditions.parquet").norm_edit_distance
    assert values.nunique() == 1, "the fixture needs a measure that never varied"
    return run


def test_a_status_copied_from_a_run_of_the_same_size_is_refused(one_token, tmp_path, capsys):
    """Pass 35 (silent): the count check saw a status.json of another sweep only where the counts differed."""
    other = sweep(tmp_path / "other", *ONE_TOKEN)  # the same design: the same count, another manifest
    run = tmp_path / "swapped"
    shutil.copytree(one_token, run)
    shutil.copy(other / "status.json", run / "status.json")
    assert json.loads((run / "status.json").read_text())["conditions"] == \
        json.loads((one_token / "status.json").read_text())["conditions"]
    line = one_line_error(capsys, ["plan", str(run)])
    assert "status.json was written for another manifest.json" in line, line
    assert main(["plan", str(one_token), "--out", str(tmp_path / "plan")]) == 0  # its own status still reads


def test_a_measure_that_never_varied_is_not_planned_from(one_token, tmp_path, capsys):
    """Pass 35 (misleading): every B and C value 0 gave components of 0 and a power of 1, and the plan
    chose the pilot's own design for a test it knows nothing of."""
    line = one_line_error(capsys, ["plan", str(one_token), "--measure", "norm_edit_distance"])
    assert "norm_edit_distance took one value in every B and C condition" in line, line
    out = tmp_path / "claims-plan"
    assert main(["plan", str(one_token), "--out", str(out)]) == 0
    page = (out / "plan.md").read_text()
    assert "left out, as nothing to plan from: claim 3, norm_edit_distance in 1 of 1 cell(s)" in page
    assert "| 3 | norm_edit_distance |" not in page  # no row promising it a power


def test_out_dot_slash_dash_is_a_directory_named_dash(one_token, tmp_path, monkeypatch, capsys):
    """Pass 35 (misleading): ``--out ./-`` was refused as ``-``, standard output, which it is not."""
    monkeypatch.chdir(tmp_path)
    assert "writes files, not standard output" in one_line_error(capsys, ["claims", str(one_token), "--out", "-"])
    assert main(["claims", str(one_token), "--out", "./-", "--resamples", "50"]) == 0
    assert (tmp_path / "-" / "claims.md").is_file()


@pytest.mark.parametrize("stray, said", [
    ("model/tiny", "a config group's choice is written model=tiny"),
    ("prompts/en", "a config group's choice is written prompts=en"),
    ("model/tinyy", "model's choices: "),
])
def test_a_config_files_path_is_answered_with_its_choice(stray, said, tmp_path, monkeypatch, capsys):
    """Pass 35 (misleading): ``model/tiny`` was told how to set a run's directory."""
    monkeypatch.chdir(tmp_path)
    line = one_line_error(capsys, ["sweep", stray])
    assert said in line and "hydra.run.dir" not in line, line
    assert not (tmp_path / "outputs").exists()
