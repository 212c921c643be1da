"""How much a serving engine's prefix cache tells another tenant: the timing side channel's statistics.

A trial of :mod:`harness.runs.cache_timing` gives two probe times for one prefix length and one
isolation setting: a candidate another tenant's request cached, and a fresh one. The leak is how
well the time tells them apart: the AUROC of "the fresh candidate is slower", P(fresh > cached)
with ties counted half (the Mann-Whitney U over n_cached x n_fresh), 0.5 when the cache says
nothing. Its interval is Newcombe's score interval (method 5 of Newcombe 2006, *Statistics in
Medicine* 25:559): the Hanley-McNeil variance evaluated at each candidate value rather than at the
estimate, so it keeps its width at a perfect separation (never [1, 1]) and stays within [0, 1].
A null (an interval holding 0.5) states the power the design had to detect an AUROC of 0.6.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize, stats

# P(a fresh probe is slower than a cached one), ties counted half: the detectors' AUROC, fresh as positives
from harness.analysis.causal_heads import auroc

Z95 = float(stats.norm.ppf(0.975))


def _score_variance(theta: float, m: int, n: int) -> float:
    """Hanley-McNeil's variance of an AUROC of ``theta`` from m and n observations, with Newcombe's
    N* = (m + n) / 2 - 1 for both group sizes."""
    star = (m + n) / 2 - 1
    return theta * (1 - theta) / (m * n) * (1 + star * ((1 - theta) / (2 - theta) + theta / (1 + theta)))


def auroc_interval(estimate: float, m: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's score interval for an AUROC from m fresh and n cached probes (module docstring)."""
    if not (m and n) or np.isnan(estimate):
        return float("nan"), float("nan")

    def gap(theta: float) -> float:
        return (estimate - theta) ** 2 - z * z * _score_variance(theta, m, n)

    # gap <= 0 at the estimate and grows away from it; an estimate of 0 or 1 keeps its own end
    # (the variance vanishes there), the other end is the root (never the estimate itself)
    inner_lo, inner_hi = min(estimate, 1 - 1e-9), max(estimate, 1e-9)
    lo = 0.0 if estimate <= 0 or gap(0.0) <= 0 else optimize.brentq(gap, 0.0, inner_lo)
    hi = 1.0 if estimate >= 1 or gap(1.0) <= 0 else optimize.brentq(gap, inner_hi, 1.0)
    return float(lo), float(hi)


def power_against(effect: float, m: int, n: int, z: float = Z95) -> float:
    """The power of the two-sided test of AUROC = 0.5 at this design against a true AUROC ``effect``
    (normal approximation with the Hanley-McNeil variances under the null and under ``effect``)."""
    se0, se1 = np.sqrt(_score_variance(0.5, m, n)), np.sqrt(_score_variance(effect, m, n))
    shift = abs(effect - 0.5)
    return float(stats.norm.sf((z * se0 - shift) / se1) + stats.norm.cdf((-z * se0 - shift) / se1))


def leak_table(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per setting and prefix length of ``trials`` (columns ``setting``, ``prefix_len``,
    ``candidate`` in {cached, fresh}, ``seconds``, ``cached_share``): the probes' median seconds,
    the mean share of the prompt served from the cache, the AUROC with its interval, whether the
    interval holds 0.5, and the power against an AUROC of 0.6."""
    rows = []
    for (setting, length), cell in trials.groupby(["setting", "prefix_len"], sort=False):
        fresh = cell.loc[cell.candidate == "fresh", "seconds"].to_numpy()
        cached = cell.loc[cell.candidate == "cached", "seconds"].to_numpy()
        a = auroc(fresh, cached)
        lo, hi = auroc_interval(a, len(fresh), len(cached))
        rows.append({"setting": setting, "prefix_len": int(length), "trials": min(len(fresh), len(cached)),
                     "median_s_cached": float(np.median(cached)), "median_s_fresh": float(np.median(fresh)),
                     "cached_share_cached": float(cell.loc[cell.candidate == "cached", "cached_share"].mean()),
                     "cached_share_fresh": float(cell.loc[cell.candidate == "fresh", "cached_share"].mean()),
                     "auroc": a, "auroc_lo": lo, "auroc_hi": hi, "holds_half": bool(lo <= 0.5 <= hi),
                     "power_at_0_6": power_against(0.6, len(fresh), len(cached))})
    return pd.DataFrame(rows)
