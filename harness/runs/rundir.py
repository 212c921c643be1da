"""One run directory: the names of its files, its status, its lock and its result store.

Every module that reads or writes a run directory goes through :class:`RunDir`, so the layout
is written down once:

    conditions.parquet, attention.parquet, noise.parquet   the tables (rebuilt from results/)
    manifest.json, report.md, figures/                     what the run says about itself
    results/, failures/, quarantine/                       per-condition results (harness.runs.store)
    status.json       running | interrupted | failed | error | complete (written last)
    run_fingerprint.json   the configuration the results belong to
    .hydra/           config.yaml and overrides.yaml of the command that owns the run
    sweep.log, .lock

A sweep *claims* the directory (:meth:`RunDir.claim`): it refuses a directory that holds another
configuration's results or that another sweep holds the lock of, and it does so before writing
anything, so a refused command leaves the run byte for byte as it was.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from harness.errors import HarnessError
from harness.io import figure_files_in, read_table, sha256_file, write_json, write_text
from harness.runs.environment import now_iso
from harness.runs.schema import KEY_COLUMNS
from harness.runs.store import ResultStore
from harness.runs.tables import concat_tables

log = logging.getLogger(__name__)

STATUSES = ("running", "interrupted", "failed", "error", "complete")
# Columns the readers of each table need that runs of harness 0.1 did not write.
REQUIRED_COLUMNS = {
    "conditions.parquet": (*KEY_COLUMNS, "target_hit", "norm_edit_distance"),
    "attention.parquet": (*KEY_COLUMNS, "layer", "head", "segment", "kl", "capture", "kl_shared", "n_queries"),
}


class RunDir:
    CONDITIONS = "conditions.parquet"
    ATTENTION = "attention.parquet"
    NOISE = "noise.parquet"
    TABLES = (CONDITIONS, ATTENTION, NOISE)
    MANIFEST = "manifest.json"
    REPORT = "report.md"
    FIGURES = "figures"
    STATUS = "status.json"
    FINGERPRINT = "run_fingerprint.json"
    HYDRA = ".hydra"
    LOG = "sweep.log"
    LOCK = ".lock"

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __str__(self) -> str:
        return str(self.path)

    # -- reading -------------------------------------------------------------------------------

    def _json(self, name: str) -> dict | None:
        """A JSON file of the run, None when absent; a damaged one is a one-line error naming it."""
        path = self / name
        if not path.is_file():
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise HarnessError(f"{path} is unreadable ({type(exc).__name__}); the run directory is damaged: "
                               f"restore the file, or rerun with on_existing=fresh") from None
        if not isinstance(value, dict):
            raise HarnessError(f"{path} is damaged (expected a JSON object)")
        return value

    def status(self) -> dict | None:
        return self._json(self.STATUS)

    def manifest(self) -> dict | None:
        return self._json(self.MANIFEST)

    def problem(self) -> str | None:
        """Why this is not a complete run, or None when it is."""
        try:
            info = self.status()
        except HarnessError as exc:
            return str(exc)
        if info is None:
            return f"{self.path}: did not finish (no {self.STATUS})"
        if info.get("status") != "complete":
            detail = info.get("error") or ", ".join(info.get("failed", []))
            return f"{self.path}: {info.get('status')} ({detail})"
        return None

    def table(self, name: str, trust_damaged: bool = False):
        """A table of the run, checked against the sha256 its manifest recorded when it was written
        (:meth:`check_table`) and for the columns this version reads."""
        self.check_table(name, trust_damaged)
        table = read_table(self / name)
        missing = [c for c in REQUIRED_COLUMNS.get(name, ()) if c not in table.columns]
        if missing:
            raise HarnessError(f"{self / name} was written by an earlier version of the harness (it has no "
                               f"{', '.join(missing[:4])}): recompute the run under this version with "
                               f"`harness resume {self} on_existing=resume`")
        return table

    def check_table(self, name: str, trust_damaged: bool = False) -> None:
        """Refuse a table that is not the one the run wrote: its sha256 differs from the manifest's
        (a flipped bit changes a value silently otherwise). ``trust_damaged`` turns the refusal into a
        warning. Tables the manifest does not list (runs of harness 0.1) are read unchecked."""
        recorded = ((self.manifest() or {}).get("tables") or {}).get(name)
        if not recorded or not self.has(name):
            return
        actual = sha256_file(self / name)
        if actual == recorded:
            return
        why = (f"{self / name} is not the table this run wrote (sha256 {actual[:12]}..., manifest.json recorded "
               f"{recorded[:12]}...): it was changed or damaged since")
        if not trust_damaged:
            raise HarnessError(f"{why}; rebuild the tables from results/ with `harness resume {self}`, or pass "
                               f"--trust-damaged to read it as it is")
        log.warning("%s; read anyway (--trust-damaged)", why)

    def conditions(self, trust_damaged: bool = False):
        """``conditions.parquet``; a missing one, or one with no rows, is a one-line error."""
        if not self.has(self.CONDITIONS):
            raise HarnessError(f"{self}: no {self.CONDITIONS} here; is this a run directory?")
        table = self.table(self.CONDITIONS, trust_damaged)
        if table.empty:
            raise HarnessError(f"{self / self.CONDITIONS} holds no conditions; rerun its sweep with "
                               f"`harness resume {self}`, or leave it out")
        return table

    def has(self, name: str) -> bool:
        return (self / name).is_file()

    def is_run(self) -> bool:
        return any((self / name).exists() for name in (self.HYDRA, self.CONDITIONS, self.STATUS, "results"))

    # -- writing (only once claimed) ------------------------------------------------------------

    def write_status(self, status: str, **info) -> None:
        assert status in STATUSES, status
        write_json({"status": status, **info, "updated": now_iso()}, self / self.STATUS)

    def write_hydra(self, config: dict, overrides: list[str] | None) -> None:
        """The config and command that own the run (what ``harness resume`` reruns)."""
        import yaml

        (self / self.HYDRA).mkdir(exist_ok=True)
        write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), self / self.HYDRA / "config.yaml")
        if overrides is not None:
            write_text(yaml.safe_dump(list(overrides), allow_unicode=True), self / self.HYDRA / "overrides.yaml")

    def overrides(self) -> list[str]:
        import yaml

        path = self / self.HYDRA / "overrides.yaml"
        if not path.is_file():
            raise HarnessError(f"{self.path}: no {self.HYDRA}/overrides.yaml; is this a harness run directory?")
        try:
            return [str(o) for o in (yaml.safe_load(path.read_text(encoding="utf-8")) or [])]
        except (OSError, yaml.YAMLError) as exc:
            raise HarnessError(f"{path} is unreadable ({type(exc).__name__})") from None

    def table_hashes(self) -> dict[str, str]:
        return {name: sha256_file(self / name) for name in self.TABLES if self.has(name)}

    @contextlib.contextmanager
    def claim(self, config_fingerprint: str, on_existing: str) -> Iterator[ResultStore]:
        """Own the run directory for one sweep: refuse it (before writing anything) when it holds
        results of another configuration (unless ``on_existing`` says resume or fresh) or when
        another sweep holds its lock; then hold the lock and yield its result store. Nothing else
        is written until :meth:`take_over`."""
        self._refuse_other_config(config_fingerprint, on_existing)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self / self.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a file in the way, a read-only or full file system, no permission
            raise HarnessError(f"cannot use {self.path} as a run directory: {exc.strerror or exc}; choose another "
                               f"hydra.run.dir") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise HarnessError(f"another sweep is writing to {self.path} ({self._holder()}); wait for it to "
                                   f"finish, or choose another hydra.run.dir") from None
            self._refuse_other_config(config_fingerprint, on_existing)  # again, now that nobody else can write
            try:
                os.ftruncate(fd, 0)
                holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}
                os.write(fd, json.dumps(holder).encode())
            except OSError as exc:
                raise HarnessError(f"cannot write to the run directory {self.path}: {exc.strerror or exc}") from None
            yield ResultStore(self.path)
        finally:
            os.close(fd)  # releases the lock

    def take_over(self, store: ResultStore, config_fingerprint: str, on_existing: str) -> None:
        """Make the claimed directory this configuration's: with ``fresh``, delete what earlier runs
        wrote; then record the configuration the results belong to. Called once the model has
        loaded, so a sweep that cannot start leaves an existing run as it was."""
        if on_existing == "fresh":
            store.clear()
            for name in (*self.TABLES, self.MANIFEST, self.STATUS, self.REPORT):
                (self / name).unlink(missing_ok=True)
            for figure in figure_files_in(self / self.FIGURES):  # a figure this run may not draw again
                figure.unlink()
        write_json({"config": config_fingerprint}, self / self.FINGERPRINT)

    def _holder(self) -> str:
        try:
            info = json.loads((self / self.LOCK).read_text())
            return f"pid {info['pid']} on {info['host']}, since {info['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown"

    def _refuse_other_config(self, config_fingerprint: str, on_existing: str) -> None:
        if on_existing != "auto" or not self.path.is_dir():
            return
        marker = self._json(self.FINGERPRINT)
        has_results = any((self / "results").glob("*.npz")) or any((self / "failures").glob("*.json"))
        if has_results and (marker or {}).get("config") != config_fingerprint:
            raise HarnessError(
                f"{self.path} holds results of a different configuration; pass on_existing=resume to keep the "
                f"results that still apply (they are keyed by content, so nothing stale is reused), "
                f"on_existing=fresh to delete them, or choose another hydra.run.dir"
            )


def job_dirs(sweep_dir: Path) -> list[RunDir]:
    """The run directories of a Hydra multirun (each has a ``.hydra`` folder), in job order."""
    dirs = [p.parent for p in Path(sweep_dir).glob(f"*/{RunDir.HYDRA}")]
    dirs.sort(key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))
    return [RunDir(d) for d in dirs]


class RunTables(NamedTuple):
    """One run's (or one collected directory's) tables and manifest, as a notebook works with them."""

    conditions: pd.DataFrame
    attention: pd.DataFrame | None  # None for behaviour-only sweeps (analysis.attention=false)
    noise: pd.DataFrame | None  # None when no noise floor was measured
    manifest: dict | None


def load_run(run_dir: str | Path, trust_damaged: bool = False) -> RunTables:
    """The tables and manifest of one run directory (a sweep's, or ``harness collect``'s output),
    each table checked against its manifest's sha256 (``trust_damaged``: warn instead of refusing)."""
    conditions, attention = load_runs([Path(run_dir)], trust_damaged)
    return RunTables(conditions, attention, load_noise([Path(run_dir)], trust_damaged), RunDir(run_dir).manifest())


def load_runs(run_dirs: list[Path], trust_damaged: bool = False) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The conditions and attention tables of one or more run directories, concatenated, each
    checked against its manifest's sha256.

    Attention is None when no run has an attention table (behaviour-only sweeps)."""
    conditions, attention = [], []
    for run in map(RunDir, run_dirs):
        conditions.append(run.conditions(trust_damaged))
        if run.has(run.ATTENTION):
            attention.append(run.table(run.ATTENTION, trust_damaged))
    return concat_tables(conditions), (concat_tables(attention) if attention else None)


def load_noise(run_dirs: list[Path], trust_damaged: bool = False) -> pd.DataFrame | None:
    """The noise-floor tables of the runs that measured one, concatenated (None if none did)."""
    frames = [r.table(r.NOISE, trust_damaged) for r in map(RunDir, run_dirs) if r.has(r.NOISE)]
    return concat_tables(frames) if frames else None
