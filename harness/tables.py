"""The run's tables: tidy DataFrames with stable columns, written atomically, read with clear errors.

``conditions.parquet`` has one row per condition and ``attention.parquet`` one per condition x
layer x head x segment (columns: :mod:`harness.schema`). Keys are categorical; list columns
(token ids) are stored as parquet lists. Files are written to a temporary name and renamed, so a
crash never leaves a half-written file behind; a write the disk or the permissions refuse is a
one-line error naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import HarnessError
from .schema import ATTENTION_COLUMNS, ATTENTION_METRICS, CATEGORICAL, CONDITION_COLUMNS


def conditions_frame(records: list[dict]) -> pd.DataFrame:
    """One row per condition, columns in the documented order, keys categorical."""
    df = pd.DataFrame.from_records(records)
    extra = [c for c in df.columns if c not in CONDITION_COLUMNS]
    df = df.reindex(columns=CONDITION_COLUMNS + extra)
    df["first_divergence"] = df["first_divergence"].astype("Int64")
    df["beta"] = df["beta"].astype("float64")
    df["attn_kl_peak_layer"] = df["attn_kl_peak_layer"].astype("Int64")
    for col in ("output_kl", "min_margin_a", "min_margin_x", "attn_kl_mean", "attn_kl_shared_mean",
                "attn_capture_mean", "attn_prefix_mass_mean", "attn_js_mean"):
        df[col] = df[col].astype("float64")
    df["near_tie"] = df["near_tie"].astype("boolean")
    for col in ("prefix_len", "edit_distance", "n_continuation_tokens", "n_input_tokens",
                "block_start", "block_end", "prefix_start", "prefix_end", "task_start", "task_end"):
        df[col] = df[col].astype("int64")
    for col in ("exact_match", "stopped_on_eos", "computed_alone"):
        df[col] = df[col].astype(bool)
    for col in ("target_hit", "target_hit_a"):
        df[col] = df[col].astype("boolean")
    for col in CATEGORICAL:
        df[col] = df[col].astype("category")
    return df


def attention_frame(keys: list[dict], blocks: list[dict[str, dict]], n_queries: list[dict[str, int]]) -> pd.DataFrame:
    """One row per condition x layer x head x segment.

    ``keys[i]`` holds condition i's key columns; ``blocks[i][segment][metric]`` is an array
    ``[layers, heads]`` of that metric averaged over the segment's query rows.
    """
    parts = []
    for key, block, counts in zip(keys, blocks, n_queries):
        for segment, metrics in block.items():
            n_layers, n_heads = next(iter(metrics.values())).shape
            layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
            part = {"layer": layer.ravel(), "head": head.ravel(), "segment": segment}
            part.update({m: np.asarray(metrics[m], dtype=np.float64).ravel() for m in ATTENTION_METRICS})
            part["n_queries"] = counts[segment]
            frame = pd.DataFrame(part)
            for col, value in key.items():
                frame[col] = value
            parts.append(frame)
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ATTENTION_COLUMNS)
    df = df.reindex(columns=ATTENTION_COLUMNS)
    for col in ("layer", "head", "n_queries", "prefix_len"):
        df[col] = df[col].astype("int64")
    df["beta"] = df["beta"].astype("float64")
    for col in [c for c in CATEGORICAL if c in df.columns] + ["segment"]:
        df[col] = df[col].astype("category")
    return df


_UMASK = os.umask(0)
os.umask(_UMASK)  # read once: temporary files are created 0600, results should follow the umask


def atomic_write(path: Path, write) -> None:
    """Call ``write(temporary path)``, then rename the result to ``path``; a write the disk or the
    permissions refuse is a :class:`HarnessError` naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))


def write_json(obj, path: Path) -> None:
    text = json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_text(text: str, path: Path) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_table(path: Path) -> pd.DataFrame:
    """A parquet table; a missing or damaged file is a one-line error naming it."""
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"{path}: no such table")
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"{path} is not a readable parquet table ({first}); regenerate it with "
                           f"`harness resume` on its run directory") from None


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate tables from several runs, keeping the key columns categorical."""
    df = pd.concat(frames, ignore_index=True)
    for col in CATEGORICAL + ["segment"]:
        if col in df.columns:
            df[col] = df[col].astype("category")
    return df


def load_runs(run_dirs: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The conditions and attention tables of one or more run directories, concatenated.

    Attention is None when no run has an attention table (behaviour-only sweeps)."""
    from .rundir import RunDir

    conditions, attention = [], []
    for run in map(RunDir, run_dirs):
        if not run.has(run.CONDITIONS):
            raise HarnessError(f"{run}: no {run.CONDITIONS} here; is this a run directory?")
        conditions.append(run.table(run.CONDITIONS))
        if run.has(run.ATTENTION):
            attention.append(run.table(run.ATTENTION))
    return concat_tables(conditions), (concat_tables(attention) if attention else None)


def load_noise(run_dirs: list[Path]) -> pd.DataFrame | None:
    """The noise-floor tables of the runs that measured one, concatenated (None if none did)."""
    from .rundir import RunDir

    frames = [r.table(r.NOISE) for r in map(RunDir, run_dirs) if r.has(r.NOISE)]
    return concat_tables(frames) if frames else None
