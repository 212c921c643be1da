"""Inference with prompts and prefixes as crossed random factors: DataFrame in, DataFrame out.

Every prompt meets every prefix, so a claim about instruction-like content *in general* must
treat the prefixes as a random sample too, not only the prompts (DESIGN.md section 3). This module
holds that half of the statistics (:mod:`harness.stats` holds the prompt-only intervals and the
descriptive summaries):

* :func:`prefix_permutation_test`: permute C/B labels among prefixes (sign flips within matched
  pairs), exact when the relabelings are few;
* :func:`two_way_bootstrap`: resample prompts and, independently, prefixes;
* :func:`compare_groups`: both analyses next to the prompt-only ones, with the claim each supports;
* :func:`head_contrasts`: per attention head, prompt-level Wilcoxon and prefix-level permutation
  tests with Benjamini-Hochberg over the whole reported family;
* :func:`rate_summary`: behavioural hit rates with crossed intervals.

It is longer than the project's other modules on purpose: every function here rests on the same
crossed-design machinery (the prompts x prefixes cell layout, relabelings, crossed resamples), one
concept that splitting would scatter.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .stats import (CLAIM_GENERAL, CLAIM_PROMPTS, CONFIDENCE, CONTRAST_BY, GROUP_BY, HEAD_PERMUTATIONS,
                    N_PERMUTATIONS, N_RESAMPLES, _present, _wilcoxon_rows, benjamini_hochberg_by, bootstrap_interval,
                    wilcoxon_p, with_settings)

# --------------------------------------------------------------------------------------------
# Crossed prompts x prefixes
# --------------------------------------------------------------------------------------------

def cell_means(df: pd.DataFrame, value: str, by: Sequence[str]) -> pd.DataFrame:
    """The unit table of the crossed design: one row per (``by``..., group, prompt_id, prefix_id)
    cell holding the mean of ``value`` over that cell's rows (repeats, or layers/heads/segments not
    in ``by``). A ``pair`` column, when present, is carried along (its first non-null value).

    Every prompt x prefix test (:func:`prefix_permutation_test`, :func:`two_way_bootstrap`,
    :func:`compare_groups`, :func:`head_contrasts`) works from this table. ``beta`` is folded into
    ``isolation`` first (:func:`with_settings`); ``by`` columns absent from ``df`` are skipped.
    """
    df = with_settings(df)
    keys = list(dict.fromkeys(_present(df, by) + ["group", "prompt_id", "prefix_id"]))
    agg = {value: (value, "mean")}
    if "pair" in df.columns and "pair" not in keys:
        agg["pair"] = ("pair", "first")
    return df.groupby(keys, observed=True, dropna=False, sort=True).agg(**agg).reset_index()


@dataclass
class _Layout:
    """One by-cell of a high/low comparison as a prompts x prefixes matrix."""
    Y: np.ndarray            # (n_prompts, n_prefixes), NaN where a cell is missing
    is_high: np.ndarray      # (n_prefixes,) bool
    pairs: tuple[np.ndarray, np.ndarray] | None  # (high index, low index) per pair, or None (unpaired)

    @property
    def n_high(self) -> int:
        return int(self.is_high.sum())

    @property
    def n_low(self) -> int:
        return int((~self.is_high).sum())

    @property
    def design(self) -> str:
        return "paired" if self.pairs is not None else "unpaired"

    def prefix_means(self) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(self.Y, axis=0)

    def statistic(self) -> float:
        m = self.prefix_means()
        return float(m[self.is_high].mean() - m[~self.is_high].mean()) if self.n_high and self.n_low else np.nan

    def prompt_diffs(self) -> np.ndarray:
        """Per prompt: mean over high prefixes minus mean over low prefixes (prompt-only unit)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(self.Y[:, self.is_high], axis=1) - np.nanmean(self.Y[:, ~self.is_high], axis=1)


def _pairs_of(keys: list[tuple[str, object]], pair_of: dict, high: str, low: str):
    """(high index, low index) per pair when every prefix has a pair and each pair has exactly one
    high and one low prefix; else None."""
    if not pair_of:
        return None
    members: dict[object, dict[str, list[int]]] = {}
    for i, (group, prefix) in enumerate(keys):
        pair = pair_of.get((group, prefix))
        if pair is None or pd.isna(pair):
            return None
        members.setdefault(pair, {high: [], low: []})[group].append(i)
    if not members or any(len(m[high]) != 1 or len(m[low]) != 1 for m in members.values()):
        return None
    order = sorted(members, key=str)
    return (np.array([members[p][high][0] for p in order]), np.array([members[p][low][0] for p in order]))


def _layout(cells: pd.DataFrame, value: str, high: str, low: str) -> _Layout:
    """Matrix of one by-cell of :func:`cell_means` output. Prompts are those with at least one
    finite high and one finite low cell; prefixes those with at least one finite cell there."""
    cells = cells[cells.group.isin([high, low]) & cells[value].notna()]
    groups = cells["group"].astype(str).to_numpy()
    has_high = set(cells.prompt_id[groups == high])
    has_low = set(cells.prompt_id[groups == low])
    cells = cells[cells.prompt_id.isin(has_high & has_low)]
    groups = cells["group"].astype(str).to_numpy()
    prefix_keys = list(zip(groups, cells["prefix_id"].astype(object)))
    keys = sorted(set(prefix_keys), key=lambda k: (k[0] != high, str(k[1])))
    k_index = {k: i for i, k in enumerate(keys)}
    p_codes, _ = pd.factorize(cells["prompt_id"].astype(object), sort=True)
    Y = np.full((p_codes.max() + 1 if len(p_codes) else 0, len(keys)), np.nan)
    Y[p_codes, [k_index[k] for k in prefix_keys]] = cells[value].to_numpy(dtype=float)
    is_high = np.array([g == high for g, _ in keys], dtype=bool)
    pair_of = {}
    if "pair" in cells.columns:
        pair_of = dict(zip(prefix_keys, cells["pair"].astype(object)))
    return _Layout(Y, is_high, _pairs_of(keys, pair_of, high, low))


def _cells(df: pd.DataFrame, value: str, high: str, low: str, by) -> Iterator[tuple[dict, _Layout]]:
    """(key, layout) for every ``by`` cell in which ``high`` or ``low`` occurs."""
    df = with_settings(df)
    by = _present(df, by)
    sub = df[df.group.isin([high, low])]
    units = cell_means(sub, value, by)
    if not by:
        yield {}, _layout(units, value, high, low)
        return
    for key, cell in units.groupby(by, observed=True, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        yield dict(zip(by, key)), _layout(cell, value, high, low)


def _relabelings(is_high: np.ndarray, pairs, n_permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Weight matrix ``W`` (relabelings x prefixes) with statistic = ``W @ prefix_means``, and
    whether it enumerates every distinct relabeling (``exact``) or is a Monte Carlo sample.

    Paired: sign flips of the per-pair differences (2**pairs relabelings). Unpaired: every choice of
    which ``n_high`` of the prefixes are labelled high (C(n, n_high) relabelings)."""
    K = len(is_high)
    if pairs is not None:
        hi, lo = pairs
        P = len(hi)
        if 2 ** P <= n_permutations:
            signs = np.array(list(itertools.product((1.0, -1.0), repeat=P)))
            exact = True
        else:
            signs = rng.choice(np.array([1.0, -1.0]), size=(n_permutations, P))
            exact = False
        W = np.zeros((len(signs), K))
        W[:, hi] = signs / P
        W[:, lo] = -signs / P
        return W, exact
    n_high = int(is_high.sum())
    n_low = K - n_high
    if math.comb(K, n_high) <= n_permutations:
        chosen = np.zeros((math.comb(K, n_high), K), dtype=bool)
        for r, combo in enumerate(itertools.combinations(range(K), n_high)):
            chosen[r, list(combo)] = True
        exact = True
    else:
        chosen = rng.permuted(np.tile(is_high, (n_permutations, 1)), axis=1)
        exact = False
    return np.where(chosen, 1.0 / n_high, -1.0 / n_low), exact


def _perm_pvalues(M: np.ndarray, w0: np.ndarray, W: np.ndarray, exact: bool, alternative: str) -> np.ndarray:
    """p-values for each row of prefix means ``M`` (tests x prefixes): observed statistic
    ``M @ w0`` against the relabeled statistics ``M @ W.T``. Exact: the fraction of all relabelings
    at least as extreme (the observed one among them); Monte Carlo: (b + 1) / (m + 1)."""
    T0 = M @ w0
    T = M @ W.T
    scale = np.nanmax(np.abs(M), axis=1, initial=0.0)
    tol = 1e-9 * np.where(scale > 0, scale, 1.0)
    if alternative == "greater":
        extreme = T >= (T0 - tol)[:, None]
    elif alternative == "less":
        extreme = T <= (T0 + tol)[:, None]
    elif alternative == "two-sided":
        extreme = np.abs(T) >= (np.abs(T0) - tol)[:, None]
    else:
        raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    b = extreme.sum(axis=1)
    p = b / W.shape[0] if exact else (b + 1) / (W.shape[0] + 1)
    return np.where(np.isfinite(T0), p, np.nan)


def _observed_weights(lay: _Layout) -> np.ndarray:
    w = np.where(lay.is_high, 1.0 / max(lay.n_high, 1), -1.0 / max(lay.n_low, 1))
    return w


def _permutation(lay: _Layout, n_permutations: int, seed: int, alternative: str) -> tuple[float, bool]:
    if lay.n_high == 0 or lay.n_low == 0 or lay.Y.shape[0] == 0:
        return np.nan, False
    W, exact = _relabelings(lay.is_high, lay.pairs, n_permutations, np.random.default_rng(seed))
    p = _perm_pvalues(lay.prefix_means()[None, :], _observed_weights(lay), W, exact, alternative)
    return float(p[0]), exact


def prefix_permutation_test(df: pd.DataFrame, value: str, high: str = "C", low: str = "B",
                            by: Sequence[str] = CONTRAST_BY, n_permutations: int = N_PERMUTATIONS,
                            seed: int = 0, alternative: str = "two-sided") -> pd.DataFrame:
    """Is ``high`` different from ``low`` beyond what the particular prefixes explain?

    Per ``by`` cell the statistic is the mean over ``high`` prefixes of each prefix's mean over
    prompts minus the same for ``low`` (with a complete crossing this equals the prompt-paired
    mean difference). Null: prefix labels are exchangeable. When every prefix has a ``pair`` and each
    pair holds exactly one high and one low prefix, labels are permuted within pairs (sign flips of
    per-pair differences, design ``"paired"``); otherwise high/low labels are permuted among all the
    prefixes (``"unpaired"``). Exact enumeration when the number of distinct relabelings is at most
    ``n_permutations`` (``exact`` True; p = share of relabelings at least as extreme, the observed
    one included), else a Monte Carlo sample with p = (b + 1) / (m + 1). ``alternative``:
    ``"two-sided"`` (|statistic|), ``"greater"`` or ``"less"``.

    Supports the claim about instruction-like content *in general* (prefixes as a random factor).
    With k prefixes per group the smallest attainable p is 1 / C(2k, k) (two-sided: twice that),
    e.g. 2/6 with two prefixes per group.

    Columns: by..., n_prompts, n_prefixes_high, n_prefixes_low, design, statistic, p_perm, exact.
    """
    rows = []
    for key, lay in _cells(df, value, high, low, by):
        p, exact = _permutation(lay, n_permutations, seed, alternative)
        rows.append({**key, "n_prompts": lay.Y.shape[0], "n_prefixes_high": lay.n_high,
                     "n_prefixes_low": lay.n_low, "design": lay.design, "statistic": lay.statistic(),
                     "p_perm": p, "exact": exact})
    return pd.DataFrame(rows, columns=_present(with_settings(df), by) + [
        "n_prompts", "n_prefixes_high", "n_prefixes_low", "design", "statistic", "p_perm", "exact"])


def _crossed_resamples(Y: np.ndarray, blocks: list[tuple[np.ndarray, float]], n_resamples: int,
                       rng: np.random.Generator, pairs=None, resample_prefixes: bool = True) -> np.ndarray:
    """Statistic ``sum(sign * mean over block's prefixes of prefix mean over prompts)`` recomputed
    on ``n_resamples`` two-way bootstrap resamples of ``Y`` (prompts x prefixes).

    Prompts are drawn with replacement; independently, each block's prefixes are drawn with
    replacement from that block (or, when ``pairs`` is given, pairs are drawn and both members
    follow). Multiplicities become weights, so missing cells (NaN) simply drop out."""
    nP, K = Y.shape
    mask = np.isfinite(Y)
    Y0 = np.where(mask, Y, 0.0)
    Wp = rng.multinomial(nP, np.full(nP, 1.0 / nP), size=n_resamples).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        PM = (Wp @ Y0) / (Wp @ mask)                      # prefix means per resample
    V = np.ones((n_resamples, K))
    if resample_prefixes:
        if pairs is not None:
            hi, lo = pairs
            counts = rng.multinomial(len(hi), np.full(len(hi), 1.0 / len(hi)), size=n_resamples)
            V[:, hi] = counts
            V[:, lo] = counts
        else:
            for idx, _ in blocks:
                V[:, idx] = rng.multinomial(len(idx), np.full(len(idx), 1.0 / len(idx)), size=n_resamples)
    out = np.zeros(n_resamples)
    for idx, sign in blocks:
        pm, v = PM[:, idx], V[:, idx]
        ok = np.isfinite(pm) & (v > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out += sign * np.where(ok, pm * v, 0.0).sum(axis=1) / np.where(ok, v, 0.0).sum(axis=1)
    return out


def _percentile(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if len(samples) == 0:
        return (np.nan, np.nan)
    a = (1 - confidence) / 2
    low, high = np.quantile(samples, [a, 1 - a])
    return (float(low), float(high))


def _two_way(lay: _Layout, n_resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    if lay.n_high == 0 or lay.n_low == 0 or lay.Y.shape[0] == 0:
        return (np.nan, np.nan)
    blocks = [(np.flatnonzero(lay.is_high), 1.0), (np.flatnonzero(~lay.is_high), -1.0)]
    samples = _crossed_resamples(lay.Y, blocks, n_resamples, np.random.default_rng(seed), lay.pairs)
    return _percentile(samples, confidence)


def two_way_bootstrap(df: pd.DataFrame, value: str, high: str = "C", low: str = "B",
                      by: Sequence[str] = CONTRAST_BY, n_resamples: int = N_RESAMPLES, seed: int = 0,
                      confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Percentile interval for ``high`` minus ``low`` with prompts and prefixes as crossed random
    factors.

    Each resample draws prompts with replacement and, independently, ``high`` prefixes from the high
    set and ``low`` prefixes from the low set with replacement (pairs with replacement in the paired
    design, see :func:`prefix_permutation_test`), then recomputes the statistic (mean over high
    prefixes of prefix means over prompts, minus the same for low) with the multiplicities as
    weights. Supports the claim about instruction-like content *in general*.

    Columns: by..., statistic, ci_low, ci_high, n_prompts, n_prefixes_high, n_prefixes_low, design.
    """
    rows = []
    for key, lay in _cells(df, value, high, low, by):
        low_ci, high_ci = _two_way(lay, n_resamples, seed, confidence)
        rows.append({**key, "statistic": lay.statistic(), "ci_low": low_ci, "ci_high": high_ci,
                     "n_prompts": lay.Y.shape[0], "n_prefixes_high": lay.n_high, "n_prefixes_low": lay.n_low,
                     "design": lay.design})
    return pd.DataFrame(rows, columns=_present(with_settings(df), by) + [
        "statistic", "ci_low", "ci_high", "n_prompts", "n_prefixes_high", "n_prefixes_low", "design"])


def compare_groups(df: pd.DataFrame, value: str = "norm_edit_distance", high: str = "C", low: str = "B",
                   by: Sequence[str] = CONTRAST_BY, n_resamples: int = N_RESAMPLES,
                   n_permutations: int = N_PERMUTATIONS, seed: int = 0, confidence: float = CONFIDENCE,
                   alternative: str = "two-sided") -> pd.DataFrame:
    """``high`` minus ``low`` per ``by`` cell, both analyses side by side, one row per cell.

    * Prompt-only (claim in ``claim_prompts``: about *these* prefixes): ``mean_diff`` (mean over
      prompts of the per-prompt difference), ``ci_low_prompts``/``ci_high_prompts`` (bootstrap over
      prompts, ``ci_method_prompts`` BCa or percentile) and ``wilcoxon_p`` (two-sided).
    * Prompt x prefix (claim in ``claim``: about the content *in general*, the one a report leads
      with): ``statistic`` (equal to ``mean_diff`` when the crossing is complete), ``ci_low``/
      ``ci_high`` (:func:`two_way_bootstrap`), ``p_perm`` and ``exact``
      (:func:`prefix_permutation_test`), ``design``.
    """
    general = CLAIM_GENERAL if (high, low) == ("C", "B") else \
        f"{high} vs {low} content in general (prompts and prefixes resampled)"
    rows = []
    for key, lay in _cells(df, value, high, low, by):
        d = lay.prompt_diffs()
        d = d[np.isfinite(d)]
        lo_p, hi_p, method = bootstrap_interval(d, confidence, n_resamples, seed)
        lo_2, hi_2 = _two_way(lay, n_resamples, seed, confidence)
        p, exact = _permutation(lay, n_permutations, seed, alternative)
        rows.append({**key, "n_prompts": lay.Y.shape[0], "n_prefixes_high": lay.n_high, "n_prefixes_low": lay.n_low,
                     "mean_diff": d.mean() if len(d) else np.nan, "ci_low_prompts": lo_p, "ci_high_prompts": hi_p,
                     "ci_method_prompts": method, "wilcoxon_p": wilcoxon_p(d), "claim_prompts": CLAIM_PROMPTS,
                     "statistic": lay.statistic(), "ci_low": lo_2, "ci_high": hi_2, "p_perm": p, "exact": exact,
                     "design": lay.design, "claim": general})
    return pd.DataFrame(rows, columns=_present(with_settings(df), by) + [
        "n_prompts", "n_prefixes_high", "n_prefixes_low", "mean_diff", "ci_low_prompts", "ci_high_prompts",
        "ci_method_prompts", "wilcoxon_p", "claim_prompts", "statistic", "ci_low", "ci_high", "p_perm", "exact",
        "design", "claim"])


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
    p_w = _wilcoxon_rows(D if all_used else np.where(usable, D, np.nan), alternative)
    out = pd.DataFrame({"layer": heads.get_level_values(0), "head": heads.get_level_values(1),
                        "n_prompts": n_prompts, "n_prefixes_high": n_high, "n_prefixes_low": n_low,
                        "mean_diff": np.where(n_prompts > 0, np.nansum(D, axis=1) / np.maximum(n_prompts, 1), np.nan),
                        "p": p_w})
    pairs = None
    if "pair" in sub.columns:
        pairs = _pairs_of(keys, dict(zip(prefix_keys, sub["pair"].astype(object))), high, low)
    out["design"] = "paired" if pairs is not None else "unpaired"
    if permutation and n_high and n_low:
        W, exact = _relabelings(is_high, pairs, n_permutations, np.random.default_rng(seed))
        w0 = np.where(is_high, 1.0 / n_high, -1.0 / n_low)
        out["p_perm"] = _perm_pvalues(M, w0, W, exact, alternative)
        out["perm_exact"] = exact
    else:
        out["p_perm"] = np.nan
        out["perm_exact"] = False
    return out


def head_contrasts(attention: pd.DataFrame, value: str = "kl", segment: str | Sequence[str] | None = "task",
                   alpha: float = 0.05, high: str = "C", low: str = "B", family: str = "model",
                   significant_by: str = "wilcoxon", permutation: bool = True,
                   n_permutations: int = HEAD_PERMUTATIONS, seed: int = 0) -> pd.DataFrame:
    """Per head: does ``high``'s drift exceed ``low``'s? Two one-sided tests per head.

    * ``p``: Wilcoxon signed-rank over prompts of the per-prompt difference (paired by prompt);
      about *these* prefixes.
    * ``p_perm``: prefix-label permutation on the head's prompt x prefix cells
      (:func:`prefix_permutation_test`, exact when the relabelings number at most
      ``n_permutations``, else that many Monte Carlo draws); about the content *in general*. With
      k prefixes per group its smallest value is 1 / C(2k, k) (1/252 for 5 + 5), which a large
      family may never push below ``alpha``.

    ``q`` and ``q_perm`` are Benjamini-Hochberg over the family: ``family="model"`` (default) is
    every row this call returns for a model (all isolation settings x lengths x segments x heads);
    ``family="length"`` is each (model, isolation, prefix_len, segment) separately (the old rule).
    ``segment``: one segment, a list, or None for all; each segment is its own set of rows.
    ``significant`` is ``q < alpha`` (``significant_by="wilcoxon"``) or ``q_perm < alpha``
    (``"permutation"``); the ``significant_by`` column names the test. Sorted by that q-value.
    """
    if family not in ("model", "length"):
        raise ValueError(f"family must be 'model' or 'length', got {family!r}")
    if significant_by not in ("wilcoxon", "permutation"):
        raise ValueError(f"significant_by must be 'wilcoxon' or 'permutation', got {significant_by!r}")
    att = with_settings(attention[attention.group.isin([high, low])])
    if segment is not None:
        att = att[att.segment.isin([segment] if isinstance(segment, str) else list(segment))]
    blocks = _present(att, ("model", "placement", "isolation", "prefix_len", "segment"))
    columns = blocks + ["layer", "head", "n_prompts", "n_prefixes_high", "n_prefixes_low", "design", "mean_diff",
                        "p", "q", "p_perm", "q_perm", "perm_exact", "significant", "significant_by"]
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
    fam = _present(out, ("model",)) if family == "model" else blocks
    out["q"] = benjamini_hochberg_by(out, "p", fam)
    out["q_perm"] = benjamini_hochberg_by(out, "p_perm", fam)
    q_col = "q" if significant_by == "wilcoxon" else "q_perm"
    out["significant"] = out[q_col] < alpha
    out["significant_by"] = significant_by
    out = out[columns]
    return out.sort_values([q_col, "mean_diff"], ascending=[True, False], na_position="last").reset_index(drop=True)


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
