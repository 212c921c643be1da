"""Behavioural rates (a hit rate such as ``target_hit``) with intervals that treat prompts and
prefixes as crossed random factors."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.crossed import _crossed_resamples, _percentile, cell_means
from harness.analysis.descriptive import CONFIDENCE, GROUP_BY, N_RESAMPLES, _present, with_settings

EXACT = "exact"  # how rate_summary's ci_method names an all-or-none interval


def has_exact_intervals(rates: pd.DataFrame) -> bool:
    """Whether any row of a :func:`rate_summary` table has the exact all-or-none interval."""
    return "ci_method" in rates and bool(rates.ci_method.astype(str).str.startswith(EXACT).any())


def all_or_none_interval(n: int, all_hit: bool = False, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a rate when none (or all) of ``n`` units hit:
    [0, 1 - (alpha/2)^(1/n)], or its mirror image."""
    bound = 1 - ((1 - confidence) / 2) ** (1 / n)
    return (1 - bound, 1.0) if all_hit else (0.0, bound)


def rate_summary(conditions: pd.DataFrame, hit: str = "target_hit", by: Sequence[str] = GROUP_BY,
                 n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Hit rate (e.g. ``target_hit``) per group and length with a 95% percentile interval.

    ``rate`` is the mean over prefixes of each prefix's hit rate over prompts (with a complete
    crossing: the share of conditions that hit). The interval resamples prompts and, independently,
    prefixes (``resampled="prompts x prefixes"``: the claim about such prefixes in general) for
    groups with prefixes, and prompts only for A (``"prompts"``: its base rate). Rows whose ``hit``
    is null are left out; an absent ``hit`` column gives an empty table.

    A cell where no condition hits (or every one does) has a degenerate bootstrap ([0, 0]) that
    says nothing; its interval is then the exact Clopper-Pearson one for 0 (or all) of ``n`` with
    ``n`` the number of replicating units of the scarcer factor (prompts, or prefixes when fewer):
    conservative, since hits are not independent within a prompt or a prefix. ``ci_method`` says
    which interval a row has.

    Columns: by..., rate, ci_low, ci_high, n_hits, n_conditions, n_prompts, n_prefixes, resampled,
    ci_method.
    """
    df = with_settings(conditions)
    by = _present(df, by)
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
        blocks = [(np.arange(len(prefixes)), 1.0)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rate = float(np.nanmean(np.nanmean(Y, axis=0)))
        n_prefixes = int(cell["prefix_id"].nunique())
        if n_hits in (0, n_conditions):  # every resample would give the same rate: no bootstrap
            n_units = min(len(prompts), n_prefixes) if with_prefix else len(prompts)
            low, high = all_or_none_interval(n_units, all_hit=n_hits > 0, confidence=confidence)
            method = f"{EXACT}, {'all' if n_hits else 'none'} of {n_units} units"
        else:
            samples = _crossed_resamples(Y, blocks, n_resamples, np.random.default_rng(seed),
                                         resample_prefixes=bool(with_prefix))
            low, high = _percentile(samples, confidence)
            method = "percentile bootstrap"
        rows.append({**dict(zip(by, key)), "rate": rate, "ci_low": low, "ci_high": high,
                     "n_hits": int(n_hits), "n_conditions": int(n_conditions), "n_prompts": len(prompts),
                     "n_prefixes": n_prefixes, "resampled": "prompts x prefixes" if with_prefix else "prompts",
                     "ci_method": method})
    return pd.DataFrame(rows, columns=columns)
