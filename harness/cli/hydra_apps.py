"""The Hydra applications: ``sweep``, ``locate``, ``cache-timing`` and ``resume`` (config overrides, ``-m`` for
multirun, ``--config-dir DIR`` for your own ``model/``, ``prompts/``, ``prefixes/`` and ``experiment/`` configs).
Each task is a thin wrapper over a plain function (:func:`harness.runs.runner.run`, :func:`harness.runs.locate.locate`)
turning its errors into exit statuses; what Hydra refuses (a misspelt key) exits 2 like every user error."""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path

from harness.cli import report_bug
from harness.cli.guards import check_run_dir, check_sweep_dir, run_directory
from harness.cli.overrides import check_config_dir, check_hydra_flags, hydra_quoted, option
from harness.errors import HarnessError, Terminated, on_sigterm
from harness.paths import shell_path

log = logging.getLogger("harness")
STARTED = time.time()  # when this command started: a run directory made after it is this command's own


def _drop_if_made_empty(run_dir: Path) -> None:
    """Remove ``run_dir`` if this command made it (Hydra makes it before the task runs) and left it
    empty: a refused configuration leaves no run directory behind. A directory that was there
    before, or holds anything, stays."""
    try:
        if run_dir.is_dir() and not any(run_dir.iterdir()) and run_dir.stat().st_mtime >= STARTED - 1:
            run_dir.rmdir()
    except OSError:
        pass


class TaskExit(BaseException):
    """How a Hydra task ends with an exit status: a BaseException passes through Hydra's own
    error reporting (which turns every Exception into status 1)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def _command_line(hydra_cfg) -> list[str]:
    """The overrides as typed (``seed=${x}`` kept unresolved: resolving it here raised an
    interpolation error past the config's own check)."""
    from omegaconf import OmegaConf

    return list(OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False))


def _refused(exc: Exception, run_dir: Path, code: int = 2) -> TaskExit:
    """A task's refusal: its one line, and the run directory Hydra made for it gone if left empty."""
    print(f"error: {exc}", file=sys.stderr)
    _drop_if_made_empty(run_dir)
    return TaskExit(code)


def _sweep_task(cfg) -> str | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from harness.config import as_plain
    from harness.runs.rundir import RunDir
    from harness.runs.runner import SweepFailed, run

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        run(cfg, run_dir, overrides=_command_line(hydra_cfg), from_command_line=True)
    except KeyboardInterrupt as exc:
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        from harness.runs.multirun import expected_jobs

        jobs = expected_jobs(Path(hydra_cfg.sweep.dir)) if hydra_cfg.mode == RunMode.MULTIRUN else None
        if hydra_cfg.mode == RunMode.MULTIRUN and (jobs is None or int(hydra_cfg.job.num) + 1 < jobs):
            # the jobs after this one never start: resuming this one is not enough
            print(f"\n{how}: finished conditions are kept in {run_dir}/results, and the multirun's later jobs did not "
                  f"start; continue with the same `harness sweep -m` command (it resumes this job and runs the rest "
                  f"into {run_dir.parent})", file=sys.stderr)
        else:
            print(f"\n{how}: finished conditions are kept in {run_dir}/results; continue with: harness resume "
                  f"{shell_path(run_dir)}", file=sys.stderr)
        raise TaskExit(143 if isinstance(exc, Terminated) else 130) from None
    except (HarnessError, SweepFailed) as exc:
        if hydra_cfg.mode == RunMode.MULTIRUN:
            log.error("%s", exc)  # the job's own line in the multirun's log (a single run's is the error below)
            rundir = RunDir(run_dir)
            if not rundir.is_run():  # a new job directory: say why it holds nothing
                rundir.write_hydra(as_plain(cfg), _command_line(hydra_cfg))
                rundir.write_status("error", error=str(exc))
            # the other jobs go on; the multirun summary names this one and sets the exit status (a refused
            # job in an earlier sweep's finished directory left it as it was: only its return says so)
            return f"{run_dir}: refused ({exc})"
        raise _refused(exc, run_dir, 2 if isinstance(exc, HarnessError) else 1) from None
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: say so, with its own status
        raise TaskExit(report_bug(exc)) from None


def _locate_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from harness.runs.locate import LocateStopped, locate

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        locate(cfg, run_dir)
    except LocateStopped as exc:
        terminated = isinstance(exc.signal, Terminated)
        kept = (f"the {exc.lengths} length(s) evaluated so far are in {exc.path} (the same command searches again "
                f"and replaces it)" if exc.path else "no length finished")
        print(f"\n{'terminated' if terminated else 'interrupted'} during the search: {kept}", file=sys.stderr)
        raise TaskExit(143 if terminated else 130) from None
    except HarnessError as exc:
        raise _refused(exc, run_dir) from None
    except Exception as exc:  # noqa: BLE001
        raise TaskExit(report_bug(exc)) from None


def _timing_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from harness.runs.cache_timing import run

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        run(cfg, run_dir, overrides=_command_line(HydraConfig.get()))
    except KeyboardInterrupt as exc:
        print(f"\n{'terminated' if isinstance(exc, Terminated) else 'interrupted'}: finished phases are kept in "
              f"{run_dir}/results; continue with: harness resume {shell_path(run_dir)}", file=sys.stderr)
        raise TaskExit(143 if isinstance(exc, Terminated) else 130) from None
    except HarnessError as exc:
        raise _refused(exc, run_dir) from None
    except Exception as exc:  # noqa: BLE001
        raise TaskExit(report_bug(exc)) from None


def _run_hydra_app(name: str, task, args: list[str]) -> int:
    """Run ``task(cfg)`` as a Hydra application with ``args`` as its command line; returns the exit
    status. Hydra reports its own errors (a misspelt key, a value not among a choice's) and exits
    1: a mistake in the command, so 2 here, like every other user error."""
    import hydra

    from harness.config import register_configs
    from harness.config.composing import check_overrides, unquoted
    from harness.paths import CONFIG_MODULE
    from harness.runs.callbacks import JobsIncomplete, OtherMultirun

    check_hydra_flags(args, f"harness {name}")
    config_dir = option(args, "--config-dir", "-cd")
    if config_dir is not None:
        check_config_dir(config_dir)
    check_overrides(args, config_dir)
    for key in ("hydra.run.dir", "hydra.sweep.dir"):  # compose's given-twice warning leaves Hydra's keys to here
        given = [a for a in args if a.startswith(key + "=")]
        if len(set(given)) > 1:
            import warnings

            warnings.warn(f"{key} is given {len(given)} times ({' and '.join(given)}): the last, {given[-1]}, applies",
                          stacklevel=2)
    run_dirs = [unquoted(a.split("=", 1)[1]) for a in args if a.startswith("hydra.run.dir=")]
    if run_dirs and "-m" not in args and "--multirun" not in args:
        check_run_dir(run_dirs[-1], name)
    sweep_dirs = [unquoted(a.split("=", 1)[1]) for a in args if a.startswith("hydra.sweep.dir=")]
    if sweep_dirs and ("-m" in args or "--multirun" in args):
        check_sweep_dir(sweep_dirs[-1])
    for subdir in (unquoted(a.split("=", 1)[1]) for a in args if a.startswith("hydra.sweep.subdir=")):
        if not subdir.strip() or subdir.startswith(("/", "~")) or ".." in Path(subdir).parts or \
                Path(subdir) == Path("."):  # a job outside its multirun, or in its top directory
            raise HarnessError(f"hydra.sweep.subdir={subdir!r} must name a directory of each job's own inside "
                               f"hydra.sweep.dir (the default, the job number, does); this one leads out of it or "
                               f"gives every job the top directory")
    register_configs()
    if "-m" not in args and "--multirun" not in args and not {"-h", "--help", "--hydra-help"} & set(args):
        from harness.config import compose

        # composed once here, so that a value the config cannot take (seed=null, prompts.limit=2.0) is one
        # line naming the override, not Hydra's block of full_key/reference_type/object_type
        compose([a for a in args if "=" in a and not a.startswith(("-", "hydra.", "+hydra."))], config_dir)
    # -m first: Hydra's parser takes the overrides as one positional list, so overrides on both sides of
    # -m ("a=1 -m b=2,3", the help's form after others) were "unrecognized arguments"
    multirun = [a for a in args if a in ("-m", "--multirun")]
    sys.argv = [f"harness {name}", *multirun, *(a for a in args if a not in ("-m", "--multirun"))]
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    # Hydra configures the root logger for the job (a console handler on the sys.stdout of the
    # moment): put back what was there, so a caller that goes on (a notebook, a test) keeps its own
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_MODULE}", config_name="config")(task)()
    except TaskExit as exc:
        return exc.code
    except JobsIncomplete as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OtherMultirun as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:
        return 2 if exc.code == 1 else (exc.code or 0)
    except KeyboardInterrupt as exc:  # before the task started: nothing was written
        print(f"\n{'terminated' if isinstance(exc, Terminated) else 'interrupted'} before the sweep started",
              file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
    return 0


def sweep(args: list[str]) -> int:
    return _run_hydra_app("sweep", _sweep_task, args)


LOCATE_HELP = """harness locate [overrides]: find the prefix-length interval where drift rises fastest.

Evaluates the lengths locate.coarse=[8,16,32,64,128,256], then bisects the interval with the
steepest rise of locate.metric (norm_edit_distance by default; pooled over locate.groups=[B,C])
down to locate.resolution=8 tokens, and prints it with its 95% interval. Every other override is
a sweep's (model, prompts, prefixes, placement, ...: harness sweep --help)."""


def _refuse_multirun(name: str, args: list[str]) -> None:
    if "-m" in args or "--multirun" in args:
        raise HarnessError(f"harness {name} runs one experiment: -m is not accepted (run it once per setting, each "
                           f"with its own hydra.run.dir)")


def locate(args: list[str]) -> int:
    _refuse_multirun("locate", args)
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = ["hydra.run.dir=outputs/locate/${now:%Y-%m-%d_%H-%M-%S.%f}", *args]
    if any(a in ("--help", "-h") for a in args):
        print(LOCATE_HELP)
        return 0
    return _run_hydra_app("locate", _locate_task, [*args, "hydra.job.name=locate"])


def cache_timing(args: list[str]) -> int:
    """``harness cache-timing [overrides]``: :mod:`harness.runs.cache_timing` as a Hydra application
    (``experiment=cache-timing`` added; the options of earlier releases are translated, with a notice)."""
    from harness.cli.cache_timing import CACHE_TIMING_HELP, translate_cache_timing_options

    if any(a in ("--help", "-h") for a in args):
        print(CACHE_TIMING_HELP)
        return 0
    args = translate_cache_timing_options(args)
    _refuse_multirun("cache-timing", args)
    chosen = [a.split("=", 1)[1] for a in args if a.startswith("experiment=")]
    if chosen and chosen[-1] != "cache-timing":  # it would replace the experiment the command runs
        raise HarnessError(f"experiment={chosen[-1]} would replace experiment=cache-timing, the experiment this "
                           f"command is: give its settings as overrides instead")
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = ["hydra.run.dir=outputs/cache-timing/${now:%Y-%m-%d_%H-%M-%S.%f}", *args]
    if not any(a.startswith("experiment=") for a in args):
        args = ["experiment=cache-timing", *args]
    return _run_hydra_app("cache-timing", _timing_task, args)


def resume(args: list[str]) -> int:
    """Rerun a run directory's own command (its saved overrides) into the same directory."""
    from harness.cli.options import CommandParser
    from harness.runs.inputs import relative_elsewhere
    from harness.runs.outdir import other_output
    from harness.runs.rundir import RunDir

    parser = CommandParser(prog="harness resume", description="Finish an interrupted or partly "
                                     "failed run: computes only the conditions without a stored result.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("overrides", nargs="*", help="extra overrides (e.g. on_existing=resume)")
    parser.add_argument("--accept-changes", action="store_true",
                        help="resume even where the run's own command now composes another design (the changes "
                             "are listed without it)")
    if not [a for a in args if not a.startswith("-")] and not {"-h", "--help"} & set(args):
        raise HarnessError("harness resume RUN_DIR [overrides]: give the run directory to finish")
    ns = parser.parse_intermixed_args(args)  # the flag may come after the overrides
    fresh = [o for o in ns.overrides if o.replace(" ", "") == "on_existing=fresh"]
    if fresh:
        raise HarnessError(f"harness resume keeps every stored result that still applies, so {fresh[0]} contradicts "
                           f"it; to start the run over, run its own sweep command with {fresh[0]} "
                           f"hydra.run.dir={ns.run_dir}")
    stray = next((o for o in ns.overrides if "=" not in o), None)
    if stray is not None:  # a second run directory: Hydra's parser would answer in four lines of its own
        raise HarnessError(f"{stray} is not an override (KEY=VALUE): harness resume finishes one run directory; "
                           f"resume each run on its own")
    moved = [o for o in ns.overrides if o.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]
    if moved:
        raise HarnessError(f"harness resume finishes {ns.run_dir} where it is, so {moved[0]} does not apply; to "
                           f"continue it elsewhere, copy the directory there and resume the copy")
    run = RunDir(run_directory(ns.run_dir))
    command = run.output_of()
    if command:  # collect's output, or another command's: not a sweep to finish
        raise HarnessError(f"{run} holds the output of `harness {command}`, not a sweep: resume the runs it was made "
                           f"from, then run `harness {command}` again")
    if other_output(run.path) == "a locate search":  # it resumes by running its own command again
        raise HarnessError(f"{run} is a locate search, not a sweep: run its `harness locate` command again in a new "
                           f"directory, or with hydra.run.dir={shell_path(run)} on_existing=fresh to replace it")
    from harness.runs.lock import held_by, writer

    holder = held_by(run.path)
    if holder is not None:  # a sweep writing it (in its first second, before its .hydra/ exists, too)
        raise HarnessError(f"{run} is being written by {writer(run.path)} ({holder}): resume it once that has "
                           f"finished, or stopped")
    if run.path.is_dir() and not [p for p in run.path.iterdir() if p.suffix != ".log"]:  # before a sweep's lock
        raise HarnessError(f"{run} holds no run yet (nothing but a log, if that): a sweep starting in it takes it "
                           f"within a second, so resume it once that has finished or stopped; else run the sweep with "
                           f"hydra.run.dir={shell_path(run)}")
    if run.is_run() and not (run / RunDir.HYDRA / "overrides.yaml").is_file():
        raise HarnessError(f"{run} has no {RunDir.HYDRA}/overrides.yaml, the command resume reruns (stopped before it "
                           f"recorded it, or made by H.run without overrides=, or deleted): run again what made it, "
                           f"H.run(cfg, {str(run)!r}) or the sweep's own command with hydra.run.dir={shell_path(run)} "
                           f"on_existing=resume (the stored results that still apply are reused)")
    elsewhere = relative_elsewhere(str(run), run.saved_config(),
                                   (run.manifest(trust_damaged=True, rebuilding=True) or {}).get("inputs"),
                                   ns.overrides)
    if elsewhere:
        raise HarnessError(elsewhere)
    if run.is_run() and not run.has(RunDir.MANIFEST) and not any(o.split("=", 1)[0].endswith(".path")
                                                                  for o in ns.overrides):
        # interrupted before its manifest (a run has its overrides.yaml here: refused above): its fingerprint has
        # recorded the inputs since the model loaded, and a file changed since would otherwise surface as
        # whatever building the conditions makes of it
        from harness.runs.inputs import of_config, refuse_changed

        recorded = (run.fingerprint() or {}).get("inputs")
        refuse_changed(str(run), recorded, of_config(run.saved_config()), "resuming it would mix two files' results",
                       "or pass on_existing=fresh with its own sweep command to recompute it from the files named now")
    # results are keyed by content and the inputs are checked by content, so keeping what still
    # applies is what resuming means (a saved on_existing=fresh would delete what it resumes)
    overrides = [o for o in run.overrides() if not o.startswith(("hydra.run.dir=", "on_existing="))]
    if not any(o.startswith("on_existing=") for o in ns.overrides):
        overrides.append("on_existing=resume")
    if not ns.accept_changes:
        changed = _design_changes(run, overrides, ns.overrides)
        if changed:
            command = " ".join(overrides) or "no overrides"
            given = f" with {' '.join(ns.overrides)}" if ns.overrides else ""
            raise HarnessError(f"resuming {run} would change its design: its command ({command}){given} composes to "
                               f"other settings than the run was made with (your overrides, or defaults this version "
                               f"changed): {'; '.join(changed)}. Give the old values as overrides (harness resume "
                               f"{run} KEY=OLD ...) to keep the design, or pass --accept-changes to resume with the "
                               f"new one")
    app = cache_timing if "experiment=cache-timing" in overrides else sweep
    return app([*last_of_each_key([*overrides, *ns.overrides]), f"hydra.run.dir={hydra_quoted(str(ns.run_dir))}"])


def last_of_each_key(overrides: list[str]) -> list[str]:
    """``overrides`` with each key once, at its last value (what Hydra applied): a resume's overrides
    on top of the run's own command replace its values, and the sweep refuses a key given twice."""
    from harness.config.composing import override_key

    last = {override_key(o): i for i, o in enumerate(overrides)}
    return [o for i, o in enumerate(overrides) if last[override_key(o)] == i]


def _design_changes(run, overrides: list[str], extra: list[str], shown: int = 6) -> list[str]:
    """``KEY: saved -> now`` for each result-determining setting whose value the run's saved command
    (``overrides``) composes to under this version differs from the run's saved config, leaving
    out keys the user's ``extra`` overrides set on purpose. Empty where the run has no saved config
    (an earlier version's: nothing to compare) or the command does not compose (the sweep says why)."""
    from harness.config import NOT_RESULT_KEYS, as_plain, compose

    saved = run.saved_config()
    if saved is None:
        return []
    try:
        now = as_plain(compose(last_of_each_key([*overrides, *extra])))
    except Exception:  # noqa: BLE001 - the sweep itself reports a command that does not compose
        return []

    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    # a cache-timing run's design is its timing: the key a sweep's results do not depend on
    ignored = {*NOT_RESULT_KEYS, "hydra"} - ({"timing"} if "experiment=cache-timing" in overrides else set())
    before, after = flat({k: v for k, v in saved.items() if k not in ignored}), \
        flat({k: v for k, v in now.items() if k not in ignored})
    # a key added since the run was made takes the default that does what the older version did, and
    # a key removed since cannot be given: neither is a change the user could undo with an override
    # (a result they would change is keyed anew and recomputed, never reused)
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    if added or removed:
        print("note: the run was made by an earlier version: " + "; ".join(
            ([f"added since, at their defaults: {', '.join(added[:8])}{' ...' if len(added) > 8 else ''}"] if added
             else []) + ([f"no longer settings: {', '.join(removed[:8])}"] if removed else [])), file=sys.stderr)
    # an override given now that sets another value changes the design too (one that gives the old
    # value back keeps it): both need --accept-changes to rewrite a run made one way into another
    changed = [f"{k}: {before[k]!r} -> {after[k]!r}" for k in sorted(set(before) & set(after)) if before[k] != after[k]]
    return changed[:shown] + ([f"and {len(changed) - shown} more"] if len(changed) > shown else [])
