"""Behavioural rates (a hit rate such as ``target_hit``) per group and length, with the crossed
interval of :mod:`harness.analysis.rate_intervals` (prompts and prefixes random)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.checks import NothingToShow, check_hits
from harness.analysis.crossed import cell_means
from harness.analysis.crossed_variance import complete_table
from harness.analysis.descriptive import (
    CONFIDENCE,
    GROUP_BY,
    check_by,
    check_conditions_table,
    check_fraction,
    present_columns,
    with_settings,
)
from harness.analysis.rate_intervals import effective_units, quantile, wilson
from harness.analysis.undecoded import empty_beside_a
from harness.numbers import size

WILSON = "Wilson, crossed"  # how rate_summary's ci_method names its interval
HIT = "target_hit"  # rate_summary's column when none is named


def interval_words(shape: tuple[int, int], n_eff: float, dof: float) -> str:
    """What a rate's interval is, in the words ``ci_method`` prints: its effective units, the t
    quantile's degrees of freedom (where it has one; the units and the degrees of freedom give the
    printed interval back through :func:`harness.analysis.rate_intervals.wilson`), and whether it
    is the worst case (all the variation between the scarcer factor's units: too few hits, or hits
    too clustered, to show that it is less)."""
    prompts, prefixes = shape
    units = f"{size(n_eff)} effective unit" + ("" if n_eff == 1 else "s")
    if prefixes > 1 and np.isclose(n_eff, min(prompts, prefixes), rtol=1e-9):
        scarcer = f"{prompts} prompts" if prompts <= prefixes else f"{prefixes} prefixes"
        units += f" (the worst case: all the variation between the {scarcer})"
    return f"{WILSON}, {units}" + (f", t on {size(dof)} df" if np.isfinite(dof) else "")


def rate_summary(conditions: pd.DataFrame, hit: str | None = None, by: Sequence[str] = GROUP_BY,
                 confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Hit rate (e.g. ``target_hit``) per group and length with a 95% interval.

    ``rate`` is the mean over prefixes of each prefix's hit rate over prompts (with a complete
    crossing: the share of conditions that hit). Prompts and prefixes are both random
    (``resampled="prompts x prefixes"``: the claim about such prefixes in general) for groups with
    prefixes, prompts only for A (``"prompts"``: its base rate, a plain Wilson interval). Rows whose
    ``hit`` is null are left out. ``hit`` None means ``target_hit``; a table without that column, or
    whose ``hit`` is null in every row (a run whose prefixes name no target), is refused.
    Either must hold booleans or 0/1 (:func:`check_hits`), and ``confidence`` lie in (0, 1).

    The interval is :func:`harness.analysis.rate_intervals.crossed_rate_interval`; where the crossing is
    incomplete it is computed on the largest complete part (``ci_method`` says so).
    ``effective_units`` is the sample size it was worth. Simulated coverage and width against an
    interval that knows the variance components: ``benchmarks/crossed_calibration.py``.

    Columns: by..., rate, ci_low, ci_high, n_hits, n_conditions, n_prompts, n_prefixes, resampled,
    ci_method, effective_units.
    """
    check_fraction("confidence", confidence, CONFIDENCE)
    check_conditions_table(conditions)
    if hit is None and HIT not in conditions.columns:
        raise ValueError(f"the table has no {HIT} column (no prefix of these runs names a target word), so there is "
                         f"nothing to rate: name the column of hits to rate (hit=...)")
    hit = HIT if hit is None else hit
    check_hits(conditions, hit)
    if conditions[hit].isna().all():
        raise ValueError(f"{hit} is empty in all {len(conditions)} rows of the table (a run whose prefixes name no "
                         f"target, or rows filtered to those without one): there is nothing to rate")
    empty = empty_beside_a(conditions, hit)
    if empty:  # A's rows alone would be rated, unsaid
        raise NothingToShow(f"{hit} {empty}")
    df = with_settings(conditions)
    by = present_columns(df, check_by(df, by))
    df = df[df[hit].notna()].assign(_hit=lambda d: d[hit].astype(float))
    units = cell_means(df, "_hit", by)
    counts = (df.groupby(by, observed=True, sort=True)["_hit"].agg(["sum", "size"]) if by else
              pd.DataFrame({"sum": [df["_hit"].sum()], "size": [len(df)]}, index=[()]))
    rows = []
    groups = units.groupby(by, observed=True, sort=True) if by else [((), units)]
    for key, cell in groups:
        key = key if isinstance(key, tuple) else (key,)
        # one ``by`` column: the counts' index is that column's values, not 1-tuples
        n_hits, n_conditions = (counts.loc[key if len(by) > 1 else key[0]] if by else counts.iloc[0])
        p_codes, prompts = pd.factorize(cell["prompt_id"].astype(object), sort=True)
        with_prefix = cell["prefix_id"].notna().any()
        k_codes, prefixes = pd.factorize(cell["prefix_id"].astype(object), sort=True, use_na_sentinel=False)
        Y = np.full((len(prompts), len(prefixes)), np.nan)
        Y[p_codes, k_codes] = cell["_hit"].to_numpy(dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rate = float(np.nanmean(np.nanmean(Y, axis=0)))
        complete, note = complete_table(Y)
        if complete.size == 0:
            low = high = n_eff = np.nan
            method = f"no interval ({note})"
        else:
            _, n_eff, dof, _ = effective_units(complete, confidence)
            low, high = (float(v) for v in wilson(rate, n_eff, quantile(dof, confidence)))
            method = interval_words(complete.shape, float(n_eff), float(dof)) + (f"; {note}" if note else "")
        rows.append({**dict(zip(by, key)), "rate": rate, "ci_low": low, "ci_high": high,
                     "n_hits": int(n_hits), "n_conditions": int(n_conditions), "n_prompts": len(prompts),
                     "n_prefixes": int(cell["prefix_id"].nunique()),
                     "resampled": "prompts x prefixes" if with_prefix else "prompts", "ci_method": method,
                     "effective_units": float(n_eff)})
    return pd.DataFrame(rows, columns=by + ["rate", "ci_low", "ci_high", "n_hits", "n_conditions", "n_prompts",
                                            "n_prefixes", "resampled", "ci_method", "effective_units"])
