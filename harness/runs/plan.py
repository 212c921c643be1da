"""``harness plan RUN...``: from finished pilot runs, the design (prompts x prefixes per group) at
which every claim test reaches a target power at least cost, and what extending the pilots to it
costs: a rerun with the design's overrides and ``on_existing=resume`` reuses every pilot result the
design keeps.

Cost is measured, not assumed: each run's seconds per A condition and per B/C condition (the
``seconds`` column of its conditions table, scaled by its status's "conditions" phase over their
sum, which adds what the loop around them spent) and its fixed seconds (setup, noise floor, tables,
figures). The prefix cache reuses a prefix's keys and values across prompts, so a design with more
prompts than the pilot costs at most this. What a design reuses is exact: the first prompts (the
prompt set's order) and the prefixes the run's seed draws at the design's ``per_group`` that the
pilot also ran (``prefixes.per_group`` redraws group C when it grows, so a design that changes it
recomputes most of the pilot's C conditions; the plan counts that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.claims import HYPOTHESES, claim3_cells, missing_for, without_mention_controls
from harness.analysis.crossed_variance import MIN_PREFIXES, MIN_PROMPTS
from harness.analysis.design import variance_components
from harness.analysis.planning import (
    ATTENTION,
    CLAIM_MEASURES,
    OUTPUT,
    cheapest,
    claim_tests,
    lead_tests,
    most_reached,
    power_grid,
    prompts_needed,
)
from harness.analysis.power import ASSURANCE
from harness.analysis.verdicts import deltas_for
from harness.errors import HarnessError
from harness.inputs import Prefix, load_prefixes, load_prompts, select_prefixes
from harness.numbers import NOT_ESTIMABLE, count, num
from harness.reporting.markdown import heading
from harness.runs.reading import merge_runs, refuse_collected, run_tables
from harness.runs.rundir import RunDir

# what table 2b of results/calibration.md measured (benchmarks/crossed_calibration.py --part promise)
PROMISE = ("In simulation, 300 pilots of 4 x 24 per regime planning C - B at power 0.8 at an assurance of 0.85 got "
           "a real power of 0.94-0.99 on average and at least 0.78-0.96 in nine plans of ten, at 3.6 to 8 times "
           "the point plan's conditions; on the point power, 0.70-0.81 and 0.36-0.71 (results/calibration.md, "
           "table 2b).")
CELL_NAMES = {"prefix_len": "prefix length", "isolation": "isolation"}
SCOPE_TEXT = {"attention": "every attention test", "all": "every test (attention and edit distance)"}


@dataclass
class RunCost:
    """What one pilot run measured about its cost, and what of it a design would reuse."""

    run: Path
    seconds_a: float        # per A condition (one per prompt)
    seconds_bc: float       # per B or C condition
    seconds_fixed: float    # setup, noise floor, tables, figures: once per sweep
    per_prefix: float       # B/C conditions per prompt and prefix (lengths x isolation settings)
    pilot_prompts: int
    pilot_prefixes: frozenset[str]
    prompts_available: int
    prefixes_available: int  # per group
    bank: tuple[Prefix, ...]  # the run's prefix bank, read once
    seed: int
    note: str = ""  # why its seconds may be low (timing from a sweep that computed part of the run)

    def drawn(self, per_group: int) -> frozenset[str]:
        """The prefix ids the run's seed draws at ``per_group``."""
        return frozenset(p.id for p in select_prefixes(list(self.bank), per_group, self.seed))

    def seconds(self, n_prompts: int, per_group: int, kept: int) -> tuple[float, float]:
        """``(total, still to spend)`` for the design, where ``kept`` of its prefixes the pilot ran."""
        total = self.seconds_fixed + n_prompts * (self.seconds_a + 2 * per_group * self.per_prefix * self.seconds_bc)
        reused = min(n_prompts, self.pilot_prompts) * (self.seconds_a + kept * self.per_prefix * self.seconds_bc)
        return total, total - reused


def run_cost(path: Path, conditions: pd.DataFrame) -> RunCost:
    """:class:`RunCost` of the run at ``path`` from its manifest, status and conditions table."""
    run = RunDir(path)
    manifest, status = run.manifest() or {}, run.status() or {}
    refuse_collected(run, manifest, "with no timing of its own to price a design by")
    config = manifest.get("config")
    if not config or "seconds" not in status:
        raise HarnessError(f"{path}: no manifest or timing in its status.json; plan from a finished run")
    groups = set(conditions.group.astype(str))
    if groups != {"A", "B", "C"}:
        raise HarnessError(f"{path}: harness plan plans the A/B/C design; this run has groups {sorted(groups)}")
    phases = status["seconds"]
    a, bc = conditions[conditions.group == "A"], conditions[conditions.group != "A"]
    computed_all = manifest.get("computed_this_run") == manifest.get("counts", {}).get("conditions")
    # the loop around the conditions (storing results, progress) is paid per condition too
    scale = phases.get("conditions", 0.0) / conditions.seconds.sum() if computed_all else 1.0
    pilot_prefixes = frozenset(bc.prefix_id.dropna().astype(str))
    if config["prefixes"].get("corpus"):
        raise HarnessError(f"{path}: harness plan plans runs of a prefix file, and this run draws matched sets from the "
                           f"corpus {config['prefixes']['corpus']} (prefixes.per_group sets, 3 prefixes each): size it "
                           f"from its report's intervals")
    prefixes = load_prefixes(config["prefixes"]["path"])
    per_kind = pd.Series([p.kind for p in prefixes]).value_counts()
    return RunCost(
        run=Path(path), seconds_a=float(a.seconds.mean()) * max(scale, 1.0),
        seconds_bc=float(bc.seconds.mean()) * max(scale, 1.0),
        seconds_fixed=float(sum(v for k, v in phases.items() if k != "conditions")),
        per_prefix=len(bc) / (a.prompt_id.nunique() * len(pilot_prefixes)),
        pilot_prompts=int(a.prompt_id.nunique()), pilot_prefixes=pilot_prefixes,
        prompts_available=len(load_prompts(config["prompts"]["path"])),
        prefixes_available=int(per_kind.min()), bank=tuple(prefixes), seed=int(config["seed"]),
        note="" if computed_all else (
            f"{path}: its last sweep computed {manifest.get('computed_this_run')} of "
            f"{manifest.get('counts', {}).get('conditions')} conditions (a resume), so its seconds per condition are "
            f"not scaled to the loop around them (storing, progress) as a whole sweep's are; the minutes below may "
            f"be low: price a design from a pilot computed in one sweep"))


TESTS_LEVEL = 0.05  # the level the planned tests run at: a target power at or below it is met by testing nothing
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
    assurance: float = ASSURANCE    # each test planned with its prompt mean square at this upper bound


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
            if not np.isfinite(row.prefix_sd):
                fewest = int(min(row.n_prefixes_high, row.n_prefixes_low))
                crossing = str(row.note).partition("(")[2].rstrip(")")  # "complete crossing of 2 of 3 prompts"
                reasons.append(f"claim 3's prefix-level SD of {value} cannot be estimated from {fewest} prefix(es) per "
                               f"group and {int(row.n_prompts)} prompt(s)" + (f" ({crossing})" if crossing else "")
                               + f": a pilot needs a complete crossing of at least {MIN_PROMPTS} prompts and "
                                 f"{MIN_PREFIXES} prefixes per group")
            elif row.prefix_sd <= 0:
                reasons.append(f"claim 3's {value} does not vary between prefixes here (a prefix-level SD of 0 "
                               f"gives no effect to plan against)")
    return "; ".join(dict.fromkeys(reasons)) or "claim 3 has no measure to plan on"


def _why_no_lead(conditions: pd.DataFrame, measures: Sequence[str]) -> str:
    """Why no C - B test of ``measures`` has a power to plan with, per measure and cell."""
    reasons = []
    for value in measures:
        if value not in conditions or not conditions[value].notna().any():
            reasons.append(f"{value} was not measured in these runs")
            continue
        for _, row in variance_components(conditions, value).iterrows():
            if not np.isfinite(row.prefix_sd):
                reasons.append(f"{value}'s prefix-level SD cannot be estimated from {int(row.n_prompts)} prompt(s) and "
                               f"{int(min(row.n_prefixes_high, row.n_prefixes_low))} prefix(es) per group: a pilot "
                               f"needs a complete crossing of at least {MIN_PROMPTS} prompts and {MIN_PREFIXES} "
                               f"prefixes per group")
            else:
                reasons.append(f"{value} does not vary between prefixes here (a prefix-level SD of 0 gives no effect "
                               f"to plan against)")
    return "no C - B test could be planned from these runs: " + "; ".join(dict.fromkeys(reasons))


def plan(run_dirs: list[Path], target: float = 0.8, effect_sds: float | None = None,
         budget_minutes: float | None = None, trust_damaged: bool = False, allow_mixed_settings: bool = False,
         deltas: dict[str, float] | None = None, measures: Sequence[str] = (), assurance: float = ASSURANCE) -> Plan:
    """Plan a design for these pilot runs (each a model and placement; one design for all): each test
    at its measure's smallest effect of interest (the registry's Δ, with ``deltas`` on top), or at
    ``effect_sds`` of its own prefix-level SD when given. The tests are the claims page's, or with
    ``measures`` the report's C - B on each of them (a row per model, placement, isolation setting and
    prefix length). Each test's power is planned at ``assurance``: with the pilot's prompt mean square
    at the upper bound it stays under with that probability (0.5: its median, the point power the
    claims page prints)."""
    if not 0.5 <= assurance < 1:
        raise HarnessError(f"--assurance {assurance} is the chance the plan's power is reached: give one from 0.5 (the "
                           f"point power) to below 1, e.g. {ASSURANCE:g}")
    if not TESTS_LEVEL < target <= MAX_TARGET:
        raise HarnessError(f"--target {target} is a power (the chance a test finds the effect): give one above the "
                           f"tests' level of {TESTS_LEVEL:g} and at most {MAX_TARGET:g}, e.g. 0.8")
    per_run, attention = run_tables(run_dirs, trust_damaged, allow_mixed_settings)  # each table read once
    costs = [run_cost(r, conditions) for r, conditions in zip(run_dirs, per_run)]
    conditions, attention = merge_runs(per_run, attention, [str(d) for d in run_dirs], allow_mixed_settings)
    conditions, attention, _ = without_mention_controls(conditions, attention)  # the tests the claims page reads
    if measures:
        tests = lead_tests(conditions, measures, effect_sds, deltas, assurance=assurance)
        if not tests:
            raise HarnessError(_why_no_lead(conditions, measures))
    else:
        tests = claim_tests(conditions, attention, effect_sds, deltas=deltas, assurance=assurance)
    if not tests:
        missing = [why for why in (missing_for(c, conditions, attention) for c in HYPOTHESES) if why]
        raise HarnessError("no claim test could be planned from these runs: "
                           + ("; ".join(missing) if len(missing) == len(HYPOTHESES) else
                              "; ".join(missing + [_why_no_prefix_sd(conditions)])))
    p0 = max(c.pilot_prompts for c in costs)
    prompts = range(p0, min(c.prompts_available for c in costs) + 1)
    prefixes = range(MIN_PREFIXES, min(c.prefixes_available for c in costs) + 1)  # fewer: no interval to decide on
    drawn = {n: [c.drawn(n) for c in costs] for n in prefixes}

    def still_to_spend(p: int, n: int) -> float:  # a design the pilot ran in full needs no rerun, not even its start
        return sum(0.0 if p <= c.pilot_prompts and d <= c.pilot_prefixes
                   else c.seconds(p, n, len(d & c.pilot_prefixes))[1] for c, d in zip(costs, drawn[n]))

    grid = power_grid(tests, prompts, prefixes, still_to_spend)
    grid["total_seconds"] = [sum(c.seconds(p, n, 0)[0] for c in costs)
                             for p, n in zip(grid.n_prompts, grid.n_prefixes)]
    grid = grid.sort_values(["seconds", "total_seconds"], kind="stable")
    budget = None if budget_minutes is None else 60.0 * budget_minutes
    designs, chosen, why_chosen = [], None, ""
    for scope in ("all",) if measures else ("all", "attention"):  # a user's measures: every one is planned for
        best, why = cheapest(grid, scope, target, budget)
        designs.append({"scope": scope, "n_prompts": None if best is None else int(best.n_prompts),
                        "n_prefixes": None if best is None else int(best.n_prefixes),
                        "minutes": None if best is None else best.seconds / 60,
                        "total_minutes": None if best is None else best.total_seconds / 60, "note": why})
        if chosen is None and best is not None:
            chosen, why_chosen = best, f"the cheapest design that reaches the target on {_scope_text(scope, measures)}"
    if chosen is None and measures:
        chosen = most_reached(grid, tests, target, budget, attention_first=False)
        if chosen is not None:
            within = "within the budget" if budget is not None else "of those the runs' prompts and prefixes allow"
            why_chosen = (f"no design {within} reaches the target on every test; this one reaches it on "
                          f"{sum(chosen[t.label] >= target for t in tests)} of {len(tests)} (the most {within}), "
                          f"and the report's C - B table states the power of the others")
    if chosen is None and not measures:
        chosen = most_reached(grid, tests, target, budget)
        if chosen is not None:
            reached = {kind: sum(chosen[t.label] >= target for t in tests if t.kind in kinds)
                       for kind, kinds in (("attention", (ATTENTION,)), ("all", (ATTENTION, OUTPUT)))}
            n_att = sum(t.kind == ATTENTION for t in tests)
            within = "within the budget" if budget is not None else "of those the runs' prompts and prefixes allow"
            why_chosen = (f"no design {within} reaches the target on every attention test; this one reaches "
                          f"it on {reached['attention']} of {n_att} attention tests and {reached['all']} of "
                          f"{len(tests)} tests in all (the most {within}), and the claims page states the "
                          f"power of the others")
    unpowered = sum(np.isnan(t.power(*t.pilot)) for t in tests)
    if chosen is not None and unpowered:  # "every test" holds for the tests that have a power to reach
        why_chosen += (f" that has a power ({unpowered} of {len(tests)} have none: their prefixes' spread is 0, "
                       f"see below)")
    overrides = "" if chosen is None else f"prompts.limit={int(chosen.n_prompts)} prefixes.per_group={int(chosen.n_prefixes)}"
    per_group = int(chosen.n_prefixes) if chosen is not None else max(t.pilot[1] for t in tests)
    rows = []
    for t in tests:
        rows.append({"claim": t.claim, "measure": t.measure, "kind": t.kind, **t.cell,
                     "pilot": f"{t.pilot[0]} x {t.pilot[1]}", "power_pilot": t.power(*t.pilot),
                     "assured_chosen": np.nan if chosen is None else float(chosen[t.label]),
                     "power_chosen": np.nan if chosen is None else t.power(int(chosen.n_prompts),
                                                                            int(chosen.n_prefixes)),
                     **dict(zip(("power_chosen_low", "power_chosen_high"),
                                (np.nan, np.nan) if chosen is None or t.power_range is None else
                                t.power_range(int(chosen.n_prompts), int(chosen.n_prefixes)))),
                     "prompts_needed": prompts_needed(t, per_group, target, p0), "at_prefixes": per_group})
    return Plan(grid, pd.DataFrame(rows), pd.DataFrame(designs), costs, chosen, why_chosen, overrides, target,
                effect_sds, budget_minutes, deltas_for(deltas), tuple(measures), assurance)


def plan_markdown(p: Plan, run_dirs: list[Path], notes: list[str] = ()) -> str:
    """The plan as a page: the cost model, the designs, and every test's power (``notes``: what
    the reader said of the runs, under the title)."""
    if p.effect_sds is None:
        used = sorted({"kl" if t.claim == 1 else t.measure for t in p.tests.itertuples()})
        effect = "its measure's smallest effect of interest Δ (" + ", ".join(
            f"{m} {num((p.deltas or {}).get(m))}" for m in used) + "; docs/statistics.md)"
    else:
        effect = "one prefix-level SD" if p.effect_sds == 1 else f"{p.effect_sds:g} prefix-level SDs"
    # the cells a test is one of: a claim's model and placement, a C - B row's isolation and length too
    cells = [c for c in ("model", "placement", "isolation", "prefix_len") if c in p.tests]
    page, printer = (("report's C - B table", "the pilot's report.md prints") if p.measures else
                     ("claims page", "`harness claims` on the pilot prints"))
    lines = [
        *heading("Design plan", notes), "",
        f"Runs (the pilot): {', '.join(str(r) for r in run_dirs)}. Target: power {p.target:g} against {effect} for "
        + (f"the report's C - B test on {', '.join(p.measures)}, one per row of its C - B table (model, placement, "
           f"isolation setting and prefix length; the power it prints)" if p.measures else
           "each claim test of the claims page (the power it prints), at the pilot's prefix lengths")
        + (f"; budget {p.budget_minutes:g} min still to spend." if p.budget_minutes is not None else "."), "",
        "## Cost, measured on the pilot", "",
        "| run | s per A condition | s per B/C condition | fixed s per sweep | prompts in the set | prefixes per group "
        "in the bank |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {c.run} | {num(c.seconds_a)} | {num(c.seconds_bc)} | {num(c.seconds_fixed)} | {count(c.prompts_available)} | "
              f"{count(c.prefixes_available)} |" for c in p.costs]
    lines += [line for c in p.costs if c.note for line in ("", f"> **Note:** {c.note}.")]
    lines += ["", "Minutes still to spend count what a rerun with `on_existing=resume` reuses: the pilot's first prompts "
              "and the prefixes its seed draws again (a larger `prefixes.per_group` redraws group C); a design the "
              "pilot ran in full costs nothing more.", "",
              "## Cheapest designs", "", "| reaches the target on | prompts | prefixes per group | minutes still to "
              "spend | minutes in all | note |", "| --- | --- | --- | --- | --- | --- |"]
    for d in p.designs.itertuples():
        if pd.isna(d.n_prompts):  # None in a column of numbers reads back as NaN
            lines.append(f"| {_scope_text(d.scope, p.measures)} | | | | | {d.note} |")
        else:
            lines.append(f"| {_scope_text(d.scope, p.measures)} | {int(d.n_prompts)} | {int(d.n_prefixes)} | {num(d.minutes)} | "
                         f"{num(d.total_minutes)} | |")
    lines += ["", f"Searched: {p.grid.n_prompts.min()} to {p.grid.n_prompts.max()} prompts (the prompt set's first; more "
              f"need more prompts written to the set) x {p.grid.n_prefixes.min()} to {p.grid.n_prefixes.max()} prefixes "
              f"per group (the bank's)."]
    if p.chosen is None:
        lines += ["", f"Chosen: none; the pilot's design stays, and the {page} states the power it has."]
    else:
        lines += ["", f"Chosen: `{p.overrides}`, {p.why_chosen}: {num(p.chosen.seconds / 60)} minutes still to spend, "
                      f"{num(p.chosen.total_seconds / 60)} in all."]
    lines += ["",
              "## Power per test", "", _assured_text(p.assurance, p.effect_sds) + " The power at the pilot is "
              f"the point power, from the pilot's variance components as estimated ({printer} the same power at "
              "the pilot, with its range). At the chosen design, beside the planned power, its point power and "
              "the range that point takes with those components anywhere in their own 95% intervals (the corners "
              f"of that box, as the {page}'s range). The last column is what the target would take beyond the "
              f"prompt set: the fewest prompts (up to 1,000) at which the test's planned power reaches "
              f"{p.target:g} with {int(p.tests.at_prefixes.iloc[0]) if len(p.tests) else 0} prefixes per group.", "",
              f"| {'test' if p.measures else 'claim'} | measure | {' | '.join(CELL_NAMES.get(c, c) for c in cells)} | pilot | "
              "power at the pilot | planned power at the chosen design (point, range) | prompts for the target |",
              "| --- " * (len(cells) + 6) + "|"]
    for t in p.tests.itertuples():
        needed = NOT_ESTIMABLE if np.isnan(t.power_pilot) else ("over 1,000" if t.prompts_needed is None or
                                                              pd.isna(t.prompts_needed) else f"{int(t.prompts_needed)}")
        lines.append(f"| {'C - B' if p.measures else t.claim} | {t.measure} | "
                     + "".join(f"{getattr(t, c)} | " for c in cells) + f"{t.pilot} | {_power(t.power_pilot)} | "
                     f"{'' if p.chosen is None else _ranged(t)} | {needed} |")
    lines += ["", "Power not estimable: the prefixes' own spread of that statistic is estimated at 0, so there is no prefix-level "
              "SD to state power against."] if p.tests.power_pilot.isna().any() else []
    return "\n".join(lines) + "\n"


def _assured_text(assurance: float, effect_sds: float | None) -> str:
    """What the planned power is, in words."""
    if assurance == 0.5:
        return ("A design is chosen by each test's point power (`--assurance 0.5`), from components that are the "
                "pilot's estimates. " + PROMISE)
    return (f"A design is chosen by each test's planned power at an assurance of {assurance:g}: its power with each "
            f"of the pilot's mean squares (the prompts', each group's prefixes') at the upper bound it stays under "
            f"with probability {assurance:g}, so that about that share of pilots reach it. " + PROMISE)


def _scope_text(scope: str, measures: Sequence[str]) -> str:
    return f"every C - B test ({', '.join(measures)})" if measures else SCOPE_TEXT[scope]


def _power(value: float) -> str:
    return NOT_ESTIMABLE if np.isnan(value) else num(value, 2)


def _ranged(test) -> str:
    """The chosen design's planned power, with its point power and that point's range (none stated
    for a plan in prefix-level SDs)."""
    low, high = getattr(test, "power_chosen_low", np.nan), getattr(test, "power_chosen_high", np.nan)
    point = _power(test.power_chosen)
    inner = point if np.isnan(test.power_chosen) or not (np.isfinite(low) and np.isfinite(high)) else \
        f"{point}, range {num(low, 2)} to {num(high, 2)}"
    return f"{_power(test.assured_chosen)} ({inner})"

