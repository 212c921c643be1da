"""The thirty-first adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
5307c32): an --out that cannot be made ended in a traceback; runs of mixed settings read together
gave the attention table no `run` column; a Δ for a measure no test of the run reads was taken as
replacing one; two bootstrap values and a dropped key column gave results without a word; collect
advised keeping the first copy of jobs that differ on purpose and took a copied run for repeats;
causal-heads called the same head sets other settings; a moved relative input was "file not found"."""

from __future__ import annotations

import shutil
import warnings

import pandas as pd
import pytest

import harness as H
from harness.analysis.checks import PooledRunsWarning
from harness.cli import main
from harness.errors import HarnessError
from tests.support import FAST, ROOT, one_line_error, sweep


@pytest.fixture(scope="module")
def two_settings(tmp_path_factory):
    """Two runs of the same conditions at two max_new_tokens (results that differ on purpose), and a
    run of three prompts (one a plan can be made from)."""
    base = tmp_path_factory.mktemp("two_settings")
    short = [o for o in FAST if not o.startswith("decode.max_new_tokens")]
    three = [o for o in FAST if not o.startswith("prompts.limit")] + ["prompts.limit=3"]
    return (sweep(base / "six", *FAST), sweep(base / "four", *short, "decode.max_new_tokens=4"),
            sweep(base / "three", *three))


@pytest.mark.parametrize("command", [
    ["claims", "{run}", "--resamples", "50"], ["plan", "{run}"], ["figures", "{run}"], ["collect", "{run}"],
    ["detect", "{run}"], ["causal-heads", "{run}", "--ranking-only"]])
def test_an_out_under_a_file_is_refused_in_one_line(tiny_run, tmp_path, capsys, command):
    """#153-#167 (traceback): `--out runs/afile/sub` (a path under a file), /proc or /sys ended in
    "internal error (NotADirectoryError)"; plan printed its whole page first."""
    (tmp_path / "afile").write_text("mine\n")
    argv = [a.replace("{run}", str(tiny_run)) for a in command] + ["--out", str(tmp_path / "afile" / "sub")]
    line = one_line_error(capsys, argv)
    assert f"cannot create --out {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} is not a directory" in line
    assert (tmp_path / "afile").read_text() == "mine\n"
    assert "# Design plan" not in capsys.readouterr().out


def test_the_api_refuses_an_out_it_cannot_make(tiny_run, tmp_path):
    """#168/#210 (traceback): H.write_outputs and H.collect raised a raw NotADirectoryError."""
    (tmp_path / "afile").write_text("mine\n")
    tables = H.load_run(tiny_run)
    with pytest.raises(HarnessError, match="is not a directory; give another --out"):
        H.write_outputs(tables.conditions, tables.attention, tmp_path / "afile" / "sub")
    with pytest.raises(HarnessError, match="is not a directory; give another --out"):
        H.collect([tiny_run], tmp_path / "afile" / "sub")
    with pytest.raises(HarnessError, match=r"afile is a file: give a directory"):
        H.collect([tiny_run], tmp_path / "afile")


def test_runs_of_mixed_settings_keep_each_runs_attention_copy_by_name(two_settings):
    """#A8/#k6 (silent): the attention table of runs read with allow_mixed_settings had no `run` column,
    so head_contrasts counted both runs' copies of a head as two observations without a word (the
    conditions table had the column, and its analyses warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conditions, attention = H.load_runs(list(two_settings[:2]), allow_mixed_settings=True)
    assert "run" in conditions and "run" in attention
    keys = ["prompt_id", "group", "prefix_id", "prefix_len", "layer", "head", "segment"]
    assert attention.duplicated(keys).any() and not attention.duplicated([*keys, "run"]).any()
    assert set(attention["run"]) == {str(d) for d in two_settings[:2]}
    with pytest.warns(PooledRunsWarning, match="once per run"):
        H.head_contrasts(attention, seed=0)


@pytest.mark.parametrize("command", [["claims", "--resamples", "50"], ["plan"]])
def test_a_delta_for_a_measure_no_test_of_these_runs_reads_is_refused(two_settings, tmp_path, capsys, command):
    """#9/#14/#15 (silent): on a 2-layer model (no claim 1) --delta kl=0.2 was "replacing the Δ of 0.05"
    on a page that tests nothing on kl; a Δ for claim 3's measure still replaces the runs' own."""
    run = str(two_settings[2])
    argv = [command[0], run, *command[1:], "--delta", "kl=0.2", "--out", str(tmp_path / "o")]
    line = one_line_error(capsys, argv)
    assert "--delta kl=... would change nothing: no test" in line and "reads kl" in line, line
    assert "replaces the Δ" not in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main([command[0], run, *command[1:], "--delta", "norm_edit_distance=0.2", "--out", str(tmp_path / "o")]) == 0
    assert "--delta norm_edit_distance=0.2 replaces the Δ of 0.05" in capsys.readouterr().err


def test_bootstrap_ci_says_when_too_few_values_leave_it_nan():
    """#b12-#b14/#a15/#a16 (silent): two values gave (nan, nan) without a word, and the refusal of none
    asked for "at least 2"."""
    with pytest.warns(RuntimeWarning, match="2 value.*needs at least 3 units"):
        low, high = H.bootstrap_ci([1.0, 2.0])
    assert pd.isna(low) and pd.isna(high)
    with pytest.raises(ValueError, match="at least 3 units"):
        H.bootstrap_ci([])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # three values: an interval, no warning
        low, high = H.bootstrap_ci([1.0, 2.0, 4.0])
    assert low < high


def test_a_dropped_key_column_is_refused_not_pooled_over(tiny_run):
    """#a12/#b9/#b10 (silent): drift_summary without `group` pooled B and C; contrast without
    `prefix_len` gave one C - B across every length; contrast of a table concatenated with itself
    counted each condition twice."""
    conditions = H.load_run(tiny_run).conditions
    with pytest.raises(ValueError, match="no 'group' column, one of a condition's keys"):
        H.drift_summary(conditions.drop(columns=["group"]))
    with pytest.raises(ValueError, match="no 'prefix_len' column, one of a condition's keys"):
        H.contrast(conditions.drop(columns=["prefix_len"]), "output_kl")
    with pytest.raises(ValueError, match="repeating another row exactly"):
        H.contrast(pd.concat([conditions, conditions]), "output_kl")
    assert len(H.contrast(conditions, "output_kl")) == conditions.prefix_len[conditions.group == "C"].nunique()


def test_collect_of_runs_that_differ_on_purpose_advises_reading_them_side_by_side(two_settings, tmp_path, capsys):
    """#173/#178 (misleading): collect advised --allow-disagreement, which keeps the first job's copy
    alone, and then said the dropped copies were "e.g. group A in every job"."""
    argv = ["collect", *map(str, two_settings[:2]), "--out", str(tmp_path / "c")]
    line = one_line_error(capsys, argv)
    assert "decode.max_new_tokens" in line and "read side by side, not collected" in line, line
    assert "--allow-mixed-settings" in line and "--allow-disagreement would keep only the first" in line
    assert main([*argv, "--allow-disagreement", "--allow-mixed-settings"]) == 0
    out = capsys.readouterr().out
    assert "the first copy of each was kept, the others are not in the table" in out
    shared = len(pd.read_parquet(two_settings[0] / "conditions.parquet").query("group == 'A'"))
    assert "e.g. group A in every job" not in out or f"({shared} repeated rows with the same results" in out, out


def test_collect_names_a_copy_of_a_run_and_keeps_its_conditions_once(tiny_run, tmp_path, capsys):
    """#133/#g11 (misleading): a byte copy of a run was collected as "repeated rows, e.g. group A in
    every job"; the table was right (each condition once), the reason was not."""
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    assert main(["collect", str(tiny_run), str(copy), "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert f"note: {copy} holds the very conditions table of {tiny_run} (a copy?)" in out, out
    collected = pd.read_parquet(tmp_path / "c" / "conditions.parquet")
    assert len(collected) == len(pd.read_parquet(tiny_run / "conditions.parquet"))


def test_causal_heads_takes_the_same_head_sets_written_another_way(tiny_run, tmp_path, capsys):
    """#71/#77 (misleading): `--k 2 2` then `--k 2`, or `--k 1 2` then `--k 2 1`, were refused as other
    settings: the sets drawn are the same (each size once, in order)."""
    out = str(tmp_path / "ch")
    for ks in (["2", "2"], ["2"], ["1", "2"], ["2", "1"]):
        if ks == ["1", "2"]:
            out = str(tmp_path / "ch2")
        assert main(["causal-heads", str(tiny_run), "--ranking-only", "--draws", "1", "--k", *ks, "--out", out]) == 0
    assert main(["causal-heads", str(tiny_run), "--ranking-only", "--draws", "1", "--k", "1", "--out", out]) == 2
    assert "other settings (ks [1, 2] there, [1] here)" in capsys.readouterr().err


def test_a_moved_relative_input_is_named_from_the_runs_own_directory(tmp_path, capsys, monkeypatch):
    """#103 (misleading): the run's prompts file, named by a relative path, moved away: resume from the
    directory the run was made in said only "in/p.jsonl: file not found"."""
    (tmp_path / "in").mkdir()
    shutil.copy(ROOT / "harness" / "data" / "prompts_en.jsonl", tmp_path / "in" / "p.jsonl")
    monkeypatch.chdir(tmp_path)
    overrides = [o for o in FAST if not o.startswith("prompts.")] + ["prompts.path=in/p.jsonl", "prompts.limit=2"]
    run = sweep(tmp_path / "run", *overrides)
    (tmp_path / "in" / "p.jsonl").rename(tmp_path / "in" / "p.moved")
    line = one_line_error(capsys, ["resume", str(run)])
    assert "names its prompts file by the relative path in/p.jsonl, which is neither here nor where it was" in line
    assert "prompts.path=NEW_PATH" in line, line
