"""The calibration suite's second, independent generator (``benchmarks/crossed_calibration.py``).

Written apart from the first on purpose: it builds long-format condition tables (one row per prompt
x prefix, the shape a run writes) and analyses them through the public DataFrame functions
(:func:`harness.analysis.crossed.compare_groups`, :func:`harness.analysis.rates.rate_summary`), so
cell means, layouts, pairing and the report's columns are all in the path. Its model is
parameterised differently too:

* a prompt's effect on each group is one draw from a bivariate normal with the groups' prompt
  variances and their covariance (the first generator adds a shared effect and a per-group one);
* binary cells are Bernoulli draws through the logistic link (the first thresholds a latent normal),
  and their population rates are computed by Gauss-Hermite quadrature over the latent normal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit, logit


@dataclass(frozen=True)
class Model:
    """One cell of the second generator. Continuous unless ``rate_low`` is set (binary, logit link:
    ``mean_low = logit(rate_low)`` is only a starting point; the population rates are by quadrature)."""
    name: str
    prompts: int
    prefixes: int
    prompt_var: float = 1.0         # each group's prompt variance
    prompt_corr: float = 0.92       # correlation of a prompt's effects on the two groups
    prefix_var_high: float = 1.0
    prefix_var_low: float = 1.0
    resid_var: float = 0.05
    pair_var: float = 0.0           # > 0: prefix i of each group share a pair effect
    rate_low: float | None = None   # binary: B's population rate
    rate_gap: float = 0.0           # binary: C's minus B's population rate when there is a difference

    @property
    def interaction_var(self) -> float:
        """The prompt-by-group variance this parameterisation implies: (1 - corr) * prompt_var."""
        return (1 - self.prompt_corr) * self.prompt_var


def latent_sd(m: Model, high: bool) -> float:
    return float(np.sqrt(m.prompt_var + (m.prefix_var_high if high else m.prefix_var_low) + m.resid_var + m.pair_var))


NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(80)


def population_rate(mean: float, sd: float) -> float:
    """E[expit(mean + sd Z)], Z standard normal (Gauss-Hermite)."""
    return float((WEIGHTS * expit(mean + sd * NODES)).sum() / WEIGHTS.sum())


def mean_for_rate(rate: float, sd: float) -> float:
    """The latent mean whose population rate under :func:`population_rate` is ``rate`` (bisection)."""
    lo, hi = logit(rate) - 10 * sd - 10, logit(rate) + 10 * sd + 10
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if population_rate(mid, sd) < rate else (lo, mid)
    return (lo + hi) / 2


def truth(m: Model, different: bool) -> float:
    """The population C-minus-B difference the data are drawn at."""
    if m.rate_low is None:  # one prefix-level SD: a pair effect is part of a prefix's mean
        return float(np.sqrt((m.prefix_var_high + m.prefix_var_low) / 2 + m.pair_var)) if different else 0.0
    return m.rate_gap if different else 0.0


def conditions(m: Model, different: bool, rng: np.random.Generator) -> pd.DataFrame:
    """One data set as a conditions table: prompt_id, group, prefix_id, pair, prefix_len, value."""
    cov = m.prompt_var * np.array([[1.0, m.prompt_corr], [m.prompt_corr, 1.0]])
    prompt = rng.multivariate_normal([0.0, 0.0], cov, size=m.prompts)            # [:, 0] C, [:, 1] B
    pair = rng.normal(0.0, np.sqrt(m.pair_var), m.prefixes) if m.pair_var > 0 else np.zeros(m.prefixes)
    rows = []
    for g, (group, var) in enumerate((("C", m.prefix_var_high), ("B", m.prefix_var_low))):
        if m.rate_low is None:
            base = truth(m, different) if group == "C" else 0.0
        else:
            rate = m.rate_low + (m.rate_gap if (different and group == "C") else 0.0)
            base = mean_for_rate(rate, latent_sd(m, group == "C"))
        prefix = rng.normal(0.0, np.sqrt(var), m.prefixes) + pair
        latent = base + prompt[:, g][:, None] + prefix[None, :] + rng.normal(0.0, np.sqrt(m.resid_var),
                                                                               (m.prompts, m.prefixes))
        value = latent if m.rate_low is None else (rng.random(latent.shape) < expit(latent)).astype(bool)
        for p in range(m.prompts):
            for x in range(m.prefixes):
                rows.append((f"q{p:02d}", group, f"{group.lower()}{x:02d}", f"w{x:02d}" if m.pair_var > 0 else None,
                             value[p, x]))
    df = pd.DataFrame(rows, columns=["prompt_id", "group", "prefix_id", "pair", "value"])
    if m.pair_var == 0:
        df = df.drop(columns="pair")
    return df.assign(model="sim", prefix_len=32)


MODELS = [
    Model("3 x 18, prefixes dominate", 3, 18),
    Model("3 x 18, residual dominates", 3, 18, prefix_var_high=0.09, prefix_var_low=0.09, resid_var=1.0),
    Model("3 x 6, interaction", 3, 6, prompt_corr=0.0),
    Model("8 x 12, unequal prefix SDs", 8, 12, prefix_var_high=4.0, prefix_var_low=0.25),
    Model("6 x 24 paired, pair effect", 6, 24, pair_var=0.64),
    Model("3 x 6, sparse rate 0.05 + 0.069", 3, 6, rate_low=0.05, rate_gap=0.069),
    Model("8 x 12, sparse rate 0.05 + 0.069", 8, 12, rate_low=0.05, rate_gap=0.069),
    Model("24 x 10, sparse rate 0.05 + 0.069", 24, 10, rate_low=0.05, rate_gap=0.069),
    Model("6 x 24 paired, rate 0.2 + 0.1", 6, 24, pair_var=0.64, rate_low=0.2, rate_gap=0.1),
]
