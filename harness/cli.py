"""Command line: ``harness <command> ...`` (also ``python -m harness``).

``sweep`` and ``locate`` are Hydra applications (config overrides, ``-m`` for multirun,
``--config-dir DIR`` for a directory of your own ``model/``, ``prompts/``, ``prefixes/`` and
``experiment/`` configs); the other commands are plain argparse programs. Mistakes a user can fix
print one line and exit with status 2; Ctrl-C and SIGTERM stop a sweep cleanly (what finished is
kept) with status 130 and 143.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from harness.errors import HarnessError

USAGE = """usage: harness <command> [args]

commands:
  sweep [overrides] [-m]   run a prefix sweep (Hydra; e.g. model=gpt2 prefix.lengths=[32,64])
  locate [overrides]       find the prefix-length interval where drift rises fastest
  resume RUN_DIR           finish an interrupted run (computes only what is missing)
  collect DIR [...] --out  merge run directories (e.g. a multirun) into one table set
  check-determinism RUN    rerun a sample of conditions at batch size 1 and compare
  kv-size [key=value ...]  KV-cache size of a model config (layers, kv heads, head dim, dtype, ...)
  figures RUN [RUN ...]    redraw figures and report.md from stored tables (no model needed)
  claims RUN [...] --out   test the seed's claims (middle layers, 64->128 jump, C vs B) on runs
  causal-heads RUN --out   do the heads RUN names carry its effect? (mask them, against random heads)
  build-prefixes ...       build a prefix bank from a text corpus or attack templates

sweep and locate take Hydra options too: --config-dir DIR adds your own config directory,
--cfg job prints the composed config, --help lists the config groups.
Run `harness <command> --help` for a command's options.
"""

log = logging.getLogger("harness")
INTERNAL_ERROR = 3  # a bug in the harness, not a mistake in the command (those exit 2)


def report_bug(exc: BaseException) -> int:
    """Print the traceback of an unexpected exception and ask for a bug report; the exit status."""
    traceback.print_exception(exc)
    print(f"internal error ({type(exc).__name__}): this is a bug in the harness, not a mistake in your command; "
          f"please report it with the traceback above", file=sys.stderr)
    return INTERNAL_ERROR


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


def _check_run_dir(run_dir: str) -> None:
    """``hydra.run.dir`` names something a run directory can be: Hydra would create it with a
    traceback for a file, a dangling link, a read-only or forbidden place."""
    path = Path(run_dir)
    if path.is_symlink() and not path.exists():
        raise HarnessError(f"hydra.run.dir={run_dir} is a link to {os.readlink(path)}, which does not exist; "
                           f"give a directory")
    if path.exists() and not path.is_dir():
        raise HarnessError(f"hydra.run.dir={run_dir} is a file, not a directory; give a directory")
    # nothing is created here (a command Hydra then refuses must leave no directory behind): the
    # nearest existing ancestor must be a directory the run directory can be made in
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise HarnessError(f"cannot create the run directory {run_dir}: {existing} is not a directory; choose "
                           f"another hydra.run.dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise HarnessError(f"cannot create the run directory {run_dir}: {existing} is not writable; choose another "
                           f"hydra.run.dir")


def _run_hydra_app(name: str, task, args: list[str]) -> int:
    """Run ``task(cfg)`` as a Hydra application with ``args`` as its command line; returns the exit
    status. Hydra reports its own errors (a misspelt key, a value not among a choice's) and exits
    1: a mistake in the command, so 2 here, like every other user error."""
    import hydra

    from harness.config import CONFIG_MODULE, register_configs
    from harness.runs.callbacks import JobsIncomplete

    config_dir = _option(args, "--config-dir", "-cd")
    if config_dir is not None:
        _check_config_dir(config_dir)
    run_dirs = [_unquoted(a.split("=", 1)[1]) for a in args if a.startswith("hydra.run.dir=")]
    if run_dirs and "-m" not in args and "--multirun" not in args:
        _check_run_dir(run_dirs[-1])
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


def locate(args: list[str]) -> int:
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = ["hydra.run.dir=outputs/locate/${now:%Y-%m-%d_%H-%M-%S}", *args]
    return _run_hydra_app("locate", _locate_task, [*args, "hydra.job.name=locate"])


def resume(args: list[str]) -> int:
    """Rerun a run directory's own command (its saved overrides) into the same directory."""
    import argparse

    from harness.runs.rundir import RunDir

    parser = argparse.ArgumentParser(prog="harness resume", description="Finish an interrupted or partly "
                                     "failed run: computes only the conditions without a stored result.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("overrides", nargs="*", help="extra overrides (e.g. on_existing=resume)")
    ns = parser.parse_args(args)
    overrides = [o for o in RunDir(ns.run_dir).overrides() if not o.startswith("hydra.run.dir=")]
    return sweep([*overrides, *ns.overrides, f"hydra.run.dir={hydra_quoted(str(ns.run_dir))}"])


def hydra_quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value: commas, spaces, brackets and non-ASCII letters
    in a path would otherwise be read as override syntax (a comma even as a sweep)."""
    return "'" + value.replace("'", "\\'") + "'"


def figures(args: list[str]) -> int:
    import argparse

    from harness.reporting.report import write_outputs
    from harness.runs.rundir import add_trust_damaged, load_noise, load_runs

    parser = argparse.ArgumentParser(prog="harness figures", description="Redraw the standard figures and "
                                     "report.md from the tables of one or more run directories.")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (a sweep's, or collected ones)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where figures/ and report.md go (default: the run directory, when there is one)")
    add_trust_damaged(parser)
    ns = parser.parse_args(args)
    if ns.out is None and len(ns.runs) > 1:
        raise HarnessError("several run directories need --out DIR for the combined figures")
    out = ns.out or ns.runs[0]
    conditions, attention = load_runs(ns.runs, ns.trust_damaged)
    noise = load_noise(ns.runs, ns.trust_damaged)
    written = write_outputs(conditions, attention, out, noise=noise)
    print(f"wrote {len(written)} files: figures in {(out / 'figures').resolve()}, report {(out / 'report.md').resolve()}")
    return 0


def claims(args: list[str]) -> int:
    import argparse

    from harness.reporting.claims import write_claims
    from harness.runs.rundir import add_trust_damaged, load_noise, load_runs

    parser = argparse.ArgumentParser(prog="harness claims", description="Test the seed study's three claims "
                                     "(middle-layer peak, a jump between 64 and 128 tokens, C drifts more than B) "
                                     "on the tables of one or more run directories: claims.md, claims.parquet "
                                     "and one figure per claim.")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (each a model and placement)")
    parser.add_argument("--out", type=Path, required=True, help="where claims.md, claims.parquet and figures/ go")
    parser.add_argument("--resamples", type=int, default=2000, help="crossed bootstrap resamples (default 2000)")
    add_trust_damaged(parser)
    ns = parser.parse_args(args)
    if any(ns.out.resolve() == r.resolve() for r in ns.runs):
        raise HarnessError(f"--out {ns.out} is one of the runs read; commands that read runs never write into "
                           "them: give another directory")
    conditions, attention = load_runs(ns.runs, ns.trust_damaged)
    noise = load_noise(ns.runs, ns.trust_damaged)
    written = write_claims(conditions, attention, noise, ns.out, [str(r) for r in ns.runs],
                           n_resamples=ns.resamples)
    print(f"wrote {len(written)} files: {(ns.out / 'claims.md').resolve()}")
    return 0


# Each command's entry point, imported only when that command runs (keeps `--help` fast).
COMMANDS = {
    "sweep": "harness.cli:sweep",
    "resume": "harness.cli:resume",
    "locate": "harness.cli:locate",
    "collect": "harness.runs.collect:main",
    "check-determinism": "harness.runs.check_determinism:main",
    "kv-size": "harness.model.kv_size:main",
    "figures": "harness.cli:figures",
    "claims": "harness.cli:claims",
    "causal-heads": "harness.runs.causal_heads:main",
    "build-prefixes": "harness.inputs.prefix_bank:main",
}

# Commands that left the harness, and where they went (one line, exit status 2).
MOVED = {
    "train-demo": "training the demo models is no longer part of the harness: it is the harness-train-demo "
                  "command of the demo_training distribution in this repository (pip install -e demo_training; "
                  "same options)",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command in MOVED:
        print(f"error: {MOVED[command]}", file=sys.stderr)
        return 2
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    module, function = COMMANDS[command].split(":")
    try:
        return getattr(importlib.import_module(module), function)(rest)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001
        return report_bug(exc)


if __name__ == "__main__":
    sys.exit(main())
