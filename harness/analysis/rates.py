"""Behavioural rates (a hit rate such as ``target_hit``) with intervals that treat prompts and
prefixes as crossed random factors."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.crossed import cell_means
from harness.analysis.descriptive import CONFIDENCE, GROUP_BY, present_columns, with_settings

CLOPPER_PEARSON = "Clopper-Pearson"  # how rate_summary's ci_method names its interval


def effective_units(n_prompts: int, n_prefixes: int | None) -> int:
    """The number of independent units a crossed hit rate is worth at least: prompts or prefixes,
    whichever are fewer (prompts alone without prefixes).

    Why: with prompt effects, prefix effects and a residual whose variances sum to p(1 - p), the
    variance of the mean over P prompts x K prefixes is var_a/P + var_b/K + var_e/(PK), which is at
    most p(1 - p)/min(P, K) however the variance is split."""
    return n_prompts if not n_prefixes else min(n_prompts, n_prefixes)


def rate_interval(rate: float, n_units: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Clopper-Pearson interval for a rate worth ``n_units`` independent units: the beta quantiles at
    ``x = rate * n_units`` hits (fractional where the rate is a mean over a crossing).

    One method for every count, monotone in the rate, within [0, 1] (ends rounded to 1e-9);
    conservative for a crossed rate (:func:`effective_units`)."""
    from scipy.stats import beta

    alpha = 1 - confidence
    x = rate * n_units
    low = 0.0 if x <= 0 else float(beta.ppf(alpha / 2, x, n_units - x + 1))
    high = 1.0 if x >= n_units else float(beta.ppf(1 - alpha / 2, x + 1, n_units - x))
    # a fractional count near zero gives ends like 3e-21: zero to any precision a rate is read at
    return round(low, 9), round(high, 9)


def rate_summary(conditions: pd.DataFrame, hit: str = "target_hit", by: Sequence[str] = GROUP_BY,
                 confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Hit rate (e.g. ``target_hit``) per group and length with a 95% interval.

    ``rate`` is the mean over prefixes of each prefix's hit rate over prompts (with a complete
    crossing: the share of conditions that hit). Prompts and prefixes are both random
    (``resampled="prompts x prefixes"``: the claim about such prefixes in general) for groups with
    prefixes, prompts only for A (``"prompts"``: its base rate). Rows whose ``hit`` is null are left
    out; an absent ``hit`` column gives an empty table.

    The interval is :func:`rate_interval` at :func:`effective_units` (the scarcer factor's count),
    the same method for no hit, a few hits and many, so it never narrows as hits are added to an
    empty cell (the percentile bootstrap it replaces gave [0, 0.042] for 1 hit in 144 and [0, 0.265]
    for none). Simulated coverage: ``benchmarks/crossed_calibration.py``. ``ci_method`` names it
    with its unit count.

    Columns: by..., rate, ci_low, ci_high, n_hits, n_conditions, n_prompts, n_prefixes, resampled,
    ci_method.
    """
    df = with_settings(conditions)
    by = present_columns(df, by)
    columns = by + ["rate", "ci_low", "ci_high", "n_hits", "n_conditions", "n_prompts", "n_prefixes", "resampled",
                    "ci_method"]
    if hit not in df.columns:
        return pd.DataFrame(columns=columns)
    df = df[df[hit].notna()].assign(_hit=lambda d: d[hit].astype(float))
    if df.empty:
        return pd.DataFrame(columns=columns)
    units = cell_means(df, "_hit", by)
    counts = (df.groupby(by, observed=True, sort=True)["_hit"].agg(["sum", "size"]) if by else
              pd.DataFrame({"sum": [df["_hit"].sum()], "size": [len(df)]}, index=[()]))
    rows = []
    groups = units.groupby(by, observed=True, sort=True) if by else [((), units)]
    for key, cell in groups:
        n_hits, n_conditions = counts.loc[key] if by else counts.iloc[0]
        key = key if isinstance(key, tuple) else (key,)
        p_codes, prompts = pd.factorize(cell["prompt_id"].astype(object), sort=True)
        with_prefix = cell["prefix_id"].notna().any()
        k_codes, prefixes = pd.factorize(cell["prefix_id"].astype(object), sort=True, use_na_sentinel=False)
        Y = np.full((len(prompts), len(prefixes)), np.nan)
        Y[p_codes, k_codes] = cell["_hit"].to_numpy(dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rate = float(np.nanmean(np.nanmean(Y, axis=0)))
        n_prefixes = int(cell["prefix_id"].nunique())
        n_units = effective_units(len(prompts), n_prefixes if with_prefix else None)
        low, high = rate_interval(rate, n_units, confidence)
        method = f"{CLOPPER_PEARSON}, {n_units} units"
        rows.append({**dict(zip(by, key)), "rate": rate, "ci_low": low, "ci_high": high,
                     "n_hits": int(n_hits), "n_conditions": int(n_conditions), "n_prompts": len(prompts),
                     "n_prefixes": n_prefixes, "resampled": "prompts x prefixes" if with_prefix else "prompts",
                     "ci_method": method})
    return pd.DataFrame(rows, columns=columns)
