"""The run's tables and manifest: tidy DataFrames with stable columns, written atomically.

``conditions.parquet`` has one row per condition (DESIGN.md section 6). Keys are categorical; list
columns (token ids) are stored as parquet lists. Files are written to a temporary name and renamed,
so a crash never leaves a half-written table behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

KEY_COLUMNS = ["model", "prompt_id", "group", "prefix_id", "prefix_len", "isolation"]
CATEGORICAL = ["model", "prompt_id", "group", "prefix_id", "isolation"]

CONDITION_COLUMNS = KEY_COLUMNS + [
    "prefix_kind",
    # output drift against A's continuation (zeros for A itself)
    "edit_distance",
    "norm_edit_distance",
    "first_divergence",
    "exact_match",
    # the continuation
    "continuation_text",
    "continuation_ids",
    "n_continuation_tokens",
    "stopped_on_eos",
    # the input and its segment spans (half-open token offsets)
    "input_ids",
    "n_input_tokens",
    "prefix_start",
    "prefix_end",
    "task_start",
    "task_end",
    # timing
    "decode_seconds",
]

# Columns that legitimately differ between two identical runs.
TIMING_COLUMNS = ["decode_seconds"]


def conditions_frame(records: list[dict]) -> pd.DataFrame:
    """One row per condition, columns in the documented order, keys categorical."""
    df = pd.DataFrame.from_records(records)
    extra = [c for c in df.columns if c not in CONDITION_COLUMNS]
    df = df.reindex(columns=CONDITION_COLUMNS + extra)
    df["first_divergence"] = df["first_divergence"].astype("Int64")
    for col in ("prefix_len", "edit_distance", "n_continuation_tokens", "n_input_tokens",
                "prefix_start", "prefix_end", "task_start", "task_end"):
        df[col] = df[col].astype("int64")
    df["exact_match"] = df["exact_match"].astype(bool)
    df["stopped_on_eos"] = df["stopped_on_eos"].astype(bool)
    for col in CATEGORICAL:
        df[col] = df[col].astype("category")
    return df


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    _atomic_write(Path(path), lambda tmp: df.to_parquet(tmp, index=False))


def write_json(obj, path: Path) -> None:
    text = json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"
    _atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_text(text: str, path: Path) -> None:
    _atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_conditions(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(Path(run_dir) / "conditions.parquet")
