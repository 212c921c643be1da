"""The chance a test ends decided at Δ (harness.analysis.decided), against a Monte Carlo of the
verdict rule itself (harness.analysis.verdicts.decide) on estimates and standard errors drawn as the
module assumes, and against the normal formula by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.analysis.decided import undecided
from harness.analysis.verdicts import NOT_DETERMINED, decide


def simulated(variance, dof, delta, theta, two_sided, c_low=None, c_high=None, n=40000, seed=0):
    rng = np.random.default_rng(seed)
    d = rng.normal(theta, np.sqrt(variance), n)
    s = np.sqrt(variance * rng.chisquare(dof, n) / dof)
    c = stats.t.ppf(0.975, dof)
    low, high = d - (c if c_low is None else c_low) * s, d + (c if c_high is None else c_high) * s
    return np.mean([decide(lo, hi, delta, two_sided=two_sided) == NOT_DETERMINED for lo, hi in zip(low, high)])


@pytest.mark.parametrize("two_sided", [False, True])
@pytest.mark.parametrize("variance, dof", [(0.04, 5.0), (0.01, 20.0), (0.09, 3.0)])
def test_the_chance_undecided_is_the_verdict_rules_own_at_the_least_favourable_truth(variance, dof, two_sided):
    delta = 0.5
    worst = max(simulated(variance, dof, delta, theta, two_sided, seed=i)
                for i, theta in enumerate(np.linspace(0, delta, 11)))
    assert undecided(variance, dof, delta, two_sided=two_sided) == pytest.approx(worst, abs=0.012)


def test_by_hand_with_a_known_standard_error():
    """Known SE (dof inf), one-sided, truth Δ/2: 2 Φ(1.96 - Δ / (2 SE)) - 1."""
    sd, delta = 0.1, 0.3
    expected = 2 * stats.norm.cdf(1.959964 - delta / (2 * sd)) - 1  # 0.354
    assert undecided(sd ** 2, np.inf, delta) == pytest.approx(expected, abs=1e-4)
    assert undecided(sd ** 2, np.inf, 0.4) == 0.0  # 2 c SE = 0.39 < Δ: every interval decides


def test_unequal_ends_as_claims_1_and_2_take_them():
    """Claims 1 and 2: a contrast's low end at the 95% interval's, its high end at the 97.5%'s."""
    variance, dof, delta = 0.02, 8.0, 0.4
    c_low, c_high = stats.t.ppf(0.975, dof), stats.t.ppf(0.9875, dof)
    worst = max(simulated(variance, dof, delta, theta, False, c_low, c_high, seed=i)
                for i, theta in enumerate(np.linspace(0, delta, 11)))
    assert undecided(variance, dof, delta, c_low, c_high) == pytest.approx(worst, abs=0.012)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.001, 1.0), st.floats(2.0, 200.0), st.floats(0.05, 2.0))
def test_more_units_never_decide_less(variance, dof, delta):
    """Halving the variance (twice the units) never raises the chance undecided; a larger Δ neither."""
    base = undecided(variance, dof, delta)
    assert 0.0 <= base <= 1.0
    assert undecided(variance / 2, dof, delta) <= base + 1e-9
    assert undecided(variance, dof, delta * 1.5) <= base + 1e-9
    assert undecided(variance, dof, delta, two_sided=True) >= 0.0
