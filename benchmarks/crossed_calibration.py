"""Calibration suite for the crossed (prompts x prefixes) statistics: what users rely on, by simulation.

Data sets come from crossed random-effects models at the harness's designs:

    y[prompt, prefix] = mu_group + a[prompt] + ag[prompt, group] + b[prefix] (+ pair[prefix]) + e

(prompt effects ``a``, a prompt-by-group interaction ``ag``, prefix effects ``b`` with an SD per
group, residual ``e``, optionally a pair effect that matched prefixes share; binary cells threshold
the latent value, so that B's population rate and C's are exactly the ones named). A second,
independent generator (``benchmarks/crossed_generator_b.py``: bivariate prompt effects, a logistic
link, long-format tables through ``compare_groups``) checks the first on a subset.

Tables (1,000 data sets per cell by default; 95% intervals; tests at 0.05):

1. **C minus B, the lead interval** (``harness.analysis.lead``): per design and regime, at no true
   difference and at one (one prefix-level SD for measures; the named gap for rates): coverage,
   the coverage of an oracle interval that knows the variance components (for measures 1.96 x the
   statistic's true SD each side; for rates MOVER of Wilson intervals at each group's true effective
   sample size with the true correlation: where data are discrete and sparse even it covers more
   than 0.95, which says how much of a rate interval's excess is the data's, not the estimate's),
   each side's miss rate (the interval wholly below / above the truth), the share with no interval,
   for rates the share of data sets with no hit in either group (any interval valid at 0 hits holds
   0 there, so at no difference they all cover), the mean width against the oracle's, the share of
   data sets whose width is above 10x the oracle's, the false-positive rate of
   the lead test (it inverts the interval) and of the prefix permutation test, and for measures the
   power the report prints (median over data sets) beside the test's real rejection rate.
1b. **The lead test's power** (``harness.analysis.power``): at one true prefix-level SD, for
   measures, the printed power (median), the power planned at the generator's own components (the
   planning model's error, which ``design_power_range`` is widened by) and the range the data allow
   against the test's real rejection rate: how often the range holds it, and each side's misses.
1d. **The lead test's power on rates** (``harness.analysis.rate_power``): at one true prefix-level SD
   on the 0/1 scale, the printed power (median; simulated from the table's fitted latent model) and
   its range against the MOVER test's real rejection rate, beside the t formula used before; the
   share of data sets that state no power or no range (no prefix-level variation to size an effect
   by), the median and the range's columns over those that do.
1e. **A sparse rate's difference at 6 x 24** (B 2%, C 10% or 2%): coverage, each side's miss, the
   lead test's rejection rate against the oracle's, and against the interval before a sparse group
   took the other's clustering (each group on its own, the worst case where it has 0-1 hits), in a
   regime where prefixes carry the clustering and two where prompts do.
2. **Planning** (``harness.analysis.power.design_power``): components estimated on a pilot's data
   predict the power at another design against one prefix-level SD as the pilot estimates it; median
   prediction against the test's real rejection rate there at one true prefix-level SD.
2b. **A plan's promise**: pilots of 4 x 24 plan the cheapest design at power 0.8 (on the point power,
   or at an assurance of 0.75 or 0.9, ``harness plan``'s default); the lead test's real power at the
   design each chose.
2c. **Claims 1 and 2's promise**: table 2b for the min-of-two-contrasts test.
2d. **A plan for decisions**: table 2b for the chance the lead test ends decided at Δ (truth Δ/2).
2e. **A sparse rate's plan** (``harness.analysis.rate_planning``): pilots of 6 x 24 with B at 2% and
   C at 10% plan the cheapest design at power 0.8 at Δ = 0.08, or at a chance of a verdict of 0.8;
   the rate test's real power (or chance of a verdict) at the design each chose.
3. **One group's rate** (``harness.analysis.rate_intervals``): coverage, the oracle's coverage,
   misses, mean width against the oracle's (a Wilson interval at the true effective sample size) and
   the old Clopper-Pearson
   interval at min(prompts, prefixes).
4. **Claims 1 and 2** (``harness.analysis.claims``): coverage of the min-of-two-contrasts interval.
5. **The second generator**, through ``compare_groups``.
6. **Verdicts at Δ** (``harness.analysis.verdicts``): how often "no effect as large as Δ" is said
   when the truth is exactly Δ (C - B two- and one-sided, claims 1 and 2), and the power at Δ printed
   beside a verdict against the real chance the interval clears zero.

    python benchmarks/crossed_calibration.py                  # everything, 1,000 data sets per cell
    python benchmarks/crossed_calibration.py --datasets 200   # a quicker look
    python benchmarks/crossed_calibration.py --part rates     # one table
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import beta, norm

from harness.analysis.crossed import permutation_pvalues, relabelings
from harness.analysis.crossed_variance import difference
from harness.analysis.power import ASSURANCE, components_of, design_power, design_power_range, prefix_level_sd
from harness.analysis.rate_intervals import crossed_rate_interval, rate_difference, wilson
from harness.analysis.rate_power import rate_power, rate_power_range

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crossed_generator_b as second


@dataclass(frozen=True)
class Regime:
    name: str
    prompt: float = 1.0          # SDs on the latent scale
    interaction: float = 0.3
    prefix_c: float = 1.0
    prefix_b: float = 1.0
    resid: float = 0.22
    rate_b: float | None = None  # binary: B's rate; C's is rate_b + gap when there is a difference
    gap: float = 0.0


REGIMES = [
    Regime("prefixes dominate"),
    Regime("residual dominates", prefix_c=0.3, prefix_b=0.3, resid=1.0),
    Regime("prompt x group interaction", interaction=1.0),
    Regime("unequal prefix SDs (C 2, B 0.5)", prefix_c=2.0, prefix_b=0.5),
    Regime("rate 0.2, +0.1", rate_b=0.2, gap=0.1),
    Regime("sparse rate 0.05, +0.069", rate_b=0.05, gap=0.069),
    Regime("zero-heavy rate 0.01, +0.02", rate_b=0.01, gap=0.02),
    Regime("sparse rate, residual dominates", prefix_c=0.3, prefix_b=0.3, resid=1.0, rate_b=0.05, gap=0.069),
]


@dataclass(frozen=True)
class Design:
    name: str
    prompts: int
    prefixes: int  # per group
    pair: float = 0.0  # SD of a pair effect both members share (> 0: matched pairs)


DESIGNS = [Design("3 x 6", 3, 6), Design("12 x 3", 12, 3), Design("8 x 5", 8, 5), Design("12 x 6", 12, 6),
           Design("24 x 10", 24, 10), Design("3 x 18 (study)", 3, 18), Design("6 x 24 paired (assistant triples)", 6, 24, pair=0.8),
           Design("8 x 12 (demo)", 8, 12)]


def draw(d: Design, r: Regime, different: bool, sets: int, rng: np.random.Generator):
    """``sets`` data sets: Y [sets, prompts, 2 x prefixes] (C first), is_high, pairs, true difference."""
    n, P = d.prefixes, d.prompts
    a = rng.normal(0, r.prompt, (sets, P, 1))
    ag = rng.normal(0, r.interaction, (sets, P, 2))
    b = np.concatenate([rng.normal(0, r.prefix_c, (sets, 1, n)), rng.normal(0, r.prefix_b, (sets, 1, n))], -1)
    if d.pair:
        shared = rng.normal(0, d.pair, (sets, 1, n))
        b = b + np.concatenate([shared, shared], -1)
    g = np.repeat([0, 1], n)
    noise = a + ag[..., g] + b + rng.normal(0, r.resid, (sets, P, 2 * n))
    pairs = (np.arange(n), np.arange(n, 2 * n)) if d.pair else None
    if r.rate_b is None:
        effect = prefix_sd(d, r) if different else 0.0
        return np.where(g == 0, effect, 0.0) + noise, g == 0, pairs, effect
    total = [np.sqrt(r.prompt ** 2 + r.interaction ** 2 + s ** 2 + r.resid ** 2 + d.pair ** 2)
             for s in (r.prefix_c, r.prefix_b)]
    rate_c = r.rate_b + (r.gap if different else 0.0)
    threshold = np.where(g == 0, norm.ppf(1 - rate_c) * total[0], norm.ppf(1 - r.rate_b) * total[1])
    return (noise > threshold).astype(float), g == 0, pairs, rate_c - r.rate_b


def prefix_sd(d: Design, r: Regime) -> float:
    """One true prefix-level SD: of a prefix's mean over all prompts, pooled over the groups (a pair
    effect is part of it; it cancels from C minus B in a paired design)."""
    return float(np.sqrt((r.prefix_c ** 2 + r.prefix_b ** 2) / 2 + d.pair ** 2))


def oracle(d: Design, r: Regime, different: bool, rng: np.random.Generator, sets: int = 20000):
    """The interval that knows the variance components, as a function of the data sets: for
    measures the statistic +- 1.96 x its true SD; for rates MOVER of each group's Wilson interval at
    its true effective sample size, with the true correlation of the two rates (by simulation)."""
    if r.rate_b is None:
        P, n = d.prompts, d.prefixes
        sd = float(np.sqrt(2 * r.interaction ** 2 / P + (r.prefix_c ** 2 + r.prefix_b ** 2) / n
                           + r.resid ** 2 * (2 / n) / P))
        return lambda Y, hi: (np.full(len(Y), -1.96 * sd), np.full(len(Y), 1.96 * sd))
    Z, zhi, _, _ = draw(d, r, different, sets, rng)
    rc, rb = Z[..., zhi].mean((-2, -1)), Z[..., ~zhi].mean((-2, -1))
    n_c, n_b = (rc.mean() * (1 - rc.mean()) / rc.var(), rb.mean() * (1 - rb.mean()) / rb.var())
    rho = float(np.corrcoef(rc, rb)[0, 1])

    def interval(Y, hi):
        c, b = Y[..., hi].mean((-2, -1)), Y[..., ~hi].mean((-2, -1))
        (lc, uc), (lb, ub) = wilson(c, n_c, 1.96), wilson(b, n_b, 1.96)
        low = -np.sqrt((c - lc) ** 2 + (ub - b) ** 2 - 2 * rho * (c - lc) * (ub - b))
        high = np.sqrt((uc - c) ** 2 + (b - lb) ** 2 - 2 * rho * (uc - c) * (b - lb))
        return low, high  # relative to the estimate
    return interval


def permutation_fpr(Y, hi, pairs, permutations: int, rng) -> float:
    W, exact = relabelings(hi, pairs, permutations, rng)
    w0 = np.where(hi, 1.0 / hi.sum(), -1.0 / (~hi).sum())
    return float(np.mean(permutation_pvalues(Y.mean(-2), w0, W, exact, "two-sided") < 0.05))


def heading(title: str, columns: list[str], text_columns: int) -> None:
    """A markdown table's title, header and alignment row (the first ``text_columns`` left-aligned)."""
    print(f"\n## {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "".join(" --- |" if i < text_columns else " ---: |" for i in range(len(columns))))


def counts(d: Design) -> dict:
    """The pilot's counts, which the report's power takes with the components (median correction)."""
    return {"n_prompts": d.prompts, "n_prefixes_high": d.prefixes, "n_prefixes_low": d.prefixes}


def difference_cell(d: Design, r: Regime, sets: int, permutations: int, rng) -> list[dict]:
    out = []
    for different in (False, True):
        Y, hi, pairs, true = draw(d, r, different, sets, rng)
        o_low, o_high = oracle(d, r, different, rng)(Y, hi)
        if r.rate_b is None:
            est = difference(Y, hi, pairs)
            estimate, (low, high) = est.statistic, est.interval()
        else:
            estimate, low, high = rate_difference(Y, hi, pairs)
        ok = np.isfinite(low)
        ratio = (high - low) / (o_high - o_low)
        row = {"design": d.name, "regime": r.name, "truth": true, "cover": np.mean(ok & (low <= true) & (true <= high)),
               "oracle_cover": np.mean((estimate + o_low <= true) & (true <= estimate + o_high)),
               "no_hit": np.mean(Y.sum((-2, -1)) == 0) if r.rate_b is not None else np.nan,
               "below": np.mean(ok & (high < true)), "above": np.mean(ok & (low > true)), "none": np.mean(~ok),
               "width": np.nanmean(high - low) / np.mean(o_high - o_low), "explode": np.mean(ok & (ratio > 10))}
        if not different:
            row["fpr"] = np.mean(ok & ((low > 0) | (high < 0)))  # the lead test: p < 0.05 iff 0 is outside
            row["fpr_perm"] = permutation_fpr(Y, hi, pairs, permutations, rng)
        elif r.rate_b is None:
            comps = {**components_of(Y, hi, pairs), **counts(d)}
            printed = design_power(comps, d.prompts, d.prefixes, prefix_level_sd(comps))
            row["printed"], row["real"] = float(np.nanmedian(printed)), float(np.mean(ok & ((low > 0) | (high < 0))))
        out.append(row)
    return out


def differences(ns) -> None:
    heading(f"1. C minus B, the lead interval ({ns.datasets} data sets per row)",
            ["design", "regime", "truth", "coverage", "oracle's coverage", "below", "above", "no interval",
             "no hit in either group", "width / oracle", "> 10x oracle", "FPR lead", "FPR permutation",
             "power printed (median)", "power real"], 2)
    rng = np.random.default_rng(ns.seed)
    for d in DESIGNS:
        for r in REGIMES:
            for row in difference_cell(d, r, ns.datasets, ns.permutations, rng):
                cells = [row["design"], row["regime"], f"{row['truth']:.3g}"] + [f"{row[k]:.3f}" for k in (
                    "cover", "oracle_cover", "below", "above", "none")]
                cells += ["" if np.isnan(row["no_hit"]) else f"{row['no_hit']:.3f}", f"{row['width']:.2f}",
                          f"{row['explode']:.3f}"]
                cells += [f"{row[k]:.3f}" if k in row else "" for k in ("fpr", "fpr_perm", "printed", "real")]
                print("| " + " | ".join(cells) + " |", flush=True)


SPARSE = [Regime("prefixes cluster the hits", prompt=0.0, interaction=0.0, resid=1.0, rate_b=0.02, gap=0.08),
          Regime("prefixes dominate (the suite's latent)", rate_b=0.02, gap=0.08),
          Regime("prompts dominate", prefix_c=0.3, prefix_b=0.3, resid=1.0, rate_b=0.02, gap=0.08)]


def each_on_its_own(Y, hi, pairs):
    """The difference's interval before a sparse group borrowed the other's clustering: MOVER of each
    group's own crossed Wilson interval (the worst case where it has 0-1 hits), the correlation as
    estimated."""
    from harness.analysis.rate_intervals import effective_units, quantile

    est = difference(Y, hi, pairs)
    dof_d = np.where(est.variance > 0, est.dof, np.nan)
    parts = []
    for G in (Y[..., hi], Y[..., ~hi]):
        rate, n_eff, dof, var = effective_units(G, 0.95, dof_d)
        parts.append((rate, *wilson(rate, n_eff, quantile(dof, 0.95)), var))
    (rc, lc, uc, vc), (rb, lb, ub, vb) = parts
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.nan_to_num(np.clip((vc + vb - est.variance) / (2 * np.sqrt(vc * vb)), 0.0, 0.99))
    d = rc - rb
    return (d - np.sqrt(np.maximum((rc - lc) ** 2 + (ub - rb) ** 2 - 2 * rho * (rc - lc) * (ub - rb), 0.0)),
            d + np.sqrt(np.maximum((uc - rc) ** 2 + (rb - lb) ** 2 - 2 * rho * (uc - rc) * (rb - lb), 0.0)))


def sparse_rates(ns) -> None:
    heading(f"1e. A sparse rate's difference at 6 x 24: B 2%, C 10% (or 2%) ({4 * ns.datasets} data sets per row)",
            ["regime", "truth", "coverage", "below", "above", "B with 0-1 hits", "rejection", "oracle's rejection",
             "rejection, each group on its own (before)", "coverage (before)"], 1)
    rng = np.random.default_rng(ns.seed + 7)
    d = Design("6 x 24", 6, 24)
    for r in SPARSE:
        for different in (True, False):
            Y, hi, pairs, true = draw(d, r, different, 4 * ns.datasets, rng)
            o_low, o_high = oracle(d, r, different, rng)(Y, hi)
            estimate, low, high = rate_difference(Y, hi, pairs)
            b_low, b_high = each_on_its_own(Y, hi, pairs)
            cells = [r.name, f"{true:.3g}", *(f"{v:.3f}" for v in (
                np.mean((low <= true) & (true <= high)), np.mean(high < true), np.mean(low > true),
                np.mean(Y[..., ~hi].sum((-2, -1)) <= 1), np.mean((low > 0) | (high < 0)),
                np.mean((estimate + o_low > 0) | (estimate + o_high < 0)), np.mean((b_low > 0) | (b_high < 0)),
                np.mean((b_low <= true) & (true <= b_high))))]
            print("| " + " | ".join(cells) + " |", flush=True)


PLANS = [(Design("3 x 18", 3, 18), Design("12 x 18", 12, 18)), (Design("3 x 18", 3, 18), Design("24 x 18", 24, 18)),
         (Design("3 x 18", 3, 18), Design("3 x 48", 3, 48)), (Design("8 x 12", 8, 12), Design("24 x 24", 24, 24))]


def lead_power(ns) -> None:
    """The lead test's printed power (:func:`design_power`) and the range its data allow
    (:func:`design_power_range`) against the test's real rejection rate at a true C - B of one
    prefix-level SD (the measure regimes of table 1, fresh draws)."""
    heading(f"1b. C minus B: power printed and its range against real ({ns.datasets} data sets per row)",
            ["design", "regime", "power printed (median)", "power real", "printed - real", "planned at truth - real",
             "range holds real", "range below real", "range above real", "range (median ends)"], 2)
    rng = np.random.default_rng(ns.seed + 6)
    for d in DESIGNS:
        for r in (r for r in REGIMES if r.rate_b is None):
            Y, hi, pairs, effect = draw(d, r, True, ns.datasets, rng)
            low, high = difference(Y, hi, pairs).interval()
            real = float(np.mean(np.isfinite(low) & ((low > 0) | (high < 0))))
            comps = {**components_of(Y, hi, pairs), **counts(d)}
            printed = float(np.nanmedian(design_power(comps, d.prompts, d.prefixes, prefix_level_sd(comps))))
            truth = {"interaction": r.interaction ** 2, "prefix_high": r.prefix_c ** 2 + d.pair ** 2,
                     "prefix_low": r.prefix_b ** 2 + d.pair ** 2, "resid_high": r.resid ** 2, "resid_low": r.resid ** 2}
            if d.pair:  # the pair effect cancels from C - B
                truth["prefix_pair_sum"] = r.prefix_c ** 2 + r.prefix_b ** 2
            at_truth = float(design_power(truth, d.prompts, d.prefixes, effect))
            lo, hh = design_power_range(Y, hi, pairs)
            below, above = np.mean(hh < real), np.mean(lo > real)
            print(f"| {d.name} | {r.name} | {printed:.3f} | {real:.3f} | {printed - real:+.3f} | "
                  f"{at_truth - real:+.3f} | "
                  f"{1 - below - above:.3f} | {below:.3f} | {above:.3f} | "
                  f"{np.median(lo):.3f}-{np.median(hh):.3f} |", flush=True)


def rate_prefix_sd(d: Design, r: Regime, rate_c: float, rng) -> float:
    """One true prefix-level SD on the 0/1 scale: the SD over prefixes of a prefix's population rate
    (over infinitely many prompts), pooled over C (at ``rate_c``) and B, by 200,000 draws."""
    b = rng.standard_normal(200_000)
    rest = np.sqrt(r.prompt ** 2 + r.interaction ** 2 + r.resid ** 2)
    var = []
    for sd, rate in ((r.prefix_c, rate_c), (r.prefix_b, r.rate_b)):
        total = np.sqrt(r.prompt ** 2 + r.interaction ** 2 + sd ** 2 + r.resid ** 2 + d.pair ** 2)
        var.append(norm.cdf((b * np.hypot(sd, d.pair) - norm.ppf(1 - rate) * total) / rest).var())
    return float(np.sqrt(np.mean(var)))


def _in_chunks(fn, Y, hi, pairs, size: int = 25):
    parts = [fn(Y[i:i + size], hi, pairs) for i in range(0, len(Y), size)]
    return tuple(np.concatenate(p) for p in zip(*parts)) if isinstance(parts[0], tuple) else np.concatenate(parts)


def rate_lead_power(ns) -> None:
    """The rate rows' printed power (:func:`rate_power`, simulated from the table's fitted latent
    model) and its range (:func:`rate_power_range`) against the MOVER test's real rejection rate at a
    true C - B of one prefix-level SD on the 0/1 scale (C at B's rate plus that SD), beside what the
    t formula used before printed (:func:`design_power`, :func:`design_power_range`)."""
    heading(f"1d. C minus B on rates: power printed and its range against real ({ns.datasets_power} data sets per row; "
            f"real from 4000)", ["design", "regime", "effect (0/1 SD)", "power real", "no power printed", "no range",
                                "printed (median)", "printed - real", "range holds real", "range below real",
                                "range above real",
                                "range (median ends)", "t formula printed - real", "t range holds real",
                                "t range above real"], 2)
    rng = np.random.default_rng(ns.seed + 8)
    for d in DESIGNS:
        for r in (r for r in REGIMES if r.rate_b is not None):
            gap = rate_prefix_sd(d, r, r.rate_b, rng)
            for _ in range(3):  # C's own prefix SD moves with its rate
                gap = rate_prefix_sd(d, r, min(r.rate_b + gap, 0.99), rng)
            Y, hi, pairs, _ = draw(d, Regime(**{**r.__dict__, "gap": gap}), True, 4000, rng)
            _, low, high = rate_difference(Y, hi, pairs)
            real = float(np.mean((low > 0) | (high < 0)))
            Y = Y[:ns.datasets_power]
            printed = _in_chunks(lambda y, h, p: rate_power(y, h, p), Y, hi, pairs)
            lo, hh = _in_chunks(lambda y, h, p: rate_power_range(y, h, p), Y, hi, pairs)
            comps = {**components_of(Y, hi, pairs), **counts(d)}
            t_printed = design_power(comps, d.prompts, d.prefixes, prefix_level_sd(comps))
            t_lo, t_hi = design_power_range(Y, hi, pairs)
            ranged = np.isfinite(lo) & np.isfinite(hh)  # the rest state none: no prefix-level variation
            lo, hh = lo[ranged], hh[ranged]
            print(f"| {d.name} | {r.name} | {gap:.3f} | {real:.3f} | {np.mean(np.isnan(printed)):.3f} | "
                  f"{1 - ranged.mean():.3f} | {np.nanmedian(printed):.3f} | "
                  f"{np.nanmedian(printed) - real:+.3f} | {np.mean((lo <= real) & (real <= hh)):.3f} | "
                  f"{np.mean(hh < real):.3f} | {np.mean(lo > real):.3f} | {np.median(lo):.2f}-{np.median(hh):.2f} | "
                  f"{np.nanmedian(t_printed) - real:+.3f} | {np.mean((t_lo <= real) & (real <= t_hi)):.3f} | "
                  f"{np.mean(t_lo > real):.3f} |", flush=True)


def planning(ns) -> None:
    heading(f"2. Planning: a pilot's components predict another design's power ({ns.datasets} pilots)",
            ["pilot", "planned design", "regime", "predicted power (median)", "predicted (quartiles)", "real power"], 3)
    rng = np.random.default_rng(ns.seed + 1)
    for pilot, plan in PLANS:
        for r in REGIMES[:4]:
            Y, hi, pairs, _ = draw(pilot, r, False, ns.datasets, rng)
            comps = {**components_of(Y, hi, pairs), **counts(pilot)}  # as harness plan reads a run
            predicted = design_power(comps, plan.prompts, plan.prefixes, prefix_level_sd(comps))
            Z, zhi, zpairs, _ = draw(plan, r, True, ns.datasets, rng)
            low, high = difference(Z, zhi, zpairs).interval()
            real = np.mean((low > 0) | (high < 0))
            q1, q3 = np.nanpercentile(predicted, [25, 75])
            print(f"| {pilot.name} | {plan.name} | {r.name} | {np.nanmedian(predicted):.3f} | {q1:.2f}-{q3:.2f} | "
                  f"{real:.3f} |", flush=True)


# up to 512 prompts: a search range that cuts off the plans a pilot's large estimates ask for keeps
# only the pilots that underestimated, and their real power, biased low
PROMISE_PROMPTS = [4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
PROMISE_PREFIXES = [3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96]


def promise_row(regime: str, planned_at: str, rows: list, pilots: int) -> None:
    """One row of tables 2b-2d from ``rows`` of (promised, real, cost), one per pilot that found a design."""
    a = np.array(rows).reshape(-1, 3)
    cells = [regime, planned_at, f"{len(a)}/{pilots}"]
    cells += ([f"{a[:, 0].mean():.3f}", f"{a[:, 1].mean():.3f}", f"{np.percentile(a[:, 1], 10):.3f}",
               f"{np.mean(a[:, 1] < 0.7):.2f}", f"{np.median(a[:, 2]):.0f}"] if len(a) else [""] * 5)
    print("| " + " | ".join(cells) + " |", flush=True)


def promise(ns) -> None:
    """Table 2b: does a plan keep its promise? Each pilot (4 prompts x 24 prefixes per group) plans the
    cheapest design (prompts x prefixes, the conditions' count as its cost) at which the lead test
    reaches power 0.8 against one true prefix-level SD, planning on the point power (assurance 0.5) or
    at an assurance of 0.75 or 0.9 (``harness plan``'s default: the prompt mean square at that upper
    bound, :func:`harness.analysis.power.median_unbiased`); the power it then has is the lead test's
    real rejection rate there (300 fresh data sets)."""
    heading(f"2b. Planning: the power a plan promises against the power it gets ({ns.datasets // 10} pilots, "
            "4 x 24, target 0.8)", ["regime", "planned on", "designs found", "promised (mean)", "real (mean)",
                                     "real (10th percentile)", "real below 0.70", "cost (median conditions)"], 2)
    rng = np.random.default_rng(ns.seed + 8)
    pilot, pilots = Design("4 x 24", 4, 24), ns.datasets // 10
    designs = sorted(((p, n) for p in PROMISE_PROMPTS for n in PROMISE_PREFIXES), key=lambda d: (d[0] * d[1], d[0]))
    for r in REGIMES[:3]:
        delta, real = prefix_sd(pilot, r), {}
        Ys, hi, _, _ = draw(pilot, r, False, pilots, rng)
        for assurance in (0.5, 0.75, ASSURANCE):
            rows = []
            for Y in Ys + delta * hi:
                comps = {**{k: float(v) for k, v in components_of(Y, hi).items()}, **counts(pilot)}
                for p, n in designs:
                    power = design_power(comps, p, n, delta, assurance=assurance)
                    if power >= 0.8:
                        if (p, n) not in real:
                            Z, zhi, _, _ = draw(Design("", p, n), r, False, 300, rng)
                            low, high = difference(Z + delta * zhi, zhi).interval()
                            real[(p, n)] = float(np.mean((low > 0) | (high < 0)))
                        rows.append((power, real[(p, n)], p * n))
                        break
            promise_row(r.name, "point power (0.5)" if assurance == 0.5 else f"assurance {assurance:g}", rows, pilots)


def decided_promise(ns) -> None:
    """Table 2d: a plan for decisions keeps its promise? Pilots of 4 x 24 plan the cheapest design at
    which the lead test (claim 3: one-sided verdicts on the 95% interval) ends decided with a chance of
    0.8 at Δ = one true prefix-level SD, whatever the truth (``harness plan``'s default target,
    :mod:`harness.analysis.decided`), at each assurance; the chance it then has is the share of 300
    fresh data sets at the chosen design, with the truth at Δ/2 (the least favourable), whose verdict
    is not "not determined"."""
    from harness.analysis.decided import undecided
    from harness.analysis.power import planned_variance
    from harness.analysis.verdicts import NOT_DETERMINED, decide

    pilots = ns.datasets // 10
    heading(f"2d. Planning for decisions: the chance of a verdict a plan promises against the one it gets ({pilots} "
            "pilots, 4 x 24, target 0.8, truth Δ/2)", ["regime", "planned at", "designs found", "promised (mean)",
                                                       "real (mean)", "real (10th percentile)", "real below 0.70",
                                                       "cost (median conditions)"], 2)
    rng = np.random.default_rng(ns.seed + 10)
    pilot = Design("4 x 24", 4, 24)
    designs = sorted(((p, n) for p in PROMISE_PROMPTS for n in PROMISE_PREFIXES), key=lambda d: (d[0] * d[1], d[0]))
    for r in REGIMES[:3]:
        delta, real = prefix_sd(pilot, r), {}
        Ys, hi, _, _ = draw(pilot, r, False, pilots, rng)
        for assurance in (0.5, ASSURANCE):
            rows = []
            for Y in Ys:
                comps = {**{k: float(v) for k, v in components_of(Y, hi).items()}, **counts(pilot)}
                for p, n in designs:
                    chance = 1.0 - undecided(*map(float, planned_variance(comps, p, n, assurance)), delta)
                    if chance >= 0.8:
                        if (p, n) not in real:
                            Z, zhi, _, _ = draw(Design("", p, n), r, False, 300, rng)
                            low, high = difference(Z + delta / 2 * zhi, zhi).interval()
                            real[(p, n)] = float(np.mean([decide(lo, h, delta) != NOT_DETERMINED
                                                          for lo, h in zip(low, high)]))
                        rows.append((chance, real[(p, n)], p * n))
                        break
            promise_row(r.name, "point (0.5)" if assurance == 0.5 else f"assurance {assurance:g}", rows, pilots)


def claims_promise(ns) -> None:
    """Table 2c: table 2b for claims 1 and 2 (the smaller of two contrasts of group C clears zero).
    Pilots of 4 prompts x 24 prefixes (table 4b's generator, each contrast's truth two of its
    prefix-level SDs) plan the cheapest design at which
    :func:`harness.analysis.claim_power.min_contrast_power` reaches 0.8 at the true contrast, at each
    assurance; the real power there is the rate at which both contrasts' intervals clear zero (200
    fresh data sets)."""
    from harness.analysis.claim_cubes import min_contrast_interval
    from harness.analysis.claim_power import contrast_components, min_contrast_power

    pilots = ns.datasets // 10
    heading(f"2c. Planning claims 1 and 2: the power a plan promises against the power it gets ({pilots} pilots, "
            "4 x 24, target 0.8)", ["regime", "planned on", "designs found", "promised (mean)", "real (mean)",
                                     "real (10th percentile)", "real below 0.70", "cost (median cells)"], 2)
    rng = np.random.default_rng(ns.seed + 9)
    weights = np.array([[1.0, -2.0, 1.0, 0.0], [0.0, -1.0, 2.0, -1.0]])
    designs = sorted(((p, n) for p in PROMISE_PROMPTS for n in PROMISE_PREFIXES), key=lambda d: (d[0] * d[1], d[0]))

    def draw_claims(P, n, sets, sd_b, sd_a, sd_e, m):
        a = rng.normal(0, 1, (sets, P, 1, 1)) + rng.normal(0, sd_a, (sets, P, 1, 4))
        b = rng.normal(0, sd_b, (sets, 1, n, 1)) + rng.normal(0, 0.3 * sd_b, (sets, 1, n, 4))
        return m + a + b + rng.normal(0, sd_e, (sets, P, n, 4))

    for name, sd_b, sd_a, sd_e in (("prefixes dominate", 1.0, 0.3, 0.22), ("residual dominates", 0.5, 0.3, 1.0),
                                   ("prompts interact", 0.6, 0.8, 0.5)):
        # both contrasts' truth: two of their prefix-level SDs (equal norms), so that the designs it asks
        # for lie within the search range
        delta = float(2 * 0.3 * sd_b * np.linalg.norm(weights[0]))
        m = np.array([0.0, 0.0, delta, delta])  # weights @ m == (delta, delta)
        real = {}
        components = [contrast_components(y, weights) for y in draw_claims(4, 24, pilots, sd_b, sd_a, sd_e, m)]
        for assurance in (0.5, ASSURANCE):
            rows = []
            for comps in components:
                for p, n in designs:
                    power = min_contrast_power(comps, p, n, effect=delta, assurance=assurance)
                    if power >= 0.8:
                        if (p, n) not in real:
                            low, _, _ = min_contrast_interval(draw_claims(p, n, 200, sd_b, sd_a, sd_e, m), weights)
                            real[(p, n)] = float(np.mean(low > 0))
                        rows.append((power, real[(p, n)], p * n))
                        break
            promise_row(name, "point power (0.5)" if assurance == 0.5 else f"assurance {assurance:g}", rows, pilots)


RATE_PROMISE_PROMPTS = [6, 8, 12, 16, 24, 32, 48, 64, 96]
RATE_PROMISE_PREFIXES = [6, 8, 12, 16, 24, 32, 48, 64, 96]


def fewest_by_prefixes(reaches, prompts: list[int], prefixes: list[int]) -> tuple[int, int] | None:
    """The least costly design (prompts x prefixes, ties: fewer prompts) at which ``reaches(p, n)``,
    found by bisecting the prompts at each prefix count (the power grows with both; ``harness plan``
    searches its grid in full, which the run's prompt set and bank keep small)."""
    best = None
    for n in prefixes:
        lo, hi = 0, len(prompts) - 1
        if best is not None and prompts[0] * n >= best[0] * best[1]:
            break  # every design with this many prefixes costs more than the one found
        if not reaches(prompts[hi], n):
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if reaches(prompts[mid], n) else (mid + 1, hi)
        if best is None or (prompts[lo] * n, prompts[lo]) < (best[0] * best[1], best[0]):
            best = (prompts[lo], n)
    return best


def rate_promise(ns) -> None:
    """Table 2e: a rate's plan keeps its promise? Pilots of 6 prompts x 24 prefixes per group, B's rate
    2% and C's 10% (Δ = 0.08, the true gap), in table 1e's three sparse regimes, plan through
    :func:`harness.analysis.rate_planning.rate_tests` (what ``harness plan --measure target_hit``
    plans with) the cheapest design of the grid (up to 96 x 96; the conditions' count as its cost) at
    which the lead rate test's power reaches 0.8, on the point fit or at ``harness plan``'s assurance;
    and, for decisions, the cheapest at which its chance of a verdict at Δ reaches 0.8 (truth Δ/2).
    What it then gets: the share of 500 fresh tables at the chosen design whose 95% interval leaves
    out 0 (truth Δ), or ends decided (truth Δ/2)."""
    import pandas as pd

    from harness.analysis.rate_planning import rate_tests
    from harness.analysis.verdicts import NOT_DETERMINED, decide

    pilots, fresh = max(ns.datasets // 20, 10), 500
    heading(f"2e. Planning a sparse rate: the power (or chance of a verdict) a plan promises against the one it gets "
            f"({pilots} pilots, 6 x 24, B 2%, C 10%, Δ 0.08, target 0.8; {fresh} fresh tables a design)",
            ["regime", "planned for", "planned at", "designs found", "promised (mean)", "real (mean)",
             "real (10th percentile)", "real below 0.70", "cost (median conditions)"], 3)
    rng = np.random.default_rng(ns.seed + 11)
    pilot, delta = Design("6 x 24", 6, 24), 0.08
    for r in SPARSE:
        Ys, hi, _, _ = draw(pilot, r, True, pilots, rng)
        real: dict = {}
        for plan_for in ("power", "decided"):
            for assurance in (None, ASSURANCE):
                rows = []
                for Y in Ys:
                    frame = pd.DataFrame([{"prompt_id": f"p{i}", "prefix_id": f"x{j}", "group": "C" if hi[j] else "B",
                                           "target_hit": bool(Y[i, j])}
                                          for i in range(Y.shape[0]) for j in range(Y.shape[1])])
                    tests, _ = rate_tests(frame, ["target_hit"], {"target_hit": delta}, by=(), assurance=assurance)
                    if not tests:
                        continue
                    t = tests[0]
                    planned = (lambda p, n, t=t: t.planned(p, n, "decided")) if plan_for == "decided" else \
                        (lambda p, n, t=t: t.planned(p, n))
                    found = fewest_by_prefixes(lambda p, n: planned(p, n) >= 0.8, RATE_PROMISE_PROMPTS,
                                               RATE_PROMISE_PREFIXES)
                    if found is None:
                        continue
                    key = (plan_for, *found)
                    if key not in real:
                        d = Design("", *found)
                        truth = delta if plan_for == "power" else delta / 2
                        Z, zhi, _, _ = draw(d, Regime(r.name, r.prompt, r.interaction, r.prefix_c, r.prefix_b, r.resid,
                                                      r.rate_b, truth), True, fresh, rng)
                        _, low, high = rate_difference(Z, zhi)
                        real[key] = float(np.mean((low > 0) | (high < 0))) if plan_for == "power" else \
                            float(np.mean([decide(lo, h, delta, two_sided=True) != NOT_DETERMINED
                                           for lo, h in zip(low, high)]))
                    rows.append((planned(*found), real[key], found[0] * found[1]))
                print("| " + " | ".join([r.name, plan_for, "point (0.5)" if assurance is None else
                                         f"assurance {assurance:g}"]), end="", flush=True)
                a = np.array(rows).reshape(-1, 3)
                cells = [f"{len(a)}/{pilots}"] + ([f"{a[:, 0].mean():.3f}", f"{a[:, 1].mean():.3f}",
                                                   f"{np.percentile(a[:, 1], 10):.3f}", f"{np.mean(a[:, 1] < 0.7):.2f}",
                                                   f"{np.median(a[:, 2]):.0f}"] if len(a) else [""] * 5)
                print(" | " + " | ".join(cells) + " |", flush=True)


@dataclass(frozen=True)
class RateCell:
    name: str
    prompts: int
    prefixes: int
    rate: float
    prefix_share: float = 0.9  # the latent variance's share from prefixes; prompts 0.05; the rest residual


RATE_CELLS = [RateCell("12 x 12", 12, 12, r) for r in (0.01, 0.05, 0.2, 0.5)] + [
    RateCell("24 x 6", 24, 6, 0.05), RateCell("6 x 24", 6, 24, 0.2), RateCell("24 x 48", 24, 48, 0.05),
    RateCell("12 x 12, residual dominates", 12, 12, 0.05, 0.1), RateCell("12 x 12, residual dominates", 12, 12, 0.5, 0.1),
    RateCell("3 x 18 (study)", 3, 18, 0.05, 0.5), RateCell("3 x 18 (study)", 3, 18, 0.2, 0.5),
    RateCell("6 x 24 (assistant)", 6, 24, 0.15, 0.5), RateCell("8 x 12 (demo)", 8, 12, 0.05, 0.5),
    RateCell("8 x 12 (demo)", 8, 12, 0.5, 0.9), RateCell("3 x 6", 3, 6, 0.2, 0.5)]


def draw_rate(c: RateCell, sets: int, rng) -> np.ndarray:
    sd_b, sd_a = np.sqrt(c.prefix_share), np.sqrt(0.05)
    sd_e = np.sqrt(max(1 - c.prefix_share - 0.05, 0.0))
    latent = (rng.normal(0, sd_a, (sets, c.prompts, 1)) + rng.normal(0, sd_b, (sets, 1, c.prefixes))
              + rng.normal(0, sd_e, (sets, c.prompts, c.prefixes)))
    return (latent > norm.ppf(1 - c.rate)).astype(float)


def rates(ns) -> None:
    heading(f"3. One group's rate ({ns.datasets} data sets per row)",
            ["prompts x prefixes", "rate", "prefix share", "mean hits", "coverage", "oracle's coverage", "below",
             "above", "width / oracle", "floor at 0 hits / oracle", "old (Clopper-Pearson at min) coverage",
             "old width / oracle"], 1)
    rng = np.random.default_rng(ns.seed + 2)
    for c in RATE_CELLS:
        G = draw_rate(c, ns.datasets, rng)
        true_var = draw_rate(c, 20000, rng).mean((-2, -1)).var()
        o_low, o_high = wilson(G.mean((-2, -1)), c.rate * (1 - c.rate) / true_var, 1.96)
        m = min(c.prompts, c.prefixes)
        rate, low, high = crossed_rate_interval(G)
        x = rate * m
        old_low = np.where(x > 0, beta.ppf(0.025, np.maximum(x, 1e-12), m - x + 1), 0.0)
        old_high = np.where(x < m, beta.ppf(0.975, x + 1, np.maximum(m - x, 1e-12)), 1.0)
        oracle = np.mean(o_high - o_low)
        # Any interval valid for every crossed model must reach 1 - 0.05**(1/m) with no hit: with all the
        # variance in the m units of the scarcer factor, a rate below that gives no hit more than 5% of
        # the time. The floor: that at 0 hits and the oracle's width elsewhere (what validity costs here).
        floor = np.mean(np.where(G.sum((-2, -1)) == 0, 1 - 0.05 ** (1 / m), o_high - o_low)) / oracle
        print(f"| {c.name} | {c.rate} | {c.prefix_share} | {G.sum((-2, -1)).mean():.1f} | "
              f"{np.mean((low <= c.rate) & (c.rate <= high)):.3f} | "
              f"{np.mean((o_low <= c.rate) & (c.rate <= o_high)):.3f} | {np.mean(high < c.rate):.3f} | "
              f"{np.mean(low > c.rate):.3f} | {np.mean(high - low) / oracle:.2f} | {floor:.2f} | "
              f"{np.mean((old_low <= c.rate) & (c.rate <= old_high)):.3f} | {np.mean(old_high - old_low) / oracle:.2f} |",
              flush=True)


def claims_cells(ns) -> None:
    from harness.analysis.claims import min_contrast_interval

    heading(f"4. Claims 1 and 2: min of two contrasts ({ns.datasets} data sets per row)",
            ["prompts x prefixes", "regime", "truth", "coverage", "below", "above", "half-width / oracle"], 2)
    rng = np.random.default_rng(ns.seed + 3)
    # claim 2's shape: four lengths; the statistic is step 2 minus the larger of steps 1 and 3
    weights = np.array([[1.0, -2.0, 1.0, 0.0], [0.0, -1.0, 2.0, -1.0]])   # (step 2 - step 1), (step 2 - step 3)
    for P, n in ((3, 18), (8, 12), (24, 10)):
        for name, sd_b, sd_e in (("prefixes dominate", 1.0, 0.22), ("residual dominates", 0.3, 1.0)):
            for means in ([0.0, 1.0, 2.0, 3.0], [0.0, 0.5, 1.5, 1.8]):
                m = np.array(means)
                a = rng.normal(0, 1, (ns.datasets, P, 1, 1)) + rng.normal(0, 0.3, (ns.datasets, P, 1, 4))
                b = rng.normal(0, sd_b, (ns.datasets, 1, n, 1)) + rng.normal(0, sd_b * 0.3, (ns.datasets, 1, n, 4))
                Y = m + a + b + rng.normal(0, sd_e, (ns.datasets, P, n, 4))
                true = float(np.min(weights @ m))
                low, high, _ = min_contrast_interval(Y, weights)
                sd = float(np.std(np.min(np.einsum("spxk,ck->spxc", Y, weights).mean((1, 2)), -1)))
                half = (high - low) / 2 / (1.96 * sd)
                print(f"| {P} x {n} | {name} | {true:.2f} | {np.mean((low <= true) & (true <= high)):.3f} | "
                      f"{np.mean(high < true):.3f} | {np.mean(low > true):.3f} | {np.mean(half):.2f} |", flush=True)


def claims_power(ns) -> None:
    """Claims 1 and 2's printed power (:func:`harness.analysis.claim_power.min_contrast_power`) and the
    range their data allow (:func:`harness.analysis.claim_power.min_contrast_power_range`) against the
    real chance that both contrasts' intervals clear zero, when each contrast's truth is one of its
    prefix-level SDs."""
    from harness.analysis.claim_power import contrast_components, min_contrast_power, min_contrast_power_range
    from harness.analysis.claims import min_contrast_interval

    heading(f"4b. Claims 1 and 2: power printed against real ({ns.datasets} data sets per row)",
            ["prompts x prefixes", "regime", "no power printed", "power printed (median)", "power real",
             "printed - real", "range holds real", "range below real", "range above real", "range (median ends)"], 2)
    rng = np.random.default_rng(ns.seed + 5)
    weights = np.array([[1.0, -2.0, 1.0, 0.0], [0.0, -1.0, 2.0, -1.0]])
    for P, n in ((3, 18), (6, 24), (8, 12), (12, 24), (16, 36), (24, 48)):
        for name, sd_b, sd_a, sd_e in (("prefixes dominate", 1.0, 0.3, 0.22), ("residual dominates", 0.5, 0.3, 1.0),
                                       ("prompts interact", 0.6, 0.8, 0.5)):
            # per-length parts (the common ones cancel in a contrast): the contrasts' own prefix SDs
            delta = 0.3 * sd_b * np.linalg.norm(weights, axis=1)
            m = np.array([0.0, 0.0, delta[0], 2 * delta[0] - delta[1]])  # weights @ m == delta
            a = rng.normal(0, 1, (ns.datasets, P, 1, 1)) + rng.normal(0, sd_a, (ns.datasets, P, 1, 4))
            b = rng.normal(0, sd_b, (ns.datasets, 1, n, 1)) + rng.normal(0, 0.3 * sd_b, (ns.datasets, 1, n, 4))
            Y = m + a + b + rng.normal(0, sd_e, (ns.datasets, P, n, 4))
            low, _, _ = min_contrast_interval(Y, weights)
            components = [contrast_components(y, weights) for y in Y]
            printed = np.array([min_contrast_power(c, P, n) for c in components])
            ranges = np.array([min_contrast_power_range(y, weights, components=c) for y, c in zip(Y, components)])
            real = float(np.mean(low > 0))
            # no power where a contrast's prefix variance comes out 0 (no effect size to plan on): the
            # median is of the rest, which drew the larger prefix variances; the range is always stated
            below, above = np.mean(ranges[:, 1] < real), np.mean(ranges[:, 0] > real)
            print(f"| {P} x {n} | {name} | {np.mean(np.isnan(printed)):.3f} | {np.nanmedian(printed):.3f} | "
                  f"{real:.3f} | {np.nanmedian(printed) - real:+.3f} | {1 - below - above:.3f} | {below:.3f} | "
                  f"{above:.3f} | {np.median(ranges[:, 0]):.3f}-{np.median(ranges[:, 1]):.3f} |", flush=True)


def generator_b(ns) -> None:
    from harness.analysis.crossed import compare_groups

    heading(f"5. Second generator, through compare_groups ({ns.datasets_b} data sets per row)",
            ["model", "truth", "coverage", "below", "above", "no interval", "FPR lead", "power printed (median)",
             "power real"], 1)
    rng = np.random.default_rng(ns.seed + 4)
    for m in second.MODELS:
        for different in (False, True):
            true = second.truth(m, different)
            rows = [compare_groups(second.conditions(m, different, rng), "value", by=("model", "prefix_len"),
                                   n_resamples=50, n_permutations=50, seed=i).iloc[0] for i in range(ns.datasets_b)]
            low = np.array([r.ci_low for r in rows])
            high = np.array([r.ci_high for r in rows])
            ok = np.isfinite(low)
            p = np.array([r.p_crossed for r in rows])
            cells = [m.name, f"{true:.3g}", f"{np.mean(ok & (low <= true) & (true <= high)):.3f}",
                     f"{np.mean(ok & (high < true)):.3f}", f"{np.mean(ok & (low > true)):.3f}", f"{np.mean(~ok):.3f}"]
            cells += [f"{np.mean(p < 0.05):.3f}" if not different else ""]
            cells += ([f"{np.nanmedian([r.power for r in rows]):.3f}", f"{np.mean(p < 0.05):.3f}"]
                      if different and m.rate_low is None else ["", ""])
            print("| " + " | ".join(cells) + " |", flush=True)


def verdicts(ns) -> None:
    """Table 6: how often a verdict says "no effect as large as Δ" when the truth is exactly Δ (its
    error; target at most 0.03), and the power at Δ printed beside a verdict against the real chance
    the interval clears zero. Δ is half of one true prefix-level SD here (a scale-free choice: the
    rule is equivariant to the units). C - B two-sided (the report's row: the interval within ±Δ) and
    one-sided (claim 3: its upper end below Δ); claims 1 and 2 (the min of two contrasts, both at Δ:
    the least favourable truth for the rule)."""
    from harness.analysis.claim_power import contrast_components, min_contrast_power
    from harness.analysis.claims import min_contrast_interval
    from harness.analysis.verdicts import NO_EFFECT, decide

    heading(f"6. Verdicts at Δ: 'no effect as large as Δ' when the truth is Δ ({ns.datasets} data sets per row)",
            ["test", "design", "regime", "Δ", "no effect, two-sided", "no effect, one-sided",
             "power at Δ printed (median)", "power at Δ real"], 3)
    rng = np.random.default_rng(ns.seed + 6)
    for d in DESIGNS:
        for r in (r for r in REGIMES if r.rate_b is None):
            delta = 0.5 * prefix_sd(d, r)
            Y, hi, pairs, _ = draw(d, r, False, ns.datasets, rng)
            Y = Y + delta * hi  # C moved by exactly Δ
            est = difference(Y, hi, pairs)
            low, high = est.interval()
            two = np.mean([decide(lo, h, delta, two_sided=True) == NO_EFFECT for lo, h in zip(low, high)])
            one = np.mean([decide(lo, h, delta) == NO_EFFECT for lo, h in zip(low, high)])
            comps = {**components_of(Y, hi, pairs), **counts(d)}
            printed = float(np.nanmedian(design_power(comps, d.prompts, d.prefixes, delta)))
            print(f"| C - B | {d.name} | {r.name} | {delta:.3g} | {two:.3f} | {one:.3f} | {printed:.3f} | "
                  f"{np.mean(np.isfinite(low) & (low > 0)):.3f} |", flush=True)
    weights = np.array([[1.0, -2.0, 1.0, 0.0], [0.0, -1.0, 2.0, -1.0]])
    for P, n in ((3, 18), (8, 12), (10, 35), (24, 10)):
        for name, sd_b, sd_e in (("prefixes dominate", 1.0, 0.22), ("residual dominates", 0.3, 1.0)):
            delta = 0.5 * sd_b
            m = np.array([0.0, 0.0, delta, delta])  # both contrasts exactly Δ: (m2 - m1) - (m1 - m0), (m2 - m1) - (m3 - m2)
            a = rng.normal(0, 1, (ns.datasets, P, 1, 1)) + rng.normal(0, 0.3, (ns.datasets, P, 1, 4))
            b = rng.normal(0, sd_b, (ns.datasets, 1, n, 1)) + rng.normal(0, sd_b * 0.3, (ns.datasets, 1, n, 4))
            Y = m + a + b + rng.normal(0, sd_e, (ns.datasets, P, n, 4))
            assert np.allclose(weights @ m, delta)
            low, high, _ = min_contrast_interval(Y, weights)
            one = np.mean([decide(lo, h, delta) == NO_EFFECT for lo, h in zip(low, high)])
            printed = np.nanmedian([min_contrast_power(contrast_components(y, weights), P, n, effect=delta)
                                    for y in Y[:min(len(Y), 200)]])
            print(f"| claims 1-2 (min of two contrasts) | {P} x {n} | {name} | {delta:.3g} | | {one:.3f} | "
                  f"{printed:.3f} | {np.mean(low > 0):.3f} |", flush=True)


PARTS = {"differences": differences, "lead-power": lead_power, "rate-power": rate_lead_power, "sparse-rates": sparse_rates,
         "planning": planning, "promise": promise, "claims-promise": claims_promise,
         "decided-promise": decided_promise, "rate-promise": rate_promise, "rates": rates,
         "claims": claims_cells, "claims-power": claims_power, "second": generator_b, "verdicts": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--datasets-b", type=int, default=1000, help="data sets per row of the second generator")
    parser.add_argument("--permutations", type=int, default=1000, help="prefix relabelings per permutation test")
    parser.add_argument("--datasets-power", type=int, default=200,
                        help="data sets per row of table 1d (each simulates 400 + 64 x 200 tables)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=("all", *PARTS), default="all")
    ns = parser.parse_args()
    start = time.process_time()
    for name, part in PARTS.items():
        if ns.part in ("all", name):
            part(ns)
    print(f"\nCPU time: {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
