"""Which runs a reader may read as finished, and what its pages must say of those it reads.

``figures``, ``claims``, ``plan``, ``causal-heads``, ``corpus-report`` and ``detect`` read run
directories a sweep wrote. A run a sweep is writing now, one that was interrupted or stopped
with an error, or one that never finished is refused in one line naming its state and the
command that finishes it; a run whose status is ``failed`` (some conditions failed, the tables
hold the others) is refused unless the reader was given ``--allow-failed``, and then every page
it writes says how many conditions are missing. Runs read together although they differ in a
setting (``--allow-mixed-settings``) are said on the page too (:mod:`harness.runs.compat`).
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.runs.compat import check_compatible
from harness.runs.rundir import RunDir, compared_settings


def reading_notes(run_dirs: list[Path], *, allow_failed: bool = False, allow_mixed_settings: bool = False,
                  trust_damaged: bool = False) -> list[str]:
    """Refuse runs that are not finished (module docstring); return one sentence per thing the
    pages must say: failed conditions left out (``allow_failed``), settings mixed
    (``allow_mixed_settings``)."""
    notes = []
    runs = [RunDir(d) for d in run_dirs]
    for run in runs:
        note = _state_note(run, allow_failed)
        if note:
            notes.append(note)
    manifests = [run.manifest(trust_damaged) or {} for run in runs]
    mixed = check_compatible(*compared_settings(runs, manifests), allow_mixed_settings=allow_mixed_settings)
    if mixed:
        notes.append(f"These runs differ in {'; '.join(mixed)}, and were read together (--allow-mixed-settings): no "
                     f"column says which row was computed under which setting.")
    return notes


def _state_note(run: RunDir, allow_failed: bool) -> str | None:
    holder = held_by(run)
    if holder is not None:
        raise HarnessError(f"{run} is being written by a sweep ({holder}): its tables are not final and nothing may be "
                           f"written into it; read it once the sweep has finished")
    info = run.status()
    if info is None:
        manifest = run.manifest(trust_damaged=True) or {}
        if "collected" in manifest or not run.is_run():  # a collected table set; or not a run (the reader says)
            return None
        raise HarnessError(f"{run} did not finish (no {RunDir.STATUS}): finish it with `harness resume {run}`")
    state = info.get("status")
    if state == "complete":
        return None
    if state == "failed":
        failed, total = len(info.get("failed") or []), info.get("conditions")
        of = f" of {total}" if isinstance(total, int) else ""
        if not allow_failed:
            raise HarnessError(f"{run} is a failed run: {failed}{of} conditions failed and its tables hold only the "
                               f"others; `harness resume {run}` retries them, or pass --allow-failed to read what "
                               f"finished (the pages then say what is missing)")
        return (f"{run}: {failed}{of} conditions failed and are missing from these tables (status failed, read with "
                f"--allow-failed); `harness resume {run}` retries them.")
    if state == "running":  # nobody holds the lock: the sweep was killed without a word
        raise HarnessError(f"{run} did not finish: its status says running but no sweep holds it (the process was "
                           f"killed); finish it with `harness resume {run}`")
    why = f" ({info.get('error')})" if info.get("error") else ""
    raise HarnessError(f"{run} did not finish: its status is {state}{why}; finish it with `harness resume {run}`")


def held_by(run: RunDir) -> str | None:
    """Who holds the run's lock now (a sweep writing it: pid, host, since), or None."""
    import errno
    import fcntl
    import os

    path = run / RunDir.LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file: no sweep ever held it
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return run.holder()
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
