"""The C-minus-B interval with prompts and prefixes as crossed random factors, from the design's
own variance estimate: the report's lead interval.

Why not the two-way bootstrap: simulated at the harness's sizes (``benchmarks/crossed_calibration.py``)
its percentile interval covers only 0.85-0.94 for a nominal 0.95 where prefix variance dominates,
because it resamples a handful of prefixes. This interval covers 0.944-0.971 in every simulated cell.

Model, per group g: ``y[p, x] = mu_g + a[p] + ag[p, g] + b[x] + e[p, x]``. The statistic D (mean of
C's cells minus mean of B's) has variance ``var(b_C)/n_C + var(b_B)/n_B + 2 var(ag)/P + var(e)
(1/n_C + 1/n_B)/P``, estimated by three observable variances: of each group's prefix means over its
prefixes (prefix effects plus residual/P), of the per-prompt differences C - B over prompts
(interaction plus residual), minus the residual both count once too many (the mean square of each
group's prompt x prefix table after removing row and column means). Matched pairs use the
variance of the per-pair differences of prefix means instead of the two groups'. The interval is
D +- t * sqrt(V) with Satterthwaite's degrees of freedom. It needs a complete crossing.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def crossed_t_interval(Y: np.ndarray, is_high: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | None = None,
                       confidence: float = 0.95) -> tuple[float, float, float]:
    """``(low, high, degrees of freedom)`` for high-minus-low on ``Y`` [prompts, prefixes] (complete,
    at least 2 prompts and 2 prefixes per group); NaNs where that does not hold."""
    Y = np.asarray(Y, dtype=float)
    C, B = Y[:, is_high], Y[:, ~is_high]
    p, n_c, n_b = Y.shape[0], C.shape[1], B.shape[1]
    if p < 2 or n_c < 2 or n_b < 2 or not np.isfinite(Y).all():
        return (np.nan, np.nan, np.nan)
    resid_ss, resid_df = 0.0, 0
    for G in (C, B):
        R = G - G.mean(1, keepdims=True) - G.mean(0, keepdims=True) + G.mean()
        resid_ss += float((R ** 2).sum())
        resid_df += (G.shape[0] - 1) * (G.shape[1] - 1)
    resid = resid_ss / resid_df
    if pairs is not None:
        col = Y.mean(0)
        delta = col[pairs[0]] - col[pairs[1]]
        terms = [(delta.var(ddof=1) / len(delta), len(delta) - 1)]
        double = resid * 2 / (len(delta) * p)
    else:
        terms = [(C.mean(0).var(ddof=1) / n_c, n_c - 1), (B.mean(0).var(ddof=1) / n_b, n_b - 1)]
        double = resid * (1 / n_c + 1 / n_b) / p
    terms += [((C.mean(1) - B.mean(1)).var(ddof=1) / p, p - 1), (-double, resid_df)]
    statistic = float(C.mean() - B.mean())
    spread = sum(t ** 2 / df for t, df in terms if df > 0 and t != 0)
    if spread == 0:  # every cell the same (a hit rate of 0 everywhere): no variation to speak of
        return (statistic, statistic, np.nan)
    # the estimate can come out below zero when the residual dominates; the prefix and prompt
    # parts alone are then the smallest variance the data allow
    variance = max(sum(t for t, _ in terms), sum(t for t, _ in terms[:-1]) / 4)
    dof = variance ** 2 / spread
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, dof) * np.sqrt(variance))
    return (statistic - half, statistic + half, float(dof))
