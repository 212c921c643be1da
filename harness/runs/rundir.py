"""One run directory: the names of its files, its status, its lock and its result store.

Every module that reads or writes a run directory goes through :class:`RunDir`, so the layout
is written down once:

    conditions.parquet, attention.parquet, noise.parquet   the tables (rebuilt from results/)
    manifest.json, report.md, figures/                     what the run says about itself
    results/, failures/, quarantine/                       per-condition results (harness.runs.store)
    status.json       running | interrupted | failed | error | complete (written last)
    run_fingerprint.json   the configuration the results belong to
    .hydra/           config.yaml and overrides.yaml of the command that owns the run
    sweep.log, .lock, vllm.log (backend=vllm: the engine's own output, a failed start's included)

A sweep *claims* the directory (:meth:`RunDir.claim`), refusing another configuration's results or
another sweep's lock before it writes anything: a refused command leaves the run byte for byte as it was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError
from harness.io import (
    CHECKSUM,
    CHECKSUM_OF,
    BrokenSeal,
    figure_files_in,
    open_json_seal,
    open_text_seal,
    read_table,
    sha256_file,
    write_sealed_json,
    write_sealed_text,
)
from harness.paths import shell_path
from harness.reporting.edits import keep_edited_files
from harness.reporting.figure_names import FIGURE_NAMES
from harness.runs.environment import now_iso
from harness.runs.inputs import contents, refuse_changed
from harness.runs.lock import LOCK, hold
from harness.runs.schema import KEY_COLUMNS
from harness.runs.store import ResultStore

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
    LOCK = LOCK
    OUT_MARKER = ".harness-output.json"  # which command wrote a directory given as --out, and from which runs

    def __init__(self, path: str | Path):
        if not isinstance(path, (str, os.PathLike)):
            raise HarnessError(f"RunDir takes a directory's path (str or Path), got {path!r}")
        self.path = Path(path).expanduser()  # a quoted "~/run" reaches here as the shell left it

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __str__(self) -> str:
        return str(self.path)

    # -- reading -------------------------------------------------------------------------------

    def _json(self, name: str, advice: str) -> tuple[dict | None, bool]:
        """``(contents, sealed)`` of a JSON file of the run, checked against its checksum (files of
        earlier versions have none: ``sealed`` False); ``(None, False)`` when absent. A damaged one
        is a one-line error naming it, with ``advice``."""
        path = self / name
        if not path.is_file():
            return None, False
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(value, dict):
                raise BrokenSeal("expected a JSON object")
            return open_json_seal(value)
        except BrokenSeal as exc:
            raise HarnessError(f"{path} is damaged ({exc}): {advice}") from None
        except (OSError, ValueError) as exc:
            raise HarnessError(f"{path} is unreadable ({type(exc).__name__}); the run directory is damaged: "
                               f"{advice}") from None

    def status(self) -> dict | None:
        return self._json(self.STATUS, f"`harness resume {shell_path(self)}` rewrites it")[0]

    def fingerprint(self) -> dict | None:  # the configuration and the input files the results belong to
        return self._json(self.FINGERPRINT, "restore it, or pass on_existing=resume to keep the results that still "
                          "apply (they are keyed by content, so nothing stale is reused)")[0]

    def previous_status(self) -> str | None:
        """The status an earlier sweep left, for the sweep that now owns the directory: a damaged
        ``status.json`` is said in a warning (the sweep rewrites it) and reads as ``damaged``."""
        try:
            return (self.status() or {}).get("status")
        except HarnessError as exc:
            log.warning("%s", exc)
            return "damaged"

    def manifest(self, trust_damaged: bool = False, rebuilding: bool = False) -> dict | None:
        """The contents of ``manifest.json`` (None when absent), checked against its checksum; a
        damaged one is refused, or with ``trust_damaged`` read as far as it parses, with a warning
        (none where ``rebuilding``: a sweep writing this run, which says so once and rewrites it)."""
        try:
            return self._json(self.MANIFEST, self._manifest_advice())[0]
        except HarnessError as exc:
            if not trust_damaged:
                raise
            if not rebuilding:  # a warning, as a damaged table's: said once however often it is read
                warnings.warn(f"{exc}; read anyway (--trust-damaged)", stacklevel=2)
            try:
                value = json.loads((self / self.MANIFEST).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            return {k: v for k, v in value.items() if k not in (CHECKSUM, CHECKSUM_OF)} if isinstance(value, dict) \
                else None

    def _manifest_advice(self) -> str:
        return (f"rebuild it with `harness resume {shell_path(self)}` (collected tables: run `harness collect` again), or pass "
                f"--trust-damaged to read the tables unchecked")

    def problem(self) -> str | None:
        """Why this is not a complete run, or None when it is."""
        try:
            info = self.status()
        except HarnessError as exc:
            return str(exc)
        if info is None:
            try:
                manifest = self.manifest() or {}
            except HarnessError:  # the reader says so, in its own words
                manifest = {}
            if "collected" in manifest:  # a collected table set has no status of its own
                incomplete = manifest.get("incomplete") or []
                return f"{self.path}: collected from {len(incomplete)} unfinished run(s)" if incomplete else None
            return f"{self.path}: did not finish (no {self.STATUS}); finish it with `harness resume {shell_path(self.path)}`"
        if info.get("status") == "running":  # killed without a word, or still being written
            return (f"{self.path}: its status says running (a sweep still writing it, or one that was killed): wait "
                    f"for it, or finish it with `harness resume {shell_path(self.path)}`")
        if info.get("status") != "complete":
            detail = info.get("error") or ", ".join(map(str, info.get("failed", [])))
            remedy = (f"what stopped it must change first (`harness resume {shell_path(self.path)} KEY=VALUE --accept-changes`)"
                      if info.get("status") == "error" else f"`harness resume {shell_path(self.path)}` finishes it")
            return f"{self.path}: {info.get('status')}" + (f" ({detail})" if detail else "") + f"; {remedy}"
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
                               f"`harness resume {shell_path(self)} on_existing=resume`")
        return table

    def check_table(self, name: str, trust_damaged: bool = False) -> str | None:
        """Refuse a table that is not the one the run wrote: the run has no manifest, its manifest is damaged or
        does not list the table, or the table's sha256 differs from the manifest's (a flipped bit changes a value
        silently otherwise). ``trust_damaged`` turns the refusal into a warning, and the problem is returned (for
        the page to say; None where the table is the run's). Tables that a manifest of an earlier version
        (without a checksum of its own) does not list are read unchecked, as that version read them."""
        if not self.has(name):
            return None
        try:
            self._check_table(name)
        except HarnessError as exc:
            if not trust_damaged:
                raise
            # a warning, not a log line: a command reads a table more than once, and says each warning once
            warnings.warn(f"{str(exc).split('; ')[0]}; read anyway (--trust-damaged)", stacklevel=3)
            return str(exc).split("; ")[0]
        return None

    def table_damage(self, name: str) -> str | None:
        """What :meth:`check_table` would refuse table ``name`` for, without refusing or warning (None
        where it is the table the run wrote, or absent): for a caller that records it and reads the
        table afterwards, which warns once."""
        try:
            return self.check_table(name) if self.has(name) else None
        except HarnessError as exc:
            return str(exc).split("; ")[0]

    def _check_table(self, name: str) -> None:
        manifest, sealed = self._json(self.MANIFEST, self._manifest_advice())
        if manifest is None:
            raise HarnessError(f"{self.path} has no {self.MANIFEST}: nothing records the tables this run wrote (its "
                               f"sweep did not finish writing them, or the file was deleted); "
                               + self._manifest_advice())
        tables = manifest.get("tables") if isinstance(manifest.get("tables"), dict) else {}
        recorded = tables.get(name)
        if not recorded:
            if not sealed and not ({"harness_version", "collected"} & set(manifest)):
                raise HarnessError(f"{self / self.MANIFEST} records neither the tables nor the harness that wrote "
                                   f"them (every version's manifest names its version): it is not one the harness "
                                   f"wrote; " + self._manifest_advice())
            if not sealed:  # an earlier version's manifest: its tables are read unchecked, as it read them
                return
            raise HarnessError(f"{self / name} is not a table this run wrote ({self.MANIFEST} does not list it); "
                               f"rebuild the tables with `harness resume {shell_path(self)}`, or pass --trust-damaged to read it")
        actual = sha256_file(self / name)
        if actual != recorded:
            raise HarnessError(f"{self / name} is not the table this run wrote (sha256 {actual[:12]}..., manifest.json "
                               f"recorded {str(recorded)[:12]}...): it was changed or damaged since; rebuild the "
                               f"tables from results/ with `harness resume {shell_path(self)}`, or pass --trust-damaged to read it "
                               f"as it is")

    def output_of(self) -> str | None:
        """The command whose ``--out`` this directory is (``figures``, ``detect``, ...), or None."""
        try:
            mark = json.loads((self / self.OUT_MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return str(mark.get("command")) if isinstance(mark, dict) else None

    def conditions(self, trust_damaged: bool = False):
        """``conditions.parquet``; a missing one, or one with no rows, is a one-line error."""
        if not self.has(self.CONDITIONS):
            raise HarnessError(f"{self}: no {self.CONDITIONS} here, so it is not a run directory")
        table = self.table(self.CONDITIONS, trust_damaged)
        if table.empty:
            raise HarnessError(f"{self / self.CONDITIONS} holds no conditions; rerun its sweep with "
                               f"`harness resume {shell_path(self)}`, or leave it out")
        return table

    def has(self, name: str) -> bool:
        return (self / name).is_file()

    def is_run(self) -> bool:
        return any((self / name).exists() for name in (self.HYDRA, self.CONDITIONS, self.STATUS, "results"))

    def made_by_a_sweep(self) -> bool:
        """Whether a sweep claimed this directory, as against a folder of the user's that merely holds a
        ``status.json`` or ``report.md``: it holds what only a sweep writes (its fingerprint, ``.hydra/``, a
        sealed status, or a lock naming its holder; a bare ``.lock`` is not one: pytest's folders have one)."""
        if any((self / name).exists() for name in (self.FINGERPRINT, self.HYDRA)):
            return True
        try:
            status, sealed = open_json_seal(json.loads((self / self.STATUS).read_text(encoding="utf-8")))
            if sealed and status.get("status") in STATUSES:
                return True
        except (OSError, ValueError, BrokenSeal, AttributeError):
            pass
        try:
            holder = json.loads((self / self.LOCK).read_text(encoding="utf-8"))
            return isinstance(holder, dict) and {"pid", "host"} <= set(holder)
        except (OSError, ValueError):
            return False

    # -- writing (only once claimed) ------------------------------------------------------------

    def write_status(self, status: str, **info) -> None:
        assert status in STATUSES, status
        write_sealed_json({"status": status, **info, "updated": now_iso()}, self / self.STATUS)

    def write_hydra(self, config: dict, overrides: list[str] | None) -> None:
        """The config and command that own the run (what ``harness resume`` reruns)."""
        import yaml

        (self / self.HYDRA).mkdir(exist_ok=True)
        write_sealed_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), self / self.HYDRA / "config.yaml")
        if overrides is not None:
            write_sealed_text(yaml.safe_dump(list(overrides), allow_unicode=True), self / self.HYDRA / "overrides.yaml")

    def overrides(self) -> list[str]:
        """The command line of the sweep that owns the run (``.hydra/overrides.yaml``)."""
        overrides = self._hydra_yaml("overrides.yaml", list)
        if overrides is None:
            if (self / "multirun.yaml").is_file():  # a sweep over settings: its jobs are the runs
                jobs = sorted(p.name for p in self.path.iterdir() if (p / self.HYDRA / "overrides.yaml").is_file())
                raise HarnessError(f"{self.path} is a multirun (-m): each of its jobs is a run of its own; resume a job "
                                   f"(harness resume {shell_path(self.path / (jobs[0] if jobs else '0'))}), or the whole sweep with "
                                   f"its own command and on_existing=resume")
            raise HarnessError(f"{self.path}: no {self.HYDRA}/overrides.yaml: no sweep's command to rerun here")
        if not all(isinstance(o, str) for o in overrides):
            raise HarnessError(f"{self / self.HYDRA / 'overrides.yaml'} is damaged (not a list of overrides): "
                               + self._hydra_advice())
        return overrides

    def saved_config(self) -> dict | None:
        """The config the run was made with (``.hydra/config.yaml``), None when it has none."""
        return self._hydra_yaml("config.yaml", dict)

    def _hydra_yaml(self, name: str, kind: type):
        """A YAML file of ``.hydra/``, checked against its checksum (files of earlier versions have
        none) and for its kind; None when absent. Damage is one line naming the file."""
        import yaml

        path = self / self.HYDRA / name
        if not path.is_file():
            return None
        try:
            text, _ = open_text_seal(path.read_text(encoding="utf-8"))
            value = yaml.safe_load(text)
        except OSError as exc:
            raise HarnessError(f"{path} is unreadable ({exc.strerror or exc})") from None
        except (BrokenSeal, UnicodeError, yaml.YAMLError) as exc:
            why = str(exc) if isinstance(exc, BrokenSeal) else f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            raise HarnessError(f"{path} is damaged ({why}): " + self._hydra_advice()) from None
        value = kind() if value is None else value
        if not isinstance(value, kind):
            raise HarnessError(f"{path} is damaged (not a YAML {kind.__name__}): " + self._hydra_advice())
        return value

    def _hydra_advice(self) -> str:
        return (f"restore it, or run the sweep's command again with hydra.run.dir={shell_path(self)} on_existing=resume (stored "
                f"results that still apply are reused)")

    def table_hashes(self) -> dict[str, str]:
        return {name: sha256_file(self / name) for name in self.TABLES if self.has(name)}

    @contextlib.contextmanager
    def claim(self, config_fingerprint: str, on_existing: str, inputs: dict | None = None) -> Iterator[ResultStore]:
        """Own the run directory for one sweep: refuse it (before writing anything) when it holds results of another
        configuration (unless ``on_existing`` says resume or fresh), results made from other input files than
        ``inputs`` (:mod:`harness.runs.inputs`; unless fresh), or when another sweep holds its lock; then hold
        the lock and yield its result store. Nothing else is written until :meth:`take_over`."""
        self._refuse_other_config(config_fingerprint, on_existing, inputs)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, a read-only or full file system, no permission
            raise HarnessError(f"cannot use {self.path} as a run directory: {exc.strerror or exc}; choose another "
                               f"run directory (hydra.run.dir)") from None
        with hold(self.path, "sweep", "give a new sweep another run directory (hydra.run.dir)"):
            self._refuse_other_config(config_fingerprint, on_existing, inputs)  # again, now that nobody else can write
            yield ResultStore(self.path)

    def take_over(self, store: ResultStore, config_fingerprint: str, on_existing: str,
                  inputs: dict | None = None) -> None:
        """Make the claimed directory this configuration's: with ``fresh``, delete what earlier runs
        wrote; then record the configuration the results belong to and the input files they were
        made from. Called once the model has loaded, so a sweep that cannot start leaves an
        existing run as it was."""
        if on_existing == "fresh":  # the harness's own files go; the user's edits of them are set aside first
            recorded = (self.manifest(True, rebuilding=True) or {}).get("tables") if self.has(self.MANIFEST) else None
            keep_edited_files(self.path, {n: (recorded or {}).get(n) for n in self.TABLES}, self.REPORT)
            store.clear()
            for name in (*self.TABLES, self.MANIFEST, self.STATUS, self.REPORT):
                (self / name).unlink(missing_ok=True)
            for figure in figure_files_in(self / self.FIGURES, FIGURE_NAMES):  # one this run may not draw again
                figure.unlink()
        write_sealed_json({"config": config_fingerprint, "inputs": inputs or {}}, self / self.FINGERPRINT)

    def _refuse_other_config(self, config_fingerprint: str, on_existing: str, inputs: dict | None) -> None:
        if on_existing == "fresh" or not self.path.is_dir():
            return
        marker = self.fingerprint()
        has_results = any((self / "results").glob("*.npz")) or any((self / "failures").glob("*.json")) \
            or any((self / "results").glob("phase-*.parquet"))  # harness cache-timing's
        recorded = (self.manifest(trust_damaged=True, rebuilding=True) or {}).get("inputs") if self.has(self.MANIFEST) \
            else None
        if has_results and isinstance(recorded, dict) and "inputs" in (marker or {}) \
                and contents(marker["inputs"]) != contents(recorded) == contents(inputs or recorded):  # else a copy
            raise HarnessError(f"{self / self.FINGERPRINT} and {self.MANIFEST} disagree on the run's input files: the "
                               f"fingerprint is damaged; restore it, or pass on_existing=fresh to recompute the run")
        if has_results and inputs is not None:
            # a relative path read from another working directory, or a file edited since: the results
            # would be keyed anew and the run's tables would hold other inputs' results without a word
            refuse_changed(str(self.path), (marker or {}).get("inputs"), inputs,
                           "a sweep into it would fill its tables with the results of the files named now",
                           "or pass on_existing=fresh to recompute it from the files named now (its stored results "
                           "are deleted)")
        if on_existing == "auto" and has_results and (marker or {}).get("config") != config_fingerprint:
            raise HarnessError(
                f"{self.path} holds results of a different configuration; pass on_existing=resume to keep the "
                f"results that still apply (they are keyed by content, so nothing stale is reused), "
                f"on_existing=fresh to delete them, or choose another run directory (hydra.run.dir)"
            )


def job_dirs(sweep_dir: Path) -> list[RunDir]:
    """The run directories of a Hydra multirun (each has a ``.hydra`` folder), in job order."""
    dirs = [p.parent for p in Path(sweep_dir).glob(f"*/{RunDir.HYDRA}")]
    dirs.sort(key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))
    return [RunDir(d) for d in dirs]

