"""How the commands that read runs read them: which runs they may read as finished, and their tables as one (each
checked against its manifest's sha256, the runs against each other).

``figures``, ``claims``, ``plan``, ``causal-heads``, ``corpus-report`` and ``detect`` read run directories a sweep
wrote. A run a sweep is writing now, one that was interrupted or stopped with an error, or one that never finished
is refused in one line naming its state and the command that finishes it; a run whose status is ``failed`` (some
conditions failed, the tables hold the others) is refused unless the reader was given ``--allow-failed``, and then
every page it writes says how many conditions are missing. Runs read together although they differ in a setting
(``--allow-mixed-settings``) are said on the page too. :func:`load_run` is for notebooks.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from harness.errors import HarnessError
from harness.paths import shell_path
from harness.runs.compat import Settings, check_compatible, run_settings
from harness.runs.inputs import manifest_disagrees
from harness.runs.lock import held_by, lock_command, writer
from harness.runs.multirun import unstarted_notes
from harness.runs.rundir import RunDir, job_dirs
from harness.runs.schema import ROW_KEYS
from harness.runs.tables import (
    COMPARED,
    concat_tables,
    dedupe,
    merged_attention,
    refuse_one_key_two_texts,
    with_position,
)
from harness.runs.twice import refuse_copies, refuse_given_twice

log = logging.getLogger(__name__)


def reading_notes(run_dirs: list[Path], *, allow_failed: bool = False, allow_mixed_settings: bool = False,
                  trust_damaged: bool = False, ignore_settings: tuple[str, ...] = (), takes: str = "runs",
                  mixed_option: str | None = "--allow-mixed-settings") -> list[str]:
    """Refuse runs that are not finished (module docstring); return one sentence per thing the pages must
    say: failed conditions left out (``allow_failed``), settings mixed (``allow_mixed_settings``; ``ignore_settings``,
    ``mixed_option``: :func:`harness.runs.compat.check_compatible`). ``takes``: as :func:`not_a_run` says."""
    notes = []
    runs = [RunDir(d) for d in run_dirs]
    refuse_given_twice(run_dirs, "its conditions")
    recorded = [_quiet_manifest(run) for run in runs]
    refuse_copies(run_dirs, recorded)
    notes += [note for note in (_state_note(run, m, allow_failed) for run, m in zip(runs, recorded)) if note]
    notes += unstarted_notes(run_dirs)  # SWEEP/*/ of an interrupted multirun: the jobs that exist are not all of it
    for run in runs:  # what is not a run, or a run whose table is not the one it wrote, before comparing settings
        if not run.has(RunDir.CONDITIONS):
            raise HarnessError(not_a_run(run, takes))
        damaged = run.check_table(RunDir.CONDITIONS, trust_damaged)
        if damaged:
            notes.append(f"{damaged}; read anyway (--trust-damaged): the numbers drawn from it are not all the run's "
                         f"own.")
    manifests = [run.manifest(trust_damaged) or {} for run in runs]
    mixed = check_compatible(*compared_settings(runs, manifests), allow_mixed_settings=allow_mixed_settings,
                             ignore=ignore_settings, option=mixed_option)
    if mixed:
        notes.append(f"These runs differ in {'; '.join(mixed)}, and were read together (--allow-mixed-settings): a "
                     f"condition run in several of them with different results is kept once per run (column `run`), "
                     f"and the summaries here count each copy as another observation.")
    return notes


def reading_state(run_dir: Path) -> None:
    """Refuse one run a reader may not read now: held by a process writing it, or unfinished (its
    state named with the command that finishes it)."""
    run = RunDir(run_dir)
    _state_note(run, _quiet_manifest(run), allow_failed=False)


def collected_notes(run: RunDir, manifest: dict) -> list[str]:
    """What a collected set's page must say of how it was collected: copies that disagreed (one kept,
    ``--allow-disagreement``) and sources whose tables had been changed (``--trust-damaged``)."""
    said = []
    disagreeing = manifest.get("duplicate_keys_disagreeing") or 0
    if disagreeing:
        said.append(f"{run} was collected with {disagreeing} condition(s) whose copies in different runs had different "
                    f"results (--allow-disagreement): the first copy of each was kept.")
    damaged = manifest.get("damaged_sources") or []
    if damaged:
        said.append(f"{run} was collected from {len(damaged)} run(s) whose tables had been changed since they were "
                    f"written (--trust-damaged): {'; '.join(map(str, damaged[:3]))}.")
    return said


def _manifest_is_a_copy(run: RunDir, manifest: dict | None) -> bool:
    """Whether ``run``'s manifest disagrees with its own fingerprint (:func:`manifest_disagrees`); a
    damaged fingerprint decides nothing."""
    try:
        return manifest_disagrees(run.fingerprint(), manifest)
    except HarnessError:
        return False


def _state_note(run: RunDir, manifest: dict | None, allow_failed: bool) -> str | None:
    """The page's sentence on ``run`` (None: nothing to say), or a refusal; ``manifest`` as
    :func:`_quiet_manifest` read it."""
    holder = held_by(run.path)
    if holder is not None and lock_command(run.path) != "sweep":  # its tables are final: only its report is redrawn
        raise HarnessError(f"{run}'s report is being redrawn by {writer(run.path)} ({holder}): wait for it to finish")
    if holder is not None:
        raise HarnessError(f"{run} is being written by {writer(run.path)} ({holder}): its tables are not final and nothing may be "
                           f"written into it; read it once the sweep has finished")
    info = run.status()
    if info is None:
        if manifest is None:  # damaged: the reader refuses it (or reads it with --trust-damaged)
            return None
        if "collected" in manifest:  # a collected table set: complete unless collect said otherwise
            incomplete = manifest.get("incomplete") or []
            said = collected_notes(run, manifest)
            if not incomplete:
                return " ".join(said) or None
            if not allow_failed:
                raise HarnessError(f"{run} was collected from {len(incomplete)} run(s) that did not finish (first: "
                                   f"{incomplete[0]}); finish them and collect again, or pass --allow-failed "
                                   f"to read what finished (the pages then say what is missing)")
            return " ".join([f"{run} was collected from {len(incomplete)} run(s) that did not finish (read with "
                             f"--allow-failed): {'; '.join(str(p) for p in incomplete[:3])}.", *said])
        if not run.is_run() or run.output_of():  # not a run (another command's output): the reader says so
            return None
        raise HarnessError(f"{run} did not finish (no {RunDir.STATUS}): finish it with `harness resume {shell_path(run)}`")
    state = info.get("status")
    planned = ((manifest or {}).get("counts") or {}).get("conditions")
    finished = info.get("manifest_finished")  # runs of versions before it have none
    counted = isinstance(info.get("conditions"), int) and isinstance(planned, int) and info["conditions"] != planned
    if counted or (isinstance(finished, str) and isinstance((manifest or {}).get("finished"), str)
                   and manifest["finished"] != finished):
        differ = (f"status.json counts {info['conditions']} conditions and manifest.json {planned}" if counted else
                  "status.json was written for another manifest.json than this one")
        stray = ("manifest.json records another configuration or other input files than the run's own "
                 "run_fingerprint.json: a manifest and tables copied from another run?"
                 if _manifest_is_a_copy(run, manifest) else "a status.json copied from another run?")
        raise HarnessError(f"{run}: {differ}: the files belong to different sweeps ({stray}); rebuild them from the "
                           f"run's own results with `harness resume {shell_path(run)}`")
    if state == "complete":
        recorded = (manifest or {}).get("failures") or []
        if recorded:  # a status.json copied from another run, or edited: the two files disagree
            raise HarnessError(f"{run}: status.json says complete but manifest.json records {len(recorded)} failed "
                               f"condition(s) (first: {recorded[0]}): the files disagree; rebuild them with "
                               f"`harness resume {shell_path(run)}`")
        return None
    if state == "failed":
        failed, total = len(info.get("failed") or []), info.get("conditions")
        of = f" of {total}" if isinstance(total, int) else ""
        if not failed and info.get("error"):  # it failed after its conditions (the noise floor, the tables)
            why = (f"{run} failed after its conditions ({info['error']}): every condition has a result but what "
                   f"followed did not finish")
            if not allow_failed:
                raise HarnessError(f"{why}; `harness resume {shell_path(run)}` finishes it, or pass --allow-failed to read "
                                   f"the conditions")
            return f"{why} (read with --allow-failed); `harness resume {shell_path(run)}` finishes it."
        if not allow_failed:
            raise HarnessError(f"{run} is a failed run: {failed}{of} conditions failed and its tables hold only the "
                               f"others; `harness resume {shell_path(run)}` retries them, or pass --allow-failed to read what "
                               f"finished (the pages then say what is missing)")
        return (f"{run}: {failed}{of} conditions failed and are missing from these tables (status failed, read with "
                f"--allow-failed); `harness resume {shell_path(run)}` retries them.")
    if state == "running":  # nobody holds the lock: the sweep was killed without a word
        raise HarnessError(f"{run} did not finish: its status says running but no sweep holds it (the process was "
                           f"killed); finish it with `harness resume {shell_path(run)}`")
    why = f" ({info.get('error')})" if info.get("error") else ""
    if state == "error":  # stopped by its configuration or its input: a resume as it is stops the same way
        raise HarnessError(f"{run} did not finish: its status is error{why}; what stopped it must change first: fix "
                           f"the input, or resume with the setting changed (`harness resume {shell_path(run)} KEY=VALUE "
                           f"--accept-changes`), or sweep anew")
    state = state or f"not stated (its {RunDir.STATUS} names none)"
    raise HarnessError(f"{run} did not finish: its status is {state}{why}; finish it with `harness resume {shell_path(run)}`")


def _quiet_manifest(run: RunDir) -> dict | None:
    """The run's manifest for what its state says ({} where absent), None where damaged: the reader
    that needs it refuses that in its own words, once, without a warning here."""
    try:
        return run.manifest() or {}
    except HarnessError:
        return None


def is_cache_timing(run: RunDir) -> bool:
    """Whether ``run`` is a ``harness cache-timing`` run (by its manifest, or its tables where the
    manifest is gone)."""
    return (_quiet_manifest(run) or {}).get("kind") == "cache-timing" or (
        not run.has(RunDir.CONDITIONS) and (run.has("leak.parquet") or any((run / "results").glob("phase-*"))))


def not_a_run(run: RunDir, takes: str = "runs") -> str:
    """Why a path given as a run is not one, in a sentence that says what to give instead: for a
    multirun, its jobs, or their collection where the command ``takes`` "runs" (collected sets
    too), not where it takes "sweeps" (each run's own) or "one" (one of them)."""
    if not run.path.exists():
        return f"{run} does not exist: give a run directory (a sweep's{', or collected ones' if takes == 'runs' else ''})"
    if not run.path.is_dir():
        glob = " (a glob over a multirun: DIR/*/ takes its jobs)" if run.path.name == "multirun.yaml" else ""
        return f"{run} is a file, not a run directory: give a sweep's directory{' (or a collected one)' if takes == 'runs' else ''}{glob}"
    if is_cache_timing(run):
        if not run.has(RunDir.MANIFEST):
            return (f"{run} is a harness cache-timing run without its {RunDir.MANIFEST} (deleted?): `harness resume "
                    f"{run}` writes it again from the phases stored under results/")
        return (f"{run} is a harness cache-timing run (its tables: trials.parquet, leak.parquet), not a sweep's: "
                f"`harness figures {shell_path(run)}` redraws its page; this command reads sweeps")
    command = run.output_of()  # first: detect's output has a status.json of its own, as a sweep's has
    if command:
        return f"{run} holds the output of `harness {command}`, not a run: give the run directories it was made from"
    if (_quiet_manifest(run) or {}).get("tables", {}).get(RunDir.CONDITIONS) or run.made_by_a_sweep():
        if (state := run.previous_status()) in ("interrupted", "running", "error", "failed"):  # it never wrote them
            return f"{run} stopped ({state}) before its sweep wrote its tables: finish it with `harness resume {shell_path(run)}`"
        return (f"{run / RunDir.CONDITIONS} is missing (the sweep wrote it; deleted or not copied?): rebuild it from "
                f"results/ with `harness resume {shell_path(run)}`")
    if (run.path / "multirun.yaml").is_file():  # a sweep over settings (-m): its jobs are the runs
        jobs = [job for job in job_dirs(run.path) if job.has(RunDir.CONDITIONS)]
        shown = " ".join(str(job.path) for job in jobs[:3]) + (" ..." if len(jobs) > 3 else "") or "none has tables yet"
        if takes == "one":
            return (f"{run} is a multirun (-m), whose jobs are the runs, and this command reads one run: give one of "
                    f"its jobs ({shown})")
        collect = f", or merge them first with `harness collect {shell_path(run)} --out DIR`" if takes == "runs" else ""
        return f"{run} is a multirun (-m), whose jobs are the runs: give them ({shown}){collect}"
    return f"{run}: no {RunDir.CONDITIONS} here, so it is not a run directory: give a sweep's{' (or a collected)' if takes == 'runs' else ''} one"


def refuse_collected(run: RunDir, manifest: dict, why: str, one_run: bool = False) -> None:
    """Refuse a collected table set (``harness collect``'s output) where a command needs a sweep of
    its own (``why``), naming the runs it was collected from (``one_run``: the command reads one of
    them) and saying so where they are no longer where it recorded them."""
    if "collected" not in manifest:
        return
    sources = [str(s.get("run")) for s in manifest.get("sources") or [] if isinstance(s, dict)]
    listed = f"{', '.join(sources[:3]) or 'none recorded'}{' ...' if len(sources) > 3 else ''}"
    gone = [s for s in sources if not (Path(s) / RunDir.CONDITIONS).is_file()]
    where = f"; recorded as {listed}, {'none' if len(gone) == len(sources) else 'not all'} of them there any more" \
        if gone else f" ({listed})"
    raise HarnessError(f"{run} is a collected table set (harness collect), {why}: give "
                       f"{'one of the runs' if one_run else 'the runs'} it was collected from{where}")


def has_table(run: RunDir, name: str, trust_damaged: bool = False) -> bool:
    """Whether the run holds table ``name``; one its manifest lists but the directory lacks (a
    deleted file) is refused, not read as a run that never measured it (``trust_damaged``: warned,
    and read as absent)."""
    if run.has(name):
        return True
    manifest = _quiet_manifest(run) or {}
    if name not in (manifest.get("tables") or {}):
        return False
    message = (f"{run / name} is missing, though {RunDir.MANIFEST} lists it (the sweep wrote it; the file was "
               f"deleted or not copied): rebuild it from results/ with `harness resume {shell_path(run)}`")
    if not trust_damaged:
        raise HarnessError(message + ", or pass --trust-damaged to read the run without it")
    log.warning("%s; read without it (--trust-damaged)", message)
    return False


class RunTables(NamedTuple):
    """One run's (or one collected directory's) tables and manifest, as a notebook works with them."""

    conditions: pd.DataFrame
    attention: pd.DataFrame | None  # None for behaviour-only sweeps (analysis.attention=false)
    noise: pd.DataFrame | None  # None when no noise floor was measured
    manifest: dict | None


def load_run(run_dir: str | Path, trust_damaged: bool = False, allow_mixed_settings: bool = False,
             allow_failed: bool = False) -> RunTables:
    """The tables and manifest of one run directory (a sweep's, or ``harness collect``'s output),
    read as :func:`load_runs` reads runs."""
    if not isinstance(run_dir, (str, os.PathLike)):  # a list: load_runs reads several
        raise HarnessError(f"load_run takes one run directory's path (H.load_runs reads several), got {run_dir!r}")
    conditions, attention = load_runs([Path(run_dir)], trust_damaged, allow_mixed_settings, allow_failed)
    return RunTables(conditions, attention, load_noise([Path(run_dir)], trust_damaged),
                     RunDir(run_dir).manifest(trust_damaged))


def run_tables(run_dirs: list[Path], trust_damaged: bool = False, allow_mixed_settings: bool = False) -> tuple:
    """``([conditions per run], [attention per run, None where it has none])``, each table checked
    against its manifest's sha256, the runs checked against each other (:mod:`harness.runs.compat`)."""
    runs = [RunDir(d) for d in run_dirs]
    conditions, attention = [], []
    for run in runs:
        conditions.append(run.conditions(trust_damaged))
        attention.append(run.table(run.ATTENTION, trust_damaged) if has_table(run, run.ATTENTION, trust_damaged)
                         else None)
    mixed = check_compatible(*compared_settings(runs, [r.manifest(trust_damaged) or {} for r in runs]),
                             allow_mixed_settings=allow_mixed_settings)
    if mixed:
        log.warning("the runs differ in %s; read together (--allow-mixed-settings)", "; ".join(mixed))
    if len(runs) > 1:
        refuse_one_key_two_texts(conditions, [str(r.path) for r in runs])
    return conditions, attention


def merge_runs(conditions: list[pd.DataFrame], attention: list[pd.DataFrame | None], names: list[str],
               allow_mixed_settings: bool = False) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The runs' tables as one, each condition once: a key in several runs (group A in every job of
    a multirun, or jobs that differ only in a setting no key holds) is read once, as ``harness
    collect`` keeps it, and said in a warning. Copies with different results are refused (unless
    the settings were mixed on purpose: then every copy is read, as the page says)."""
    if len(conditions) == 1:
        return concat_tables(conditions), (concat_tables(attention) if attention[0] is not None else None)
    no_attention = {i for i, a in enumerate(attention) if a is None}
    merged = concat_tables([c.assign(_source=i) for i, c in enumerate(conditions)])
    deduped, dropped, disagree = dedupe(merged, ROW_KEYS, COMPARED, no_attention, keep_differing=allow_mixed_settings)
    if disagree and not allow_mixed_settings:
        key, column, i, j = disagree[0]
        raise HarnessError(f"{len(disagree)} condition(s) are in {names[i]} and {names[j]} with different results "
                           f"(first: {dict(zip(ROW_KEYS, key))}, column {column!r}): read together they would "
                           f"count twice; `harness collect` them (it names the settings they differ in)")
    if dropped:  # with mixed settings only copies that differ are kept (each its setting's result, as the page says)
        log.warning("%d condition(s) appear in more than one of these runs (e.g. group A in every job) with the same "
                    "results: each is read once%s", dropped, " (copies that differ are kept, one per run)" * bool(disagree))
    frames = [with_position(a, conditions[i]).assign(_source=i) for i, a in enumerate(attention) if a is not None]
    if disagree:  # copies kept (mixed settings): a column says whose each is, so that the analysis API can
        # tell them from one run's table concatenated with another's (harness.analysis.checks)
        deduped = deduped.assign(run=[names[i] for i in deduped["_source"]])
    return deduped.drop(columns="_source"), (merged_attention(frames, allow_mixed_settings, names) if frames else None)


def run_paths(run_dirs, caller: str, **flags) -> list:
    """The run directories a notebook reader was given, as a list (a bare path is one run; a generator, taken
    once), its switches (``flags``) each True or False: the string "no" is true, and would read what it refuses."""
    bad = next((name for name, flag in flags.items() if not isinstance(flag, bool)), None)
    if bad is not None:
        raise HarnessError(f"{caller}: {bad} must be True or False, got {flags[bad]!r}")
    if isinstance(run_dirs, (str, os.PathLike)):
        run_dirs = [run_dirs]
    try:
        run_dirs = list(run_dirs)
    except TypeError:
        raise HarnessError(f"{caller} takes run directories' paths (a list), got {run_dirs!r}") from None
    if not run_dirs:
        raise HarnessError(f"{caller}: give at least one run directory")
    if not all(isinstance(d, (str, os.PathLike)) for d in run_dirs):
        raise HarnessError(f"{caller} takes run directories' paths, got {run_dirs!r}")
    return run_dirs


def load_runs(run_dirs: list[Path], trust_damaged: bool = False, allow_mixed_settings: bool = False,
              allow_failed: bool = False) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``(conditions, attention)`` of the runs, as a notebook reads them: refused where the commands
    refuse them (:func:`reading_notes`: a run given twice, unfinished, or failed unless
    ``allow_failed``; a table changed since it was written unless ``trust_damaged``; runs in
    different settings unless ``allow_mixed_settings``), and what the pages would say is warned.
    Attention is None where no run has one (behaviour-only sweeps)."""
    import warnings

    run_dirs = run_paths(run_dirs, "load_runs", trust_damaged=trust_damaged,
                         allow_mixed_settings=allow_mixed_settings, allow_failed=allow_failed)
    for note in reading_notes(list(map(Path, run_dirs)), allow_failed=allow_failed, trust_damaged=trust_damaged,
                              allow_mixed_settings=allow_mixed_settings, mixed_option="allow_mixed_settings=True"):
        warnings.warn(note, stacklevel=2)
    return read_runs(run_dirs, trust_damaged, allow_mixed_settings)


def read_runs(run_dirs: list[Path], trust_damaged: bool = False,
              allow_mixed_settings: bool = False) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """:func:`run_tables` as one (:func:`merge_runs`), for a command that has read the runs' state
    already (:func:`reading_notes`); attention None where no run has one."""
    conditions, attention = run_tables(run_dirs, trust_damaged, allow_mixed_settings)
    return merge_runs(conditions, attention, [str(d) for d in run_dirs], allow_mixed_settings)


def refuse_reference_only(conditions: pd.DataFrame, command: str) -> None:
    """Refuse tables of group A alone: every page ``command`` writes compares B and C with A."""
    if not {"B", "C"} & set(conditions.group.astype(str)):
        raise HarnessError(f"the runs hold group A only (the task prompts alone): {command} compares B and C with A; "
                           f"run the sweep with groups=[A,B,C]")


def compared_settings(runs: list[RunDir], manifests: list[dict]) -> tuple[list[Settings], list[str]]:
    """The settings of each run read (:func:`harness.runs.compat.run_settings`), and the runs that
    recorded none (early versions)."""
    settings, unrecorded = [], []
    for run, manifest in zip(runs, manifests):
        settings += (found := run_settings(str(run.path), manifest))
        if not found:
            unrecorded.append(str(run.path))
    return settings, unrecorded


def load_noise(run_dirs: list[Path], trust_damaged: bool = False) -> pd.DataFrame | None:
    """The noise-floor tables of the runs that measured one, each condition once (None if none did: a
    run that is not one, or a run given twice, is refused, not read as one without a noise floor)."""
    run_dirs = run_paths(run_dirs, "load_noise", trust_damaged=trust_damaged)
    refuse_given_twice(run_dirs, "its noise floor")
    for run in map(RunDir, run_dirs):
        if not run.has(RunDir.CONDITIONS):
            raise HarnessError(not_a_run(run))
    frames = [r.table(r.NOISE, trust_damaged) for r in map(RunDir, run_dirs) if has_table(r, r.NOISE, trust_damaged)]
    noise = concat_tables(frames) if frames else None  # runs of the same conditions measured some of them twice
    return noise if noise is None else noise.drop_duplicates([k for k in (*ROW_KEYS, "comparison") if k in noise])
