"""Rate intervals with prompts and prefixes crossed (harness.analysis.rate_intervals, rates): the
Wilson interval against scipy's, the effective sample size between its bounds, the MOVER difference
by hand, the p-value that inverts it, and coverage on a fixed simulation."""

import importlib.util
import re
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from scipy.stats import binomtest, norm

from harness.analysis import rate_intervals as ri
from harness.analysis import rates
from harness.analysis.crossed_variance import difference, group_mean, heavy_tailed_df
from tests.support import ROOT

spec = importlib.util.spec_from_file_location("crossed_calibration", ROOT / "benchmarks" / "crossed_calibration.py")
sim = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = sim
spec.loader.exec_module(sim)
Z = norm.ppf(0.975)


@pytest.mark.parametrize("n", [1, 3, 12, 144])
def test_wilson_is_scipys_wilson_interval(n):
    for k in range(n + 1):
        ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert tuple(map(float, ri.wilson(k / n, n, Z))) == (pytest.approx(ci.low, abs=1e-12),
                                                             pytest.approx(ci.high, abs=1e-12))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.data())
def test_a_rate_interval_lies_in_0_1_holds_the_rate_and_its_units_lie_between_their_bounds(P, n, data):
    hits = np.array(data.draw(st.lists(st.booleans(), min_size=P * n, max_size=P * n)), dtype=float).reshape(P, n)
    rate, n_eff, dof, _ = ri.effective_units(hits)
    low, high = ri.wilson(rate, n_eff, ri.quantile(dof, 0.95))
    assert 0 <= low <= rate <= high <= 1 and high > low
    if n > 1:
        assert min(P, n) - 1e-9 <= n_eff <= P * n + 1e-9
    if hits.sum() in (0, P * n) and n > 1:  # no information on clustering: the worst case, at z
        assert n_eff == pytest.approx(min(P, n)) and np.isnan(dof)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 12), st.integers(2, 12), st.floats(0.01, 0.6), st.data())
def test_a_rate_interval_lies_within_the_worst_cases(P, n, p_hit, data):
    """Wilson's interval is ``{pi: (rate - pi)^2 <= (q^2 / n) pi (1 - pi)}``, nested in ``q^2 / n``:
    a t quantile on few degrees of freedom must not claim less than all the variance in the scarcer
    factor (Wilson at ``m = min(P, n)`` units and t on m - 1), which holds whatever the clustering."""
    hits = np.array(data.draw(st.lists(st.floats(0, 1), min_size=P * n, max_size=P * n)), dtype=float).reshape(P, n)
    hits = (hits < p_hit).astype(float)
    rate, low, high = ri.crossed_rate_interval(hits)
    m = min(P, n)
    worst_low, worst_high = ri.wilson(rate, m, sps.t.ppf(0.975, m - 1) if 0 < rate < 1 else Z)
    assert worst_low - 1e-12 <= low and high <= worst_high + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 500.0), st.floats(1.0, 5.0), st.integers(0, 100), st.integers(1, 100))
def test_wilson_is_monotone_in_the_rate_at_a_given_effective_size(n, q, k, step):
    """The interval never narrows toward 0 as the rate grows at fixed units: the old bootstrap gave
    [0, 0.042] for 1 hit in 144 and [0, 0.265] for none."""
    a, b = sorted((min(k / 100, 1.0), min((k + step) / 100, 1.0)))
    (la, ha), (lb, hb) = ri.wilson(a, n, q), ri.wilson(b, n, q)
    assert lb >= la - 1e-12 and hb >= ha - 1e-12


def test_one_hit_is_never_narrower_than_none_and_only_spread_hits_narrow_it():
    """A single hit says nothing about clustering: its interval keeps the worst case's effective
    size, so it is not narrower than no hit's (the old bootstrap gave [0, 0.265] for none and
    [0, 0.042] for one). Hits landing in different prompts and prefixes show they are not
    clustered and narrow it; the same hits stacked in one prefix do not."""
    empty = np.zeros((12, 12))
    one = empty.copy()
    one[3, 5] = 1
    (_, _, high0), (_, _, high1) = ri.crossed_rate_interval(empty), ri.crossed_rate_interval(one)
    assert high0 == pytest.approx(float(ri.wilson(0.0, 12, Z)[1]))
    assert high1 >= high0
    spread, stacked = empty.copy(), empty.copy()
    spread[np.arange(6), np.arange(6)] = 1
    stacked[:6, 0] = 1
    assert ri.crossed_rate_interval(spread)[2] < ri.crossed_rate_interval(stacked)[2]


def test_mover_by_hand_when_one_group_never_hits():
    """B without a hit: its variance is 0, so the correlation drops out and the ends are C's interval
    and B's upper end combined by squares (Newcombe). B's hits cannot show how they cluster, so it
    takes C's clustering (C's effective units; at z, with no variance to take degrees of freedom
    from) rather than the worst case; C, shrunk toward B's own (the worst case), is as on its own."""
    rng = np.random.default_rng(5)
    C = (rng.random((6, 8)) < 0.3).astype(float)
    Y = np.concatenate([C, np.zeros((6, 8))], axis=1)
    hi = np.arange(16) < 8
    rc, n_eff, _, _ = ri.effective_units(C)
    assert n_eff > 6  # C's own estimate, not the worst case's fallback: B's units are then C's
    q = sps.t.ppf(0.975, float(difference(Y, hi).dof))  # the difference's degrees of freedom, not C's own
    lc, uc = ri.wilson(rc, n_eff, q)
    z = sps.norm.ppf(0.975)
    ub = z ** 2 / (n_eff + z ** 2)  # Wilson's upper end at a rate of 0
    d, low, high = ri.rate_difference(Y, hi)
    assert d == pytest.approx(rc) and high == pytest.approx(uc)
    assert low == pytest.approx(rc - np.sqrt((rc - lc) ** 2 + ub ** 2))
    worst = ri.crossed_rate_interval(np.zeros((6, 8)))[2]  # B on its own: the worst case's wider end
    assert ub < worst


def test_one_hit_in_a_difference_takes_z_as_none_does():
    """B with a single hit learns its clustering wholly from C, as with none: its end is Wilson's at
    C's effective units and at z. A t quantile on the difference's few degrees of freedom priced an
    estimate B's own table never gave, and cost the sparse test power (results/calibration.md, 1e)."""
    rng = np.random.default_rng(5)
    C = (rng.random((6, 8)) < 0.3).astype(float)
    B = np.zeros((6, 8))
    B[2, 3] = 1
    Y, hi = np.concatenate([C, B], axis=1), np.arange(16) < 8
    rc, n_eff, _, _ = ri.effective_units(C)
    q = sps.t.ppf(0.975, float(difference(Y, hi).dof))
    assert q > Z + 0.05  # few degrees of freedom: t and z differ enough to tell apart
    lc, uc = ri.wilson(rc, n_eff, q)
    rb = 1 / 48
    lb, ub = ri.wilson(rb, n_eff, Z)
    d, low, high = ri.rate_difference(Y, hi)
    assert d == pytest.approx(rc - rb)
    assert low == pytest.approx(d - np.sqrt((rc - lc) ** 2 + (ub - rb) ** 2))
    assert high == pytest.approx(d + np.sqrt((uc - rc) ** 2 + (rb - lb) ** 2))


def test_rate_difference_p_inverts_the_interval():
    rng = np.random.default_rng(6)
    hi = np.arange(20) < 10
    for shift in (0.0, 0.15, 0.4):
        Y = np.concatenate([rng.random((8, 10)) < 0.2 + shift, rng.random((8, 10)) < 0.2], axis=1).astype(float)
        p = ri.rate_difference_p(Y, hi)
        _, low, high = ri.rate_difference(Y, hi, confidence=1 - p)
        assert min(abs(low), abs(high)) < 1e-6 or p in (0.0, 1.0)
        d, low95, high95 = ri.rate_difference(Y, hi)
        assert (p < 0.05) == (low95 > 0 or high95 < 0)
        one = ri.rate_difference_p(Y, hi, alternative="greater")
        assert one == pytest.approx(p / 2 if d > 0 else 1 - p / 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 40), st.data())
def test_heavy_tailed_degrees_of_freedom_follow_scipys_kurtosis(k, data):
    """``1 / (1/(k-1) + g2/(2k))`` with g2 scipy's (biased, Fisher) excess kurtosis, kept >= 0: k - 1
    for light-tailed means, fewer the heavier the tails."""
    means = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=k, max_size=k)))
    g2 = sps.kurtosis(means, fisher=True, bias=True) if means.std() > 0 else 0.0
    want = 1 / (1 / (k - 1) + max(g2, 0.0) / (2 * k))
    assert float(heavy_tailed_df(means)) == pytest.approx(want, rel=1e-9)
    assert float(heavy_tailed_df(means)) <= k - 1 + 1e-9


def test_a_rate_from_a_few_hot_prefixes_gets_fewer_degrees_of_freedom():
    """11 hits in 4 of 48 prefixes: the prefix mean square rests on 4 non-zero means, not 47 normal
    ones; with ``k - 1`` the interval missed the true rate from below in 7% of simulated tables."""
    G = np.zeros((24, 48))
    G[[0, 3, 5], 0] = G[[1, 2, 7], 9] = G[[4, 8], 20] = G[[6, 10, 11], 33] = 1.0
    light = group_mean(G)
    _, _, dof, _ = ri.effective_units(G)
    assert light.dof > 23 and dof < light.dof / 2


@pytest.mark.parametrize("cell", [sim.RateCell("12 x 12", 12, 12, 0.05), sim.RateCell("3 x 18", 3, 18, 0.2, 0.5),
                                  sim.RateCell("12 x 12 residual", 12, 12, 0.5, 0.1),
                                  sim.RateCell("24 x 48", 24, 48, 0.05)])
def test_the_rate_interval_covers_on_a_fixed_simulation(cell):
    rng = np.random.default_rng(2)
    G = sim.draw_rate(cell, 2000, rng)
    _, low, high = ri.crossed_rate_interval(G)
    assert np.mean((low <= cell.rate) & (cell.rate <= high)) >= 0.94


def test_rate_summary_by_hand():
    """A: one column, 4 prompts, 1 hit: the plain Wilson interval. C: its table's crossed interval."""
    rows = []
    for i in range(4):
        rows += [("A", None, 0, i == 0), ("C", "c1", 32, True), ("C", "c2", 32, i < 2), ("C", "c3", 32, i == 3),
                 ("B", "b1", 32, False)]
    df = pd.DataFrame([("m", "none", f"p{i // 5}", g, pre, n, hit) for i, (g, pre, n, hit) in enumerate(rows)],
                      columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len", "target_hit"])
    out = rates.rate_summary(df).set_index("group")
    ci = binomtest(1, 4).proportion_ci(0.95, method="wilson")
    assert out.loc["A", "rate"] == pytest.approx(0.25) and out.loc["A", "resampled"] == "prompts"
    assert (out.loc["A", "ci_low"], out.loc["A", "ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    C = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0], [1, 0, 1]], dtype=float)
    rate, low, high = ri.crossed_rate_interval(C)
    assert out.loc["C", "rate"] == pytest.approx(7 / 12) == pytest.approx(rate)
    assert (out.loc["C", "ci_low"], out.loc["C", "ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert out.loc["C", "ci_method"].startswith("Wilson, crossed, ") and out.loc["C", "effective_units"] >= 3
    assert out.loc["B", "ci_low"] == 0 and out.loc["B", "ci_high"] == pytest.approx(Z ** 2 / (4 + Z ** 2))
    with pytest.raises(ValueError, match="the table has no target_hit column"):
        rates.rate_summary(df.drop(columns="target_hit"))


def test_the_effective_size_follows_the_crossed_variance():
    """Hits spread evenly (no clustering) are worth more units than hits stacked in one prefix."""
    spread = np.zeros((12, 12))
    spread[np.arange(12), np.arange(12)] = 1  # one hit per prompt and per prefix
    stacked = np.zeros((12, 12))
    stacked[:, 0] = 1  # every hit in one prefix
    (_, n_spread, _, v_spread), (_, n_stacked, _, _) = ri.effective_units(spread), ri.effective_units(stacked)
    assert n_spread > 5 * n_stacked and n_stacked == pytest.approx(12)
    assert float(v_spread) == pytest.approx(float(group_mean(spread).variance))


@pytest.mark.parametrize("hits", [[], [(0, 0)], [(0, 0), (1, 5), (2, 9), (3, 2), (4, 7), (5, 11)], [(p, 3) for p in range(6)]])
def test_the_printed_method_gives_the_interval_back(hits):
    """ci_method's effective units and degrees of freedom, as printed, rebuild the printed interval
    (Wilson at those units, t on those degrees of freedom, z where it names none), and it names the
    worst case exactly where the units are the scarcer factor's count."""
    Y = np.zeros((6, 12))
    for p, x in hits:
        Y[p, x] = 1
    df = pd.DataFrame([("m", "none", f"p{p}", "C", f"c{x}", 32, bool(Y[p, x])) for p in range(6) for x in range(12)],
                      columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len", "target_hit"])
    row = rates.rate_summary(df).iloc[0]
    found = re.fullmatch(r"Wilson, crossed, ([\d.]+) effective units( \(the worst case: all the variation between "
                         r"the 6 prompts\))?(, t on ([\d.]+) df)?", row.ci_method)
    assert found, row.ci_method
    units = float(found.group(1))
    q = sps.t.ppf(0.975, float(found.group(4))) if found.group(4) else sps.norm.ppf(0.975)
    low, high = ri.wilson(row.rate, units, q)
    assert (row.ci_low, row.ci_high) == (pytest.approx(float(low), rel=2e-3, abs=1e-6), pytest.approx(float(high), rel=2e-3))
    assert bool(found.group(2)) == (units == 6)


@pytest.mark.parametrize("regime, different", [
    (sim.Regime("prefixes cluster hits", prompt=0.0, interaction=0.0, resid=1.0, rate_b=0.02, gap=0.08), True),
    (sim.Regime("prefixes cluster hits", prompt=0.0, interaction=0.0, resid=1.0, rate_b=0.02, gap=0.08), False),
    (sim.Regime("prompts dominate", prefix_c=0.3, prefix_b=0.3, resid=1.0, rate_b=0.02, gap=0.08), True)])
def test_a_sparse_group_borrows_the_others_clustering_and_the_difference_still_covers(regime, different):
    """6 prompts x 24 prefixes, B at 2% and C at 10%: B has 0-1 hits in about half the tables. Its
    interval took the worst case there (every hit in one prompt), and the difference's test rejected
    in 7% of tables where it could in 47% (a normal test at the true SD). With B taking C's
    clustering, and a single hit at z as none, the test rejects in about 40%, and the interval still covers where prompts, not
    prefixes, carry the clustering (a sparse C then shows little of it)."""
    rng = np.random.default_rng(4)
    Y, hi, pairs, true = sim.draw(sim.Design("6 x 24", 6, 24), regime, different, 1500, rng)
    _, low, high = ri.rate_difference(Y, hi, pairs)
    assert np.mean((low <= true) & (true <= high)) >= 0.94
    assert max(np.mean(high < true), np.mean(low > true)) <= 0.035
    if different and regime.prompt == 0:
        assert np.mean(low > 0) >= 0.38  # 0.397 on these tables


def test_groups_of_different_sizes_borrow_clustering_within_their_own_bounds():
    """Pass 27 b38/b41 (silent): C of 6 prefixes and B of 3 over 3 prompts, no hit in either: the
    design effects were swapped (C's side worth 6 units where its 3 prompts allow 3, B's 1.5). With no
    hit anywhere each side is its own worst case, as each group's interval alone."""
    Y = np.zeros((3, 9))
    hi = np.arange(9) < 6
    _, low, high = ri.rate_difference(Y, hi)
    assert high == pytest.approx(ri.crossed_rate_interval(Y[:, hi])[2])
    assert low == pytest.approx(-ri.crossed_rate_interval(Y[:, ~hi])[2])
