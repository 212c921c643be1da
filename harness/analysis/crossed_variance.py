"""The variance of a crossed (prompts x prefixes) mean or C-minus-B difference, from the design's
own mean squares: the report's lead interval and test, and the components a design is planned on.

Model, per group g: ``y[p, x] = mu_g + a[p] + ag[p, g] + b[x] + e[p, x]``, prefix effects ``b`` with
a variance per group, residual ``e`` with a variance per group, a prompt-by-group interaction
``ag``; with matched pairs a pair effect shared by both members. One value per prompt x prefix
cell, complete crossing. The statistic D (mean of C's cells minus mean of B's) has variance

    V = tau / P + s2_b[C] / n_C + s2_b[B] / n_B,    tau = 2 s2_ag + s2_e[C] / n_C + s2_e[B] / n_B

(paired: ``(s2_b[C] + s2_b[B]) / n`` with the pair effect cancelled). The mean squares of a
balanced complete crossing are independent and estimate: the per-prompt differences C - B, ``tau``
(P - 1 degrees of freedom); each group's prefix means, ``P s2_b[g] + s2_e[g]`` (n_g - 1); each
group's residual after removing row and column means, ``s2_e[g]`` ((P - 1)(n_g - 1)).

The estimate keeps every component at or above zero, as restricted maximum likelihood (REML) does
on a balanced design: ``tau`` is at least its residual part (an interaction variance cannot be
negative) and each ``s2_b`` at least 0. So V is never below the residual's share and never
negative, and its Satterthwaite degrees of freedom count only the mean squares a component was
estimated from: the old unbounded difference of mean squares (which could come out negative, and
then collapsed the degrees of freedom below 1 and exploded the interval) is gone. One more rule
for few prompts or prefixes: the degrees of freedom are at most ``df / w`` for the prompt mean
square and for each group's prefix mean square, ``w`` its share of V (Satterthwaite alone allows
``df / w**2``). Satterthwaite's weights are estimated from the same data, and when a term on few
degrees of freedom happens to come out small its weight, and so the t quantile, shrinks exactly
when the variance is underestimated; with 3 prompts and a prompt-by-group interaction that cost 3
points of coverage in simulation (3 prefixes per group and unequal prefix SDs: 2.5), and the rule
restores it without widening designs with many prompts and prefixes. Simulated coverage and widths:
``benchmarks/crossed_calibration.py``.

Every function takes a batch: ``Y`` of shape (..., prompts, prefixes), so the calibration suite
runs a thousand data sets in one call. Needs at least 3 prompts (with 2, the prompt part has one
degree of freedom and no interval covers), 3 prefixes per group (with 2, 2% of simulated intervals
were wider than 10 times an interval that knows the variance) and a complete crossing
(:func:`supported` says where that holds, in words a report prints).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_PROMPTS = 3  # fewer: no interval (the prompt part would rest on one degree of freedom)
MIN_PREFIXES = 3  # per group; with 2, one degree of freedom per group: 2% of intervals exploded in simulation


@dataclass(frozen=True)
class GroupSquares:
    """Mean squares of one group's prompts x prefixes table (batched over leading axes)."""
    mean: np.ndarray      # grand mean
    rows: np.ndarray      # (..., P) prompt means
    cols: np.ndarray      # (..., n) prefix means
    ms_rows: np.ndarray   # n * variance of prompt means: n (s2_a + s2_ag) + s2_e
    ms_cols: np.ndarray   # P * variance of prefix means: P s2_b + s2_e
    ms_resid: np.ndarray  # s2_e
    n_prompts: int
    n_prefixes: int

    @property
    def df_resid(self) -> int:
        return (self.n_prompts - 1) * (self.n_prefixes - 1)


def group_squares(G: np.ndarray) -> GroupSquares:
    """:class:`GroupSquares` of ``G`` (..., prompts, prefixes), complete."""
    G = np.asarray(G, dtype=float)
    P, n = G.shape[-2:]
    with np.errstate(invalid="ignore", divide="ignore"):
        rows, cols = G.mean(-1), G.mean(-2)
        mean = rows.mean(-1)
        R = G - rows[..., :, None] - cols[..., None, :] + mean[..., None, None]
        ms_resid = (R ** 2).sum((-2, -1)) / ((P - 1) * (n - 1))
        ms_rows = n * rows.var(-1, ddof=1) if P > 1 else np.full(mean.shape, np.nan)
        ms_cols = P * cols.var(-1, ddof=1) if n > 1 else np.full(mean.shape, np.nan)
    return GroupSquares(mean, rows, cols, ms_rows, ms_cols, ms_resid, P, n)


@dataclass(frozen=True)
class Estimate:
    """A crossed statistic with its bounded variance estimate (batched): ``variance`` is the
    estimated variance of ``statistic``, ``dof`` its Satterthwaite degrees of freedom, and
    ``components`` the variance components it came from (each >= 0)."""
    statistic: np.ndarray
    variance: np.ndarray
    dof: np.ndarray
    components: dict

    def interval(self, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """The t interval ``statistic +- t(dof) sqrt(variance)``; NaN where the variance is 0 or
        undefined (no variation: no interval)."""
        return t_interval(self.statistic, self.variance, self.dof, confidence)

    def p_value(self, alternative: str = "two-sided") -> np.ndarray:
        """The t test of ``statistic = 0`` that :meth:`interval` inverts."""
        return t_p_value(self.statistic, self.variance, self.dof, alternative)


def t_interval(statistic, variance, dof, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """``statistic +- t_{dof} sqrt(variance)``, NaN where the variance is not positive."""
    ok = np.isfinite(variance) & (np.asarray(variance) > 0) & np.isfinite(dof)
    with np.errstate(invalid="ignore"):
        half = stats.t.ppf(1 - (1 - confidence) / 2, np.where(ok, dof, 1.0)) * np.sqrt(np.where(ok, variance, 0.0))
    half = np.where(ok, half, np.nan)
    return statistic - half, statistic + half


def t_p_value(statistic, variance, dof, alternative: str = "two-sided") -> np.ndarray:
    """p of the t test ``statistic / sqrt(variance)`` on ``dof`` degrees of freedom (NaN where the
    variance is not positive)."""
    ok = np.isfinite(variance) & (np.asarray(variance) > 0) & np.isfinite(dof)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(ok, statistic / np.sqrt(np.where(ok, variance, 1.0)), np.nan)
        nu = np.where(ok, dof, 1.0)
        if alternative == "two-sided":
            p = 2 * stats.t.sf(np.abs(t), nu)
        elif alternative == "greater":
            p = stats.t.sf(t, nu)
        elif alternative == "less":
            p = stats.t.cdf(t, nu)
        else:
            raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {alternative!r}")
    return np.where(ok, np.minimum(p, 1.0), np.nan)


def supported(Y: np.ndarray, is_high: np.ndarray) -> str | None:
    """None where :func:`difference` applies to ``Y`` (prompts x prefixes), else why not, in words
    a report can print ("2 prompts" ...)."""
    Y = np.asarray(Y, dtype=float)
    n_c, n_b = int(np.sum(is_high)), int(np.sum(~np.asarray(is_high)))
    if Y.shape[-2] < MIN_PROMPTS:
        return f"{Y.shape[-2]} prompt" + ("s" if Y.shape[-2] != 1 else "")
    if min(n_c, n_b) < MIN_PREFIXES:
        return f"{min(n_c, n_b)} prefix{'es' if min(n_c, n_b) != 1 else ''} in a group"
    if not np.isfinite(Y).all():
        return "incomplete crossing"
    return None


def _satterthwaite(variance: np.ndarray, terms: list[tuple[np.ndarray, float]],
                   caps: list[tuple[np.ndarray, float]] = ()) -> np.ndarray:
    """Welch-Satterthwaite: ``variance**2 / sum(term**2 / df)`` over the mean-square terms, at most
    ``df / w`` for each ``(term, df)`` in ``caps``, ``w`` the term's share of ``variance`` (module
    docstring)."""
    spread = sum(np.where(np.isfinite(t), t, 0.0) ** 2 / df for t, df in terms if np.all(np.asarray(df) > 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        dof = np.where(spread > 0, variance ** 2 / np.where(spread > 0, spread, 1.0), np.nan)
        for term, df in caps:
            share = np.where(variance > 0, term / np.where(variance > 0, variance, 1.0), 0.0)
            dof = np.where(share > 0, np.minimum(dof, df / np.where(share > 0, share, 1.0)), dof)
    return dof


def difference(Y: np.ndarray, is_high: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | None = None) -> Estimate:
    """C (``is_high``) minus B on ``Y`` (..., prompts, prefixes), complete, with its bounded
    variance (module docstring). ``pairs``: (high index, low index) per matched pair.

    Components (each >= 0, batched): ``interaction`` (s2_ag), ``prefix_high``/``prefix_low``
    (s2_b per group; paired: their sum in ``prefix_pair_sum``), ``resid_high``/``resid_low``,
    ``prompt`` (s2_a, the prompt effect shared by the groups; it cancels from D), ``tau``."""
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    C, B = group_squares(Y[..., is_high]), group_squares(Y[..., ~is_high])
    P, n_c, n_b = Y.shape[-2], C.n_prefixes, B.n_prefixes
    d = C.rows - B.rows
    ms_d = d.var(-1, ddof=1)
    resid_part = C.ms_resid / n_c + B.ms_resid / n_b
    resid_terms = [(C.ms_resid / (n_c * P), C.df_resid), (B.ms_resid / (n_b * P), B.df_resid)]
    from_d = ms_d >= resid_part
    tau = np.maximum(ms_d, resid_part)
    terms = [(np.where(from_d, ms_d / P, 0.0), P - 1)] + [(np.where(from_d, 0.0, t), df) for t, df in resid_terms]
    if pairs is not None:
        hi, lo = pairs
        n = len(hi)
        col = Y.mean(-2)
        ms_delta = (col[..., hi] - col[..., lo]).var(-1, ddof=1)
        excess = ms_delta - (C.ms_resid + B.ms_resid) / P
        positive = excess > 0
        prefix_part = np.maximum(excess, 0.0) / n
        terms += [(np.where(positive, ms_delta / n, 0.0), n - 1)]
        caps = [terms[-1]]
        terms += [(np.where(positive, ms / (P * n), 0.0), df) for ms, df in
                  ((C.ms_resid, C.df_resid), (B.ms_resid, B.df_resid))]
        prefix = {"prefix_pair_sum": np.maximum(excess, 0.0)}
    else:
        prefix_part = 0.0
        prefix, caps = {}, []
        for name, G in (("prefix_high", C), ("prefix_low", B)):
            excess = (G.ms_cols - G.ms_resid) / P
            positive = excess > 0
            prefix_part = prefix_part + np.maximum(excess, 0.0) / G.n_prefixes
            caps.append((np.where(positive, G.ms_cols / (P * G.n_prefixes), 0.0), G.n_prefixes - 1))
            terms += [caps[-1], (np.where(positive, G.ms_resid / (P * G.n_prefixes), 0.0), G.df_resid)]
            prefix[name] = np.maximum(excess, 0.0)
    variance = tau / P + prefix_part
    with np.errstate(invalid="ignore"):
        cov_rows = ((C.rows - C.rows.mean(-1, keepdims=True)) * (B.rows - B.rows.mean(-1, keepdims=True))).sum(-1) / (P - 1)
    components = {"interaction": np.maximum(tau - resid_part, 0.0) / 2, **prefix,
                  "resid_high": C.ms_resid, "resid_low": B.ms_resid, "prompt": np.maximum(cov_rows, 0.0), "tau": tau}
    dof = _satterthwaite(variance, terms, [(terms[0][0], P - 1), *caps])
    return Estimate(C.mean - B.mean, variance, dof, components)


def heavy_tailed_df(means: np.ndarray) -> np.ndarray:
    """The degrees of freedom a mean square over (..., k) unit means is worth given their sample
    excess kurtosis g2 (kept >= 0): ``1 / (1 / (k - 1) + g2 / (2 k))``, from ``Var(s^2) = sigma^4 (2 /
    (k - 1) + g2 / k)``. Satterthwaite's ``k - 1`` assumes normal units; a 0/1 table whose hits sit in
    a few prefixes has prefix means that are mostly 0 with a few near 1, and its prefix mean square is
    worth far fewer degrees of freedom (module docstring of :mod:`harness.analysis.rate_intervals`)."""
    k = means.shape[-1]
    if k < 2:  # no mean square: no degrees of freedom, as k - 1 says
        return np.zeros(means.shape[:-1])
    centred = means - means.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        g2 = (centred ** 4).mean(-1) / (centred ** 2).mean(-1) ** 2 - 3
    g2 = np.where(np.isfinite(g2), np.maximum(g2, 0.0), 0.0)
    return 1 / (1 / (k - 1) + g2 / (2 * k))


def group_mean(G: np.ndarray, heavy_tails: bool = False) -> Estimate:
    """The mean of one group's (..., prompts, prefixes) table, complete, with its bounded variance
    ``(s2_a + s2_ag) / P + s2_b / n + s2_e / (P n)`` (prompt and prefix parts >= 0). ``heavy_tails``:
    the prompt and prefix mean squares count :func:`heavy_tailed_df` degrees of freedom, not ``P - 1``
    and ``n - 1`` (for 0/1 tables).

    Components: ``prompt`` (s2_a + s2_ag: what a prompt adds for this group), ``prefix``, ``resid``."""
    S = group_squares(G)
    P, n = S.n_prompts, S.n_prefixes
    df_rows, df_cols = (heavy_tailed_df(S.rows), heavy_tailed_df(S.cols)) if heavy_tails else (P - 1, n - 1)
    row_x, col_x = S.ms_rows - S.ms_resid, S.ms_cols - S.ms_resid
    variance = (np.maximum(row_x, 0.0) + np.maximum(col_x, 0.0) + S.ms_resid) / (P * n)
    # each part's mean squares, the residual's share with the sign it enters with
    resid_coef = 1.0 - (row_x > 0) - (col_x > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = [(np.where(row_x > 0, S.ms_rows, 0.0) / (P * n), df_rows),
                 (np.where(col_x > 0, S.ms_cols, 0.0) / (P * n), df_cols),
                 (resid_coef * S.ms_resid / (P * n), S.df_resid)]
    components = {"prompt": np.maximum(row_x, 0.0) / n, "prefix": np.maximum(col_x, 0.0) / P, "resid": S.ms_resid}
    return Estimate(S.mean, variance, _satterthwaite(variance, terms, terms[:2]), components)


def _difference_limits(ms_a, df_a, ms_b, df_b, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper limits, each missing with chance ``alpha``, for ``E[ms_a] - E[ms_b]`` of two
    independent mean squares on ``df_a`` and ``df_b`` degrees of freedom: the modified large-sample
    interval of Ting, Burdick, Graybill, Jeyaratnam and Lu (1990; Burdick and Graybill 1992, 3.3),
    close to exact where a plain Satterthwaite interval is not (few degrees of freedom, a small
    difference); clipped at 0, as the component it bounds is a variance."""
    chi2, f = stats.chi2.ppf, stats.f.ppf
    G1, H1 = 1 - df_a / chi2(1 - alpha, df_a), df_a / chi2(alpha, df_a) - 1
    G2, H2 = 1 - df_b / chi2(1 - alpha, df_b), df_b / chi2(alpha, df_b) - 1
    F_hi, F_lo = f(1 - alpha, df_a, df_b), f(alpha, df_a, df_b)
    G12 = ((F_hi - 1) ** 2 - G1 ** 2 * F_hi ** 2 - H2 ** 2) / F_hi
    H12 = ((1 - F_lo) ** 2 - H1 ** 2 * F_lo ** 2 - G2 ** 2) / F_lo
    d = ms_a - ms_b
    low = d - np.sqrt(np.maximum(G1 ** 2 * ms_a ** 2 + H2 ** 2 * ms_b ** 2 + G12 * ms_a * ms_b, 0.0))
    high = d + np.sqrt(np.maximum(H1 ** 2 * ms_a ** 2 + G2 ** 2 * ms_b ** 2 + H12 * ms_a * ms_b, 0.0))
    return np.maximum(low, 0.0), np.maximum(high, 0.0)


def group_component_limits(G: np.ndarray, confidence: float = 0.95, heavy_tails: bool = False
                           ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``(low, high)`` per component of :func:`group_mean` (``prompt``, ``prefix``, ``resid``) of one
    group's (..., prompts, prefixes) table, complete: each a two-sided ``confidence`` interval (the
    prompt and prefix parts by :func:`_difference_limits` on their mean square and the residual's,
    the residual by chi-square). What a power is taken at to say how far its own inputs let it move
    (:func:`harness.analysis.claim_power.min_contrast_power_range`). ``heavy_tails``: the prompt and
    prefix mean squares count :func:`heavy_tailed_df` degrees of freedom, as in :func:`group_mean`
    (0/1 tables whose hits sit in a few prompts or prefixes)."""
    S = group_squares(G)
    P, n, df_e = S.n_prompts, S.n_prefixes, S.df_resid
    alpha = (1 - confidence) / 2
    df_rows, df_cols = (heavy_tailed_df(S.rows), heavy_tailed_df(S.cols)) if heavy_tails else (P - 1, n - 1)
    prompt = _difference_limits(S.ms_rows, df_rows, S.ms_resid, df_e, alpha)
    prefix = _difference_limits(S.ms_cols, df_cols, S.ms_resid, df_e, alpha)
    resid = (S.ms_resid * df_e / stats.chi2.ppf(1 - alpha, df_e), S.ms_resid * df_e / stats.chi2.ppf(alpha, df_e))
    return {"prompt": (prompt[0] / n, prompt[1] / n), "prefix": (prefix[0] / P, prefix[1] / P), "resid": resid}


def crossed_t_interval(Y: np.ndarray, is_high: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | None = None,
                       confidence: float = 0.95) -> tuple[float, float, float]:
    """``(low, high, degrees of freedom)`` of the t interval for high-minus-low on one ``Y``
    [prompts, prefixes]; NaN where :func:`supported` says no or nothing varies."""
    if supported(Y, is_high) is not None:
        return (np.nan, np.nan, np.nan)
    est = difference(Y, is_high, pairs)
    low, high = est.interval(confidence)
    return (float(low), float(high), float(est.dof) if np.isfinite(low) else np.nan)


def complete_crossing(Y: np.ndarray, pairs: tuple[np.ndarray, np.ndarray] | None = None
                      ) -> tuple[np.ndarray, np.ndarray, str]:
    """``(prompts kept, prefixes kept, note)``: the larger complete crossing of ``Y`` [prompts,
    prefixes] left by dropping every prompt with a missing cell, or every prefix with one (and its
    pair's other member); ``note`` says what was dropped ("" when nothing was)."""
    Y = np.asarray(Y, dtype=float)
    ok = np.isfinite(Y)
    rows, cols = np.arange(Y.shape[0]), np.arange(Y.shape[1])
    if ok.all():
        return rows, cols, ""
    full_rows = rows[ok.all(1)]
    bad_cols = ~ok.all(0)
    if pairs is not None:
        hi, lo = pairs
        broken = bad_cols[hi] | bad_cols[lo]
        bad_cols[hi[broken]] = bad_cols[lo[broken]] = True
    full_cols = cols[~bad_cols]
    if len(full_rows) * Y.shape[1] >= Y.shape[0] * len(full_cols):
        return full_rows, cols, f"complete crossing of {len(full_rows)} of {Y.shape[0]} prompts"
    return rows, full_cols, f"complete crossing of {len(full_cols)} of {Y.shape[1]} prefixes"


def complete_table(Y: np.ndarray) -> tuple[np.ndarray, str]:
    """One group's table cut to :func:`complete_crossing`, with its note."""
    rows, cols, note = complete_crossing(Y)
    return np.asarray(Y, dtype=float)[np.ix_(rows, cols)], note
