"""Statistics over prompts and prefixes: DataFrame in, DataFrame out, no I/O.

Two kinds of claim, and the numbers that support each (DESIGN.md section 3):

* **About these prefixes** ("these five instruction-like texts drift more than those five neutral
  ones"). Prompts are the only random factor: within a prompt, a group's drift at one length is the
  mean over that group's prefixes; intervals are bootstrap intervals over prompts (BCa where it
  applies, else percentile; the ``ci_method`` column says which), the C-minus-B contrast is paired by
  prompt and tested with a Wilcoxon signed-rank test. :func:`drift_summary`, :func:`contrast`,
  :func:`layer_profile` and the Wilcoxon columns of :func:`head_contrasts` are of this kind.
* **About instruction-like content in general.** Every prompt meets every prefix, so prompts and
  prefixes are crossed random factors, and the prefixes are few. Intervals come from a two-way
  bootstrap that resamples prompts and, independently, prefixes (:func:`two_way_bootstrap`), and
  p-values from permuting prefix labels (:func:`prefix_permutation_test`). With five prefixes per
  group these are necessarily much weaker than the prompt-only numbers; that is the honest answer.
  :func:`compare_groups` puts both analyses side by side; a report leads with the second.

Attention tables are summarised with one rule (:func:`weighted_segment_mean`): per condition, the
mean over layers and heads of the segment average weighted by ``n_queries``, then the mean over the
group's prefixes per prompt, so every table and figure agrees with ``attn_kl_mean`` in conditions.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

CONFIDENCE = 0.95
N_RESAMPLES = 2000
N_PERMUTATIONS = 10_000
HEAD_PERMUTATIONS = 2000
CONTRAST_BY = ("model", "isolation", "prefix_len")
GROUP_BY = ("model", "isolation", "group", "prefix_len")

CLAIM_PROMPTS = "these prefixes (prompts resampled)"
CLAIM_GENERAL = "instruction-like content in general (prompts and prefixes resampled)"


# --------------------------------------------------------------------------------------------
# Prompt-only intervals and tests
# --------------------------------------------------------------------------------------------

def bootstrap_interval(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                       seed: int = 0, method: str = "BCa") -> tuple[float, float, str]:
    """Bootstrap interval for the mean of ``values`` and the method that produced it.

    ``method="BCa"`` is used where it applies (at least 8 distinct values and a non-degenerate
    result), otherwise the percentile interval. Returns ``(low, high, method_used)`` with
    ``method_used`` one of ``"BCa"``, ``"percentile"``, ``"degenerate"`` (all values equal: the
    interval is that value) or ``"none"`` (fewer than 2 values: NaN). Prompt-only: supports claims
    about *these* prefixes.
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < 2:
        return (np.nan, np.nan, "none")
    if np.all(values == values[0]):
        return (float(values[0]), float(values[0]), "degenerate")
    if method not in ("BCa", "percentile"):
        raise ValueError(f"method must be 'BCa' or 'percentile', got {method!r}")
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
                 seed: int = 0, method: str = "percentile") -> tuple[float, float]:
    """Bootstrap interval for the mean of ``values`` (NaN when fewer than 2 values).

    Percentile by default (what existing callers get); ``method="BCa"`` uses BCa where it applies
    and falls back to percentile (see :func:`bootstrap_interval`, which also says which was used).
    """
    low, high, _ = bootstrap_interval(values, confidence, n_resamples, seed, method)
    return (low, high)


def with_settings(df: pd.DataFrame) -> pd.DataFrame:
    """Fold ``beta`` into ``isolation`` (``decay(4)``), so one key names each isolation setting
    and no grouping has to cope with a null beta."""
    if "beta" not in df.columns:
        return df
    labels = [f"decay({b:g})" if m == "decay" else str(m) for m, b in zip(df["isolation"], df["beta"])]
    return df.drop(columns="beta").assign(isolation=pd.Categorical(labels))


def _present(df: pd.DataFrame, by) -> list[str]:
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


def _summarise(per: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
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
    conditions = with_settings(conditions)
    by = _present(conditions, by)
    return _summarise(per_prompt(conditions, value, by), value, by)


def contrast(conditions: pd.DataFrame, value: str = "norm_edit_distance", high: str = "C", low: str = "B",
             by: tuple[str, ...] = CONTRAST_BY) -> pd.DataFrame:
    """``high`` minus ``low`` at each length, paired by prompt: mean difference, bootstrap CI over
    prompts (``ci_method``), and a two-sided Wilcoxon signed-rank p-value (NaN when every difference
    is zero). Prompt-only: a claim about *these* prefixes; see :func:`compare_groups` for the claim
    about the content in general."""
    conditions = with_settings(conditions)
    by = _present(conditions, by)
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


def _wilcoxon_rows(D: np.ndarray, alternative: str) -> np.ndarray:
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
    p = np.asarray(p, dtype=float)
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
    family = _present(table, family)
    if not family:
        return benjamini_hochberg(values)
    for idx in table.groupby(family, observed=True, dropna=False, sort=False).indices.values():
        q[idx] = benjamini_hochberg(values[idx])
    return q


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


# --------------------------------------------------------------------------------------------
# Attention tables
# --------------------------------------------------------------------------------------------

CONDITION_KEYS = ("model", "isolation", "group", "prefix_id", "prefix_len", "prompt_id")


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
    att = with_settings(attention)
    by = _present(att, by)
    cond = list(dict.fromkeys(by + _present(att, CONDITION_KEYS)))
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
    weighted by ``n_queries``, :func:`weighted_segment_mean`), bootstrap CI over prompts."""
    att = attention if segment is None else attention[attention.segment == segment]
    by = _present(with_settings(att), ("model", "isolation", "group", "prefix_len", "layer"))
    return _summarise(weighted_segment_mean(att, value, by), value, by)


def head_map(attention: pd.DataFrame, group: str = "C", value: str = "kl", segment: str | None = None) -> pd.DataFrame:
    """Mean ``value`` per prefix length, layer and head for one group (per prompt first, segments
    weighted by ``n_queries``: :func:`weighted_segment_mean`)."""
    att = attention[attention.group == group]
    if segment is not None:
        att = att[att.segment == segment]
    by = _present(with_settings(att), ("model", "isolation", "prefix_len", "layer", "head"))
    per = weighted_segment_mean(att, value, by)
    return per.groupby(by, observed=True)[value].mean().reset_index()


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
    blocks = _present(att, ("model", "isolation", "prefix_len", "segment"))
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


# --------------------------------------------------------------------------------------------
# Behaviour: first divergence and target hits
# --------------------------------------------------------------------------------------------

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
    prompt's (and prefix's) multiplicity.

    Columns: by..., k, survival, ci_low, ci_high, n (conditions), n_prompts.
    """
    df = with_settings(conditions)
    by = _present(df, by)
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
        rng = np.random.default_rng(seed)
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


def rate_summary(conditions: pd.DataFrame, hit: str = "target_hit", by: Sequence[str] = GROUP_BY,
                 n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Hit rate (e.g. ``target_hit``) per group and length with a 95% percentile interval.

    ``rate`` is the mean over prefixes of each prefix's hit rate over prompts (with a complete
    crossing: the share of conditions that hit). The interval resamples prompts and, independently,
    prefixes (``resampled="prompts x prefixes"``: the claim about such prefixes in general) for
    groups with prefixes, and prompts only for A (``"prompts"``: its base rate). Rows whose ``hit``
    is null are left out; an absent ``hit`` column gives an empty table.

    Columns: by..., rate, ci_low, ci_high, n_hits, n_conditions, n_prompts, n_prefixes, resampled.
    """
    df = with_settings(conditions)
    by = _present(df, by)
    columns = by + ["rate", "ci_low", "ci_high", "n_hits", "n_conditions", "n_prompts", "n_prefixes", "resampled"]
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
        samples = _crossed_resamples(Y, blocks, n_resamples, np.random.default_rng(seed),
                                     resample_prefixes=bool(with_prefix))
        low, high = _percentile(samples, confidence)
        rows.append({**dict(zip(by, key)), "rate": rate, "ci_low": low, "ci_high": high,
                     "n_hits": int(n_hits), "n_conditions": int(n_conditions), "n_prompts": len(prompts),
                     "n_prefixes": int(cell["prefix_id"].nunique()),
                     "resampled": "prompts x prefixes" if with_prefix else "prompts"})
    return pd.DataFrame(rows, columns=columns)
