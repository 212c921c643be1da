"""The lead C-minus-B test's power range (:func:`harness.analysis.power.design_power_range`): what the
report, the behaviour tables and claim 3 print beside the point power."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis.lead import lead
from harness.analysis.power import PLANNING_UNDERSTATES, design_power, design_power_range


def crossed(rng, sets, P, n, prefix_sd=1.0, resid_sd=0.5, inter_sd=0.3, effect=0.0):
    """``sets`` unpaired tables [P, 2n] (C first), prompts, prefixes and their interaction random."""
    hi = np.arange(2 * n) < n
    Y = (rng.normal(0, 1, (sets, P, 1)) + rng.normal(0, prefix_sd, (sets, 1, 2 * n))
         + rng.normal(0, inter_sd, (sets, P, 2)).repeat(n, axis=2) + rng.normal(0, resid_sd, (sets, P, 2 * n)))
    return Y + effect * hi, hi


def test_prefixes_that_agree_exactly_give_power_at_the_tests_size_widened_by_the_planning_error():
    """Prefix means equal in both groups: even the prefix variances' upper limits are 0, so every corner
    states power against an effect of 0, which a two-sided 5% test rejects 5% of the time; the range is
    that, widened by the planning model's own error (0.06 below, 0.02 above)."""
    rng = np.random.default_rng(1)
    R = rng.normal(0, 1, (6, 10))
    Y = rng.normal(0, 1, (6, 1)) + R - R.mean(0, keepdims=True)
    low, high = design_power_range(Y, np.arange(10) < 5)
    assert np.isclose(low, 0.0) and np.isclose(high, 0.05 + PLANNING_UNDERSTATES)


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 10), st.integers(3, 12), st.floats(0.0, 2.0), st.floats(0.05, 2.0), st.booleans(),
       st.integers(0, 10 ** 6))
def test_the_range_is_ordered_within_the_size_and_one_and_batches_like_single_tables(P, n, prefix_sd, resid_sd,
                                                                                  paired, seed):
    rng = np.random.default_rng(seed)
    Y, hi = crossed(rng, 3, P, n, prefix_sd, resid_sd)
    pairs = (np.arange(n), np.arange(n) + n) if paired else None
    low, high = design_power_range(Y, hi, pairs)
    assert np.all(low <= high + 1e-12) and np.all(low >= 0) and np.all(high <= 1)
    one = [design_power_range(y, hi, pairs) for y in Y]
    assert np.allclose(low, [o[0] for o in one]) and np.allclose(high, [o[1] for o in one])


def test_the_range_holds_the_power_at_the_true_components_in_most_tables():
    """400 tables of 4 prompts x 6 prefixes per group: the power planned at the generator's own
    components lies in the range in at least 95% of them, and the range says something (its median
    width well under the whole of [0, 1]). Each of the five intervals misses 5%, so a box of
    independent ones would hold all five true values in 77%; the power moves less than they do."""
    rng = np.random.default_rng(7)
    P, n = 4, 6
    Y, hi = crossed(rng, 400, P, n, prefix_sd=1.0, resid_sd=0.5, inter_sd=0.3)
    true = {"interaction": 0.09, "prefix_high": 1.0, "prefix_low": 1.0, "resid_high": 0.25, "resid_low": 0.25}
    target = design_power(true, P, n, 1.0)
    low, high = design_power_range(Y, hi)
    held = np.mean((low <= target) & (target <= high))
    assert held >= 0.95 and np.median(high - low) < 0.5, (held, np.median(high - low))


def test_where_the_prefix_variance_is_estimated_at_zero_the_range_says_how_much_more_power_there_may_be():
    """Both groups' prefix variances estimated at 0: the point power is against an effect of 0 (the
    test's size, 0.05), but the prefix variances' upper limits are not 0, so the range reaches above."""
    rng = np.random.default_rng(3)
    zero = 0
    for _ in range(60):
        Y, hi = crossed(rng, 1, 5, 4, prefix_sd=0.0, resid_sd=1.0, inter_sd=0.0)
        out = lead(Y[0], hi)
        assert out["power_low"] <= out["power_high"]
        if out["prefix_sd"] == 0:
            zero += 1
            assert np.isclose(out["power"], 0.05) and np.isclose(out["power_low"], 0.0)
            assert out["power_high"] > 0.1
    assert zero > 5
