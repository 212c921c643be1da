"""Power of the lead test on a *rate* (the MOVER interval of
:func:`harness.analysis.rate_intervals.rate_difference`) by simulation from a latent-threshold crossed
model fitted to the table: what :func:`harness.analysis.lead.lead` states for a rate's null.

Why not the measure's formula (:func:`harness.analysis.power.design_power`, a noncentral t): on 0/1
tables the test a report runs is MOVER of crossed Wilson intervals, not a t test, and where hits are
sparse it rejects far less often than a t test on the same variance would. In simulation the t
formula's median power was up to 0.20 above the MOVER test's real rejection rate (zero-heavy rates),
and the low end of the range it was stated with lay above the real power in up to 38.5% of data sets
(``benchmarks/crossed_calibration.py``, table 1d; this module: within 0.05 in 24 of 32 cells, never
more than 0.009 above, low by up to 0.17 where hits are sparse; its range holds the real power in
0.95 of data sets in 23 cells, its low end above it in at most 3.6%).

The model: each cell is a hit when a latent normal value passes its group's threshold,
``z[p, x] = a[p] + ag[p, g] + pair[x] + b[x] + e[p, x]`` (variance 1 per group). Its shares are
fitted by matching the 0/1 table's own covariances: two cells of a group sharing a prompt covary by
the group's prompt component (:func:`harness.analysis.crossed_variance.group_mean`), sharing a prefix
by its prefix component; a C cell and a B cell sharing a prompt by the prompts' shared covariance,
sharing a matched pair by the pairs' covariance. For a binary cell at threshold ``t`` that covariance
is ``integral_0^rho phi2(t1, t2; r) dr`` (the derivative of the bivariate normal CDF in its
correlation), monotone in ``rho``, so each share is found by bisection. A group with no hit (or no
miss) shows nothing of its shares and takes the other group's.

The power: B keeps its observed rate, C's is moved by ``effect`` (one prefix-level SD on the 0/1
scale, :func:`harness.analysis.power.prefix_level_sd`, as for measures; downward where upward would
pass 1), :data:`SIMULATIONS` tables of the same design are drawn and the share whose interval leaves
out 0 is the power (Monte Carlo SE at most 0.5 / sqrt(SIMULATIONS) = 0.025). The range: the same at
the 64 corners of a box, each group's prompt and prefix components in their own 95% intervals
(:func:`harness.analysis.crossed_variance.group_component_limits` on heavy-tailed degrees of freedom:
sparse hits make the means mostly 0 and a few large; the effect moves with the prefix ones), the ties
between C and B in Fisher's z interval of their correlation on the means' effective number (both at
one end together: tighter ties make a less noisy difference) and B's rate in its crossed Wilson
interval, on :data:`RANGE_SIMULATIONS` tables a corner with common random numbers. Seeded: the same
table always prints the same power. None is stated where the prefix-level SD is estimated at 0
(prefixes' rates vary no more than their cells would by chance; no hit at all, say), and no range
where no corner's can be above 0: against an effect of 0 a "power" is the test's false-positive rate.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from harness.analysis.crossed_variance import group_component_limits, group_mean, heavy_tailed_df
from harness.analysis.power import components_of, extremes_over_box, prefix_level_sd
from harness.analysis.rate_intervals import crossed_rate_interval, rate_difference

SIMULATIONS = 400
RANGE_SIMULATIONS = 200
CORNER_CELLS = 2_000_000  # cells of simulated tables per call of the range's corners (peak memory: about 70 MB more)
RHO_MAX = 0.98  # a latent share above this is indistinguishable from 1 on a 0/1 table
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(24)


def orthant_covariance(t1, t2, rho) -> np.ndarray:
    """The covariance of two binary cells ``1(z1 > t1)`` and ``1(z2 > t2)`` of standard normals with
    correlation ``rho``: ``integral_0^rho phi2(t1, t2; r) dr`` (Gauss-Legendre, 24 nodes)."""
    t1, t2, rho = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (t1, t2, rho)))
    r = rho[..., None] * (_NODES + 1) / 2
    with np.errstate(over="ignore", invalid="ignore"):
        dens = np.exp(-(t1[..., None] ** 2 - 2 * r * t1[..., None] * t2[..., None] + t2[..., None] ** 2)
                      / (2 * (1 - r ** 2))) / (2 * np.pi * np.sqrt(1 - r ** 2))
    dens = np.where(np.isfinite(dens), dens, 0.0)  # an infinite threshold (rate 0 or 1): no covariance
    return (dens * _WEIGHTS).sum(-1) * rho / 2


def latent_share(t1, t2, covariance) -> np.ndarray:
    """The latent correlation in [0, :data:`RHO_MAX`] at which :func:`orthant_covariance` is
    ``covariance`` (clipped to that range's ends; bisection, elementwise)."""
    t1, t2, cov = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (t1, t2, covariance)))
    lo, hi = np.zeros(cov.shape), np.full(cov.shape, RHO_MAX)
    for _ in range(30):
        mid = (lo + hi) / 2
        below = orthant_covariance(t1, t2, mid) < cov
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def _threshold(rate) -> np.ndarray:
    return stats.norm.isf(np.clip(rate, 0.0, 1.0))


def between_covariances(Y: np.ndarray, is_high: np.ndarray, pairs=None, confidence: float | None = None):
    """The 0/1-scale covariances that tie C to B: ``(shared, pair)``, the covariance of the C and B
    prompt means over prompts (the prompt effect both groups share) and of the paired prefix means
    over pairs (what a matched pair shares; 0 unpaired), each >= 0. With ``confidence``: ``((low,
    high), (low, high))``, each from Fisher's z interval of the correlation behind it, scaled back by
    the two SDs, on the units' effective count: 1 + :func:`harness.analysis.crossed_variance.heavy_tailed_df`
    of the scarcer side's means, not their count (sparse hits make those means mostly 0 and a few
    large, and Fisher's 1 / sqrt(k - 3) assumes normal ones). Where that count is 3 or fewer the
    interval is the whole [-1, 1] and the high end has no bound of its own (infinite: the latent
    fit then ties C and B as closely as their own prompt or prefix shares allow)."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    sets = [(Y[..., is_high].mean(-1), Y[..., ~is_high].mean(-1))]
    if pairs is not None:
        col = Y.mean(-2)
        sets.append((col[..., pairs[0]], col[..., pairs[1]]))
    out = []
    for a, b in sets:
        k = a.shape[-1]
        da, db = a - a.mean(-1, keepdims=True), b - b.mean(-1, keepdims=True)
        sa, sb = np.sqrt((da ** 2).sum(-1) / (k - 1)), np.sqrt((db ** 2).sum(-1) / (k - 1))
        cov = (da * db).sum(-1) / (k - 1)
        if confidence is None:
            out.append(np.maximum(cov, 0.0))
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.clip(np.where(sa * sb > 0, cov / np.where(sa * sb > 0, sa * sb, 1.0), 0.0), -0.999999, 0.999999)
        units = 1 + np.minimum(heavy_tailed_df(a), heavy_tailed_df(b))
        z = stats.norm.ppf(1 - (1 - confidence) / 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            half = np.where(units > 3, z / np.sqrt(np.maximum(units - 3, 1e-12)), np.inf)
        low = np.maximum(np.tanh(np.arctanh(r) - half) * sa * sb, 0.0)
        high = np.where(np.isfinite(half), np.maximum(np.tanh(np.arctanh(r) + half) * sa * sb, 0.0), np.inf)
        out.append((low, high))
    if pairs is None:
        out.append(np.zeros(np.shape(Y)[:-2]) if confidence is None else (np.zeros(np.shape(Y)[:-2]),) * 2)
    return tuple(out)


def own_shares(Y: np.ndarray, is_high: np.ndarray, pairs=None, prompt=None, prefix=None, between=None
                ) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Each latent share fitted on its own (:func:`latent_share` of its 0/1 covariance, the table's own
    unless given), before :func:`assemble_shares` reconciles them; and whether each group has both outcomes."""
    groups = (Y[..., is_high], Y[..., ~is_high])
    rates = [G.mean((-2, -1)) for G in groups]
    t = [_threshold(r) for r in rates]
    if prompt is None or prefix is None:
        comps = [group_mean(G).components for G in groups]
        prompt = prompt or tuple(c["prompt"] for c in comps)
        prefix = prefix or tuple(c["prefix"] for c in comps)
    shared_cov, pair_cov = between or between_covariances(Y, is_high, pairs)
    own = {"prompt_high": latent_share(t[0], t[0], prompt[0]), "prompt_low": latent_share(t[1], t[1], prompt[1]),
           "prefix_high": latent_share(t[0], t[0], prefix[0]), "prefix_low": latent_share(t[1], t[1], prefix[1]),
           "shared": latent_share(t[0], t[1], shared_cov),
           "pair": latent_share(t[0], t[1], pair_cov) if pairs is not None else np.zeros(np.shape(rates[0]))}
    return own, [(r > 0) & (r < 1) for r in rates]


def assemble_shares(own: dict, informative: list) -> dict[str, np.ndarray]:
    """The shares of :func:`own_shares` reconciled: a group without both outcomes takes the other's, a
    group's two shares together stay within :data:`RHO_MAX`, and the ties stay within both groups'."""
    shares = {}
    for name in ("prompt", "prefix"):
        high, low = own[f"{name}_high"], own[f"{name}_low"]
        # a group with no hit (or no miss) shows nothing: it takes the other group's share
        shares[f"{name}_high"] = np.where(informative[0], high, low)
        shares[f"{name}_low"] = np.where(informative[1], low, high)
    # the two parts of a group cannot pass the whole latent variance
    for g in ("high", "low"):
        total = shares[f"prompt_{g}"] + shares[f"prefix_{g}"]
        scale = np.where(total > RHO_MAX, RHO_MAX / np.maximum(total, 1e-12), 1.0)
        shares[f"prompt_{g}"], shares[f"prefix_{g}"] = shares[f"prompt_{g}"] * scale, shares[f"prefix_{g}"] * scale
    both = informative[0] & informative[1]
    for name, within in (("shared", "prompt"), ("pair", "prefix")):
        bound = np.minimum(shares[f"{within}_high"], shares[f"{within}_low"])
        shares[name] = np.where(both, np.minimum(own[name], bound), 0.0)
    return shares


def fit_shares(Y: np.ndarray, is_high: np.ndarray, pairs=None) -> dict[str, np.ndarray]:
    """The latent shares of complete (..., prompts, prefixes) 0/1 tables (module docstring):
    ``prompt_high``/``prompt_low`` (a + ag), ``prefix_high``/``prefix_low`` (pair + b), ``shared``
    (a, at most either group's prompt share), ``pair`` (at most either group's prefix share; 0
    unpaired). A group's two shares together stay within :data:`RHO_MAX`."""
    return assemble_shares(*own_shares(np.asarray(Y, dtype=float), np.asarray(is_high, dtype=bool), pairs))


def normals_for(batch: tuple, sims: int, P: int, is_high: np.ndarray, pairs, rng: np.random.Generator) -> dict:
    """The standard normals ``sims`` simulated tables of ``P`` prompts x ``is_high``'s prefixes are made
    of (per batch element): a prompt's, a prompt x group's, a prefix's, a matched pair's, a cell's."""
    n = len(is_high)
    n_pairs = len(pairs[0]) if pairs is not None else 0
    shape = (*batch, sims)
    return {"a": rng.standard_normal((*shape, P, 1)), "ag": rng.standard_normal((*shape, P, 2)),
            "b": rng.standard_normal((*shape, 1, n)), "pair": rng.standard_normal((*shape, 1, max(n_pairs, 1))),
            "e": rng.standard_normal((*shape, P, n))}


def simulated_intervals(shares: dict, rate_low, effect, is_high: np.ndarray, pairs, normals: dict,
                        alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)``: the lead rate test's intervals (``1 - alpha``) of C - B on the tables the
    standard ``normals`` (:func:`normals_for`) make under ``shares``, B at ``rate_low`` and C moved by
    ``effect``, one per simulated table (last axis)."""
    rate_low = np.asarray(rate_low, dtype=float)
    effect = np.asarray(effect, dtype=float)
    up = rate_low + effect
    rate_high = np.where(up <= 1, up, np.maximum(rate_low - effect, 0.0))
    g = np.where(is_high, 0, 1)

    def per_set(x):  # a per-data-set value, broadcast over (sims, prompts, prefixes)
        return np.asarray(x, dtype=float)[..., None, None, None]

    sh = {k: per_set(v) for k, v in shares.items()}
    prompt = np.where(g == 0, sh["prompt_high"], sh["prompt_low"])
    prefix = np.where(g == 0, sh["prefix_high"], sh["prefix_low"])
    own_prompt = np.sqrt(np.maximum(prompt - sh["shared"], 0.0))
    z = np.sqrt(sh["shared"]) * normals["a"] + own_prompt * normals["ag"][..., g]
    if pairs is not None:
        member = np.zeros(len(is_high), dtype=int)
        member[pairs[0]], member[pairs[1]] = np.arange(len(pairs[0])), np.arange(len(pairs[0]))
        z = z + np.sqrt(sh["pair"]) * normals["pair"][..., member]
        z = z + np.sqrt(np.maximum(prefix - sh["pair"], 0.0)) * normals["b"]
    else:
        z = z + np.sqrt(prefix) * normals["b"]
    z = z + np.sqrt(np.maximum(1 - prompt - prefix, 0.0)) * normals["e"]
    threshold = np.where(g == 0, per_set(_threshold(rate_high)), per_set(_threshold(rate_low)))
    tables = (z > threshold).astype(float)
    _, low, high = rate_difference(tables, is_high, pairs, 1 - alpha)
    return low, high


def _rejection_rate(shares: dict, rate_low, effect, is_high: np.ndarray, pairs, normals: dict,
                    alpha: float) -> np.ndarray:
    """Share of tables drawn from ``shares`` (B at ``rate_low``, C moved by ``effect``) on which the
    lead rate test rejects at ``alpha`` (two-sided)."""
    low, high = simulated_intervals(shares, rate_low, effect, is_high, pairs, normals, alpha)
    return ((low > 0) | (high < 0)).mean(-1)


def simulated_power(shares: dict, rate_low, effect, n_prompts: int, is_high: np.ndarray, pairs=None,
                    alpha: float = 0.05, sims: int = SIMULATIONS, seed: int = 0) -> np.ndarray:
    """The lead rate test's rejection rate (two-sided, ``alpha``) on ``sims`` tables of ``n_prompts``
    x ``is_high``'s prefixes drawn from latent ``shares`` (as :func:`fit_shares` gives them, arrays over
    leading axes), B at ``rate_low`` and C moved from it by ``effect``: the power at known shares, which
    :func:`rate_power` evaluates at a table's fitted ones."""
    is_high = np.asarray(is_high, dtype=bool)
    normals = normals_for(np.shape(rate_low), sims, n_prompts, is_high, pairs, np.random.default_rng(seed))
    return _rejection_rate(shares, rate_low, effect, is_high, pairs, normals, alpha)


def rate_power(Y: np.ndarray, is_high: np.ndarray, pairs=None, effect=None, alpha: float = 0.05,
               sims: int = SIMULATIONS, seed: int = 0) -> np.ndarray:
    """Power of the lead rate test (two-sided, ``alpha``) against ``effect`` (default: one
    prefix-level SD of the table, :func:`harness.analysis.power.prefix_level_sd`) on complete
    (..., prompts, prefixes) 0/1 tables, by simulation from their fitted latent model (module
    docstring); NaN where the effect is not finite, and where the default effect is 0 (the prefix
    component estimated at 0 in both groups: prefixes' rates vary no more than their cells would by
    chance, or there is no hit at all), so there is nothing to size an effect by and the "power"
    would only be the test's false-positive rate. A float for one table."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    sized = effect is not None
    if effect is None:
        effect = prefix_level_sd(components_of(Y, is_high, pairs))
    power = simulated_power(fit_shares(Y, is_high, pairs), Y[..., ~is_high].mean((-2, -1)), effect, Y.shape[-2],
                            is_high, pairs, alpha, sims, seed)
    power = np.where(np.isfinite(effect) & (sized | (np.asarray(effect) > 0)), power, np.nan)
    return float(power) if np.ndim(power) == 0 else power


def rate_power_range(Y: np.ndarray, is_high: np.ndarray, pairs=None, alpha: float = 0.05, confidence: float = 0.95,
                     sims: int = RANGE_SIMULATIONS, seed: int = 1, effect: float | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)``: the least and greatest :func:`rate_power` against ``effect`` (a difference in
    proportion: a smallest effect of interest, Δ) or by default one prefix-level SD over the
    box of the module docstring (each group's prompt and prefix components, the ties between C and B
    and B's rate in their own ``confidence`` intervals), elementwise over the leading axes; NaN where
    neither group's prefix component can be above 0 (no corner has an effect to size: a table with
    no hit, say, where every corner's "power" would be the test's false-positive rate; with a stated
    ``effect`` there is always one)."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    high, low = (group_component_limits(G, confidence, heavy_tails=True) for G in (Y[..., is_high], Y[..., ~is_high]))
    _, rate_lo, rate_hi = crossed_rate_interval(Y[..., ~is_high], confidence)
    (shared_lo, shared_hi), (pair_lo, pair_hi) = between_covariances(Y, is_high, pairs, confidence)
    # each share is monotone in its own covariance: the box's ends map to latent ends once, not per corner
    ends = [own_shares(Y, is_high, pairs, (high["prompt"][e], low["prompt"][e]), (high["prefix"][e], low["prefix"][e]),
                        ((shared_lo, shared_hi)[e], (pair_lo, pair_hi)[e])) for e in (0, 1)]
    informative = ends[0][1]
    axes = {name: (ends[0][0][name], ends[1][0][name]) for name in ("prompt_high", "prompt_low")}
    # a prefix end carries its 0/1 value too: the effect (one prefix-level SD) moves with it
    axes.update({f"prefix_{g}": tuple((ends[e][0][f"prefix_{g}"], limits["prefix"][e]) for e in (0, 1))
                 for g, limits in (("high", high), ("low", low))})
    # C and B tied more closely means a less noisy difference: both ties at one end together
    axes["between"] = tuple((ends[e][0]["shared"], ends[e][0]["pair"]) for e in (0, 1))
    axes["rate_low"] = (rate_lo, rate_hi)
    normals = normals_for(Y.shape[:-2], sims, Y.shape[-2], is_high, pairs, np.random.default_rng(seed))

    def power_at(c: dict) -> np.ndarray:
        own = {"prompt_high": c["prompt_high"], "prompt_low": c["prompt_low"], "prefix_high": c["prefix_high"][0],
               "prefix_low": c["prefix_low"][0], "shared": c["between"][0], "pair": c["between"][1]}
        size = np.sqrt((c["prefix_high"][1] + c["prefix_low"][1]) / 2) if effect is None else effect
        return _rejection_rate(assemble_shares(own, informative), c["rate_low"], size, is_high, pairs, normals, alpha)

    # corners at once, as many as keep a call's tables near CORNER_CELLS: same numbers, a fraction of the calls
    per_corner = max(int(np.prod(Y.shape[:-2], dtype=int)), 1) * sims * Y.shape[-2] * Y.shape[-1]
    lo, hi = extremes_over_box(axes, power_at, corners_per_call=int(np.clip(CORNER_CELLS // per_corner, 1, 64)))
    sized = (high["prefix"][1] > 0) | (low["prefix"][1] > 0) | (effect is not None)
    lo, hi = np.where(sized, lo, np.nan), np.where(sized, hi, np.nan)
    return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)
