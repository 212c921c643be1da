"""Command line: ``harness <command> ...`` (also ``python -m harness``).

``sweep`` is a Hydra application (config overrides, ``-m`` for multirun); the other commands are
plain argparse programs. Mistakes a user can fix print one line and exit with status 2.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from .errors import HarnessError

USAGE = """usage: harness <command> [args]

commands:
  sweep [overrides] [-m]   run a prefix sweep (Hydra; e.g. model=gpt2 prefix.lengths=[32,64])
  figures RUN [RUN ...]    redraw figures and report.md from stored tables (no model needed)
  train-demo --corpus ...  train the shipped demo model

Run `harness <command> --help` for a command's options.
"""

log = logging.getLogger("harness")
# The Hydra config tree lives at the top of the checkout (DESIGN.md section 8).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def _sweep_task(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig

    from .runner import run

    run_dir = HydraConfig.get().runtime.output_dir
    try:
        run(cfg, run_dir)
    except HarnessError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def sweep(args: list[str]) -> int:
    import hydra

    from .config import register_configs

    register_configs()
    sys.argv = ["harness sweep", *args]
    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(_sweep_task)()
    return 0


def figures(args: list[str]) -> int:
    import argparse

    from .report import write_outputs
    from .tables import load_runs

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
    written = write_outputs(conditions, attention, out)
    print(f"wrote {len(written)} files: figures in {(out / 'figures').resolve()}, report {(out / 'report.md').resolve()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    try:
        if command == "sweep":
            return sweep(rest)
        if command == "figures":
            return figures(rest)
        if command == "train-demo":
            from .train_demo import main as train_main

            return train_main(rest)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"error: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
