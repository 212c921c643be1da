"""Power of the lead C-minus-B test at a planned design, from a crossed design's variance components
(numpy in, numpy out; :func:`harness.analysis.design.variance_components` puts them on tables).

The lead test (:func:`harness.analysis.crossed_variance.difference`) divides C minus B by the square
root of its bounded variance estimate and reads t on Satterthwaite's degrees of freedom. At a design
of P prompts and n prefixes per group the variance is

    V = (2 s2_ag + s2_e[C] / n + s2_e[B] / n) / P + (s2_b[C] + s2_b[B]) / n

(paired: ``prefix_pair_sum / n``), and the degrees of freedom are Satterthwaite's over the mean
squares the estimate is built from, at their expected values, with the same cap at
``(P - 1) / w`` as the estimate. :func:`design_power` is the noncentral-t power of that test against
``effect``; :func:`minimum_detectable_effect` inverts it. Calibrated in simulation
(``benchmarks/crossed_calibration.py``, "power"): from components estimated on the data, the printed
power's median against the test's real rejection rate.

The effect a report states power against is one *prefix-level standard deviation*
(:func:`prefix_level_sd`): the SD of a prefix's true mean over the population of prompts, pooled
over the two groups, ``sqrt((s2_b[C] + s2_b[B]) / 2)``. (The SD of the *observed* prefix means, used
before, adds the residual's ``s2_e / P``; with 3 prompts and a large residual that doubled the
effect, and the power printed with it.)
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy import optimize, stats

from harness.analysis.crossed_variance import difference, group_component_limits, group_squares

COMPONENTS = ("prompt", "interaction", "prefix_high", "prefix_low", "prefix_pair_sum", "resid_high", "resid_low")


def components_of(Y: np.ndarray, is_high: np.ndarray, pairs=None) -> dict[str, np.ndarray]:
    """The variance components (:data:`COMPONENTS`, each >= 0; ``prefix_pair_sum`` NaN unless
    ``pairs``) of complete (..., prompts, prefixes) tables: ``prompt`` the prompt effect both groups
    share, ``interaction`` the prompt-by-group one, ``prefix_*`` and ``resid_*`` per group (a
    group's prefix variance includes what a matched pair shares; ``prefix_pair_sum`` is the sum of
    the two groups' prefix variances that pairing leaves)."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    est = difference(Y, is_high, pairs).components
    out = {"prompt": est["prompt"], "interaction": est["interaction"], "resid_high": est["resid_high"],
           "resid_low": est["resid_low"]}
    for name, cols in (("prefix_high", is_high), ("prefix_low", ~is_high)):
        S = group_squares(Y[..., cols])
        out[name] = np.maximum((S.ms_cols - S.ms_resid) / S.n_prompts, 0.0)
    out["prefix_pair_sum"] = est.get("prefix_pair_sum", np.full(np.shape(est["prompt"]), np.nan))
    return out


def _get(components, name: str) -> np.ndarray:
    return np.asarray(components.get(name, np.nan), dtype=float)


def prefix_level_sd(components) -> np.ndarray:
    """One prefix-level SD: ``sqrt((prefix_high + prefix_low) / 2)`` (module docstring)."""
    return np.sqrt((_get(components, "prefix_high") + _get(components, "prefix_low")) / 2)


# A plan's assurance: the chance, over what a pilot could have drawn, that each of its mean squares
# (the prompts', each group's prefixes') is no larger than the one the plan takes. Pilots of 4 x 24
# planning the lead test at power 0.8 (benchmarks/crossed_calibration.py, table 2b): on the median
# (0.5) the real power's 10th percentile fell to 0.35-0.71; taking the prompt mean square alone at
# 0.9 left 0.43 where the residual dominates (a prefix variance estimated near 0 plans too few
# prefixes); every mean square at 0.85 kept it at 0.78 or more in each regime.
ASSURANCE = 0.85


def _quantile_factor(df, assurance: float = 0.5) -> np.ndarray:
    """``df / chi2(df).ppf(1 - assurance)``: what scales a mean square on ``df`` degrees of freedom to
    the upper bound it stays under with probability ``assurance`` (0.5: median-unbiased)."""
    df = np.asarray(df, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(df > 0, df / stats.chi2.ppf(1.0 - assurance, np.where(df > 0, df, 1.0)), 1.0)


def median_unbiased(components, assurance: float = 0.5) -> dict:
    """``components`` with the interaction re-estimated from the prompt mean square scaled to be
    median-unbiased, where the pilot's counts (``n_prompts``, ``n_prefixes_high``, ``n_prefixes_low``,
    as :func:`harness.analysis.design.variance_components` gives them) say how many degrees of
    freedom it had (P - 1); unchanged without them.

    Why: a mean square on few degrees of freedom is skewed, its median well below its mean (on 2,
    0.69 of it), so power planned on a pilot's plain estimates was optimistic in median: at the
    study's 3 x 18 design by 0.10 where prefixes dominate (printed 0.60, real 0.50). Scaling the
    prompt mean square by ``df / median(chi2(df))`` brings every simulated cell within 0.025 of the
    real power in median; scaling the prefix mean squares too overcorrected (down to -0.045).

    ``assurance`` above 0.5 takes the prompt mean square, and each group's prefix mean square
    (``P0 s2_b + s2_e`` on its ``n - 1`` degrees of freedom; paired: the pairs'), at the upper bound
    it stays under with that probability instead (a plan's: :data:`ASSURANCE`), so that the power
    planned on them is reached in about that share of pilots."""
    counts = [_get(components, k) for k in ("n_prompts", "n_prefixes_high", "n_prefixes_low")]
    if not all(np.all(np.isfinite(c)) for c in counts):
        return dict(components)
    P0, n_c, n_b = counts
    resid_part = _get(components, "resid_high") / n_c + _get(components, "resid_low") / n_b
    tau = (2 * _get(components, "interaction") + resid_part) * _quantile_factor(P0 - 1, assurance)
    out = {**components, "interaction": np.maximum(tau - resid_part, 0.0) / 2}
    if assurance <= 0.5:
        return out
    s_c, s_b = _get(components, "resid_high"), _get(components, "resid_low")
    for name, s, n in (("prefix_high", s_c, n_c), ("prefix_low", s_b, n_b)):
        out[name] = _prefix_at(_get(components, name), s, P0, n, assurance)
    pair = _get(components, "prefix_pair_sum")
    if np.any(np.isfinite(pair)):  # the pairs' mean square, P0 pair_sum + s_c + s_b on n - 1 degrees of freedom
        out["prefix_pair_sum"] = _prefix_at(pair, s_c + s_b, P0, np.minimum(n_c, n_b), assurance)
    return out


def _prefix_at(b, s, P0, n, assurance: float) -> np.ndarray:
    """A prefix variance ``b`` whose mean square ``P0 b + s`` (``n - 1`` degrees of freedom) is taken at
    the upper bound of ``assurance``."""
    f = _quantile_factor(np.asarray(n, dtype=float) - 1, assurance)
    return np.maximum(b * f + s * (f - 1) / P0, 0.0)


def planned_variance(components, n_prompts: int, n_prefixes_per_group: int, assurance: float = 0.5
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(variance, degrees of freedom)`` of C minus B at ``n_prompts`` x ``n_prefixes_per_group``
    (module docstring), from :func:`median_unbiased` components (at ``assurance``); paired when
    ``components["prefix_pair_sum"]`` is finite."""
    P, n = int(n_prompts), int(n_prefixes_per_group)
    components = median_unbiased(components, assurance)
    s_c, s_b = _get(components, "resid_high"), _get(components, "resid_low")
    tau = 2 * _get(components, "interaction") + s_c / n + s_b / n
    df_resid = (P - 1) * (n - 1)
    terms = [((tau / P) ** 2, P - 1)]
    pair_sum = _get(components, "prefix_pair_sum")
    paired = np.isfinite(pair_sum)
    b_c, b_b = _get(components, "prefix_high"), _get(components, "prefix_low")
    prefix_part = np.where(paired, np.where(paired, pair_sum, 0.0) / n, (b_c + b_b) / n)
    # the prefix mean squares at their expected values, counted where their component is positive
    ms_pair = np.where(paired, pair_sum, 0.0) + (s_c + s_b) / P
    pair_terms = np.where(paired & (pair_sum > 0), (ms_pair / n) ** 2 / max(n - 1, 1)
                          + ((s_c / (P * n)) ** 2 + (s_b / (P * n)) ** 2) / max(df_resid, 1), 0.0)
    group_terms = sum(np.where(b > 0, ((P * b + s) / (P * n)) ** 2 / max(n - 1, 1) + (s / (P * n)) ** 2
                               / max(df_resid, 1), 0.0) for b, s in ((b_c, s_c), (b_b, s_b)))
    variance = tau / P + prefix_part
    spread = terms[0][0] / max(P - 1, 1) + np.where(paired, pair_terms, group_terms)
    # the estimate's caps: at most df / w for the prompt term and each prefix term
    caps = [(tau / P, P - 1)] + [(np.where(paired, 0.0, np.where(b > 0, (P * b + s) / (P * n), 0.0)), n - 1)
                                 for b, s in ((b_c, s_c), (b_b, s_b))]
    caps.append((np.where(paired & (pair_sum > 0), ms_pair / n, 0.0), n - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        dof = variance ** 2 / spread
        for term, df in caps:
            share = term / variance
            dof = np.minimum(dof, np.where(share > 0, max(df, 1) / np.where(share > 0, share, 1.0), np.inf))
    return variance, dof


def design_power(components, n_prompts: int, n_prefixes_per_group: int, effect, alpha: float = 0.05,
                 alternative: str = "two-sided", assurance: float = 0.5) -> np.ndarray:
    """Power of the lead C-minus-B test at ``n_prompts`` prompts and ``n_prefixes_per_group``
    prefixes per group against a true difference ``effect``, from variance ``components`` (a row of
    :func:`harness.analysis.design.variance_components`, or a dict of arrays): noncentral t on the
    planned variance and degrees of freedom (module docstring). A float for scalar inputs.

    Example: components with a residual of 1 and everything else 0, 8 prompts x 12 prefixes per
    group: V = (1/12 + 1/12) / 8, so an effect of 0.5 sits 3.46 standard errors out on 7 degrees of
    freedom: power 0.84. ``assurance``: the mean squares' upper bound (:func:`median_unbiased`).
    """
    variance, dof = planned_variance(components, n_prompts, n_prefixes_per_group, assurance)
    effect = np.asarray(effect, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a shift past float's range is infinite
        shift = np.where(variance > 0, effect / np.sqrt(np.where(variance > 0, variance, 1.0)), np.inf)
        nu = np.where(np.isfinite(dof) & (dof > 0), dof, 1.0)
        if alternative == "two-sided":
            crit = stats.t.ppf(1 - alpha / 2, nu)
            nc = np.where(np.isfinite(shift), shift, 0.0)
            # scipy returns NaN for a far tail it underflows in: that tail is 0
            power = np.nan_to_num(stats.nct.sf(crit, nu, nc)) + np.nan_to_num(stats.nct.cdf(-crit, nu, nc))
        elif alternative in ("greater", "less"):
            crit = stats.t.ppf(1 - alpha, nu)
            signed = shift if alternative == "greater" else -shift
            power = np.nan_to_num(stats.nct.sf(crit, nu, np.where(np.isfinite(signed), signed, 0.0)))
        else:
            raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    # far out the noncentral t's tail evaluation can fail (NaN); there the power is 1 to any precision
    power = np.where((np.abs(shift) > 38) | (np.isinf(shift) & (effect != 0)), 1.0, power)
    power = np.where(np.isfinite(variance) & np.isfinite(effect), power, np.nan)
    return float(power) if np.ndim(power) == 0 else power


# How far the real rejection rate of the lead test fell below (and rose above) design_power at the
# generator's own, known components: -0.056 to +0.017 over the 32 measure cells of
# benchmarks/crossed_calibration.py (part lead-power, column "planned at truth - real", seed 0, 4,000
# data sets each; results/calibration.md's table 1b shows fresh draws). The noncentral t on
# Satterthwaite's degrees of freedom overstates the power most with 3 prefixes per group.
PLANNING_OVERSTATES = 0.06
PLANNING_UNDERSTATES = 0.02


def design_power_range(Y: np.ndarray, is_high: np.ndarray, pairs=None, confidence: float = 0.95,
                       alpha: float = 0.05, effect: float | None = None, design: tuple[int, int] | None = None,
                       statistic=None) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)``: the smallest and largest :func:`design_power` of the lead test at the design
    of complete (..., prompts, prefixes) tables ``Y`` (or at ``design``, prompts x prefixes per group:
    what a planner states for a design it chooses) against ``effect`` (in the measure's units: a
    smallest effect of interest, Δ) or by default one prefix-level SD, with the variance
    components it is computed from anywhere in their own two-sided ``confidence`` intervals: the
    min and max over the 32 corners of that box (the power is not monotone in the components, which
    also set the degrees of freedom), widened by the planning model's own error at known components
    (:data:`PLANNING_OVERSTATES` below, :data:`PLANNING_UNDERSTATES` above; clipped to [0, 1]). Not
    median-corrected: these are limits, not estimates.

    Why: the point power rests on estimated components and is itself stated against an estimated
    effect (one prefix-level SD); at 3 prompts x 6 prefixes with prefixes dominating its median was
    0.05 above the real power (``benchmarks/crossed_calibration.py``, table 1). The range says how far
    the data let it move, and it is stated where the point power cannot be (a prefix variance
    estimated at 0). The five intervals: per group, the prefix and residual variances
    (:func:`harness.analysis.crossed_variance.group_component_limits`); the prompt term of C minus B,
    ``tau = 2 interaction + s2_e[C] / n_C + s2_e[B] / n_B``, by chi-square on the variance of the
    prompts' differences (P - 1 degrees of freedom; the interaction at a corner is what is left of
    tau after the residuals, clipped at 0). Paired (``pairs``): the pair differences' own table gives
    twice the interaction, the pair sum of prefix variances and the sum of residuals (split evenly
    between the groups), and each group's table its prefix variance (for the effect).

    ``statistic(components, n_prompts, n_prefixes, effect)``: another function of the design's
    components to range over the same box instead of the power (a plan's chance of a verdict,
    :mod:`harness.analysis.decided`); its extremes are returned as they are, not widened."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    P = Y.shape[-2]
    high = group_component_limits(Y[..., is_high], confidence)
    low = group_component_limits(Y[..., ~is_high], confidence)
    if pairs is None:
        n_c, n_b = int(is_high.sum()), int((~is_high).sum())
        n = min(n_c, n_b)
        ms_d = (Y[..., is_high].mean(-1) - Y[..., ~is_high].mean(-1)).var(-1, ddof=1)
        tail = (1 - confidence) / 2
        tau = tuple(ms_d * (P - 1) / stats.chi2.ppf(q, P - 1) for q in (1 - tail, tail))
        axes = {"tau": tau, "prefix_high": high["prefix"], "resid_high": high["resid"],
                "prefix_low": low["prefix"], "resid_low": low["resid"]}

        def at(c: dict) -> dict:
            inter = np.maximum(c["tau"] - c["resid_high"] / n_c - c["resid_low"] / n_b, 0.0) / 2
            return {**c, "interaction": inter}
    else:
        n = len(pairs[0])
        D = group_component_limits(Y[..., pairs[0]] - Y[..., pairs[1]], confidence)
        axes = {"twice_interaction": D["prompt"], "prefix_pair_sum": D["prefix"], "resid_sum": D["resid"],
                "prefix_high": high["prefix"], "prefix_low": low["prefix"]}

        def at(c: dict) -> dict:
            return {**c, "interaction": c["twice_interaction"] / 2, "resid_high": c["resid_sum"] / 2,
                    "resid_low": c["resid_sum"] / 2}
    def power_at(corner: dict) -> np.ndarray:
        components = at({name: np.asarray(end, dtype=float) for name, end in corner.items()})
        size = prefix_level_sd(components) if effect is None else effect
        if statistic is not None:
            return statistic(components, *(design or (P, n)), size)
        return design_power(components, *(design or (P, n)), size, alpha)

    lowest, highest = extremes_over_box(axes, power_at)
    if statistic is not None:
        return lowest, highest
    lo_end, hi_end = np.maximum(lowest - PLANNING_OVERSTATES, 0.0), np.minimum(highest + PLANNING_UNDERSTATES, 1.0)
    return (float(lo_end), float(hi_end)) if np.ndim(lo_end) == 0 else (lo_end, hi_end)


def extremes_over_box(limits: dict[str, tuple], power_at, corners_per_call: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(min, max)`` of ``power_at(corner)`` over the ``2 ** len(limits)`` corners of the box
    ``limits`` (``{name: (low end, high end)}``; a corner is ``{name: one end}``), elementwise over
    batched ends; NaN wherever a corner's power is not finite. All corners, not the two "obvious"
    ones: a power is not monotone in variance components, which also set its degrees of freedom.
    What :func:`design_power_range` and :func:`harness.analysis.claim_power.min_contrast_power_range`
    search. ``corners_per_call`` > 1: ``power_at`` gets that many corners at once, each end stacked
    on a new leading axis (a tuple end part by part), and returns their powers along it; a simulated
    power pays its fixed cost per call, not per corner."""
    corners = list(itertools.product((0, 1), repeat=len(limits)))
    powers = []
    for start in range(0, len(corners), corners_per_call):
        group = corners[start:start + corners_per_call]
        if corners_per_call == 1:
            corner = {name: ends[end] for (name, ends), end in zip(limits.items(), group[0])}
            powers.append(np.asarray(power_at(corner), dtype=float))
            continue
        corner = {name: _stacked([ends[c[i]] for c in group]) for i, (name, ends) in enumerate(limits.items())}
        powers.extend(np.asarray(power_at(corner), dtype=float))
    powers = np.stack(np.broadcast_arrays(*powers))
    bad = ~np.all(np.isfinite(powers), axis=0)
    return np.where(bad, np.nan, powers.min(0)), np.where(bad, np.nan, powers.max(0))


def _stacked(ends: list):
    """Corners' ends of one axis on a new leading axis (a tuple end part by part)."""
    if isinstance(ends[0], tuple):
        return tuple(_stacked(list(parts)) for parts in zip(*ends))
    return np.stack(np.broadcast_arrays(*(np.asarray(e, dtype=float) for e in ends)))


def minimum_detectable_effect(components, n_prompts: int, n_prefixes_per_group: int, power: float = 0.8,
                              alpha: float = 0.05) -> float:
    """The smallest true difference the lead two-sided test detects with ``power`` at this design
    (scalar components): :func:`design_power` solved for ``effect``."""
    variance, _ = planned_variance(components, n_prompts, n_prefixes_per_group)
    if not (np.isfinite(variance) and variance > 0):
        return np.nan
    scale = float(np.sqrt(variance))

    def gap(effect: float) -> float:
        return design_power(components, n_prompts, n_prefixes_per_group, effect, alpha) - power

    if gap(100 * scale) < 0:
        return np.inf
    return float(optimize.brentq(gap, 0.0, 100 * scale, xtol=1e-10 * scale))


def group_planned_variance(components, n_prompts: int, n_prefixes: int, pilot: tuple[int, int] | None = None,
                           assurance: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """``(variance, degrees of freedom)`` of one group's crossed mean (a contrast within C, as claims
    1 and 2 test) at ``n_prompts`` x ``n_prefixes``, from that mean's components (``prompt``,
    ``prefix``, ``resid``, as :func:`harness.analysis.crossed_variance.group_mean` estimates them):
    ``prompt / P + prefix / n + resid / (P n)``, Satterthwaite over the expected mean squares with the
    estimate's caps. With ``pilot`` (the prompts and prefixes the components came from), the prompt
    mean square ``n0 a + e`` is made median-unbiased on its ``P0 - 1`` degrees of freedom (or taken at
    the upper bound of ``assurance``, with the prefix mean square), as :func:`median_unbiased` does
    for C minus B."""
    P, n = int(n_prompts), int(n_prefixes)
    a, b, e = (_get(components, k) for k in ("prompt", "prefix", "resid"))
    if pilot is not None:
        P0, n0 = pilot
        f = _quantile_factor(P0 - 1, assurance)
        a = np.maximum(a * f + e * (f - 1) / n0, 0.0)
        if assurance > 0.5:  # the prefix mean square too, as median_unbiased does for a plan
            b = _prefix_at(b, e, P0, n0, assurance)
    ms_rows, ms_cols = n * a + e, P * b + e
    variance = a / P + b / n + e / (P * n)
    scale = P * n
    terms = [(np.where(a > 0, ms_rows, 0.0) / scale, P - 1), (np.where(b > 0, ms_cols, 0.0) / scale, n - 1),
             ((1.0 - (a > 0) - (b > 0)) * e / scale, (P - 1) * (n - 1))]
    spread = sum(np.where(np.isfinite(t), t, 0.0) ** 2 / max(df, 1) for t, df in terms)
    with np.errstate(invalid="ignore", divide="ignore"):
        dof = np.where(spread > 0, variance ** 2 / np.where(spread > 0, spread, 1.0), np.inf)
        for term, df in terms[:2]:
            share = np.where(variance > 0, term / np.where(variance > 0, variance, 1.0), 0.0)
            dof = np.where(share > 0, np.minimum(dof, max(df, 1) / np.where(share > 0, share, 1.0)), dof)
    return variance, dof


def group_design_power(components, n_prompts: int, n_prefixes: int, effect, alpha: float = 0.025,
                       pilot: tuple[int, int] | None = None, assurance: float = 0.5) -> np.ndarray:
    """One-sided power at level ``alpha`` of the t test of one group's crossed mean against a true
    mean ``effect`` (> 0) at ``n_prompts`` x ``n_prefixes`` (:func:`group_planned_variance`). Claims 1
    and 2 put both of their contrasts' 95% intervals clear of zero: each a one-sided test at 0.025."""
    variance, dof = group_planned_variance(components, n_prompts, n_prefixes, pilot, assurance)
    effect = np.asarray(effect, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a shift past float's range is infinite
        shift = np.where(variance > 0, effect / np.sqrt(np.where(variance > 0, variance, 1.0)), np.inf)
        nu = np.where(np.isfinite(dof) & (dof > 0), dof, 1e6)
        crit = stats.t.ppf(1 - alpha, nu)
        power = np.nan_to_num(stats.nct.sf(crit, nu, np.where(np.isfinite(shift), shift, 0.0)))
    power = np.where((shift > 38) | (np.isinf(shift) & (effect > 0)), 1.0, power)
    power = np.where(np.isfinite(variance) & np.isfinite(effect), power, np.nan)
    return float(power) if np.ndim(power) == 0 else power


def fewest_reaching(reaches, start: int, limit: int) -> int | None:
    """The smallest count in ``[start, limit]`` at which ``reaches(count)`` holds, for a test whose
    power only grows with the count (prompts or prefixes): bisection. None where ``limit`` does
    not reach it."""
    if not reaches(limit):
        return None
    lo, hi = start, limit
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid + 1, hi)
    return lo

