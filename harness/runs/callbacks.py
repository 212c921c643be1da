"""Hydra callbacks: a multirun summary that names failed or unfinished jobs."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.experimental.callback import Callback

log = logging.getLogger("harness")


class JobsIncomplete(BaseException):
    """Raised at the end of a multirun with incomplete jobs; the CLI prints it and exits 1. (A
    BaseException, so that Hydra's own error handling lets it through.)"""


class SweepSummary(Callback):
    def on_multirun_end(self, config, **kwargs) -> None:
        from harness.runs.rundir import job_dirs  # here, not at the top: Hydra imports this module before it
        # composes, and rundir imports pandas, which would delay every config error

        sweep_dir = Path(config.hydra.sweep.dir)
        jobs = job_dirs(sweep_dir)
        problems = [p for p in (job.problem() for job in jobs) if p]
        if problems:
            raise JobsIncomplete(f"{len(problems)} of {len(jobs)} job(s) in {sweep_dir} are incomplete:\n  "
                                 + "\n  ".join(problems))
        log.info("all %d jobs complete in %s; combine them with: harness collect %s --out DIR", len(jobs),
                 sweep_dir, sweep_dir)
