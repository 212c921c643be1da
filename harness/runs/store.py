"""Per-condition result files that verify themselves, so an interrupted sweep loses only the
condition in flight and a damaged file is never trusted.

Each finished condition is one ``results/<key>.npz`` file, written atomically (temporary file,
fsync, rename). ``key`` is a content hash of everything that determines the result (see
:meth:`harness.runs.experiment.Experiment.keys`), so a changed setting never picks up a stale result.
The file carries its own key and a sha256 of its contents; :meth:`ResultStore.load` checks both,
and :meth:`ResultStore.verify` moves a file that fails (truncated, bit-flipped, or a valid result
copied under another condition's name) to ``quarantine/`` with a warning naming it, so the sweep
recomputes it. A condition that raised is recorded in ``failures/<key>.json`` and retried on the
next run. The run's tables are always rebuilt from these files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from harness.errors import HarnessError
from harness.io import atomic_write

log = logging.getLogger(__name__)

# Bump when the meaning or layout of a stored result changes: old results are then recomputed.
# 2: BOS + prefix computed apart from the task (prefix cache); 3: self-verifying files.
RESULT_SCHEMA_VERSION = 3


def fingerprint(obj) -> str:
    """sha256 of a JSON-serializable object (keys sorted)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class StoredResult(NamedTuple):
    record: dict  # the conditions-table row
    attention: dict[str, dict[str, np.ndarray]]  # [segment][metric] -> [layers, heads]
    n_queries: dict[str, int]  # query rows per segment


class CorruptResult(Exception):
    """A result file that cannot be trusted; the message says why."""


def _content_hash(key: str, meta: dict, arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(key.encode())
    h.update(json.dumps(meta, sort_keys=True, default=_json_default).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _write_synced(path: Path, write) -> None:
    """Atomically write ``path`` with ``write(file)``, synced to disk before the rename."""

    def to_file(tmp):
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())

    atomic_write(path, to_file)


class ResultStore:
    """The ``results/``, ``failures/`` and ``quarantine/`` folders of one run directory."""

    def __init__(self, run_dir: Path):
        run_dir = Path(run_dir)
        self.results = run_dir / "results"
        self.failures = run_dir / "failures"
        self.quarantine = run_dir / "quarantine"
        for folder in (self.results, self.failures):
            if folder.exists() and not folder.is_dir():  # a file where the run keeps its results
                lost = ("the run's stored results are lost with it, so they are computed again" if folder.name ==
                        "results" else "it held the failed conditions' records, which are tried again")
                raise HarnessError(f"{folder} is a file, not the run's {folder.name}/ folder: move it away ({lost})")
            folder.mkdir(parents=True, exist_ok=True)
        self.remove_partial_writes()

    def remove_partial_writes(self) -> None:
        """Delete temporary files of writes cut off by a crash or a signal; their conditions are
        simply recomputed."""
        for stale in [*self.results.glob(".*.tmp"), *self.failures.glob(".*.tmp")]:
            stale.unlink(missing_ok=True)

    def path(self, key: str) -> Path:
        return self.results / f"{key}.npz"

    def has(self, key: str) -> bool:
        """A file exists for ``key`` (not yet verified: see :meth:`verify`)."""
        return self.path(key).is_file()

    def save(self, key: str, record: dict, attention: dict[str, dict[str, np.ndarray]],
             n_queries: dict[str, int]) -> None:
        arrays = {f"attention/{seg}/{m}": np.asarray(v) for seg, metrics in attention.items() for m, v in metrics.items()}
        meta = {"record": record, "n_queries": n_queries}
        meta = json.loads(json.dumps(meta, default=_json_default))  # exactly what a load will read back
        header = {"key": key, "schema": RESULT_SCHEMA_VERSION, "sha256": _content_hash(key, meta, arrays), **meta}
        arrays["meta"] = np.array(json.dumps(header, default=_json_default))
        _write_synced(self.path(key), lambda f: np.savez(f, **arrays))
        (self.failures / f"{key}.json").unlink(missing_ok=True)

    def load(self, key: str) -> StoredResult:
        """The stored result of ``key``; raises :class:`CorruptResult` if the file is damaged or
        holds another condition's result."""
        try:
            with np.load(self.path(key), allow_pickle=False) as data:
                header = json.loads(str(data["meta"]))
                arrays = {name: data[name] for name in data.files if name != "meta"}
            if not isinstance(header, dict) or header.get("key") != key:
                raise CorruptResult(f"holds the result of another condition (key {str(header.get('key'))[:12]}...)"
                                    if isinstance(header, dict) else "has no header")
            meta = {"record": header.get("record"), "n_queries": header.get("n_queries")}
            if header.get("sha256") != _content_hash(key, meta, arrays):
                raise CorruptResult("its contents do not match its checksum")
            attention: dict[str, dict[str, np.ndarray]] = {}
            for name, value in arrays.items():
                _, seg, metric = name.split("/")
                attention.setdefault(seg, {})[metric] = value
        except CorruptResult:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes numpy, zipfile or json raise
            # (a flipped bit can give "zip file version", "is encrypted", a tokenize error, a huge shape):
            # any failure to read a result means the file is damaged, and it is recomputed
            first = (str(exc).strip().splitlines() or [""])[0]
            raise CorruptResult(f"unreadable ({type(exc).__name__}: {first[:200]})") from None
        return StoredResult(meta["record"], attention, meta["n_queries"])

    def verify(self, keys) -> set[str]:
        """The keys among ``keys`` whose files load and verify. Any other file found for them is
        moved to ``quarantine/`` with a warning, so that its condition is computed again."""
        good = set()
        for key in keys:
            if not self.has(key):
                continue
            try:
                self.load(key)
            except CorruptResult as why:
                target = self.quarantine / self.path(key).name
                n = 1
                while target.exists():
                    target, n = self.quarantine / f"{key}.{n}.npz", n + 1
                try:
                    self.quarantine.mkdir(exist_ok=True)
                    os.replace(self.path(key), target)
                except OSError as exc:
                    raise HarnessError(f"result file {self.path(key)} {why}, and it cannot be moved to "
                                       f"{self.quarantine} ({exc.strerror or exc}): make {self.path(key).parent} "
                                       f"writable, or delete the file; its condition is then computed again") from None
                log.warning("result file %s %s; moved to %s and recomputing it", self.path(key), why, target)
            else:
                good.add(key)
        return good

    def record_failure(self, key: str, description: dict, error: BaseException) -> None:
        text = str(error).strip()
        payload = {**description, "error_type": type(error).__name__,
                   "error": text.splitlines()[0] if text else type(error).__name__}
        _write_synced(self.failures / f"{key}.json", lambda f: f.write(json.dumps(payload, indent=2, default=str).encode()))

    def failed(self) -> list[dict]:
        """Recorded failures (an unreadable failure file is skipped with a warning)."""
        out = []
        for p in sorted(self.failures.glob("*.json")):
            try:
                out.append(json.loads(p.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                log.warning("failure record %s is unreadable (%s); ignoring it", p, exc)
        return out

    def clear(self) -> None:
        """Delete the results, failures and quarantined files this store wrote (nothing else)."""
        for folder, pattern in ((self.results, "*.npz"), (self.failures, "*.json"), (self.quarantine, "*.npz")):
            for p in folder.glob(pattern) if folder.is_dir() else ():
                p.unlink()


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
