"""The three contamination claims as tested hypotheses: DataFrame in, DataFrame out.

The seed study reported, from a handful of runs, that (1) the attention divergence between A and C
peaks in the middle layers, (2) it jumps between 64 and 128 prefix tokens, and (3) C drifts
systematically while B drifts only slightly. Here each is a statistic with an interval in which
prompts and prefixes are both resampled (crossed random factors: docs/statistics.md) and a verdict:

* **supported**: the interval lies on the claim's side of its null;
* **contradicted**: the interval lies on the other side;
* **no effect as large as Δ**: the interval's upper end lies below the measure's smallest effect of
  interest, Δ (stated in the measure's units: :mod:`harness.analysis.verdicts`);
* **not determined**: the interval holds both the null and Δ.

Every row states Δ and this design's power at Δ (the chance the interval clears zero when the truth
is Δ), with the range its data allow: claims 1-2 by :mod:`harness.analysis.claim_power`, claim 3 by
:func:`harness.analysis.power.design_power_range` (a power against the data's own spread is none).

Claim 1's statistic is the mean divergence in the middle third of the layers minus the larger of
the first and last thirds' (positive: the middle stands out); where the profile peaks, as a fraction
of depth, is reported with its own (descriptive, percentile bootstrap) interval. Claim 2's is the
increase from 64 to 128 tokens minus the larger of its neighbours' (32 to 64, 128 to 256). Both are
the smaller of two linear contrasts of one group's cells (middle minus first, middle minus last;
the step minus each neighbour), and each contrast is a crossed mean with its own bounded variance
and t interval (:func:`harness.analysis.crossed_variance.group_mean`). The interval for the smaller
of the two (:func:`min_contrast_interval`) takes the smaller lower end of the two 95% intervals and
the smaller upper end of the two 97.5% intervals, so each side misses at most 2.5%: calibrated
where the percentile bootstrap it replaces covered 0.85-0.94 (``benchmarks/crossed_calibration.py``,
"Claims 1 and 2"), and conservative when the two contrasts are about equal.

Claim 3's is C minus B with the report's lead interval and its own test
(:func:`harness.analysis.crossed.compare_groups`: prompts and prefixes random), with B's own mean
(a crossed t interval) against the run's noise floor. Its power is the lead test's at this design
against Δ (:func:`harness.analysis.power.design_power`, calibrated in the same suite), and the designs
that would reach 0.8 at Δ are searched with the same function.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis import summaries
from harness.analysis.claim_cubes import (
    claim3_cells,
    complete_cube,
    crossed_mean_intervals,
    crossed_means,
    cube,
    min_contrast_interval,
)
from harness.analysis.claim_power import contrast_components, min_contrast_power, min_contrast_power_range
from harness.analysis.crossed import compare_groups, percentile_interval
from harness.analysis.crossed_variance import MIN_PREFIXES, MIN_PROMPTS
from harness.analysis.descriptive import CONFIDENCE, N_RESAMPLES, weighted_segment_mean, with_settings
from harness.analysis.design import design_power, variance_components
from harness.analysis.obeying import without_mentions
from harness.analysis.power import fewest_reaching
from harness.analysis.verdicts import decide, deltas_for
from harness.errors import HarnessError
from harness.measure.metrics import clipped
from harness.numbers import num, signed

JUMP_LENGTHS = (32, 64, 128, 256)
MIDDLE = (1 / 3, 2 / 3)  # the middle third of the depth
UNIT = "prompts and prefixes resampled (crossed)"
CONDITION_MEASURES = ("attn_kl_mean", "norm_edit_distance")  # what claims 2 and 3 test, per condition
DELTA_MEASURES = ("kl", *CONDITION_MEASURES)  # every measure the claims test (each with its Δ); claim 1: kl per layer
HYPOTHESES = {
    1: "attention divergence between A and C peaks in the middle layers",
    2: "drift jumps between 64 and 128 prefix tokens (more than between 32 and 64, or 128 and 256)",
    3: "C drifts systematically more than B; B only slightly",
}
COLUMNS = ["claim", "hypothesis", "measure", "model", "placement", "statistic", "estimate", "ci_low", "ci_high",
           "p", "delta", "power", "power_low", "power_high", "verdict", "detail", "n_prompts", "n_prefixes", "unit"]


def _powers(Y: np.ndarray, weights: np.ndarray, delta: float | None) -> dict:
    """A claim-1 or claim-2 row's ``delta``, its ``power`` at Δ and the range its inputs allow
    (``power_low``, ``power_high``); NaN without a Δ."""
    if delta is None:
        return {"delta": np.nan, "power": np.nan, "power_low": np.nan, "power_high": np.nan}
    components = contrast_components(Y, weights)
    low, high = min_contrast_power_range(Y, weights, components=components, effect=delta)
    return {"delta": delta, "power": min_contrast_power(components, *Y.shape[:2], effect=delta), "power_low": low,
            "power_high": high}


def thirds_weights(n: int) -> np.ndarray:
    """Claim 1's two contrasts over ``n`` layers: the middle third's mean minus the first third's,
    and minus the last's."""
    cut = [round(n * MIDDLE[0]), round(n * MIDDLE[1])]
    part = [np.arange(n) < cut[0], (np.arange(n) >= cut[0]) & (np.arange(n) < cut[1]), np.arange(n) >= cut[1]]
    first, middle, last = (p / p.sum() for p in part)
    return np.stack([middle - first, middle - last])


def _thirds(profile: np.ndarray) -> np.ndarray:
    """Middle third's mean minus the larger of the outer thirds' (last axis: layers)."""
    n = profile.shape[-1]
    cut = [round(n * MIDDLE[0]), round(n * MIDDLE[1])]
    first, middle, last = (profile[..., :cut[0]].mean(-1), profile[..., cut[0]:cut[1]].mean(-1),
                           profile[..., cut[1]:].mean(-1))
    return middle - np.maximum(first, last)


def layer_cubes(attention: pd.DataFrame, value: str = "kl", group: str = "C",
                by: Sequence[str] = ("model", "placement")):
    """Claim 1's tables: per ``by`` cell with at least three layers, ``(key, Y[prompt, prefix, layer],
    layers)``, ``value`` averaged over heads, segments (by query count) and prefix lengths, cut to
    the complete crossing."""
    att = with_settings(attention[attention.group == group])
    for key, sub in att.groupby(list(by), observed=True, sort=True):
        per = weighted_segment_mean(sub, value, ("prefix_id", "prefix_len", "layer"))
        per = per.groupby(["prompt_id", "prefix_id", "layer"], observed=True)[value].mean().reset_index()
        Y, layers = cube(per, value, "layer")
        if len(layers) >= 3:  # else no middle third to speak of
            yield dict(zip(by, key)), complete_cube(Y), layers


def length_cubes(conditions: pd.DataFrame, value: str = "attn_kl_mean", group: str = "C",
                 by: Sequence[str] = ("model", "placement")):
    """Claim 2's tables: per ``by`` cell with the lengths 32, 64, 128 and 256, ``(key,
    Y[prompt, prefix, length])`` cut to the complete crossing; a cell in which no prefix was measured at
    all four lengths (two runs' banks at different lengths) has none and is left out."""
    cond = with_settings(conditions[(conditions.group == group) & conditions.prefix_len.isin(JUMP_LENGTHS)])
    for key, sub in cond.groupby(list(by), observed=True, sort=True):
        if sorted(sub.prefix_len.unique()) == list(JUMP_LENGTHS):
            Y = complete_cube(cube(sub, value, "prefix_len")[0])
            if Y.size:
                yield dict(zip(by, key)), Y


def middle_layer_peak(attention: pd.DataFrame, value: str = "kl", group: str = "C",
                      by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                      confidence: float = CONFIDENCE, delta: float | None = None) -> pd.DataFrame:
    """Claim 1 per ``by`` cell: does ``group``'s divergence from A (``value`` per layer, averaged over
    heads, segments by query count, and prefix lengths) peak in the middle third of the layers? At
    ``delta`` (the registry's Δ of ``value`` when None) the verdict can say "no peak as large as Δ"."""
    delta = deltas_for().get(value) if delta is None else delta
    rows = []
    for key, Y, layers in layer_cubes(attention, value, group, by):
        observed, resampled = crossed_means(Y, n_resamples, seed)
        depth = len(layers) - 1
        peak = int(np.nanargmax(observed))
        peaks = np.nanargmax(np.where(np.isfinite(resampled), resampled, -np.inf), axis=1) / depth
        lo, hi, _ = min_contrast_interval(Y, thirds_weights(len(layers)), confidence)
        plo, phi = percentile_interval(peaks, confidence)
        rows.append({
            "claim": 1, "hypothesis": HYPOTHESES[1], "measure": f"attention {value} ({group} vs A)",
            **key, "statistic": "middle third minus larger outer third",
            "estimate": float(_thirds(observed)), "ci_low": float(lo), "ci_high": float(hi), "p": np.nan,
            **_powers(Y, thirds_weights(len(layers)), delta),
            "verdict": decide(lo, hi, delta),
            "detail": f"peak at layer {layers[peak]} of {len(layers)} = {num(peak / depth, 2)} of depth "
                      f"(interval {num(plo, 2)} to {num(phi, 2)}, percentile bootstrap)",
            "peak_fraction": peak / depth, "peak_low": plo, "peak_high": phi,
            "n_prompts": Y.shape[0], "n_prefixes": Y.shape[1], "unit": UNIT})
    return pd.DataFrame(rows)


JUMP_WEIGHTS = np.array([[1.0, -2.0, 1.0, 0.0], [0.0, -1.0, 2.0, -1.0]])  # step 2 minus step 1, minus step 3


def _jump(means: np.ndarray) -> np.ndarray:
    """Increase 64 -> 128 minus the larger of 32 -> 64 and 128 -> 256 (last axis: the four lengths)."""
    steps = np.diff(means, axis=-1)
    return steps[..., 1] - np.maximum(steps[..., 0], steps[..., 2])


def length_jump(conditions: pd.DataFrame, value: str = "attn_kl_mean", group: str = "C",
                by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                confidence: float = CONFIDENCE, delta: float | None = None) -> pd.DataFrame:
    """Claim 2 per ``by`` cell: is ``group``'s increase in ``value`` from 64 to 128 prefix tokens
    larger than its neighbours'? Needs the lengths 32, 64, 128 and 256. At ``delta`` (the registry's
    Δ of ``value`` when None) the verdict can say "no jump as large as Δ"."""
    delta = deltas_for().get(value) if delta is None else delta
    rows = []
    for key, Y in length_cubes(conditions, value, group, by):
        observed = Y.mean((0, 1))
        lo, hi, _ = min_contrast_interval(Y, JUMP_WEIGHTS, confidence)
        steps = np.diff(observed)
        rows.append({
            "claim": 2, "hypothesis": HYPOTHESES[2], "measure": f"{value} ({group} vs A)", **key,
            "statistic": "increase 64->128 minus larger neighbouring increase", "estimate": float(_jump(observed)),
            "ci_low": float(lo), "ci_high": float(hi), "p": np.nan,
            **_powers(Y, JUMP_WEIGHTS, delta),
            "verdict": decide(lo, hi, delta),
            "detail": "means at 32/64/128/256: " + ", ".join(num(m) for m in observed)
                      + "; increases: " + ", ".join(signed(s) for s in steps),
            "n_prompts": Y.shape[0], "n_prefixes": Y.shape[1], "unit": UNIT})
    return pd.DataFrame(rows)


def _pooled(sub: pd.DataFrame, group: str, value: str) -> np.ndarray:
    """``value`` of ``group``'s cells as [prompt, prefix], each the mean over prefix lengths."""
    return cube(sub[sub.group == group].assign(all="all"), value, "all")[0][..., 0]


def designs_for_power(components, n_prompts: int, n_prefixes: int, effect: float, target: float = 0.8,
                      limit: int = 1000) -> tuple[int | None, int | None]:
    """The fewest prompts (at ``n_prefixes`` per group) and the fewest prefixes per group (at
    ``n_prompts``) at which the lead test reaches ``target`` power against ``effect``
    (:func:`harness.analysis.power.design_power`), never below the design an interval needs
    (``MIN_PROMPTS`` x ``MIN_PREFIXES``: the counts held fixed are raised to it too); None where
    ``limit`` does not reach it."""
    def reaches(p: int, x: int) -> bool:
        return bool(design_power(components, p, x, effect) >= target)

    if not (np.isfinite(effect) and effect > 0):
        return None, None
    p0, x0 = max(n_prompts, MIN_PROMPTS), max(n_prefixes, MIN_PREFIXES)
    return (fewest_reaching(lambda p: reaches(p, x0), MIN_PROMPTS, limit),
            fewest_reaching(lambda x: reaches(p0, x), MIN_PREFIXES, limit))


def c_versus_b(conditions: pd.DataFrame, noise: pd.DataFrame | None, value: str = "norm_edit_distance",
               by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
               confidence: float = CONFIDENCE, delta: float | None = None) -> pd.DataFrame:
    """Claim 3 per ``by`` cell: C minus B (pooled over prefix lengths) with prompts and prefixes
    random, its power at ``delta`` (the registry's Δ of ``value`` when None) and B's mean against the
    noise floor."""
    delta = deltas_for().get(value) if delta is None else delta
    rows = []
    for key, sub, lengths_note in claim3_cells(conditions, by):
        if sub.empty:
            continue  # no length every prefix has: missing_for(3) says so on the page
        if value not in sub or not all(sub.loc[sub.group == g, value].notna().any() for g in ("B", "C")):
            continue  # not measured (decode.path=none has no edit distance): no claim to test on it
        cmp = compare_groups(sub, value, by=list(by), n_resamples=n_resamples, seed=seed, confidence=confidence,
                             effect=delta)
        if cmp.empty:
            continue
        row = cmp.iloc[0]
        b_cube = complete_cube(_pooled(sub, "B", value)[..., None])
        b_mean, b_lo, b_hi = ((float(v[0]) for v in crossed_mean_intervals(b_cube, confidence)) if b_cube.size
                              else (np.nan,) * 3)
        floor = summaries.noise_level(noise, key[0] if by[0] == "model" else None, value)
        if floor is None:
            b_says = "no noise floor measured"
        elif not (np.isfinite(b_lo) and np.isfinite(b_hi)):  # one prompt or prefix, or no spread at all
            why = (f"{b_cube.shape[0]} prompt(s) x {b_cube.shape[1]} prefix(es); a crossed interval needs at least 2 "
                   f"of each" if min(b_cube.shape[:2]) < 2 else "every B value is the same: no spread to estimate one")
            b_says = f"B's mean {num(b_mean)} has no interval ({why}), so it is not separable from the noise floor "
            b_says += num(floor)
        else:
            b_lo, b_hi, moved = clipped(value, b_lo, b_hi)  # a t interval may run past 0 or 1; the truth cannot
            side = "above" if b_lo > floor else "within" if b_hi <= floor else "not separable from"
            b_says = (f"B's mean {num(b_mean)} (interval {num(b_lo)} to {num(b_hi)}"
                      f"{', clipped to the values it can take' if moved else ''}) is {side} the noise floor "
                      f"{num(floor)}")
        comps = variance_components(sub, value, by=list(by)).iloc[0]
        n_prompts, per_group = int(row.n_prompts), int(min(row.n_prefixes_high, row.n_prefixes_low))
        need_p, need_x = designs_for_power(comps, n_prompts, per_group, np.nan if delta is None else delta)
        p0, x0 = max(n_prompts, MIN_PROMPTS), max(per_group, MIN_PREFIXES)
        if delta is None:
            needs = f"no smallest effect of interest is stated for {value}, so no power is (--delta {value}=...)"
        elif not np.isfinite(design_power(comps, p0, x0, delta)):  # nothing to plan with: say so, not "out of reach"
            needs = (f"no design can be planned from these data (its variance components cannot be estimated: "
                     f"{comps.note or 'a complete crossing of at least 3 prompts and 3 prefixes per group is needed'})")
        else:
            needs = (f"power 0.8 at Δ would need about {need_p} prompts at {x0} prefixes per group" if need_p
                     else "power 0.8 at Δ is out of reach by adding prompts alone")
            needs += (f", or {need_x} prefixes per group at {p0} prompts" if need_x
                      else f"; at {p0} prompts no number of prefixes reaches it (the prompt part of the error "
                           f"alone is too large)")
        interval = "" if np.isfinite(row.ci_low) else f"no interval ({row.ci_note}); "
        b_says = f"{interval}{b_says}; {needs}" + (f"; {lengths_note}" if lengths_note else "")
        rows.append({
            "claim": 3, "hypothesis": HYPOTHESES[3], "measure": value, **dict(zip(by, key)),
            "statistic": "C minus B", "estimate": float(row.statistic), "ci_low": float(row.ci_low),
            "ci_high": float(row.ci_high), "p": float(row.p_crossed), "delta": np.nan if delta is None else delta,
            "power": float(row.power), "power_low": float(row.power_low), "power_high": float(row.power_high),
            "verdict": decide(float(row.ci_low), float(row.ci_high), delta),
            "detail": f"prefix-level SD {num(row.prefix_sd)}; {b_says}", "b_mean": b_mean, "b_low": b_lo,
            "b_high": b_hi, "noise_floor": np.nan if floor is None else floor, "prefix_sd": float(row.prefix_sd),
            "prompts_for_power_80": need_p, "prefixes_for_power_80": need_x,
            "n_prompts": int(row.n_prompts), "n_prefixes": int(row.n_prefixes_high + row.n_prefixes_low),
            "unit": UNIT})
    return pd.DataFrame(rows)


def plain_concatenation(conditions: pd.DataFrame, attention: pd.DataFrame | None, what: str = "the claims test"
                        ) -> tuple[pd.DataFrame, pd.DataFrame | None, str | None]:
    """The rows ``what`` reads: plain concatenation (isolation ``none``), with a sentence for the
    page when rows under other isolation settings were left out; tables of isolation settings only
    are refused (the claims would be judged on masked or down-weighted prefixes without a word)."""
    if "isolation" not in conditions:
        return conditions, attention, None
    plain = conditions.isolation.astype(str) == "none"
    if plain.all():
        return conditions, attention, None
    others = sorted(set(conditions.isolation.astype(str)) - {"none"})
    if not plain[conditions.group.astype(str) != "A"].any():  # A, the reference, is never isolated
        raise HarnessError(f"{what} plain concatenation (isolation none), and these runs hold isolation "
                           f"{others} only: run them with none too (isolation=[none,{others[0]}])")
    if attention is not None and "isolation" in attention:
        attention = attention[attention.isolation.astype(str) == "none"]
    return conditions[plain], attention, (f"Rows under isolation {', '.join(others)} are left out: {what} "
                                          f"plain concatenation (isolation none).")


def without_mention_controls(conditions: pd.DataFrame, attention: pd.DataFrame | None
                             ) -> tuple[pd.DataFrame, pd.DataFrame | None, str | None]:
    """The rows the claims read from a public benchmark's runs: its mention controls (B prefixes that
    only name the goal's string, :func:`harness.analysis.obeying.without_mentions`) left out, as the
    report's C - B leaves them out, so that B is the benign passage of each attack's own set; with a
    sentence for the page where some were."""
    kept = without_mentions(conditions)
    if len(kept) == len(conditions):
        return conditions, attention, None
    dropped = conditions.prefix_id[~conditions.index.isin(kept.index)].nunique()
    attention = None if attention is None else without_mentions(attention, conditions)
    return kept, attention, (f"The benchmark's {dropped} mention control(s) are left out of B: drift C - B compares "
                             f"each attack with the benign passage of its own set (as the report does).")


def missing_for(claim: int, conditions: pd.DataFrame, attention: pd.DataFrame | None) -> str:
    """What these tables lack for ``claim`` to be tested, in words ("" when they have it): the
    claims page and ``harness plan`` name the same requirement."""
    groups = set(conditions.group.astype(str)) if "group" in conditions else set()
    if claim == 1:
        if attention is None or attention.empty:
            return "claim 1 needs an attention table (analysis.attention=true)"
        layers = attention["layer"].nunique()
        return "" if layers >= 3 else f"claim 1 needs a model with at least 3 layers (this one has {layers})"
    if claim == 2:
        have = sorted(int(n) for n in conditions[conditions.group == "C"].prefix_len.unique()) if "C" in groups else []
        missing = [n for n in JUMP_LENGTHS if n not in have]
        if missing:
            return (f"claim 2 needs group C at prefix lengths {', '.join(map(str, JUMP_LENGTHS))} "
                    f"(these runs have {have or 'no group C'})")
        measures = [m for m in CONDITION_MEASURES if m in conditions]
        if measures and not any(True for m in measures for _ in length_cubes(conditions, m)):
            return (f"claim 2 needs prompts and prefixes of group C each measured at all of "
                    f"{', '.join(map(str, JUMP_LENGTHS))} tokens; in these runs none is (runs of different lengths "
                    f"read together: read them separately, or give them the same prefix.lengths)")
        return ""
    if not {"B", "C"} <= groups:
        return f"claim 3 needs groups B and C (these runs have {sorted(groups)})"
    cells = claim3_cells(conditions)
    if cells and all(sub.empty for _, sub, _ in cells):
        return f"claim 3: {' / '.join(k[0] if len(k) == 1 else ', '.join(map(str, k)) for k, _, _ in cells)}: {cells[0][2]}"
    return ""


def seed_claims(conditions: pd.DataFrame, attention: pd.DataFrame | None, noise: pd.DataFrame | None,
                n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE,
                deltas: dict[str, float] | None = None) -> pd.DataFrame:
    """All three claims, one row per claim, measure, model and placement (:data:`COLUMNS` first,
    then the claim's own figures: peak fraction, B's mean and the noise floor). ``deltas``: the
    smallest effect of interest per measure, on top of the registry's
    (:func:`harness.analysis.verdicts.deltas_for`)."""
    kw = {"n_resamples": n_resamples, "seed": seed, "confidence": confidence}
    delta = deltas_for(deltas)
    parts = []
    if attention is not None and not attention.empty:
        parts.append(middle_layer_peak(attention, delta=delta.get("kl"), **kw))
    for value in CONDITION_MEASURES:
        if value in conditions and conditions[value].notna().any():
            parts.append(length_jump(conditions, value, delta=delta.get(value), **kw))
    for value in reversed(CONDITION_MEASURES):  # claim 3 leads with edit distance, as its page always has
        if value in conditions and conditions[value].notna().any():
            parts.append(c_versus_b(conditions, noise, value, delta=delta.get(value), **kw))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    return out[COLUMNS + [c for c in out.columns if c not in COLUMNS]]
