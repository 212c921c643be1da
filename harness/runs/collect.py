"""``harness collect``: many run directories (a multirun, or several sweeps) into one table set.

Incomplete jobs are reported, never silently dropped: the combined manifest lists every source
with its status, and the command exits 1 unless ``--allow-partial``. A key that appears in
several runs (group A is rerun by every job of a length sweep) is kept once, but only if the
copies agree: keys are compared null-safely (a null ``beta`` or ``prefix_id`` is a value like any
other), and copies with different results (e.g. two runs that differ in ``decode.max_new_tokens``)
are refused with exit 2, naming the runs and the settings they differ in, unless
``--allow-disagreement`` keeps the first and reports them. Tables are aligned to one schema
explicitly: runs of different result schemas are refused, and a run without attention analysis
contributes conditions but no attention rows (said in the output).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from harness.analysis.checks import check_flags
from harness.analysis.verdicts import recorded_deltas
from harness.config import config_differences
from harness.errors import HarnessError
from harness.io import sha256_file, write_parquet, write_sealed_json
from harness.paths import shell_path
from harness.reporting.edits import keep_edited_table
from harness.runs.compat import check_compatible, mixed_settings, refuse_other_schemas, run_settings
from harness.runs.environment import now_iso
from harness.runs.lock import held_by, writer
from harness.runs.multirun import unstarted
from harness.runs.outdir import check_out, claim_out, drop_report, mark_out, release_out
from harness.runs.reading import compared_settings, has_table, is_cache_timing, load_noise
from harness.runs.rundir import RunDir, job_dirs
from harness.runs.schema import CONDITION_COLUMNS, ROW_KEYS
from harness.runs.tables import (
    COMPARED,
    concat_tables,
    dedupe,
    merged_attention,
    refuse_one_key_two_texts,
    with_position,
)
from harness.runs.twice import copies, refuse_given_twice


def find_runs(paths: list[Path]) -> list[RunDir]:
    """Each path is a run directory, or a sweep directory whose job directories are collected."""
    runs = []
    for path in paths:
        if not path.is_dir():
            raise HarnessError(f"{path}: not a directory")
        if RunDir(path).is_run():
            runs.append(RunDir(path))
            continue
        jobs = job_dirs(path) or [RunDir(p.parent) for p in sorted(path.glob(f"*/{RunDir.CONDITIONS}"))]
        if not jobs:
            raise HarnessError(f"{path}: neither a run directory nor a sweep directory with job directories")
        runs += jobs
    return runs


def collect(paths: list[Path], out: Path, allow_partial: bool = False, allow_disagreement: bool = False,
            trust_damaged: bool = False, allow_mixed_settings: bool = False) -> int:
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)  # the API takes str paths too
    if not all(isinstance(p, (str, os.PathLike)) for p in [*paths, out]):
        raise HarnessError(f"collect takes run directories' paths and an output directory's, got {paths!r} and {out!r}")
    # ~ as H.load_runs reads it: the command refuses a quoted ~ before it calls this
    paths, out = [Path(p).expanduser() for p in paths], Path(out).expanduser()
    check_flags(allow_partial=allow_partial, allow_disagreement=allow_disagreement, trust_damaged=trust_damaged,
                allow_mixed_settings=allow_mixed_settings)  # the string "no" is true
    check_out(out)  # the command's checks, for the API too: a user's own files there are never written over
    if not paths:
        raise HarnessError("collect: give at least one run or sweep directory")
    runs = find_runs(paths)
    refuse_given_twice([run.path for run in runs], "its conditions")  # dropped as "group A in every job" otherwise
    claim_out(out, "collect", paths)
    for run in runs:  # a sweep still writing: its tables are not final (and may not exist yet)
        if is_cache_timing(run):
            raise HarnessError(f"{run} is a harness cache-timing run: collect merges sweeps' condition tables, which "
                               f"it has none of (`harness figures {shell_path(run)}` redraws its own page)")
        holder = held_by(run.path)
        if holder is not None:
            raise HarnessError(f"{run} is being written by {writer(run.path)} ({holder}): collect it once that has "
                               f"finished")
    sources, conditions, attention, problems, manifests, no_attention, damaged = [], [], [], [], [], set(), []
    problems += [note for note in map(unstarted, paths) if note]  # an interrupted multirun's jobs that never started
    for i, run in enumerate(runs):
        problem = run.problem()
        if problem:
            problems.append(problem)
        manifest = run.manifest(trust_damaged) or {}
        manifests.append(manifest)
        sources.append({"run": str(run.path.resolve()), "status": "complete" if not problem else problem,
                        "tables": manifest.get("tables", {}), "model": manifest.get("model", {}),
                        "settings": [s._asdict() for s in run_settings(str(run.path.resolve()), manifest)],
                        "inputs": manifest.get("inputs")})
        if run.has(run.CONDITIONS):
            if trust_damaged and any(run.table_damage(name) for name in (run.CONDITIONS, run.ATTENTION)):
                damaged.append(str(run.path.resolve()))
            conditions.append(run.conditions(trust_damaged).assign(_source=i))
            if has_table(run, run.ATTENTION, trust_damaged):  # with the run's position, to keep runs apart
                attention.append(with_position(run.table(run.ATTENTION, trust_damaged), conditions[-1]).assign(_source=i))
            else:
                no_attention.add(i)
    copied = copies([run.path for run in runs], manifests)  # kept once, as any repeat: said, not taken for group A
    if not conditions:
        raise HarnessError("no tables found in " + ", ".join(map(str, paths))
                           + (f" ({'; '.join(problems[:2])})" if problems else ""))
    refuse_one_key_two_texts(conditions, [str(run.path) for run in runs])
    read = sorted({int(c._source.iloc[0]) for c in conditions})
    settings, unrecorded = compared_settings([runs[i] for i in read], [manifests[i] for i in read])
    refuse_other_schemas(settings, unrecorded)
    merged = concat_tables([_aligned(c, CONDITION_COLUMNS) for c in conditions])
    merged, dropped, disagree = dedupe(merged, ROW_KEYS, COMPARED, no_attention)
    same = dropped - len(disagree)  # copies that agreed (each disagreeing copy was dropped too)
    if disagree and not allow_disagreement:
        key, col, i, j = disagree[0]
        mixed = mixed_settings(settings)
        configs = [manifests[k].get("config") for k in (i, j)]  # a collected set has none of its own to compare
        differ = [f"{key} ({a!r} vs {b!r})" for key, a, b in config_differences(*configs)] if all(configs) else mixed[:4]
        raise HarnessError(
            f"{len(disagree)} condition(s) appear in several runs with different results (first: {dict(zip(ROW_KEYS, key))}, "
            f"column {col!r}, in {runs[i].path} and {runs[j].path}"
            + (f"; the runs differ in {', '.join(differ[:4])}" if differ else "")
            + ("); runs that differ on purpose are read side by side, not collected: `harness figures` or "
               "`harness claims` with the runs and --allow-mixed-settings, or H.load_runs([...], "
               "allow_mixed_settings=True), keep each run's copy (--allow-disagreement would keep only the first)"
               if differ else
               "); collect runs of one configuration, or pass --allow-disagreement to keep the first copy"
               + ((" (with --allow-mixed-settings: they also differ in " + "; ".join(mixed[:2]) + ")" if all(configs)
                   else " (and --allow-mixed-settings, for those settings)") if mixed and not allow_mixed_settings
                  else "")))
    mixed = check_compatible(settings, unrecorded, allow_mixed_settings=allow_mixed_settings)
    deltas = recorded_deltas([manifests[i] for i in read])  # refused where the runs' differ
    tables = {RunDir.CONDITIONS: merged.drop(columns="_source")}
    if attention:
        tables[RunDir.ATTENTION] = merged_attention([_aligned(a, list(a.columns)) for a in attention])
    noise = load_noise([runs[i].path for i in read], trust_damaged)  # the jobs' noise floors, each condition once
    if noise is not None:
        tables[RunDir.NOISE] = noise
    mark_out(out, "collect", paths)  # before the tables: an interrupted collect leaves its own directory
    before = (RunDir(out).manifest(trust_damaged=True) or {}).get("tables") if (out / RunDir.MANIFEST).is_file() \
        else None
    for name, df in tables.items():
        keep_edited_table(out / name, (before or {}).get(name))  # a column of notes the user added is theirs
        write_parquet(df, out / name)
    if before and before != {name: sha256_file(out / name) for name in tables}:  # a page of the earlier tables
        stale = drop_report(out)
        if stale:
            print(f"removed {', '.join(stale)}, drawn from the tables collected before: `harness figures {shell_path(out)}` "
                  f"draws them anew")
    write_sealed_json({
        "collected": now_iso(),
        "sources": sources,
        "incomplete": problems,
        "without_attention_analysis": [str(runs[i].path) for i in sorted(no_attention)],
        "duplicate_keys_dropped": dropped,
        "duplicate_keys_disagreeing": len(disagree),
        "damaged_sources": damaged,  # read with --trust-damaged: the pages drawn from this set say so
        "mixed_settings": mixed,
        "claims_delta": deltas,  # the Δs the runs were made with: figures, claims and plan read them
        "tables": {name: sha256_file(out / name) for name in tables},
    }, out / RunDir.MANIFEST)
    release_out(out)  # the tables are written: a notebook's later command may write here
    runs_text = "1 run" if len(runs) == 1 else f"{len(runs)} runs"
    print(f"collected {runs_text}, {len(tables[RunDir.CONDITIONS])} conditions into {out.resolve()}"
          + (f" ({same} repeated rows with the same results, e.g. group A in every job, kept once)" if same else ""))
    for copy, original, _ in copied:
        print(f"note: {copy} holds the very conditions table of {original} (a copy?): each of its conditions is in "
              f"the table once")
    if not {"B", "C"} & set(tables[RunDir.CONDITIONS].group.astype(str)):
        print("note: the runs hold group A only (the task prompts alone): figures, claims and plan compare B and C "
              "with A, so collect them with runs that have B or C")
    for i in sorted(no_attention):
        print(f"note: {runs[i].path} ran without attention analysis: its conditions have no attention rows")
    if disagree:
        print(f"warning: {len(disagree)} repeated keys have different results in different runs (--allow-disagreement): "
              f"the first copy of each was kept, the others are not in the table")
    if problems:
        print(f"{'warning' if allow_partial else 'error'}: {len(problems)} run(s) incomplete:\n  " + "\n  ".join(problems))
        return 0 if allow_partial else 1
    return 0


def _aligned(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``df`` with the documented columns first (missing ones added as null), then any others."""
    extra = [c for c in df.columns if c not in columns]
    return df.reindex(columns=columns + extra)
