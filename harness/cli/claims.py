"""``harness claims`` (the three contamination claims, with verdicts at a stated Δ) and ``harness
plan`` (the design that reaches a target power): the commands that decide and plan. Each parses its
arguments, then calls its stage's plain function (imported only then)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.guards import out_beside, positive, whole
from harness.cli.options import (
    MIN_RESAMPLES,
    CommandParser,
    decided_deltas,
    out_path,
    print_notes,
    reading_notes,
    reading_options,
    refuse_idle_deltas,
)
from harness.reporting.edits import owned_outputs
from harness.runs.outdir import check_out, claim_out, mark_out


def claims(args: list[str]) -> int:
    from harness.analysis.checks import MAX_RESAMPLES  # the analysis's own bound, not a second copy

    parser = CommandParser(prog="harness claims", description="Test the three contamination claims "
                                     "(middle-layer peak, a jump between 64 and 128 tokens, C drifts more than B) "
                                     "on the tables of one or more run directories: claims.md, claims.parquet "
                                     "and one figure per claim.")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (each a model and placement)")
    parser.add_argument("--out", type=out_path, default=None, help="where claims.md, claims.parquet and figures/ go "
                        "(default: RUN-claims beside the first run)")
    parser.add_argument("--resamples", type=lambda text: whole(text, MIN_RESAMPLES, MAX_RESAMPLES), default=2000,
                        help=f"crossed bootstrap resamples (default 2000, at least {MIN_RESAMPLES}, at most "
                             f"{MAX_RESAMPLES:,})")
    parser.add_argument("--delta", type=_delta, action="append", default=[], metavar="MEASURE=VALUE",
                        help="a smallest effect of interest in the measure's units, over the default (repeat for "
                             "several; e.g. norm_edit_distance=0.1; the defaults: docs/statistics.md)")
    reading_options(parser)
    ns = parser.parse_args(args)
    ns.out = out_beside(ns.out, ns.runs[0], "claims")
    check_out(ns.out)
    notes = reading_notes(ns, ns.runs)
    from harness.analysis.undecoded import undecoded
    from harness.analysis.claims import (
        DELTA_MEASURES,
        HYPOTHESES,
        missing_for,
        plain_concatenation,
        without_mention_controls,
    )
    from harness.errors import HarnessError

    deltas, replaced = decided_deltas(ns, ns.runs, DELTA_MEASURES, "harness claims")
    settings = {"resamples": ns.resamples, "delta": deltas}  # what changes the page: another is another --out
    claim_out(ns.out, "claims", ns.runs, settings)
    from harness.reporting.claims import write_claims
    from harness.runs.reading import load_noise, merge_runs, refuse_reference_only, run_tables

    per_run, attentions = run_tables(ns.runs, ns.trust_damaged, ns.allow_mixed_settings)  # each read once
    conditions, attention = merge_runs(per_run, attentions, [str(r) for r in ns.runs], ns.allow_mixed_settings)
    refuse_reference_only(conditions, "harness claims")
    conditions, attention, left_out = plain_concatenation(conditions, attention)
    conditions, attention, no_mentions = without_mention_controls(conditions, attention)
    missing = [why for why in (missing_for(c, conditions, attention) for c in HYPOTHESES) if why]
    if len(missing) == len(HYPOTHESES):  # a page of three "Not tested" is no result: say it here
        raise HarnessError("no claim can be tested on these runs: " + "; ".join(missing))
    refuse_idle_deltas(ns, _untested_measures(conditions, attention), "harness claims")
    print_notes(replaced)
    notes = [*notes, *replaced, *(note for note in (left_out, no_mentions) if note)]
    if undecoded(conditions):  # claims 2 and 3 lose their edit-distance rows: the page says why
        from harness.runs.plan_page import ATTENTION_ONLY

        notes.append(ATTENTION_ONLY)
    noise = load_noise(ns.runs, ns.trust_damaged)
    mark_out(ns.out, "claims", ns.runs, settings)  # before writing: an interrupted page leaves its own directory
    from harness.runs.design_cost import deciding_costs

    def deciding(table):  # what each undecided test would take, priced at its run's own seconds
        return deciding_costs(ns.runs, per_run, table, conditions, attention, deltas)

    with owned_outputs(ns.out):  # a table or figure the user changed since the last claims is kept
        written = write_claims(conditions, attention, noise, ns.out, [str(r) for r in ns.runs],
                               n_resamples=ns.resamples, notes=notes, deltas=deltas, deciding=deciding)
    print(f"wrote {len(written)} files: {(ns.out / 'claims.md').resolve()}")
    return 0


def _delta(text: str) -> tuple[str, float]:
    from harness.analysis.verdicts import parse_delta

    try:
        return parse_delta(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _measure(text: str) -> str:
    """A measure ``harness plan --measure`` can plan the report's C - B test on: a registered
    conditions measure with numeric values, or a rate the report compares between C and B
    (``target_hit``: its power is simulated per design, :mod:`harness.analysis.rate_planning`)."""
    from harness.analysis.rate_planning import PLANNED_RATES
    from harness.measure.metrics import METRICS

    # a nullable measure's NaN means something (first_divergence: never diverged), and a C - B of it would drop
    # those conditions: plain numbers only
    numeric = {m.name: m for m in METRICS if m.level == "condition" and str(m.dtype) in ("float64", "int64")}
    rates = {m.name for m in METRICS if m.level == "condition" and str(m.dtype) in ("bool", "boolean")}
    if text in PLANNED_RATES:
        return text
    if text in rates:
        why = ("measured in group C alone: a B prefix asks for nothing to obey" if text == "obeyed"
               else "A's own, or a check of the run")
        raise argparse.ArgumentTypeError(
            f"{text} is not a rate the report compares between C and B ({why}); plan on {' or '.join(PLANNED_RATES)}, "
            f"or a measure (e.g. norm_edit_distance, or attn_kl_mean for a run that decoded nothing), and read "
            f"{text}'s power at the pilot with H.compare_groups(H.load_run(RUN).conditions, {text!r}, rate=True)")
    if any(m.name == text and str(m.dtype) == "Int64" for m in METRICS):
        raise argparse.ArgumentTypeError(f"{text} is empty where its event did not happen (a continuation that never "
                                         f"diverged, say), so a C - B of it would leave those conditions out; plan on "
                                         f"a measure every condition has, e.g. norm_edit_distance")
    if text not in numeric:
        import difflib

        close = difflib.get_close_matches(text, [*numeric, *PLANNED_RATES], n=1)
        raise argparse.ArgumentTypeError(f"{text!r} is not a conditions measure"
                                         + (f"; did you mean {close[0]!r}?" if close else "")
                                         + f" (the measures: {', '.join(sorted(numeric))}; the rates: "
                                           f"{', '.join(PLANNED_RATES)})")
    return text


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _assurance(text: str) -> float:
    value = _number(text)
    from harness.runs.plan import assurance_problem  # the plan's own bounds, said before the runs are read

    problem = assurance_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"{problem}; got {text}")
    return value


def _target_power(text: str) -> float:
    value = _number(text)
    from harness.runs.plan import MAX_TARGET, TESTS_LEVEL  # the plan's own bounds, said before the runs are read

    if not TESTS_LEVEL < value <= MAX_TARGET:
        raise argparse.ArgumentTypeError(f"is a chance (of every test decided, or a power): give one above "
                                         f"{TESTS_LEVEL:g} (the tests' level) and at most "
                                         f"{MAX_TARGET:g}, got {value}")
    return value


def plan(args: list[str]) -> int:
    parser = CommandParser(prog="harness plan", description="From finished pilot runs, the prompts x "
                                     "prefixes-per-group design at which every claim test ends decided at its Δ "
                                     "(or reaches a target power) with a target chance, at least cost (seconds "
                                     "measured on the pilots), or why none does.")
    parser.add_argument("runs", nargs="+", type=Path, help="pilot run directories (each a model and placement)")
    parser.add_argument("--target", type=_target_power, default=0.8,
                        help="the chance to reach: of every test decided, or each test's power (default 0.8)")
    parser.add_argument("--delta", type=_delta, action="append", default=[], metavar="MEASURE=VALUE",
                        help="a smallest effect of interest to plan for, in the measure's units, over the default "
                             "(repeat for several; the defaults: docs/statistics.md)")
    parser.add_argument("--effect-sds", type=positive, default=None,
                        help="plan for this many prefix-level SDs of each test instead of its Δ")
    parser.add_argument("--measure", type=_measure, action="append", default=[], metavar="MEASURE",
                        help="plan for the report's C - B test on this measure (a conditions column, e.g. output_kl; "
                             "repeat for several) instead of the claims page's tests: one test per model, placement, "
                             "isolation setting and prefix length, each at its --delta")
    parser.add_argument("--plan-for", choices=("decided", "power"), default="decided",
                        help="the target: the chance that every test ends decided at its Δ, whatever the truth "
                             "(decided, the default), or each test's power at Δ (power)")
    parser.add_argument("--assurance", type=_assurance, default=None,
                        help="plan each test with the pilot's mean squares (the prompts', each group's prefixes') at "
                             "the upper bound they stay under with this probability (default 0.85; 0.5: the point "
                             "estimates, whose power the claims page prints)")
    parser.add_argument("--budget-minutes", type=positive, default=None,
                        help="most minutes still to spend on all runs together (default: no limit)")
    parser.add_argument("--out", type=out_path, default=None,
                        help="also write plan.md, plan_grid.parquet and overrides.txt (the chosen design's "
                             "overrides, empty when none) here")
    reading_options(parser)
    ns = parser.parse_args(args)
    if ns.delta and ns.effect_sds is not None:
        parser.error("--delta and --effect-sds each set what to plan for (an effect in the measure's units, or in "
                     "prefix-level SDs): give one")
    if ns.out is not None:
        check_out(ns.out)
    notes = reading_notes(ns, ns.runs, takes="sweeps")  # a collection has no timing of its own to price by
    from harness.analysis.claims import DELTA_MEASURES
    from harness.analysis.verdicts import deltas_for

    measures = list(dict.fromkeys(ns.measure))
    deltas, replaced = decided_deltas(ns, ns.runs, measures or DELTA_MEASURES, "harness plan")
    unstated = [m for m in measures if m not in deltas_for(deltas)]
    if unstated and ns.effect_sds is None:
        parser.error(f"--measure {unstated[0]} has no default smallest effect of interest: give --delta "
                     f"{unstated[0]}=VALUE in its units (or --effect-sds to plan in prefix-level SDs)")
    notes = [*notes, *replaced]
    from harness.analysis.power import ASSURANCE

    assurance = ASSURANCE if ns.assurance is None else ns.assurance
    settings = {"target": ns.target, "delta": deltas, "effect_sds": ns.effect_sds, "budget_minutes": ns.budget_minutes,
                "assurance": assurance, "plan_for": ns.plan_for,
                "measure": sorted(measures) or None}  # None as a marker of a version before --measure reads it
    if ns.out is not None:
        claim_out(ns.out, "plan", ns.runs, settings)
    from harness.io import write_parquet, write_text
    from harness.reporting.edits import write_page
    from harness.runs.plan import plan as plan_runs
    from harness.runs.plan_page import plan_markdown

    found = plan_runs(ns.runs, ns.target, ns.effect_sds, ns.budget_minutes, ns.trust_damaged, ns.allow_mixed_settings,
                      deltas=deltas, measures=measures, assurance=assurance, plan_for=ns.plan_for)
    planned = {"kl" if claim == 1 else m for claim, m in zip(found.tests.claim, found.tests.measure)}
    refuse_idle_deltas(ns, {m: f"the plan's tests read {', '.join(sorted(planned))}" for m in DELTA_MEASURES
                            if m not in planned and not measures}, "harness plan")
    print_notes(replaced)
    page = plan_markdown(found, ns.runs, notes)
    print(page, end="")
    if ns.out is not None:
        mark_out(ns.out, "plan", ns.runs, settings)
        with owned_outputs(ns.out):  # an edited overrides.txt or grid is kept, as an edited page is
            write_page(page, ns.out / "plan.md")
            write_parquet(found.grid, ns.out / "plan_grid.parquet")
            write_text(found.overrides + "\n", ns.out / "overrides.txt")
        print(f"wrote {(ns.out / 'plan.md').resolve()}, plan_grid.parquet and overrides.txt")
    return 0


def _untested_measures(conditions, attention) -> dict[str, str]:
    """The measures the claims test in general but on none of these tables, each with what the claims
    reading it lack (:func:`missing_for`): claim 1 reads ``kl`` per layer, claims 2 and 3 the
    condition measures. A smallest effect of interest for one of them would change nothing."""
    from harness.analysis.claims import CONDITION_MEASURES, HYPOTHESES, missing_for

    why = {claim: missing_for(claim, conditions, attention) for claim in HYPOTHESES}
    lacking = {"kl": why[1]} if why[1] else {}
    if why[2] and why[3]:
        lacking.update({m: f"{why[2]}; {why[3]}" for m in CONDITION_MEASURES})
    return lacking
