"""Where a command that reads runs may write (``--out``, or ``out=`` in the API): never into a run
directory nor inside one, never over files no harness command wrote, never over another command's
output or this command's output from other runs. The CLI (:mod:`harness.cli.guards`) and the Python
API (:func:`harness.runs.collect.collect`) share these checks. The run directory's layout is imported
where it is used: a command's ``--help`` and its refusals come before torch loads."""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import HarnessError
from harness.paths import broken_link, unexpanded_variable, why_not_writable


def check_out(out: Path, allowed: Path | None = None) -> None:
    """``--out`` is a directory, never a run directory nor inside one (a run read, or any other
    sweep's): commands that read runs write elsewhere. ``allowed``: the one run a command writes
    into by design (``harness figures RUN`` redraws into RUN)."""
    from harness.runs.rundir import RunDir

    refuse_unexpanded(out)
    if out.is_symlink() and not out.exists():
        raise HarnessError(f"--out {out} {broken_link(out)}: give a directory")
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file: give a directory")
    problem = why_not_writable(out)  # before a command computes what it would write there
    if problem:
        raise HarnessError(f"cannot {'write into' if problem[0] == out else 'create'} --out {out}: {problem[1]}; "
                           f"give another --out")
    target = out.resolve()
    if allowed is not None and target == allowed.resolve():  # `harness figures .` in a run redraws it in place
        return
    if str(out) in ("", "."):  # the working directory itself: its files would be written over
        raise HarnessError("--out is empty or '.': give a directory of its own (a new or empty one)")
    for place in (target, *target.parents):
        command = RunDir(place).output_of()
        if command and place != target:  # another command's output (detect's has a status.json of its own)
            raise HarnessError(f"--out {out} is inside {place}, the output of `harness {command}`; give a directory "
                               f"outside it")
        if command:  # claim_out says whose it is
            continue
        if (place / "multirun.yaml").is_file():  # a multirun's sweep directory: its jobs are runs
            raise HarnessError(f"--out {out} {'is' if place == target else 'is inside'} the sweep directory of a "
                               f"multirun ({place}), whose jobs are runs; give a directory outside it")
        if any((place / name).exists() for name in (RunDir.HYDRA, RunDir.STATUS, RunDir.FINGERPRINT)):
            where = "is the run directory" if place == target else "is inside the run directory"
            raise HarnessError(f"--out {out} {where} {place}: a command's own output never goes inside a run (only "
                               "`harness figures RUN` without --out redraws the run's own report, in place); give a "
                               "directory outside it")


def refuse_unexpanded(out: Path) -> None:
    """A quoted ``~/X`` reaches a command unexpanded: one part of it went to ``$HOME/X`` and another to
    ``./~/X``. Refused, so that every command writes where it says."""
    if str(out).startswith("~"):
        raise HarnessError(f"--out {out} starts with ~, which the shell did not expand (it was quoted): give the path "
                           f"without quotes, or in full ({Path(out).expanduser()})")
    variable = unexpanded_variable(str(out))
    if variable:  # '$HOME/x' quoted: a directory literally named $HOME
        raise HarnessError(f"--out {out} holds {variable.group()}, which the shell did not expand (it was quoted): "
                           f"give the path without single quotes, or in full")
    if str(out) == "-":  # the Unix convention for standard output: these commands write files
        raise HarnessError("--out -: this command writes files, not standard output: give a path")


def claim_out(out: Path, command: str, runs: list[Path] = (), settings: dict | None = None, by: str | None = None
              ) -> None:
    """Check that ``--out`` may be this command's before it writes anything: refuse a directory that
    holds files no harness command wrote there (a user's own ``report.md`` or ``manifest.json``),
    another command's output, or this command's output from other runs or of other ``settings`` (the
    options that change what it writes: a rerun on the same runs with the same settings resumes or
    redraws it; other runs' or settings' pages are not replaced without a word); refuse an ``--out``
    that is one of the paths read or inside one. ``by``: who writes, in the messages (``H.write_outputs``;
    default the command).
    :func:`mark_out` then marks it, once nothing more is refused and before anything is written (a
    refused command leaves no directory; an interrupted one leaves its own)."""
    import json

    from harness.runs.rundir import RunDir

    target = out.resolve()
    read = sorted(str(Path(r).resolve()) for r in runs)
    for path in read:
        if target == Path(path) or Path(path) in target.parents:
            raise HarnessError(f"--out {out} is {'' if target == Path(path) else 'inside '}{path}, which this command "
                               f"reads; give a directory outside what it reads")
    marker = out / RunDir.OUT_MARKER
    if out.is_dir() and any(out.iterdir()):
        try:
            mark = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            entries = sorted(out.iterdir())
            made = [p for p in entries if other_output(p) or RunDir(p).is_run() or (p / "multirun.yaml").is_file()]
            others = [p.name for p in entries if p not in made]
            what = (f"files no harness command wrote there ({', '.join(others[:4])})" if others else
                    f"other runs and command outputs ({', '.join(p.name for p in made[:4])})")
            raise HarnessError(f"--out {out} holds {what}; nothing is overwritten: give a new or empty directory "
                               f"of its own") from None
        if mark.get("command") != command:
            api = mark.get("command") == "figures" and not mark.get("runs") and "tables" in (mark.get("settings") or {})
            held = "pages H.write_outputs drew from tables in memory" if api else \
                f"the output of `harness {mark.get('command')}`"
            raise HarnessError(f"--out {out} holds {held}; give another directory for {by or f'`harness {command}`'}")
        if sorted(mark.get("runs") or []) != read:
            made_from, reads = ", ".join(mark.get("runs") or [])[:200], ", ".join(read)[:200]
            if not made_from:  # H.write_outputs: pages drawn from tables in memory, not from runs
                raise HarnessError(f"--out {out} holds pages H.write_outputs drew from tables in memory; give another "
                                   f"directory for `harness {command}` (nothing is overwritten)")
            raise HarnessError(f"--out {out} holds `harness {command}`'s output for other runs (made from {made_from}; "
                               f"this command reads {reads or 'tables in memory'}); give another directory (a rerun on "
                               f"the same runs writes over its own output)")
        earlier = mark.get("settings")  # None: written by a version that did not record them
        if settings is not None and isinstance(earlier, dict):
            now = json.loads(json.dumps(settings))  # as the marker holds them (tuples as lists, keys as text)
            differ = [f"{key} {_shown(earlier.get(key))} there, {_shown(value)} here" for key, value in now.items()
                      if earlier.get(key) != value]
            if differ:
                if not read and "tables" in now:  # the API's pages of other tables
                    raise HarnessError(f"{out} holds pages H.write_outputs drew from other tables; give another "
                                       f"directory (nothing is overwritten)")
                raise HarnessError(f"--out {out} holds `harness {command}`'s output made with other settings "
                                   f"({'; '.join(differ)}); give another directory (nothing is overwritten), or the "
                                   f"same settings to write over its own output")


def _shown(value) -> str:
    """A recorded setting in words: ``{}`` (no --delta over the runs' own) as "the runs' own"."""
    if value == {}:
        return "the runs' own"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return "none" if value is None else str(value)


def mark_out(out: Path, command: str, runs: list[Path] = (), settings: dict | None = None, by: str | None = None
             ) -> None:
    """Record which command (on which runs, with which ``settings``) writes into ``--out``
    (:func:`claim_out` reads it), holding ``--out`` for the rest of this process (:func:`hold_out`) and
    checking it again under that hold: two commands started together both passed :func:`claim_out`
    before either had marked it, and the second wrote over the first's pages."""
    from harness.io import write_json
    from harness.runs.rundir import RunDir

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # made impossible since claim_out checked it
        raise HarnessError(f"cannot create --out {out}: {exc.strerror or exc}; give another --out") from None
    hold_out(out)
    claim_out(out, command, runs, settings, by)  # again: another command may have marked it since
    mark = {"command": command, "runs": sorted(str(Path(r).resolve()) for r in runs)}
    write_json(mark if settings is None else {**mark, "settings": settings}, out / RunDir.OUT_MARKER)


_HELD: dict[str, int] = {}  # the --out directories this process holds: resolved path -> the open descriptor


def hold_out(out: Path) -> None:
    """Hold ``out`` (an ``flock`` on the directory itself: no file of its own, released by the kernel
    when the process ends, killed or not) until :func:`release_out` or the process ends; refused in
    one line where another process holds it. Held again by the same process: nothing to do."""
    from harness.runs.lock import try_lock

    key = str(out.resolve())
    if key in _HELD:
        return
    fd = os.open(out, os.O_RDONLY)
    if not try_lock(fd):
        os.close(fd)
        raise HarnessError(f"--out {out} is being written by another harness command now: wait for it to finish, "
                           f"or give another --out (nothing is overwritten)")
    _HELD[key] = fd


def release_out(out: Path) -> None:
    """Let ``out`` go (:func:`hold_out`): the Python API's writers, whose process lives on."""
    fd = _HELD.pop(str(out.resolve()), None)
    if fd is not None:
        os.close(fd)


LOCATE_JSON, LOCATE_PARTIAL = "locate.json", "locate.partial.parquet"  # a locate search's, finished or cut off
LOCATE_FILES = {LOCATE_JSON, "locate.parquet", LOCATE_PARTIAL, "locate.log", ".hydra"}  # everything it writes


def other_output(path: Path) -> str | None:
    """What ``path`` holds that no sweep may write into, in words ("the output of `harness claims`",
    "a locate search", "a harness cache-timing run"), or None: the one rule a sweep's run directory,
    a multirun's sweep directory and :func:`harness.run` all apply."""
    from harness.runs.reading import is_cache_timing
    from harness.runs.rundir import RunDir

    command = RunDir(path).output_of()
    if command:
        return f"the output of `harness {command}`"
    if (path / LOCATE_JSON).exists() or (path / LOCATE_PARTIAL).exists():
        return "a locate search"
    if path.is_dir() and is_cache_timing(RunDir(path)):
        return "a harness cache-timing run"
    return None


def enclosing_run(path: Path) -> Path | None:
    """The run directory ``path`` lies inside (its nearest parent a sweep made), or None: a run, a
    multirun's jobs and a run of the API never write into another run."""
    from harness.runs.rundir import RunDir

    return next((p for p in Path(path).resolve().parents if RunDir(p).made_by_a_sweep()), None)


def check_out_file(out: Path, force: bool) -> None:
    """``--out FILE``: never inside a run directory, never a directory, and an existing file only
    with ``--force`` (it may be the file a finished run was made from)."""
    from harness.runs.rundir import RunDir

    refuse_unexpanded(out)
    if out.is_symlink() and not out.exists():  # a link to nothing, or a loop: where would it write?
        raise HarnessError(f"--out {out} {broken_link(out)}: give a file name")
    if out.is_dir():
        raise HarnessError(f"--out {out} is a directory: give a file name")
    if out.exists() and not out.is_file():  # a device, a pipe, a socket: --force replaces files, not those
        raise HarnessError(f"--out {out} is not an ordinary file (a device, pipe or socket): give a file name")
    folder = out.absolute().parent  # a bare file name's folder is the working directory, not "."
    for place in (folder.resolve(), *folder.resolve().parents):
        command = RunDir(place).output_of()
        if command or any((place / name).exists() for name in (RunDir.HYDRA, RunDir.STATUS, RunDir.FINGERPRINT)):
            what = f"the output of `harness {command}`" if command else "a run directory"
            raise HarnessError(f"--out {out} would be written inside {place}, {what}; give a file outside it")
    if out.exists() and not force:
        raise HarnessError(f"--out {out} exists; nothing is overwritten: give a new file, or --force to replace it")


def drop_report(path: Path) -> list[str]:
    """Remove the report, its tables and the standard figures from ``path`` (their tables were just
    replaced, so they describe other data), by exact name: a user's own files there stay. Returns
    the names removed."""
    from harness.io import figure_files_in
    from harness.reporting.edits import keep_edited_outputs, keep_if_edited
    from harness.reporting.figure_names import FIGURE_NAMES, REPORT, REPORT_FILES

    keep_if_edited(path / REPORT, " (it describes the tables replaced)")
    keep_edited_outputs(path)  # a figure or report table the user changed is theirs, not one to remove
    gone = [path / name for name in REPORT_FILES if (path / name).is_file()]
    gone += figure_files_in(path / "figures", FIGURE_NAMES)
    for file in gone:
        file.unlink(missing_ok=True)
    return sorted({("figures/" if file.parent.name == "figures" else "") + file.name for file in gone})


def unmark_if_empty(out: Path) -> None:
    """Remove ``out`` where it holds nothing but :func:`mark_out`'s marker: a command refused after
    marking it leaves no directory of its own behind."""
    from harness.runs.rundir import RunDir

    if out.is_dir() and [p.name for p in out.iterdir()] == [RunDir.OUT_MARKER]:
        (out / RunDir.OUT_MARKER).unlink()
        out.rmdir()


def write_outputs(conditions, attention, out_dir: Path, title: str = "Prefix contamination run", noise=None,
                  manifests: list[dict] = (), notes: list[str] = ()) -> list[Path]:
    """The report, its tables and the standard figures of ``conditions`` (and ``attention``) into
    ``out_dir``, for the Python API: checked as every command's ``--out`` is (never a run directory nor
    inside one, never over files no harness command wrote, never over another command's output), then
    :func:`harness.reporting.report.write_outputs`. Returns the paths written."""
    from harness.analysis.checks import check_frame, check_tables
    from harness.reporting.report import page_arguments_problem
    from harness.reporting.report import write_outputs as write

    if not isinstance(out_dir, (str, os.PathLike)):
        raise HarnessError(f"write_outputs: out_dir must be a directory's path, got {out_dir!r}")
    problem = page_arguments_problem(title, [], notes, manifests)  # before anything is drawn
    if problem:
        raise HarnessError(f"write_outputs: {problem}")
    try:
        check_tables(noise=noise)
    except ValueError as exc:
        raise HarnessError(f"write_outputs: {exc}") from None
    out_dir = Path(out_dir).expanduser()  # a Python call: no shell expanded ~, as H.run and H.load_run read it
    try:
        check_frame(conditions, "conditions")
        if attention is not None:
            check_frame(attention, "attention")
    except ValueError as exc:
        raise HarnessError(f"write_outputs: {exc}") from None
    if len(conditions) == 0:  # nothing to draw: refused before the directory is made
        raise HarnessError("write_outputs: the conditions table is empty; give a run's conditions")
    check_out(out_dir)
    settings = {"tables": table_digest(conditions, attention)}  # other tables' pages are not drawn over its own
    claim_out(out_dir, "figures", settings=settings, by="H.write_outputs")
    mark_out(out_dir, "figures", settings=settings, by="H.write_outputs")
    try:
        return write(conditions, attention, out_dir, title, noise, manifests, notes)
    finally:
        release_out(out_dir)  # a notebook's process lives on: another may write here once this is done


def table_digest(*tables) -> str:
    """A short sha256 of tables' columns and values (None for a table not given): what tells the
    tables :func:`write_outputs` drew a directory's pages from from others."""
    import hashlib

    import pandas as pd

    digest = hashlib.sha256()
    for df in tables:
        if df is None:
            digest.update(b"none")
            continue
        digest.update(repr(list(df.columns)).encode())
        for column in df.columns:
            values = df[column].map(repr) if df[column].dtype == object else df[column]  # lists per step, texts
            digest.update(pd.util.hash_pandas_object(values, index=False).to_numpy().tobytes())
    return digest.hexdigest()[:16]
