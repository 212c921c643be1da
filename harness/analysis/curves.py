"""Output measures that do not saturate, and the ceiling they are read against.

Edit distance to A saturates quickly: continuations of unrelated prompts are already far apart.
These summaries show where a continuation leaves A's and how the output distributions drift step
by step, with intervals, and how far apart unrelated prompts' continuations are (the ceiling).
DataFrame in, DataFrame out, no I/O; the intervals resample prompts (see :mod:`harness.analysis.descriptive`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.checks import NothingToShow, check_columns, check_flags, generator
from harness.analysis.descriptive import (
    CONFIDENCE,
    GROUP_BY,
    N_RESAMPLES,
    check_by,
    check_conditions_table,
    check_count,
    check_resampling,
    mean_interval,
    present_columns,
    shown,
    summarise_per_prompt,
    with_settings,
)
from harness.analysis.undecoded import UNDECODED, undecoded, undecoded_rows

MAX_K = 10_000  # a survival curve's longest reach where the table does not say how long continuations are


def survival(conditions: pd.DataFrame, by: Sequence[str] = GROUP_BY, max_k: int | None = None,
             n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE,
             two_way: bool = False) -> pd.DataFrame:
    """First-divergence survival curve: S(k) = fraction of conditions whose continuation is still
    identical to A's for the first k tokens (``first_divergence >= k`` or null), k = 0..``max_k``.
    S(0) = 1 by definition.

    ``max_k`` defaults to the largest ``n_continuation_tokens`` in the table (else the largest
    first divergence + 1); every cell gets the same k grid. The interval is a percentile cluster
    bootstrap over prompts (the claim: *these* prefixes); ``two_way=True`` also resamples the cell's
    prefixes, independently (the claim: such prefixes in general). Conditions are weighted by their
    prompt's (and prefix's) multiplicity. Refused: a negative ``max_k`` (0 stays: the default's own
    fallback, and what the report passes when every continuation is empty), a ``confidence`` or
    ``n_resamples`` :func:`check_resampling` refuses.

    Columns: by..., k, survival, ci_low, ci_high, n (conditions), n_prompts.
    """
    if max_k is not None:
        check_count("max_k", max_k, 0)
        longest = int(conditions["n_continuation_tokens"].max()) if "n_continuation_tokens" in conditions and \
            conditions["n_continuation_tokens"].notna().any() else MAX_K
        if max_k > max(longest, 1):  # a curve past the last token is flat, and a huge one fills the memory
            raise ValueError(f"max_k must be at most the longest continuation ({longest} tokens), got {max_k}")
    check_resampling(confidence, n_resamples)
    check_flags(two_way=two_way)  # the string "no" is true
    check_conditions_table(conditions)
    check_columns(conditions, ["first_divergence"], "conditions")
    # an undecoded row's empty first_divergence would read as "never diverged": survival 1 throughout
    if undecoded(conditions):
        raise NothingToShow(f"{UNDECODED} in this table: there is no divergence from A to survive")
    left_out = undecoded_rows(conditions)
    if left_out.any():  # runs read together, one of them attention alone
        prefixed = int((conditions["group"].astype(str) != "A").sum())
        warnings.warn(f"survival leaves out {int(left_out.sum())} of the table's {prefixed} B/C rows: "
                      f"{UNDECODED} in a run read with decoded ones", stacklevel=2)
        conditions = conditions[~left_out]
    df = with_settings(conditions)
    by = present_columns(df, check_by(df, by))
    fd_all = df["first_divergence"].to_numpy(dtype=float, na_value=np.nan)
    if max_k is None:
        if "n_continuation_tokens" in df.columns and df["n_continuation_tokens"].notna().any():
            max_k = int(df["n_continuation_tokens"].max())
        else:
            max_k = int(np.nanmax(fd_all)) + 1 if np.isfinite(fd_all).any() else 0
    ks = np.arange(max_k + 1)
    columns = by + ["k", "survival", "ci_low", "ci_high", "n", "n_prompts"]
    parts = []
    groups = df.groupby(by, observed=True, sort=True).indices.items() if by else [((), np.arange(len(df)))]
    for key, idx in groups:
        key = key if isinstance(key, tuple) else (key,)
        cell = df.iloc[idx]
        fd = fd_all[idx]
        alive = np.isnan(fd)[:, None] | (fd[:, None] >= ks[None, :])          # (conditions, k)
        p_codes, prompts = pd.factorize(cell["prompt_id"].astype(object), sort=True)
        rng = generator(seed)
        n_p = len(prompts)
        Wp = rng.multinomial(n_p, np.full(n_p, 1.0 / n_p), size=n_resamples).astype(float)
        w = Wp[:, p_codes]
        if two_way and "prefix_id" in cell.columns and cell["prefix_id"].notna().any():
            k_codes, prefixes = pd.factorize(cell["prefix_id"].astype(object), sort=True, use_na_sentinel=False)
            Vk = rng.multinomial(len(prefixes), np.full(len(prefixes), 1.0 / len(prefixes)), size=n_resamples)
            w = w * Vk[:, k_codes]
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (w @ alive) / w.sum(axis=1, keepdims=True)
        a = (1 - confidence) / 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanquantile(boot, [a, 1 - a], axis=0)
        part = pd.DataFrame({"k": ks, "survival": alive.mean(axis=0), "ci_low": low, "ci_high": high,
                             "n": len(idx), "n_prompts": n_p})
        for col, v in zip(by, key):
            part[col] = v
        parts.append(part[columns])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def ceiling(conditions: pd.DataFrame, by: Sequence[str] = ("model", "placement")) -> pd.DataFrame:
    """How far apart continuations of *unrelated* prompts are: the normalized edit distance
    between A's continuation of each prompt and A's continuation of every other prompt, averaged
    per prompt, then over prompts with a bootstrap interval over prompts. Drift near this value
    has nowhere left to go (the output has changed as much as an unrelated prompt changes it).

    Columns: by..., mean, ci_low, ci_high, n_prompts. A table with no cell of 2 prompts' A rows is
    refused (:class:`~harness.analysis.checks.NothingToShow`)."""
    from harness.measure.output_metrics import norm_edit_distance

    check_conditions_table(conditions)
    by = check_by(conditions, by)
    a = conditions[conditions.group == "A"]
    if "isolation" in a.columns:
        a = a[a.isolation.astype(str) == "none"] if (a.isolation.astype(str) == "none").any() else a
    by = present_columns(a, by)
    rows = []
    for key, cell in (a.groupby(by, observed=True, sort=True) if by else [((), a)]):
        key = key if isinstance(key, tuple) else (key,)
        ids = cell.drop_duplicates("prompt_id").continuation_ids.map(list).tolist()
        if len(ids) < 2:
            continue
        per_prompt_mean = [np.mean([norm_edit_distance(x, y) for j, y in enumerate(ids) if j != i])
                           for i, x in enumerate(ids)]
        low, high = mean_interval(per_prompt_mean)
        rows.append({**dict(zip(by, key)), "mean": float(np.mean(per_prompt_mean)), "ci_low": low, "ci_high": high,
                     "n_prompts": len(ids)})
    if not rows:
        raise NothingToShow(f"the ceiling compares A's continuations of different prompts, and no cell here holds A for "
                         f"2 prompts ({a.prompt_id.nunique()} prompt(s) with A in {len(conditions)} rows)")
    return pd.DataFrame(rows, columns=[*by, "mean", "ci_low", "ci_high", "n_prompts"])


def step_profile(conditions: pd.DataFrame, value: str = "output_kl_steps", by: Sequence[str] = GROUP_BY
                 ) -> pd.DataFrame:
    """Drift as a function of the generated step: the per-step list column ``value`` (output KL at
    each step of A's continuation) averaged per prompt over the cell's prefixes, then over prompts
    with a bootstrap interval over prompts. Steps past a condition's A continuation are absent.

    Columns: by..., step, mean, ci_low, ci_high, n_prompts."""
    check_conditions_table(conditions)
    if not isinstance(value, str) or (value not in conditions.columns and not value.endswith("_steps")):
        raise ValueError(f"value must name a per-step column of the conditions table (e.g. 'output_kl_steps'), got "
                         f"{shown(value)}")
    if value not in conditions.columns:  # a per-step name the table lacks (dropped, or an older table)
        raise ValueError(f"the conditions table has no {value!r} column (the per-step KL a sweep writes; was it "
                         f"dropped or renamed?); its per-step columns: "
                         f"{', '.join(c for c in conditions.columns if c.endswith('_steps')) or 'none'}")
    example = next(iter(conditions[value].dropna()), None)
    if example is not None and not isinstance(example, (list, tuple, np.ndarray)):
        raise ValueError(f"value must name a per-step column (a list per condition, e.g. 'output_kl_steps'), got "
                         f"{value!r}, which holds {shown(example)[:40]} (H.drift_summary summarises a single value)")
    df = with_settings(conditions[conditions.group != "A"])
    by = present_columns(df, check_by(df, by))
    df = df[df[value].notna()]
    if df.empty:
        return pd.DataFrame(columns=[*by, "step", "mean", "ci_low", "ci_high", "n_prompts"])
    long = df[[*by, "prompt_id", value]].explode(value).rename(columns={value: "v"})
    long["step"] = long.groupby(level=0).cumcount()
    long["v"] = long["v"].astype(float)
    per = long.groupby([*by, "step", "prompt_id"], observed=True)["v"].mean().reset_index()
    return summarise_per_prompt(per.rename(columns={"v": "value"}), "value", [*by, "step"])
