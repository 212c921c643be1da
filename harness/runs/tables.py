"""The run's tables as tidy DataFrames with stable columns and dtypes.

``conditions.parquet`` has one row per condition and ``attention.parquet`` one per condition x
layer x head x segment (columns: :mod:`harness.runs.schema`, dtypes of metric columns:
:mod:`harness.measure.metrics`). Keys are categorical; list columns (token ids) are stored as
parquet lists. Writing and reading the files is :mod:`harness.io`'s (atomic, with one-line errors);
loading a run's tables is :func:`harness.runs.reading.load_run`'s.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.measure.metrics import condition_dtypes
from harness.runs.schema import (ATTENTION_COLUMNS, ATTENTION_METRICS, CATEGORICAL, CONDITION_COLUMNS, DESCRIPTIVE_DTYPES,
                                 KEY_COLUMNS, ROW_KEYS, TIMING_COLUMNS)


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




# what an id names, where its tokens sit in ``input_ids``, and what else must match for two rows'
# tokens to be comparable (one tokenizer; a prefix cut to one length)
ID_SPANS = (("prompt", "prompt_id", "task_start", "task_end", ("model",)),
            ("prefix", "prefix_id", "prefix_start", "prefix_end", ("model", "prefix_len", "injection_at")))


PLURAL = {"prompt": "prompts", "prefix": "prefixes"}


def refuse_one_key_two_texts(tables: list[pd.DataFrame], names: list[str]) -> None:
    """Refuse conditions tables of several runs in which one prompt id (or prefix id, at one model
    and length) names different tokens: read together, one key would hold two prompts' results. Two
    files that share ids with the same text are fine (it is the tokens that are compared, the
    model's own reading of the text, not the files)."""
    for role, column, start, end, by in ID_SPANS:
        seen: dict[tuple, tuple[tuple, str]] = {}
        named: dict[tuple, tuple[set, str]] = {}  # (cell, tokens) -> the ids the first run that has them gives them
        for table, name in zip(tables, names):
            if not {column, start, end, "input_ids"} <= set(table.columns):
                continue
            table = table.assign(**{c: None for c in by if c not in table.columns})  # older runs: no position
            rows = table.dropna(subset=[column]).drop_duplicates(subset=[*by, column])
            here: dict[tuple, set] = {}
            # a benchmark's prefixes share their documents' openings (the injection further in): only hand-written
            # prefixes, and only within a group, are one text where their cut tokens agree
            group = table["group"].astype(str) if "group" in table and role == "prefix" else pd.Series("", table.index)
            written = table["corpus"].isna() if "corpus" in table and role == "prefix" else pd.Series(True, table.index)
            for key, ids, lo, hi, g, mine in zip(zip(*(rows[c].astype(str) for c in (*by, column))), rows["input_ids"],
                                                 rows[start], rows[end], group[rows.index], written[rows.index]):
                tokens = tuple(np.asarray(ids)[int(lo):int(hi)].tolist())
                first = seen.setdefault(key, (tokens, name))
                if first[0] != tokens:
                    raise HarnessError(f"{first[1]} and {name} give the {role} id {key[-1]!r} different texts "
                                       f"(files with other content under one id): read together, one key would hold "
                                       f"two different {PLURAL[role]}' results; read runs made from one file, or give "
                                       f"the other file's lines ids of their own")
                if mine:
                    here.setdefault((key[:-1], g, tokens), set()).add(key[-1])
            # the reverse: one text under other ids in two runs would count as two prompts (prefixes). Within a run
            # two ids may share tokens (a directive and its prohibition cut short), so only ids that share none count
            for cell, ids in here.items():
                first_ids, first_name = named.setdefault(cell, (ids, name))
                if first_name != name and not ids & first_ids:
                    raise HarnessError(f"{first_name} and {name} give one {role} text different ids "
                                       f"({sorted(first_ids)[0]!r} and {sorted(ids)[0]!r}): read together, it would "
                                       f"count as two {PLURAL[role]}; read runs made from one file, or give the line "
                                       f"one id in both")
        if role == "prefix":  # one prefix neutral in one run, instruction-like in another: C - B with itself
            kinds: dict[str, tuple[str, str]] = {}
            for table, name in zip(tables, names):
                if {column, "group"} <= set(table.columns):
                    for pid, group in table.dropna(subset=[column])[[column, "group"]].drop_duplicates().itertuples(
                            index=False):
                        first = kinds.setdefault(str(pid), (str(group), name))
                        if first[0] != str(group):
                            raise HarnessError(f"the prefix id {str(pid)!r} is group {first[0]} in {first[1]} and "
                                               f"{group} in {name}: read together, C - B would compare a prefix with "
                                               f"itself; read runs whose banks agree on each prefix's kind")


# Compared between copies of a key: every result column. Not timing (it differs between identical
# runs) nor ``near_tie``: each run flags it against its own noise floor (an output-only run's floor
# is another sample than the attention run's), so it says something of the run, not of the result;
# nor ``computed_alone``: a condition retried alone after its batch failed in one run and not in another
# (the noise floor measures what batching moves).
PER_RUN_FLAGS = ["near_tie", "computed_alone"]
COMPARED = [c for c in CONDITION_COLUMNS if c not in KEY_COLUMNS + TIMING_COLUMNS + PER_RUN_FLAGS]
ATTENTION_HEADLINE = [c for c in CONDITION_COLUMNS if c.startswith("attn_")]


def with_position(attention: pd.DataFrame, conditions: pd.DataFrame) -> pd.DataFrame:
    """``attention`` with its run's ``injection_at`` (one position per run; the attention table does not
    repeat it), so rows of runs at other positions keep apart when read together."""
    if "injection_at" in attention.columns or "injection_at" not in conditions.columns:
        return attention
    positions = conditions["injection_at"].dropna().astype(str).unique()
    if len(positions) != 1:
        return attention.assign(injection_at=None)
    prefixed = attention["group"].astype(str) != "A"  # A has no prefix: no position, as in the conditions
    return attention.assign(injection_at=pd.Series(np.where(prefixed, positions[0], None), index=attention.index,
                                                   dtype=object))


def merged_attention(frames: list[pd.DataFrame], keep_differing: bool = False, names: list[str] | None = None
                     ) -> pd.DataFrame:
    """Attention tables of several runs (each tagged with its run's ``_source`` and passed through
    :func:`with_position`) as one: a row in several runs kept once (copies that differ too, with
    ``keep_differing``: :func:`dedupe`; then a ``run`` column from ``names`` says whose each row is, as
    the conditions table's does), the position column kept only where the runs sit at several
    positions."""
    att, _, differ = dedupe(concat_tables(frames), ROW_KEYS + ["layer", "head", "segment"], ATTENTION_METRICS, set(),
                            keep_differing)
    if differ and names is not None:
        att = att.assign(run=[names[i] for i in att["_source"]])
    if "injection_at" in att and att["injection_at"].nunique() <= 1:  # added only to keep positions apart
        att = att.drop(columns="injection_at")
    return att.drop(columns="_source")


def null_safe_keys(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """One hashable tuple per row, nulls (None, NaN, NA) all as None, so they compare equal."""
    cols = [df[k].astype(object).where(df[k].notna(), None) for k in keys]
    return pd.Series(list(zip(*cols)), index=df.index)


# Two copies of one condition's result agree where their tokens are identical and their numbers
# within this (absolute): rounding, as a batch of another composition gives it. A per-step KL near 0.02
# is a difference of two near-equal float32 log-probabilities and moved by 1.05e-5 between batches
# (pass 37), so copies take ten times `harness check-determinism`'s default --tolerance of 1e-5 (a rerun
# at batch size 1 that it checks, and whose excess it names as rounding).
SAME_RESULT_TOLERANCE = 1e-4


def _same(a, b) -> bool:
    """Null-safe equality of two cells; token lists exactly, numbers to :data:`SAME_RESULT_TOLERANCE`."""
    a_null = a is None or (isinstance(a, float) and math.isnan(a)) or a is pd.NA
    b_null = b is None or (isinstance(b, float) and math.isnan(b)) or b is pd.NA
    if a_null or b_null:
        return a_null and b_null
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        if np.issubdtype(x.dtype, np.floating) or np.issubdtype(y.dtype, np.floating):  # a value per step
            return bool(np.allclose(x.astype(float), y.astype(float), rtol=1e-9, atol=SAME_RESULT_TOLERANCE,
                                    equal_nan=True))
        return list(a) == list(b)  # token ids: exactly
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return bool(np.isclose(float(a), float(b), rtol=1e-9, atol=SAME_RESULT_TOLERANCE))
    return a == b


def dedupe(df: pd.DataFrame, keys: list[str], compare: list[str], no_attention: set[int],
           keep_differing: bool = False) -> tuple[pd.DataFrame, int, list]:
    """Keep one row per key (the ``keys`` ``df`` has). Returns (frame, rows dropped, disagreements)
    where a disagreement is (key, column, source of the kept copy, source of the other);
    ``keep_differing``: keep a copy whose result differs too (runs of mixed settings read on
    purpose: each such copy is its setting's result), dropping only copies that agree.
    ``no_attention`` holds the source indices of runs without attention analysis: their null
    attention columns are not a disagreement, and the copy with attention values is the one kept."""
    keys = [k for k in keys if k in df.columns]
    key = null_safe_keys(df, keys)
    dup = key.duplicated(keep=False)
    if not dup.any():
        return df, 0, []
    disagreements, drop = [], []
    for _, idx in key[dup].groupby(key[dup], sort=False).groups.items():
        rows = sorted(idx, key=lambda i: df.at[i, "_source"] in no_attention)  # with attention first
        first = rows[0]
        for other in rows[1:]:
            differs = next((col for col in compare if col in df.columns
                            and not (col in ATTENTION_HEADLINE and df.at[other, "_source"] in no_attention)
                            and not _same(df.at[first, col], df.at[other, col])), None)
            if differs is not None:
                disagreements.append((key[first], differs, df.at[first, "_source"], df.at[other, "_source"]))
            if differs is None or not keep_differing:
                drop.append(other)
    return df.drop(index=drop).reset_index(drop=True), len(drop), disagreements
