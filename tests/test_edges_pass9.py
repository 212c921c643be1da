"""The ninth adversarial pass's cases (issue 67), found while it ran on 7a4badd."""

from __future__ import annotations

import pytest

import harness as H
from tests.support import FAST, one_line_error, sweep


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("pass9") / "base", *FAST)


def test_a_measure_given_as_a_list_is_refused_in_one_line(base):
    """A list as ``value`` raised 'unhashable type: list' from pandas."""
    with pytest.raises(ValueError, match=r"value must name a column of the table, got \['output_kl'\]"):
        H.compare_groups(H.load_run(base).conditions, ["output_kl"], power=False)


@pytest.mark.parametrize("subdir", ["", "."])
def test_jobs_in_the_multiruns_own_top_directory_are_refused(tmp_path, capsys, subdir):
    """An empty hydra.sweep.subdir put every job in one directory ('1 of 0 job(s) ... incomplete')."""
    line = one_line_error(capsys, ["sweep", "-m", *FAST, "prompts.limit=1", "prefix.lengths=[8]", "seed=0,1",
                                   f"hydra.sweep.dir={tmp_path / 'ms'}", f"hydra.sweep.subdir={subdir}"])
    assert "must name a directory of each job's own inside hydra.sweep.dir" in line
    assert not (tmp_path / "ms").exists()


def test_one_text_under_two_prefix_ids_is_refused_naming_both_lines(tmp_path, capsys):
    """#085, #086: a bank giving one text two ids counted it twice, or as B and C at once (C - B
    compared a text with itself)."""
    from tests.support import write_jsonl

    bank = write_jsonl(tmp_path / "bank.jsonl", [
        {"id": "n1", "kind": "neutral", "text": "A quiet harbour at dawn, boats resting."},
        {"id": "n2", "kind": "neutral", "text": "Gardens need water in the dry months."},
        {"id": "c1", "kind": "instruction", "text": "A quiet  harbour at dawn,\nboats resting."}])
    line = one_line_error(capsys, ["sweep", *FAST, f"prefixes.path={bank}", f"hydra.run.dir={tmp_path / 'r'}"])
    assert "bank.jsonl:3: prefix 'c1' has the same text as 'n1' (" in line and "bank.jsonl:1" in line


def test_the_analysis_api_refuses_what_pass_9_found_it_answered_from_deep_inside(base):
    """#035 (10**9 resamples filled 24 GB), #042, #044, #046, #052, #054, #057, #058, #063, #162, #163."""
    tables = H.load_run(base)
    c, a = tables.conditions, tables.attention
    cases = [
        (lambda: H.compare_groups(c, "output_kl", n_resamples=10**9, power=False), "n_resamples must be at most"),
        (lambda: H.head_contrasts(a, value="output_kl", permutation=False), "value must name a column"),
        (lambda: H.head_map(c, group="C"), "attention must be an attention table"),
        (lambda: H.layer_profile(c), "attention must be an attention table"),
        (lambda: H.bootstrap_ci([1.0, 2.0, 3.0], seed=-1), "seed must be a whole number of at least 0"),
        (lambda: H.prefix_permutation_test(c.drop(columns=["prefix_id"]), "output_kl"), "has no prefix_id"),
        (lambda: H.contrast(c, "output_kl", by=["prefix_len", "nope"]), "by must name columns of the table"),
        (lambda: H.contrast(c, "nonexistent_metric"), "value must name a column of the table"),
        (lambda: H.drift_summary(c, "output_kl", by=[]), "by must name at least one column"),
        (lambda: H.head_contrasts(a, high="C", low="A", permutation=False), "high and low must be B or C"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_collect_of_nothing_and_a_report_of_nothing_say_so(tmp_path):
    """#123 ('no tables found in ' with nothing named), #004 (matplotlib's 'rows must be positive')."""
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="give at least one run or sweep directory"):
        H.collect([], tmp_path / "c")
    with pytest.raises(HarnessError, match="the conditions table is empty"):
        H.write_outputs(H.load_run(sweep(tmp_path / "r", *FAST)).conditions.iloc[0:0], None, tmp_path / "w")
    assert not (tmp_path / "c").exists() and not (tmp_path / "w").exists()


def test_readers_name_causal_heads_output_instead_of_calling_it_unfinished(base, tmp_path, capsys):
    """#110-#114, #132, #165: 'did not finish (no status.json): harness resume ...', a resume that refuses."""
    import json

    out = tmp_path / "heads"
    out.mkdir()
    (out / ".harness-output.json").write_text(json.dumps({"command": "causal-heads", "runs": [str(base)]}))
    (out / "manifest.json").write_text("{}")
    for argv in (["figures", str(out)], ["claims", str(out)]):
        assert "holds the output of `harness causal-heads`" in one_line_error(capsys, argv)


def test_conditions_in_several_runs_are_read_once(base, tmp_path, caplog):
    """#170: figures of two jobs holding the same conditions counted each twice ('Conditions: 22')
    where collect keeps one copy; copies that disagree are refused, not averaged."""
    from harness.cli import main
    from harness.errors import HarnessError
    from harness.runs.reading import merge_runs

    again = sweep(tmp_path / "again", *FAST, "seed=1")  # the same conditions: no key holds the seed
    one = H.load_run(base).conditions
    assert len(H.load_runs([base, again])[0]) == len(one)
    assert main(["figures", str(base), str(again), "--out", str(tmp_path / "f")]) == 0
    assert f"{len(one)} condition(s) appear in more than one of these runs" in caplog.text
    assert f"Conditions: {len(one)}" in (tmp_path / "f" / "report.md").read_text()

    changed = one.copy()
    changed["output_kl"] = changed["output_kl"] + 1.0
    with pytest.raises(HarnessError, match=r"are in r1 and r2 with different results .*harness collect"):
        merge_runs([one, changed], [None, None], ["r1", "r2"])
    assert len(merge_runs([one, changed], [None, None], ["r1", "r2"], allow_mixed_settings=True)[0]) == 2 * len(one)


def test_a_report_the_user_edited_is_kept_when_its_tables_are_replaced(tmp_path, caplog):
    """#013: a resume that replaced the tables deleted the user's edited report.md with the stale
    ones; a redraw wrote over it."""
    import shutil

    from harness.cli import main

    run = sweep(tmp_path / "r", *FAST)
    assert main(["figures", str(run)]) == 0
    report = run / "report.md"
    written = report.read_text()
    assert main(["figures", str(run)]) == 0  # its own page, untouched: replaced in place
    assert not (run / "report.edited.md").exists()
    report.write_text(written + "\nMY NOTES\n")
    assert main(["figures", str(run)]) == 0
    assert "MY NOTES" in (run / "report.edited.md").read_text() and "MY NOTES" not in report.read_text()
    assert "kept as report.edited.md" in caplog.text

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / "report.md").write_text(written.replace("Conditions", "My conditions"))
    sweep(copy, *FAST, "prompts.limit=1", "on_existing=resume")  # other tables: the report is stale
    assert not (copy / "report.md").exists()
    assert "My conditions" in (copy / "report.edited-2.md").read_text()
    assert "MY NOTES" in (copy / "report.edited.md").read_text()  # the first kept copy, kept


def test_a_redraw_in_place_holds_the_run_against_a_resume(tmp_path):
    """#087: figures drawing into a run while a resume replaced its tables left a report of the old
    tables in a run whose status named the new ones; the redraw now holds the run's lock."""
    from harness.errors import HarnessError
    from harness.runs.lock import hold

    run = sweep(tmp_path / "r", *FAST)
    with hold(run, "figures", "run it again once it has"):
        with pytest.raises(HarnessError, match=r"`harness figures` is writing to .*r \(pid \d+ on "):
            sweep(run, *FAST, "prompts.limit=1", "on_existing=resume")
    sweep(run, *FAST, "prompts.limit=1", "on_existing=resume")  # once it has finished
