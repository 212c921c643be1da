"""The report answers first: a summary per model and length, then what the model said, then the
tables; no zero-width interval; a prompts-only test that disagrees with the general interval is
said to."""

import math

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from harness.reporting import report
from harness.reporting.markdown import ci, num, p_text, power_text
from harness.runs.reading import load_runs


def test_the_report_opens_with_the_summary_and_what_the_model_said(tiny_run):
    conditions, attention = load_runs([tiny_run])
    text = report.report_markdown(conditions, attention, [])
    order = [text.index(h) for h in ("## Summary", "## Examples", "## Output drift", "## Instruction-like minus")]
    assert order == sorted(order)
    table = report.contrast_table(report.baseline(conditions))
    for (model, length), _ in table.groupby(["model", "prefix_len"]):
        assert f"- **{model}, {length} tokens**: " in text
    # the C example shown at the first length is the C condition furthest from A, with A's own text
    length = int(conditions[conditions.group == "C"].prefix_len.min())
    c = conditions[(conditions.group == "C") & (conditions.prefix_len == length)]
    far = c.loc[c.norm_edit_distance.idxmax()]
    a = conditions[(conditions.group == "A") & (conditions.prompt_id == far.prompt_id)].continuation_text.iloc[0]
    assert f"- C, prefix `{far.prefix_id}`, prompt `{far.prompt_id}`" in text
    assert " ".join(a.split())[:40].replace("`", "'") in text


def test_runs_collected_across_placements_keep_each_placement_apart(tiny_run):
    """Two placements of one model (as `make assistant-study` collects five): each summary line,
    C - B row and example block names its placement, and an example quotes its own placement's A."""
    conditions, attention = load_runs([tiny_run])
    system = conditions.assign(placement="system")
    own_a = "system A " + system.prompt_id.astype(str)
    system["continuation_text"] = system.continuation_text.where(system.group != "A", own_a)
    both = pd.concat([conditions.assign(placement="document"), system], ignore_index=True)
    text = report.report_markdown(both, None, [])
    model = str(conditions.model.iloc[0])
    for placement in ("document", "system"):
        for length in sorted(conditions[conditions.group != "A"].prefix_len.unique()):
            assert f"- **{model} ({placement}), {length} tokens**: " in text
            assert text.count(f"**{model} ({placement}), {length} tokens**") == 2  # the summary and the examples
        assert f"| {model} ({placement}) | " in text.split("## Instruction-like minus")[1]
    examples = text.split("## Examples")[1].split("\n## ")[0]
    system_block = examples.split(f"**{model} (system)")[1]
    assert "  - A: `system A " in system_block
    assert "  - A: `system A " not in examples.split(f"**{model} (system)")[0]


def test_a_run_without_targets_says_there_is_no_obey_measure(tiny_run):
    conditions, attention = load_runs([tiny_run])
    bare = conditions.assign(target=None, check=None, target_hit=pd.NA, obeyed=pd.NA)
    text = report.report_markdown(bare, attention, [])
    assert "there is no obey" in text


def test_no_zero_width_interval_is_printed():
    assert ci(1.0, 1.0, 1.0) == "1.00, no interval (every resample gives the same value)"
    assert ci(0.0, 0.0, 0.0, note="1 prompts") == "0, no interval (1 prompts)"
    assert ci(0.5, 0.4, 0.6) == "0.500 [0.400, 0.600]"


def test_a_prompts_only_test_the_general_interval_does_not_back_is_said_to_disagree():
    row = {"measure": "output KL (nats)", "model": "m", "prefix_len": 32, "n_prefixes_high": 10, "n_prefixes_low": 10,
           "statistic": 0.1, "ci_low": -0.05, "ci_high": 0.25, "ci_note": None, "p_crossed": 0.2, "q_crossed": 0.2,
           "power": 0.5, "power_low": 0.2, "power_high": 0.8, "p_perm": 0.01, "exact": False, "mean_diff": 0.1,
           "ci_low_prompts": 0.05,
           "ci_high_prompts": 0.15, "wilcoxon_p": 0.001, "value": "output_kl", "delta": 0.05,
           "verdict": "not determined"}
    conds = pd.DataFrame({"group": ["B"], "model": ["m"]})
    lines = report._contrasts(conds.assign(target=np.nan), pd.DataFrame([row]))
    assert any(line.startswith("In 1 of these rows the prompts-only test finds a difference") for line in lines)
    agreed = report._contrasts(conds.assign(target=np.nan), pd.DataFrame([{**row, "wilcoxon_p": 0.3}]))
    assert not any("prompts-only test finds" in line for line in agreed)


def test_numbers_print_in_one_style_of_significant_digits():
    """The style the issue asked for: significant digits everywhere, no 7.248e-06 beside 0.0034, an
    estimate and its interval at one precision, thousands separators, p below 0.0001 as "< 0.0001"."""
    assert ci(0.010, 0.000151, 0.424) == "0.010 [0.000, 0.424]"
    assert ci(0.02604, -0.04489, 0.09698) == "0.0260 [-0.0449, 0.0970]"
    assert ci(-0.00128, -0.002563, 0.000007256) == "-0.00128 [-0.00256, 0.00001]"
    assert ci(0.0, 0.0, 0.324) == "0 [0, 0.324]"  # exact zeros (no hit at all) stay 0
    assert ci(-0.00001, -0.0004, 0.2) == "0.000 [0.000, 0.200]"  # never "-0.000"
    assert ci(1234.5, 1000.2, 1500.0) == "1,234 [1,000, 1,500]"
    cases = {0.0034: "0.00340", 7.248e-06: "0.00000725", 0.5: "0.500", 181.68: "182", 999.7: "1,000",
             0.09996: "0.100", -0.1626: "-0.163", 56092.27: "56,092", 4.66e-09: "4.66e-09", 0.0: "0", 12.0: "12.0"}
    assert {v: num(v) for v in cases} == cases
    assert [p_text(p) for p in (3.6e-05, 2.4e-07, 0.00025, 0.0019, 0.5, 1.0)] == [
        "< 0.0001", "< 0.0001", "0.00025", "0.0019", "0.50", "1.0"]
    assert power_text(float("nan")) == "not estimable" and power_text(float("nan"), 0.05, 0.61).startswith("not est")


@given(st.floats(1e-6, 999.4, allow_nan=False), st.booleans())
def test_a_printed_number_keeps_three_significant_digits_and_rounds_to_the_nearest(v, negative):
    v = -v if negative else v
    text = num(v)
    assert "e" not in text
    step = 10 ** (math.floor(math.log10(abs(v))) - 2)
    assert abs(float(text) - v) <= 0.5 * step * (1 + 1e-9)
    assert len(text.lstrip("-").replace(".", "").lstrip("0")) == 3


def test_a_null_says_no_difference_as_large_as_delta_only_where_its_interval_rules_that_out():
    """A C - B interval holding zero is "no difference as large as Δ" only where it lies within -Δ to
    Δ; otherwise it is not determined, and the sentence gives the design's power at Δ with its range
    (not a power against an estimated SD)."""
    from harness.analysis.verdicts import decide

    def row(low, high):
        return pd.Series({"measure": "edit distance", "statistic": (low + high) / 2, "ci_low": low, "ci_high": high,
                          "ci_note": "", "p_crossed": 0.6, "power": 0.9, "power_low": 0.5, "power_high": 0.97,
                          "delta": 0.05, "verdict": decide(low, high, 0.05, two_sided=True)})

    unsure = report._finding(row(-0.05, 0.07))
    assert "not determined" in unsure and "holds both zero and ±Δ = ±0.0500" in unsure
    assert "this design's power at Δ 0.90, range 0.50 to 0.97)" in unsure and "prefix-level SD" not in unsure
    sure = report._finding(row(-0.02, 0.03))
    assert "no difference as large as Δ = 0.0500" in sure and "power" not in sure
    one_sided_only = report._finding(row(-0.2, 0.03))  # below -Δ: a difference as large as Δ is not ruled out
    assert "not determined" in one_sided_only