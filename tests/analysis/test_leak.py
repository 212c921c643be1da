"""The timing side channel's statistics (harness.analysis.leak) against scipy, a hand example and
simulation, and the experiment's loop (harness.runs.cache_timing) on a stand-in engine whose cache
and clock are synthetic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.analysis.leak import auroc, auroc_interval, power_against
from harness.model.vllm_backend import Generated
from harness.reporting.leak import write_leak_outputs
from harness.runs.cache_timing import leak_of, run_experiment, run_trials


def test_auroc_is_the_share_of_pairs_where_fresh_is_slower():
    fresh, cached = np.array([3.0, 5.0, 1.0]), np.array([2.0, 1.0])
    # pairs (f > c): 3>2, 3>1, 5>2, 5>1, 1=1 counts half, 1<2 -> 4.5 of 6
    assert auroc(fresh, cached) == pytest.approx(4.5 / 6)
    assert auroc(fresh, cached) == pytest.approx(stats.mannwhitneyu(fresh, cached).statistic / 6)


@given(st.floats(0, 1), st.integers(2, 300), st.integers(2, 300))
@settings(max_examples=200, deadline=None)
def test_the_interval_holds_its_estimate_within_0_1_and_never_collapses(a, m, n):
    lo, hi = auroc_interval(a, m, n)
    assert 0 <= lo <= a <= hi <= 1
    assert hi - lo > 0  # a perfect separation keeps a width (never [1, 1])


def test_the_interval_narrows_with_more_trials():
    widths = [np.subtract(*auroc_interval(0.8, n, n)[::-1]) for n in (10, 40, 160)]
    assert widths[0] > widths[1] > widths[2]


@pytest.mark.parametrize("shift", [0.0, 0.8, 2.5])
def test_the_interval_covers_in_simulation(shift):
    """1,000 data sets of 100 + 100 normal times: the interval covers the true AUROC
    (Phi(shift / sqrt 2)) 0.93-0.985 of the time (Newcombe's method errs wide near 1)."""
    rng = np.random.default_rng(1)
    truth = stats.norm.cdf(shift / np.sqrt(2))
    hits = 0
    for _ in range(1000):
        a = auroc(rng.normal(shift, 1, 100), rng.normal(0, 1, 100))
        lo, hi = auroc_interval(a, 100, 100)
        hits += lo <= truth <= hi
    assert 0.93 <= hits / 1000 <= 0.985


def test_printed_power_matches_simulated_power():
    """Power against an AUROC of 0.6 at 100 + 100, printed against the simulated rejection rate."""
    rng = np.random.default_rng(2)
    shift = stats.norm.ppf(0.6) * np.sqrt(2)
    rejected = 0
    for _ in range(1000):
        a = auroc(rng.normal(shift, 1, 100), rng.normal(0, 1, 100))
        lo, hi = auroc_interval(a, 100, 100)
        rejected += not (lo <= 0.5 <= hi)
    assert power_against(0.6, 100, 100) == pytest.approx(rejected / 1000, abs=0.05)


class StandInEngine:
    """A prefix cache of whole 16-token blocks per salt, and a clock: 1 ms per token computed,
    0.1 ms per token served from the cache, with multiplicative noise."""

    def __init__(self, seed=0):
        self.cache: set = set()
        self.rng = np.random.default_rng(seed)

    def probe(self, ids, salt=None):
        cached = 0
        for end in range(16, len(ids) + 1, 16):
            block = (salt, tuple(ids[:end]))
            if block not in self.cache:
                break
            cached = end
        for end in range(16, len(ids) + 1, 16):
            self.cache.add((salt, tuple(ids[:end])))
        seconds = (0.001 * (len(ids) - cached) + 0.0001 * cached) * self.rng.lognormal(0, 0.3)
        return seconds, cached

    def generate(self, prompts, max_tokens, stops):
        return [Generated(tuple(p[-max_tokens:]), False, (1.0,)) for p in prompts], 0.0

    def reset_cache(self):
        self.cache.clear()


def test_the_experiment_finds_the_leak_and_that_salts_close_it(tmp_path):
    trials, invariant = run_trials(StandInEngine(), vocab=5000, lengths=[64, 256], trials=60,
                                   settings=["none", "same_salt", "different_salts"])
    assert len(trials) == 2 * 2 * 3 * 60 and set(trials.candidate) == {"cached", "fresh"}
    assert invariant == {"compared": 120, "identical": 120}
    leak = leak_of(trials)
    write_leak_outputs(tmp_path, leak, invariant, {"vllm": "stand-in", "dtype": "float32", "model": "m",
                                                   "trials": 60, "block_size": 16})
    leak = leak.set_index(["setting", "prefix_len"])
    for length in (64, 256):
        assert leak.loc[("none", length), "auroc_lo"] > 0.95  # the victim's blocks serve the attacker
        assert leak.loc[("same_salt", length), "auroc_lo"] > 0.95
        assert leak.loc[("different_salts", length), "holds_half"]  # nothing shared: no leak
        assert leak.loc[("different_salts", length), "cached_share_cached"] == 0
    assert {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.*")} == {
        "leak.md", "figures/fig_leak.png", "figures/fig_leak.pdf"}
    page = (tmp_path / "leak.md").read_text()
    assert "different_salts" in page and page.count("\n| different_salts |") == 2 and "blocks of 16 tokens" in page


def test_a_tenant_with_its_own_engine_learns_nothing_from_another_s_cache(tmp_path):
    trials, invariant = run_trials(StandInEngine(seed=1), vocab=5000, lengths=[64, 256], trials=60,
                                   settings=["none", "per_tenant_cache"], own_engine=StandInEngine(seed=2),
                                   switch_pause_s=0)
    leak = leak_of(trials).set_index(["setting", "prefix_len"])
    for length in (64, 256):
        assert leak.loc[("none", length), "auroc_lo"] > 0.95
        assert leak.loc[("per_tenant_cache", length), "holds_half"]
        assert leak.loc[("per_tenant_cache", length), "cached_share_cached"] == 0
    with pytest.raises(ValueError, match="own engine"):
        run_trials(StandInEngine(), vocab=5000, lengths=[16], trials=2, settings=["per_tenant_cache"])


class DrowsyEngine(StandInEngine):
    """A stand-in that answers its first request after another engine was used 0.2 s late, as a
    vLLM engine that idled for a moment does."""

    last = [None]

    def probe(self, ids, salt=None):
        seconds, cached = super().probe(ids, salt)
        woke = DrowsyEngine.last[0] is not self
        DrowsyEngine.last[0] = self
        return seconds + (0.2 if woke else 0.0), cached


def test_timed_probes_never_pay_an_engine_s_wake_up():
    victim, attacker = DrowsyEngine(seed=1), DrowsyEngine(seed=2)
    trials, _ = run_trials(victim, vocab=5000, lengths=[64], trials=20, settings=["per_tenant_cache", "none"],
                           own_engine=attacker, switch_pause_s=0, invariant_tokens=0)
    assert trials.seconds.max() < 0.2  # the untimed wake-up request took the delay, not a candidate


def test_the_command_s_experiment_opens_a_second_engine_only_after_the_shared_settings():
    import contextlib

    opened, engines = [], [StandInEngine(seed=1), StandInEngine(seed=2)]

    def open_engine():
        engine = engines[len(opened)]
        engine.vllm_version, engine.dtype = "stand-in", "float32"
        opened.append(engine)
        return contextlib.nullcontext(engine)

    seen = []
    trials, invariant, facts = run_experiment(
        open_engine, vocab=5000, lengths=[64], trials=5, settings=["per_tenant_cache", "none", "different_salts"],
        progress=lambda done, total: seen.append(done))
    assert len(opened) == 2 and facts == {"vllm": "stand-in", "dtype": "float32"}
    by_order = trials.sort_values("order")
    assert set(by_order.setting[:20]) == {"none", "different_salts"} and set(by_order.setting[20:]) == {"per_tenant_cache"}
    assert sorted(trials.order.unique()) == list(range(15)) and seen[-1] == 15
    assert invariant == {"compared": 5, "identical": 5}


def test_trials_interleave_cells_in_random_order():
    trials, _ = run_trials(StandInEngine(), vocab=5000, lengths=[16, 32], trials=5, settings=["none", "same_salt"],
                           invariant_tokens=0)
    first_cells = trials.sort_values("order").drop_duplicates("order").head(6)[["setting", "prefix_len"]]
    assert len(first_cells.drop_duplicates()) > 1
