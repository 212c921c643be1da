"""A run directory's lock (``.lock``): who may write into the run now.

A sweep holds it for as long as it runs, and ``harness figures`` while it redraws a run's report in
place, so a resume never replaces the tables under a report being drawn from them, nor the other
way. The lock is an ``flock`` on the file (released by the kernel when the holder dies, so a
killed process never leaves it held); the file's text names the holder for the messages.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError
from harness.runs.environment import now_iso

LOCK = ".lock"


def try_lock(fd: int) -> bool:
    """An exclusive ``flock`` on ``fd`` without waiting: False where another process holds one (a
    file's, or a directory's: :func:`harness.runs.outdir.hold_out`)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        return False
    return True


@contextlib.contextmanager
def hold(run: Path, command: str, otherwise: str) -> Iterator[None]:
    """Hold ``run``'s lock while ``command`` (``sweep``, or a command's name) writes into it; refused,
    with ``otherwise`` as the advice, where another process holds it."""
    try:
        fd = os.open(Path(run) / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a file in the way, a read-only or full file system, no permission
        raise HarnessError(f"cannot write to {run}: {exc.strerror or exc}; {otherwise}") from None
    try:
        if not try_lock(fd):
            raise HarnessError(f"{writer(run, another=True)} is writing to {run} ({holder(run)}); wait for it to finish, or "
                               f"{otherwise}")
        try:
            os.ftruncate(fd, 0)
            about = {"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso(), "command": command}
            os.write(fd, json.dumps(about).encode())
        except OSError as exc:
            raise HarnessError(f"cannot write to the run directory {run}: {exc.strerror or exc}") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def held_by(run: Path) -> str | None:
    """Who holds ``run``'s lock now (pid, host, since), or None."""
    try:
        fd = os.open(Path(run) / LOCK, os.O_RDONLY)
    except OSError:  # no lock file: nobody ever held it
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return holder(run)
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _about(run: Path) -> dict:
    try:
        about = json.loads((Path(run) / LOCK).read_text())
    except (OSError, ValueError):
        return {}
    return about if isinstance(about, dict) else {}


def holder(run: Path) -> str:
    """The lock's holder as the file names it: pid, host and since (or "holder unknown")."""
    about = _about(run)
    try:
        return f"pid {about['pid']} on {about['host']}, since {about['since']}"
    except KeyError:
        return "holder unknown"


def lock_command(run: Path) -> str:
    """The command whose lock ``run`` holds, as it wrote it: "sweep" (a resume too), or a command's name."""
    return str(_about(run).get("command", "sweep"))


def writer(run: Path, another: bool = False) -> str:
    """Who writes, in words: a sweep or a resume of one (``another``, to one), or the command redrawing
    the report. (``harness resume`` runs the sweep again: its lock says "sweep" too.)"""
    command = lock_command(run)
    return f"`harness {command}`" if command != "sweep" else \
        "another sweep or resume" if another else "a sweep or resume"
