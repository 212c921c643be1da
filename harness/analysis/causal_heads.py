"""Do the heads a run names carry the effect? Head sets and the causal sweep's effects, with the
AUROC and crossed bootstrap that heads as a detector use (:mod:`harness.analysis.detection`;
stateless: DataFrames in, DataFrames out).

The report names heads by correlation (where C's attention differs most from B's). The causal
test masks the prefix's keys in chosen heads only (``mask_heads``) or everywhere but in them
(``only_heads``; :mod:`harness.inputs.isolation`) and asks how much of the C-minus-B effect goes
away, and how much the chosen heads alone bring back. Heads are chosen on one half of the
prefixes (:func:`split_prefixes`, stratified by group and keeping matched sets together) and tested
on the other, so the test does not reuse the prefixes that named them (the prompts are shared by
both halves); the control is the same number of heads drawn at random from the same layers.

Effects and removals are :func:`harness.analysis.crossed.compare_groups` contrasts (prompts and
prefixes as crossed random factors: crossed t intervals); the share removed, a ratio of two such
contrasts, gets a crossed bootstrap interval (prompts and each group's prefixes resampled).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from harness.analysis.checks import generator
from harness.analysis.crossed import cell_means, compare_groups
from harness.analysis.descriptive import CONFIDENCE, N_RESAMPLES

# What the causal sweep measures: the C-minus-B effect on the word the prefix carries, on the output
# distribution along A's continuation, and on the continuation itself.
CAUSAL_MEASURES = ("target_hit", "output_kl", "norm_edit_distance")
SHARE_RESIDUE = 1e-12  # a share this close to 0 is float residue of two equal effects (share_removed)
DEFAULT_KS = (1, 2, 4, 8, 16)  # head-set sizes tested by default
NONE, ALL = "none", "mask"  # the two settings every head set is compared with


def split_prefixes(conditions: pd.DataFrame, seed: int) -> tuple[set, set]:
    """(choosing, testing): the run's B and C prefixes split in two halves, at random with ``seed``,
    stratified by group: prefixes sharing a ``pair`` (a matched pair or triple) stay on one side
    together, and the units (a prefix, or a pair or triple) are shuffled and halved within each
    stratum of the same composition (a lone B, a lone C, a triple of two C and one B ...), so each half
    holds half of every group's prefixes (within one where a stratum is odd; an odd stratum's extra
    unit goes to the half that has fewer so far). The prompts are not split: both halves use all of
    them, so the test half is new prefixes, not new prompts."""
    rows = conditions[conditions.group.isin(["B", "C"])]
    unit = rows["pair"].astype(object) if "pair" in rows and rows["pair"].notna().all() else rows["prefix_id"]
    keyed = rows.assign(_unit=unit.astype(str), _prefix=rows.prefix_id.astype(str), _group=rows.group.astype(str))
    members = keyed.drop_duplicates(["_unit", "_prefix"]).groupby("_unit")["_group"].agg(lambda g: "".join(sorted(g)))
    rng = generator(seed)
    choose_units: set = set()
    sizes = [0, 0]  # prefixes on each side so far
    for _, units in sorted(members.groupby(members).groups.items()):
        units = sorted(units)
        order = [units[i] for i in rng.permutation(len(units))]
        half = len(order) // 2 + (len(order) % 2 if sizes[0] < sizes[1] else 0)
        choose_units |= set(order[:half])
        width = len(members[units[0]])
        sizes[0] += half * width
        sizes[1] += (len(order) - half) * width
    choose = set(keyed.loc[keyed._unit.isin(choose_units), "_prefix"])
    test = set(keyed.loc[~keyed._unit.isin(choose_units), "_prefix"])
    return choose, test


def rank_heads(attention: pd.DataFrame, prefixes: set, value: str = "capture", segment: str = "task",
               prefix_len: int | None = None) -> pd.DataFrame:
    """Every head's C-minus-B difference in ``value`` on ``prefixes`` only (mean over prompt x
    prefix cells of each group), largest first: columns layer, head, c_mean, b_mean, diff."""
    att = attention[attention.prefix_id.astype(str).isin(prefixes) & attention.group.isin(["B", "C"])
                    & (attention.segment == segment) & (attention.isolation.astype(str) == "none")]
    if prefix_len is not None:
        att = att[att.prefix_len == prefix_len]
    cells = cell_means(att, value, ["layer", "head"])
    means = cells.groupby(["layer", "head", "group"], observed=True)[value].mean().unstack("group")
    out = pd.DataFrame({"c_mean": means["C"], "b_mean": means["B"]}).reset_index()
    out["diff"] = out.c_mean - out.b_mean
    return out.sort_values(["diff", "layer", "head"], ascending=[False, True, True]).reset_index(drop=True)


def random_like(top: Sequence[tuple[int, int]], heads_per_layer: int, rng: np.random.Generator,
                n_layers: int | None = None) -> tuple[tuple[int, int], ...]:
    """As many heads as ``top``, each drawn from the layer of one of ``top``'s heads, none of them in
    ``top`` and none twice (from any of ``n_layers`` layers once a layer has no head left)."""
    taken = set(top)
    n_layers = n_layers or (max(layer for layer, _ in top) + 1 if top else 0)
    out = []
    for layer, _ in top:
        free = [(layer, h) for h in range(heads_per_layer) if (layer, h) not in taken]
        if not free:
            free = [(lay, h) for lay in range(n_layers) for h in range(heads_per_layer) if (lay, h) not in taken]
        if not free:
            raise ValueError(f"{n_layers} layers x {heads_per_layer} heads leave no head outside a set of {len(top)}")
        pick = free[rng.integers(len(free))]
        taken.add(pick)
        out.append(pick)
    return tuple(sorted(out))


def head_sets(ranking: pd.DataFrame, ks: Sequence[int], draws: int, heads_per_layer: int, seed: int
              ) -> dict[str, tuple[tuple[int, int], ...]]:
    """``top{k}`` (the ranking's first k) and ``random{k}.{d}`` (``draws`` controls per k) for every
    k in ``ks`` smaller than the number of heads. Each control has its own generator, seeded by
    (``seed``, k, d), so a set does not change when other sizes are asked for; a draw equal to an
    earlier one of the same k is drawn again (up to 100 times), so the draws are distinct sets."""
    ranked = [(int(layer), int(head)) for layer, head in zip(ranking.layer, ranking["head"])]
    n_layers = int(ranking.layer.max()) + 1 if len(ranking) else 0
    sets: dict[str, tuple[tuple[int, int], ...]] = {}
    for k in sorted(set(ks)):
        if not 0 < k < len(ranked):
            continue
        top = tuple(sorted(ranked[:k]))
        sets[f"top{k}"] = top
        drawn: set = set()
        for d in range(1, draws + 1):
            rng = np.random.default_rng([seed, k, d])
            for _ in range(100):
                heads = random_like(top, heads_per_layer, rng, n_layers)
                if heads not in drawn:
                    break
            drawn.add(heads)
            sets[f"random{k}.{d}"] = heads
    return sets


def parse_set(name: str) -> tuple[str, int | None]:
    """``("top" | "random" | name, k)`` of a head-set name (k None for ``none`` and ``mask``)."""
    for kind in ("top", "random"):
        if name.startswith(kind):
            return kind, int(name[len(kind):].split(".")[0])
    return name, None


def _setting_frame(conditions: pd.DataFrame) -> pd.DataFrame:
    """Conditions with ``mode``, ``kind`` (top/random/none/mask) and ``k`` parsed from ``setting``."""
    mode = conditions.setting.str.extract(r"^(mask_heads|only_heads)\(", expand=False).fillna(conditions.setting)
    name = conditions.setting.str.extract(r"\((.*)\)$", expand=False).fillna(conditions.setting)
    parsed = name.map(parse_set)
    return conditions.assign(mode=mode, head_set=name, kind=parsed.str[0], k=parsed.str[1])


def causal_effects(conditions: pd.DataFrame, measures: Sequence[str] = CAUSAL_MEASURES, seed: int = 0
                   ) -> pd.DataFrame:
    """Per measure and setting: the C-minus-B effect (crossed t interval) and, against ``none``,
    the effect removed (C-minus-B of the per-cell difference none minus setting: crossed t) and its
    share of the unmasked effect (crossed bootstrap). ``conditions`` carries a ``setting`` column
    (``none``, ``mask``, ``mask_heads(top4)``, ``only_heads(random4.2)`` ...)."""
    frame = _setting_frame(conditions).assign(isolation=lambda d: d.setting)  # compare_groups' cells
    labels = frame.groupby("setting", sort=True)[["mode", "head_set", "kind", "k"]].first()
    keys = ["prompt_id", "group", "prefix_id"]
    parts = []
    for measure in measures:
        if measure not in frame or any(frame.loc[frame.group == g, measure].isna().all() for g in ("B", "C")):
            continue  # not measured for one side (B's prefixes name no word): no C - B to remove
        values = frame.assign(**{measure: frame[measure].astype(float)})
        # no power is printed here: a rate's simulated one would cost about 0.3 s a setting for nothing
        eff = compare_groups(values, measure, by=["isolation"], rate=measure == "target_hit", seed=seed, power=False)
        table = labels.join(eff.set_index("isolation")[["statistic", "ci_low", "ci_high", "ci_note", "n_prompts",
                                                         "n_prefixes_high", "n_prefixes_low"]], how="inner")
        table = table.rename(columns={"statistic": "effect", "ci_low": "effect_low", "ci_high": "effect_high",
                                      "ci_note": "effect_note", "n_prefixes_high": "n_prefixes_c",
                                      "n_prefixes_low": "n_prefixes_b"})
        wide = values.pivot_table(index=keys, columns="setting", values=measure, observed=True)
        others = [s for s in table.index if s != NONE] if NONE in wide else []
        if others:
            diffs = pd.concat([(wide[NONE] - wide[s]).rename("removed").reset_index().assign(isolation=s)
                               for s in others])
            rem = compare_groups(diffs, "removed", by=["isolation"], seed=seed, power=False).set_index("isolation")
            table = table.join(rem[["statistic", "ci_low", "ci_high"]].rename(columns={
                "statistic": "removed", "ci_low": "removed_low", "ci_high": "removed_high"}))
            shares = {s: share_removed(wide[[NONE, s]].reset_index(), NONE, s, seed=seed) for s in others}
            table = table.join(pd.DataFrame(shares, index=["share", "share_low", "share_high"]).T)
            if NONE in table.index and not established(table.loc[NONE]):  # a share of an effect that may be nothing,
                table[["share", "share_low", "share_high"]] = np.nan  # or of the other sign (or unknown: no interval)
        parts.append(table.rename_axis("setting").reset_index().assign(measure=measure))
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True)
    return out[["measure", "setting", "mode", "head_set", "kind", "k", "effect", "effect_low", "effect_high",
                "effect_note", "n_prompts", "n_prefixes_c", "n_prefixes_b"]
               + [c for c in ("removed", "removed_low", "removed_high", "share", "share_low", "share_high")
                  if c in out]]


def matrices(cells: pd.DataFrame, columns: Sequence[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each of ``columns`` as a prompts x prefixes float matrix (NaN where a cell is missing), and the
    group of each prefix column: the layout :func:`crossed_bootstrap` resamples."""
    table = cells.assign(prompt_id=cells.prompt_id.astype(str), prefix_id=cells.prefix_id.astype(str),
                         group=cells.group.astype(str))
    out = {}
    for col in columns:
        wide = table.pivot_table(index="prompt_id", columns=["group", "prefix_id"], values=col, aggfunc="mean",
                                 dropna=False)
        out[col] = wide.to_numpy(dtype=float)
    return out, np.array([g for g, _ in wide.columns])


def crossed_bootstrap(mats: dict[str, np.ndarray], groups: np.ndarray,
                      statistic: Callable[[dict[str, np.ndarray], np.ndarray], float],
                      n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE,
                      batched: bool = False) -> tuple[float, float]:
    """Percentile interval of ``statistic(matrices, groups)`` with prompts (rows) and, within each
    group, prefixes (columns) resampled with replacement: prompts and prefixes as crossed random
    factors. ``batched``: ``statistic`` takes every resample at once (matrices stacked on a leading
    axis; the groups of the columns are the same in every resample) and returns their values, which
    are those of one call per resample."""
    rng = generator(seed)
    n_prompts = next(iter(mats.values())).shape[0]
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    draws = [(rng.integers(n_prompts, size=n_prompts),
              np.concatenate([m[rng.integers(len(m), size=len(m))] for m in members])) for _ in range(n_resamples)]
    if batched and draws:
        rows, cols = (np.stack(d) for d in zip(*draws))
        values = np.asarray(statistic({k: v[rows[:, :, None], cols[:, None, :]] for k, v in mats.items()},
                                      groups[cols[0]]), dtype=float)
    else:
        values = np.array([statistic({k: v[np.ix_(rows, cols)] for k, v in mats.items()}, groups[cols])
                           for rows, cols in draws], dtype=float)
    samples = values[np.isfinite(values)]
    if len(samples) < 2:
        return np.nan, np.nan
    alpha = (1 - confidence) / 2
    return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))


def effect_of(y: np.ndarray, groups: np.ndarray) -> float | np.ndarray:
    """C minus B on a prompts x prefixes matrix (or a stack of them): mean over each group's prefixes
    of the prefix's mean over prompts (missing cells and prefixes left out, as ``np.nanmean`` would:
    the same sums, without its per-call overhead)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        per_prefix = _nan_mean(np.asarray(y, dtype=float), -2)
        effect = _nan_mean(per_prefix[..., groups == "C"], -1) - _nan_mean(per_prefix[..., groups == "B"], -1)
    return float(effect) if np.ndim(effect) == 0 else effect


def _nan_mean(y: np.ndarray, axis: int) -> np.ndarray:
    """Mean along ``axis`` of the values that are not NaN (NaN where there are none)."""
    ok = ~np.isnan(y)
    return np.where(ok, y, 0.0).sum(axis) / ok.sum(axis)


def established(unmasked: pd.Series) -> bool | None:
    """Whether the unmasked C - B effect's interval (``effect_low``, ``effect_high``) excludes zero, so
    that a share of it removed means something; None where it has no interval."""
    low, high = float(unmasked["effect_low"]), float(unmasked["effect_high"])
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return low > 0 or high < 0


def share_removed(cells: pd.DataFrame, base: str, setting: str, n_resamples: int = N_RESAMPLES, seed: int = 0
                  ) -> tuple[float, float, float]:
    """(share, low, high): 1 - effect(setting) / effect(base) on paired cells, with a crossed
    bootstrap interval. NaN when the base effect is zero."""
    def share(m: dict[str, np.ndarray], g: np.ndarray) -> float | np.ndarray:
        whole = effect_of(m[base], g)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.where(whole != 0, 1 - effect_of(m[setting], g) / np.where(whole != 0, whole, 1.0), np.nan)
        # two effects equal but summed in another order leave a residue (-6.66e-16): a share is a
        # ratio near 0 to 1, so anything within 1e-12 of 0 is the 0 it stands for
        value = np.where(np.abs(value) < SHARE_RESIDUE, 0.0, value)
        return float(value) if np.ndim(value) == 0 else value

    mats, groups = matrices(cells, [base, setting])
    lo, hi = crossed_bootstrap(mats, groups, share, n_resamples, seed, batched=True)
    return share(mats, groups), lo, hi


def auroc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counted half: the Mann-Whitney U over n+ n-."""
    scores = np.concatenate([np.asarray(positive, dtype=float), np.asarray(negative, dtype=float)])[None, :]
    is_positive = np.arange(scores.shape[1]) < len(positive)
    return float(stacked_auroc(scores, is_positive[None, :], ~is_positive[None, :]))


def stacked_auroc(score: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """:func:`auroc` of each of a stack of (..., prompts, prefixes) score matrices, the positives and
    negatives marked by same-shape masks: the Mann-Whitney U from the marked scores' average ranks.
    NaN where a side is empty or a marked score is NaN. The one definition of the AUROC here:
    :func:`auroc` is its one-matrix case, and the detector's bootstrap gives it every resample at once."""
    lead = score.shape[:-2]
    s, pos, neg = (np.reshape(a, (int(np.prod(lead)), -1)) for a in (score, positive, negative))
    marked = pos | neg
    ranks = rankdata(np.where(marked, s, np.nan), axis=1, nan_policy="omit")
    n_pos, n_neg = pos.sum(1), neg.sum(1)
    u = np.where(pos, ranks, 0.0).sum(1) - n_pos * (n_pos + 1) / 2
    bad = (n_pos == 0) | (n_neg == 0) | (np.isnan(s) & marked).any(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bad, np.nan, u / np.where(bad, 1, n_pos * n_neg)).reshape(lead)
