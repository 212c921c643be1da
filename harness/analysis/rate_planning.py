"""Planning the report's C - B test on a *rate* (:data:`PLANNED_RATES`: ``target_hit``) from a pilot: what
``harness plan --measure target_hit`` plans for (DataFrames in, :class:`~harness.analysis.planning.PlannedTest` s out).

A rate's test is not a t test (MOVER of crossed Wilson intervals, :mod:`harness.analysis.rate_intervals`),
and where hits are sparse it rejects far less often than a t test on the same variance would, so its
power at a design is simulated, as the report's is (:mod:`harness.analysis.rate_power`): the pilot's
latent crossed model (each group's prompt and prefix shares, what ties C to B, B's rate) draws
:data:`SIMULATIONS` tables of ``prompts x prefixes per group``, C moved from B by Δ (percentage points),
and the share whose 95% interval leaves out 0 is the power.

*Assured* (what a design is chosen by, as for measures): each group's prompt and prefix components
taken at the upper bound of their ``2 * assurance - 1`` interval (more clustering, a noisier rate; on
the kurtosis-aware degrees of freedom a few hits leave them), the ties between C and B and B's rate at
the pilot's point. In simulation (``benchmarks/crossed_calibration.py --part rate-promise``, table 2e:
60 pilots of 6 x 24 per regime, B 2%, C 10%, Δ 0.08, three sparse regimes) plans on the point fit were
optimistic (the real power, or chance of a verdict, 0.01-0.22 below the promise on average, its 10th
percentile 0.36-0.74);
every input at its bound (the ties low, B's rate at its high end too) found no design up to 96 x 96
for most pilots; these bounds kept the promise (the real power or chance of a verdict 0.84-0.99 on
average against 0.83-0.85 promised, its 10th percentile 0.70-0.95) at 2.3-4 times the point plan's
conditions.

*Decided*: the share of tables, drawn at the assured shares with the truth at Δ/2 (the least
favourable truth of :mod:`harness.analysis.decided`), whose interval is supported, contradicted or
within -Δ to Δ (:func:`harness.analysis.verdicts.decide`, two-sided).

Each design's numbers are computed once (a cache per test) and seeded, so the same pilot always plans
the same design; each is a share of :data:`SIMULATIONS` tables, with a Monte Carlo error of at most
0.5 / sqrt(SIMULATIONS) = 0.025.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from harness.analysis.crossed_variance import MIN_PREFIXES, MIN_PROMPTS, group_component_limits
from harness.analysis.descriptive import CONTRAST_BY, present_columns, with_settings
from harness.analysis.obeying import roles
from harness.analysis.planning import OUTPUT, PlannedTest, lead_tables
from harness.analysis.rate_power import (
    assemble_shares,
    fit_shares,
    normals_for,
    own_shares,
    simulated_intervals,
)
from harness.analysis.verdicts import deltas_for

SIMULATIONS = 400
ALPHA = 0.05
# the rates whose C - B a plan can plan for: ``obeyed`` is measured in group C alone (a B prefix asks for nothing)
PLANNED_RATES = ("target_hit",)


def assured_shares(Y: np.ndarray, is_high: np.ndarray, pairs, assurance: float) -> tuple[dict[str, float], float]:
    """``(shares, rate_low)``: a pilot's latent shares with each group's prompt and prefix components at
    the upper bound of their ``2 * assurance - 1`` interval, and B's rate (module docstring)."""
    confidence = 2 * assurance - 1
    high, low = (group_component_limits(G, confidence, heavy_tails=True) for G in (Y[:, is_high], Y[:, ~is_high]))
    own, informative = own_shares(Y, is_high, pairs, (high["prompt"][1], low["prompt"][1]),
                                  (high["prefix"][1], low["prefix"][1]))
    return {k: float(v) for k, v in assemble_shares(own, informative).items()}, float(Y[:, ~is_high].mean())


def design_layout(n_prefixes: int, paired: bool) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """``(is_high, pairs)`` of a design with ``n_prefixes`` per group: C's first, then B's, matched
    one to one where the pilot's prefixes were."""
    is_high = np.r_[np.ones(n_prefixes, bool), np.zeros(n_prefixes, bool)]
    pairs = (np.arange(n_prefixes), np.arange(n_prefixes) + n_prefixes) if paired else None
    return is_high, pairs


def design_chance(shares: dict, rate_low: float, truth: float, delta: float, p: int, n: int, paired: bool,
                  decided: bool, seed: int) -> float:
    """The share of :data:`SIMULATIONS` tables of ``p`` prompts x ``n`` prefixes per group, drawn from
    latent ``shares`` with B at ``rate_low`` and C at ``rate_low + truth``, whose 95% interval of C - B
    leaves out 0 (or, ``decided``, ends decided at ``delta``): a power, or a chance of a verdict."""
    is_high, pairs = design_layout(n, paired)
    normals = normals_for((), SIMULATIONS, p, is_high, pairs, np.random.default_rng(seed))
    low, high = simulated_intervals(shares, rate_low, truth, is_high, pairs, normals, ALPHA)
    ends = (low > 0) | (high < 0)
    if decided:
        ends |= (high < delta) & (low > -delta)
    return float(ends.mean())


def rate_tests(conditions: pd.DataFrame, measures: Sequence[str], deltas: dict[str, float] | None = None,
               by: Sequence[str] = CONTRAST_BY, assurance: float | None = None, seed: int = 0
               ) -> tuple[list[PlannedTest], list[str]]:
    """The report's C - B test of each rate of ``measures`` per ``by`` cell, planned at its Δ (the
    registry's 5 percentage points, with ``deltas`` on top), and why any cell could not be: ``(tests,
    reasons)``. ``assurance``: each test's :attr:`PlannedTest.assured` power and its chance decided
    at the assured shares (None: both at the point fit)."""
    delta = deltas_for(deltas)
    by = present_columns(with_settings(conditions), by)
    tests, reasons = [], []
    for value in measures:
        if value == "target_hit" and (roles(conditions) == "forbidden").any():  # as the report leaves it out
            reasons.append("target_hit: group C holds prefixes that ask for the word and prefixes that forbid it, "
                           "so C - B would mix them (the report leaves it out too; its \"Obeying or copying?\" "
                           "section reads each role against B)")
            continue
        empty = [g for g in ("B", "C") if not conditions.loc[conditions.group.astype(str) == g, value].notna().any()]
        if empty:  # no crossing to speak of: say what is missing, not that the pilot is small
            reasons.append(f"{value} has no value in group {' or '.join(empty)} (its prefixes carry no target, or "
                           f"the run decoded nothing: decode.path=none)")
            continue
        rows = conditions.assign(**{value: conditions[value].astype("Float64").astype(float)})
        d = float(delta.get(value, np.nan))
        for key, (Y, is_high, pairs) in lead_tables(rows, value, by).items():
            cell = dict(zip(by, key))
            where = ", ".join(str(v) for v in key)
            n_low = int((~is_high).sum())
            if Y.size == 0:  # a run of the set whose prefixes name no target: nothing of this cell to cross
                reasons.append(f"{value} ({where}) has no value in B and C together (its prefixes carry no target, "
                               f"or the run decoded nothing)")
                continue
            if Y.shape[0] < MIN_PROMPTS or min(int(is_high.sum()), n_low) < MIN_PREFIXES:
                reasons.append(f"{value} ({where}): a complete crossing of {Y.shape[0]} prompt(s) x "
                               f"{min(int(is_high.sum()), n_low)} prefix(es) per group; a pilot needs at least "
                               f"{MIN_PROMPTS} x {MIN_PREFIXES}")
                continue
            hits = Y.sum()
            if hits == 0 or hits == Y.size:
                reasons.append(f"{value} ({where}): {'no B or C condition' if hits == 0 else 'every B and C condition'}"
                               f" of the pilot hit, which says nothing of how hits cluster")
                continue
            paired = pairs is not None
            point = ({k: float(v) for k, v in fit_shares(Y, is_high, pairs).items()}, float(Y[:, ~is_high].mean()))
            # at 0.5 a plan is on the point fit, as for measures (its bounds would be the median-unbiased ones)
            hard = assured_shares(Y, is_high, pairs, assurance) if assurance is not None and assurance > 0.5 else point
            tests.append(PlannedTest(
                None, value, OUTPUT, cell, (int(Y.shape[0]), min(int(is_high.sum()), n_low)),
                _cached(point, d, d, paired, False, seed), None,
                None if assurance is None else _cached(hard, d, d, paired, False, seed),
                _cached(hard, d / 2, d, paired, True, seed)))
    return tests, reasons


def _cached(fit: tuple[dict, float], truth: float, delta: float, paired: bool, decided: bool, seed: int):
    shares, rate_low = fit

    @lru_cache(maxsize=None)
    def at(p: int, n: int) -> float:
        if not (np.isfinite(delta) and delta > 0):
            return np.nan
        return design_chance(shares, rate_low, truth, delta, int(p), int(n), paired, decided, seed)

    return at
