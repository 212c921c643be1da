"""A multirun's jobs: how many its command launches, against how many job directories exist. An
interrupted ``harness sweep -m`` stops in the job it was running, and the jobs after it never start;
what reads the sweep directory (``collect``) or some of its jobs (``claims SWEEP/*/``) says so
rather than present the jobs that exist as the whole multirun."""

from __future__ import annotations

import math
from pathlib import Path

RECORD = "multirun.yaml"  # Hydra writes it into the sweep directory before any job starts


def expected_jobs(sweep_dir: Path) -> int | None:
    """How many jobs the multirun whose sweep directory is ``sweep_dir`` launches: the product of its
    sweeps' value counts (``seed=0,1,2``, ``range(...)``, and ``hydra.sweeper.params``), read from
    its ``multirun.yaml``. None where there is no record or it cannot be read (another sweeper)."""
    import yaml

    record = Path(sweep_dir) / RECORD
    try:
        config = yaml.safe_load(record.read_text(encoding="utf-8"))
        hydra = config["hydra"]
        overrides = list(hydra["overrides"]["task"] or [])
        params = (hydra.get("sweeper") or {}).get("params") or {}
        overrides += [f"{key}={value}" for key, value in params.items()]
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(overrides)
        return math.prod(len(list(o.sweep_iterator())) for o in parsed if o.is_sweep_override())
    except Exception:  # noqa: BLE001 - no record, another sweeper's, or a form this count does not know
        return None


def unstarted(sweep_dir: Path) -> str | None:
    """What a sweep directory lacks, in words (the jobs its command launches that have no
    directory), or None where every job has one or the count is unknown."""
    from harness.runs.rundir import job_dirs

    expected = expected_jobs(sweep_dir)
    found = len(job_dirs(sweep_dir))
    if expected is None or found >= expected:
        return None
    return (f"{sweep_dir} is a multirun of {expected} jobs ({RECORD}), of which {found} exist: {expected - found} never "
            f"started (an interrupted multirun); the same `harness sweep -m` command runs them (it resumes the "
            f"ones that exist)")


def unstarted_notes(run_dirs: list[Path]) -> list[str]:
    """One sentence per multirun some of ``run_dirs`` are jobs of whose other jobs never started."""
    sweeps = {Path(run).resolve().parent for run in run_dirs if (Path(run).resolve().parent / RECORD).is_file()}
    return [note for note in (unstarted(sweep) for sweep in sorted(sweeps)) if note]
