"""A run read twice: named twice (two spellings of one path, or a link to it), or a copy of it (its
manifest records the very conditions table of another run given): its conditions would count twice.
Every reader of several runs (the commands, ``H.load_runs``, ``harness collect``) refuses both."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.io import sha256_file
from harness.paths import resolved
from harness.runs.rundir import RunDir


def refuse_given_twice(run_dirs: list[Path], what: str) -> None:
    """Refuse a run named twice (by two spellings of one path, or a link to it): ``what`` it holds would count twice."""
    real = [resolved(d) for d in run_dirs]  # a loop of links is refused in words, not a RuntimeError
    for i, path in enumerate(real):
        if path in real[:i]:
            spellings = list(dict.fromkeys(str(d) for d, r in zip(run_dirs, real) if r == path))
            times = real.count(path)
            named = f" (as {' and '.join(spellings)})" if len(spellings) > 1 else ""
            raise HarnessError(f"{spellings[0]} is given {'twice' if times == 2 else f'{times} times'}{named}: {what} "
                               f"would count {'twice' if times == 2 else f'{times} times'}; give each run once")


def copies(run_dirs: list[Path], manifests: list[dict | None]) -> list[tuple[Path, Path, Path | None]]:
    """Each run given after another whose manifest records the same conditions table (``manifests``:
    each run's, or None), however the copy was made: ``(copy, original, the one whose table has
    been changed since it was written, or None)``."""
    found, tables = [], {}
    for given, manifest in zip(run_dirs, manifests):
        sha = ((manifest or {}).get("tables") or {}).get(RunDir.CONDITIONS)
        if sha and sha in tables:
            changed = [p for p in (Path(given), tables[sha])
                       if (p / RunDir.CONDITIONS).is_file() and sha256_file(p / RunDir.CONDITIONS) != sha]
            found.append((Path(given), tables[sha], changed[0] if changed else None))
        elif sha:
            tables[sha] = Path(given)
    return found


def refuse_copies(run_dirs: list[Path], manifests: list[dict | None]) -> None:
    """Refuse a run given beside a copy of it (:func:`copies`): read together, its conditions would
    count twice."""
    for given, original, changed in copies(run_dirs, manifests)[:1]:
        if changed:  # a copy edited since: not the very same table any more, but one run's conditions twice
            raise HarnessError(f"{given} and {original} are one run (their manifests record the same conditions "
                               f"table), and {changed}'s table has been changed since it was written: read "
                               f"together each condition would count twice; read each on its own "
                               f"(H.load_run(..., trust_damaged=True) for the changed one) to compare them")
        raise HarnessError(f"{given} holds the very conditions table of {original} (a copy?): its conditions "
                           f"would count twice; give each run once")
