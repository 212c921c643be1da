"""Hydra callbacks: a multirun summary that names failed or unfinished jobs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hydra.experimental.callback import Callback

log = logging.getLogger("harness")

# Set in the main process at the end of a multirun; the CLI turns it into the exit status.
last_multirun_problems: list[str] = []


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The job directories of a Hydra sweep (each has a ``.hydra`` folder), in job order."""
    dirs = [p.parent for p in Path(sweep_dir).glob("*/.hydra")]
    return sorted(dirs, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))


def job_problem(job: Path) -> str | None:
    """Why a job directory is not a complete run, or None when it is."""
    status = job / "status.json"
    if not status.is_file():
        return f"{job}: did not finish (no status.json)"
    info = json.loads(status.read_text())
    if info.get("status") != "complete":
        detail = info.get("error") or ", ".join(info.get("failed", []))
        return f"{job}: {info.get('status')} ({detail})"
    return None


class SweepSummary(Callback):
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        jobs = job_dirs(sweep_dir)
        problems = [p for p in map(job_problem, jobs) if p]
        last_multirun_problems[:] = problems
        if problems:
            log.error("%d of %d jobs in %s are incomplete:\n  %s", len(problems), len(jobs), sweep_dir,
                      "\n  ".join(problems))
        else:
            log.info("all %d jobs complete in %s; combine them with: harness collect %s --out DIR", len(jobs),
                     sweep_dir, sweep_dir)
