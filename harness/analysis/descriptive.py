"""Statistics over prompts and prefixes: DataFrame in, DataFrame out, no I/O.

Two kinds of claim, and the numbers that support each (docs/statistics.md):

* **About these prefixes** ("these five instruction-like texts drift more than those five neutral
  ones"). Prompts are the only random factor: within a prompt, a group's drift at one length is the
  mean over that group's prefixes; intervals are bootstrap intervals over prompts (BCa where it
  applies, else percentile; the ``ci_method`` column says which), the C-minus-B contrast is paired by
  prompt and tested with a Wilcoxon signed-rank test. :func:`drift_summary`, :func:`contrast`,
  :func:`layer_profile` and the Wilcoxon columns of :func:`head_contrasts` are of this kind.
* **About instruction-like content in general.** Every prompt meets every prefix, so prompts and
  prefixes are crossed random factors, and the prefixes are few. The lead interval and test come
  from the crossed design's variance components (:mod:`harness.analysis.lead`); the two-way
  bootstrap (:func:`two_way_bootstrap`) and the prefix-label permutation test
  (:func:`prefix_permutation_test`) remain for reference. With five prefixes per group these are
  necessarily much weaker than the prompt-only numbers; that is the honest answer.
  :func:`compare_groups` puts both analyses side by side; a report leads with the second.

Attention tables are summarised with one rule (:func:`weighted_segment_mean`): per condition, the
mean over layers and heads of the segment average weighted by ``n_queries``, then the mean over the
group's prefixes per prompt, so every table and figure agrees with ``attn_kl_mean`` in conditions.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from harness.analysis.checks import (  # noqa: F401 (the names the analysis modules import from here)
    CLAIM_GENERAL,
    CLAIM_PROMPTS,
    CONFIDENCE,
    CONTRAST_BY,
    GROUP_BY,
    HEAD_PERMUTATIONS,
    MAX_RESAMPLES,
    MIN_RESAMPLES,
    N_PERMUTATIONS,
    N_RESAMPLES,
    SWEEP_GROUPS,
    check_attention_table,
    check_by,
    check_cells,
    check_conditions_table,
    check_count,
    check_flags,
    check_fraction,
    check_frame,
    check_groups,
    check_held,
    check_measure,
    check_resampling,
    shown,
)
from harness.inputs.conditions import KEY_FIELDS
from harness.inputs.isolation import setting_label

# --------------------------------------------------------------------------------------------
# Prompt-only intervals and tests
# --------------------------------------------------------------------------------------------


MIN_BOOTSTRAP = 3  # values a bootstrap interval needs (as the crossed intervals need 3 prompts)


def bootstrap_interval(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                       seed: int = 0, method: str = "BCa") -> tuple[float, float, str]:
    """Bootstrap interval for the mean of ``values`` and the method that produced it.

    ``method="BCa"`` is used where it applies (at least 8 distinct values and a non-degenerate
    result), otherwise the percentile interval. Returns ``(low, high, method_used)`` with
    ``method_used`` one of ``"BCa"``, ``"percentile"``, ``"degenerate"`` (all values equal: the
    interval is that value) or ``"none"`` (fewer than :data:`MIN_BOOTSTRAP` values: NaN; resampling two
    values gives back their range, which is no 95% interval). Prompt-only: supports claims
    about *these* prefixes. A ``confidence`` outside (0, 1) or fewer than :data:`MIN_RESAMPLES`
    resamples is refused (:func:`check_resampling`).
    """
    check_resampling(confidence, n_resamples)
    check_count("seed", seed, 0)
    if method not in ("BCa", "percentile"):
        raise ValueError(f"method must be 'BCa' or 'percentile', got {method!r}")
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < MIN_BOOTSTRAP:
        return (np.nan, np.nan, "none")
    if np.all(values == values[0]):
        return (float(values[0]), float(values[0]), "degenerate")
    if method == "BCa" and len(np.unique(values)) >= 8:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                                  method="BCa", random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return (low, high, "BCa")
    res = stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                          method="percentile", random_state=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high), "percentile")


def bootstrap_ci(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                 seed: int = 0, method: str = "percentile", empty_ok: bool = False) -> tuple[float, float]:
    """Bootstrap interval for the mean of ``values`` (NaN, with a warning, when fewer than
    :data:`MIN_BOOTSTRAP` values; none at all is refused unless ``empty_ok``: the report's cells where
    nothing was measured).

    Percentile by default (what existing callers get); ``method="BCa"`` uses BCa where it applies
    and falls back to percentile (see :func:`bootstrap_interval`, which also says which was used).
    The tables' own cells call :func:`mean_interval`, whose NaN their pages explain.
    """
    low, high = mean_interval(values, confidence, n_resamples, seed, method, empty_ok)
    measured = int(np.isfinite(np.asarray(values, dtype=float)).sum())
    if 0 < measured < MIN_BOOTSTRAP:  # (nan, nan) without a word would pass for an interval nothing could bound
        warnings.warn(f"bootstrap_ci: {measured} value(s): a bootstrap interval needs at least {MIN_BOOTSTRAP} units "
                      f"(two values' resamples give only their range); the interval is NaN", RuntimeWarning, stacklevel=2)
    return low, high


def mean_interval(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                  seed: int = 0, method: str = "percentile", empty_ok: bool = False) -> tuple[float, float]:
    """:func:`bootstrap_ci` without its warning on too few values (NaN then): a table's cell."""
    check_flags(empty_ok=empty_ok)
    try:
        given = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"values must be numbers (one per unit), got {values!r:.60}") from None
    if given.ndim != 1:  # a table's rows would be averaged as if they were one value each
        raise ValueError(f"values must be one-dimensional (one value per unit), got an array of shape {given.shape}")
    if given.size == 0 and not empty_ok:  # a filter that matched nothing: (nan, nan) would pass for "too few values"
        raise ValueError(f"values is empty: give the values of at least {MIN_BOOTSTRAP} units (a filter may have "
                         f"matched nothing)")
    if np.isinf(given).any():
        raise ValueError("values hold infinite values: a mean of them has no interval; drop or cap them first")
    if np.isnan(given).any():  # left out, as the intervals of the tables leave out null cells, but said
        warnings.warn(f"bootstrap_ci: {int(np.isnan(given).sum())} of {given.size} values are NaN and were left out",
                      RuntimeWarning, stacklevel=3)
    low, high, _ = bootstrap_interval(given, confidence, n_resamples, seed, method)
    return (low, high)


def with_settings(df: pd.DataFrame) -> pd.DataFrame:
    """Fold ``beta`` into ``isolation`` (``decay(4)``), so one key names each isolation setting
    and no grouping has to cope with a null beta."""
    if "beta" not in df.columns:
        return df
    if "isolation" not in df.columns:  # one setting (none): beta is empty; else it is a setting's, named by isolation
        if df["beta"].isna().all():
            return df.drop(columns="beta")
        raise ValueError("the table has beta but no isolation column: a beta belongs to an isolation setting "
                         "(decay); put the isolation column back")
    labels = [setting_label(str(m), b) if pd.notna(b) else str(m) for m, b in zip(df["isolation"], df["beta"])]
    return df.drop(columns="beta").assign(isolation=pd.Categorical(labels))


def present_columns(df: pd.DataFrame, by) -> list[str]:
    """The columns of ``by`` that ``df`` has, in ``by``'s order (a grouping skips absent ones)."""
    return [c for c in by if c in df.columns]


def paired_differences(df: pd.DataFrame, value: str, by: list[str], high: str, low: str) -> pd.DataFrame | None:
    """Per ``by`` cell and prompt: ``value`` of group ``high`` minus group ``low`` (each averaged over
    the group's prefixes) in a ``diff`` column; None when either group is absent."""
    per = per_prompt(df[df.group.isin([high, low])], value, by + ["group"])
    wide = per.pivot_table(index=by + ["prompt_id"], columns="group", values=value, observed=True).reset_index()
    if high not in wide or low not in wide:
        return None
    wide["diff"] = wide[high] - wide[low]
    return wide


def per_prompt(df: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    """Mean of ``value`` per prompt within each ``by`` cell (averaging over prefixes)."""
    return df.groupby(by + ["prompt_id"], observed=True, dropna=False)[value].mean().reset_index()


def summarise_per_prompt(per: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    """Per ``by`` cell of per-prompt values: mean, bootstrap interval over prompts and count."""
    rows = []
    for key, cell in per.groupby(by, observed=True, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        vals = cell[value].dropna().to_numpy()
        low, high, method = bootstrap_interval(vals)
        rows.append({**dict(zip(by, key)), "n_prompts": len(vals), "mean": vals.mean() if len(vals) else np.nan,
                     "ci_low": low, "ci_high": high, "ci_method": method})
    return pd.DataFrame(rows, columns=by + ["n_prompts", "mean", "ci_low", "ci_high", "ci_method"])


def drift_summary(conditions: pd.DataFrame, value: str = "norm_edit_distance",
                  by: tuple[str, ...] = GROUP_BY) -> pd.DataFrame:
    """Mean ``value`` per group and prefix length, with a bootstrap CI over prompts (BCa where it
    applies; ``ci_method``). Describes *these* prefixes."""
    check_conditions_table(conditions)
    check_measure(conditions, value)
    conditions = with_settings(conditions)
    by = present_columns(conditions, check_by(conditions, by, value))
    return summarise_per_prompt(per_prompt(conditions, value, by), value, by)


def contrast(conditions: pd.DataFrame, value: str = "norm_edit_distance", high: str = "C", low: str = "B",
             by: tuple[str, ...] = CONTRAST_BY) -> pd.DataFrame:
    """``high`` minus ``low`` at each length, paired by prompt: mean difference, bootstrap CI over
    prompts (``ci_method``), and a two-sided Wilcoxon signed-rank p-value (NaN when every difference
    is zero). Prompt-only: a claim about *these* prefixes; see :func:`compare_groups` for the claim
    about the content in general. Groups are checked as :func:`check_groups` says; A is refused (it
    has no prefix length to pair at: every cell came back empty)."""
    check_groups(conditions, high, low)
    if "A" in (high, low):
        raise ValueError("contrast pairs two prefixed groups at each prefix length, and A has none (its length is 0): "
                         "compare B or C with A through their drift, which every measure already states against A "
                         "(H.drift_summary)")
    check_measure(conditions, value)
    conditions = with_settings(conditions)
    by = present_columns(conditions, check_by(conditions, by, value, contrast=True))
    columns = by + ["n_prompts", "mean_diff", "ci_low", "ci_high", "ci_method", "wilcoxon_p"]
    wide = paired_differences(conditions, value, by, high, low)
    if wide is None:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, cell in wide.groupby(by, observed=True, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        d = cell["diff"].dropna().to_numpy()
        low_ci, high_ci, method = bootstrap_interval(d)
        rows.append({**dict(zip(by, key)), "n_prompts": len(d), "mean_diff": d.mean() if len(d) else np.nan,
                     "ci_low": low_ci, "ci_high": high_ci, "ci_method": method, "wilcoxon_p": wilcoxon_p(d)})
    return pd.DataFrame(rows, columns=columns)


def wilcoxon_p(diffs, alternative: str = "two-sided") -> float:
    """Wilcoxon signed-rank p-value of paired differences; NaN when untestable (all zero, n < 2)."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    if len(d) < 2 or np.all(d == 0):
        return np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(d, alternative=alternative).pvalue)


def wilcoxon_rows(D: np.ndarray, alternative: str) -> np.ndarray:
    """:func:`wilcoxon_p` of every row of ``D``, vectorized where that gives the same answer.

    scipy chooses exact vs. approximate p-values from the whole array (ties or zeros anywhere make
    every row approximate), so rows with and without ties/zeros are tested in separate calls; rows
    with NaN fall back to the per-row loop."""
    D = np.asarray(D, dtype=float)
    p = np.full(len(D), np.nan)
    if D.size == 0:
        return p
    finite = np.isfinite(D).all(axis=1)
    testable = finite & (D.shape[1] >= 2) & (D != 0).any(axis=1)
    a = np.sort(np.abs(D), axis=1)
    dirty = (a == 0).any(axis=1) | (np.diff(a, axis=1) == 0).any(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rows in (testable & ~dirty, testable & dirty):
            if rows.any():
                p[rows] = stats.wilcoxon(D[rows], alternative=alternative, axis=1).pvalue
    for i in np.flatnonzero(~finite):
        p[i] = wilcoxon_p(D[i], alternative)
    return p


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """BH-adjusted q-values; NaN p-values stay NaN and are not counted as tests."""
    if isinstance(p, (str, bytes)) or np.ndim(p) != 1:
        raise ValueError(f"p must be a one-dimensional sequence of p-values, got {p!r:.60}")
    try:
        p = np.asarray(p, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"p must hold numbers (p-values), got {p!r:.60}") from None
    bad = p[~np.isnan(p) & ((p < 0) | (p > 1))]
    if len(bad):  # scipy's "`ps` must include only numbers between 0 and 1" names an argument the caller never saw
        raise ValueError(f"p must hold p-values between 0 and 1 (NaN left out), got {', '.join(map(str, bad[:3]))}")
    q = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = stats.false_discovery_control(p[ok], method="bh")
    return q


def benjamini_hochberg_by(table: pd.DataFrame, p: str = "p", family: Sequence[str] = ("model",)) -> np.ndarray:
    """BH q-values of column ``p``, computed separately within each ``family`` cell (one family per
    distinct value of the ``family`` columns; an empty ``family`` is one family). Returns an array
    aligned with ``table``'s rows."""
    q = np.full(len(table), np.nan)
    values = table[p].to_numpy(dtype=float)
    family = present_columns(table, family)
    if not family:
        return benjamini_hochberg(values)
    for idx in table.groupby(family, observed=True, dropna=False, sort=False).indices.values():
        q[idx] = benjamini_hochberg(values[idx])
    return q

# --------------------------------------------------------------------------------------------
# Attention tables
# --------------------------------------------------------------------------------------------


CONDITION_KEYS = ("model", *KEY_FIELDS)  # a condition's row (harness.inputs.conditions)


def weighted_segment_mean(attention: pd.DataFrame, value: str = "kl", by: Sequence[str] = GROUP_BY) -> pd.DataFrame:
    """The one aggregation rule for attention tables; returns one row per (``by``..., prompt_id).

    Per condition: the mean of ``value`` over layers and heads not in ``by`` (equal weights) within
    each segment, then the average over segments weighted by ``n_queries`` (segments with no query
    rows or a NaN value drop out); then per prompt, the mean over the conditions (prefixes) of the
    cell. With ``by`` = model, isolation, group, prefix_len, prefix_id this is the per-condition
    ``attn_kl_mean`` of the conditions table. Every attention summary (:func:`layer_profile`,
    :func:`head_map`) goes through here, so tables and figures agree. ``beta`` is folded into
    ``isolation`` first; ``by`` columns absent from the table are skipped.
    """
    check_attention_table(attention, ("n_queries", "segment"))
    if not isinstance(value, str) or value not in attention.columns:
        raise ValueError(f"value must name a column of the attention table (e.g. 'kl', 'capture'), got {shown(value)}")
    check_measure(attention, value)
    att = with_settings(attention)
    by = present_columns(att, check_by(att, by))
    cond = list(dict.fromkeys(by + present_columns(att, CONDITION_KEYS)))
    seg_keys = cond + (["segment"] if "segment" in att.columns and "segment" not in cond else [])
    per_seg = att.groupby(seg_keys, observed=True, dropna=False, sort=False).agg(
        v=(value, "mean"), n=("n_queries", "mean")).reset_index()
    ok = per_seg["v"].notna() & (per_seg["n"] > 0)
    per_seg["vw"] = np.where(ok, per_seg["v"] * per_seg["n"], 0.0)
    per_seg["w"] = np.where(ok, per_seg["n"], 0.0)
    per_cond = per_seg.groupby(cond, observed=True, dropna=False, sort=False)[["vw", "w"]].sum().reset_index()
    with np.errstate(invalid="ignore", divide="ignore"):
        per_cond[value] = np.where(per_cond["w"] > 0, per_cond["vw"] / per_cond["w"], np.nan)
    keys = list(dict.fromkeys(by + ["prompt_id"]))
    return per_cond.groupby(keys, observed=True, dropna=False, sort=True)[value].mean().reset_index()


def layer_profile(attention: pd.DataFrame, value: str = "kl", segment: str | None = None) -> pd.DataFrame:
    """Mean ``value`` per group, prefix length and layer (over heads, prefixes and prompts; segments
    weighted by ``n_queries``, :func:`weighted_segment_mean`), bootstrap CI over prompts. A
    ``segment`` the table does not hold is refused."""
    check_frame(attention, "attention")
    if segment is not None:
        check_held(attention, "segment", "segment", segment)
    att = attention if segment is None else attention[attention.segment == segment]
    by = present_columns(with_settings(att), ("model", "placement", "isolation", "group", "prefix_len", "layer"))
    return summarise_per_prompt(weighted_segment_mean(att, value, by), value, by)


def head_map(attention: pd.DataFrame, group: str = "C", value: str = "kl", segment: str | None = None) -> pd.DataFrame:
    """Mean ``value`` per prefix length, layer and head for one group (per prompt first, segments
    weighted by ``n_queries``: :func:`weighted_segment_mean`). A ``group`` or ``segment`` the table
    does not hold is refused (a sweep's A, B or C is accepted: a sweep may leave one out)."""
    check_frame(attention, "attention")
    check_held(attention, "group", "group", group, SWEEP_GROUPS)
    if segment is not None:
        check_held(attention, "segment", "segment", segment)
    att = attention[attention.group == group]
    if segment is not None:
        att = att[att.segment == segment]
    by = present_columns(with_settings(att), ("model", "placement", "isolation", "prefix_len", "layer", "head"))
    if att.empty:  # a sweep without the group (groups=[A,B]): no heads, as its figure shows none
        return pd.DataFrame(columns=[*by, value])
    per = weighted_segment_mean(att, value, by)
    return per.groupby(by, observed=True)[value].mean().reset_index()
