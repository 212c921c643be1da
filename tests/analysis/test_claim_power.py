"""Claims 1 and 2's power, the range their data allow, and the variance-component limits behind it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.analysis import claims
from harness.analysis import crossed_variance as cv
from harness.analysis.claim_power import contrast_components, min_contrast_power, min_contrast_power_range


def test_with_no_second_mean_square_the_limits_are_the_exact_chi_square_interval():
    """MLS reduces to the textbook interval for one mean square's expectation: df ms / chi2 quantiles."""
    ms, df = np.array([2.0, 0.3]), 5
    low, high = cv._difference_limits(ms, df, np.zeros(2), 40, 0.025)
    assert low == pytest.approx(ms * df / stats.chi2.ppf(0.975, df))
    assert high == pytest.approx(ms * df / stats.chi2.ppf(0.025, df))


@pytest.mark.parametrize("P, n, prompt, prefix, resid", [(6, 10, 0.5, 0.3, 1.0), (4, 24, 1.0, 0.05, 1.0),
                                                         (12, 8, 0.0, 1.0, 0.2)])
def test_every_component_interval_covers_on_a_fixed_simulation(P, n, prompt, prefix, resid):
    """4,000 crossed tables with known components: each two-sided 95% interval misses on each side
    at most about 2.5% (a variance at 0 sits on its interval's floor, so it cannot be missed from above)."""
    rng = np.random.default_rng(3)
    sets = 4000
    G = (rng.normal(0, np.sqrt(prompt), (sets, P, 1)) + rng.normal(0, np.sqrt(prefix), (sets, 1, n))
         + rng.normal(0, np.sqrt(resid), (sets, P, n)))
    limits = cv.group_component_limits(G)
    for name, truth in (("prompt", prompt), ("prefix", prefix), ("resid", resid)):
        low, high = limits[name]
        assert (low <= high).all() and (low >= 0).all()
        assert np.mean(high < truth) <= 0.035, name
        assert np.mean(low > truth) <= 0.035, name
        assert np.mean((low <= truth) & (truth <= high)) >= 0.93, name


@settings(max_examples=25, deadline=None)
@given(P=st.integers(3, 8), n=st.integers(3, 12), prefix=st.floats(0.0, 2.0), seed=st.integers(0, 10_000))
def test_the_power_range_is_ordered_and_stated_even_where_the_point_power_is_not(P, n, prefix, seed):
    rng = np.random.default_rng(seed)
    Y = rng.normal(0, 1, (P, n, 4)) + rng.normal(0, prefix, (1, n, 4)) + np.array([0.0, 0.0, 0.3, 0.4])
    low, high = min_contrast_power_range(Y, claims.JUMP_WEIGHTS)
    assert 0.0 <= low <= high <= 1.0
    point = min_contrast_power(contrast_components(Y, claims.JUMP_WEIGHTS), P, n)
    assert np.isfinite(point) == all(c["prefix"] > 0 for c in contrast_components(Y, claims.JUMP_WEIGHTS))


def test_a_prefix_variance_estimated_at_0_leaves_no_point_power_and_a_range_from_the_tests_size():
    """Every prefix's mean over prompts the same in every contrast: no effect to state the power
    against, so no point power. Prefix means that agree exactly put even the prefix variance's upper
    limit at 0, so every corner states power against an effect of 0: both one-sided 2.5% tests
    rejecting together, at most 2.5% of the time."""
    rng = np.random.default_rng(0)
    R = rng.normal(0, 1, (8, 12, 4))
    Y = rng.normal(0, 1, (8, 1, 4)) + R - R.mean(0, keepdims=True)
    comps = contrast_components(Y, claims.JUMP_WEIGHTS)
    assert all(c["prefix"] == 0 for c in comps) and np.isnan(min_contrast_power(comps, 8, 12))
    low, high = min_contrast_power_range(Y, claims.JUMP_WEIGHTS)
    assert 0 < low <= high <= 0.025


def test_claim_rows_carry_the_power_range_and_the_page_prints_it():
    from harness.reporting.claims import claims_markdown
    from harness.reporting.markdown import num
    from tests.analysis.test_claims import attention_table, conditions_table

    cond = conditions_table([0.1, 0.12, 0.5, 0.55], [0.1] * 4)
    att = attention_table([0.1, 0.5, 0.2])
    table = claims.seed_claims(cond, att, None, n_resamples=200)
    ranged = table  # claim 3 too: the lead test's range (harness.analysis.power.design_power_range)
    assert set(table.claim) == {1, 2, 3}
    assert ranged.power_low.notna().all() and (ranged.power_low <= ranged.power_high).all()
    text = claims_markdown(table, [], ["run"], ["m"], 200)
    for r in ranged.itertuples():
        assert f"(range {num(r.power_low, 2)} to {num(r.power_high, 2)})" in text
