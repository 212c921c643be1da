"""The thirty-second adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
647ea18): a run that decoded nothing (``decode.path=none``) read as B and C never moving from A
(survival 1 throughout), gave NaN C - B rows without a word, drew empty figures and dropped the
edit-distance tests from the claims and the plan unsaid; standard output on a full disk was an
internal error; check-determinism offered a collected set it refuses."""

from __future__ import annotations

import subprocess
import sys

import pytest

import harness as H
from harness.cli import main
from tests.support import FAST, ROOT, one_line_error, sweep


@pytest.fixture(scope="module")
def undecoded_run(tmp_path_factory):
    """Three prompts (a pilot a plan can read), attention only: B and C decode no continuation."""
    overrides = [o for o in FAST if not o.startswith("prompts.limit")] + ["prompts.limit=3", "decode.path=none"]
    return sweep(tmp_path_factory.mktemp("undecoded") / "run", *overrides)


def test_survival_of_a_run_that_decoded_nothing_is_refused(undecoded_run):
    """#a5/#b22/#c2 (silent): survival read the empty first_divergence as "never diverged": 1.0 [1.0,
    1.0] at every step."""
    with pytest.raises(ValueError, match=r"decoded no continuation \(decode.path=none\)"):
        H.survival(H.load_run(undecoded_run).conditions, n_resamples=20)


@pytest.mark.parametrize("analysis", ["compare_groups", "contrast", "drift_summary", "two_way_bootstrap",
                                      "prefix_permutation_test"])
def test_an_output_measure_empty_in_b_and_c_is_refused(undecoded_run, analysis):
    """#a2-#a8/#a20 (silent): NaN rows or an empty table; A's rows (0 against itself) passed the check
    for a measure empty in every row. The attention measures of the same run still compare."""
    conditions = H.load_run(undecoded_run).conditions
    with pytest.raises(ValueError, match=r"'norm_edit_distance' is empty in all \d+ rows of groups B and C; B and "
                                         r"C decoded no continuation \(decode.path=none\)"):
        getattr(H, analysis)(conditions, "norm_edit_distance")
    assert H.contrast(conditions, "attn_kl_mean").n_prompts.min() == 3


def test_the_pages_of_a_run_that_decoded_nothing_say_so(undecoded_run, tmp_path, capsys):
    """#7/#8/#10 (silent): claims dropped claim 3's edit-distance row unsaid, plan labelled its design
    "every test (attention and edit distance)", figures drew empty edit-distance and survival figures."""
    assert main(["claims", str(undecoded_run), "--resamples", "50", "--out", str(tmp_path / "c")]) == 0
    assert "decode.path=none): no claim test on edit distance" in (tmp_path / "c" / "claims.md").read_text()
    assert main(["plan", str(undecoded_run), "--out", str(tmp_path / "p")]) == 0
    page = (tmp_path / "p" / "plan.md").read_text()
    assert "decode.path=none" in page and "attention and edit distance" not in page
    assert main(["figures", str(undecoded_run), "--out", str(tmp_path / "f")]) == 0
    drawn = {p.stem for p in (tmp_path / "f" / "figures").glob("*.png")}
    assert "fig2_layer_drift" in drawn and not {"fig1_edit_distance", "fig6_survival"} & drawn, drawn


def test_a_plan_on_an_output_measure_nothing_decoded_names_the_cause(undecoded_run, capsys):
    """#68 (misleading): "cannot be estimated from 0 prefix(es) per group and 0 prompt(s): a pilot
    needs a complete crossing of at least 3 prompts": the pilot is one; nothing was decoded."""
    line = one_line_error(capsys, ["plan", str(undecoded_run), "--measure", "norm_edit_distance"])
    assert "'norm_edit_distance' is empty in all" in line and "B and C decoded no continuation (decode.path=" in line
    assert "a pilot needs" not in line


@pytest.mark.parametrize("command", [["claims", "{run}", "--resamples", "50", "--out", "{out}"], ["kv-size", "model=tiny"]])
def test_standard_output_on_a_full_disk_is_one_line(tiny_run, tmp_path, command):
    """#78-#85 (traceback): `> /dev/full` ended in "internal error (OSError)", rc 3 (claims after writing
    its files, on its "wrote" line)."""
    argv = [a.replace("{run}", str(tiny_run)).replace("{out}", str(tmp_path / "c")) for a in command]
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "harness", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "error: cannot write to standard output (No space left on device)" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_determinism_does_not_offer_a_collected_set(tmp_path, capsys):
    """#154/#162 (misleading): "give a sweep's (or a collected) one", then a collected set is refused."""
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "nothere", tmp_path / "empty"):
        line = one_line_error(capsys, ["check-determinism", str(path)])
        assert "collected" not in line, line
