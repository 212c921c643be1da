"""The run's tables as tidy DataFrames with stable columns and dtypes.

``conditions.parquet`` has one row per condition and ``attention.parquet`` one per condition x
layer x head x segment (columns: :mod:`harness.runs.schema`, dtypes of metric columns:
:mod:`harness.measure.metrics`). Keys are categorical; list columns (token ids) are stored as
parquet lists. Writing and reading the files is :mod:`harness.io`'s (atomic, with one-line errors);
loading a run's tables is :func:`harness.runs.reading.load_run`'s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.measure.metrics import condition_dtypes
from harness.runs.schema import ATTENTION_COLUMNS, ATTENTION_METRICS, CATEGORICAL, CONDITION_COLUMNS, DESCRIPTIVE_DTYPES


NULLABLE = {"int64": "Int64", "bool": "boolean"}


def conditions_frame(records: list[dict]) -> pd.DataFrame:
    """One row per condition, columns in the documented order, keys categorical."""
    df = pd.DataFrame.from_records(records)
    unknown = [c for c in df.columns if c not in CONDITION_COLUMNS]
    if unknown:  # a new measure must be registered (harness.measure.metrics), not silently dropped
        raise RuntimeError(f"condition records hold columns the schema does not know: {unknown}; register them "
                           f"in harness.measure.metrics")
    df = df.reindex(columns=CONDITION_COLUMNS)
    for col, dtype in {**DESCRIPTIVE_DTYPES, **condition_dtypes()}.items():
        if dtype != "object":
            # a column that can be null (no continuation: decode.path=none) takes its nullable dtype
            df[col] = df[col].astype(NULLABLE.get(dtype, dtype) if df[col].isna().any() else dtype)
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


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate tables from several runs, keeping the key columns categorical."""
    df = pd.concat(frames, ignore_index=True)
    for col in CATEGORICAL + ["segment"]:
        if col in df.columns:
            df[col] = df[col].astype("category")
    return df


