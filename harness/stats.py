"""Statistics over prompts: DataFrame in, DataFrame out, no I/O.

The unit of replication is the prompt. Within a prompt, a group's drift at one length is the mean
over that group's prefixes; intervals are 95% bootstrap intervals over prompts
(``scipy.stats.bootstrap``), and the C-minus-B contrast is paired by prompt, so prompt difficulty
cancels. Per-head tests use a one-sided Wilcoxon signed-rank test per head with
Benjamini-Hochberg correction across the heads of each length.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95
N_RESAMPLES = 2000


def bootstrap_ci(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean of ``values`` (NaN when fewer than 2 values)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return (np.nan, np.nan)
    if np.all(values == values[0]):
        return (float(values[0]), float(values[0]))
    res = stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                          method="percentile", random_state=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def with_settings(df: pd.DataFrame) -> pd.DataFrame:
    """Fold ``beta`` into ``isolation`` (``decay(4)``), so one key names each isolation setting
    and no grouping has to cope with a null beta."""
    if "beta" not in df.columns:
        return df
    labels = [f"decay({b:g})" if m == "decay" else str(m) for m, b in zip(df["isolation"], df["beta"])]
    return df.drop(columns="beta").assign(isolation=pd.Categorical(labels))


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


def _summarise(per: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    rows = []
    for key, cell in per.groupby(by, observed=True, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        vals = cell[value].dropna().to_numpy()
        low, high = bootstrap_ci(vals)
        rows.append({**dict(zip(by, key)), "n_prompts": len(vals), "mean": vals.mean() if len(vals) else np.nan,
                     "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)


def drift_summary(conditions: pd.DataFrame, value: str = "norm_edit_distance",
                  by: tuple[str, ...] = ("model", "isolation", "group", "prefix_len")) -> pd.DataFrame:
    """Mean ``value`` per group and prefix length, with a bootstrap CI over prompts."""
    conditions = with_settings(conditions)
    by = [c for c in by if c in conditions.columns]
    return _summarise(per_prompt(conditions, value, by), value, by)


def contrast(conditions: pd.DataFrame, value: str = "norm_edit_distance", high: str = "C", low: str = "B",
             by: tuple[str, ...] = ("model", "isolation", "prefix_len")) -> pd.DataFrame:
    """``high`` minus ``low`` at each length, paired by prompt: mean difference, bootstrap CI, and
    a two-sided Wilcoxon signed-rank p-value (NaN when every difference is zero)."""
    conditions = with_settings(conditions)
    by = [c for c in by if c in conditions.columns]
    wide = paired_differences(conditions, value, by, high, low)
    if wide is None:
        return pd.DataFrame(columns=by + ["n_prompts", "mean_diff", "ci_low", "ci_high", "wilcoxon_p"])
    rows = []
    for key, cell in wide.groupby(by, observed=True, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        d = cell["diff"].dropna().to_numpy()
        low_ci, high_ci = bootstrap_ci(d)
        rows.append({**dict(zip(by, key)), "n_prompts": len(d), "mean_diff": d.mean() if len(d) else np.nan,
                     "ci_low": low_ci, "ci_high": high_ci, "wilcoxon_p": wilcoxon_p(d)})
    return pd.DataFrame(rows)


def wilcoxon_p(diffs, alternative: str = "two-sided") -> float:
    """Wilcoxon signed-rank p-value of paired differences; NaN when untestable (all zero, n < 2)."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    if len(d) < 2 or np.all(d == 0):
        return np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(d, alternative=alternative).pvalue)


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """BH-adjusted q-values; NaN p-values stay NaN and are not counted as tests."""
    p = np.asarray(p, dtype=float)
    q = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = stats.false_discovery_control(p[ok], method="bh")
    return q


def layer_profile(attention: pd.DataFrame, value: str = "kl", segment: str | None = None) -> pd.DataFrame:
    """Mean ``value`` per group, prefix length and layer (over heads, prefixes and prompts)."""
    att = with_settings(attention if segment is None else attention[attention.segment == segment])
    by = [c for c in ("model", "isolation", "group", "prefix_len", "layer") if c in att.columns]
    per = att.groupby(by + ["prompt_id"], observed=True)[value].mean().reset_index()
    return _summarise(per, value, by)


def head_map(attention: pd.DataFrame, group: str = "C", value: str = "kl", segment: str | None = None) -> pd.DataFrame:
    """Mean ``value`` per prefix length, layer and head for one group."""
    att = with_settings(attention[attention.group == group])
    if segment is not None:
        att = att[att.segment == segment]
    by = [c for c in ("model", "isolation", "prefix_len", "layer", "head") if c in att.columns]
    return att.groupby(by, observed=True)[value].mean().reset_index()


def head_contrasts(attention: pd.DataFrame, value: str = "kl", segment: str = "task", alpha: float = 0.05,
                   high: str = "C", low: str = "B") -> pd.DataFrame:
    """Per head: does ``high``'s drift exceed ``low``'s? Paired by prompt, one-sided Wilcoxon,
    Benjamini-Hochberg across the heads of each model and length. Sorted by q-value."""
    att = with_settings(attention[attention.segment == segment])
    by = [c for c in ("model", "isolation", "prefix_len", "layer", "head") if c in att.columns]
    wide = paired_differences(att, value, by, high, low)
    if wide is None:
        return pd.DataFrame(columns=by + ["n_prompts", "mean_diff", "p", "q", "significant"])
    rows = []
    for key, cell in wide.groupby(by, observed=True, sort=True):
        d = cell["diff"].dropna().to_numpy()
        rows.append({**dict(zip(by, key)), "n_prompts": len(d), "mean_diff": d.mean(),
                     "p": wilcoxon_p(d, alternative="greater")})
    out = pd.DataFrame(rows)
    family = [c for c in ("model", "isolation", "prefix_len") if c in out.columns]
    out["q"] = np.nan
    for _, idx in out.groupby(family, observed=True).groups.items():
        out.loc[idx, "q"] = benjamini_hochberg(out.loc[idx, "p"].to_numpy())
    out["significant"] = out["q"] < alpha
    return out.sort_values(["q", "mean_diff"], ascending=[True, False], na_position="last").reset_index(drop=True)
