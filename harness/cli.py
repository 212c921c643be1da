"""Command line: ``harness <command> ...`` (also ``python -m harness``).

``sweep`` is a Hydra application (config overrides, ``-m`` for multirun); the other commands are
plain argparse programs. Mistakes a user can fix print one line and exit with status 2.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

from .errors import HarnessError

USAGE = """usage: harness <command> [args]

commands:
  sweep [overrides] [-m]   run a prefix sweep (Hydra; e.g. model=gpt2 prefix.lengths=[32,64])
  locate [overrides]       find the prefix-length interval where drift rises fastest
  resume RUN_DIR           finish an interrupted run (computes only what is missing)
  collect DIR [...] --out  merge run directories (e.g. a multirun) into one table set
  check-determinism RUN    rerun a sample of conditions at batch size 1 and compare
  kv-size [key=value ...]  KV-cache size of a model config (layers, kv heads, head dim, dtype, ...)
  figures RUN [RUN ...]    redraw figures and report.md from stored tables (no model needed)
  train-demo --corpus ...  train the shipped demo model

Run `harness <command> --help` for a command's options.
"""

log = logging.getLogger("harness")
# The Hydra config tree lives at the top of the checkout (DESIGN.md section 8).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def _sweep_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from .runner import SweepFailed, run
    from .tables import write_json

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        run(cfg, run_dir)
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished conditions are kept in {run_dir}/results; "
              f"continue with: harness resume {run_dir}", file=sys.stderr)
        sys.exit(130)
    except (HarnessError, SweepFailed) as exc:
        log.error("%s", exc)
        if isinstance(exc, HarnessError):
            write_json({"status": "error", "error": str(exc)}, run_dir / "status.json")
        if hydra_cfg.mode == RunMode.MULTIRUN:
            return  # the other jobs go on; the multirun summary names this one and sets the exit status
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2 if isinstance(exc, HarnessError) else 1)


def _locate_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from .runner import locate

    try:
        locate(cfg, HydraConfig.get().runtime.output_dir)
    except HarnessError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def _run_hydra_app(name: str, task, args: list[str]) -> None:
    """Run ``task(cfg)`` as a Hydra application with ``args`` as its command line."""
    import hydra

    from .config import register_configs

    register_configs()
    sys.argv = [f"harness {name}", *args]
    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)()


def locate(args: list[str]) -> int:
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = ["hydra.run.dir=outputs/locate/${now:%Y-%m-%d_%H-%M-%S}", *args]
    _run_hydra_app("locate", _locate_task, [*args, "hydra.job.name=locate"])
    return 0


def sweep(args: list[str]) -> int:
    from . import callbacks

    callbacks.last_multirun_problems.clear()
    _run_hydra_app("sweep", _sweep_task, args)
    if callbacks.last_multirun_problems:
        print(f"error: {len(callbacks.last_multirun_problems)} job(s) incomplete:\n  "
              + "\n  ".join(callbacks.last_multirun_problems), file=sys.stderr)
        return 1
    return 0


def resume(args: list[str]) -> int:
    """Rerun a run directory's own command (its saved overrides) into the same directory."""
    import argparse

    import yaml

    parser = argparse.ArgumentParser(prog="harness resume", description="Finish an interrupted or partly "
                                     "failed run: computes only the conditions without a stored result.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("overrides", nargs="*", help="extra overrides (e.g. on_existing=resume)")
    ns = parser.parse_args(args)
    saved = ns.run_dir / ".hydra" / "overrides.yaml"
    if not saved.is_file():
        raise HarnessError(f"{ns.run_dir}: no .hydra/overrides.yaml; is this a harness run directory?")
    overrides = [o for o in (yaml.safe_load(saved.read_text()) or []) if not o.startswith("hydra.run.dir=")]
    return sweep([*overrides, *ns.overrides, f"hydra.run.dir={ns.run_dir}"])


def figures(args: list[str]) -> int:
    import argparse

    from .report import write_outputs
    from .tables import load_noise, load_runs

    parser = argparse.ArgumentParser(prog="harness figures", description="Redraw the standard figures and "
                                     "report.md from the tables of one or more run directories.")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (a sweep's, or collected ones)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where figures/ and report.md go (default: the run directory, when there is one)")
    ns = parser.parse_args(args)
    if ns.out is None and len(ns.runs) > 1:
        raise HarnessError("several run directories need --out DIR for the combined figures")
    out = ns.out or ns.runs[0]
    conditions, attention = load_runs(ns.runs)
    written = write_outputs(conditions, attention, out, noise=load_noise(ns.runs))
    print(f"wrote {len(written)} files: figures in {(out / 'figures').resolve()}, report {(out / 'report.md').resolve()}")
    return 0


# Each command's entry point, imported only when that command runs (keeps `--help` fast).
COMMANDS = {
    "sweep": "harness.cli:sweep",
    "resume": "harness.cli:resume",
    "locate": "harness.cli:locate",
    "collect": "harness.collect:main",
    "check-determinism": "harness.determinism:main",
    "kv-size": "harness.kvcache:main",
    "figures": "harness.cli:figures",
    "train-demo": "harness.train_demo:main",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    module, function = COMMANDS[command].split(":")
    try:
        return getattr(importlib.import_module(module), function)(rest)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
