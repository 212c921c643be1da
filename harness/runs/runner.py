"""One sweep, start to finish: claim the run directory, build the experiment, drive it, store each
result as it finishes, rebuild the tables, write the manifest, figures and report, and only then
say "complete".

``run(cfg, run_dir)`` is a plain function (the Hydra entry point in :mod:`harness.cli` only calls
it), so it can be tested and called from a notebook with a config from :func:`harness.config.compose`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from harness.analysis.checks import check_flags
from harness.analysis.verdicts import deltas_for
from harness.config import NOT_RESULT_KEYS, config_differences, override_list, recorded_config, validate
from harness.errors import HarnessError
from harness.io import write_parquet, write_sealed_json
from harness.measure.driver import DriveOutcome
from harness.measure.engine import PhaseClock
from harness.measure.noise import (
    flag_near_ties,
    margin_floor,
    measure_noise_floor,
    noise_cells,
    noise_sample,
    noise_size,
)
from harness.measure.records import condition_keys, condition_label
from harness.paths import shell_path
from harness.reporting.edits import keep_edited_table
from harness.reporting.report import write_outputs
from harness.runs.compute import Computed, compute
from harness.runs.environment import now_iso
from harness.runs.experiment import Experiment
from harness.runs.inputs import of_config
from harness.runs.manifest import build_manifest
from harness.runs.outdir import drop_report, enclosing_run, other_output
from harness.runs.rundir import RunDir
from harness.runs.schema import row_key
from harness.runs.store import ResultStore, fingerprint
from harness.runs.tables import attention_frame, conditions_frame

log = logging.getLogger(__name__)
STATUS_EVERY_S = 60  # how often status.json says how far a running sweep has got


class SweepFailed(Exception):
    """Some conditions failed; the others' tables were written. Rerun the same command to retry."""

    def __init__(self, run_dir: Path, failures: list[str]):
        self.run_dir, self.failures = run_dir, failures
        names = ", ".join(failures[:5]) + (" ..." if len(failures) > 5 else "")
        super().__init__(f"{len(failures)} condition(s) failed in {run_dir}: {names}; the tables hold the others. "
                         f"Rerun the same command with hydra.run.dir={shell_path(run_dir)} to retry only the failed ones")


def _refuse_other_command(config: dict, overrides: list[str] | None) -> None:
    """From Python, ``overrides`` must compose the config being run: `harness resume` reruns them, and
    another config would be refused there as "changed" without a word here about why."""
    if overrides is None:
        return
    from harness.config import compose

    composed = recorded_config(validate(compose(overrides)), overrides)
    differ = [key for key, _, _ in config_differences(config, composed)]
    if differ:
        raise HarnessError(f"overrides= must be the command line cfg was composed from (harness resume reruns it): "
                           f"H.compose({overrides!r}) gives another config (it differs in {', '.join(differ[:3])}); "
                           f"pass the list you gave H.compose")


def _refuse_other_outputs(rundir: RunDir) -> None:
    """A sweep writes a directory of its own: not a locate search's, a cache-timing run's, a
    command's ``--out`` or one inside another run (:func:`harness.runs.outdir.other_output`,
    :func:`~harness.runs.outdir.enclosing_run`; the CLI checks ``hydra.run.dir`` the same way; this is
    the API's check)."""
    held = other_output(rundir.path)
    if held:
        raise HarnessError(f"{rundir.path} holds {held}; a sweep writes a directory of its own: choose another")
    inside = enclosing_run(rundir.path)
    if inside is not None:
        raise HarnessError(f"{rundir.path} is inside the run directory {inside}: a run never writes into another; "
                           f"choose a directory outside it")
    if rundir.path.is_dir() and any(rundir.path.iterdir()) and not rundir.made_by_a_sweep():
        shown = ", ".join(sorted(p.name for p in rundir.path.iterdir())[:4])
        raise HarnessError(f"{rundir.path} holds files that are not a run's ({shown}, ...): a sweep would write over "
                           f"them; choose a new or empty directory")


def run(cfg, run_dir: str | Path, *, overrides: list[str] | None = None, progress: bool = True,
        from_command_line: bool = False) -> Path:
    """Run the sweep described by ``cfg`` into ``run_dir`` (``overrides``: the command line that
    produced ``cfg``, a list of KEY=VALUE strings, kept for ``harness resume`` and checked to compose
    ``cfg``; without it the run is resumed by calling ``run`` again, not by ``harness resume``).
    ``from_command_line``: the CLI's Hydra app composed ``cfg`` from ``overrides`` itself (not
    composed again to check).

    Results already stored in ``run_dir`` by an interrupted run of the same configuration are
    verified and reused. Raises :class:`HarnessError` for a refused directory or configuration
    (the directory untouched) or for input that turns out bad once the run is claimed (status
    ``error``), :class:`SweepFailed` after writing the tables of the rest if a condition failed,
    and lets KeyboardInterrupt through after marking the run interrupted."""
    overrides = None if overrides is None else override_list(overrides)  # a string would be recorded letter by letter
    check_flags(progress=progress)
    cfg = validate(cfg)
    rundir, config = RunDir(run_dir), recorded_config(cfg, overrides)
    _refuse_other_command(config, None if from_command_line else overrides)
    _refuse_other_outputs(rundir)
    result_config = fingerprint({k: v for k, v in config.items() if k not in NOT_RESULT_KEYS})
    inputs = of_config(cfg)
    check_inputs(cfg)  # a refused input file or device leaves no run directory behind
    with rundir.claim(result_config, cfg.on_existing.value, inputs) as store, _log_file(rundir / RunDir.LOG):
        previous = rundir.previous_status()
        new_run = previous is None and not rundir.has(RunDir.FINGERPRINT)
        started, clock, owned = now_iso(), PhaseClock(), False
        try:
            # the model loads before anything of the run changes: a sweep that cannot start (model
            # missing, offline) leaves an existing run, its .hydra/ and its fingerprint as they were
            exp = Experiment.build(cfg, log_dir=rundir.path)  # an engine's log stays with the run
            try:
                clock.lap("setup")
                rundir.take_over(store, result_config, cfg.on_existing.value, inputs)
                rundir.write_hydra(config, overrides)
                owned = True
                return _sweep(cfg, config, rundir, store, exp, clock, started, progress, inputs)
            finally:
                exp.close()  # the vLLM engine's process, where there is one
        except HarnessError as exc:
            if new_run and not owned:  # keep the command, so that `harness resume` can retry it
                rundir.write_hydra(config, overrides)
            if owned or previous != "complete":  # a complete run a rerun could not start stays complete
                rundir.write_status("error", error=str(exc))
            raise
        except KeyboardInterrupt:
            # a signal that arrived while a file was being created can leave its temporary file
            store.remove_partial_writes()
            if new_run and not owned:  # keep the command, so that the `harness resume` it advises works
                rundir.write_hydra(config, overrides)
            if owned or previous != "complete":
                rundir.write_status("interrupted", error="interrupted (Ctrl-C or SIGTERM)")  # readers say how to resume
            raise
        except SweepFailed:  # its status ("failed", with the conditions) is written
            raise
        except Exception as exc:  # a bug: the status says so instead of "running" forever
            if owned or previous != "complete":
                rundir.write_status("error", error=f"internal error ({type(exc).__name__}: {exc}); please report it")
            raise


def _sweep(cfg, config: dict, rundir: RunDir, store: ResultStore, exp: Experiment, clock: PhaseClock,
           started: str, progress: bool, inputs: dict) -> Path:
    analysis = cfg.analysis
    earlier = earlier_timing(rundir)  # before this sweep rewrites status.json and the manifest
    unknown = sorted(set(cfg.debug.fail_conditions) - {condition_label(c) for c in exp.conditions})
    if unknown:
        log.warning("debug.fail_conditions names no condition of this sweep: %s (labels are prompt/prefix/length, "
                    "e.g. %s)", ", ".join(unknown[:3]), condition_label(exp.conditions[-1]))
    n_others = sum(c.group != "A" for c in exp.conditions)
    if not n_others:
        log.warning("groups=[A]: this run holds the task prompts alone (the references); drift, the report and the "
                    "claims compare B and C with A, so no figures or report are drawn (groups=[A,B,C] compares)")
    size = noise_size(n_others, analysis.noise_fraction, analysis.noise_min, analysis.noise_max,
                      noise_cells(exp.conditions))
    if analysis.noise_floor and size < min(analysis.noise_min, n_others):
        log.info("noise floor: %d of %d B/C conditions, a quarter of this small sweep's (analysis.noise_min=%d: each is "
                 "computed again alone, step by step; analysis.noise_fraction=1 takes them all)", size, n_others,
                 analysis.noise_min)
    sample = noise_sample(exp.conditions, size) if analysis.noise_floor else []
    in_sample, batched = set(sample), {}  # the sweep's batched results of the noise sample, with their step log-probs
    exp.engine.keep_step_logp = frozenset(in_sample)  # no other result needs them
    exp.engine.expected_later = tuple(c for c in sample if c.group != "A")  # the noise floor reads their heads again
    sampled_prompts, references = {c.prompt_id for c in sample}, {}  # and the A references of their prompts
    heartbeat = {"done": 0, "written": time.monotonic()}

    def start(reused: int) -> None:
        heartbeat["done"] = reused
        rundir.write_status("running", conditions=len(exp.conditions), done=reused)

    def keep(result, ref, alone: bool) -> None:
        if result.condition in in_sample and not alone:
            batched[result.condition] = result
        if ref.condition.prompt_id in sampled_prompts:
            references[ref.condition.prompt_id] = ref
        heartbeat["done"] += 1
        if time.monotonic() - heartbeat["written"] > STATUS_EVERY_S:  # for long sweeps
            rundir.write_status("running", conditions=len(exp.conditions), done=heartbeat["done"])
            heartbeat["written"] = time.monotonic()

    computed = compute(exp, exp.conditions, store=store, on_result=keep, on_start=start,
                       fail_on=frozenset(cfg.debug.fail_conditions), progress=progress)
    outcome = DriveOutcome(computed.computed, computed.reused, computed.failures)
    clock.lap("conditions")
    condition_seconds = exp.engine.clock.rounded()  # before the noise floor runs conditions again
    failed = [condition_label(c) for c, _ in outcome.failures]
    log.info("%d conditions computed, %d reused from earlier runs, %d failed", outcome.computed, outcome.skipped,
             len(failed))
    tables = tables_of(computed, exp.engine.attention)
    clock.lap("tables")
    if sample and tables:
        floor = earlier_noise_floor(rundir, sample, exp.model_label, exp.batch_size) if not outcome.computed else None
        if floor is not None:
            log.info("noise floor: every result was reused, and so is the noise table measured with them")
        else:
            floor = measure_noise_floor(exp.engine, exp.conditions, sample, exp.batch_size, exp.model_label, batched,
                                        progress, references)
        if not floor.empty:
            tables[RunDir.NOISE] = floor
        clock.lap("noise floor")
    if tables:
        tables[RunDir.CONDITIONS] = flag_near_ties(tables[RunDir.CONDITIONS], margin_floor(tables.get(RunDir.NOISE)))
    before = (rundir.manifest(trust_damaged=True, rebuilding=True) or {}).get("tables") if rundir.has(RunDir.MANIFEST) \
        else None
    for name, df in tables.items():
        keep_edited_table(rundir / name, (before or {}).get(name))
        write_parquet(df, rundir / name)
    if not outcome.computed and earlier is not None:
        # every result was reused: the seconds they cost are the earlier sweep's (what plan prices a
        # design by), not this one's reading them back
        condition_seconds, started = earlier["condition_seconds"], earlier["started"] or started
    manifest = build_manifest(exp, config, started, outcome, failed, tables, rundir, condition_seconds, inputs)
    write_sealed_json(manifest, rundir / RunDir.MANIFEST)
    clock.lap("tables")
    if not cfg.draw_figures and before and before != manifest["tables"]:  # a report of the tables replaced
        dropped = drop_report(rundir.path)
        if dropped:
            log.info("removed %s, drawn from the tables this run replaced: `harness figures %s` draws them anew",
                     ", ".join(dropped), rundir.path)
    if cfg.draw_figures and tables and any(c.group != "A" for c in exp.conditions):
        write_outputs(tables[RunDir.CONDITIONS], tables.get(RunDir.ATTENTION), rundir.path,
                      noise=tables.get(RunDir.NOISE), manifests=[manifest], deltas=dict(cfg.claims.delta))
        log.info("figures in %s, report %s", (rundir / RunDir.FIGURES).resolve(), (rundir / RunDir.REPORT).resolve())
        clock.lap("figures and report")
    log.info("seconds spent: %s", ", ".join(f"{k} {v:.1f}" for k, v in clock.seconds.items()))
    seconds = clock.rounded()
    if not outcome.computed and earlier is not None:
        seconds = {**earlier["seconds"], "rerun": round(sum(seconds.values()), 1)}
    # the manifest's time of writing ties this status to it: a status.json copied from another run of the same
    # size is seen (its sha256 would be too, but also every edit a reader names more precisely: a table dropped)
    rundir.write_status("failed" if failed else "complete", conditions=len(exp.conditions), failed=failed,
                        seconds=seconds, manifest_finished=manifest["finished"])
    log.info("wrote %s", rundir.path.resolve())
    if failed:
        raise SweepFailed(rundir.path, failed)
    return rundir.path


def check_inputs(cfg) -> None:
    """What can be refused before the run directory is claimed, cheaply: the prompts file, a prefix
    file (a public benchmark is read once, when the experiment is built) and the device."""
    from harness.inputs.conditions import refuse_missing_kinds
    from harness.inputs.texts import load_prefixes, load_prompts
    from harness.model.loading import resolve_device

    try:  # the verdicts' smallest effects of interest: refused before hours of conditions, not at the report
        deltas_for(dict(cfg.claims.delta))
    except ValueError as exc:
        raise HarnessError(f"claims.delta: {exc}") from None
    texts = logging.getLogger("harness.inputs.texts")
    texts.disabled = True  # refusals only: the experiment reads the files again and warns once (an unknown field)
    try:
        load_prompts(cfg.prompts.path, cfg.prompts.limit)
        if cfg.prefixes.path and not cfg.prefixes.corpus:
            # the experiment's own refusal, before the model loads
            refuse_missing_kinds(load_prefixes(cfg.prefixes.path), [getattr(g, "name", str(g)) for g in cfg.groups])
    finally:
        texts.disabled = False
    resolve_device(cfg.model.device)


def earlier_timing(rundir: RunDir) -> dict | None:
    """What the sweep that computed this run's results measured of its seconds (status.json's phases,
    the manifest's condition seconds and start), where a complete earlier sweep left them; else None."""
    try:
        status, manifest = rundir.status() or {}, rundir.manifest() or {}
    except HarnessError:  # damaged: this sweep's own seconds, as for a new run
        return None
    if status.get("status") != "complete" or not isinstance(status.get("seconds"), dict) \
            or not manifest.get("condition_seconds"):
        return None
    return {"seconds": status["seconds"], "condition_seconds": manifest["condition_seconds"],
            "started": manifest.get("started")}


def earlier_noise_floor(rundir: RunDir, sample, model_label: str, batch_size: int) -> pd.DataFrame | None:
    """The noise table this run directory already holds, when it measured exactly this sample at
    this batch size (and is the table the run wrote); else None. Used when a rerun computed no
    result: its results are the stored ones, so their noise is what was measured then."""
    if not rundir.has(RunDir.NOISE):
        return None
    try:
        table = rundir.table(RunDir.NOISE)
    except HarnessError as exc:  # damaged: measure again
        log.warning("%s: this sweep rewrites it, and measures the noise floor again", str(exc).split("; ")[0])
        return None
    want = {row_key(*condition_keys(model_label, c).values()) for c in sample if c.group != "A"}
    have = {row_key(*row) for row in table[list(condition_keys(model_label, sample[0]))].itertuples(index=False)}
    same_batches = "batch_size" in table and set(table.batch_size.dropna().astype(int)) == {batch_size}
    return table if want == have and same_batches else None


def tables_of(computed: Computed, attention: bool) -> dict[str, pd.DataFrame]:
    """The run's tables from its rows (as stored), in the sweep's condition order."""
    rows = list(computed.rows.items())
    tables = {RunDir.CONDITIONS: conditions_frame([row.record for _, row in rows])} if rows else {}
    if attention and rows:
        tables[RunDir.ATTENTION] = attention_frame(
            [{k: row.record[k] for k in condition_keys("", cond)} for cond, row in rows],
            [row.attention for _, row in rows], [row.n_queries for _, row in rows])
    return tables


@contextlib.contextmanager
def _log_file(path: Path) -> Iterator[None]:
    """Also log to ``path`` while the sweep runs (only once the run directory is claimed)."""
    if path.exists() and not path.is_file():
        raise HarnessError(f"{path} is not a file (a directory?), and the run's log is written there: move it away")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    ours = logging.getLogger("harness")
    level = ours.level
    ours.setLevel(min(level or logging.INFO, logging.INFO))
    ours.addHandler(handler)
    try:
        yield
    finally:
        ours.removeHandler(handler)
        ours.setLevel(level)
        handler.close()


