"""Per attention head: does C move attention more than B? Prompt-level Wilcoxon, the crossed t test
of the report's lead interval (prompts and prefixes random) and the prefix-level permutation test
for every head at once, with Benjamini-Hochberg over a family."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.checks import check_attention_table, check_effect, check_flags, check_keys, warn_pooled_runs
from harness.analysis.crossed import cell_means, matched_pairs, permutation_pvalues, relabelings
from harness.analysis.crossed_variance import difference, supported
from harness.analysis.descriptive import (
    HEAD_PERMUTATIONS,
    benjamini_hochberg_by,
    check_count,
    check_fraction,
    check_groups,
    check_held,
    check_measure,
    present_columns,
    wilcoxon_rows,
    with_settings,
)
from harness.analysis.power import COMPONENTS, components_of, design_power, prefix_level_sd
from harness.analysis.verdicts import deltas_for

SIGNIFICANT_BY = {"wilcoxon": "q", "crossed": "q_crossed", "permutation": "q_perm"}


def _head_block(sub: pd.DataFrame, value: str, high: str, low: str, alternative: str, n_permutations: int,
                seed: int, permutation: bool) -> pd.DataFrame:
    """All heads of one (model, isolation, prefix_len, segment): Wilcoxon and prefix-permutation
    p-values, vectorized across heads."""
    head_codes, heads = pd.factorize(pd.MultiIndex.from_arrays([sub["layer"], sub["head"]]), sort=True)
    groups = sub["group"].astype(str).to_numpy()
    prefix_keys = list(zip(groups, sub["prefix_id"].astype(object)))
    keys = sorted(set(prefix_keys), key=lambda k: (k[0] != high, str(k[1])))
    k_index = {k: i for i, k in enumerate(keys)}
    p_codes, _ = pd.factorize(sub["prompt_id"].astype(object), sort=True)
    H, nP, K = len(heads), p_codes.max() + 1, len(keys)
    Y = np.full((H, nP, K), np.nan)
    Y[head_codes, p_codes, [k_index[k] for k in prefix_keys]] = sub[value].to_numpy(dtype=float)
    is_high = np.array([g == high for g, _ in keys], dtype=bool)
    n_high, n_low = int(is_high.sum()), int((~is_high).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        D = np.nanmean(Y[:, :, is_high], axis=2) - np.nanmean(Y[:, :, ~is_high], axis=2)   # (H, nP)
        usable = np.isfinite(D)
        M = np.nanmean(np.where(usable[:, :, None], Y, np.nan), axis=1)                     # (H, K)
    n_prompts = usable.sum(axis=1)
    all_used = usable.all()
    p_w = wilcoxon_rows(D if all_used else np.where(usable, D, np.nan), alternative)
    out = pd.DataFrame({"layer": heads.get_level_values(0), "head": heads.get_level_values(1),
                        "n_prompts": n_prompts, "n_prefixes_high": n_high, "n_prefixes_low": n_low,
                        "mean_diff": np.where(n_prompts > 0, np.nansum(D, axis=1) / np.maximum(n_prompts, 1), np.nan),
                        "p": p_w})
    pairs = None
    if "pair" in sub.columns:
        pairs = matched_pairs(keys, dict(zip(prefix_keys, sub["pair"].astype(object))), high, low)
    out["design"] = "paired" if pairs is not None else "unpaired"
    _crossed_columns(out, Y, is_high, pairs, alternative)
    if permutation and n_high and n_low:
        W, exact = relabelings(is_high, pairs, n_permutations, np.random.default_rng(seed))
        w0 = np.where(is_high, 1.0 / n_high, -1.0 / n_low)
        out["p_perm"] = permutation_pvalues(M, w0, W, exact, alternative)
        out["perm_exact"] = exact
    else:
        out["p_perm"] = np.nan
        out["perm_exact"] = False
    return out


def _crossed_columns(out: pd.DataFrame, Y: np.ndarray, is_high: np.ndarray, pairs, alternative: str) -> None:
    """``p_crossed`` (the lead crossed t test, :func:`harness.analysis.crossed_variance.difference`,
    batched over heads) and the components behind its power, for heads complete on every prompt x
    prefix cell; NaN for the others and where the design cannot support the test."""
    complete = np.isfinite(Y).all(axis=(1, 2))
    out["p_crossed"] = np.nan
    out["prefix_sd"] = np.nan
    for name in COMPONENTS:
        out[f"_{name}"] = np.nan
    if not complete.any() or supported(Y[np.flatnonzero(complete)[0]], is_high) is not None:
        return
    est = difference(Y[complete], is_high, pairs)
    with np.errstate(invalid="ignore"):
        p = est.p_value(alternative)
    out.loc[complete, "p_crossed"] = np.where(est.variance > 0, p, np.nan)
    comps = components_of(Y[complete], is_high, pairs)
    out.loc[complete, "prefix_sd"] = prefix_level_sd(comps)
    for name in COMPONENTS:
        out.loc[complete, f"_{name}"] = comps[name]


def _lone_head_power(out: pd.DataFrame, family: list[str], alpha: float, alternative: str, effect: float
                     ) -> np.ndarray:
    """Per head: the crossed t test's power against ``effect`` at the level a lone discovery needs
    under Benjamini-Hochberg, ``alpha`` over its family's count of tests."""
    size = out.groupby(family, observed=True, dropna=False)["p_crossed"].transform("size") if family else len(out)
    comps = {name: out[f"_{name}"].to_numpy(dtype=float) for name in COMPONENTS}
    comps.update(n_prompts=out.n_prompts.to_numpy(dtype=float), n_prefixes_high=out.n_prefixes_high.to_numpy(dtype=float),
                 n_prefixes_low=out.n_prefixes_low.to_numpy(dtype=float))
    power = np.full(len(out), np.nan)
    for keys, idx in out.groupby(["n_prompts", "n_prefixes_high", "n_prefixes_low"], observed=True).indices.items():
        P, n = int(keys[0]), int(min(keys[1], keys[2]))
        if P < 3 or n < 2:
            continue
        part = {k: v[idx] for k, v in comps.items()}
        level = alpha / np.asarray(size)[idx] if family else alpha / size
        power[idx] = design_power(part, P, n, np.full(len(idx), effect), level, alternative)
    return power


def smallest_permutation_p(n_high: int, n_low: int, design: str, n_permutations: int = HEAD_PERMUTATIONS) -> float:
    """The smallest one-sided p the prefix-label permutation test can give: one over the number of
    relabelings (2**pairs for matched pairs, C(n_high + n_low, n_high) otherwise), or 1/(m + 1)
    when m random relabelings stand in for them (``relabelings``)."""
    count = 2 ** n_high if design == "paired" else math.comb(n_high + n_low, n_high)
    return 1 / count if count <= n_permutations else 1 / (n_permutations + 1)


def head_contrasts(attention: pd.DataFrame, value: str = "kl", segment: str | Sequence[str] | None = "task",
                   alpha: float = 0.05, high: str = "C", low: str = "B", family: str = "model",
                   significant_by: str = "wilcoxon", permutation: bool = True,
                   n_permutations: int = HEAD_PERMUTATIONS, seed: int = 0, tables_joined: int = 1,
                   effect: float | None = None) -> pd.DataFrame:
    """Per head: does ``high``'s drift exceed ``low``'s? Two one-sided tests per head.

    * ``p``: Wilcoxon signed-rank over prompts of the per-prompt difference (paired by prompt);
      about *these* prefixes.
    * ``p_crossed``: the crossed t test of the report's lead interval (prompts and prefixes random,
      :func:`harness.analysis.crossed_variance.difference`), one-sided; about the content *in
      general*, and the test that holds its level in the calibration suite, also with 3 prompts and
      a prompt-by-group interaction. ``power_lone``: its power against ``effect`` (by default the
      smallest effect of interest Δ of ``value``, :mod:`harness.analysis.verdicts`; NaN where the
      measure has none) at the level a lone head needs to pass Benjamini-Hochberg in its family
      (``alpha`` over the family's tests, times ``tables_joined`` when the caller corrects over that
      many such tables together, as the report does over capture and redistribution).
    * ``p_perm``: prefix-label permutation on the head's prompt x prefix cells
      (:func:`prefix_permutation_test`, exact when the relabelings number at most
      ``n_permutations``, else that many Monte Carlo draws); about the content *in general*. With
      k prefixes per group its smallest value is 1 / C(2k, k) (1/252 for 5 + 5), which a large
      family may never push below ``alpha``; it exceeds its level when prompts interact with the
      group, most with few prompts (descriptive).

    ``q``, ``q_crossed`` and ``q_perm`` are Benjamini-Hochberg over the family: ``family="model"`` (default) is
    every row this call returns for a model (all isolation settings x lengths x segments x heads);
    ``family="length"`` is each (model, isolation, prefix_len, segment) separately (the old rule).
    ``segment``: one segment, a list, or None for all; each segment is its own set of rows.
    ``significant`` is ``q < alpha`` (``significant_by="wilcoxon"``), ``q_crossed < alpha``
    (``"crossed"``) or ``q_perm < alpha`` (``"permutation"``); the ``significant_by`` column names the
    test. Sorted by that q-value. Refused: an ``alpha`` outside (0, 1) (at 1 or above every head
    would be significant), a group :func:`check_groups` refuses, fewer than 1 permutation.
    """
    check_fraction("alpha", alpha, 0.05)
    check_attention_table(attention)
    check_flags(permutation=permutation)
    check_keys(attention)
    warn_pooled_runs(attention, None, stacklevel=3)
    if attention.empty:
        raise ValueError("attention is an empty table (filtered to nothing?): there are no heads to compare")
    check_groups(attention, high, low, attention=True)
    if "A" in (high, low):  # every attention row is a B or C condition measured against A's
        raise ValueError("high and low must be B or C: an attention table's rows are B and C conditions, each "
                         "measured against A's attention (A is in every row already)")
    check_measure(attention, value)
    if permutation:  # unused without the permutation test
        check_count("n_permutations", n_permutations, 1)
    check_count("seed", seed, 0)
    check_count("tables_joined", tables_joined, 1)
    check_effect("effect", effect)
    effect = deltas_for().get(value, np.nan) if effect is None else effect
    if family not in ("model", "length"):
        raise ValueError(f"family must be 'model' or 'length', got {family!r}")
    if significant_by not in SIGNIFICANT_BY:
        raise ValueError(f"significant_by must be one of {sorted(SIGNIFICANT_BY)}, got {significant_by!r}")
    if segment is not None and not isinstance(segment, str) and not list(segment):
        raise ValueError("segment must be a segment, a list of at least one, or None for all, got []")
    for one in [] if segment is None else [segment] if isinstance(segment, str) else list(segment):
        check_held(attention, "segment", "segment", one)
    att = with_settings(attention[attention.group.isin([high, low])])
    if segment is not None:
        att = att[att.segment.isin([segment] if isinstance(segment, str) else list(segment))]
    blocks = present_columns(att, ("model", "placement", "isolation", "prefix_len", "segment"))
    columns = blocks + ["layer", "head", "n_prompts", "n_prefixes_high", "n_prefixes_low", "design", "mean_diff",
                        "p", "q", "p_crossed", "q_crossed", "prefix_sd", "power_lone", "p_perm", "q_perm", "perm_exact",
                        "significant", "significant_by"]
    units = cell_means(att, value, blocks + ["layer", "head"])
    units = units[units[value].notna()]
    parts = []
    for key, sub in (units.groupby(blocks, observed=True, sort=True) if blocks else [((), units)]):
        key = key if isinstance(key, tuple) else (key,)
        if not ((sub.group == high).any() and (sub.group == low).any()):
            continue
        part = _head_block(sub, value, high, low, "greater", n_permutations, seed, permutation)
        for col, v in zip(blocks, key):
            part[col] = v
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=columns)
    out = pd.concat(parts, ignore_index=True)
    fam = present_columns(out, ("model",)) if family == "model" else blocks
    out["q"] = benjamini_hochberg_by(out, "p", fam)
    out["q_crossed"] = benjamini_hochberg_by(out, "p_crossed", fam)
    out["q_perm"] = benjamini_hochberg_by(out, "p_perm", fam)
    out["power_lone"] = _lone_head_power(out, fam, alpha / tables_joined, "greater", effect)
    q_col = SIGNIFICANT_BY[significant_by]
    out["significant"] = out[q_col] < alpha
    out["significant_by"] = significant_by
    out = out[columns]
    return out.sort_values([q_col, "mean_diff"], ascending=[True, False], na_position="last").reset_index(drop=True)
