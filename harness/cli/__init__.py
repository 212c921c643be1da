"""The command layer: ``harness <command> ...`` (also ``python -m harness``).

Every argument parser of the harness lives in this package; the stages below only have plain
functions. A command parses its arguments before importing what it runs, so ``--help`` and
argument mistakes answer at once. ``sweep``, ``locate`` and ``resume`` are Hydra applications
(:mod:`harness.cli.hydra_apps`); the others are argparse programs (:mod:`harness.cli.tables` for
the commands that read run directories, :mod:`harness.cli.tools` for the rest). Mistakes a user
can fix print one line and exit with status 2; Ctrl-C and SIGTERM stop a sweep cleanly (what
finished is kept) with status 130 and 143; a bug prints its traceback and exits 3.
"""

from __future__ import annotations

import importlib
import sys
import traceback

from harness.errors import HarnessError

USAGE = """usage: harness <command> [args]

commands:
  sweep [overrides] [-m]   run a prefix sweep (Hydra; e.g. model=gpt2 prefix.lengths=[32,64])
  locate [overrides]       find the prefix-length interval where drift rises fastest
  resume RUN_DIR           finish an interrupted run (computes only what is missing)
  collect DIR [...]        merge run directories (e.g. a multirun) into one table set
  check-determinism RUN    rerun a sample of conditions at batch size 1 and compare
  kv-size [key=value ...]  KV-cache size of a model config (layers, kv heads, head dim, dtype, ...)
  figures RUN [RUN ...]    redraw figures and report.md from stored tables (no model needed)
  claims RUN [...]         test the three contamination claims (middle layers, 64->128 jump, C vs B) on runs
  plan RUN [...]           the cheapest prompts x prefixes design reaching a power, from pilot runs
  corpus-report RUN [...]  the public-benchmark page: attacker's string vs mention, C - B by template/position
  detect RUN [...]         would a detector catch it? Attention Tracker beside capture heads, TPR at low FPR
  causal-heads RUN         do the heads RUN names carry its effect? (mask them, against random heads)
  build-prefixes ...       build a prefix bank from a text corpus or attack templates
  cache-timing [overrides] what a shared prefix cache tells another tenant (vLLM; make vllm)

sweep and locate take Hydra options too: --config-dir DIR adds your own config directory,
--cfg job prints the composed config, --help lists the config groups.
Commands that read runs write beside the first one (RUN-claims, RUN-detect, ...; beside a multirun: SWEEP-claims) unless --out says where.
Run `harness <command> --help` for a command's options.
"""

INTERNAL_ERROR = 3  # a bug in the harness, not a mistake in the command (those exit 2)

# Each command's entry point, imported only when that command runs (keeps `--help` fast).
COMMANDS = {
    "sweep": "harness.cli.hydra_apps:sweep",
    "resume": "harness.cli.hydra_apps:resume",
    "locate": "harness.cli.hydra_apps:locate",
    "collect": "harness.cli.tables:collect",
    "check-determinism": "harness.cli.tables:check_determinism",
    "figures": "harness.cli.tables:figures",
    "claims": "harness.cli.claims:claims",
    "corpus-report": "harness.cli.tables:corpus_report",
    "detect": "harness.cli.tables:detect",
    "plan": "harness.cli.claims:plan",
    "causal-heads": "harness.cli.tables:causal_heads",
    "kv-size": "harness.cli.tools:kv_size",
    "build-prefixes": "harness.cli.tools:build_prefixes",
    "cache-timing": "harness.cli.hydra_apps:cache_timing",
}
# Commands that left the harness: where they went, in one line (exit 2).
MOVED = {
    "train-demo": "training the demo models is no longer part of the harness: it is the harness-train-demo "
                  "command of the demo_training distribution in this repository (pip install -e demo_training; "
                  "same options)",
}


def report_bug(exc: BaseException) -> int:
    """Print the traceback of an unexpected exception and ask for a bug report; the exit status."""
    traceback.print_exception(exc)
    print(f"internal error ({type(exc).__name__}): this is a bug in the harness, not a mistake in your command; "
          f"please report it with the traceback above", file=sys.stderr)
    return INTERNAL_ERROR


# options a command takes once per value (each checked where it is parsed)
REPEATABLE = frozenset({"--delta", "--measure"})


def main(argv: list[str] | None = None) -> int:
    """``harness COMMAND ARGS``: the command's exit status (2: a mistake in the command, 3: a bug)."""
    import logging

    if sys.stdout is None:  # started with standard output closed (`>&-`): every print would vanish, rc 0
        if sys.stderr is not None:
            print("error: standard output is closed (>&-), where the command prints its result: give it a file "
                  "(> out.txt), a pipe, or /dev/null to discard it", file=sys.stderr)
        return 2
    # `harness ... | head`: the reader has what it wanted. A log line into the closed pipe is not an
    # error to print a traceback for (Hydra's --info is some 1,700 of them)
    raising, logging.raiseExceptions = logging.raiseExceptions, False
    try:
        status = _dispatch(sys.argv[1:] if argv is None else list(argv))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except OSError as exc:  # standard output on a full disk (`> /dev/full`): _dispatch passes only StdoutError on
        _quiet_stdout()
        print(f"error: cannot write to standard output ({exc.strerror or exc}): the files the command wrote are "
              f"complete (each is written whole or not at all); give its output somewhere it can be written",
              file=sys.stderr)
        return 2
    finally:
        logging.raiseExceptions = raising


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that exit's flush of what could not be written raises
    no second error."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class StdoutError(OSError):
    """Standard output refused a write (a full disk, `> /dev/full`): the user's to fix, not a bug."""


class _Guarded:
    """Standard output, its write errors raised as :class:`StdoutError` (a closed pipe stays a
    BrokenPipeError), so that main tells them from a command's own OSError."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, name, *args):
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from None

    def write(self, text):
        return self._call("write", text)

    def flush(self):
        return self._call("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command in MOVED:
        print(f"error: {MOVED[command]}", file=sys.stderr)
        return 2
    if command not in COMMANDS:
        import difflib

        near = difflib.get_close_matches(command, [*COMMANDS, "help"], n=1, cutoff=0.75)
        if near:
            print(f"error: unknown command {command!r}; did you mean `harness {near[0]}`? (`harness --help` lists "
                  f"the commands)", file=sys.stderr)
        else:
            print(f"error: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    if any(not a.strip() for a in rest):  # an unset shell variable ("$RUN"): a path of "" reads as "."
        print(f"error: harness {command} was given an empty argument (an unset shell variable?): give the path or "
              f"value it stands for", file=sys.stderr)
        return 2
    flags = [a.split("=", 1)[0] for a in rest if a.startswith("--") and a != "--"]
    twice = next((f for f in flags if flags.count(f) > 1 and f not in REPEATABLE), None)
    if twice:  # argparse keeps the last without a word
        print(f"error: {twice} is given {flags.count(twice)} times: give it once", file=sys.stderr)
        return 2
    module, function = COMMANDS[command].split(":")
    import signal

    from harness.errors import Terminated, on_sigterm

    try:  # SIGTERM says its line too (the Hydra apps install their own)
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread (a notebook's worker): signals are not ours to take
        previous = None
    import warnings

    shown = warnings.formatwarning  # a warning is a line for the user, not a file, line and source
    warnings.formatwarning = lambda message, *_args, **_kw: f"warning: {message}\n"
    show, said = warnings.showwarning, set()

    mixed = "--allow-mixed-settings" in rest  # the command's note says the copies count, in its own words

    def show_once(message, category=UserWarning, *args, **kwargs):
        """Each distinct warning once (the summaries each warn of the same table, and the "once" filter
        forgets at every catch_warnings block); none that pooled runs count twice where the note says it
        (its advice, by=, is the API's)."""
        from harness.analysis.checks import PooledRunsWarning

        if mixed and issubclass(category, PooledRunsWarning):
            return
        if str(message) not in said:
            said.add(str(message))
            show(message, category, *args, **kwargs)

    warnings.showwarning = show_once
    stdout = sys.stdout  # never None here: main refuses a closed standard output first
    sys.stdout = _Guarded(stdout)
    try:
        return getattr(importlib.import_module(module), function)(rest)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # not a bug: main says nothing of it
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM in a command that reads runs (the Hydra apps say their own)
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"\n{how}: `harness {command}` stopped; what it had written is complete files only (each is "
              f"written whole or not at all), so run it again", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except StdoutError:  # not the command's bug: main says it in one line
        raise
    except Exception as exc:  # noqa: BLE001
        return report_bug(exc)
    finally:
        warnings.formatwarning, warnings.showwarning = shown, show
        sys.stdout = stdout
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def __getattr__(name: str):
    # TaskExit is the Hydra applications' (imported here only when asked for); Terminated, every command's
    if name == "Terminated":
        from harness.errors import Terminated

        return Terminated
    if name == "TaskExit":
        return getattr(importlib.import_module("harness.cli.hydra_apps"), name)
    if name == "hydra_quoted":
        return getattr(importlib.import_module("harness.cli.overrides"), name)
    raise AttributeError(f"module 'harness.cli' has no attribute {name!r}")
