"""Per-condition result files, so an interrupted sweep loses only the condition in flight.

Each finished condition is one ``results/<key>.npz`` file, written atomically (temporary file,
then rename). ``key`` is a content hash of everything that determines the result (model and its
resolved revision, tokenizer, dtype, attention implementation, decoding settings, the assembled
input ids and spans, A's input ids, isolation, batch size and the result schema version), so a
changed setting can never pick up a stale result. A condition that raised is recorded in
``failures/<key>.json`` instead, and is retried on the next run. The final tables are always
rebuilt from these files.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

# Bump when the meaning or layout of a stored result changes: old results are then recomputed.
RESULT_SCHEMA_VERSION = 2  # 2: BOS + prefix computed apart from the task (prefix cache)


def fingerprint(obj) -> str:
    """sha256 of a JSON-serializable object (keys sorted)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class ResultStore:
    """The ``results/`` and ``failures/`` folders of one run directory."""

    def __init__(self, run_dir: Path):
        self.results = Path(run_dir) / "results"
        self.failures = Path(run_dir) / "failures"
        self.results.mkdir(parents=True, exist_ok=True)
        self.failures.mkdir(parents=True, exist_ok=True)
        for stale in [*self.results.glob(".*.tmp"), *self.failures.glob(".*.tmp")]:
            stale.unlink()  # a write cut off by a crash; its condition is simply recomputed

    def has(self, key: str) -> bool:
        return (self.results / f"{key}.npz").is_file()

    def save(self, key: str, record: dict, attention: dict[str, dict[str, np.ndarray]],
             n_queries: dict[str, int]) -> None:
        arrays = {f"attention/{seg}/{m}": np.asarray(v) for seg, metrics in attention.items() for m, v in metrics.items()}
        arrays["record"] = np.array(json.dumps({"record": record, "n_queries": n_queries}, default=_json_default))
        fd, tmp = tempfile.mkstemp(dir=self.results, prefix=f".{key}.", suffix=".npz.tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.results / f"{key}.npz")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        (self.failures / f"{key}.json").unlink(missing_ok=True)

    def load(self, key: str) -> tuple[dict, dict[str, dict[str, np.ndarray]], dict[str, int]]:
        with np.load(self.results / f"{key}.npz", allow_pickle=False) as data:
            meta = json.loads(str(data["record"]))
            attention: dict[str, dict[str, np.ndarray]] = {}
            for name in data.files:
                if name.startswith("attention/"):
                    _, seg, metric = name.split("/")
                    attention.setdefault(seg, {})[metric] = data[name]
        return meta["record"], attention, meta["n_queries"]

    def record_failure(self, key: str, description: dict, error: BaseException) -> None:
        payload = {**description, "error_type": type(error).__name__, "error": str(error).strip().splitlines()[0]
                   if str(error).strip() else type(error).__name__}
        tmp = self.failures / f".{key}.json.tmp"
        tmp.write_text(json.dumps(payload, indent=2, default=str))
        os.replace(tmp, self.failures / f"{key}.json")

    def failed(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(self.failures.glob("*.json"))]

    def clear(self) -> None:
        for folder in (self.results, self.failures):
            for p in folder.iterdir():
                p.unlink()


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
