"""The lead interval's variance (harness.analysis.crossed_variance and harness.analysis.lead): mean
squares against a loop written from the textbook expected mean squares, the bounds that keep the
variance and its degrees of freedom sane, coverage on a fixed simulation of the cells the audit
found failing, and the words printed where no interval is supported."""

import importlib.util
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.analysis import crossed_variance as cv
from harness.analysis.crossed import compare_groups
from harness.analysis.lead import lead
from tests.support import ROOT

spec = importlib.util.spec_from_file_location("crossed_calibration", ROOT / "benchmarks" / "crossed_calibration.py")
sim = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = sim  # its dataclasses look their module up
spec.loader.exec_module(sim)


def mean_squares_by_loop(G):
    """Two-way ANOVA without replication, one explicit sum at a time."""
    P, n = len(G), len(G[0])
    grand = sum(sum(row) for row in G) / (P * n)
    rows = [sum(row) / n for row in G]
    cols = [sum(G[p][x] for p in range(P)) / P for x in range(n)]
    ss_rows = n * sum((r - grand) ** 2 for r in rows)
    ss_cols = P * sum((c - grand) ** 2 for c in cols)
    ss_resid = sum((G[p][x] - rows[p] - cols[x] + grand) ** 2 for p in range(P) for x in range(n))
    return ss_rows / (P - 1), ss_cols / (n - 1), ss_resid / ((P - 1) * (n - 1))


def test_mean_squares_and_the_variance_of_c_minus_b_by_hand():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(5, 8)) + np.array([0, 0, 0, 0, 3, -3, 1, 0])  # strong prefix effects in both groups
    hi = np.arange(8) < 4
    for cols in (hi, ~hi):
        S = cv.group_squares(Y[:, cols])
        assert (S.ms_rows, S.ms_cols, S.ms_resid) == pytest.approx(mean_squares_by_loop(Y[:, cols].tolist()))
    ms_c, ms_b = (mean_squares_by_loop(Y[:, cols].tolist()) for cols in (hi, ~hi))
    d = Y[:, hi].mean(1) - Y[:, ~hi].mean(1)
    ms_d = float(np.var(d, ddof=1))
    tau = max(ms_d, ms_c[2] / 4 + ms_b[2] / 4)
    prefix = sum(max((ms[1] - ms[2]) / 5, 0) / 4 for ms in (ms_c, ms_b))
    est = cv.difference(Y, hi)
    assert float(est.variance) == pytest.approx(tau / 5 + prefix)
    assert float(est.statistic) == pytest.approx(Y[:, hi].mean() - Y[:, ~hi].mean())


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 8), st.integers(3, 8), st.floats(0.0, 2.0), st.floats(0.0, 2.0), st.integers(0, 10**6))
def test_the_variance_never_falls_below_the_residual_share_and_the_interval_is_sane(P, n, prefix, inter, seed):
    """Whatever the data: V >= the residual part / P (the floor an interaction variance >= 0 implies),
    the degrees of freedom at least min(P - 1, 1) and at most (P - 1) / (the prompt term's share),
    the interval holds the statistic, and p < 0.05 exactly where it leaves out 0."""
    rng = np.random.default_rng(seed)
    g = np.repeat([0, 1], n)
    Y = (rng.normal(0, 1, (P, 1)) + rng.normal(0, inter, (P, 2))[:, g] + rng.normal(0, prefix, 2 * n)
         + rng.normal(0, 1, (P, 2 * n)))
    hi = g == 0
    est = cv.difference(Y, hi)
    S_c, S_b = cv.group_squares(Y[:, hi]), cv.group_squares(Y[:, ~hi])
    assert est.variance >= (S_c.ms_resid / n + S_b.ms_resid / n) / P * (1 - 1e-12)
    assert est.dof >= min(P - 1, 1) - 1e-9
    low, high = est.interval()
    assert low < est.statistic < high
    assert (est.p_value() < 0.05) == (low > 0 or high < 0)


def test_satterthwaite_by_hand_and_the_cap_on_a_dominant_prompt_term():
    """Prefix parts truncated to zero: V is the prompt term alone, whose degrees of freedom are P - 1."""
    a = np.array([[0.3], [-1.2], [0.4], [2.0]])
    Y = a * np.r_[np.ones(6), -np.ones(6)]  # only a prompt-by-group interaction: no prefix or residual part
    est = cv.difference(Y, np.arange(12) < 6)
    assert est.components["prefix_high"] == 0 and est.components["prefix_low"] == 0
    assert float(est.variance) == pytest.approx(np.var(2 * a, ddof=1) / 4)
    assert float(est.dof) == pytest.approx(3)
    half = (np.subtract(*est.interval()[::-1])) / 2
    assert half == pytest.approx(stats.t.ppf(0.975, 3) * np.sqrt(est.variance))


@pytest.mark.parametrize("design, regime", [
    (sim.Design("3 x 18", 3, 18), sim.Regime("interaction", interaction=1.0)),        # the audit: FPR 0.15-0.34
    (sim.Design("3 x 6", 3, 6), sim.Regime("residual", prefix_c=0.3, prefix_b=0.3, resid=1.0)),  # exploded
    (sim.Design("6 x 24 paired", 6, 24, pair=0.8), sim.Regime("prefixes")),
    (sim.Design("12 x 6", 12, 6), sim.Regime("unequal", prefix_c=2.0, prefix_b=0.5)),
])
def test_the_lead_interval_covers_on_a_fixed_simulation_and_never_explodes(design, regime):
    rng = np.random.default_rng(1)
    Y, hi, pairs, true = sim.draw(design, regime, True, 2000, rng)
    low, high = cv.difference(Y, hi, pairs).interval()
    cover = np.mean((low <= true) & (true <= high))
    assert 0.93 <= cover <= 0.985, cover
    assert np.mean(high < true) <= 0.04 and np.mean(low > true) <= 0.04
    o_low, o_high = sim.oracle(design, regime, True, rng)(Y, hi)
    assert np.mean((high - low) / (o_high - o_low) > 10) <= 0.01


def test_group_mean_of_a_table_with_only_prefix_variation():
    """Columns constant down the prompts: the mean's variance is the prefix means' variance / n."""
    G = np.tile(np.array([1.0, 2.0, 4.0, 7.0]), (5, 1))
    est = cv.group_mean(G)
    assert float(est.variance) == pytest.approx(np.var([1, 2, 4, 7], ddof=1) / 4)
    assert float(est.dof) == pytest.approx(3)


def test_no_interval_where_the_design_cannot_support_one_and_words_saying_why():
    hi = np.arange(12) < 6
    assert cv.supported(np.zeros((2, 12)), hi) == "2 prompts"
    assert cv.supported(np.zeros((5, 4)), np.arange(4) < 2) == "2 prefixes in a group"
    Y = np.zeros((4, 12))
    assert lead(Y, hi)["ci_note"] == "no variation" and np.isnan(lead(Y, hi)["ci_low"])  # never a zero-width one
    Y[0, 0] = np.nan
    assert lead(Y + 1, hi)["ci_note"] == "no variation (complete crossing of 11 of 12 prefixes)"
    assert np.isnan(cv.crossed_t_interval(np.ones((1, 12)), hi)[0])


def test_complete_crossing_keeps_the_larger_part_and_keeps_pairs_whole():
    Y = np.ones((6, 8))
    Y[0, 0] = np.nan
    rows, cols, note = cv.complete_crossing(Y)  # dropping the prefix keeps 42 cells, the prompt 40
    assert len(rows) == 6 and list(cols) == [1, 2, 3, 4, 5, 6, 7] and note == "complete crossing of 7 of 8 prefixes"
    Y[0, 1:3] = np.nan
    assert cv.complete_crossing(Y)[2] == "complete crossing of 5 of 6 prompts"  # 40 cells against 30
    Z = np.ones((3, 8))
    Z[0, 0] = np.nan
    rows, cols, _ = cv.complete_crossing(Z, (np.arange(4), np.arange(4, 8)))
    assert len(rows) == 3 and list(cols) == [1, 2, 3, 5, 6, 7]  # the incomplete prefix's pair goes too


def table(values: np.ndarray, groups=("C", "B")) -> pd.DataFrame:
    P, K = values.shape
    rows = [{"model": "m", "prompt_id": f"p{p}", "group": groups[x >= K // 2], "prefix_id": f"x{x}",
             "prefix_len": 8, "placement": "raw", "isolation": "none", "v": values[p, x]}
            for p in range(P) for x in range(K)]
    return pd.DataFrame(rows)


def test_compare_groups_leads_with_the_crossed_interval_and_its_own_test():
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(6, 10))
    row = compare_groups(table(Y), "v", n_resamples=200, n_permutations=200).iloc[0]
    est = cv.difference(Y, np.arange(10) < 5)
    assert row.ci_method == "crossed t" and row.ci_note == ""
    assert (row.ci_low, row.ci_high) == pytest.approx(tuple(float(v) for v in est.interval()))
    assert row.p_crossed == pytest.approx(float(est.p_value())) and row.dof == pytest.approx(float(est.dof))
    assert 0.05 <= row.power <= 1
    short = compare_groups(table(Y[:2]), "v", n_resamples=200, n_permutations=200).iloc[0]
    assert short.ci_method == "none" and short.ci_note == "2 prompts" and np.isnan(short.ci_low)


def test_a_rate_difference_with_no_hit_anywhere_still_gets_an_interval():
    """The audit's 173 in 1,000 zero-width intervals: every cell 0 gives the worst case's interval."""
    Y = np.zeros((3, 12))
    row = compare_groups(table(Y).assign(v=False), "v", n_resamples=50, n_permutations=50).iloc[0]
    assert row.ci_method == "MOVER, crossed Wilson, clustering shared"
    assert row.ci_low < 0 < row.ci_high and row.ci_high - row.ci_low > 0.5  # 3 prompts: it knows little
    assert row.p_crossed == 1.0


def test_the_suite_scores_its_oracle_and_the_data_sets_with_no_hit():
    """The suite's own columns: the oracle of a measure (the statistic +- 1.96 true SDs of normal data)
    covers 0.95 up to sampling error; with a rate of 0.01, every data set with no hit in either group
    covers a true difference of 0, so coverage is at least that share."""
    rng = np.random.default_rng(3)
    measure = sim.difference_cell(sim.Design("8 x 12", 8, 12), sim.Regime("prefixes"), 2000, 20, rng)
    assert all(0.935 <= row["oracle_cover"] <= 0.965 for row in measure), measure
    assert all(np.isnan(row["no_hit"]) for row in measure)
    sparse = sim.Regime("zero-heavy", rate_b=0.01, gap=0.02)
    at_zero = sim.difference_cell(sim.Design("3 x 6", 3, 6), sparse, 1000, 20, rng)[0]
    assert at_zero["truth"] == 0 and at_zero["no_hit"] > 0.5
    assert at_zero["cover"] >= at_zero["no_hit"]
