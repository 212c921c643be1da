"""The one exception type for mistakes a user can fix (bad input, missing model, bad lengths).

The CLI prints its message as a single line and exits non-zero; any other exception is a bug and
keeps its traceback.
"""


class HarnessError(Exception):
    """A user-fixable problem. The message says what is wrong, where, and what to do."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (what SLURM and most schedulers send before a kill), handled like Ctrl-C: every
    command stops where it is, says so in one line and exits 143 (Ctrl-C: 130)."""


def on_sigterm(signum, frame) -> None:
    """A SIGTERM handler that raises :class:`Terminated` in the main thread."""
    raise Terminated()
