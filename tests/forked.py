"""Real ``harness`` processes without paying the imports each time.

A ``python -m harness`` process spends about five seconds importing torch, transformers, pandas and
scipy before it does anything, which made the tests that need real processes (kills, races,
launchers, exit statuses) most of the suite's time. Here a *fork server*
(``multiprocessing``'s "forkserver" start method) imports those once, without running any torch
operation (so no thread pool exists when it forks), and every :class:`Harness` is a fresh child of
it: its own pid and memory, killed by real signals, its own exit status, standard output and error
in files. What it runs is ``harness.cli.main(args)``, the function ``python -m harness`` calls.
Only the ``python -m harness`` entry itself is not exercised here; ``test_cli`` keeps one real
subprocess for that.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# What a sweep imports (heavy); the fork server imports them once, each child inherits them.
PRELOAD = ["harness.cli", "harness.cli.hydra_apps", "harness.runs.runner", "harness.reporting.report", "harness.runs.collect", "harness.runs.check_determinism",
           "harness.runs.callbacks", "hydra", "hydra._internal.utils", "transformers.modeling_utils",
           "transformers.models.llama.modeling_llama", "transformers.models.gpt2.modeling_gpt2",
           "transformers.tokenization_utils_tokenizers", "pyarrow.parquet"]

_context = None


def _forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _child(args: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """Runs in the child: the command line ``harness ARGS`` in ``cwd`` with ``env``."""
    os.chdir(cwd)
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    from harness.cli import main

    try:
        code = main(args)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(code)


def _scratch(suffix: str) -> Path:
    fd, name = tempfile.mkstemp(prefix="harness-", suffix=suffix)
    os.close(fd)
    return Path(name)


@dataclass
class Finished:
    """What :func:`subprocess.run` would give: exit status, standard output and error."""

    returncode: int
    stdout: str
    stderr: str


class Harness:
    """``harness ARGS`` started in a fresh process (a child of the fork server)."""

    def __init__(self, *args: str, cwd: Path, env: dict | None = None):
        # the logs live outside cwd, so that the directory under test holds only what harness wrote
        self._out, self._err = _scratch(".out"), _scratch(".err")
        env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
        self.process = _forkserver().Process(target=_child,
                                             args=(list(args), str(cwd), env, str(self._out), str(self._err)))
        self.process.start()
        self.pid = self.process.pid

    def poll(self) -> int | None:
        return self.process.exitcode

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float = 600) -> Finished:
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
            raise TimeoutError(f"harness did not finish within {timeout} s")
        # like subprocess: a process ended by a signal has the signal's negative number
        finished = Finished(self.process.exitcode, self._out.read_text(), self._err.read_text())
        self._out.unlink()
        self._err.unlink()
        return finished


def run_forked(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> Finished:
    """``harness ARGS`` in a fresh process, to the end."""
    return Harness(*args, cwd=cwd, env=env).wait(timeout)
