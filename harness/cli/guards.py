"""What every command checks of where it writes and of its numeric options, before it does anything:
no output inside a run directory, no file of the user's overwritten, numbers in their range."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from harness.errors import HarnessError
from harness.paths import broken_link, why_not_writable
from harness.runs.outdir import LOCATE_FILES, LOCATE_JSON, enclosing_run, other_output


def run_directory(path: Path, what: str = "a run directory") -> Path:
    """``path``, refused in one line where it does not exist or is a file (a run's manifest.json or
    report.md given for the run): every command that reads runs says so before anything else."""
    path = Path(path)
    if path.is_symlink() and not path.exists():  # a link to nothing, or a loop of links: not "missing"
        raise HarnessError(f"{path} {broken_link(path)}: give {what}")
    if not path.exists():
        raise HarnessError(f"{path} does not exist: give {what}")
    if not path.is_dir():
        parent = path.parent
        if any((parent / name).exists() for name in ("manifest.json", "conditions.parquet", ".hydra")):
            raise HarnessError(f"{path} is a file, not {what}: give the directory it is in ({parent})")
        raise HarnessError(f"{path} is a file, not {what}: give {what} (one a sweep made, with conditions.parquet)")
    return path


def out_beside(out: Path | None, first: Path, command: str) -> Path:
    """``--out``, or where a command writes without one: ``<first run>-<command>`` beside the first run
    it reads, or ``<sweep>-<command>`` beside a multirun whose job it is (commands that read runs never
    write into one; each says where it wrote when done). The first run must be a directory
    (:func:`run_directory`)."""
    run_directory(first)
    if out is not None:
        return out
    run = Path(os.path.abspath(first))
    if (run.parent / "multirun.yaml").is_file():  # a job of a multirun: beside the sweep, not among its jobs (a
        # glob DIR/*/ would take the output for a run the next time)
        return run.parent.parent / f"{run.parent.name}-{command}"
    return run.parent / f"{run.name}-{command}"


def whole(text: str, low: int, high: int | None = None) -> int:
    """A whole number at or above ``low`` (and at most ``high``, where given)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    if high is not None and value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high:,}, got {value:,}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    return whole(text, 1)


def finite(text: str, low: float = -math.inf, low_open: bool = False) -> float:
    """A finite number at or above ``low`` (above it where ``low_open``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    if value < low or (low_open and value == low):
        raise argparse.ArgumentTypeError(f"must be {'above' if low_open else 'at least'} {low:g}, got {value:g}")
    return value


def positive(text: str) -> float:
    """argparse type: a finite number above 0."""
    return finite(text, 0.0, low_open=True)


def non_negative(text: str) -> float:
    """argparse type: a finite number at or above 0."""
    return finite(text, 0.0)


def non_negative_int(text: str) -> int:
    """argparse type: a whole number >= 0 (a seed)."""
    return whole(text, 0)


def check_sweep_dir(sweep_dir: str) -> None:
    """``hydra.sweep.dir`` of a multirun is never a run directory nor inside one (its jobs would write
    into a finished run, as a single sweep's ``hydra.run.dir`` may not)."""
    from harness.runs.rundir import RunDir

    try:
        path = Path(sweep_dir).resolve()
    except (RuntimeError, OSError) as exc:
        raise HarnessError(f"hydra.sweep.dir={sweep_dir} cannot be followed ({exc}); give a directory") from None
    if path.exists() and not path.is_dir():
        raise HarnessError(f"hydra.sweep.dir={sweep_dir} is a file, not a directory; give a directory")
    if path.is_dir():
        held = other_output(path)
        if held:
            raise HarnessError(f"hydra.sweep.dir={sweep_dir} holds {held}; a multirun writes a directory of its own: "
                               f"choose another")
        jobs = [p for p in path.iterdir() if (p / RunDir.HYDRA).is_dir()]
        others = [p.name for p in path.iterdir() if p not in jobs and not (jobs and p.name == "multirun.yaml")]
        if others:  # a user's files (Hydra writes its multirun.yaml over one without a word)
            raise HarnessError(f"hydra.sweep.dir={sweep_dir} holds files that are not a multirun's "
                               f"({', '.join(sorted(others)[:4])}): its jobs would write over them; choose a new or "
                               f"empty directory")
    place = path if RunDir(path).made_by_a_sweep() else enclosing_run(path)
    if place is not None:
        raise HarnessError(f"hydra.sweep.dir={sweep_dir} is {'' if place == path else 'inside '}the run directory "
                           f"{place}: a multirun's jobs never write into a run; choose a directory outside it")


def check_run_dir(run_dir: str, app: str = "sweep") -> None:
    """``hydra.run.dir`` names something a run directory can be: Hydra would create it with a
    traceback for a file, a dangling link, a read-only or forbidden place."""
    from harness.runs.rundir import RunDir

    if not run_dir.strip():  # Hydra would make the working directory itself the run directory
        raise HarnessError("hydra.run.dir is empty: give a directory for the run (leave it out for outputs/runs/<time>)")
    if run_dir.startswith("~"):  # quoted for Hydra, so no shell expanded it: a folder named ~ would be made
        raise HarnessError(f"hydra.run.dir={run_dir}: ~ is not expanded here; give the full path "
                           f"({Path(run_dir).expanduser()})")
    path = Path(run_dir)
    try:
        path.resolve(strict=False)
    except (RuntimeError, OSError) as exc:  # a symbolic link that leads back to itself
        raise HarnessError(f"hydra.run.dir={run_dir} cannot be followed ({exc}); give a directory") from None
    command = RunDir(path).output_of()
    if command:  # a command's --out (detect's has a status of its own): not a run's
        raise HarnessError(f"hydra.run.dir={run_dir} holds the output of `harness {command}`; a sweep or locate "
                           f"writes a directory of its own: choose another")
    parent = enclosing_run(path)
    if parent is not None:
        raise HarnessError(f"hydra.run.dir={run_dir} is inside the run directory {parent}: a run never writes into "
                           f"another; choose a directory outside it")
    from harness.runs.reading import is_cache_timing

    if path.is_dir() and is_cache_timing(RunDir(path)) and app != "cache-timing":
        raise HarnessError(f"hydra.run.dir={run_dir} holds a harness cache-timing run; a {app} writes a directory of "
                           f"its own: choose another")
    names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if app == "locate" and names and names <= LOCATE_FILES:
        return  # a locate search's own files, an interrupted one's partial table included: locate answers for them
    if (path / LOCATE_JSON).is_file():  # a locate search: locate answers for its own (fresh replaces it)
        if app == "locate":
            return
        raise HarnessError(f"hydra.run.dir={run_dir} holds a locate search (locate.json); a {app} writes a directory "
                           f"of its own: choose another")
    if path.is_dir() and any(path.iterdir()) and not RunDir(path).made_by_a_sweep():
        shown = ", ".join(sorted(p.name for p in path.iterdir())[:4])
        raise HarnessError(f"hydra.run.dir={run_dir} holds files that are not a run's ({shown}, ...): a sweep would "
                           f"write over them; choose a new or empty directory")
    if path.is_symlink() and not path.exists():
        raise HarnessError(f"hydra.run.dir={run_dir} is a link to {os.readlink(path)}, which does not exist; "
                           f"give a directory")
    if path.exists() and not path.is_dir():
        raise HarnessError(f"hydra.run.dir={run_dir} is a file, not a directory; give a directory")
    # nothing is created here: a command Hydra then refuses must leave no directory behind
    problem = why_not_writable(path)
    if problem and problem[0] == path and path.is_dir():  # the run directory itself (a resume, or a sweep continuing one)
        raise HarnessError(f"cannot write into the run directory {run_dir}: it is not writable (its permissions, "
                           f"or an immutable flag); make it writable to continue it")
    if problem:
        raise HarnessError(f"cannot create the run directory {run_dir}: {problem[1]}; choose another hydra.run.dir")
