"""The power of claims 1 and 2 (the smaller of two contrasts of one group's cells clears zero), and
how far the data let that power move.

Claims 1 and 2 are supported when both contrasts' one-sided 2.5% tests reject
(:func:`harness.analysis.claims.min_contrast_interval`). Their power is stated against an effect of
one of each contrast's own prefix-level SDs (:func:`min_contrast_power`). That effect is itself an
estimate, and a poor one where prefixes vary little beside the residual: with 6 to 8 prompts and
the residual dominant, half of the simulated data sets estimated a contrast's prefix variance at 0
(no power can be stated against an effect of 0), and in the other half, which drew the larger
estimates, the median printed power was 0.07 above the real one (``benchmarks/crossed_calibration.py``,
table 4b). So every claim-1 and claim-2 row also carries :func:`min_contrast_power_range`: the
smallest and largest value the same power takes with its inputs anywhere in their own confidence
intervals (at the corners of that box). That range is stated even where the point power cannot be.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.stats import norm

from harness.analysis.crossed_variance import group_component_limits, group_mean
from harness.analysis.power import extremes_over_box, group_design_power


def contrast_components(Y: np.ndarray, weights: np.ndarray) -> list[dict]:
    """The crossed variance components (``prompt``, ``prefix``, ``resid``: what
    :func:`harness.analysis.crossed_variance.group_mean` estimates) of each contrast ``weights`` [2, k]
    of ``Y[prompt, prefix, k]``, with the prompts and prefixes they came from (``n_prompts``,
    ``n_prefixes``) and the two contrasts' covariance components (``cov_prompt``, ``cov_prefix``,
    ``cov_resid``, the same on cross products, in both): what :func:`min_contrast_power` plans with."""
    Z = _contrasts(Y, weights)
    est = group_mean(Z)
    P, n = Z.shape[1:]
    rows, cols = Z.mean(2), Z.mean(1)  # [2, P], [2, n]
    R = Z - rows[:, :, None] - cols[:, None, :] + Z.mean((1, 2))[:, None, None]
    d_rows, d_cols = rows - rows.mean(1, keepdims=True), cols - cols.mean(1, keepdims=True)
    ms_rows = n * (d_rows[0] * d_rows[1]).sum() / max(P - 1, 1)
    ms_cols = P * (d_cols[0] * d_cols[1]).sum() / max(n - 1, 1)
    ms_resid = (R[0] * R[1]).sum() / max((P - 1) * (n - 1), 1)
    cov = {"cov_prompt": (ms_rows - ms_resid) / n, "cov_prefix": (ms_cols - ms_resid) / P, "cov_resid": ms_resid}
    return [{**{k: float(v[i]) for k, v in est.components.items()}, **cov, "n_prompts": P, "n_prefixes": n}
            for i in range(Z.shape[0])]


def _contrasts(Y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``Z[contrast, prompt, prefix]`` of ``Y[prompt, prefix, k]`` and ``weights`` [2, k]."""
    return np.einsum("pxk,ck->cpx", np.asarray(Y, dtype=float), np.asarray(weights, dtype=float))


def _both_clear(components: list[dict], n_prompts: int, n_prefixes: int, effect_sds: float, median_corrected: bool,
                effect: float | None = None, assurance: float = 0.5) -> float:
    """The chance both contrasts' one-sided 2.5% tests reject, each contrast's truth ``effect`` (in
    the measure's units; else ``effect_sds`` of its own ``prefix`` SD): each test's power
    (:func:`harness.analysis.power.group_design_power`, the prompt variance made median-unbiased for
    the pilot's prompts when ``median_corrected``) joined by a normal copula at the correlation the
    contrasts' planned covariance implies (they share terms)."""
    powers = [group_design_power(c, n_prompts, n_prefixes,
                                 effect if effect is not None else effect_sds * np.sqrt(c["prefix"]),
                                 pilot=(c["n_prompts"], c["n_prefixes"]) if median_corrected else None,
                                 assurance=assurance)
              for c in components]
    if not all(np.isfinite(powers)):
        return np.nan
    P, n = n_prompts, n_prefixes
    var = [c["prompt"] / P + c["prefix"] / n + c["resid"] / (P * n) for c in components]
    c0 = components[0]
    cov = c0["cov_prompt"] / P + c0["cov_prefix"] / n + c0["cov_resid"] / (P * n)
    rho = float(np.clip(cov / np.sqrt(var[0] * var[1]), -0.999, 0.999)) if min(var) > 0 else 0.0
    q = norm.ppf(np.clip(powers, 1e-12, 1 - 1e-12))
    return float(stats.multivariate_normal.cdf(q, mean=[0.0, 0.0], cov=[[1.0, rho], [rho, 1.0]]))


def min_contrast_power(components: list[dict], n_prompts: int, n_prefixes: int, effect_sds: float = 1.0,
                       effect: float | None = None, assurance: float = 0.5) -> float:
    """Power of a min-of-contrasts claim (1 or 2) at ``n_prompts`` x ``n_prefixes``: the chance
    that both contrasts' 95% intervals clear zero when each contrast's true value is ``effect`` (in
    the measure's units: a claim's smallest effect of interest, Δ) or, without one, ``effect_sds``
    of its own prefix-level SDs (the SD of a prefix's true contrast over prompts), from
    :func:`contrast_components` (the prompt variance median-unbiased for the prompts it came from).
    Both contrasts at the effect is the least favourable truth whose smaller contrast is that
    effect. NaN where the effect is in SDs and a contrast's prefix variance is estimated at 0: there
    is no effect to plan on. Calibrated in ``benchmarks/crossed_calibration.py`` (part claims-power).
    ``assurance``: the prompt and prefix mean squares at that upper bound instead of the median
    (a plan's: :func:`harness.analysis.power.median_unbiased`)."""
    if effect is None and not all(c["prefix"] > 0 for c in components):
        return np.nan
    return _both_clear(components, n_prompts, n_prefixes, effect_sds, median_corrected=True, effect=effect,
                       assurance=assurance)


def min_contrast_power_range(Y: np.ndarray, weights: np.ndarray, confidence: float = 0.95,
                             components: list[dict] | None = None, effect: float | None = None,
                             design: tuple[int, int] | None = None, statistic=None) -> tuple[float, float]:
    """``(low, high)``: the smallest and largest power :func:`min_contrast_power` states for
    ``Y[prompt, prefix, k]`` at its own design when each contrast's components (prompt, prefix,
    residual variance) are moved to the ends of their two-sided ``confidence`` intervals
    (:func:`harness.analysis.crossed_variance.group_component_limits`), over the eight corners of
    that box. Not only the two obvious corners (prefix variance low and the others high, and the
    reverse): the power is not monotone in the components, as they also set the test's degrees of
    freedom (with 3 prefixes a dominant prefix variance leaves 2). A prefix variance at its lower
    limit of 0 puts the effect at 0, where the power is the tests' size. Not median-corrected: these
    are limits, not estimates. In simulation the range held the real power in 0.943-1.000 of data
    sets in all 18 cells (``benchmarks/crossed_calibration.py``, table 4b). ``components``:
    :func:`contrast_components` of ``Y`` and ``weights``, where the caller has them already; ``effect``:
    the truth in the measure's units (:func:`min_contrast_power`), else one prefix-level SD; ``design``:
    prompts x prefixes to state it at instead of ``Y``'s own (a planner's chosen design);
    ``statistic(components, n_prompts, n_prefixes, effect)``: another function of both contrasts'
    components to range over the same box instead of the power (a plan's chance of a verdict)."""
    components = contrast_components(Y, weights) if components is None else components
    limits = group_component_limits(_contrasts(Y, weights), confidence)
    P, n = design or (components[0]["n_prompts"], components[0]["n_prefixes"])

    def power_at(corner: dict) -> float:
        at = [{**c, **{k: float(end[i]) for k, end in corner.items()}} for i, c in enumerate(components)]
        if statistic is not None:
            return statistic(at, P, n, effect)
        return _both_clear(at, P, n, 1.0, median_corrected=False, effect=effect)

    low, high = extremes_over_box(limits, power_at)
    return float(low), float(high)
