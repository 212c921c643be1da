"""What every command checks of where it writes and of its numeric options, before it does anything:
no output inside a run directory, no file of the user's overwritten, numbers in their range."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from harness.errors import HarnessError


def check_out(out: Path, allowed: Path | None = None) -> None:
    """``--out`` is a directory, never a run directory nor inside one (a run read, or any other
    sweep's): commands that read runs write elsewhere. ``allowed``: the one run a command writes
    into by design (``harness figures RUN`` redraws into RUN)."""
    from harness.runs.rundir import RunDir

    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file: give a directory")
    if str(out) in ("", "."):  # the working directory itself: its files would be written over
        raise HarnessError("--out is empty or '.': give a directory of its own (a new or empty one)")
    target = out.resolve()
    if allowed is not None and target == allowed.resolve():
        return
    for place in (target, *target.parents):
        command = RunDir(place).output_of()
        if command and place != target:  # another command's output (detect's has a status.json of its own)
            raise HarnessError(f"--out {out} is inside {place}, the output of `harness {command}`; give a directory "
                               f"outside it")
        if command:  # claim_out says whose it is
            continue
        if any((place / name).exists() for name in (RunDir.HYDRA, RunDir.STATUS, RunDir.FINGERPRINT)):
            where = "is the run directory" if place == target else "is inside the run directory"
            raise HarnessError(f"--out {out} {where} {place}: commands that read runs never write into a run; "
                               "give a directory outside it")


def out_beside(out: Path | None, first: Path, command: str) -> Path:
    """``--out``, or where a command writes without one: ``<first run>-<command>`` beside the first run
    it reads (commands that read runs never write into one; each says where it wrote when done)."""
    if out is not None:
        return out
    run = Path(os.path.abspath(first))
    return run.parent / f"{run.name}-{command}"


def claim_out(out: Path, command: str, runs: list[Path] = ()) -> None:
    """Check that ``--out`` may be this command's before it writes anything: refuse a directory that
    holds files no harness command wrote there (a user's own ``report.md`` or ``manifest.json``),
    another command's output, or this command's output from other runs (a rerun on the same runs
    resumes or redraws it; other runs' pages are not replaced without a word); refuse an ``--out``
    that is one of the paths read or inside one.
    :func:`mark_out` then marks it, once nothing more is refused and before anything is written (a
    refused command leaves no directory; an interrupted one leaves its own)."""
    import json

    target = out.resolve()
    read = sorted(str(Path(r).resolve()) for r in runs)
    for path in read:
        if target == Path(path) or Path(path) in target.parents:
            raise HarnessError(f"--out {out} is {'' if target == Path(path) else 'inside '}{path}, which this command "
                               f"reads; give a directory outside what it reads")
    from harness.runs.rundir import RunDir

    marker = out / RunDir.OUT_MARKER
    if out.is_dir() and any(out.iterdir()):
        try:
            mark = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            shown = ", ".join(sorted(p.name for p in out.iterdir())[:4])
            raise HarnessError(f"--out {out} holds files no harness command wrote there ({shown}); nothing is "
                               f"overwritten: give a new or empty directory") from None
        if mark.get("command") != command:
            raise HarnessError(f"--out {out} holds the output of `harness {mark.get('command')}`; give another "
                               f"directory for `harness {command}`")
        if sorted(mark.get("runs") or []) != read:
            made_from, reads = ", ".join(mark.get("runs") or [])[:200], ", ".join(read)[:200]
            raise HarnessError(f"--out {out} holds `harness {command}`'s output for other runs (made from {made_from}; "
                               f"this command reads {reads}); give another directory (a rerun on the same runs writes "
                               f"over its own output)")


def mark_out(out: Path, command: str, runs: list[Path] = ()) -> None:
    """Record which command (and on which runs) writes into ``--out`` (:func:`claim_out` reads it)."""
    from harness.io import write_json
    from harness.runs.rundir import RunDir

    write_json({"command": command, "runs": sorted(str(Path(r).resolve()) for r in runs)}, out / RunDir.OUT_MARKER)


def check_out_file(out: Path, force: bool) -> None:
    """``--out FILE``: never inside a run directory, never a directory, and an existing file only
    with ``--force`` (it may be the file a finished run was made from)."""
    if out.is_dir():
        raise HarnessError(f"--out {out} is a directory: give a file name")
    check_out(out.parent)
    if out.exists() and not force:
        raise HarnessError(f"--out {out} exists; nothing is overwritten: give a new file, or --force to replace it")


def whole(text: str, low: int) -> int:
    """A whole number at or above ``low``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
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
    command = RunDir(path).output_of()
    if command:  # a command's --out (detect's has a status of its own): not a run's
        raise HarnessError(f"hydra.run.dir={run_dir} holds the output of `harness {command}`; a sweep or locate "
                           f"writes a directory of its own: choose another")
    for parent in path.resolve().parents:
        if RunDir(parent).made_by_a_sweep():
            raise HarnessError(f"hydra.run.dir={run_dir} is inside the run directory {parent}: a run never writes into "
                               f"another; choose a directory outside it")
    from harness.runs.reading import is_cache_timing

    if path.is_dir() and is_cache_timing(RunDir(path)) and app != "cache-timing":
        raise HarnessError(f"hydra.run.dir={run_dir} holds a harness cache-timing run; a {app} writes a directory of "
                           f"its own: choose another")
    if (path / "locate.json").is_file():  # a locate search: locate answers for its own (fresh replaces it)
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
    if not path.exists():  # root may write anywhere the permissions say, not on /proc: try, and take it back
        import tempfile

        try:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".harness-probe-"))
        except OSError as exc:
            raise HarnessError(f"cannot create the run directory {run_dir} in {existing}: {exc.strerror or exc}; "
                               f"choose another hydra.run.dir") from None
