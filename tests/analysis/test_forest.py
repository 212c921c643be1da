"""Figure 0's table (harness.analysis.forest) against its sources and a hand computation."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.analysis.crossed_variance import group_mean
from harness.analysis.forest import forest_table, group_drift, is_drift
from harness.reporting import report
from harness.runs.reading import load_runs


def _table(values: np.ndarray, group: str = "B", length: int = 8) -> pd.DataFrame:
    """One group's conditions: ``values`` [prompts, prefixes], plus A's rows at 0."""
    p, n = values.shape
    rows = [{"model": "m", "placement": "raw", "prefix_len": length, "group": group, "prompt_id": f"p{i}",
             "prefix_id": f"{group}{j}", "d": float(values[i, j])} for i in range(p) for j in range(n)]
    rows += [{"model": "m", "placement": "raw", "prefix_len": length, "group": "A", "prompt_id": f"p{i}",
              "prefix_id": None, "d": 0.0} for i in range(p)]
    return pd.DataFrame(rows)


def test_one_groups_interval_is_the_crossed_t_interval_by_hand():
    rng = np.random.default_rng(3)
    Y = 1.0 + rng.normal(0, 0.5, (6, 1)) + rng.normal(0, 0.3, (1, 5)) + rng.normal(0, 0.2, (6, 5))
    row = group_drift(_table(Y), "d", "B").iloc[0]
    # the two-way ANOVA of a balanced table, written out here: Var(mean) = (MS_rows + MS_cols - MS_resid) / (P n)
    P, n = Y.shape
    grand = Y.mean()
    ms_rows = n * ((Y.mean(1) - grand) ** 2).sum() / (P - 1)
    ms_cols = P * ((Y.mean(0) - grand) ** 2).sum() / (n - 1)
    resid = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + grand
    ms_resid = (resid ** 2).sum() / ((P - 1) * (n - 1))
    assert ms_rows > ms_resid and ms_cols > ms_resid  # both components positive: the plain formula applies
    variance = (ms_rows + ms_cols - ms_resid) / (P * n)
    assert abs(row.estimate - grand) < 1e-12
    half = row.ci_high - row.estimate
    assert abs((row.estimate - row.ci_low) - half) < 1e-12
    # the half-width is a t quantile times that standard error, at the degrees of freedom the
    # variance components give (harness.analysis.crossed_variance.group_mean)
    dof = float(group_mean(Y).dof)
    assert 1 <= dof <= (P - 1) * (n - 1)
    assert abs(half - stats.t.ppf(0.975, dof) * np.sqrt(variance)) < 1e-9
    assert row.n_prompts == P and row.n_prefixes == n and row.ci_note == ""


def test_too_few_prompts_or_prefixes_give_no_interval_and_say_why():
    two_prompts = group_drift(_table(np.ones((2, 5)) + np.arange(5)), "d", "B").iloc[0]
    assert np.isnan(two_prompts.ci_low) and two_prompts.ci_note == "2 prompts"
    two_prefixes = group_drift(_table(np.arange(10.0).reshape(5, 2)), "d", "B").iloc[0]
    assert np.isnan(two_prefixes.ci_high) and two_prefixes.ci_note == "2 prefixes"
    flat = group_drift(_table(np.full((4, 4), 0.5)), "d", "B").iloc[0]
    assert flat.estimate == 0.5 and np.isnan(flat.ci_low) and flat.ci_note == "no variation"


@settings(max_examples=30, deadline=None)
@given(st.floats(-5, 5), st.integers(0, 2**32 - 1))
def test_shifting_every_value_shifts_the_estimate_and_its_interval(shift, seed):
    Y = np.random.default_rng(seed).normal(0, 1, (4, 4))
    a, b = (group_drift(_table(v), "d", "B").iloc[0] for v in (Y, Y + shift))
    for col in ("estimate", "ci_low", "ci_high"):
        assert abs((b[col] - a[col]) - shift) < 1e-9


def test_a_measure_is_a_drift_only_where_every_A_row_is_zero():
    t = _table(np.ones((3, 3)))
    assert is_drift(t, "d")
    assert not is_drift(t.assign(d=np.where(t.group == "A", 0.1, t.d)), "d")
    assert not is_drift(t.assign(d=np.where(t.group == "A", np.nan, t.d)), "d")  # a rate A cannot score
    assert not is_drift(t, "absent")


def test_c_minus_b_rows_are_the_reports_and_drifts_come_in_pairs(tiny_run):
    conditions, _ = load_runs([tiny_run])
    conds = report.baseline(conditions)
    contrasts = report.contrast_table(conds)
    forest = forest_table(conds, contrasts)
    cb = forest[forest.comparison == "C - B"].reset_index(drop=True)
    assert len(cb) == len(contrasts)
    assert np.allclose(cb.estimate, contrasts.statistic) and np.allclose(cb.ci_low, contrasts.ci_low, equal_nan=True)
    drift = forest[forest.comparison != "C - B"]
    assert set(drift.value) == {v for v in contrasts.value if is_drift(conds, v)} and "norm_edit_distance" in set(drift.value)
    for (value, length, comparison), cell in drift.groupby(["value", "prefix_len", "comparison"]):
        group = comparison[0]
        rows = conds[(conds.group == group) & (conds.prefix_len == length)]
        assert abs(cell.estimate.iloc[0] - rows.groupby(["prompt_id", "prefix_id"])[value].mean().mean()) < 1e-9
    assert forest_table(conds, contrasts.iloc[0:0]).empty
