"""The seed study's three claims as tested hypotheses: DataFrame in, DataFrame out.

The seed study reported, from a handful of runs, that (1) the attention divergence between A and C
peaks in the middle layers, (2) it jumps between 64 and 128 prefix tokens, and (3) C drifts
systematically while B drifts only slightly. Here each is a statistic with an interval in which
prompts and prefixes are both resampled (crossed random factors: DESIGN.md section 3) and a verdict:

* **supported**: the interval lies on the claim's side of its null;
* **contradicted**: the interval lies on the other side;
* **not determined**: the interval spans the null (the power this design had is stated for claim 3).

Claim 1's statistic is the mean divergence in the middle third of the layers minus the larger of
the first and last thirds' (positive: the middle stands out); where the profile peaks, as a fraction
of depth, is reported with its own interval. Claim 2's is the increase from 64 to 128 tokens minus
the larger of its neighbours' (32 to 64, 128 to 256). Claim 3's is C minus B (the crossed interval
and prefix-permutation p of :func:`harness.analysis.crossed.compare_groups`), with B's own mean
against the run's noise floor. Its power is that of a two-sided 5% test against an effect of one
prefix-level standard deviation, with the standard error this design had.

Calibration (``benchmarks/crossed_calibration.py``): the crossed percentile bootstrap under-covers
where prefix variance dominates (coverage 0.85-0.94 for a nominal 0.95), and the prefix-permutation
test exceeds its level when prompts interact with the group (up to 0.10). So claim 3 is decided
only when the interval and the permutation test (p < 0.05) agree, and the report says that
verdicts resting on an interval just clear of zero are provisional.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from scipy.stats import norm

from harness.analysis import summaries
from harness.analysis.crossed import percentile_interval, compare_groups
from harness.analysis.descriptive import CONFIDENCE, N_RESAMPLES, weighted_segment_mean, with_settings

JUMP_LENGTHS = (32, 64, 128, 256)
MIDDLE = (1 / 3, 2 / 3)  # the middle third of the depth
UNIT = "prompts and prefixes resampled (crossed)"
HYPOTHESES = {
    1: "attention divergence between A and C peaks in the middle layers",
    2: "drift jumps between 64 and 128 prefix tokens (more than between 32 and 64, or 128 and 256)",
    3: "C drifts systematically more than B; B only slightly",
}
COLUMNS = ["claim", "hypothesis", "measure", "model", "placement", "statistic", "estimate", "ci_low", "ci_high",
           "p", "power", "verdict", "detail", "n_prompts", "n_prefixes", "unit"]


def _verdict(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "not determined"
    return "supported" if lo > 0 else "contradicted" if hi < 0 else "not determined"


def _tested_verdict(lo: float, hi: float, p: float, alpha: float = 0.05) -> str:
    """Claim 3's verdict: the interval's side *and* the prefix-permutation test (calibrated where
    the percentile bootstrap under-covers, see the module docstring) must agree."""
    side = _verdict(lo, hi)
    return side if side == "not determined" or (np.isfinite(p) and p < alpha) else "not determined"


def _cube(df: pd.DataFrame, value: str, axis: str) -> tuple[np.ndarray, list]:
    """``Y[prompt, prefix, axis value]`` (NaN where a cell is missing) and the axis values."""
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
    rng = np.random.default_rng(seed)
    n_p, n_x = Y.shape[:2]
    W = rng.multinomial(n_p, np.full(n_p, 1 / n_p), size=n_resamples).astype(float)
    V = rng.multinomial(n_x, np.full(n_x, 1 / n_x), size=n_resamples).astype(float)
    ok = np.isfinite(Y)
    Y0 = np.where(ok, Y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = Y0.sum((0, 1)) / ok.sum((0, 1))
        resampled = np.einsum("rp,rx,pxk->rk", W, V, Y0) / np.einsum("rp,rx,pxk->rk", W, V, ok.astype(float))
    return observed, resampled


def _thirds(profile: np.ndarray) -> np.ndarray:
    """Middle third's mean minus the larger of the outer thirds' (last axis: layers)."""
    n = profile.shape[-1]
    cut = [round(n * MIDDLE[0]), round(n * MIDDLE[1])]
    first, middle, last = (profile[..., :cut[0]].mean(-1), profile[..., cut[0]:cut[1]].mean(-1),
                           profile[..., cut[1]:].mean(-1))
    return middle - np.maximum(first, last)


def middle_layer_peak(attention: pd.DataFrame, value: str = "kl", group: str = "C",
                      by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                      confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 1 per ``by`` cell: does ``group``'s divergence from A (``value`` per layer, averaged over
    heads, segments by query count, and prefix lengths) peak in the middle third of the layers?"""
    att = with_settings(attention[attention.group == group])
    rows = []
    for key, sub in att.groupby(list(by), observed=True, sort=True):
        per = weighted_segment_mean(sub, value, ("prefix_id", "prefix_len", "layer"))
        per = per.groupby(["prompt_id", "prefix_id", "layer"], observed=True)[value].mean().reset_index()
        Y, layers = _cube(per, value, "layer")
        if len(layers) < 3:  # no middle third to speak of
            continue
        observed, resampled = crossed_means(Y, n_resamples, seed)
        depth = len(layers) - 1
        peak = int(np.nanargmax(observed))
        peaks = np.nanargmax(np.where(np.isfinite(resampled), resampled, -np.inf), axis=1) / depth
        lo, hi = percentile_interval(_thirds(resampled), confidence)
        plo, phi = percentile_interval(peaks, confidence)
        rows.append({
            "claim": 1, "hypothesis": HYPOTHESES[1], "measure": f"attention {value} ({group} vs A)",
            **dict(zip(by, key)), "statistic": "middle third minus larger outer third",
            "estimate": float(_thirds(observed)), "ci_low": lo, "ci_high": hi, "p": np.nan, "power": np.nan,
            "verdict": _verdict(lo, hi),
            "detail": f"peak at layer {layers[peak]} of {len(layers)} = {peak / depth:.2f} of depth "
                      f"(interval {plo:.2f} to {phi:.2f})",
            "peak_fraction": peak / depth, "peak_low": plo, "peak_high": phi,
            "n_prompts": Y.shape[0], "n_prefixes": Y.shape[1], "unit": UNIT})
    return pd.DataFrame(rows)


def _jump(means: np.ndarray) -> np.ndarray:
    """Increase 64 -> 128 minus the larger of 32 -> 64 and 128 -> 256 (last axis: the four lengths)."""
    steps = np.diff(means, axis=-1)
    return steps[..., 1] - np.maximum(steps[..., 0], steps[..., 2])


def length_jump(conditions: pd.DataFrame, value: str = "attn_kl_mean", group: str = "C",
                by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 2 per ``by`` cell: is ``group``'s increase in ``value`` from 64 to 128 prefix tokens
    larger than its neighbours'? Needs the lengths 32, 64, 128 and 256."""
    cond = with_settings(conditions[(conditions.group == group) & conditions.prefix_len.isin(JUMP_LENGTHS)])
    rows = []
    for key, sub in cond.groupby(list(by), observed=True, sort=True):
        if sorted(sub.prefix_len.unique()) != list(JUMP_LENGTHS):
            continue
        Y, _ = _cube(sub, value, "prefix_len")
        observed, resampled = crossed_means(Y, n_resamples, seed)
        lo, hi = percentile_interval(_jump(resampled), confidence)
        steps = np.diff(observed)
        rows.append({
            "claim": 2, "hypothesis": HYPOTHESES[2], "measure": f"{value} ({group} vs A)", **dict(zip(by, key)),
            "statistic": "increase 64->128 minus larger neighbouring increase", "estimate": float(_jump(observed)),
            "ci_low": lo, "ci_high": hi, "p": np.nan, "power": np.nan, "verdict": _verdict(lo, hi),
            "detail": "means at 32/64/128/256: " + ", ".join(f"{m:.3g}" for m in observed)
                      + "; increases: " + ", ".join(f"{s:+.3g}" for s in steps),
            "n_prompts": Y.shape[0], "n_prefixes": Y.shape[1], "unit": UNIT})
    return pd.DataFrame(rows)


def power_at_one_sd(effect_sd: float, ci_low: float, ci_high: float, dof: float = np.inf,
                    confidence: float = CONFIDENCE) -> float:
    """Power of the two-sided t test behind a t interval [``ci_low``, ``ci_high``] with ``dof``
    degrees of freedom (normal for ``dof`` infinite) against an effect of ``effect_sd``: the
    standard error is what the interval's width implies, and the test statistic is noncentral t."""
    crit = stats.t.ppf(1 - (1 - confidence) / 2, dof) if np.isfinite(dof) else norm.ppf(1 - (1 - confidence) / 2)
    se = (ci_high - ci_low) / (2 * crit)
    if not (np.isfinite(se) and se > 0 and np.isfinite(effect_sd)):
        return np.nan
    shift = effect_sd / se
    if not np.isfinite(dof):
        return float(norm.cdf(shift - crit) + norm.cdf(-shift - crit))
    return float(stats.nct.sf(crit, dof, shift) + stats.nct.cdf(-crit, dof, shift))


def prefix_sd(conditions: pd.DataFrame, value: str) -> float:
    """The prefix-level standard deviation of ``value``: the SD over prefixes of each prefix's mean
    (over prompts and lengths), pooled over B and C."""
    means = conditions[conditions.group.isin(["B", "C"])].groupby(["group", "prefix_id"], observed=True)[value].mean()
    dev = means - means.groupby(level="group", observed=True).transform("mean")
    dof = len(means) - means.index.get_level_values("group").nunique()
    return float(np.sqrt((dev ** 2).sum() / dof)) if dof > 0 else np.nan


def _pooled(sub: pd.DataFrame, group: str, value: str) -> np.ndarray:
    """``value`` of ``group``'s cells as [prompt, prefix], each the mean over prefix lengths."""
    return _cube(sub[sub.group == group].assign(all="all"), value, "all")[0][..., 0]


def standard_error_parts(sub: pd.DataFrame, value: str, n_resamples: int, seed: int) -> tuple[float, float]:
    """The C-minus-B statistic's standard error from prompts alone (prefixes held fixed) and from
    prefixes alone (prompts held fixed), by resampling one factor at a time (prefixes of each group
    independently: a matched-pair design would be estimated conservatively)."""
    rng = np.random.default_rng(seed)
    cubes = [_pooled(sub, g, value) for g in ("C", "B")]
    n_p = cubes[0].shape[0]

    def stat(w: np.ndarray, vs: list[np.ndarray]) -> np.ndarray:
        means = []
        for Y, v in zip(cubes, vs):
            ok = np.isfinite(Y)
            num = np.einsum("rp,rx,px->r", w, v, np.where(ok, Y, 0.0))
            means.append(num / np.einsum("rp,rx,px->r", w, v, ok.astype(float)))
        return means[0] - means[1]

    ones_p = np.ones((n_resamples, n_p))
    ones_x = [np.ones((n_resamples, Y.shape[1])) for Y in cubes]
    draw_p = rng.multinomial(n_p, np.full(n_p, 1 / n_p), size=n_resamples).astype(float)
    draw_x = [rng.multinomial(Y.shape[1], np.full(Y.shape[1], 1 / Y.shape[1]), size=n_resamples).astype(float)
              for Y in cubes]
    return float(np.nanstd(stat(draw_p, ones_x), ddof=1)), float(np.nanstd(stat(ones_p, draw_x), ddof=1))


def design_for_power(effect: float, se_prompts: float, se_prefixes: float, n_prompts: int, n_prefixes: int,
                     target: float = 0.8, confidence: float = CONFIDENCE,
                     limit: int = 1000) -> tuple[int | None, int | None]:
    """The fewest prompts (at ``n_prefixes`` per group) and the fewest prefixes per group (at
    ``n_prompts``) at which a test against ``effect`` reaches ``target`` power, projecting each
    standard-error part as 1/sqrt(count) (normal approximation: a t test with few prompts needs
    somewhat more); None where ``limit`` does not reach it."""
    z = norm.ppf(1 - (1 - confidence) / 2)

    def power(se: float) -> float:
        return float(norm.cdf(effect / se - z) + norm.cdf(-effect / se - z)) if se > 0 else 1.0

    def se(p: int, x: int) -> float:
        return float(np.sqrt(se_prompts ** 2 * n_prompts / p + se_prefixes ** 2 * n_prefixes / x))

    prompts = next((p for p in range(1, limit + 1) if power(se(p, n_prefixes)) >= target), None)
    prefixes = next((x for x in range(1, limit + 1) if power(se(n_prompts, x)) >= target), None)
    return prompts, prefixes


def c_versus_b(conditions: pd.DataFrame, noise: pd.DataFrame | None, value: str = "norm_edit_distance",
               by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
               confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 3 per ``by`` cell: C minus B (pooled over prefix lengths) with prompts and prefixes
    random, its power against one prefix-level SD, and B's mean against the noise floor."""
    cond = with_settings(conditions)
    rows = []
    for key, sub in cond.groupby(list(by), observed=True, sort=True):
        if not {"B", "C"} <= set(sub.group.astype(str)):
            continue
        cmp = compare_groups(sub, value, by=list(by), n_resamples=n_resamples, seed=seed, confidence=confidence)
        if cmp.empty:
            continue
        row = cmp.iloc[0]
        sd = prefix_sd(sub, value)
        b_mean, b_samples = crossed_means(_pooled(sub, "B", value)[..., None], n_resamples, seed)
        b_lo, b_hi = percentile_interval(b_samples[:, 0], confidence)
        floor = summaries.noise_level(noise, key[0] if by[0] == "model" else None, value)
        if floor is None:
            b_says = "no noise floor measured"
        else:
            side = "above" if b_lo > floor else "within" if b_hi <= floor else "not separable from"
            b_says = (f"B's mean {b_mean[0]:.3g} (interval {b_lo:.3g} to {b_hi:.3g}) is {side} the noise floor "
                      f"{floor:.3g}")
        se_p, se_x = standard_error_parts(sub, value, n_resamples, seed)
        dof = row.dof if np.isfinite(row.dof) else np.inf  # the lead interval's; NaN for the bootstrap fallback
        n_prompts, per_group = int(row.n_prompts), int(min(row.n_prefixes_high, row.n_prefixes_low))
        need_p, need_x = design_for_power(sd, se_p, se_x, n_prompts, per_group)
        needs = (f"power 0.8 would need about {need_p} prompts at {per_group} prefixes per group" if need_p
                 else "power 0.8 is out of reach by adding prompts alone")
        needs += (f", or {need_x} prefixes per group at {n_prompts} prompts" if need_x
                  else f"; at {n_prompts} prompts no number of prefixes reaches it (the prompt part of the error "
                       f"alone is too large)")
        b_says = f"{b_says}; {needs} (standard error from prompts {se_p:.3g}, from prefixes {se_x:.3g})"
        rows.append({
            "claim": 3, "hypothesis": HYPOTHESES[3], "measure": value, **dict(zip(by, key)),
            "statistic": "C minus B", "estimate": float(row.statistic), "ci_low": float(row.ci_low),
            "ci_high": float(row.ci_high), "p": float(row.p_perm),
            "power": power_at_one_sd(sd, float(row.ci_low), float(row.ci_high), dof, confidence),
            "verdict": _tested_verdict(float(row.ci_low), float(row.ci_high), float(row.p_perm)),
            "detail": f"prefix-level SD {sd:.3g}; {b_says}", "b_mean": float(b_mean[0]), "b_low": b_lo,
            "b_high": b_hi, "noise_floor": np.nan if floor is None else floor, "se_prompts": se_p,
            "se_prefixes": se_x, "prompts_for_power_80": need_p, "prefixes_for_power_80": need_x,
            "n_prompts": int(row.n_prompts), "n_prefixes": int(row.n_prefixes_high + row.n_prefixes_low),
            "unit": UNIT})
    return pd.DataFrame(rows)


def seed_claims(conditions: pd.DataFrame, attention: pd.DataFrame | None, noise: pd.DataFrame | None,
                n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """All three claims, one row per claim, measure, model and placement (:data:`COLUMNS` first,
    then the claim's own figures: peak fraction, B's mean and the noise floor)."""
    kw = {"n_resamples": n_resamples, "seed": seed, "confidence": confidence}
    parts = []
    if attention is not None and not attention.empty:
        parts.append(middle_layer_peak(attention, **kw))
    for value in ("attn_kl_mean", "norm_edit_distance"):
        if value in conditions and conditions[value].notna().any():
            parts.append(length_jump(conditions, value, **kw))
    for value in ("norm_edit_distance", "attn_kl_mean"):
        if value in conditions and conditions[value].notna().any():
            parts.append(c_versus_b(conditions, noise, value, **kw))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    return out[COLUMNS + [c for c in out.columns if c not in COLUMNS]]


def layer_curves(attention: pd.DataFrame, value: str = "kl", groups: Sequence[str] = ("B", "C"),
                 by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                 confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 1's figure data: per ``by`` cell, group and layer, the mean divergence from A with its
    crossed interval, and the layer's fraction of depth."""
    rows = []
    att = with_settings(attention[attention.group.isin(list(groups))])
    for key, sub in att.groupby([*by, "group"], observed=True, sort=True):
        per = weighted_segment_mean(sub, value, ("prefix_id", "prefix_len", "layer"))
        per = per.groupby(["prompt_id", "prefix_id", "layer"], observed=True)[value].mean().reset_index()
        Y, layers = _cube(per, value, "layer")
        observed, resampled = crossed_means(Y, n_resamples, seed)
        for i, layer in enumerate(layers):
            lo, hi = percentile_interval(resampled[:, i], confidence)
            rows.append({**dict(zip([*by, "group"], key)), "layer": layer,
                         "depth": layer / max(len(layers) - 1, 1), value: observed[i], "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def length_curves(conditions: pd.DataFrame, value: str, groups: Sequence[str] = ("B", "C"),
                  by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                  confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 2's figure data: per ``by`` cell, group and prefix length, the mean of ``value`` with
    its crossed interval."""
    rows = []
    cond = with_settings(conditions[conditions.group.isin(list(groups))])
    for key, sub in cond.groupby([*by, "group"], observed=True, sort=True):
        Y, lengths = _cube(sub, value, "prefix_len")
        observed, resampled = crossed_means(Y, n_resamples, seed)
        for i, n in enumerate(lengths):
            lo, hi = percentile_interval(resampled[:, i], confidence)
            rows.append({**dict(zip([*by, "group"], key)), "prefix_len": n, value: observed[i],
                         "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)
