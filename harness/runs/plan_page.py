"""``harness plan``'s page: the cost model, the cheapest designs, and each test's planned power or
chance of ending decided at the chosen design (text out; :mod:`harness.runs.plan` finds the plan)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.rate_planning import PLANNED_RATES
from harness.analysis.undecoded import UNDECODED
from harness.numbers import NOT_ESTIMABLE, count, num
from harness.reporting.markdown import heading

# what table 2b of results/calibration.md measured (benchmarks/crossed_calibration.py --part promise)
PROMISE = ("In simulation, 300 pilots of 4 x 24 per regime planning C - B at power 0.8 at an assurance of 0.85 got "
           "a real power of 0.94-0.99 on average and at least 0.78-0.96 in nine plans of ten, at 3.6 to 8 times "
           "the point plan's conditions; on the point power, 0.70-0.81 and 0.36-0.71 (results/calibration.md, "
           "table 2b).")
DECIDED = ("Each test's chance of ending decided is at its least favourable truth, an effect between 0 and Δ "
           "(harness.analysis.decided): at Δ itself a test is decided as often as it has power, at 0 as often as "
           "its interval stays below Δ, and in between less often than either; \"every test\" is at least 1 minus "
           "the sum of their chances undecided, whatever their dependence. Its range is the chance with the pilot's "
           "components anywhere in their own 95% intervals (the corners of that box). ")
# and table 2d, for a plan for decisions (--part decided-promise)
DECIDED_PROMISE = ("In simulation, 300 pilots of 4 x 24 per regime planning C - B to end decided with a chance of 0.8 "
                   "at an assurance of 0.85 got a real chance of 0.95-1.00 on average and at least 0.77-1.00 in nine "
                   "plans of ten, at 2.7 to 8 times the point plan's conditions; on the point estimates, 0.73-0.78 "
                   "and 0.32-0.54 (results/calibration.md, table 2d).")
# a rate's test, planned by simulation (harness.analysis.rate_planning; table 2e: --part rate-promise)
RATES = ("A rate's power and chance of a verdict (target_hit) are simulated, 400 tables a design, from the pilot's "
         "latent crossed model (each group's prompt and prefix shares, what ties C to B, B's rate; "
         "harness.analysis.rate_planning): the power at a truth of Δ, the chance of a verdict at Δ/2, neither with a "
         "range (a range would simulate 64 corners a design; a Monte Carlo error of at most 0.025). The planned ones "
         "take each group's prompt and prefix components at their upper bound at the plan's assurance. "
         "In simulation, 60 pilots of 6 x 24 per sparse regime (B 2%, C 10%) planning power 0.8 at Δ 0.08 at an "
         "assurance of 0.85 got a real power of 0.89-0.97 on average and at least 0.72-0.90 in nine plans of ten "
         "(a chance of a verdict: 0.84-0.99, at least 0.70-0.95), at 2.3 to 4 times the point plan's conditions; on "
         "the point fit, 0.64-0.80 and 0.37-0.64 (results/calibration.md, table 2e).")
CELL_NAMES = {"prefix_len": "prefix length", "isolation": "isolation"}
ATTENTION_ONLY = (f"{UNDECODED}: no claim test on edit distance can be made, so the claims' tests here are their "
                  f"attention tests")
SCOPE_TEXT = {"attention": "every attention test", "all": "every test (attention and edit distance)"}


def plan_markdown(p, run_dirs: list[Path], notes: list[str] = ()) -> str:
    """The plan as a page: the cost model, the designs, and every test's power and (planned for
    decisions) chance of a verdict (``notes``: what the reader said of the runs, under the title)."""
    if p.effect_sds is None:
        used = sorted({"kl" if t.claim == 1 else t.measure for t in p.tests.itertuples()})
        effect = "its measure's smallest effect of interest Δ (" + ", ".join(
            f"{m} {num((p.deltas or {}).get(m))}" for m in used) + "; docs/statistics.md)"
    else:
        effect = "one prefix-level SD" if p.effect_sds == 1 else f"{p.effect_sds:g} prefix-level SDs"
    decided = p.plan_for == "decided"
    # the cells a test is one of: a claim's model and placement, a C - B row's isolation and length too
    cells = [c for c in ("model", "placement", "isolation", "prefix_len") if c in p.tests]
    page, printer = (("report's C - B table", "the pilot's report.md prints") if p.measures else
                     ("claims page", "`harness claims` on the pilot prints"))
    if not p.decoded and not p.measures:
        notes = [*notes, ATTENTION_ONLY]
    lines = [
        *heading("Design plan", notes), "",
        f"Runs (the pilot): {', '.join(str(r) for r in run_dirs)}. Target: "
        + (f"a chance of at least {p.target:g} that every test ends decided (supported, contradicted or no effect as "
           f"large as Δ) at {effect}, whatever the truth (its least favourable, an effect between 0 and Δ), "
           if decided else f"power {p.target:g} against {effect} ")
        + "for " + (f"the report's C - B test on {', '.join(p.measures)}, one per row of its C - B table (model, placement, "
           f"isolation setting and prefix length; the power it prints)" if p.measures else
           "each claim test of the claims page (the power it prints), at the pilot's prefix lengths")
        + (f"; budget {p.budget_minutes:g} min still to spend." if p.budget_minutes is not None else "."), "",
        "## Cost, measured on the pilot", "",
        "| run | s per A condition | s per B/C condition | s per sweep (its start) | tables, figures and report: s "
        "per condition | noise floor: s per row of its sample | prompts in the set | prefixes per group in the bank |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {c.run} | {num(c.seconds_a)} | {num(c.seconds_bc)} | {num(c.seconds_fixed)} | "
              f"{num(c.seconds_per_table_row)} | {num(c.seconds_per_noise_row) if c.noise else ''} | "
              f"{count(c.prompts_available)} | {count(c.prefixes_available)} |" for c in p.costs]
    lines += [line for c in p.costs if c.note for line in ("", f"> **Note:** {c.note}.")]
    lines += ["", "A design's tables, figures and report grow with its conditions, and its noise floor with the sample "
              "its noise settings draw from them (`analysis.noise_fraction`, within `noise_min` and `noise_max`): "
              "each is priced per condition or per row, as the pilot measured it. Every price is the pilot's cores' "
              "speed; another job sharing them slows a sweep down, which no plan can price. Minutes still to spend "
              "count what a rerun with `on_existing=resume` reuses: the pilot's first prompts "
              "and the prefixes its seed draws again (a larger `prefixes.per_group` redraws group C); a design the "
              "pilot ran in full costs nothing more.", "",
              "## Cheapest designs", "", "| reaches the target on | prompts | prefixes per group | minutes still to "
              "spend | minutes in all | note |", "| --- | --- | --- | --- | --- | --- |"]
    for d in p.designs.itertuples():
        if pd.isna(d.n_prompts):  # None in a column of numbers reads back as NaN
            lines.append(f"| {scope_text(d.scope, p.measures)} | | | | | {d.note} |")
        else:
            lines.append(f"| {scope_text(d.scope, p.measures)} | {int(d.n_prompts)} | {int(d.n_prefixes)} | {num(d.minutes)} | "
                         f"{num(d.total_minutes)} | |")
    lines += ["", f"Searched: {p.grid.n_prompts.min()} to {p.grid.n_prompts.max()} prompts (the prompt set's first; more "
              f"need more prompts written to the set) x {p.grid.n_prefixes.min()} to {p.grid.n_prefixes.max()} prefixes "
              f"per group (from the pilot's, whose data a design keeps, to the bank's)."]
    if p.chosen is None:
        lines += ["", f"Chosen: none; the pilot's design stays, and the {page} states the power it has."]
    else:
        lines += ["", f"Chosen: `{p.overrides}`, {p.why_chosen}: {num(p.chosen.seconds / 60)} minutes still to spend, "
                      f"{num(p.chosen.total_seconds / 60)} in all."]
    lines += ["",
              "## Per test", "", (DECIDED if decided else "") + _assured_text(p.assurance, decided)
              + " The power at the pilot is "
              f"the point power, from the pilot's variance components as estimated ({printer} the same power at "
              "the pilot, with its range). At the chosen design, beside the planned power, its point power and "
              "the range that point takes with those components anywhere in their own 95% intervals (the corners "
              f"of that box, as the {page}'s range). The last column is what the target would take beyond the "
              f"prompt set: the fewest prompts (up to 1,000) at which the test's planned "
              f"{'chance of ending decided' if decided else 'power'} reaches "
              f"{p.target:g} with {int(p.tests.at_prefixes.iloc[0]) if len(p.tests) else 0} prefixes per group.", "",
              f"| {'test' if p.measures else 'claim'} | measure | {' | '.join(CELL_NAMES.get(c, c) for c in cells)} | pilot | "
              "power at the pilot | planned power at the chosen design (point, range) | "
              + ("chance decided at the chosen design (range) | " if decided else "") + "prompts for the target |",
              "| --- " * (len(cells) + 6 + decided) + "|"]
    for t in p.tests.itertuples():
        needed = NOT_ESTIMABLE if np.isnan(t.power_pilot) else ("over 1,000" if t.prompts_needed is None or
                                                              pd.isna(t.prompts_needed) else f"{int(t.prompts_needed)}")
        lines.append(f"| {'C - B' if p.measures else t.claim} | {t.measure} | "
                     + "".join(f"{getattr(t, c)} | " for c in cells) + f"{t.pilot} | {_power(t.power_pilot)} | "
                     f"{'' if p.chosen is None else _ranged(t)} | "
                     + (f"{'' if p.chosen is None else _decided(t)} | " if decided else "") + f"{needed} |")
    if p.tests.measure.isin(PLANNED_RATES).any():
        lines += ["", RATES]
    lines += ["", "Power not estimable: the prefixes' own spread of that statistic is estimated at 0, so there is no prefix-level "
              "SD to state power against."] if p.tests.power_pilot.isna().any() else []
    return "\n".join(lines) + "\n"


def _assured_text(assurance: float, decided: bool) -> str:
    """What a planned power (or chance decided) is, in words, and how far simulation found it kept."""
    promise = DECIDED_PROMISE if decided else PROMISE
    if assurance == 0.5:
        return ("Each test is planned on the pilot's components as estimated (`--assurance 0.5`, the point power). "
                + promise)
    return (f"Each test is planned at an assurance of {assurance:g}: with each of the pilot's mean squares (the "
            f"prompts', each group's prefixes') at the upper bound it stays under with probability {assurance:g}, so "
            f"that about that share of pilots reach what is planned. " + promise)


def scope_text(scope: str, measures: Sequence[str]) -> str:
    return f"every C - B test ({', '.join(measures)})" if measures else SCOPE_TEXT[scope]


def _decided(test) -> str:
    """The chosen design's chance of a verdict at the plan's assurance, with the range it takes with
    the pilot's components anywhere in their 95% intervals (none stated in prefix-level SDs)."""
    low, high = getattr(test, "decided_chosen_low", np.nan), getattr(test, "decided_chosen_high", np.nan)
    text = _power(test.decided_chosen)
    return text if not (np.isfinite(low) and np.isfinite(high)) else f"{text} (range {num(low, 2)} to {num(high, 2)})"


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

