"""Inference with prompts and prefixes as crossed random factors: DataFrame in, DataFrame out.

Every prompt meets every prefix, so a claim about instruction-like content *in general* must treat the
prefixes as a random sample too, not only the prompts (docs/statistics.md). This module holds that half
of the statistics (:mod:`harness.analysis.descriptive`: the prompt-only intervals, descriptive summaries):

* :func:`prefix_permutation_test`: permute C/B labels among prefixes (sign flips within matched
  pairs), exact when the relabelings are few;
* :func:`two_way_bootstrap`: resample prompts and, independently, prefixes;
* :func:`compare_groups`: the lead interval and test (:mod:`harness.analysis.lead`) beside the
  prompt-only analyses and the permutation test, with the claim each supports.

It is longer than the project's other modules on purpose: every function here rests on the same crossed
machinery (the prompts x prefixes cell layout, relabelings, resamples), one concept splitting would scatter.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.checks import (check_by, check_conditions_table, check_effect, check_flags, check_hits,
                                     generator)
from harness.analysis.descriptive import (
    CLAIM_GENERAL,
    CLAIM_PROMPTS,
    CONFIDENCE,
    CONTRAST_BY,
    N_PERMUTATIONS,
    N_RESAMPLES,
    bootstrap_interval,
    check_cells,
    check_count,
    check_groups,
    check_measure,
    check_resampling,
    present_columns,
    wilcoxon_p,
    with_settings,
)
from harness.analysis.lead import lead

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
    keys = list(dict.fromkeys(present_columns(df, by) + ["group", "prompt_id", "prefix_id"]))
    agg = {value: (value, "mean")}
    if "pair" in df.columns and "pair" not in keys:
        agg["pair"] = ("pair", "first")
    return df.groupby(keys, observed=True, dropna=False, sort=True).agg(**agg).reset_index()


@dataclass
class CellLayout:
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


def matched_pairs(keys: list[tuple[str, object]], pair_of: dict, high: str, low: str):
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


def _layout(cells: pd.DataFrame, value: str, high: str, low: str) -> CellLayout:
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
    return CellLayout(Y, is_high, matched_pairs(keys, pair_of, high, low))


def cell_layouts(df: pd.DataFrame, value: str, high: str, low: str, by) -> Iterator[tuple[dict, CellLayout]]:
    """(key, layout) for every ``by`` cell in which ``high`` or ``low`` occurs: the prompts x
    prefixes matrix every C-minus-B analysis (tests, intervals, variance components) works on."""
    df = with_settings(df)
    by = present_columns(df, by)
    check_cells(df, high, low, by)
    sub = df[df.group.isin([high, low])]
    units = cell_means(sub, value, by)
    if not by:
        yield {}, _layout(units, value, high, low)
        return
    for key, cell in units.groupby(by, observed=True, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        yield dict(zip(by, key)), _layout(cell, value, high, low)


def relabelings(is_high: np.ndarray, pairs, n_permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
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


def permutation_pvalues(M: np.ndarray, w0: np.ndarray, W: np.ndarray, exact: bool, alternative: str) -> np.ndarray:
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


def _observed_weights(lay: CellLayout) -> np.ndarray:
    w = np.where(lay.is_high, 1.0 / max(lay.n_high, 1), -1.0 / max(lay.n_low, 1))
    return w


def _permutation(lay: CellLayout, n_permutations: int, seed: int, alternative: str) -> tuple[float, bool]:
    if lay.n_high == 0 or lay.n_low == 0 or lay.Y.shape[0] == 0:
        return np.nan, False
    W, exact = relabelings(lay.is_high, lay.pairs, n_permutations, generator(seed))
    p = permutation_pvalues(lay.prefix_means()[None, :], _observed_weights(lay), W, exact, alternative)
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
    e.g. 2/6 with two prefixes per group. Refused: a group :func:`check_groups` refuses, fewer
    than 1 permutation.

    Columns: by..., n_prompts, n_prefixes_high, n_prefixes_low, design, statistic, p_perm, exact.
    """
    check_groups(df, high, low)
    check_measure(df, value)
    check_count("n_permutations", n_permutations, 1)
    by = check_by(df, by, value, contrast=True)
    rows = []
    for key, lay in cell_layouts(df, value, high, low, by):
        p, exact = _permutation(lay, n_permutations, seed, alternative)
        rows.append({**key, "n_prompts": lay.Y.shape[0], "n_prefixes_high": lay.n_high,
                     "n_prefixes_low": lay.n_low, "design": lay.design, "statistic": lay.statistic(),
                     "p_perm": p, "exact": exact})
    return pd.DataFrame(rows, columns=present_columns(with_settings(df), by) + [
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


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap ``samples`` (non-finite ones dropped)."""
    samples = samples[np.isfinite(samples)]
    if len(samples) == 0:
        return (np.nan, np.nan)
    a = (1 - confidence) / 2
    low, high = np.quantile(samples, [a, 1 - a])
    return (float(low), float(high))


def _two_way(lay: CellLayout, n_resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    if lay.n_high == 0 or lay.n_low == 0 or lay.Y.shape[0] == 0:
        return (np.nan, np.nan)
    blocks = [(np.flatnonzero(lay.is_high), 1.0), (np.flatnonzero(~lay.is_high), -1.0)]
    samples = _crossed_resamples(lay.Y, blocks, n_resamples, generator(seed), lay.pairs)
    return percentile_interval(samples, confidence)


def two_way_bootstrap(df: pd.DataFrame, value: str, high: str = "C", low: str = "B",
                      by: Sequence[str] = CONTRAST_BY, n_resamples: int = N_RESAMPLES, seed: int = 0,
                      confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Percentile interval for ``high`` minus ``low`` with prompts and prefixes as crossed random factors.

    Each resample draws prompts with replacement and, independently, ``high`` prefixes from the high
    set and ``low`` prefixes from the low set with replacement (pairs with replacement in the paired
    design, see :func:`prefix_permutation_test`), then recomputes the statistic (mean over high
    prefixes of prefix means over prompts, minus the same for low) with the multiplicities as
    weights. Supports the claim about instruction-like content *in general*. Refused: a group
    :func:`check_groups` refuses, a setting :func:`check_resampling` refuses, A split by length.

    Columns: by..., statistic, ci_low, ci_high, n_prompts, n_prefixes_high, n_prefixes_low, design.
    """
    check_groups(df, high, low)
    check_measure(df, value)
    check_resampling(confidence, n_resamples)
    by = check_by(df, by, value, contrast=True)
    rows = []
    for key, lay in cell_layouts(df, value, high, low, by):
        low_ci, high_ci = _two_way(lay, n_resamples, seed, confidence)
        rows.append({**key, "statistic": lay.statistic(), "ci_low": low_ci, "ci_high": high_ci,
                     "n_prompts": lay.Y.shape[0], "n_prefixes_high": lay.n_high, "n_prefixes_low": lay.n_low,
                     "design": lay.design})
    return pd.DataFrame(rows, columns=present_columns(with_settings(df), by) + [
        "statistic", "ci_low", "ci_high", "n_prompts", "n_prefixes_high", "n_prefixes_low", "design"])


def compare_groups(df: pd.DataFrame, value: str = "norm_edit_distance", high: str = "C", low: str = "B",
                   by: Sequence[str] = CONTRAST_BY, n_resamples: int = N_RESAMPLES,
                   n_permutations: int = N_PERMUTATIONS, seed: int = 0, confidence: float = CONFIDENCE,
                   alternative: str = "two-sided", rate: bool | None = None, power: bool = True,
                   effect: float | None = None) -> pd.DataFrame:
    """``high`` minus ``low`` per ``by`` cell, both analyses side by side, one row per cell.

    * Prompt-only (claim in ``claim_prompts``: about *these* prefixes): ``mean_diff`` (mean over
      prompts of the per-prompt difference), ``ci_low_prompts``/``ci_high_prompts`` (bootstrap over
      prompts, ``ci_method_prompts`` BCa or percentile) and ``wilcoxon_p`` (two-sided).
    * Prompt x prefix (claim in ``claim``: about the content *in general*, the one a report leads
      with): ``statistic`` (``mean_diff`` on a complete crossing; else the complete part's) and the lead
      interval and test of :func:`harness.analysis.lead.lead`: ``ci_low``/``ci_high`` (``ci_method``
      "crossed t", or for a rate, ``rate`` or by default a boolean ``value`` column, "MOVER, crossed
      Wilson"; NaN with ``ci_method`` "none" where the design cannot support an interval, and
      ``ci_note`` says why: print it, never a zero-width or an exploded interval), ``dof``, ``se``,
      ``p_crossed`` (the test the interval inverts: the one to correct for multiplicity), and
      ``prefix_sd`` with ``power`` (the test's power at this design against one prefix-level SD) and
      ``power_low``/``power_high`` (the range that power takes within its components' intervals; NaN
      with ``power=False``: a rate's is simulated, 0.3 s a row; at ``effect``, a Δ, where given). ``p_perm``
      and ``exact`` (:func:`prefix_permutation_test`) stay beside it: with few prompts and a
      prompt-by-group interaction it exceeds its level (``benchmarks/crossed_calibration.py``: up to
      0.43 with 3 prompts), so it is for reference. ``design``: paired or unpaired. Refused at entry: an
      attention table, a group :func:`check_groups` refuses, a ``confidence`` or ``n_resamples``
      :func:`check_resampling` refuses, < 1 permutation, a ``power`` or ``rate`` not True or False."""
    check_conditions_table(df, "df")
    check_groups(df, high, low)
    check_measure(df, value)
    check_resampling(confidence, n_resamples)
    check_count("n_permutations", n_permutations, 1)
    check_effect("effect", effect)
    check_flags(power=power, rate=rate)
    by = check_by(df, by, value, contrast=True)
    if rate and value in df:  # a rate's interval is bounded to [-1, 1]: its values must be hits
        check_hits(df, value)
    general = CLAIM_GENERAL if (high, low) == ("C", "B") else CLAIM_GENERAL.replace("instruction-like", f"{high} vs {low}")
    rows = []
    bounded = rate if rate is not None else (value in df and pd.api.types.is_bool_dtype(df[value].dtype))
    for key, lay in cell_layouts(df, value, high, low, by):
        d = lay.prompt_diffs()
        d = d[np.isfinite(d)]
        lo_p, hi_p, method = bootstrap_interval(d, confidence, n_resamples, seed)
        p, exact = _permutation(lay, n_permutations, seed, alternative)
        general_cols = lead(lay.Y, lay.is_high, lay.pairs, bool(bounded), confidence, alternative, power=power,
                            effect=effect)
        statistic = general_cols.pop("estimate", None)  # missing cells: the complete part's, as its interval is
        rows.append({**key, "n_prompts": lay.Y.shape[0], "n_prefixes_high": lay.n_high, "n_prefixes_low": lay.n_low,
                     "mean_diff": d.mean() if len(d) else np.nan, "ci_low_prompts": lo_p, "ci_high_prompts": hi_p,
                     "ci_method_prompts": method, "wilcoxon_p": wilcoxon_p(d), "claim_prompts": CLAIM_PROMPTS,
                     "statistic": lay.statistic() if statistic is None else statistic, **general_cols, "p_perm": p,
                     "exact": exact, "design": lay.design, "claim": general})
    return pd.DataFrame(rows, columns=present_columns(with_settings(df), by) + COMPARE_COLUMNS)


COMPARE_COLUMNS = ["n_prompts", "n_prefixes_high", "n_prefixes_low", "mean_diff", "ci_low_prompts", "ci_high_prompts",
                   "ci_method_prompts", "wilcoxon_p", "claim_prompts", "statistic", "ci_low", "ci_high", "ci_method",
                   "ci_note", "dof", "se", "p_crossed", "prefix_sd", "power", "power_low", "power_high", "p_perm",
                   "exact", "design", "claim"]
