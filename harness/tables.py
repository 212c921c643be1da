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

import numpy as np
import pandas as pd

KEY_COLUMNS = ["model", "prompt_id", "group", "prefix_id", "prefix_len", "isolation", "beta"]
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
    # next-token distribution drift along A's continuation
    "output_kl",
    # headline attention drift (details in attention.parquet)
    "attn_kl_mean",
    "attn_kl_peak_layer",
    "attn_js_mean",
    "attn_prefix_mass_mean",
    # timing
    "seconds",
]

# Columns that legitimately differ between two identical runs.
TIMING_COLUMNS = ["seconds"]

ATTENTION_METRICS = ["kl", "kl_shared", "js", "prefix_mass", "score_rmse", "sink_mass_a", "sink_mass_x"]
ATTENTION_COLUMNS = KEY_COLUMNS + ["layer", "head", "segment"] + ATTENTION_METRICS + ["n_queries"]


def conditions_frame(records: list[dict]) -> pd.DataFrame:
    """One row per condition, columns in the documented order, keys categorical."""
    df = pd.DataFrame.from_records(records)
    extra = [c for c in df.columns if c not in CONDITION_COLUMNS]
    df = df.reindex(columns=CONDITION_COLUMNS + extra)
    df["first_divergence"] = df["first_divergence"].astype("Int64")
    df["beta"] = df["beta"].astype("float64")
    df["attn_kl_peak_layer"] = df["attn_kl_peak_layer"].astype("Int64")
    for col in ("output_kl", "attn_kl_mean", "attn_js_mean", "attn_prefix_mass_mean"):
        df[col] = df[col].astype("float64")
    for col in ("prefix_len", "edit_distance", "n_continuation_tokens", "n_input_tokens",
                "prefix_start", "prefix_end", "task_start", "task_end"):
        df[col] = df[col].astype("int64")
    df["exact_match"] = df["exact_match"].astype(bool)
    df["stopped_on_eos"] = df["stopped_on_eos"].astype(bool)
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
    for col in CATEGORICAL + ["segment"]:
        df[col] = df[col].astype("category")
    return df


def headline_attention(block: dict[str, dict[str, np.ndarray]], n_queries: dict[str, int]) -> dict:
    """Per-condition summary of attention drift: query-weighted means over layers, heads and
    segments, and the layer with the largest mean KL."""
    if not block:
        return {"attn_kl_mean": None, "attn_kl_peak_layer": None, "attn_js_mean": None,
                "attn_prefix_mass_mean": None}
    weights = {s: n_queries[s] for s in block}
    total = sum(weights.values())

    def mean_of(metric):  # [layers] query-weighted over segments, mean over heads
        return sum(block[s][metric].mean(axis=1) * weights[s] for s in block) / total

    kl_by_layer = mean_of("kl")
    return {
        "attn_kl_mean": float(kl_by_layer.mean()),
        "attn_kl_peak_layer": int(np.argmax(kl_by_layer)),
        "attn_js_mean": float(mean_of("js").mean()),
        "attn_prefix_mass_mean": float(mean_of("prefix_mass").mean()),
    }


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


def read_attention(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(Path(run_dir) / "attention.parquet")


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
    from .errors import HarnessError

    conditions, attention = [], []
    for run in map(Path, run_dirs):
        if not (run / "conditions.parquet").is_file():
            raise HarnessError(f"{run}: no conditions.parquet here; is this a run directory?")
        conditions.append(read_conditions(run))
        if (run / "attention.parquet").is_file():
            attention.append(read_attention(run))
    return concat_tables(conditions), (concat_tables(attention) if attention else None)


def load_noise(run_dirs: list[Path]) -> pd.DataFrame | None:
    """The noise-floor tables of the runs that measured one, concatenated (None if none did)."""
    frames = [pd.read_parquet(Path(r) / "noise.parquet") for r in run_dirs if (Path(r) / "noise.parquet").is_file()]
    return concat_tables(frames) if frames else None
