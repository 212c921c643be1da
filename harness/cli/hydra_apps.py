"""The Hydra applications: ``sweep``, ``locate``, ``cache-timing`` and ``resume`` (config overrides, ``-m`` for
multirun, ``--config-dir DIR`` for a directory of your own ``model/``, ``prompts/``, ``prefixes/`` and
``experiment/`` configs). Each task is a thin wrapper over a plain function
(:func:`harness.runs.runner.run`, :func:`harness.runs.locate.locate`) that turns its errors into
exit statuses; what Hydra itself refuses (a misspelt key) exits 2 like every user error."""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path

from harness.cli import report_bug
from harness.cli.guards import check_run_dir
from harness.errors import HarnessError

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


class Terminated(KeyboardInterrupt):
    """SIGTERM (what SLURM and most schedulers send before a kill), handled like Ctrl-C."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


class TaskExit(BaseException):
    """How a Hydra task ends with an exit status: a BaseException passes through Hydra's own
    error reporting (which turns every Exception into status 1)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def _sweep_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from harness.config import as_plain
    from harness.runs.rundir import RunDir
    from harness.runs.runner import SweepFailed, run

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        run(cfg, run_dir, overrides=list(hydra_cfg.overrides.task))
    except KeyboardInterrupt as exc:
        print(f"\n{'terminated' if isinstance(exc, Terminated) else 'interrupted'}: finished conditions are kept in "
              f"{run_dir}/results; continue with: harness resume {run_dir}", file=sys.stderr)
        raise TaskExit(143 if isinstance(exc, Terminated) else 130) from None
    except (HarnessError, SweepFailed) as exc:
        log.error("%s", exc)
        if hydra_cfg.mode == RunMode.MULTIRUN:
            rundir = RunDir(run_dir)
            if not rundir.is_run():  # a new job directory: say why it holds nothing
                rundir.write_hydra(as_plain(cfg), list(hydra_cfg.overrides.task))
                rundir.write_status("error", error=str(exc))
            return  # the other jobs go on; the multirun summary names this one and sets the exit status
        print(f"error: {exc}", file=sys.stderr)
        _drop_if_made_empty(run_dir)
        raise TaskExit(2 if isinstance(exc, HarnessError) else 1) from None
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: say so, with its own status
        raise TaskExit(report_bug(exc)) from None


def _locate_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from harness.runs.locate import LocateStopped, locate

    try:
        locate(cfg, HydraConfig.get().runtime.output_dir)
    except LocateStopped as exc:
        terminated = isinstance(exc.signal, Terminated)
        kept = f"the {exc.lengths} length(s) evaluated so far are in {exc.path}" if exc.path else "no length finished"
        print(f"\n{'terminated' if terminated else 'interrupted'} during the search: {kept}", file=sys.stderr)
        raise TaskExit(143 if terminated else 130) from None
    except HarnessError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        raise TaskExit(2) from None
    except Exception as exc:  # noqa: BLE001
        raise TaskExit(report_bug(exc)) from None


def _timing_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from harness.runs.cache_timing import run

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        run(cfg, run_dir, overrides=list(HydraConfig.get().overrides.task))
    except KeyboardInterrupt as exc:
        print(f"\n{'terminated' if isinstance(exc, Terminated) else 'interrupted'}: finished phases are kept in "
              f"{run_dir}/results; continue with: harness resume {run_dir}", file=sys.stderr)
        raise TaskExit(143 if isinstance(exc, Terminated) else 130) from None
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _drop_if_made_empty(run_dir)
        raise TaskExit(2) from None
    except Exception as exc:  # noqa: BLE001
        raise TaskExit(report_bug(exc)) from None


def _option(args: list[str], *names: str) -> str | None:
    """The value of the last ``--name VALUE`` / ``--name=VALUE`` among ``args``."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1:]
    return value


def _check_config_dir(config_dir: str) -> None:
    """Every YAML file of a user's config directory parses and holds only encodable text: Hydra
    would answer a broken one with a long traceback, and a lone surrogate fails only when the run's
    config is written."""
    import yaml

    root = Path(config_dir)
    if not root.is_dir():
        raise HarnessError(f"--config-dir {config_dir} is not a directory")
    for path in sorted(root.rglob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
            data = yaml.safe_load(text)
            yaml.safe_dump(data, allow_unicode=True).encode("utf-8")
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise HarnessError(f"{path}{where}: not valid YAML ({problem}); fix the file") from None
        except UnicodeError:
            raise HarnessError(f"{path}: not UTF-8 text, or a string in it holds a lone surrogate (an escape like "
                               f"\\udc80); write the text as UTF-8 characters") from None
        except OSError as exc:
            raise HarnessError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _unquoted(value: str) -> str:
    """A Hydra override value without its quotes (``'a,b'`` -> ``a,b``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].replace("\\" + value[0], value[0])
    return value


def group_options(group: str, config_dir: str | None) -> set[str]:
    """The names ``group=NAME`` can take: the shipped configs and those of ``--config-dir``."""
    from harness.paths import PACKAGE_DIR

    dirs = [PACKAGE_DIR / "conf" / group] + ([Path(config_dir) / group] if config_dir else [])
    return {p.stem for d in dirs if d.is_dir() for p in d.glob("*.yaml")}


def _check_overrides(args: list[str], config_dir: str | None) -> None:
    """Refuse, in one line and before Hydra creates anything, an override whose key the config
    does not have (with the closest key it does have) and a config group given something that is
    not one of its configs (a model path or hub id goes in ``model.name_or_path``). Hydra's own
    answers are longer, suggest adding the key with ``+``, and leave a run directory behind."""
    import difflib

    from harness.config import GROUPS, config_keys

    keys, lists = config_keys(), set(config_keys(lists=True))
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key.startswith("hydra") or "/" in key:  # Hydra's own settings and group paths (hydra/launcher=...)
            continue
        if key in GROUPS:
            options = group_options(key, config_dir)
            for choice in (v.strip() for v in _unquoted(value).split(",")):
                if choice and choice not in options and not choice.startswith(("${", "glob(", "choice(", "range(")):
                    raise HarnessError(_not_an_option(key, choice, options))
            continue
        if key in keys:
            bare = _unquoted(value).strip()
            if key not in lists and "," in bare and bare == value.strip() and not bare.startswith(("[", "{", "${")) \
                    and "-m" not in args and "--multirun" not in args:
                raise HarnessError(f"{key}={value} sweeps over values: add -m (harness sweep -m {key}={value}), one "
                                   f"run directory per value")
            if key in lists and bare and not bare.startswith(("[", "${", "null")) and "-m" not in args \
                    and "--multirun" not in args:
                raise HarnessError(f"{key} is a list: write {key}=[{bare}] (several values: {key}=[{bare},...])")
            continue
        near = [k for k in keys if k.endswith("." + key)] or difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}={value}?" if near else "; `harness sweep --cfg job` prints every key"
        raise HarnessError(f"{key} is not a config key{hint}")


def _not_an_option(group: str, choice: str, options: set[str]) -> str:
    """Why ``group=choice`` names no config, and what to write instead."""
    import difflib

    instead = {"model": "model.name_or_path", "prompts": "prompts.path", "prefixes": "prefixes.path"}.get(group)
    looks_like_path = "/" in choice or choice.endswith((".jsonl", ".gguf")) or Path(choice).exists()
    if instead and looks_like_path:
        what = "a hub id or a local directory" if group == "model" else "a JSONL file"
        return (f"{group}={choice} is not one of the shipped {group} configs; for {what} write "
                f"{instead}={choice}")
    near = difflib.get_close_matches(choice, sorted(options), n=1, cutoff=0.6)
    return (f"{group}={choice}: no such {group} config" + (f"; did you mean {group}={near[0]}?" if near else "")
            + f" (the configs: {', '.join(sorted(options))})")


def _run_hydra_app(name: str, task, args: list[str]) -> int:
    """Run ``task(cfg)`` as a Hydra application with ``args`` as its command line; returns the exit
    status. Hydra reports its own errors (a misspelt key, a value not among a choice's) and exits
    1: a mistake in the command, so 2 here, like every other user error."""
    import hydra

    from harness.config import register_configs
    from harness.paths import CONFIG_MODULE
    from harness.runs.callbacks import JobsIncomplete

    config_dir = _option(args, "--config-dir", "-cd")
    if config_dir is not None:
        _check_config_dir(config_dir)
    _check_overrides(args, config_dir)
    run_dirs = [_unquoted(a.split("=", 1)[1]) for a in args if a.startswith("hydra.run.dir=")]
    if run_dirs and "-m" not in args and "--multirun" not in args:
        check_run_dir(run_dirs[-1])
    register_configs()
    sys.argv = [f"harness {name}", *args]
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_MODULE}", config_name="config")(task)()
    except TaskExit as exc:
        return exc.code
    except JobsIncomplete as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except SystemExit as exc:
        return 2 if exc.code == 1 else (exc.code or 0)
    except KeyboardInterrupt as exc:  # before the task started: nothing was written
        print(f"\n{'terminated' if isinstance(exc, Terminated) else 'interrupted'} before the sweep started",
              file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def sweep(args: list[str]) -> int:
    return _run_hydra_app("sweep", _sweep_task, args)


LOCATE_HELP = """harness locate [overrides]: find the prefix-length interval where drift rises fastest.

Evaluates the lengths locate.coarse=[8,16,32,64,128,256], then bisects the interval with the
steepest rise of locate.metric (norm_edit_distance by default; pooled over locate.groups=[B,C])
down to locate.resolution=8 tokens, and prints it with its 95% interval. Every other override is
a sweep's (model, prompts, prefixes, placement, ...: harness sweep --help)."""


def locate(args: list[str]) -> int:
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
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = ["hydra.run.dir=outputs/cache-timing/${now:%Y-%m-%d_%H-%M-%S.%f}", *args]
    if not any(a.startswith("experiment=") for a in args):
        args = ["experiment=cache-timing", *args]
    return _run_hydra_app("cache-timing", _timing_task, args)


def resume(args: list[str]) -> int:
    """Rerun a run directory's own command (its saved overrides) into the same directory."""
    import argparse

    from harness.runs.rundir import RunDir

    parser = argparse.ArgumentParser(prog="harness resume", description="Finish an interrupted or partly "
                                     "failed run: computes only the conditions without a stored result.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("overrides", nargs="*", help="extra overrides (e.g. on_existing=resume)")
    parser.add_argument("--accept-changes", action="store_true",
                        help="resume even where the run's own command now composes another design (the changes "
                             "are listed without it)")
    if not [a for a in args if not a.startswith("-")] and not {"-h", "--help"} & set(args):
        raise HarnessError("harness resume RUN_DIR [overrides]: give the run directory to finish")
    ns = parser.parse_intermixed_args(args)  # the flag may come after the overrides
    run = RunDir(ns.run_dir)
    # results are keyed by content and the inputs are checked by content, so keeping what still
    # applies is what resuming means (a saved on_existing=fresh would delete what it resumes)
    overrides = [o for o in run.overrides() if not o.startswith(("hydra.run.dir=", "on_existing="))]
    if not any(o.startswith("on_existing=") for o in ns.overrides):
        overrides.append("on_existing=resume")
    if not ns.accept_changes:
        changed = _design_changes(run, overrides, ns.overrides)
        if changed:
            command = " ".join(overrides) or "no overrides"
            raise HarnessError(f"resuming {run} would change its design: its command ({command}) composes to other "
                               f"settings under this version than the run was made with: {'; '.join(changed)}. Give "
                               f"the old values as overrides (harness resume {run} KEY=OLD ...) to keep the design, "
                               f"or pass --accept-changes to resume with the new one")
    app = cache_timing if "experiment=cache-timing" in overrides else sweep
    return app([*overrides, *ns.overrides, f"hydra.run.dir={hydra_quoted(str(ns.run_dir))}"])


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
        now = as_plain(compose([*overrides, *extra]))
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

    before, after = flat({k: v for k, v in saved.items() if k not in NOT_RESULT_KEYS and k != "hydra"}), \
        flat({k: v for k, v in now.items() if k not in NOT_RESULT_KEYS and k != "hydra"})
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


def hydra_quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value: commas, spaces, brackets and non-ASCII letters
    in a path would otherwise be read as override syntax (a comma even as a sweep)."""
    return "'" + value.replace("'", "\\'") + "'"
