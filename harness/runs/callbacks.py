"""Hydra callbacks: a multirun summary that names failed or unfinished jobs."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.experimental.callback import Callback

from harness.paths import shell_path

log = logging.getLogger("harness")


class JobsIncomplete(BaseException):
    """Raised at the end of a multirun with incomplete jobs; the CLI prints it and exits 1. (A
    BaseException, so that Hydra's own error handling lets it through.)"""


class OtherMultirun(BaseException):
    """Raised before any job starts where ``hydra.sweep.dir`` holds another multirun's jobs (its
    ``multirun.yaml`` records other overrides); the CLI prints it and exits 2, nothing written."""


def _task_overrides(overrides) -> list[str]:
    """A multirun's command line, without the settings that change no result (a resume of it adds
    ``on_existing=resume``)."""
    from harness.config.schema import NOT_RESULT_KEYS

    return sorted(str(o) for o in overrides or [] if str(o).split("=", 1)[0].lstrip("+~") not in NOT_RESULT_KEYS)


class SweepSummary(Callback):
    def __init__(self) -> None:
        self.job_dirs: list[str] = []  # each launched job's directory, in launch order
        # jobs the task refused, by directory (which may hold an earlier sweep's run), with the task's line
        self.refused: dict[Path, str] = {}
        self.earlier_record: bytes | None = None  # the sweep directory's multirun.yaml before Hydra rewrote it

    def on_multirun_start(self, config, **kwargs) -> None:
        # Hydra saves this multirun's config over the directory's multirun.yaml before any job starts;
        # kept here so that a multirun whose every job is refused leaves the finished sweep's record
        record = Path(config.hydra.sweep.dir) / "multirun.yaml"
        self.earlier_record = record.read_bytes() if record.is_file() else None
        if self.earlier_record is not None and any(p.is_dir() for p in record.parent.iterdir()):
            import yaml

            try:
                earlier = (yaml.safe_load(self.earlier_record) or {})["hydra"]["overrides"]["task"]
            except (yaml.YAMLError, KeyError, TypeError):
                earlier = None
            new = list(config.hydra.overrides.task)
            if earlier is not None and _task_overrides(earlier) != _task_overrides(new):
                # its jobs would be refused one by one and the others run into the old sweep, over its record
                raise OtherMultirun(f"hydra.sweep.dir={record.parent} holds another multirun's jobs (its "
                                    f"{record.name}: {' '.join(_task_overrides(earlier))[:200]}; this one: "
                                    f"{' '.join(_task_overrides(new))[:200]}); give another hydra.sweep.dir (nothing "
                                    f"was written), or its own command to resume it")

    def on_job_start(self, config, **kwargs) -> None:
        self.job_dirs.append(str(config.hydra.runtime.output_dir))

    def on_job_end(self, config, job_return, **kwargs) -> None:
        from hydra.core.utils import JobStatus

        if job_return.status == JobStatus.COMPLETED and isinstance(job_return.return_value, str):
            self.refused[Path(str(config.hydra.runtime.output_dir)).resolve()] = job_return.return_value

    def on_multirun_end(self, config, **kwargs) -> None:
        from harness.runs.rundir import job_dirs  # here, not at the top: Hydra imports this module before it
        # composes, and rundir imports pandas, which would delay every config error

        sweep_dir = Path(config.hydra.sweep.dir)
        jobs = job_dirs(sweep_dir)
        problems = list(self.refused.values())
        if self.earlier_record is not None and self.refused and len(self.refused) >= len(set(self.job_dirs)):
            # nothing ran: the jobs beside multirun.yaml are still the earlier sweep's, and so is its record
            (sweep_dir / "multirun.yaml").write_bytes(self.earlier_record)
        for job in jobs:  # a refused job's directory may hold an earlier sweep's run: said once, as refused
            problem = job.problem()
            if problem and job.path.resolve() not in self.refused:
                problems.append(problem)
        shared = sorted({d for d in self.job_dirs if self.job_dirs.count(d) > 1})
        if shared:  # hydra.sweep.subdir gave several jobs one directory: only the first could run there
            problems.append(f"{len(self.job_dirs)} jobs were launched into {len(set(self.job_dirs))} directories "
                            f"({shared[0]} was given to {self.job_dirs.count(shared[0])}); hydra.sweep.subdir must "
                            f"differ between jobs (the default, the job number, does)")
        if problems:
            raise JobsIncomplete(f"{len(problems)} of {max(len(jobs), len(self.job_dirs))} job(s) in {sweep_dir} are "
                                 f"incomplete:\n  "
                                 + "\n  ".join(problems))
        log.info("all %d jobs complete in %s; combine them with: harness collect %s --out DIR", len(jobs),
                 sweep_dir, shell_path(sweep_dir))
