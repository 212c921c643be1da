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
