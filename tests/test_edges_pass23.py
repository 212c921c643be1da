"""The twenty-third adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
06437d7): a noise table's "largest" that was its signed maximum, a target_regex that did not find
its own target, shares of an effect that was not there, tables filtered apart, a remedy that did
not work, a plan's point powers stated as if they had no range, and matched sets drawn whole
without a word."""

from __future__ import annotations

import logging

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import harness as H
from harness.analysis.causal_heads import established
from harness.inputs.checks import target_check
from harness.reporting.causal_heads import causal_page, plot_causal
from tests.support import one_line_error, sweep


def test_the_noise_tables_largest_is_the_largest_in_size(tiny_run):
    """#58/#85/#178 (silent): 'largest' was the signed maximum, so a difference of -6e-08 showed as
    a largest of 2.7e-09."""
    conditions, attention = H.load_runs([tiny_run])
    noise = H.load_noise([tiny_run]).copy()
    noise["output_kl"] = np.linspace(2.72e-9, -6.08e-8, len(noise))
    page = H.report_markdown(conditions, attention, [], "noise", noise)
    section = page.split("## Numerical noise floor", 1)[1]
    row = next(line for line in section.splitlines() if line.startswith("| output KL (nats) |"))
    assert row.rstrip(" |").endswith("-6.08e-08")


def test_a_target_regex_must_find_its_own_target():
    """#106/#116/#179 (silent): a prefix whose target_regex stood in for its target word named the
    word in the tables while another pattern decided."""
    with pytest.raises(ValueError, match=r"target_regex 'lantern' does not find its own target 'zebraquokka'"):
        target_check("zebraquokka", "lantern")
    assert target_check("ZX-4471", r"(?i)\bZX[- ]?4471\b").present("the code is zx 4471.")  # the shipped set's
    assert target_check(None, "lantern").check == "regex"  # a regex alone is its own check


def _effects(low: float, high: float) -> pd.DataFrame:
    base = {"measure": "norm_edit_distance", "head_set": "", "kind": "top", "effect_note": None, "n_prompts": 3,
            "n_prefixes_c": 2, "n_prefixes_b": 2}
    return pd.DataFrame([
        {**base, "setting": "none", "mode": "none", "k": np.nan, "effect": -0.04, "effect_low": low,
         "effect_high": high, "removed": np.nan, "removed_low": np.nan, "removed_high": np.nan, "share": np.nan,
         "share_low": np.nan, "share_high": np.nan},
        {**base, "setting": "mask_heads(L0H0)", "mode": "mask_heads", "k": 1, "effect": -0.12, "effect_low": -0.3,
         "effect_high": 0.05, "removed": 0.08, "removed_low": -0.1, "removed_high": 0.2, "share": 3.0,
         "share_low": -1.0, "share_high": 6.0}])


def test_no_share_of_an_effect_that_is_not_established():
    """#153/#180 (silent): shares of 3.00 and 2.00 on a 0-1 measure, against a C - B of -0.04 whose
    interval held 0, with no word that there was no effect to share."""
    assert established(pd.Series({"effect_low": -0.2, "effect_high": 0.1})) is False
    assert established(pd.Series({"effect_low": 0.01, "effect_high": 0.1})) is True
    assert established(pd.Series({"effect_low": np.nan, "effect_high": np.nan})) is None
    about = {"testing_prefixes": ["b1", "c1"], "choosing_prefixes": ["b2", "c2"], "model": "m", "run": "r",
             "prefix_len": 8, "rank_by": "capture", "segment": "task", "n_prompts": 3, "n_conditions": 4, "seed": 0}
    ranking = pd.DataFrame({"layer": [0], "head": [0], "diff": [0.1]})
    page = causal_page(_effects(-0.2, 0.1), ranking, about)
    assert "its interval holds 0, so there is no established effect here" in page
    assert "Share of the effect removed, masking the prefix in k heads:" not in page
    fig, axes = plt.subplots(1, 2)
    plot_causal(axes[0], axes[1], _effects(-0.2, 0.1).assign(share=np.nan), "norm_edit_distance")
    assert "not established" in axes[0].texts[0].get_text()
    plt.close(fig)


def test_tables_filtered_apart_are_refused(tiny_run):
    """API-11/#162/#181 (silent): conditions filtered to one length with the whole attention table
    drew a layer figure of every length beside a report of one."""
    conditions, attention = H.load_runs([tiny_run])
    shorter = conditions[conditions.prefix_len.isin([0, 8]) | (conditions.group == "A")]
    with pytest.raises(ValueError, match=r"attention holds \d+ condition\(s\) the conditions table does not .*filter "
                                         r"both alike"):
        H.make_figures(shorter, attention)
    with pytest.raises(ValueError, match="filter both alike"):
        H.report_markdown(shorter, attention, [], "filtered")
    figures = H.make_figures(conditions, attention[attention.prefix_len != 24])  # fewer attention rows: allowed
    for fig in figures.values():
        plt.close(fig)


def test_a_delta_for_a_measure_plan_does_not_test_names_a_remedy_that_works(tiny_run, capsys):
    """#9/#173/#176/#177/#182 (misleading): '`harness figures RUN` redraws them' at another Δ; it
    cannot (a resume with +claims.delta can, every result reused). Pass 30 #143: for plan, what plans
    a measure's C - B at its Δ is --measure."""
    line = one_line_error(capsys, ["claims", str(tiny_run), "--delta", "output_kl=0.5"])
    assert "`harness resume RUN +claims.delta.output_kl=VALUE` redraws them at another, every result reused" in line
    assert "harness figures" not in line
    line = one_line_error(capsys, ["plan", str(tiny_run), "--delta", "output_kl=0.5"])
    assert "(--measure M plans the report's C - B on a measure, at its --delta)" in line


def test_the_plan_page_says_its_powers_are_points(tmp_path, capsys):
    """#4/#30 (silent): plan printed 0.067 where the claims page prints 0.067 (range 0 to 0.13);
    and (found while writing this test) a pilot of 2 prefixes per group was told it needed 2."""
    from harness.cli import main

    pilot = sweep(tmp_path / "pilot", "model=tiny", "prompts.limit=3", "prefix.lengths=[8]", "decode.max_new_tokens=3",
                  "prefixes.per_group=3", "draw_figures=false")
    assert main(["plan", str(pilot), "--out", str(tmp_path / "plan")]) == 0
    page = (tmp_path / "plan" / "plan.md").read_text()
    assert "The power at the pilot is the point power, from the pilot's variance components as estimated" in page
    assert "its point power and the range that point takes" in page  # issue 65: with its range
    small = sweep(tmp_path / "small", "model=tiny", "prompts.limit=3", "prefix.lengths=[8]", "decode.max_new_tokens=3",
                  "prefixes.per_group=2", "draw_figures=false")
    line = one_line_error(capsys, ["plan", str(small)])
    assert "cannot be estimated from 2 prefix(es) per group and 3 prompt(s): a pilot needs a complete crossing of " \
           "at least 3 prompts and 3 prefixes per group" in line


def test_matched_sets_drawn_whole_say_how_many_prefixes_that_is(caplog):
    """#113/#183 (silent): per_group=1 on a file of triples ran 2 B and 1 C prefixes a prompt."""
    from harness.inputs.texts import load_prefixes, select_prefixes
    from harness.paths import DATA_DIR

    triples = load_prefixes(DATA_DIR / "prefixes_assistant_triples.jsonl")
    with caplog.at_level(logging.INFO, logger="harness"):
        drawn = select_prefixes(triples, 1, seed=0)
    assert len(drawn) == 3 and len({p.pair for p in drawn}) == 1
    neutral = sum(p.kind == "neutral" for p in drawn)
    assert (f"prefixes.per_group=1 draws 1 whole matched set(s) (a pair's prefixes together): 3 prefixes, {neutral} "
            f"neutral, {3 - neutral} instruction") in caplog.text
