"""Planning a rate's C - B test (harness.analysis.rate_planning): the simulated power at a design
against an independent generator of the same latent model, power growing with the design, the
assured plan's bounds below the point's, and the pilots it refuses with their reason."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.rate_intervals import rate_difference
from harness.analysis.rate_planning import SIMULATIONS, design_chance, rate_tests

SHARES = {"prompt_high": 0.15, "prompt_low": 0.15, "prefix_high": 0.5, "prefix_low": 0.5, "shared": 0.1, "pair": 0.0}


def latent_tables(shares, rate_b, rate_c, prompts, prefixes, sets, rng):
    """0/1 tables [sets, prompts, 2 x prefixes] (C first) written out from the model's definition, not
    the harness's code: z = shared prompt + own prompt + prefix + residual, a hit above the group's
    threshold."""
    a = rng.standard_normal((sets, prompts, 1))
    tables = []
    for g, rate in (("high", rate_c), ("low", rate_b)):
        prompt, prefix, shared = shares[f"prompt_{g}"], shares[f"prefix_{g}"], shares["shared"]
        z = (np.sqrt(shared) * a + np.sqrt(prompt - shared) * rng.standard_normal((sets, prompts, 1))
             + np.sqrt(prefix) * rng.standard_normal((sets, 1, prefixes))
             + np.sqrt(1 - prompt - prefix) * rng.standard_normal((sets, prompts, prefixes)))
        tables.append(z > stats.norm.isf(rate))
    return np.concatenate(tables, -1).astype(float)


@pytest.mark.parametrize("rate_b, delta, prompts, prefixes", [(0.05, 0.1, 8, 12), (0.3, 0.15, 6, 10), (0.02, 0.08, 12, 24)])
def test_the_simulated_power_is_the_rejection_rate_of_an_independent_generator(rate_b, delta, prompts, prefixes):
    rng = np.random.default_rng(7)
    Y = latent_tables(SHARES, rate_b, rate_b + delta, prompts, prefixes, 4000, rng)
    is_high = np.r_[np.ones(prefixes, bool), np.zeros(prefixes, bool)]
    _, low, high = rate_difference(Y, is_high)
    real = float(np.mean((low > 0) | (high < 0)))
    planned = design_chance(SHARES, rate_b, delta, delta, prompts, prefixes, False, False, seed=0)
    # Monte Carlo error: 0.5 / sqrt(400) = 0.025 for the plan, 0.008 for the 4,000 tables
    assert planned == pytest.approx(real, abs=3 * np.sqrt(0.25 / SIMULATIONS + 0.25 / 4000)), (planned, real)


def pilot(rate_b=0.1, rate_c=0.35, prompts=6, prefixes=12, seed=3) -> pd.DataFrame:
    """A conditions table of one 0/1 pilot: B and C, each prefix its own id."""
    Y = latent_tables(SHARES, rate_b, rate_c, prompts, prefixes, 1, np.random.default_rng(seed))[0]
    return pd.DataFrame([{"prompt_id": f"p{i}", "prefix_id": f"x{j}", "group": "C" if j < prefixes else "B",
                          "target_hit": bool(Y[i, j])} for i in range(prompts) for j in range(2 * prefixes)]
                        ).astype({"target_hit": "boolean"})


def test_power_grows_with_the_design_and_the_assured_plan_asks_for_more():
    wide = {"target_hit": 0.25}  # 25 percentage points
    (point,), _ = rate_tests(pilot(), ["target_hit"], wide, by=())
    (assured,), _ = rate_tests(pilot(), ["target_hit"], wide, by=(), assurance=0.85)
    assert point.pilot == (6, 12) and point.measure == "target_hit" and point.claim is None
    small, large = point.power(6, 12), point.power(48, 48)
    assert 0 <= small < large <= 1 and large > 0.8, (small, large)
    for design in ((6, 12), (12, 24), (24, 24)):  # more clustering, a noisier rate: never more power
        assert assured.planned(*design) <= point.power(*design) + 0.05, design
        assert 0 <= assured.planned(*design, "decided") <= 1
    assert assured.planned(12, 24) < point.power(12, 24) - 0.1  # bounds that move the plan
    assert point.power(12, 24) == point.power(12, 24)  # seeded and cached: the same design, the same number
    assert assured.power(12, 24) == point.power(12, 24)  # the point power is the point power whatever the plan


def test_a_larger_delta_has_more_power_and_a_delta_of_its_own_is_read():
    (default,), _ = rate_tests(pilot(), ["target_hit"], by=())
    (wide,), _ = rate_tests(pilot(), ["target_hit"], {"target_hit": 0.2}, by=())
    assert wide.power(12, 24) > default.power(12, 24)


def test_pilots_that_say_nothing_of_how_hits_cluster_are_refused_with_their_reason():
    none = pilot().assign(target_hit=False).astype({"target_hit": "boolean"})
    tests, reasons = rate_tests(none, ["target_hit"], by=())
    assert tests == [] and "no B or C condition of the pilot hit" in reasons[0]
    tests, reasons = rate_tests(pilot(prompts=2), ["target_hit"], by=())
    assert tests == [] and "a pilot needs at least 3 x 3" in reasons[0]


def test_a_c_that_asks_for_the_word_and_forbids_it_is_not_planned_and_empty_groups_are_named():
    """Pass 37 (silent): asked and forbidden C prefixes were pooled into one C - B, which the report refuses;
    (misleading): a target_hit empty in B was "a complete crossing of 0 prompts"."""
    mixed = pilot().assign(check=lambda d: np.where((d.group == "C") & (d.prefix_id < "x3"), "absent", "contains"))
    tests, reasons = rate_tests(mixed, ["target_hit"], by=())
    assert tests == [] and "ask for the word and prefixes that forbid it" in reasons[0]
    no_b = pilot()
    no_b.loc[no_b.group == "B", "target_hit"] = pd.NA
    tests, reasons = rate_tests(no_b, ["target_hit"], by=())
    assert tests == [] and reasons == ["target_hit has no value in group B (its prefixes carry no target, or the run "
                                       "decoded nothing: decode.path=none)"]


def test_an_assurance_of_one_half_plans_on_the_point_fit():
    """Pass 37 (silent): at --assurance 0.5 a rate's planned power was 0.048 where its point power was 0.20."""
    wide = {"target_hit": 0.25}
    (half,), _ = rate_tests(pilot(), ["target_hit"], wide, by=(), assurance=0.5)
    for design in ((6, 12), (24, 24)):
        assert half.planned(*design) == half.power(*design)
