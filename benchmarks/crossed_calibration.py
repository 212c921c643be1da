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

    python benchmarks/crossed_calibration.py                 # 1,000 data sets per cell
    python benchmarks/crossed_calibration.py --datasets 200  # a quicker look
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from harness.analysis.crossed import _Layout, _permutation, _two_way
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
            lay = _Layout(Y, is_high, pairs)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples and permutations")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args()
    print(f"{ns.datasets} data sets per cell; 95% intervals; tests at 0.05; power at one prefix-level SD")
    print(f"{'design (prompts x prefixes per group)':<38} {'fpr perm':>8} {'cover boot':>10} {'cover satt':>10} "
          f"{'power perm':>10} {'power satt':>10} {'seconds':>8}")
    for i, design in enumerate(DESIGNS):
        start = time.perf_counter()
        r = run_cell(design, ns.datasets, ns.resamples, ns.seed + 1000 * i)
        print(f"{design.name:<38} {r['fpr_perm']:>8.3f} {r['cover_boot']:>10.3f} {r['cover_satt']:>10.3f} "
              f"{r['power_perm']:>10.3f} {r['power_satt']:>10.3f} {time.perf_counter() - start:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
