"""The crossed-variance t interval (the report's lead interval): unbiased variance, coverage on a
fixed simulation, matched pairs, and the fallbacks."""

import importlib.util
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.crossed import compare_groups
from harness.analysis.crossed_variance import crossed_t_interval
from tests.support import ROOT

spec = importlib.util.spec_from_file_location("crossed_calibration", ROOT / "benchmarks" / "crossed_calibration.py")
sim = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = sim  # its dataclasses look their module up
spec.loader.exec_module(sim)


def test_the_variance_estimate_is_unbiased_for_the_statistics_own_variance():
    """Independent of the formula: over many data sets, the mean estimated variance matches the
    empirical variance of the C-minus-B statistic."""
    design = sim.Design("t", 12, 6)
    rng = np.random.default_rng(0)
    stats_, variances = [], []
    for _ in range(2000):
        Y, is_high, pairs = sim.draw(design, 0.0, rng)
        low, high, dof = crossed_t_interval(Y, is_high, pairs)
        stats_.append(Y[:, is_high].mean() - Y[:, ~is_high].mean())
        variances.append(((high - low) / 2 / stats.t.ppf(0.975, dof)) ** 2)
    assert np.mean(variances) == pytest.approx(np.var(stats_), rel=0.1)


@pytest.mark.parametrize("design", [sim.Design("12 x 6", 12, 6),
                                    sim.Design("12 x 12 paired", 12, 12, paired=True, sd_pair=0.8),
                                    sim.Design("24 x 5 unequal", 24, 5, sd_prefix_c=2.0, sd_prefix_b=0.5)])
def test_the_lead_interval_covers_on_a_fixed_simulation(design):
    rng = np.random.default_rng(1)
    covered = 0
    n = 1000
    for _ in range(n):
        Y, is_high, pairs = sim.draw(design, 0.0, rng)
        low, high, _ = crossed_t_interval(Y, is_high, pairs)
        covered += low <= 0.0 <= high
    assert covered / n >= 0.93, covered / n


@pytest.mark.parametrize("design", [sim.RateDesign("12 x 12, rate 0.05", 12, 12, 0.05),
                                    sim.RateDesign("24 x 6, rate 0.2", 24, 6, 0.2),
                                    sim.RateDesign("12 x 12, rate 0.5, residual", 12, 12, 0.5, prefix_share=0.1)])
def test_the_rate_interval_covers_on_a_fixed_simulation(design):
    """The report's hit-rate interval (Clopper-Pearson at the scarcer factor's count) on binary
    crossed data whose population rate is known exactly."""
    from harness.analysis.rates import effective_units, rate_interval

    rng = np.random.default_rng(2)
    n_units = effective_units(design.prompts, design.prefixes)
    covered = sum(lo <= design.rate <= hi for lo, hi in
                  (rate_interval(float(sim.draw_rate(design, rng).mean()), n_units) for _ in range(1000)))
    assert covered / 1000 >= 0.95, covered / 1000


def test_degenerate_and_incomplete_designs():
    Y = np.zeros((4, 6))
    is_high = np.array([True] * 3 + [False] * 3)
    assert crossed_t_interval(Y, is_high)[:2] == (0.0, 0.0)  # no variation: a point
    Y[0, 0] = np.nan
    assert np.isnan(crossed_t_interval(Y, is_high)[0])  # incomplete: none
    assert np.isnan(crossed_t_interval(np.ones((1, 6)), is_high)[0])  # one prompt: none


def test_compare_groups_leads_with_the_crossed_t_interval_and_falls_back_when_incomplete():
    rng = np.random.default_rng(2)
    rows = [{"model": "m", "prompt_id": f"p{p}", "group": g, "prefix_id": f"{g}{x}", "prefix_len": 8,
             "placement": "raw", "isolation": "none", "beta": np.nan, "v": rng.normal()}
            for g in ("B", "C") for x in range(5) for p in range(6)]
    df = pd.DataFrame(rows)
    row = compare_groups(df, "v", n_resamples=200, n_permutations=200).iloc[0]
    assert row.ci_method == "crossed t" and row.ci_low < row.statistic < row.ci_high
    row = compare_groups(df.iloc[1:], "v", n_resamples=200, n_permutations=200).iloc[0]
    assert row.ci_method == "two-way bootstrap"


def test_rate_difference_interval_stays_within_minus_one_to_one():
    """C hits almost always, B almost never: the symmetric t interval of the difference runs past
    1 on the same numbers as floats; for a boolean column (a rate) it is cut at 1."""
    import pandas as pd

    from harness.analysis.crossed import compare_groups

    rows = []
    for p in range(6):
        for k in range(6):
            rows.append(("C", f"c{k}", f"p{p}", not (k == 0 and p < 3)))
            rows.append(("B", f"b{k}", f"p{p}", k == 1 and p < 2))
    df = pd.DataFrame(rows, columns=["group", "prefix_id", "prompt_id", "hit"]).assign(
        model="m", isolation="none", prefix_len=32)
    as_float = compare_groups(df.assign(hit=df.hit.astype(float)), "hit", n_resamples=200, n_permutations=200)
    as_rate = compare_groups(df.assign(hit=df.hit.astype("boolean")), "hit", n_resamples=200, n_permutations=200)
    assert as_float.ci_high.iloc[0] > 1
    assert as_rate.ci_high.iloc[0] == 1.0 and as_rate.ci_low.iloc[0] == as_float.ci_low.iloc[0]
