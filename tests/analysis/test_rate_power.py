"""The lead rate test's power by simulation (:func:`harness.analysis.rate_power.rate_power`): its
orthant covariance against scipy's bivariate normal, the latent fit against the shares a large table
was drawn with, the power against a brute-force simulation written here, and the report's rate rows."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.analysis.crossed import compare_groups
from harness.analysis.power import components_of, extremes_over_box, prefix_level_sd
from harness.analysis.rate_intervals import rate_difference
from harness.analysis.rate_power import (
    between_covariances,
    fit_shares,
    latent_share,
    orthant_covariance,
    rate_power,
    rate_power_range,
    simulated_power,
)
from harness.reporting.markdown import power_text


def latent_tables(rng, sets, P, n, rate_c, rate_b, prompt=0.3, shared=0.2, prefix=0.4):
    """``sets`` tables [P, 2n] (C first) of binary cells thresholding a standard normal latent value:
    prompt share ``prompt`` per group of which ``shared`` is common to both, prefix share ``prefix``."""
    hi = np.arange(2 * n) < n
    g = np.where(hi, 0, 1)
    z = (np.sqrt(shared) * rng.standard_normal((sets, P, 1))
         + np.sqrt(prompt - shared) * rng.standard_normal((sets, P, 2))[..., g]
         + np.sqrt(prefix) * rng.standard_normal((sets, 1, 2 * n))
         + np.sqrt(1 - prompt - prefix) * rng.standard_normal((sets, P, 2 * n)))
    threshold = np.where(hi, stats.norm.isf(rate_c), stats.norm.isf(rate_b))
    return (z > threshold).astype(float), hi


@settings(max_examples=40, deadline=None)
@given(st.floats(-2.5, 2.5), st.floats(-2.5, 2.5), st.floats(0.0, 0.95))
def test_the_orthant_covariance_is_scipys_bivariate_normal_less_the_product(t1, t2, rho):
    both = stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf([-t1, -t2])
    want = both - stats.norm.sf(t1) * stats.norm.sf(t2)
    assert float(orthant_covariance(t1, t2, rho)) == pytest.approx(want, abs=2e-6)
    # the share found gives back the covariance (the share itself is ill-determined where the covariance
    # flattens out: near 1 with unequal thresholds)
    assert float(orthant_covariance(t1, t2, latent_share(t1, t2, want))) == pytest.approx(want, abs=1e-6)


def test_a_large_table_gives_back_the_shares_it_was_drawn_with():
    rng = np.random.default_rng(0)
    Y, hi = latent_tables(rng, 1, 120, 150, 0.3, 0.2)
    shares = fit_shares(Y[0], hi)
    for name, want in (("prompt_high", 0.3), ("prompt_low", 0.3), ("prefix_high", 0.4), ("prefix_low", 0.4),
                       ("shared", 0.2)):
        assert float(shares[name]) == pytest.approx(want, abs=0.08), name


def test_a_group_with_no_hit_takes_the_other_groups_shares():
    rng = np.random.default_rng(1)
    Y, hi = latent_tables(rng, 1, 30, 40, 0.3, 0.2)
    Y[0][:, ~hi] = 0.0
    shares = fit_shares(Y[0], hi)
    assert float(shares["prompt_low"]) == float(shares["prompt_high"]) > 0
    assert float(shares["prefix_low"]) == float(shares["prefix_high"]) > 0
    assert float(shares["shared"]) == 0.0


def test_the_simulation_at_known_shares_is_the_test_itself_and_a_pilot_at_the_design_lands_near_it():
    """Tables drawn by this file's own generator at known shares: the MOVER test's rejection rate on
    2,000 of them (the real power) against :func:`simulated_power` at those shares (4,000 of the
    module's tables; 0.3815 against 0.3775 when written), and the median power printed from 60 tables
    of the design itself (fitted shares and rates; 0.36)."""
    rng = np.random.default_rng(2)
    P, n, rate_b, effect = 8, 12, 0.15, 0.2
    Y, hi = latent_tables(rng, 2000, P, n, rate_b + effect, rate_b)
    _, low, high = rate_difference(Y, hi)
    real = np.mean((low > 0) | (high < 0))
    assert 0.2 < real < 0.6
    truth = {"prompt_high": 0.3, "prompt_low": 0.3, "prefix_high": 0.4, "prefix_low": 0.4, "shared": 0.2, "pair": 0.0}
    at_truth = simulated_power({k: np.array([v]) for k, v in truth.items()}, np.array([rate_b]), np.array([effect]),
                               P, hi, sims=4000)
    assert float(at_truth[0]) == pytest.approx(real, abs=0.03)  # two simulations' SEs: about 0.013 together
    pilots, _ = latent_tables(rng, 60, P, n, rate_b + effect, rate_b)
    assert np.median(rate_power(pilots, hi, effect=np.full(60, effect))) == pytest.approx(real, abs=0.06)


def test_the_power_is_seeded_batched_and_ordered_with_its_range():
    rng = np.random.default_rng(3)
    Y, hi = latent_tables(rng, 3, 6, 8, 0.3, 0.1)
    one = rate_power(Y[1], hi)
    assert one == rate_power(Y[1], hi)  # the same table prints the same power
    assert rate_power(Y, hi)[1] == pytest.approx(one, abs=0.06)  # batched: other random numbers, same model
    low, high = rate_power_range(Y, hi)
    assert np.all((0 <= low) & (low <= high) & (high <= 1))
    assert float(rate_power(Y[1], hi, effect=0.0)) <= 0.06  # no effect: rejects at most at the level


def test_a_rate_row_states_the_simulated_power_of_its_own_test():
    rng = np.random.default_rng(4)
    Y, hi = latent_tables(rng, 1, 6, 8, 0.3, 0.1)
    Y = Y[0]
    df = pd.DataFrame([{"model": "m", "prompt_id": f"p{p}", "group": "C" if hi[x] else "B", "prefix_id": f"x{x:02d}",
                        "prefix_len": 8, "placement": "raw", "isolation": "none", "v": bool(Y[p, x])}
                       for p in range(Y.shape[0]) for x in range(Y.shape[1])])
    row = compare_groups(df, "v", n_resamples=50, n_permutations=50).iloc[0]
    assert row.ci_method == "MOVER, crossed Wilson, clustering shared"
    # compare_groups orders the prefixes its own way: the power is the table's, whatever the order
    sd = float(prefix_level_sd(components_of(Y, hi)))
    assert row.prefix_sd == pytest.approx(sd)
    assert row.power == pytest.approx(rate_power(Y, hi, effect=sd), abs=0.08)
    assert row.power_low <= row.power_high


def test_the_range_is_the_same_with_its_corners_simulated_together_or_one_by_one(monkeypatch):
    import harness.analysis.rate_power as module

    rng = np.random.default_rng(11)
    Y, hi = latent_tables(rng, 3, 6, 6, 0.3, 0.15)
    pairs = (np.arange(6), np.arange(6, 12))
    together = [rate_power_range(Y, hi, p, sims=50) for p in (None, pairs)]
    monkeypatch.setattr(module, "CORNER_CELLS", 1)  # one corner a call
    one_by_one = [rate_power_range(Y, hi, p, sims=50) for p in (None, pairs)]
    for (lo_a, hi_a), (lo_b, hi_b) in zip(together, one_by_one):
        np.testing.assert_array_equal(lo_a, lo_b)
        np.testing.assert_array_equal(hi_a, hi_b)
    assert np.all(together[0][0] <= together[0][1]) and np.any(together[0][0] < together[0][1])


def test_corners_in_groups_give_the_extremes_of_corners_one_by_one():
    limits = {"a": (0.1, 0.7), "b": ((1.0, np.array([2.0, 3.0])), (4.0, np.array([0.5, 9.0]))), "c": (-1.0, 2.0)}

    def power_at(c):  # not monotone, tuple ends part by part, batched ends broadcast
        a, b0, b1, c = (np.asarray(v, dtype=float) for v in (c["a"], *c["b"], c["c"]))
        return np.sin(3 * a[..., None] * b1 + b0[..., None] - c[..., None] ** 2)

    want = extremes_over_box(limits, power_at)
    for k in (2, 3, 8):
        got = extremes_over_box(limits, power_at, corners_per_call=k)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    corners = [power_at({"a": a, "b": b, "c": c}) for a in limits["a"] for b in limits["b"] for c in limits["c"]]
    np.testing.assert_allclose(want[0], np.min(corners, 0))
    np.testing.assert_allclose(want[1], np.max(corners, 0))


def test_no_power_is_stated_against_an_effect_of_zero():
    hi = np.arange(12) < 6
    none = np.zeros((4, 12))  # no hit anywhere: no prefix-level SD to size an effect by
    assert np.isnan(rate_power(none, hi)) and np.isnan(rate_power_range(none, hi)).all()
    row = compare_groups(pd.DataFrame([{"model": "m", "prompt_id": f"p{p}", "group": "C" if x < 6 else "B",
                                        "prefix_id": f"x{x}", "prefix_len": 16, "placement": "raw", "isolation": "none",
                                        "target_hit": False} for p in range(4) for x in range(12)]),
                         "target_hit").iloc[0]
    assert np.isnan([row.power, row.power_low, row.power_high]).all() and np.isfinite([row.ci_low, row.ci_high]).all()
    assert power_text(row.power, row.power_low, row.power_high) == "not estimable"
    # one hit varies nothing at the prefix level either, but an explicit effect is still simulated
    one = none.copy()
    one[0, 0] = 1
    assert float(rate_power(one, hi, effect=0.0)) <= 0.06
    mixed = np.stack([none, latent_tables(np.random.default_rng(2), 1, 4, 6, 0.4, 0.2)[0][0]])
    assert np.isnan(rate_power(mixed, hi)[0]) and np.isfinite(rate_power(mixed, hi)[1])


def test_heavy_tailed_limits_miss_a_sparse_tables_prefix_component_less_often():
    """0/1 tables whose hits sit in a few hot prefixes: normal-theory limits on the prefix mean
    square (k - 1 degrees of freedom) put the high end below the true 0/1 prefix component far more
    often than 2.5%; counting the mean square's heavy-tailed degrees of freedom misses less often."""
    from harness.analysis.crossed_variance import group_component_limits

    rng = np.random.default_rng(1)
    P, n, rate, share, sets = 8, 12, 0.05, 0.5, 1000
    t = stats.norm.isf(rate)
    G = (rng.normal(0, np.sqrt(0.2), (sets, P, 1)) + rng.normal(0, np.sqrt(share), (sets, 1, n))
         + rng.normal(0, np.sqrt(1 - 0.2 - share), (sets, P, n)) > t).astype(float)
    # the variance over prefixes of a prefix's rate over all prompts, by 200,000 prefixes
    truth = stats.norm.sf((t - rng.normal(0, np.sqrt(share), 200_000)) / np.sqrt(1 - share)).var()
    normal, heavy = (group_component_limits(G, heavy_tails=h)["prefix"] for h in (False, True))
    assert np.all(heavy[1] >= normal[1]) and np.all(heavy[0] <= normal[0])
    assert np.mean(heavy[1] < truth) < np.mean(normal[1] < truth) - 0.05


def test_the_ties_interval_widens_with_heavy_tailed_means_and_is_unbounded_on_three_units():
    rng = np.random.default_rng(4)
    hi = np.arange(16) < 8
    smooth = rng.normal(0, 1, (12, 1)) + rng.normal(0, 1, (12, 16))
    (low, high), _ = between_covariances(smooth, hi, confidence=0.95)
    assert 0 <= low <= high < np.inf
    spiky = np.zeros((12, 16))
    spiky[0, :3], spiky[3, 1], spiky[5, 8:10], spiky[0, 12] = 1, 1, 1, 1  # the hits sit in three prompts
    (low, high), _ = between_covariances(spiky, hi, confidence=0.95)
    a, b = spiky[:, hi].mean(1), spiky[:, ~hi].mean(1)
    r = np.corrcoef(a, b)[0, 1]
    plain = np.tanh(np.arctanh(r) + 1.96 / np.sqrt(12 - 3)) * a.std(ddof=1) * b.std(ddof=1)  # Fisher on 12 units
    assert low == 0 and high > 1.2 * plain  # a spike or two among 12 prompts is worth far fewer units
    (low, high), _ = between_covariances(smooth[:3], hi, confidence=0.95)
    assert high == np.inf
    # an unbounded tie leaves C and B as closely tied as their own prompt shares allow
    shares = fit_shares(smooth, hi)
    assert shares["shared"] <= min(shares["prompt_high"], shares["prompt_low"])
    from harness.analysis.rate_power import assemble_shares, own_shares

    own, informative = own_shares((smooth > 0.5).astype(float), hi, between=(np.inf, 0.0))
    tied = assemble_shares(own, informative)
    assert tied["shared"] == pytest.approx(min(tied["prompt_high"], tied["prompt_low"]))
