"""Planning a study from a pilot: each claim test's power at other designs, and the cheapest design
that reaches a target power (DataFrames and callables in, DataFrames out; no files, no models).

A *design* is prompts x prefixes per group, at the pilot's prefix lengths (claim 2 needs its four
lengths, and claims 1 and 3 average over them, so the components below are those of the pilot's
lengths). Each test's power at a design is the function the claims page prints it with at the
pilot's own design (:mod:`harness.analysis.claims`): claims 1 and 2 by
:func:`~harness.analysis.claim_power.min_contrast_power` on the contrasts' crossed components, claim 3 by
:func:`~harness.analysis.power.design_power` on the C/B components, each against its measure's
smallest effect of interest Δ (:mod:`harness.analysis.verdicts`; or ``effect_sds`` of the test's own
prefix-level SD) and median-corrected for the pilot's few prompts. A plan chooses by each test's
power at an *assurance* (the pilot's mean squares at an upper bound:
:func:`harness.analysis.power.median_unbiased`), or by the chance that every test ends decided at
its Δ whatever the truth (:mod:`harness.analysis.decided`). How well the
printed power matches the real one, pilot by pilot, is in ``benchmarks/crossed_calibration.py``
(parts ``power`` and ``claims-power``).

:func:`claim_tests` turns a pilot's tables into :class:`PlannedTest` s (:func:`lead_tests`: the
report's C - B on measures a user names instead); :func:`power_grid` scores
every design of a search range at a cost the caller supplies (the orchestrator measures seconds
per condition on the pilot: :mod:`harness.runs.plan`); :func:`cheapest` picks from the grid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from harness.analysis.claim_power import contrast_components, min_contrast_power, min_contrast_power_range
from harness.analysis.claims import (
    CONDITION_MEASURES,
    JUMP_WEIGHTS,
    claim3_cells,
    layer_cubes,
    length_cubes,
    thirds_weights,
)
from harness.analysis.crossed import cell_layouts
from harness.analysis.crossed_variance import complete_crossing
from harness.analysis.decided import undecided
from harness.analysis.descriptive import CONTRAST_BY, present_columns, with_settings
from harness.analysis.design import constant, design_power, variance_components
from harness.analysis.lead import remap_pairs
from harness.analysis.power import design_power_range, fewest_reaching, group_planned_variance, planned_variance
from harness.analysis.verdicts import METRICS_BY_NAME, deltas_for
from harness.numbers import num

ATTENTION, OUTPUT = "attention", "output"
# what a plan targets: each test's power at Δ (the smallest over the tests reaches the target), or
# the chance every test ends decided (at least 1 - the sum of each one's chance undecided)
PLAN_FOR = {"power": "min_power", "decided": "decided"}
_REACHES = {"power": "reaches power {target:g} on", "decided": "decides with a chance of {target:g}"}
# the measures the claims page tests, and whether each is an attention measure or an output one
CLAIM_MEASURES = dict(zip(CONDITION_MEASURES, (ATTENTION, OUTPUT)))
SCOPES = {"attention": (ATTENTION,), "all": (ATTENTION, OUTPUT)}
_TESTS = {"attention": "attention test", "all": "test"}


@dataclass(frozen=True)
class PlannedTest:
    """One test of the claims page whose power a design is chosen for."""

    claim: int | None                   # the claims page's claim; None: the report's C - B on a measure
    measure: str
    kind: str                           # ATTENTION or OUTPUT
    cell: dict                          # model and placement
    pilot: tuple[int, int]              # prompts x prefixes per group it was estimated on
    power: Callable[[int, int], float]  # (prompts, prefixes per group) -> power
    # (prompts, prefixes per group) -> the power's range with the components anywhere in their 95%
    # intervals (what the claims page prints beside it at the pilot); None: not stated (in prefix SDs)
    power_range: Callable[[int, int], tuple[float, float]] | None = None
    # (prompts, prefixes per group) -> the power with the pilot's mean squares at their upper bound of
    # a plan's assurance (harness.analysis.power.ASSURANCE): what a design is chosen by
    assured: Callable[[int, int], float] | None = None
    # (prompts, prefixes per group) -> the chance the test ends decided at its Δ whatever the truth
    # (harness.analysis.decided), at the same assurance; None: not stated (no Δ, or no components)
    decided: Callable[[int, int], float] | None = None
    # (prompts, prefixes per group) -> that chance's range with the pilot's components anywhere in their
    # 95% intervals (as power_range); None: not stated
    decided_range: Callable[[int, int], tuple[float, float]] | None = None

    def planned(self, n_prompts: int, n_prefixes: int, plan_for: str = "power") -> float:
        """What a design is chosen by: the power (:attr:`assured` where the test has one, else
        :attr:`power`), or with ``plan_for="decided"`` the chance it ends decided (NaN without one)."""
        if plan_for == "decided":
            return self.decided(n_prompts, n_prefixes) if self.decided is not None else np.nan
        return (self.assured or self.power)(n_prompts, n_prefixes)

    @property
    def label(self) -> str:
        return (f"claim {self.claim}" if self.claim is not None else "C - B") + f", {self.measure}, " + ", ".join(
            str(v) for v in self.cell.values())


def claim_tests(conditions: pd.DataFrame, attention: pd.DataFrame | None, effect_sds: float | None = None,
                by: Sequence[str] = ("model", "placement"), deltas: dict[str, float] | None = None,
                assurance: float | None = None) -> list[PlannedTest]:
    """The claims page's tests on these tables (claims 1 and 2 on group C, claim 3 on C minus B),
    each with its power as a function of the design against its measure's smallest effect of
    interest Δ (the registry's, with ``deltas`` on top: the power the claims page prints) or, with
    ``effect_sds``, against that many of the test's own prefix-level SDs; with ``assurance``, each
    test's :attr:`PlannedTest.assured` power too (the pilot's mean squares at that upper bound)."""
    delta = deltas_for(deltas)
    tests = []
    if attention is not None and not attention.empty:
        for cell, Y, layers in layer_cubes(attention, "kl", "C", by):
            weights = thirds_weights(len(layers))
            comps = contrast_components(Y, weights)
            tests.append(PlannedTest(1, "attention kl", ATTENTION, cell, Y.shape[:2],
                                     _min_contrast(comps, effect_sds, delta.get("kl")),
                                     _contrast_range(Y, weights, comps, effect_sds, delta.get("kl")),
                                     _min_contrast(comps, effect_sds, delta.get("kl"), assurance),
                                     _contrasts_decided(comps, effect_sds, delta.get("kl"), assurance),
                                     _contrast_range(Y, weights, comps, effect_sds, delta.get("kl"), decided=True)))
    present = [m for m in CLAIM_MEASURES if m in conditions and conditions[m].notna().any()]
    for value in present:
        for cell, Y in length_cubes(conditions, value, "C", by):
            comps = contrast_components(Y, JUMP_WEIGHTS)
            tests.append(PlannedTest(2, value, CLAIM_MEASURES[value], cell, Y.shape[:2],
                                     _min_contrast(comps, effect_sds, delta.get(value)),
                                     _contrast_range(Y, JUMP_WEIGHTS, comps, effect_sds, delta.get(value)),
                                     _min_contrast(comps, effect_sds, delta.get(value), assurance),
                                     _contrasts_decided(comps, effect_sds, delta.get(value), assurance),
                                     _contrast_range(Y, JUMP_WEIGHTS, comps, effect_sds, delta.get(value),
                                                     decided=True)))
    cells = [sub for _, sub, _ in claim3_cells(conditions, by) if not sub.empty]
    claim3 = pd.concat(cells) if cells else None  # the rows the claims page's claim 3 reads
    for value in present if claim3 is not None else ():
        tests += _difference_tests(claim3, value, by, 3, CLAIM_MEASURES[value], effect_sds, delta.get(value, np.nan),
                                   assurance)
    return tests


def lead_tests(conditions: pd.DataFrame, measures: Sequence[str], effect_sds: float | None = None,
               deltas: dict[str, float] | None = None, by: Sequence[str] = CONTRAST_BY,
               assurance: float | None = None) -> list[PlannedTest]:
    """The report's C - B test on each of ``measures`` (conditions columns), one per row of its C - B
    table (a ``by`` cell: model, placement, isolation setting, prefix length), each with its power as
    a function of the design against the measure's Δ (the registry's, with ``deltas`` on top) or, with
    ``effect_sds``, that many of its own prefix-level SDs: what ``harness plan --measure`` plans for.
    A test's ``claim`` is None; ``assurance`` as :func:`claim_tests`."""
    delta = deltas_for(deltas)
    by = present_columns(with_settings(conditions), by)
    tests = []
    for value in measures:
        kind = ATTENTION if METRICS_BY_NAME.get(value) is not None and METRICS_BY_NAME[value].section == "attention" \
            else OUTPUT
        tests += _difference_tests(conditions, value, by, None, kind, effect_sds, delta.get(value, np.nan), assurance)
    return tests


def _difference_tests(rows: pd.DataFrame, value: str, by: Sequence[str], claim: int | None, kind: str,
                      effect_sds: float | None, delta: float, assurance: float | None) -> list[PlannedTest]:
    """The lead C - B test of ``value`` per ``by`` cell of ``rows``, planned at ``delta`` (or
    ``effect_sds`` prefix-level SDs): claim 3's tests, and ``--measure`` 's."""
    tables = lead_tables(rows, value, by)
    tests = []
    for _, row in variance_components(rows, value, by=list(by)).iterrows():
        sd = float(row.prefix_sd)
        if not np.isfinite(sd) or (effect_sds is not None and sd <= 0) or constant(row):
            # components not estimable (too few prompts or prefixes), or the measure never varied (its
            # variance unknown, not 0); in SDs, no spread to plan against
            continue
        comps = row.to_dict()
        pilot = (int(row.n_prompts), int(min(row.n_prefixes_high, row.n_prefixes_low)))
        effect = delta if effect_sds is None else effect_sds * sd
        table = tables.get(tuple(row[k] for k in by)) if effect_sds is None else None
        tests.append(PlannedTest(claim, value, kind, {k: row[k] for k in by}, pilot,
                                 lambda p, n, comps=comps, e=effect: float(design_power(comps, p, n, e)),
                                 None if table is None else
                                 lambda p, n, t=table, e=effect: tuple(map(float, design_power_range(
                                     *t, effect=e, design=(p, n)))),
                                 None if assurance is None else
                                 lambda p, n, comps=comps, e=effect: float(design_power(comps, p, n, e,
                                                                                        assurance=assurance)),
                                 lambda p, n, comps=comps, e=effect: _lead_decided(comps, p, n, e, claim is None,
                                                                                   assurance or 0.5),
                                 None if table is None else
                                 lambda p, n, t=table, e=effect: tuple(map(float, design_power_range(
                                     *t, effect=e, design=(p, n), statistic=lambda c, P, N, size: _lead_decided(
                                         c, P, N, size, claim is None))))))
    return tests


def _lead_decided(components: dict, p: int, n: int, effect: float, two_sided: bool, assurance: float = 0.5) -> float:
    """The lead test's chance of ending decided at ``effect`` (two-sided: the report's C - B rows;
    one-sided: claim 3) at ``p`` x ``n``."""
    return 1.0 - undecided(*map(float, planned_variance(components, p, n, assurance)), effect, two_sided=two_sided)


def lead_tables(df: pd.DataFrame, value: str, by: Sequence[str]) -> dict[tuple, tuple]:
    """Per ``by`` cell, the complete C/B table ``(Y, is_high, pairs)`` claim 3's lead test and its
    power range read (as :func:`harness.analysis.design.variance_components` takes it)."""
    out = {}
    for key, lay in cell_layouts(df, value, "C", "B", list(by)):
        prompts, cols, _ = complete_crossing(lay.Y, lay.pairs)
        out[tuple(key.get(k) for k in by)] = (lay.Y[np.ix_(prompts, cols)], lay.is_high[cols],
                                          remap_pairs(lay.pairs, cols))
    return out


def _contrast_range(Y: np.ndarray, weights: np.ndarray, components: list[dict], effect_sds: float | None,
                    delta: float | None, decided: bool = False) -> Callable[[int, int], tuple[float, float]] | None:
    """The range of a min-of-two-contrasts claim's power (or, ``decided``, its chance of a verdict) at a
    design, over its components' 95% intervals; None in prefix-level SDs or without a Δ."""
    if effect_sds is not None or delta is None:
        return None
    statistic = (lambda comps, P, n, effect: _both_decided(comps, P, n, None, effect)) if decided else None
    return lambda p, n: min_contrast_power_range(Y, weights, components=components, effect=delta, design=(p, n),
                                                 statistic=statistic)


def _contrasts_decided(components: list[dict], effect_sds: float | None, delta: float | None,
                       assurance: float | None) -> Callable[[int, int], float]:
    """A min-of-two-contrasts claim's chance of ending decided at a design: at least 1 minus the sum of
    each contrast's chance undecided (it is undecided only where one contrast is), each with its low
    end at the 95% interval's and its high end at the 97.5%'s, as the claims page decides."""
    return lambda p, n: _both_decided(components, p, n, effect_sds, delta, assurance or 0.5, pilot=True)


def _both_decided(components: list[dict], p: int, n: int, effect_sds: float | None, delta: float | None,
                  assurance: float = 0.5, pilot: bool = False) -> float:
    """:func:`_contrasts_decided` at one design (``pilot``: the prompt and prefix mean squares taken for
    the prompts and prefixes the components came from, at ``assurance``; else as given: a range's corner)."""
    out = 1.0
    for c in components:
        effect = delta if effect_sds is None else effect_sds * np.sqrt(c["prefix"])
        variance, dof = map(float, group_planned_variance(c, p, n, (c["n_prompts"], c["n_prefixes"]) if pilot else None,
                                                          assurance))
        nu = dof if np.isfinite(dof) and dof > 0 else np.inf
        out -= undecided(variance, dof, np.nan if effect is None else effect, stats.t.ppf(0.975, nu),
                         stats.t.ppf(0.9875, nu))
    return max(out, 0.0)


def _min_contrast(components: list[dict], effect_sds: float | None, delta: float | None,
                  assurance: float | None = 0.5) -> Callable[[int, int], float] | None:
    if assurance is None:
        return None
    if effect_sds is None:
        return lambda p, n: min_contrast_power(components, p, n, effect=np.nan if delta is None else delta,
                                               assurance=assurance)
    return lambda p, n: min_contrast_power(components, p, n, effect_sds, assurance=assurance)


def power_grid(tests: Sequence[PlannedTest], prompts: Sequence[int], prefixes: Sequence[int],
               cost: Callable[[int, int], float], plan_for: str = "power") -> pd.DataFrame:
    """One row per design ``(n_prompts, n_prefixes)`` of the two ranges: ``seconds`` (``cost``), what
    each test is planned by (:meth:`PlannedTest.planned` for ``plan_for``; a column per test, named
    by :attr:`PlannedTest.label`), and per scope what every test together reaches: the smallest
    power (``min_power_attention``, ``min_power_all``), or the chance every test ends decided, at
    least one minus the sum of their chances undecided (``decided_attention``, ``decided_all``)."""
    rows = []
    for p in prompts:
        for n in prefixes:
            row = {"n_prompts": int(p), "n_prefixes": int(n), "seconds": float(cost(p, n))}
            row.update({t.label: t.planned(p, n, plan_for) for t in tests})
            rows.append(row)
    grid = pd.DataFrame(rows)
    for scope, kinds in SCOPES.items():
        cols = [t.label for t in tests if t.kind in kinds]
        # a test without a power (NaN) cannot be planned for: it does not hold a design back
        if not cols:
            grid[f"{PLAN_FOR[plan_for]}_{scope}"] = np.nan
        elif plan_for == "decided":
            grid[f"decided_{scope}"] = np.maximum(1.0 - (1.0 - grid[cols]).sum(axis=1, skipna=True), 0.0)
        else:
            grid[f"min_power_{scope}"] = grid[cols].min(axis=1, skipna=True)
    return grid


def _below(value: float, target: float) -> str:
    """A power short of ``target`` as the page's tables print powers (two figures), rounded down only
    where rounding would print it as reaching the target (0.9996 as "1.0" against 0.9995)."""
    shown = num(value, 2)
    return shown if float(shown) < target else f"{np.floor(value * 1000) / 1000:g}"


def cheapest(grid: pd.DataFrame, scope: str, target: float, budget_seconds: float | None = None,
             plan_for: str = "power") -> tuple[pd.Series | None, str]:
    """The least costly design of ``grid`` whose every ``scope`` test reaches ``target`` (ties: fewer
    prompts), within ``budget_seconds`` when given, and why there is none otherwise."""
    column = f"{PLAN_FOR[plan_for]}_{scope}"
    reaches = _REACHES[plan_for].format(target=target)
    reach = grid[grid[column] >= target]
    if reach.empty:
        best = grid.loc[grid[column].idxmax()] if grid[column].notna().any() and grid[column].max() > 0 else None
        why = (f"no design searched {reaches} every {_TESTS[scope]}" +
               (f"; the best reaches {_below(best[column], target)} at {int(best.n_prompts)} prompts x "
                f"{int(best.n_prefixes)} prefixes per group" if best is not None else
                "; none gets above 0" if grid[column].notna().any() else ""))
        return None, why
    # at no cost (designs the pilot ran in full) the largest, the pilot's own: no reason to drop data it has
    size = np.where(reach.seconds <= 0, -(reach.n_prompts * reach.n_prefixes), 0)
    reach = reach.assign(_size=size).sort_values(["seconds", "_size", "n_prompts", "n_prefixes"]).drop(columns="_size")
    first = reach.iloc[0]
    if budget_seconds is not None and first.seconds > budget_seconds:
        return None, (f"none fits the budget of {budget_seconds / 60:g} min: the cheapest design that {reaches} "
                      f"every {_TESTS[scope]} ({int(first.n_prompts)} prompts x {int(first.n_prefixes)} "
                      f"prefixes per group) costs {num(first.seconds / 60)} min")
    return first, ""


def most_reached(grid: pd.DataFrame, tests: Sequence[PlannedTest], target: float,
                 budget_seconds: float | None = None, attention_first: bool = True) -> pd.Series | None:
    """Where no design reaches every test within the budget: the design within it at which the most
    attention tests reach ``target`` (unless not ``attention_first``: a user's own measures weigh
    alike), then the most tests of any kind, then the highest power summed over the tests that miss
    it (to two places), then the least cost. None when no design fits the budget."""
    fits = grid if budget_seconds is None else grid[grid.seconds <= budget_seconds]
    if fits.empty:
        return None
    cols = {kind: [t.label for t in tests if t.kind == kind] for kind in (ATTENTION, OUTPUT)}
    powers = fits[[t.label for t in tests]].fillna(0.0)
    score = pd.DataFrame({
        "attention": (powers[cols[ATTENTION]] >= target).sum(axis=1) if attention_first else 0,
        "all": (powers >= target).sum(axis=1),
        # to two places: a design that adds 0.0004 to a missed test's power is not worth its minutes
        "short": powers.where(powers < target, 0.0).sum(axis=1).round(2),
        "cost": -fits.seconds})
    order = score.sort_values(["attention", "all", "short", "cost"], ascending=False, kind="stable")
    return fits.loc[order.index[0]]


def prompts_needed(test: PlannedTest, n_prefixes: int, target: float, start: int, limit: int = 1000,
                   plan_for: str = "power") -> int | None:
    """The fewest prompts (from ``start``, at most ``limit``) at which ``test`` reaches ``target``
    with ``n_prefixes`` per group: what a design beyond the prompt set would need (power grows with
    the prompts, so bisect). None where ``limit`` does not reach it or the test has no power."""
    def reaches(p: int) -> bool:
        power = test.planned(p, n_prefixes, plan_for)
        return bool(np.isfinite(power) and power >= target)

    return fewest_reaching(reaches, start, limit)

