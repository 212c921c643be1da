"""The tenth adversarial pass's cases (issue 67), found on f75c09d: 205 new cases, 0 lost, 15
silent, 9 tracebacks, 13 misleading."""

from __future__ import annotations

import numpy as np
import pytest

import harness as H
from harness.errors import HarnessError
from tests.support import FAST, one_line_error, sweep


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("pass10") / "base", *FAST, "prompts.limit=3")


def test_the_analysis_api_refuses_wrong_columns_and_tables_in_one_line(base):
    """#006, #007, #010, #014-#016, #019, #022, #023, #041, #045-#047, #187, #195, #196: pandas
    tracebacks, a 'by' column dropped without a word, a table blamed for a mistyped value."""
    t = H.load_run(base)
    c, a = t.conditions, t.attention
    cases = [
        (lambda: H.ceiling(c, by=["nope"]), "by must name columns of the table, got 'nope'"),
        (lambda: H.ceiling(c, by=["nope", "model"]), "by must name columns of the table, got 'nope'"),
        (lambda: H.step_profile(c, value="nope"), "value must name a per-step column of the conditions table"),
        (lambda: H.step_profile(c, value="norm_edit_distance"), "a list per condition"),
        (lambda: H.step_profile(a), "conditions must be a conditions table"),
        (lambda: H.isolation_summary(c, "nope"), "value must name a column of the table, got 'nope'"),
        (lambda: H.isolation_summary(c, "continuation_text"), "value must name a column of numbers or booleans"),
        (lambda: H.weighted_segment_mean(a, value="nope"), "value must name a column of the attention table"),
        (lambda: H.weighted_segment_mean(a, by=["nope"]), "by must name columns of the table, got 'nope'"),
        (lambda: H.layer_profile(a, value="continuation_text"), "value must name a column of the attention table"),
        (lambda: H.drift_summary(c, value="continuation_text"), "value must name a column of numbers or booleans"),
        (lambda: H.drift_summary(c, value="output_kl_steps"), r"a value per step: H.step_profile reads it"),
        (lambda: H.report_markdown(c, a, figure_files=None), "figure_files a list"),
        (lambda: H.report_markdown(c, a, [], title=None), "title must be text"),
        (lambda: H.contrast(c.assign(output_kl=np.inf), "output_kl"), "holds infinite values"),
        (lambda: H.hit_rates(a), "conditions must be a conditions table"),
        (lambda: H.word_rates(a), "conditions must be a conditions table"),
        (lambda: H.rate_summary(a, hit="target_hit"), "conditions must be a conditions table"),
        (lambda: H.bootstrap_ci([1.0, np.inf, 3.0]), "infinite values"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_one_by_column_may_be_given_as_a_string(base):
    """#188-#190, #192: a string 'by' was split into letters ('got g'), or ignored and every group pooled."""
    c = H.load_run(base).conditions
    assert H.drift_summary(c, value="output_kl", by="group").equals(H.drift_summary(c, value="output_kl", by=["group"]))
    assert H.contrast(c, "output_kl", by="prefix_len").equals(H.contrast(c, "output_kl", by=["prefix_len"]))
    assert H.survival(c, by="group", max_k=2).equals(H.survival(c, by=["group"], max_k=2))
    rates = H.rate_summary(c, hit="exact_match", by="group")
    assert sorted(rates.group.astype(str)) == ["A", "B", "C"]


def test_a_nan_left_out_of_a_bootstrap_is_said():
    """#033: (1.0, 3.0) for [1, nan, 3] without a word."""
    with pytest.warns(RuntimeWarning, match="1 of 4 values are NaN and were left out"):
        H.bootstrap_ci([1.0, np.nan, 3.0, 2.0])


def test_two_prompts_get_no_bootstrap_interval(base):
    """#069: a percentile bootstrap over 2 prompts printed their range as a 95% interval."""
    c = H.load_run(base).conditions
    two = c[c.prompt_id.isin(sorted(c.prompt_id.unique())[:2])]
    table = H.drift_summary(two, value="norm_edit_distance")
    assert (table.n_prompts == 2).all() and table.ci_low.isna().all() and set(table.ci_method) == {"none"}
    three = H.drift_summary(c, value="norm_edit_distance")
    assert (three.n_prompts == 3).all() and three.ci_low.notna().any()


def test_api_entry_points_refuse_nothing_and_a_string(tmp_path):
    """#178, #182, #183."""
    with pytest.raises(HarnessError, match="give at least one run directory"):
        H.load_noise([])
    with pytest.raises(HarnessError, match=r"overrides must be a list of strings, e.g. \['model=tiny'\]"):
        H.compose("model=tiny")
    with pytest.raises(HarnessError, match="validate: give a config"):
        H.validate(None)


@pytest.mark.parametrize("argv, message", [
    (["--rank-by", "prompt_id"], "--rank-by 'prompt_id' is not an attention measure"),
    (["--rank-by", "layer"], "--rank-by 'layer' is not an attention measure"),
    (["--rank-by", "n_queries"], "--rank-by 'n_queries' is not an attention measure"),
    (["--k", "64", "--draws", "1"], "--k 64: the model has 8 heads in all"),
])
def test_causal_heads_refuses_what_is_no_measure_and_sizes_no_set_has(base, tmp_path, capsys, argv, message):
    """#138, #139 (exit 3), #140, #141, #142 (a causal sweep of 0 head sets)."""
    line = one_line_error(capsys, ["causal-heads", str(base), "--ranking-only", "--out", str(tmp_path / "o"), *argv])
    assert message in line
    assert not (tmp_path / "o").exists()


def test_an_empty_template_list_is_refused_as_such():
    """#108: 'group B is requested but the prefix set has no neutral prefixes'."""
    from tests.inputs.test_corpora import installed

    if not installed("agentdojo"):
        pytest.skip("agentdojo is not installed (make corpora)")
    with pytest.raises(HarnessError, match=r"prefixes.templates=\[\] leaves no attack template"):
        H.validate(H.compose(["model=tiny", "prefixes=agentdojo", "prefixes.templates=[]"]))


def test_plan_names_what_a_pilot_lacks(tmp_path, capsys):
    """#102, #103: 'a prefix-level SD of 0' where it could not be estimated at all."""
    run = sweep(tmp_path / "one", *FAST, "prefixes.per_group=1")
    line = one_line_error(capsys, ["plan", str(run)])
    assert "cannot be estimated from 1 prefix(es) per group and 2 prompt(s)" in line


def test_a_second_redraw_is_named_as_one(base, tmp_path, capsys):
    """#160: 'its tables are not final' of a run whose report another redraw was drawing."""
    from harness.runs.lock import hold

    with hold(base, "figures", "run it again once it has"):
        line = one_line_error(capsys, ["figures", str(base)])
    assert "report is being redrawn by `harness figures`" in line and "not final" not in line


def test_a_corpus_run_is_no_hand_written_bank(tmp_path, capsys):
    """#117: a corpus run given as --bank was labelled 'hand-written bank' on the page."""
    from tests.inputs.test_corpora import installed

    if not installed("agentdojo"):
        pytest.skip("agentdojo is not installed (make corpora)")
    common = ["model=tiny", "decode.max_new_tokens=4", "prompts.limit=2", "draw_figures=false", "prefixes=agentdojo",
              "prefixes.per_group=2", "prefix.lengths=[96]", "prefix.too_short=skip", "+prefixes.templates=[direct]"]
    start, middle = (sweep(tmp_path / at, *common, f"prefix.injection_at={at}") for at in ("start", "middle"))
    line = one_line_error(capsys, ["corpus-report", str(start), "--bank", str(middle), "--out", str(tmp_path / "p")])
    assert "--bank takes runs of a hand-written prefix bank" in line
