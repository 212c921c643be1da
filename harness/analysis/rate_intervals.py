"""Intervals for a rate (a hit rate such as ``target_hit``) with prompts and prefixes as crossed
random factors, and for the difference of two such rates: numpy arrays in, arrays out (batched over
leading axes; :mod:`harness.analysis.rates` puts them on tables).

**One rate** (:func:`crossed_rate_interval`): the Wilson score interval at the table's *effective
sample size* ``n_eff = rate (1 - rate) / V``, V the crossed variance of the rate
(:func:`harness.analysis.crossed_variance.group_mean`: prompt, prefix and residual parts, each
>= 0), with a t quantile on V's degrees of freedom. Those count the prompt and prefix mean squares
at :func:`harness.analysis.crossed_variance.heavy_tailed_df`, not ``k - 1``: when hits sit in a few
prefixes the prefix means are mostly 0 and a few near 1, their mean square is worth far fewer
degrees of freedom than normal means would be, and with ``k - 1`` a rate made by a few hot prefixes
among 48 came out too low to cover in 7% of simulated tables (0.90 coverage; 0.95 now). A t
quantile on few degrees of freedom never takes the interval past the worst case's (Wilson at the
scarcer factor's count, at t on that count less one degrees of freedom, which holds however hits
cluster): Wilson's interval depends on ``n`` and ``q`` only through ``q**2 / n`` and is nested in
it, so :func:`effective_units` falls back to the worst case wherever the estimate would claim less.
``n_eff`` lies between the scarcer factor's count ``min(prompts, prefixes)`` (all the variance in
that factor: the worst case, which the old
Clopper-Pearson interval always assumed) and the number of cells (no clustering). The variance of
a rate with few hits says little about how they cluster, so the design effect ``cells / n_eff`` is
pulled toward its worst case on the log scale with weight ``k0 / (m + k0)``, ``m`` the count of the
rarer outcome less one (a single hit cannot show how hits cluster) and ``k0`` = :data:`SHRINK`
(chosen in simulation): with no hit (or every cell a hit) the interval is the worst case's, at z
(the variance is then a bound, not an estimate), with one hit the worst case's effective size too,
and with a handful it moves most of the way to the table's own estimate. The Wilson interval is asymmetric
where a rate is near 0 or 1, always within [0, 1], and never empty.

It is *not* monotone in every added hit, and no interval can be that is also valid at 0 hits and
narrow where hits are spread out: every table with hits can be reached from the empty table by
adding hits, so strict monotonicity would force every upper end above the empty table's, which
must be wide (with 0 hits nothing tells strongly clustered rare hits from none). It is monotone in
the rate at a given effective sample size (:func:`wilson`), one hit's interval is never narrower
than none's, and it narrows only as hits show, by landing in different prompts and prefixes, that
they are not clustered.

**A difference of rates** (:func:`rate_difference`): MOVER (Newcombe's square-and-add, with the
correlation of the two rates): each end of ``D = r_C - r_B`` combines the near half of one group's
interval with the far half of the other's, ``L = D - sqrt(dC^2 + dB^2 - 2 rho dC dB)`` (both
groups' Wilson intervals at the t quantile of D's own degrees of freedom: the prompt effect the two
rates share, which one rate's few prompt degrees of freedom carry, cancels from D), and
``rho`` is the rates' correlation from the crossed variances (``V_D = V_C + V_B - 2 cov``,
:func:`harness.analysis.crossed_variance.difference`), clipped to [0, 0.99]. So a sparse rate's
skew carries into the difference (the symmetric t interval missed on the low side 18 times in 19
where it missed), and a table with no hit in either group still gets an interval: the worst-case
one, never a zero-width one. :func:`rate_difference_p` inverts it into a p-value.
Simulated coverage and widths: ``benchmarks/crossed_calibration.py``.

**A sparse group borrows the other's clustering.** Where one group has few hits (B with 0-1 hits in
about half of 6 x 24 tables at 2%), its own table cannot show how hits cluster; rather than the
worst case, its design effect is shrunk toward the *other* group's (itself shrunk toward the worst
case by its own count, so two sparse groups stay near the worst case; taken as the share of the way
from the worst case to no clustering, on the log scale, so that groups of different sizes each keep
their own bounds): the stated assumption that the two groups' hits cluster alike (``ci_method`` says
"clustering shared"). Its estimated variance says as little, so ``rho`` (which narrows the interval)
is scaled by the sparser group's shrinkage weight. A group of a single hit that borrows takes z, as
one of none: its design effect is then wholly the other group's, none of it estimated from its own variance, so a t
quantile on the difference's degrees of freedom priced an estimate it never made. At 6 x 24, B 2%
and C 10% with prefixes clustering the hits, the test then rejects in 0.40 of tables (0.38 with a
single hit at t, 0.10 with each group on its own; an oracle at the true effective sizes 0.52),
covering 0.97 (``benchmarks/crossed_calibration.py``, table 1e).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

from harness.analysis.crossed_variance import Estimate, difference, group_mean

CONFIDENCE = 0.95

SHRINK = 0.5  # k0: pseudo-count of the rarer outcome at the worst-case design effect (module docstring)


def wilson(rate, n, q) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval for a proportion ``rate`` worth ``n`` independent units, at quantile
    ``q`` (1.96 for 95%). Within [0, 1], monotone in ``rate`` at fixed ``n`` and ``q``."""
    rate, n, q = np.asarray(rate, dtype=float), np.asarray(n, dtype=float), np.asarray(q, dtype=float)
    den = 1 + q ** 2 / n
    centre = (rate + q ** 2 / (2 * n)) / den
    half = q * np.sqrt(np.maximum(rate * (1 - rate), 0.0) / n + q ** 2 / (4 * n ** 2)) / den
    low, high = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    return np.where(rate <= 0, 0.0, low), np.where(rate >= 1, 1.0, high)  # exact ends, not rounding residue


class DesignEffect(NamedTuple):
    """One group's clustering, from its complete (..., prompts, prefixes) table of two or more prefix
    columns: its own design effect (``log_own``: clipped to 1 to the worst case's; the worst case
    where nothing varies) and the ``weight`` it gets against the worst case, or another group's
    (module docstring)."""

    estimate: Estimate
    rate: np.ndarray
    log_own: np.ndarray
    weight: np.ndarray
    spread: np.ndarray  # some hits and some misses
    worst: float  # cells / min(prompts, prefixes)
    shape: tuple[int, int]

    @property
    def share(self) -> np.ndarray:
        """How far its shrunk design effect lies from the worst case toward no clustering, on the log
        scale (0: the worst case, 1: none): a design effect depends on the group's own counts, this
        share does not, so another group may borrow it."""
        return 1 - (self.weight * self.log_own + (1 - self.weight) * np.log(self.worst)) / np.log(self.worst)

    def units(self, confidence: float, dof: np.ndarray | None, borrowed: np.ndarray | float = 0.0
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:func:`effective_units`, its own estimate shrunk toward the design effect at another group's
        ``borrowed`` :attr:`share` (0: the worst case)."""
        P, n = self.shape
        target = (1 - np.asarray(borrowed, dtype=float)) * np.log(self.worst)
        deff = np.exp(self.weight * self.log_own + (1 - self.weight) * target)
        # a t quantile prices the design effect's estimation from the group's own variance; a single hit
        # (weight 0) estimates none of it: with another group's to borrow, z, as with no hit
        borrows = np.asarray(borrowed, dtype=float) > 0
        dof = np.where(self.spread & ((self.weight > 0) | ~borrows), self.estimate.dof if dof is None else dof, np.nan)
        # the worst case with its own quantile: all the variance in the scarcer factor's m units, whose
        # mean square has m - 1 degrees of freedom (with 3 units, z would be too narrow)
        m, n_eff = min(P, n), P * n / deff
        worse = self.spread & (n_eff / quantile(dof, confidence) ** 2 < m / quantile(m - 1.0, confidence) ** 2)
        return self.rate, np.where(worse, m, n_eff), np.where(worse, m - 1.0, dof), self.estimate.variance


def design_effect(G: np.ndarray) -> DesignEffect:
    """The :class:`DesignEffect` of complete (..., prompts, prefixes) tables with two or more prefix columns."""
    P, n = G.shape[-2:]
    est = group_mean(G, heavy_tails=True)
    rate, cells, worst = est.statistic, P * n, P * n / min(P, n)
    spread = (rate > 0) & (rate < 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        deff = np.clip(est.variance * cells / (rate * (1 - rate)), 1.0, worst)
    deff = np.where(spread & np.isfinite(deff), deff, worst)
    # one hit (or one miss) cannot show how hits cluster: the information starts with the second
    rarer = np.maximum(cells * np.minimum(rate, 1 - rate) - 1, 0.0)
    return DesignEffect(est, rate, np.log(deff), rarer / (rarer + SHRINK), spread, worst, (P, n))


def effective_units(G: np.ndarray, confidence: float = CONFIDENCE, dof: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(rate, n_eff, dof, variance)`` of complete (..., prompts, prefixes) tables of 0/1 cells (or
    shares): the effective sample size of the module docstring, shrunk toward the worst case
    ``min(prompts, prefixes)`` with few hits, and the degrees of freedom of the interval's t
    quantile (the table's own unless ``dof`` is given, as a difference gives its own). ``dof`` is NaN
    where ``n_eff`` is the worst case (the interval then takes z), and ``n_eff`` the worst case
    wherever the estimate at its t quantile would claim less than it (``n_eff / t**2 < m / t_m**2``
    at ``confidence``, ``m`` the worst case's units and ``t_m`` its quantile on ``m - 1`` degrees of
    freedom, which ``dof`` then is): the worst case holds whatever the clustering, so no estimate of
    it needs a wider interval. One prefix column: prompts are the units (``n_eff`` = prompts)."""
    G = np.asarray(G, dtype=float)
    P, n = G.shape[-2:]
    if n == 1:
        rate = G[..., 0].mean(-1)
        return rate, np.full(rate.shape, float(P)), np.full(rate.shape, np.nan), rate * (1 - rate) / P
    return design_effect(G).units(confidence, dof)


def quantile(dof, confidence: float) -> np.ndarray:
    """The two-sided ``confidence`` quantile of t on ``dof`` degrees of freedom, z where ``dof`` is NaN."""
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(dof), stats.t.ppf(1 - (1 - confidence) / 2, np.where(np.isfinite(dof), dof, 1)), z)


def crossed_rate_interval(G: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rate, low, high)`` of complete (..., prompts, prefixes) tables: :func:`wilson` at the
    :func:`effective_units` (module docstring)."""
    rate, n_eff, dof, _ = effective_units(G, confidence)
    low, high = wilson(rate, n_eff, quantile(dof, confidence))
    return rate, low, high


def rate_difference(Y: np.ndarray, is_high: np.ndarray, pairs=None, confidence: float = CONFIDENCE
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(difference, low, high)``: high-minus-low rate on complete (..., prompts, prefixes) tables,
    MOVER from each group's :func:`crossed_rate_interval` (module docstring)."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    est = difference(Y, is_high, pairs)
    v_d = est.variance
    # each end's quantile is the difference's (its degrees of freedom), not each rate's own: the prompt
    # effect the two share, which a single rate's few prompt degrees of freedom carry, cancels here
    dof_d = np.where(v_d > 0, est.dof, np.nan)
    tables = (Y[..., is_high], Y[..., ~is_high])
    parts, weight = [], 1.0
    if min(G.shape[-1] for G in tables) < 2:  # a group of one prefix: prompts are its units, no clustering
        for G in tables:
            rate, n_eff, dof, var = effective_units(G, confidence, dof_d)
            parts.append((rate, *wilson(rate, n_eff, quantile(dof, confidence)), var))
    else:  # each group's clustering shrunk toward the other's own estimate, not the worst case (docstring)
        effects = [design_effect(G) for G in tables]
        for effect, other in zip(effects, effects[::-1]):
            rate, n_eff, dof, var = effect.units(confidence, dof_d, other.share)
            parts.append((rate, *wilson(rate, n_eff, quantile(dof, confidence)), var))
        weight = np.minimum(effects[0].weight, effects[1].weight)
    (rc, lc, uc, vc), (rb, lb, ub, vb) = parts
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip((vc + vb - v_d) / (2 * np.sqrt(vc * vb)), 0.0, 0.99)
    # a group with few hits says little of its variance, and so of the rates' correlation (which
    # narrows the interval): it counts as far as the sparser group's own clustering does
    rho = np.where(np.isfinite(rho), rho, 0.0) * weight
    d = rc - rb
    low = d - np.sqrt(np.maximum((rc - lc) ** 2 + (ub - rb) ** 2 - 2 * rho * (rc - lc) * (ub - rb), 0.0))
    high = d + np.sqrt(np.maximum((uc - rc) ** 2 + (rb - lb) ** 2 - 2 * rho * (uc - rc) * (rb - lb), 0.0))
    return d, np.maximum(low, -1.0), np.minimum(high, 1.0)


def rate_difference_p(Y: np.ndarray, is_high: np.ndarray, pairs=None, alternative: str = "two-sided") -> float:
    """The p-value of :func:`rate_difference` (one table): the smallest ``1 - confidence`` at which
    its interval leaves out 0, by bisection (one-sided: half of it, on the side of the difference)."""
    d = float(rate_difference(Y, is_high, pairs, 0.95)[0])
    if d == 0 or not np.isfinite(d):
        p = 1.0 if d == 0 else np.nan
    else:
        def excludes(level: float) -> bool:
            _, low, high = rate_difference(Y, is_high, pairs, 1 - level)
            return bool(low > 0 or high < 0)

        lo, hi = -12.0, 0.0  # log10 of levels at which the interval includes 0 / excludes it
        if excludes(10 ** lo):
            return 0.0
        if not excludes(1 - 1e-12):
            return 1.0
        for _ in range(24):  # to a relative precision of about 4e-6
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if excludes(10 ** mid) else (mid, hi)
        p = 10 ** hi
    if alternative == "two-sided" or not np.isfinite(p):
        return p
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    toward = (d > 0) == (alternative == "greater")
    return p / 2 if toward else 1 - p / 2
