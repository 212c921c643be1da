"""``harness plan RUN...``: from finished pilot runs, the design (prompts x prefixes per group) at
which every claim test reaches a target power at least cost, and what extending the pilots to it
costs: a rerun with the design's overrides and ``on_existing=resume`` reuses every pilot result the
design keeps.

Cost is measured, not assumed (:mod:`harness.runs.design_cost`). What a design reuses is exact: the
first prompts (the prompt set's order) and the prefixes the run's seed draws at the design's
``per_group`` that the pilot also ran (``prefixes.per_group`` redraws group C when it grows, so a design that changes it
recomputes most of the pilot's C conditions; the plan counts that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.checks import check_measure
from harness.analysis.claim_cubes import claim3_cells
from harness.analysis.claims import HYPOTHESES, missing_for, without_mention_controls
from harness.analysis.crossed_variance import MIN_PREFIXES, MIN_PROMPTS
from harness.analysis.design import constant, variance_components
from harness.analysis.planning import (
    ATTENTION,
    CLAIM_MEASURES,
    OUTPUT,
    PLAN_FOR,
    cheapest,
    claim_tests,
    lead_tests,
    most_reached,
    power_grid,
    prompts_needed,
)
from harness.analysis.power import ASSURANCE
from harness.analysis.rate_planning import rate_tests
from harness.analysis.undecoded import undecoded
from harness.analysis.verdicts import deltas_for
from harness.errors import HarnessError
from harness.runs.design_cost import RunCost, once_per_design, run_cost
from harness.runs.plan_page import scope_text
from harness.runs.reading import merge_runs, run_tables


def assurance_problem(value: float) -> str | None:
    """Why ``value`` is no plan's assurance (None where it is one): the command line's check and the
    plan's own say the same."""
    if 0.5 <= value < 1:
        return None
    return f"is the chance a plan's promise is kept: give one from 0.5 (the point power) to below 1, e.g. {ASSURANCE:g}"


TESTS_LEVEL = 0.05  # the level the planned tests run at: a target power at or below it is met by testing nothing
# how :func:`harness.analysis.planning.most_reached` orders designs that reach the target on as many tests
TIE_BREAK = "among those, the highest summed chance of the tests it misses (to two places), then the least cost"
MAX_TARGET = 0.999  # above, the page's target would print as 1 (a power no design reaches)


@dataclass
class Plan:
    """What ``harness plan`` found: the power grid, the chosen design and its overrides."""

    grid: pd.DataFrame
    tests: pd.DataFrame           # one row per test: power at the pilot and at the chosen design
    designs: pd.DataFrame         # per scope: the cheapest design reaching the target, or why none
    costs: list[RunCost]
    chosen: pd.Series | None
    why_chosen: str
    overrides: str
    target: float
    effect_sds: float | None      # None: each test planned at its measure's Δ (deltas)
    budget_minutes: float | None
    deltas: dict | None = None
    measures: tuple[str, ...] = ()  # planned for the report's C - B on these; empty: the claims page's tests
    assurance: float = ASSURANCE    # each test planned with the pilot's mean squares at this upper bound
    plan_for: str = "decided"       # the target: every test decided ("decided"), or each one's power ("power")
    decoded: bool = True            # False: B and C decoded no continuation (decode.path=none), no edit distance


def _why_no_prefix_sd(conditions) -> str:
    """Why claim 3 has no prefix-level SD to plan against, from the cells the claims page reads
    (:func:`harness.analysis.claims.claim3_cells`): prefixes that share no length, too few prompts
    or prefixes in the complete crossing to estimate one, or one estimated as 0."""
    reasons = []
    for _, sub, note in claim3_cells(conditions):
        if sub.empty:
            reasons.append(f"claim 3: {note}")
            continue
        for value in [m for m in CLAIM_MEASURES if m in sub and sub[m].notna().any()]:
            row = variance_components(sub, value, by=["model", "placement"]).iloc[0]
            reasons.append(_no_sd(row, f"claim 3's prefix-level SD of {value}", f"claim 3's {value}"))
    return "; ".join(dict.fromkeys(r for r in reasons if r)) or "claim 3 has no measure to plan on"


def _why_no_lead(conditions: pd.DataFrame, measures: Sequence[str], reasons: Sequence[str] = ()) -> str:
    """Why no C - B test of ``measures`` has a power to plan with, per measure and cell, after
    ``reasons`` already found (the rates' that :func:`harness.analysis.rate_planning.rate_tests` gives)."""
    reasons = list(reasons)
    for value in measures:
        if value not in conditions or not conditions[value].notna().any():
            reasons.append(f"{value} was not measured in these runs")
            continue
        try:  # the analyses' own refusal: e.g. a measure empty in every B and C row (A's 0 alone)
            check_measure(conditions, value)
        except ValueError as exc:
            reasons.append(str(exc))
            continue
        reasons += [_no_sd(row, f"{value}'s prefix-level SD", value)
                    for _, row in variance_components(conditions, value).iterrows()]
    return "no C - B test could be planned from these runs: " + "; ".join(dict.fromkeys(r for r in reasons if r))


def _never_varied(conditions: pd.DataFrame, measures: Sequence[str]) -> str:
    """The C - B tests (claim 3's, or ``measures``') left out because their measure took one value in
    every B and C condition of the cell (:func:`harness.analysis.design.constant`), in words; "" if none."""
    if measures:  # a rate's cells without a hit (or a miss) are refused by rate_tests, with their reason
        cells = [(value, conditions) for value in measures
                 if value in conditions and not pd.api.types.is_bool_dtype(conditions[value])]
    else:
        cells = [(value, sub) for _, sub, _ in claim3_cells(conditions) if not sub.empty
                 for value in CLAIM_MEASURES if value in sub and sub[value].notna().any()]
    said = []
    for value, rows in cells:
        by = ["model", "placement"] if not measures else None
        table = variance_components(rows, value, **({"by": by} if by else {}))
        n = sum(constant(row) for _, row in table.iterrows())
        if n:
            said.append(f"{'claim 3, ' if not measures else ''}{value} in {n} of {len(table)} cell(s) (it took one "
                        f"value in every B and C condition there)")
    return "; ".join(said)


def _no_sd(row, sd_of: str, measure: str) -> str | None:
    """Why a C - B cell's variance components (a row of
    :func:`harness.analysis.design.variance_components`) give no prefix-level SD to plan against:
    too few prompts or prefixes in its complete crossing, or one estimated as 0; None where they do."""
    if not np.isfinite(row.prefix_sd):
        fewest = int(min(row.n_prefixes_high, row.n_prefixes_low))
        crossing = str(row.note).partition("(")[2].rstrip(")")  # "complete crossing of 2 of 3 prompts"
        return (f"{sd_of} cannot be estimated from {fewest} prefix(es) per group and {int(row.n_prompts)} prompt(s)"
                + (f" ({crossing})" if crossing else "") + f": a pilot needs a complete crossing of at least "
                f"{MIN_PROMPTS} prompts and {MIN_PREFIXES} prefixes per group")
    if constant(row):
        return (f"{measure} took one value in every B and C condition of the pilot's cell, which says nothing of "
                f"how it varies (a longer continuation, decode.max_new_tokens, or more prompts and prefixes may show it)")
    if row.prefix_sd <= 0:
        return f"{measure} does not vary between prefixes here (a prefix-level SD of 0 gives no effect to plan against)"
    return None


def plan(run_dirs: list[Path], target: float = 0.8, effect_sds: float | None = None,
         budget_minutes: float | None = None, trust_damaged: bool = False, allow_mixed_settings: bool = False,
         deltas: dict[str, float] | None = None, measures: Sequence[str] = (), assurance: float = ASSURANCE,
         plan_for: str = "decided") -> Plan:
    """Plan a design for these pilot runs (each a model and placement; one design for all): each test
    at its measure's smallest effect of interest (the registry's Δ, with ``deltas`` on top), or at
    ``effect_sds`` of its own prefix-level SD when given. The tests are the claims page's, or with
    ``measures`` the report's C - B on each of them (a row per model, placement, isolation setting and
    prefix length). Each test is planned at ``assurance``: with the pilot's mean squares at the upper
    bound they stay under with that probability (0.5: the point power the claims page prints). The
    target (``plan_for``): the chance that every test ends decided at its Δ whatever the truth
    (:mod:`harness.analysis.decided`; the default), or each test's power at Δ ("power")."""
    if plan_for not in PLAN_FOR:
        raise HarnessError(f"--plan-for {plan_for!r}: give one of {', '.join(PLAN_FOR)}")
    if assurance_problem(assurance):
        raise HarnessError(f"--assurance {assurance} {assurance_problem(assurance)}")
    if not TESTS_LEVEL < target <= MAX_TARGET:
        raise HarnessError(f"--target {target} is a chance (of every test decided, or a power): give one above the "
                           f"tests' level of {TESTS_LEVEL:g} and at most {MAX_TARGET:g}, e.g. 0.8")
    per_run, attention = run_tables(run_dirs, trust_damaged, allow_mixed_settings)  # each table read once
    costs = [run_cost(r, conditions) for r, conditions in zip(run_dirs, per_run)]
    conditions, attention = merge_runs(per_run, attention, [str(d) for d in run_dirs], allow_mixed_settings)
    conditions, attention, _ = without_mention_controls(conditions, attention)  # the tests the claims page reads
    if measures:
        rates = [m for m in measures if m in conditions and pd.api.types.is_bool_dtype(conditions[m])]
        if rates and effect_sds is not None:
            raise HarnessError(f"--effect-sds plans in prefix-level SDs, which a rate ({rates[0]}) has none of to "
                               f"simulate by: plan it at its smallest effect of interest, --delta {rates[0]}=VALUE "
                               f"(a difference in proportion, 0.05 for 5 percentage points)")
        numbers = [m for m in measures if m not in rates]
        tests = lead_tests(conditions, numbers, effect_sds, deltas, assurance=assurance)
        simulated, unplanned = rate_tests(conditions, rates, deltas, assurance=assurance) if rates else ([], [])
        tests += simulated
        if not tests:
            raise HarnessError(_why_no_lead(conditions, numbers, unplanned))
    else:
        tests, unplanned = claim_tests(conditions, attention, effect_sds, deltas=deltas, assurance=assurance), []
    if not tests:
        missing = [why for why in (missing_for(c, conditions, attention) for c in HYPOTHESES) if why]
        raise HarnessError("no claim test could be planned from these runs: "
                           + ("; ".join(missing) if len(missing) == len(HYPOTHESES) else
                              "; ".join(missing + [_why_no_prefix_sd(conditions)])))
    p0 = max(c.pilot_prompts for c in costs)
    prompts = range(p0, min(c.prompts_available for c in costs) + 1)
    # fewer than MIN_PREFIXES: no interval to decide on; fewer than the pilot's: a design would drop data the
    # pilot has (a resume to it keeps its results, its tables only the design's), at no saving in what it computed
    least = max(MIN_PREFIXES, min(min(c.pilot_per_group for c in costs), min(c.prefixes_available for c in costs)))
    prefixes = range(least, min(c.prefixes_available for c in costs) + 1)
    drawn = {n: [c.drawn(n) for c in costs] for n in prefixes}

    def still_to_spend(p: int, n: int) -> float:  # a design the pilot ran in full needs no rerun, not even its start
        return once_per_design(costs, [0.0 if p <= c.pilot_prompts and d <= c.pilot_prefixes
                                       else c.seconds(p, n, len(d & c.pilot_prefixes))[1]
                                       for c, d in zip(costs, drawn[n])])

    grid = power_grid(tests, prompts, prefixes, still_to_spend, plan_for)
    grid["total_seconds"] = [once_per_design(costs, [c.seconds(p, n, 0)[0] for c in costs])
                             for p, n in zip(grid.n_prompts, grid.n_prefixes)]
    grid = grid.sort_values(["seconds", "total_seconds"], kind="stable")
    budget = None if budget_minutes is None else 60.0 * budget_minutes
    designs, chosen, why_chosen = [], None, ""
    decoded = not undecoded(conditions)  # decode.path=none: attention tests alone, and the page says so
    for scope in ("all",) if measures else ("all", "attention") if decoded else ("attention",):  # a user's: each
        best, why = cheapest(grid, scope, target, budget, plan_for)
        designs.append({"scope": scope, "n_prompts": None if best is None else int(best.n_prompts),
                        "n_prefixes": None if best is None else int(best.n_prefixes),
                        "minutes": None if best is None else best.seconds / 60,
                        "total_minutes": None if best is None else best.total_seconds / 60, "note": why})
        if chosen is None and best is not None:
            chosen, why_chosen = best, f"the cheapest design that reaches the target on {scope_text(scope, measures)}"
    if chosen is None and measures:
        chosen = most_reached(grid, tests, target, budget, attention_first=False)
        if chosen is not None:
            within = "within the budget" if budget is not None else "of those the runs' prompts and prefixes allow"
            why_chosen = (f"no design {within} reaches the target on every test; this one reaches it on "
                          f"{sum(chosen[t.label] >= target for t in tests)} of {len(tests)} (the most {within}; "
                          f"{TIE_BREAK}), and the report's C - B table states the power of the others")
    if chosen is None and not measures:
        chosen = most_reached(grid, tests, target, budget)
        if chosen is not None:
            reached = {kind: sum(chosen[t.label] >= target for t in tests if t.kind in kinds)
                       for kind, kinds in (("attention", (ATTENTION,)), ("all", (ATTENTION, OUTPUT)))}
            n_att = sum(t.kind == ATTENTION for t in tests)
            within = "within the budget" if budget is not None else "of those the runs' prompts and prefixes allow"
            why_chosen = (f"no design {within} reaches the target on every attention test; this one reaches "
                          f"it on {reached['attention']} of {n_att} attention tests and {reached['all']} of "
                          f"{len(tests)} tests in all (the most {within}; {TIE_BREAK}), and the claims page states "
                          f"the power of the others")
    unpowered = sum(np.isnan(t.power(*t.pilot)) for t in tests)
    if chosen is not None and unpowered:  # "every test" holds for the tests that have a power to reach
        why_chosen += (f" that has a power ({unpowered} of {len(tests)} have none: their prefixes' spread is 0, "
                       f"see below)")
    if chosen is not None and (never := "; ".join(filter(None, [*unplanned, _never_varied(conditions, measures)]))):
        why_chosen += f"; left out, as nothing to plan from: {never}"
    at = None if chosen is None else (int(chosen.n_prompts), int(chosen.n_prefixes))  # the chosen design
    overrides = "" if at is None else f"prompts.limit={at[0]} prefixes.per_group={at[1]}"
    per_group = at[1] if at is not None else max(t.pilot[1] for t in tests)
    rows = []
    for t in tests:
        rows.append({"claim": t.claim, "measure": t.measure, "kind": t.kind, **t.cell,
                     "pilot": f"{t.pilot[0]} x {t.pilot[1]}", "power_pilot": t.power(*t.pilot),
                     "assured_chosen": np.nan if at is None else t.planned(*at),
                     "decided_chosen": np.nan if at is None else t.planned(*at, "decided"),
                     "power_chosen": np.nan if at is None else t.power(*at),
                     **dict(zip(("power_chosen_low", "power_chosen_high"),
                                (np.nan, np.nan) if at is None or t.power_range is None else t.power_range(*at))),
                     **dict(zip(("decided_chosen_low", "decided_chosen_high"),
                                (np.nan, np.nan) if at is None or t.decided_range is None or plan_for != "decided"
                                else t.decided_range(*at))),
                     "prompts_needed": prompts_needed(t, per_group, target, p0, plan_for=plan_for),
                     "at_prefixes": per_group})
    return Plan(grid, pd.DataFrame(rows), pd.DataFrame(designs), costs, chosen, why_chosen, overrides, target,
                effect_sds, budget_minutes, deltas_for(deltas), tuple(measures), assurance, plan_for, decoded)
