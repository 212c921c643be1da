"""What a design costs, measured on a pilot run (:class:`RunCost`), and what each test a claims page
leaves *not determined* would take to decide (:func:`deciding_costs`).

Cost is measured, not assumed: each run's seconds per A condition and per B/C condition (the
``seconds`` column of its conditions table, scaled by its status's "conditions" phase over their
sum, which adds what the loop around them spent), and its other phases by what each grows with: the
start once per sweep, the tables, figures and report per condition of the design (a design of 13x
the pilot's conditions took 13x the pilot's seconds for them in ``make study``), and the noise floor
per row of the sample the design's noise settings draw (:func:`harness.measure.noise.noise_size`).
The prefix cache reuses a prefix's keys and values across prompts, so a design with more prompts
than the pilot costs at most this. All of it is the pilot's own cores' speed: another job sharing
them slows a sweep down, and no plan can price that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.planning import claim_tests, prompts_needed
from harness.analysis.power import ASSURANCE, fewest_reaching
from harness.analysis.verdicts import NOT_DETERMINED
from harness.errors import HarnessError
from harness.inputs import Prefix, load_prefixes, load_prompts, select_prefixes
from harness.measure.noise import noise_size
from harness.runs.inputs import of_config, refuse_changed
from harness.runs.reading import refuse_collected
from harness.runs.rundir import RunDir


@dataclass
class RunCost:
    """What one pilot run measured about its cost, and what of it a design would reuse."""

    run: Path
    seconds_a: float        # per A condition (one per prompt)
    seconds_bc: float       # per B or C condition
    seconds_fixed: float    # the start (setup): once per sweep
    per_prefix: float       # B/C conditions per prompt and prefix (lengths x isolation settings)
    pilot_prompts: int
    pilot_prefixes: frozenset[str]
    pilot_per_group: int    # the fewest prefixes either group has in the pilot
    prompts_available: int
    prefixes_available: int  # per group
    bank: tuple[Prefix, ...]  # the run's prefix bank, read once
    seed: int
    note: str = ""  # why its seconds may be low (timing from a sweep that computed part of the run)
    seconds_per_table_row: float = 0.0  # tables, figures and report, per condition of the design
    seconds_per_noise_row: float = 0.0  # the noise floor, per row of its sample
    noise: tuple[float, int, int] | None = None  # the run's noise settings: fraction, min, max (None: no floor)
    # the run's model, placement, lengths and isolation settings (B and C rows): runs with one are pilots of one
    # sweep, which a design extends once (overlapping jobs of a multirun were each charged for it)
    design: frozenset = frozenset()

    def conditions(self, n_prompts: int, per_group: int) -> int:
        """How many conditions the design has: each prompt's A, and its B/C at every prefix."""
        return round(n_prompts * (1 + 2 * per_group * self.per_prefix))

    def noise_rows(self, n_prompts: int, per_group: int) -> int:
        """How many B/C conditions the design's noise floor computes again alone."""
        if self.noise is None:
            return 0
        fraction, least, most = self.noise
        n_bc = round(n_prompts * 2 * per_group * self.per_prefix)
        return noise_size(n_bc, fraction, least, most, cells=round(2 * self.per_prefix))

    def drawn(self, per_group: int) -> frozenset[str]:
        """The prefix ids the run's seed draws at ``per_group``."""
        return frozenset(p.id for p in select_prefixes(list(self.bank), per_group, self.seed))

    def seconds(self, n_prompts: int, per_group: int, kept: int) -> tuple[float, float]:
        """``(total, still to spend)`` for the design, where ``kept`` of its prefixes the pilot ran: a
        rerun to it pays its start, tables, figures and noise floor whole (they are of the whole design)."""
        total = (self.seconds_fixed + n_prompts * (self.seconds_a + 2 * per_group * self.per_prefix * self.seconds_bc)
                 + self.conditions(n_prompts, per_group) * self.seconds_per_table_row
                 + self.noise_rows(n_prompts, per_group) * self.seconds_per_noise_row)
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
    # a sweep that reused nothing timed every condition it holds (one that failed some holds the others)
    computed_all = (manifest["reused"] == 0 if "reused" in manifest else
                    manifest.get("computed_this_run") == manifest.get("counts", {}).get("conditions"))
    # the loop around the conditions (storing results, progress) is paid per condition too
    scale = phases.get("conditions", 0.0) / conditions.seconds.sum() if computed_all else 1.0
    pilot_prefixes = frozenset(bc.prefix_id.dropna().astype(str))
    if config["prefixes"].get("corpus"):
        raise HarnessError(f"{path}: harness plan plans runs of a prefix file, and this run draws matched sets from "
                           f"the corpus {config['prefixes']['corpus']} (prefixes.per_group sets, 3 prefixes each): "
                           f"size it from its report's intervals")
    # the prompt set and bank a design draws from are the pilot's: read from elsewhere, a relative path names others
    refuse_changed(str(path), manifest.get("inputs"), of_config(config),
                   "a design would be searched and priced on other prompts or prefixes than the pilot's", config=config)
    prefixes = load_prefixes(config["prefixes"]["path"])
    per_kind = pd.Series([p.kind for p in prefixes]).value_counts()
    analysis = config.get("analysis", {})
    noise_rows = len(run.table(RunDir.NOISE, trust_damaged=True)) if run.has(RunDir.NOISE) else 0  # only counted
    # a phase that grows with the design is priced per what it grows with; where the pilot has no count to divide
    # by (no noise rows: a noise table reused whole, or none), its seconds stay with the start
    grows = {"tables": len(conditions), "figures and report": len(conditions), "noise floor": noise_rows}
    per = {k: phases.get(k, 0.0) / n for k, n in grows.items() if n and k in phases}
    return RunCost(
        run=Path(path), seconds_a=float(a.seconds.mean()) * max(scale, 1.0),
        seconds_bc=float(bc.seconds.mean()) * max(scale, 1.0),
        seconds_fixed=float(sum(v for k, v in phases.items() if k != "conditions" and k not in per)),
        seconds_per_table_row=float(per.get("tables", 0.0) + per.get("figures and report", 0.0)),
        seconds_per_noise_row=float(per.get("noise floor", 0.0)),
        noise=(float(analysis.get("noise_fraction", 0.0)), int(analysis.get("noise_min", 0)),
               int(analysis.get("noise_max", 0))) if "noise floor" in per else None,
        per_prefix=len(bc) / (a.prompt_id.nunique() * len(pilot_prefixes)),
        pilot_prompts=int(a.prompt_id.nunique()), pilot_prefixes=pilot_prefixes,
        pilot_per_group=int(bc.groupby("group", observed=True).prefix_id.nunique().min()),
        prompts_available=len(load_prompts(config["prompts"]["path"])),
        prefixes_available=int(per_kind.min()), bank=tuple(prefixes), seed=int(config["seed"]),
        design=frozenset(bc[[c for c in ("model", "placement", "prefix_len", "isolation") if c in bc]].astype(str)
                         .drop_duplicates().itertuples(index=False, name=None)),
        note="" if computed_all else (
            f"{path}: its last sweep computed {manifest.get('computed_this_run')} of "
            f"{manifest.get('counts', {}).get('conditions')} conditions (a resume), so its seconds per condition are "
            f"not scaled to the loop around them (storing, progress) as a whole sweep's are; the minutes priced from "
            f"it may be low: price a design from a pilot computed in one sweep"))


def once_per_design(costs, values) -> float:
    """``values`` (one per run of ``costs``) summed over the distinct :attr:`RunCost.design` of the
    runs, the least among runs of one: a design is reached by extending the one of them that needs
    least."""
    least: dict[frozenset, float] = {}
    for c, value in zip(costs, values, strict=True):
        least[c.design] = min(least.get(c.design, np.inf), value)
    return float(sum(least.values()))


DECIDING_LIMIT = 10_000  # the most prompts a claims page prices a decision at


def deciding_costs(run_dirs: list[Path], per_run: list[pd.DataFrame], table: pd.DataFrame,
                   conditions: pd.DataFrame, attention: pd.DataFrame | None, deltas: dict[str, float] | None = None,
                   target: float = 0.8, assurance: float = ASSURANCE) -> pd.DataFrame:
    """What each *not determined* row of a claims ``table`` would take to decide: the fewest prompts at
    which the planner's chance that the test ends decided at its Δ reaches ``target`` (at
    ``assurance``, as ``harness plan`` plans), at the runs' prefixes per group and, where prompts
    alone never reach it, at the most the prefix bank holds (and where even that never does, the fewest
    prefixes per group at every prompt of the prompt set); and the minutes the sweeps of that design
    take, over the runs of the test's model and placement at each one's measured seconds (runs of one
    design, overlapping jobs, once: :func:`once_per_design`)
    (:class:`RunCost`, from each run's own conditions table in ``per_run``, as
    :func:`harness.runs.reading.run_tables` read them). ``conditions`` and ``attention`` are the
    tables the page was computed on. One row per undecided test: claim, measure, model, placement,
    n_prompts and n_prefixes (empty where no design up to ``DECIDING_LIMIT`` prompts decides it),
    minutes (empty where the run cannot be priced), note."""
    columns = ["claim", "measure", "model", "placement", "n_prompts", "n_prefixes", "minutes", "note"]
    undecided = table[table.verdict == NOT_DETERMINED]
    if undecided.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("measure", "model", "placement", "note") else float)
                             for c in columns})
    priced: dict[tuple, list[RunCost]] = {}  # per model and placement: every run of it (the design extends each)
    unpriced: dict[tuple, list[str]] = {}
    for path, run_conditions in zip(run_dirs, per_run):
        try:
            cost, why = run_cost(path, run_conditions), ""
        except HarnessError as exc:  # a collection, an unfinished run: the design is still said, unpriced
            cost, why = None, str(exc)
        for cell in run_conditions[["model", "placement"]].astype(str).drop_duplicates().itertuples(index=False):
            if cost:
                priced.setdefault(tuple(cell), []).append(cost)
            else:
                unpriced.setdefault(tuple(cell), []).append(why)
    tests = claim_tests(conditions, attention, deltas=deltas, assurance=assurance)
    rows = []
    for r in undecided.itertuples():
        test = next((t for t in tests if t.claim == r.claim and str(t.cell.get("model")) == str(r.model)
                     and str(t.cell.get("placement")) == str(r.placement)
                     and (r.measure == t.measure or r.measure.startswith(t.measure + " ("))), None)
        row = {"claim": r.claim, "measure": r.measure, "model": r.model, "placement": r.placement,
               "n_prompts": None, "n_prefixes": None, "minutes": None, "note": ""}
        if not (np.isfinite(r.ci_low) and np.isfinite(r.ci_high)):  # too few units, or no spread: nothing to scale
            rows.append({**row, "note": "no interval on these runs (its row says why): no design is priced from them"})
            continue
        if test is None or test.decided is None:
            rows.append({**row, "note": "no chance of a decision to plan with (no Δ, or no variance components)"})
            continue
        cell = (str(r.model), str(r.placement))
        runs, why_not = priced.get(cell, []), unpriced.get(cell, [])
        known = bool(runs) and not why_not  # every run of the cell priced: its prompt set and bank are known
        prompt_set = min(c.prompts_available for c in runs) if known else None
        bank = min(c.prefixes_available for c in runs) if known else None
        needed = per_group = None
        for k in dict.fromkeys((test.pilot[1], max(bank or 0, test.pilot[1]))):
            needed = prompts_needed(test, k, target, test.pilot[0], DECIDING_LIMIT, plan_for="decided")
            if needed is not None:
                per_group = k
                break
        if needed is None and prompt_set is not None:  # prompts never get there: prefixes at the set's every prompt
            needed = max(prompt_set, test.pilot[0])
            per_group = fewest_reaching(lambda n, p=needed: bool(test.planned(p, n, "decided") >= target),
                                        test.pilot[1], DECIDING_LIMIT)
            if per_group is None:
                rows.append({**row, "note": f"no design up to {needed:,} prompts x {DECIDING_LIMIT:,} prefixes per "
                             f"group"})
                continue
        unknown = f"not priced: {'; '.join(why_not) or 'no run of this model and placement'}"
        if needed is None:
            rows.append({**row, "note": f"prompts alone, at {test.pilot[1]} prefixes per group, do not decide it up to "
                         f"{DECIDING_LIMIT:,}, and a design with more prefixes needs the runs' prompt set and bank "
                         f"({unknown})"})
            continue
        row.update(n_prompts=needed, n_prefixes=per_group)
        if not known:
            rows.append({**row, "note": unknown})
            continue
        minutes = once_per_design(runs, [c.seconds(needed, per_group, kept=0)[0] for c in runs]) / 60
        short = [f"{n - have:,} more {what} must be written (the {where} has {have:,})"
                 for n, have, what, where in ((needed, prompt_set, "prompts", "prompt set"),
                                              (per_group, bank, "prefixes per group", "bank")) if n > have]
        rows.append({**row, "minutes": minutes, "note": "; ".join(short + [c.note for c in runs if c.note])})
    return pd.DataFrame(rows, columns=columns)
