"""Planning a design (harness.analysis.planning): each test's planned power at the pilot's own
design is the power the claims page prints, power grows with the design, and the cheapest design is
picked (or refused, with the reason) by hand-checkable rules."""

import numpy as np
import pandas as pd
import pytest

from harness.analysis import claims, planning
from tests.analysis.test_claims import attention_table, conditions_table


def pilot_tables():
    cond = conditions_table([0.30, 0.32, 0.40, 0.43], [0.25, 0.26, 0.27, 0.30], n_prefixes=8, seed=3)
    rng = np.random.default_rng(4)
    # each prefix shapes the length profile its own way: claim 2's contrasts have a prefix-level SD
    for col in ("attn_kl_mean", "norm_edit_distance"):
        shape = {(x, n): rng.normal(0, 0.03) for x in cond.prefix_id.unique() for n in cond.prefix_len.unique()}
        cond[col] = cond[col] + [shape[k] for k in zip(cond.prefix_id, cond.prefix_len)]
    cond["norm_edit_distance"] = cond.norm_edit_distance + rng.normal(0, 0.05, len(cond))
    att = attention_table([0.1, 0.2, 0.5, 0.4, 0.3, 0.2], n_prefixes=8, noise=0.05)
    # each prefix shapes the layer profile its own way: the contrasts have a prefix-level SD
    shape = {(x, layer): rng.normal(0, 0.05) for x in att.prefix_id.unique() for layer in att.layer.unique()}
    att["kl"] = att.kl + [shape[k] for k in zip(att.prefix_id, att.layer)]
    return cond, att


def test_power_at_the_pilot_design_is_the_power_the_claims_page_prints():
    cond, att = pilot_tables()
    printed = claims.seed_claims(cond, att, None, n_resamples=200)
    tests = planning.claim_tests(cond, att)
    assert {(t.claim, t.kind) for t in tests} >= {(1, "attention"), (2, "attention"), (2, "output"), (3, "attention"),
                                                  (3, "output")}
    for t in tests:
        measure = "attention kl (C vs A)" if t.claim == 1 else (t.measure if t.claim == 3 else f"{t.measure} (C vs A)")
        row = printed[(printed.claim == t.claim) & (printed.measure == measure)]
        assert len(row) == 1, (t.label, printed[["claim", "measure"]])
        assert 0 < t.power(*t.pilot) < 1, t.label
        assert t.power(*t.pilot) == pytest.approx(float(row.power.iloc[0]), rel=1e-9), t.label


def test_the_range_at_the_pilot_design_is_the_range_the_claims_page_prints_and_it_moves_with_the_design():
    """Issue 65: the plan printed a chosen design's power as a point; each test's range at a design is
    the claims page's range where that design is the pilot's, and a larger design's range lies above."""
    cond, att = pilot_tables()
    printed = claims.seed_claims(cond, att, None, n_resamples=200)
    for t in planning.claim_tests(cond, att):
        measure = "attention kl (C vs A)" if t.claim == 1 else (t.measure if t.claim == 3 else f"{t.measure} (C vs A)")
        row = printed[(printed.claim == t.claim) & (printed.measure == measure)].iloc[0]
        low, high = t.power_range(*t.pilot)
        assert (low, high) == pytest.approx((row.power_low, row.power_high), rel=1e-9), t.label
        bigger = t.power_range(t.pilot[0] * 4, t.pilot[1] * 2)
        assert bigger[0] >= low - 1e-12 and bigger[1] >= high - 1e-12 and bigger[0] <= bigger[1], t.label
    assert all(t.power_range is None for t in planning.claim_tests(cond, att, effect_sds=1.0))


def test_power_grows_with_prompts_and_prefixes_and_a_larger_effect():
    cond, att = pilot_tables()
    small, large = planning.claim_tests(cond, att), planning.claim_tests(cond, att, effect_sds=2.0)
    for t, t2 in zip(small, large):
        assert t.power(6, 8) <= t.power(12, 8) + 1e-12 <= t.power(24, 8) + 2e-12, t.label
        assert t.power(6, 8) <= t.power(6, 16) + 1e-12, t.label
        assert t.power(6, 8) <= t2.power(6, 8) + 1e-12, t.label


def hand_tests():
    """Two tests whose power is a hand-made function of the design: attention needs 10 prompts x
    4 prefixes-equivalent, output twice as much."""
    def att(p, n):
        return min(1.0, p * n / 40)

    def out(p, n):
        return min(1.0, p * n / 80)
    return [planning.PlannedTest(3, "attn_kl_mean", planning.ATTENTION, {"model": "m"}, (4, 4), att),
            planning.PlannedTest(3, "norm_edit_distance", planning.OUTPUT, {"model": "m"}, (4, 4), out)]


def test_the_cheapest_design_reaching_the_target_is_chosen():
    grid = planning.power_grid(hand_tests(), range(4, 21), range(2, 11), cost=lambda p, n: p * (1 + 2 * n))
    best, why = planning.cheapest(grid, "attention", 0.8)
    # by hand: p * n >= 32 at the least p * (1 + 2n); enumerate to check
    options = [(p * (1 + 2 * n), p, n) for p in range(4, 21) for n in range(2, 11) if p * n >= 32]
    cost, p, n = min(options)
    assert why == "" and (best.n_prompts, best.n_prefixes, best.seconds) == (p, n, cost)
    best_all, _ = planning.cheapest(grid, "all", 0.8)
    assert best_all.n_prompts * best_all.n_prefixes >= 64 and best_all.seconds > best.seconds


def test_no_design_or_no_budget_says_why():
    grid = planning.power_grid(hand_tests(), range(4, 6), range(2, 4), cost=lambda p, n: 60.0 * p * n)
    best, why = planning.cheapest(grid, "all", 0.8)
    assert best is None and "no design searched reaches power 0.8" in why and "best reaches 0.19 at 5 prompts x 3" in why  # 15 / 80
    grid = planning.power_grid(hand_tests(), range(4, 21), range(2, 11), cost=lambda p, n: 60.0 * p * n)
    best, why = planning.cheapest(grid, "attention", 0.8, budget_seconds=60.0 * 20)
    assert best is None and "none fits the budget of 20 min" in why and "costs 32.0 min" in why


def test_a_test_without_a_power_does_not_hold_a_design_back():
    tests = [*hand_tests(), planning.PlannedTest(1, "attention kl", planning.ATTENTION, {}, (4, 4),
                                                 lambda p, n: float("nan"))]
    grid = planning.power_grid(tests, range(4, 21), range(2, 11), cost=lambda p, n: p * n)
    assert pd.notna(grid.min_power_attention).all()
    assert planning.cheapest(grid, "attention", 0.8)[0] is not None


def test_within_a_budget_the_design_reaching_the_most_tests_is_chosen():
    tests = hand_tests()
    grid = planning.power_grid(tests, range(4, 21), range(2, 11), cost=lambda p, n: float(p * n))
    # attention reaches 0.8 at p * n >= 32, output at >= 64: a budget of 40 affords the first only
    best = planning.most_reached(grid, tests, 0.8, budget_seconds=40)
    assert best.seconds <= 40 and best[tests[0].label] >= 0.8 > best[tests[1].label]
    # among designs reaching the attention test, the one with the most power on the other
    affordable = grid[grid.seconds <= 40]
    assert best[tests[1].label] == affordable[tests[1].label].max()
    assert planning.most_reached(grid, tests, 0.8, budget_seconds=1) is None


def test_prompts_needed_is_the_fewest_that_reach_the_target():
    att, out = hand_tests()
    # attention: p * n / 40 >= 0.8 at n = 4 needs p >= 8; output (p * n / 80) needs 16
    assert planning.prompts_needed(att, 4, 0.8, start=4) == 8
    assert planning.prompts_needed(out, 4, 0.8, start=4) == 16
    assert planning.prompts_needed(out, 4, 0.8, start=4, limit=10) is None


def test_a_measures_c_minus_b_tests_are_the_reports_rows_with_the_power_it_prints():
    """Issue 65, item 3: ``harness plan --measure M`` plans the report's C - B on M: one test per row of
    its C - B table (here one per prefix length), whose power and range at the pilot's own design are
    what that row prints at Δ, and which grow with the design."""
    from harness.analysis.crossed import compare_groups

    cond, _ = pilot_tables()
    delta = 0.02
    tests = planning.lead_tests(cond, ["norm_edit_distance", "attn_kl_mean"], deltas={"norm_edit_distance": delta})
    printed = {m: compare_groups(cond, m, effect=d, n_resamples=50, n_permutations=50).set_index("prefix_len")
               for m, d in (("norm_edit_distance", delta), ("attn_kl_mean", 0.05))}
    assert sorted((t.measure, t.cell["prefix_len"]) for t in tests) == sorted(
        (m, n) for m in printed for n in printed[m].index)
    for t in tests:
        row = printed[t.measure].loc[t.cell["prefix_len"]]
        assert t.claim is None and t.label.startswith("C - B, " + t.measure)
        assert t.kind == (planning.ATTENTION if t.measure == "attn_kl_mean" else planning.OUTPUT)
        assert t.power(*t.pilot) == pytest.approx(float(row.power), rel=1e-9), t.label
        assert t.power_range(*t.pilot) == pytest.approx((row.power_low, row.power_high), rel=1e-9), t.label
        assert t.power(*t.pilot) <= t.power(t.pilot[0] * 3, t.pilot[1]) + 1e-12
    # in prefix-level SDs: one SD of each row's own, and no range
    in_sds = planning.lead_tests(cond, ["norm_edit_distance"], effect_sds=1.0)
    for t in in_sds:
        row = compare_groups(cond, "norm_edit_distance", n_resamples=50, n_permutations=50).set_index(
            "prefix_len").loc[t.cell["prefix_len"]]
        assert t.power(*t.pilot) == pytest.approx(float(row.power), rel=1e-9) and t.power_range is None


def test_a_design_is_chosen_by_the_power_at_the_plans_assurance():
    """Issue 65, item 3: with an assurance each test's planned power takes the pilot's prompt mean
    square at its upper bound: at most its point power, equal at 0.5, and the grid holds it."""
    cond, att = pilot_tables()
    point = planning.claim_tests(cond, att)
    assert all(t.assured is None and t.planned(6, 8) == t.power(6, 8) for t in point)
    for a in (0.5, 0.9):
        tests = planning.claim_tests(cond, att, assurance=a)
        assert [t.label for t in tests] == [t.label for t in point]
        for t in tests:
            for design in ((4, 8), (12, 8), (24, 16)):
                if a == 0.5:
                    assert t.assured(*design) == pytest.approx(t.power(*design), rel=1e-12), t.label
                else:
                    assert t.assured(*design) <= t.power(*design) + 1e-12, t.label
        grid = planning.power_grid(tests, [4, 12], [8], cost=lambda p, n: float(p * n))
        for t in tests:
            assert grid[t.label].tolist() == pytest.approx([t.planned(4, 8), t.planned(12, 8)], rel=1e-12)
    strict = planning.claim_tests(cond, att, assurance=0.9)
    assert any(t.assured(4, 8) < t.power(4, 8) - 0.01 for t in strict)


def test_a_plan_for_decisions_takes_every_tests_chance_undecided_together():
    """Issue 65, item 3: planned for "decided", each test's column is its chance of ending decided at
    the least favourable truth, and every test together at least 1 minus the sum of their chances
    undecided (by hand on the grid); that chance grows with the design."""
    cond, att = pilot_tables()
    tests = planning.claim_tests(cond, att, assurance=0.85)
    assert all(t.decided is not None for t in tests)
    grid = planning.power_grid(tests, [4, 12, 48], [8, 32], cost=lambda p, n: float(p * n), plan_for="decided")
    labels = [t.label for t in tests]
    by_hand = np.maximum(1 - (1 - grid[labels]).sum(axis=1), 0)
    assert grid.decided_all.tolist() == pytest.approx(by_hand.tolist())
    for t in tests:
        small, large = t.planned(4, 8, "decided"), t.planned(48, 32, "decided")
        assert 0 <= small <= large + 1e-9 <= 1 + 1e-9, t.label
    best, why = planning.cheapest(grid, "all", 0.5, plan_for="decided")
    reach = grid[grid.decided_all >= 0.5]
    assert (best is None) == reach.empty
    if best is not None:
        assert best.seconds == reach.seconds.min()
    else:
        assert "decides with a chance of 0.5 every test" in why


def test_a_lead_tests_chance_decided_is_its_undecided_complement_at_the_planned_variance():
    """The C - B row's chance (two-sided, as the report decides) is 1 - undecided at the planned
    variance and degrees of freedom of its components at the plan's assurance."""
    from harness.analysis.decided import undecided
    from harness.analysis.power import planned_variance

    cond, _ = pilot_tables()
    for t in planning.lead_tests(cond, ["norm_edit_distance"], assurance=0.85):
        comps = planning.variance_components(cond, "norm_edit_distance").set_index("prefix_len").loc[
            t.cell["prefix_len"]].to_dict()
        variance, dof = map(float, planned_variance(comps, 12, 10, 0.85))
        assert t.decided(12, 10) == pytest.approx(1 - undecided(variance, dof, 0.05, two_sided=True), rel=1e-12)


def test_a_tests_chance_of_a_verdict_has_a_range_that_holds_its_point():
    """Issue 65 ("every prediction with its range"): each test's chance of ending decided at a design
    comes with the range it takes over the corners of its components' 95% intervals, which holds the
    chance at the components' point; more units move the whole range up."""
    cond, att = pilot_tables()
    tests = planning.claim_tests(cond, att, assurance=0.5) + planning.lead_tests(cond, ["norm_edit_distance"],
                                                                                 assurance=0.5)
    assert tests and all(t.decided_range is not None for t in tests)
    for t in tests:
        for design in ((6, 8), (24, 16)):
            low, high = t.decided_range(*design)
            assert 0 <= low <= t.decided(*design) + 1e-9 and t.decided(*design) <= high + 1e-9 <= 1 + 1e-9, t.label
        assert t.decided_range(96, 32)[0] >= t.decided_range(6, 8)[0] - 1e-9, t.label
    assert all(t.decided_range is None for t in planning.claim_tests(cond, att, effect_sds=1.0, assurance=0.5))
