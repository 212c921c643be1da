"""The chance that a test ends *decided* at a stated Δ: supported, contradicted, or no effect as
large as Δ (:mod:`harness.analysis.verdicts`), rather than not determined. What a study that must
say something about every claim plans for (``harness plan --plan-for decided``).

A verdict is not determined when its interval holds both zero and Δ (one-sided claims), or for a
two-sided C - B holds zero and reaches past -Δ or Δ. With an estimate ``d ~ N(theta, V)`` and its
standard error ``s``, ``s^2 ~ V chi2(dof) / dof`` (independent), the interval ``d - c_low s`` to
``d + c_high s`` is not determined, one-sided, when ``Δ - c_high s <= d <= c_low s``; two-sided
(``c`` both ends) when ``|d| <= c s`` and not ``|d| < Δ - c s``. The chance depends on the truth:
it is largest for an effect between 0 and Δ (one-sided, exactly Δ/2 when ``c_low == c_high``), so
:func:`undecided` states it at the least favourable truth in ``[0, Δ]``: the chance a design decides
whatever the effect is.

Its counterpart for power: :func:`harness.analysis.power.design_power` states the chance of
"supported" at a truth of Δ. A design with power 0.8 at Δ leaves about 0.4 undecided at Δ/2; one
that decides in 0.8 whatever the truth needs about 1.5 times the units.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

# quantiles of the standard error's chi-square the chance is averaged over (midpoints), and the
# truths in [0, Δ] it is maximised over
SE_QUANTILES = 64
TRUTHS = 21


def undecided(variance: float, dof: float, delta: float, c_low: float | None = None, c_high: float | None = None,
              two_sided: bool = False, confidence: float = 0.95) -> float:
    """The largest chance over truths in ``[0, delta]`` that an interval of this estimate holds
    both 0 and ``delta`` (module docstring): ``variance`` the estimate's, ``dof`` its standard
    error's degrees of freedom (inf: known), ``c_low``/``c_high`` the multipliers of the interval's
    ends (default: the t quantile of ``confidence``, two-sided). 0 for a variance of 0 (every
    interval is a point); NaN where the variance or Δ is otherwise not a positive finite number."""
    if not (np.isfinite(variance) and variance > 0 and np.isfinite(delta) and delta > 0):
        return 0.0 if variance == 0 and np.isfinite(delta) and delta > 0 else np.nan
    nu = float(dof) if np.isfinite(dof) and dof > 0 else np.inf
    default = stats.t.ppf(0.5 + confidence / 2, nu) if np.isfinite(nu) else stats.norm.ppf(0.5 + confidence / 2)
    c_low = default if c_low is None else c_low
    c_high = default if c_high is None else c_high
    u = (np.arange(SE_QUANTILES) + 0.5) / SE_QUANTILES
    scale = np.sqrt(stats.chi2.ppf(u, nu) / nu) if np.isfinite(nu) else np.ones(1)
    sd = np.sqrt(variance)
    s = sd * scale[:, None]                              # [quantile, 1]
    theta = np.linspace(0.0, delta, TRUTHS)[None, :]     # [1, truth]
    if two_sided:
        inside = np.maximum(delta - c_low * s, 0.0)      # |d| below this: within -Δ to Δ, decided
        held = stats.norm.cdf((c_low * s - theta) / sd) - stats.norm.cdf((-c_low * s - theta) / sd)
        within = stats.norm.cdf((inside - theta) / sd) - stats.norm.cdf((-inside - theta) / sd)
        chance = np.clip(held - within, 0.0, 1.0)
    else:
        chance = np.clip(stats.norm.cdf((c_low * s - theta) / sd) - stats.norm.cdf((delta - c_high * s - theta) / sd),
                         0.0, 1.0)
    return float(chance.mean(axis=0).max())
