"""The tables the claims are computed on, and the crossed means and intervals of their slices.

A claim reads ``Y[prompt, prefix, k]``: one group's cells per prompt and prefix at each of ``k``
layers, prefix lengths or contrasts (:func:`cube`), cut to the prompts and prefixes complete at every
``k`` (:func:`complete_cube`). Its means and intervals treat prompts and prefixes as crossed random
factors (:mod:`harness.analysis.crossed_variance`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.checks import generator
from harness.analysis.crossed_variance import complete_crossing, group_mean
from harness.analysis.descriptive import CONFIDENCE, with_settings


def complete_cube(Y: np.ndarray) -> np.ndarray:
    """``Y[prompt, prefix, k]`` cut to the prompts and prefixes complete at every ``k``."""
    rows, cols, _ = complete_crossing(np.where(np.isfinite(Y).all(-1), 0.0, np.nan))
    return Y[np.ix_(rows, cols)]


def crossed_mean_intervals(Y: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, ...]:
    """``(mean, low, high)`` per ``k`` of ``Y[..., prompt, prefix, k]``: the crossed t interval of
    each slice (:func:`harness.analysis.crossed_variance.group_mean`); NaN where it has no variance,
    or no cells (a crossing left empty: two runs' banks that never met)."""
    Y = np.asarray(Y, dtype=float)
    if 0 in Y.shape[-3:-1]:
        nan = np.full(Y.shape[:-3] + Y.shape[-1:], np.nan)
        return nan, nan, nan
    est = group_mean(np.moveaxis(Y, -1, -3))
    low, high = est.interval(confidence)
    return est.statistic, low, high


def min_contrast_interval(Y: np.ndarray, weights: np.ndarray, confidence: float = CONFIDENCE
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(low, high, estimate)`` for the smaller of the contrasts ``weights`` [2, k] of
    ``Y[..., prompt, prefix, k]``'s crossed means: lower end the smaller of the two ``confidence``
    lower ends, upper end the smaller of the two upper ends at ``1 - (1 - confidence) / 2`` (module
    docstring). Batched over leading axes."""
    Z = np.einsum("...pxk,ck->...pxc", np.asarray(Y, dtype=float), np.asarray(weights, dtype=float))
    est = group_mean(np.moveaxis(Z, -1, -3))                      # (..., 2)
    low, _ = est.interval(confidence)
    _, high = est.interval(1 - (1 - confidence) / 2)
    return np.min(low, -1), np.min(high, -1), np.min(est.statistic, -1)


def cube(df: pd.DataFrame, value: str, axis: str) -> tuple[np.ndarray, list]:
    """``Y[prompt, prefix, axis value]`` (NaN where a cell is missing) and the axis values: the table
    a claim's crossed statistic is computed on."""
    table = df.pivot_table(index=["prompt_id", "prefix_id"], columns=axis, values=value, aggfunc="mean",
                           observed=True)
    prompts = sorted(df.prompt_id.unique())
    prefixes = sorted(df.prefix_id.unique())
    full = pd.MultiIndex.from_product([prompts, prefixes], names=["prompt_id", "prefix_id"])
    table = table.reindex(full)
    return table.to_numpy(dtype=float).reshape(len(prompts), len(prefixes), table.shape[1]), list(table.columns)


def crossed_means(Y: np.ndarray, n_resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean over prompts and prefixes of ``Y[prompt, prefix, k]`` per ``k``: observed, and under
    ``n_resamples`` crossed resamples (prompts with replacement and, independently, prefixes with
    replacement; missing cells drop out of the weighted means). Returns ``(observed [K],
    resampled [n_resamples, K])``."""
    rng = generator(seed)
    n_p, n_x = Y.shape[:2]
    W = rng.multinomial(n_p, np.full(n_p, 1 / n_p), size=n_resamples).astype(float)
    V = rng.multinomial(n_x, np.full(n_x, 1 / n_x), size=n_resamples).astype(float)
    ok = np.isfinite(Y)
    Y0 = np.where(ok, Y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = Y0.sum((0, 1)) / ok.sum((0, 1))
        resampled = np.einsum("rp,rx,pxk->rk", W, V, Y0) / np.einsum("rp,rx,pxk->rk", W, V, ok.astype(float))
    return observed, resampled


def claim3_cells(conditions: pd.DataFrame, by: Sequence[str] = ("model", "placement")
                 ) -> list[tuple[tuple, pd.DataFrame, str]]:
    """Claim 3's cells: ``(key, rows, note)`` per ``by`` cell holding groups B and C, its B and C
    rows at the prefix lengths every one of its B and C prefixes was measured at. Claim 3 pools C - B
    over lengths, so a prefix measured at lengths the others were not (two runs of different banks
    and lengths read together) would carry its lengths into the difference; ``note`` says which
    lengths were left out, and a cell whose prefixes share no length has no rows and says why. The
    claims page and ``harness plan`` read the same cells."""
    cond = with_settings(conditions)
    cells = []
    for key, sub in cond.groupby(list(by), observed=True, sort=True):
        sub = sub[sub.group.astype(str).isin(["B", "C"])]
        if set(sub.group.astype(str)) != {"B", "C"}:
            continue
        per_prefix = sub.groupby("prefix_id", observed=True).prefix_len.agg(lambda s: frozenset(int(v) for v in s))
        common = frozenset.intersection(*per_prefix)
        every = frozenset.union(*per_prefix)
        note = ""
        if common != every:
            sets = per_prefix.value_counts()
            seen = "; ".join(f"{n} at {sorted(lengths)}" for lengths, n in sets.items())
            note = (f"its B and C prefixes were measured at different lengths ({seen}): C - B is pooled over the "
                    f"lengths every prefix has, {sorted(common)}" if common else
                    f"its B and C prefixes were measured at different lengths ({seen}) and share none, so C - B "
                    f"cannot be pooled over lengths without comparing one length with another (read the runs "
                    f"separately, or give them the same prefix.lengths)")
            sub = sub[sub.prefix_len.isin(common)]
        # a failed condition leaves its prompt and prefix fewer lengths: pooled, its cell would weigh them otherwise
        lengths = sub.groupby(["prompt_id", "prefix_id"], observed=True).prefix_len.transform("nunique")
        if common and (lengths < len(common)).any():
            pairs = sub[lengths < len(common)][["prompt_id", "prefix_id"]].drop_duplicates()
            note = "; ".join(filter(None, [note, f"{len(pairs)} prompt x prefix pair(s) missing a length (a failed "
                                                 f"condition) left out, so each pair pools the same lengths"]))
            sub = sub[lengths == len(common)]
        cells.append((key if isinstance(key, tuple) else (key,), sub, note))
    return cells
