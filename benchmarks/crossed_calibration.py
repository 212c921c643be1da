"""Calibration of the crossed (prompts x prefixes) inference, by simulation.

Data sets are drawn from a crossed random-effects model at the sizes the harness uses:

    y[prompt, prefix] = mu_group + a[prompt] + ag[prompt, group] + b[prefix] (+ pair[prefix]) + e

with prefix effects ``b`` random (SD per group), a prompt-by-group interaction ``ag``, residual
``e``, and optionally matched pairs sharing an effect; binary cells threshold a latent value (hit
rates). For each design cell it prints, over ``--datasets`` data sets:

* ``fpr perm``: the prefix-permutation test's false-positive rate at 0.05 (no true C-B difference);
* ``cover boot``: coverage of the two-way percentile bootstrap interval (the lead interval before);
* ``cover satt``: coverage of the crossed-variance t interval (``harness.analysis.crossed_variance``,
  the report's lead interval): the design's own variance estimate with Satterthwaite degrees of
  freedom;
* ``power perm`` / ``power satt``: rejection rates at an effect of one prefix-level SD.

A second table judges one group's hit-rate interval (``harness.analysis.rates.rate_summary``) on
binary crossed data at population rates from 0.01 to 0.5: coverage of the true rate and mean width
of the Clopper-Pearson interval at min(prompts, prefixes) units (the report's), beside the interval
it replaced (percentile bootstrap over prompts and prefixes, and the exact interval where no
condition or every one hits), and how often that old interval was narrower for k hits than for k - 1
(its non-monotonicity, counted over pairs of neighbouring counts in the same simulation).

    python benchmarks/crossed_calibration.py                 # 1,000 data sets per cell
    python benchmarks/crossed_calibration.py --datasets 200  # a quicker look
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from harness.analysis.crossed import CellLayout, _permutation, _two_way
from harness.analysis.crossed_variance import crossed_t_interval


@dataclass(frozen=True)
class Design:
    name: str
    prompts: int
    prefixes: int  # per group
    sd_prefix_c: float = 1.0
    sd_prefix_b: float = 1.0
    sd_interaction: float = 0.3
    sd_residual: float = 0.22  # prefix variance / residual variance = 20: prefix variance dominates
    paired: bool = False
    sd_pair: float = 0.0
    binary: bool = False


DESIGNS = [
    Design("12 x 6", 12, 6),
    Design("24 x 5", 24, 5),
    Design("12 x 12 paired, pair effect", 12, 12, paired=True, sd_pair=0.8),
    Design("24 x 5, C prefix SD 4x B's", 24, 5, sd_prefix_c=2.0, sd_prefix_b=0.5),
    Design("12 x 6, C prefix SD 4x B's", 12, 6, sd_prefix_c=2.0, sd_prefix_b=0.5),
    Design("6 x 24", 6, 24),
    Design("24 x 48", 24, 48),
    Design("12 x 6, residual dominates", 12, 6, sd_prefix_c=0.3, sd_prefix_b=0.3, sd_residual=1.0),
    Design("12 x 12 binary (hit rates)", 12, 12, binary=True),
    Design("24 x 6 binary, paired", 24, 6, paired=True, sd_pair=0.8, binary=True),
]


def draw(design: Design, effect: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """One data set: Y (prompts x 2n prefixes: C first, then B), is_high, pairs."""
    n, p = design.prefixes, design.prompts
    a = rng.normal(0, 1.0, (p, 1))
    ag = rng.normal(0, design.sd_interaction, (p, 2))
    b = np.concatenate([rng.normal(0, design.sd_prefix_c, n), rng.normal(0, design.sd_prefix_b, n)])
    if design.paired:
        shared = rng.normal(0, design.sd_pair, n)
        b = b + np.concatenate([shared, shared])
    group = np.repeat([0, 1], n)
    mu = np.where(group == 0, effect, 0.0)
    latent = mu + a + ag[:, group] + b + rng.normal(0, design.sd_residual, (p, 2 * n))
    Y = (latent > 0.5).astype(float) if design.binary else latent
    is_high = group == 0
    pairs = (np.arange(n), np.arange(n, 2 * n)) if design.paired else None
    return Y, is_high, pairs


def truth(design: Design, effect: float, rng: np.random.Generator, n: int = 400) -> float:
    """The population C-minus-B difference (for binary cells, by Monte Carlo over many draws)."""
    if not design.binary:
        return effect
    big = Design(**{**design.__dict__, "prompts": n, "prefixes": n})
    Y, is_high, _ = draw(big, effect, rng)
    return float(Y[:, is_high].mean() - Y[:, ~is_high].mean())


def run_cell(design: Design, datasets: int, resamples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {"fpr_perm": 0, "cover_boot": 0, "cover_satt": 0, "power_perm": 0, "power_satt": 0}
    effect_sd = float(np.sqrt((design.sd_prefix_c ** 2 + design.sd_prefix_b ** 2) / 2))
    alt = truth(design, effect_sd, rng)
    null_truth = truth(design, 0.0, rng)
    for i in range(datasets):
        for effect, key_truth in ((0.0, null_truth), (effect_sd, alt)):
            Y, is_high, pairs = draw(design, effect, rng)
            lay = CellLayout(Y, is_high, pairs)
            p, _ = _permutation(lay, resamples, seed + i, "two-sided")
            lo_s, hi_s, _ = crossed_t_interval(Y, is_high, pairs)
            if effect == 0.0:
                lo_b, hi_b = _two_way(lay, resamples, seed + i, 0.95)
                out["fpr_perm"] += p < 0.05
                out["cover_boot"] += lo_b <= key_truth <= hi_b
                out["cover_satt"] += lo_s <= key_truth <= hi_s
            else:
                out["power_perm"] += p < 0.05
                out["power_satt"] += not (lo_s <= 0 <= hi_s)
    return {k: v / datasets for k, v in out.items()}


@dataclass(frozen=True)
class RateDesign:
    name: str
    prompts: int
    prefixes: int
    rate: float  # the population hit rate
    prefix_share: float = 0.9  # the latent variance's share from prefixes (the rest: prompts 0.05, residual)


RATE_DESIGNS = [
    RateDesign("12 x 12, rate 0.01", 12, 12, 0.01),
    RateDesign("12 x 12, rate 0.05", 12, 12, 0.05),
    RateDesign("12 x 12, rate 0.2", 12, 12, 0.2),
    RateDesign("12 x 12, rate 0.5", 12, 12, 0.5),
    RateDesign("24 x 6, rate 0.05", 24, 6, 0.05),
    RateDesign("6 x 24, rate 0.2", 6, 24, 0.2),
    RateDesign("24 x 48, rate 0.05", 24, 48, 0.05),
    RateDesign("12 x 12, rate 0.05, residual dominates", 12, 12, 0.05, prefix_share=0.1),
    RateDesign("12 x 12, rate 0.5, residual dominates", 12, 12, 0.5, prefix_share=0.1),
]


def draw_rate(design: RateDesign, rng: np.random.Generator) -> np.ndarray:
    """Hits [prompts, prefixes] from a latent normal with unit variance: prefix, prompt and
    residual parts, thresholded so that the population rate is ``design.rate``."""
    from scipy.stats import norm

    sd_b, sd_a = np.sqrt(design.prefix_share), np.sqrt(0.05)
    sd_e = np.sqrt(max(1 - design.prefix_share - 0.05, 0.0))
    latent = (rng.normal(0, sd_a, (design.prompts, 1)) + rng.normal(0, sd_b, (1, design.prefixes))
              + rng.normal(0, sd_e, (design.prompts, design.prefixes)))
    return (latent > norm.ppf(1 - design.rate)).astype(float)


def old_rate_interval(Y: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """The interval rate_summary had before: percentile bootstrap over prompts and prefixes, exact
    Clopper-Pearson at the scarcer factor's count where no condition (or every one) hits."""
    from harness.analysis.crossed import _crossed_resamples, percentile_interval
    from harness.analysis.rates import rate_interval

    hits = Y.sum()
    if hits in (0, Y.size):
        return rate_interval(float(hits > 0), min(Y.shape))
    samples = _crossed_resamples(Y, [(np.arange(Y.shape[1]), 1.0)], resamples, np.random.default_rng(seed),
                                 resample_prefixes=True)
    return percentile_interval(samples, 0.95)


def run_rate_cell(design: RateDesign, datasets: int, resamples: int, seed: int) -> dict:
    from harness.analysis.rates import effective_units, rate_interval

    rng = np.random.default_rng(seed)
    n = effective_units(design.prompts, design.prefixes)
    out = {"cover_old": 0, "cover_cp": 0, "width_old": 0.0, "width_cp": 0.0, "mean_hits": 0.0, "narrower": 0,
           "pairs": 0}
    for i in range(datasets):
        Y = draw_rate(design, rng)
        lo_o, hi_o = old_rate_interval(Y, resamples, seed + i)
        lo_c, hi_c = rate_interval(float(Y.mean()), n)
        out["cover_old"] += lo_o <= design.rate <= hi_o
        out["cover_cp"] += lo_c <= design.rate <= hi_c
        out["width_old"] += hi_o - lo_o
        out["width_cp"] += hi_c - lo_c
        out["mean_hits"] += Y.sum()
        hits = np.flatnonzero(Y.ravel())
        if len(hits):  # the same data with one hit fewer: is the old interval's upper end higher?
            fewer = Y.ravel().copy()
            fewer[hits[0]] = 0.0
            out["narrower"] += old_rate_interval(fewer.reshape(Y.shape), resamples, seed + i)[1] > hi_o
            out["pairs"] += 1
    pairs = max(out.pop("pairs"), 1)
    result = {k: v / datasets for k, v in out.items()}
    result["narrower"] = out["narrower"] / pairs
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples and permutations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=("all", "differences", "rates"), default="all",
                        help="both tables, or only the C-minus-B one, or only the hit-rate one")
    ns = parser.parse_args()
    print(f"{ns.datasets} data sets per cell; 95% intervals; tests at 0.05; power at one prefix-level SD")
    if ns.part != "rates":
        differences(ns)
    if ns.part != "differences":
        rates(ns)


def differences(ns) -> None:
    print(f"{'design (prompts x prefixes per group)':<38} {'fpr perm':>8} {'cover boot':>10} {'cover satt':>10} "
          f"{'power perm':>10} {'power satt':>10} {'seconds':>8}")
    for i, design in enumerate(DESIGNS):
        start = time.perf_counter()
        r = run_cell(design, ns.datasets, ns.resamples, ns.seed + 1000 * i)
        print(f"{design.name:<38} {r['fpr_perm']:>8.3f} {r['cover_boot']:>10.3f} {r['cover_satt']:>10.3f} "
              f"{r['power_perm']:>10.3f} {r['power_satt']:>10.3f} {time.perf_counter() - start:>8.1f}", flush=True)


def rates(ns) -> None:
    print()
    print("One group's hit rate (binary cells): coverage of the population rate, mean width, and how often the "
          "old interval's upper end fell when a hit was added")
    print(f"{'design (prompts x prefixes)':<38} {'hits':>6} {'cover old':>9} {'cover CP':>9} {'width old':>9} "
          f"{'width CP':>9} {'old not monotone':>16} {'seconds':>8}")
    for i, design in enumerate(RATE_DESIGNS):
        start = time.perf_counter()
        r = run_rate_cell(design, ns.datasets, ns.resamples, ns.seed + 5000 + 1000 * i)
        print(f"{design.name:<38} {r['mean_hits']:>6.1f} {r['cover_old']:>9.3f} {r['cover_cp']:>9.3f} "
              f"{r['width_old']:>9.3f} {r['width_cp']:>9.3f} {r['narrower']:>16.3f} "
              f"{time.perf_counter() - start:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
