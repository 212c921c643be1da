"""The report's lead C-minus-B interval and test for one prompts x prefixes table, with the power its
design had: what :func:`harness.analysis.crossed.compare_groups` puts in its general-claim columns.

* A measure: the t interval of :func:`harness.analysis.crossed_variance.difference` (bounded
  variance components, Satterthwaite degrees of freedom), and its t test.
* A rate: MOVER from the two groups' crossed Wilson intervals
  (:func:`harness.analysis.rate_intervals.rate_difference`), and the p-value that inverts it.
* No interval, and a note saying why in words, where the design cannot support one: fewer than 3
  prompts or 3 prefixes in a group, or nothing varies in a measure (every cell equal). A table with
  missing cells is cut to its larger complete crossing first (the note says how much was kept).
* ``power``: the power of that test at this design against one prefix-level SD (``prefix_sd``),
  from the components estimated here; ``power_low`` and ``power_high`` the range it takes with those
  components anywhere in their own 95% intervals, stated also where ``power`` cannot be. A measure's
  by the noncentral t (:func:`harness.analysis.power.design_power`,
  :func:`~harness.analysis.power.design_power_range`); a rate's by simulating its own MOVER test on
  tables from the latent model the table fits (:func:`harness.analysis.rate_power.rate_power`,
  :func:`~harness.analysis.rate_power.rate_power_range`): the t formula described a test the report
  does not run on rates, and overstated its power by up to 0.20 (calibration table 1d). A rate's
  power is NaN where its prefix-level SD is estimated at 0 (prefixes' rates vary no more than their
  cells would by chance; no hit at all, say), and its range where no corner's can be above 0:
  against an effect of 0 a "power" is the test's false-positive rate, not the chance of finding
  anything.
"""

from __future__ import annotations

import numpy as np

from harness.analysis.crossed_variance import complete_crossing, difference, supported
from harness.analysis.power import components_of, design_power, design_power_range, prefix_level_sd
from harness.analysis.rate_intervals import rate_difference, rate_difference_p
from harness.analysis.rate_power import rate_power, rate_power_range

CROSSED_T = "crossed t"
MOVER = "MOVER, crossed Wilson, clustering shared"  # a sparse group takes the other's (rate_intervals)
NONE = "none"


def remap_pairs(pairs, cols: np.ndarray):
    """``pairs`` (high index, low index) renumbered to the kept prefix columns ``cols`` (pairs with a
    member dropped are dropped; None when none is left)."""
    if pairs is None:
        return None
    where = {int(c): i for i, c in enumerate(cols)}
    hi, lo = pairs
    keep = [(where[int(h)], where[int(l)]) for h, l in zip(hi, lo) if int(h) in where and int(l) in where]
    return (np.array([h for h, _ in keep]), np.array([l for _, l in keep])) if keep else None


def lead(Y: np.ndarray, is_high: np.ndarray, pairs=None, rate: bool = False, confidence: float = 0.95,
         alternative: str = "two-sided", alpha: float = 0.05, power: bool = True, effect: float | None = None) -> dict:
    """The lead interval and test of high-minus-low on ``Y`` [prompts, prefixes] (module docstring).

    Keys: ``ci_low``, ``ci_high``, ``ci_method`` ("crossed t", "MOVER, crossed Wilson, clustering shared" or "none"),
    ``ci_note`` (why there is no interval, or which complete part it was computed on; "" otherwise),
    ``dof``, ``se`` (square root of the estimated variance), ``p_crossed`` (the test the interval
    inverts, ``alternative`` as given), ``prefix_sd``, ``power`` (at ``alpha``, two-sided) and its
    range ``power_low`` to ``power_high`` (NaN with ``power=False``: a caller that prints no power need
    not pay for a rate's simulated one). ``effect``: the difference the power is stated against, in
    the measure's units (a smallest effect of interest, Δ); by default one prefix-level SD. Where a
    table with missing cells was cut to its complete part, ``estimate``: the difference on that part,
    the one the interval is centred on (on a complete table it is the caller's own)."""
    if rate and effect is not None and not effect < 1:  # a power against it would be 0, or 1, and mean nothing
        raise ValueError(f"effect must be below 1 for a rate (a difference of two rates lies within -1 to 1), got "
                         f"{effect!r}")
    Y = np.asarray(Y, dtype=float)
    is_high = np.asarray(is_high, dtype=bool)
    rows, cols, note = complete_crossing(Y, pairs)
    Yc, hi, pc = Y[np.ix_(rows, cols)], is_high[cols], remap_pairs(pairs, cols)
    out = {"ci_low": np.nan, "ci_high": np.nan, "ci_method": NONE, "ci_note": note, "dof": np.nan, "se": np.nan,
           "p_crossed": np.nan, "prefix_sd": np.nan, "power": np.nan, "power_low": np.nan, "power_high": np.nan}
    reason = supported(Yc, hi)
    if reason is not None:
        return {**out, "ci_note": reason if not note else f"{reason} ({note})"}
    est = difference(Yc, hi, pc)
    if note:  # the interval is of the complete part: so is the estimate it is printed beside
        out["estimate"] = float(est.statistic)
    comps = components_of(Yc, hi, pc)
    comps.update(n_prompts=Yc.shape[0], n_prefixes_high=int(hi.sum()), n_prefixes_low=int((~hi).sum()))
    sd = float(prefix_level_sd(comps))
    out.update(se=float(np.sqrt(est.variance)), prefix_sd=sd)
    if rate:
        point, low, high = rate_difference(Yc, hi, pc, confidence)
        if note:
            out["estimate"] = float(point)
        if power:
            power_low, power_high = rate_power_range(Yc, hi, pc, alpha=alpha, effect=effect)
            # against its own prefix-level SD (sd) unless an effect is stated: rate_power says where
            # that leaves no power to state
            out.update(power_low=power_low, power_high=power_high,
                       power=rate_power(Yc, hi, pc, effect=effect, alpha=alpha))
        return {**out, "ci_low": float(low), "ci_high": float(high), "ci_method": MOVER,
                "p_crossed": rate_difference_p(Yc, hi, pc, alternative)}
    if power:
        n = int(min(hi.sum(), (~hi).sum()) if pc is None else len(pc[0]))
        power_low, power_high = design_power_range(Yc, hi, pc, alpha=alpha, effect=effect)
        size = sd if effect is None else effect
        out.update(power_low=power_low, power_high=power_high,
                   power=design_power(comps, Yc.shape[0], n, size, alpha) if np.isfinite(size) else np.nan)
    if not est.variance > 0:
        return {**out, "ci_note": "no variation" + (f" ({note})" if note else "")}
    low, high = est.interval(confidence)
    return {**out, "ci_low": float(low), "ci_high": float(high), "ci_method": CROSSED_T, "dof": float(est.dof),
            "p_crossed": float(est.p_value(alternative))}
