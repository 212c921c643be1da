"""The options every command that reads run directories shares, and how it reports what it read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MIN_RESAMPLES = 20  # fewer leave a crossed bootstrap's percentiles undefined (numpy warns, the interval is noise)


class CommandParser(argparse.ArgumentParser):
    """The parser of every ``harness`` command: options are spelled in full. argparse's default takes an
    unambiguous abbreviation (``--res`` for ``--resamples``), which lets an option given twice, once
    abbreviated, past the given-twice refusal with the last copy silently applied."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def out_path(text: str) -> Path:
    """An ``--out`` value as a path. ``-`` stays ``-``, which the command refuses in one line (the Unix
    convention for standard output: every command writes files); ``./-`` is a directory named ``-``,
    which :class:`~pathlib.Path` would shorten to ``-``, so it is made absolute."""
    path = Path(text)
    return path.absolute() if str(path) == "-" and text != "-" else path


def trust_damaged_option(parser: argparse.ArgumentParser) -> None:
    """The ``--trust-damaged`` option of every command that reads run tables."""
    parser.add_argument("--trust-damaged", action="store_true",
                        help="read tables whose sha256 differs from the manifest's (warn instead of refusing)")


def mixed_settings_option(parser: argparse.ArgumentParser) -> None:
    """The ``--allow-mixed-settings`` option of every command that reads several runs together."""
    parser.add_argument("--allow-mixed-settings", action="store_true",
                        help="read runs that differ in max_new_tokens, decode path, dtype, weights, ... together "
                             "(refused otherwise: one table would mix them)")


def failed_option(parser: argparse.ArgumentParser) -> None:
    """The ``--allow-failed`` option of every command that reads runs' results."""
    parser.add_argument("--allow-failed", action="store_true",
                        help="read a run some of whose conditions failed (its tables hold the others); the pages "
                             "then say how many are missing")


def reading_options(parser: argparse.ArgumentParser) -> None:
    """``--trust-damaged``, ``--allow-mixed-settings`` and ``--allow-failed``: what every command that
    reads several runs' results takes."""
    trust_damaged_option(parser)
    mixed_settings_option(parser)
    failed_option(parser)


def reading_notes(ns: argparse.Namespace, runs: list[Path], ignore_settings: tuple[str, ...] = (),
                  takes: str = "runs") -> list[str]:
    """Refuse runs that are not finished (:mod:`harness.runs.reading`) and say on stderr what the
    pages will say of the others (``ignore_settings``, ``takes``: :func:`harness.runs.reading.reading_notes`)."""
    from harness.runs.reading import reading_notes as notes_of

    has_option = hasattr(ns, "allow_mixed_settings")
    notes = notes_of(runs, allow_failed=ns.allow_failed, trust_damaged=ns.trust_damaged,
                     allow_mixed_settings=has_option and ns.allow_mixed_settings, ignore_settings=ignore_settings,
                     takes=takes, mixed_option="--allow-mixed-settings" if has_option else None)
    print_notes(notes)
    return notes


def run_manifests(runs: list[Path], trust_damaged: bool) -> list[dict]:
    """The runs' manifests, where they have one (what the reports say of each run's prefix source)."""
    from harness.runs.rundir import RunDir

    return [m for m in (RunDir(run).manifest(trust_damaged) for run in runs) if m]


def decided_deltas(ns: argparse.Namespace, runs: list[Path], measures, command: str) -> tuple[dict, list[str]]:
    """The smallest effects of interest a deciding command (claims, plan) works at: those the runs
    were made with (their manifests' ``claims.delta``, as ``harness figures`` reads them), with the
    command line's ``--delta`` on top, and the notes for its page where a ``--delta`` replaced a run's.
    A ``--delta`` for a measure ``command`` does not test (``measures``) is refused: it would change
    nothing and say nothing."""
    from harness.analysis.verdicts import recorded_deltas
    from harness.errors import HarnessError
    from harness.measure.metrics import default_deltas

    given = dict(ns.delta)
    twice = next((m for m in given if sum(k == m for k, _ in ns.delta) > 1), None)
    if twice is not None:
        values = ", ".join(f"{v:g}" for k, v in ns.delta if k == twice)
        raise HarnessError(f"--delta {twice}= is given more than once ({values}): give each measure's Δ once")
    unused = sorted(set(given) - set(measures))
    if unused:
        planning = command == "harness plan"
        # the measures its tests can read at all: on given runs, fewer may be tested (refuse_idle_deltas says which)
        raise HarnessError(f"the tests of {command} read at most {', '.join(measures)}; --delta "
                           f"{unused[0]}=... would change nothing "
                           + ("(--measure M plans the report's C - B on a measure, at its --delta)" if planning else
                              f"(the report's C - B table and the obey tables decide at the sweep's Δ: `harness resume "
                              f"RUN +claims.delta.{unused[0]}=VALUE` redraws them at another, every result reused)"))
    # a Δ the command does not read, or one --delta sets, may differ between the runs: nothing decides at it
    differing: set[str] = set()
    recorded = recorded_deltas(run_manifests(runs, ns.trust_damaged), set(measures) - set(given), differing)
    made_at = {**default_deltas(), **recorded}  # a run made without claims.delta decided at the registry's
    given = {m: v for m, v in given.items() if m in differing or made_at.get(m) != v}  # else it changes nothing
    notes = [f"--delta {m}={given[m]:g} replaces the Δ" + (
        "s the runs were made with, which differ between them" if m in differing else
        f" of {made_at[m]:g} the runs were made with" + ("" if m in recorded else " (the default)"))
        for m in sorted(given) if m in made_at]
    return {**recorded, **given}, notes


def print_notes(notes: list[str]) -> None:
    """A command's notes on the console, each a line beginning "note:" (its page says them too)."""
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


def refuse_idle_deltas(ns: argparse.Namespace, lacking: dict[str, str], command: str) -> None:
    """Refuse a ``--delta`` for a measure ``command`` tests in general but on none of these runs
    (``lacking``: such measures, each with why): it would change nothing, while the page's note said
    it replaced the runs' Δ. :func:`decided_deltas` refused the measures it never tests."""
    from harness.errors import HarnessError

    idle = sorted(set(dict(ns.delta)) & set(lacking))
    if idle:
        raise HarnessError(f"--delta {idle[0]}=... would change nothing: no test {command} makes on these runs reads "
                           f"{idle[0]} ({lacking[idle[0]]})")
