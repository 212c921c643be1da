"""Runs that decoded nothing: a sweep with ``decode.path=none`` measures attention alone, and its B/C
rows have no continuation. Their output measures are empty, and a reader that takes an empty
``first_divergence`` for "never diverged" would read them as never moved from A; every reader asks
these predicates, and says why in one wording (:data:`UNDECODED`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

UNDECODED = "B and C decoded no continuation (decode.path=none)"


def undecoded_rows(conditions: pd.DataFrame) -> np.ndarray:
    """Which rows are B/C conditions that decoded no continuation (:data:`UNDECODED`): a decoded one
    always has an edit distance, 0 where it never left A's (``first_divergence`` is then empty too)."""
    if "norm_edit_distance" not in conditions.columns or "group" not in conditions.columns:
        return np.zeros(len(conditions), dtype=bool)
    return ((conditions["group"].astype(str) != "A") & conditions["norm_edit_distance"].isna()).to_numpy()


def undecoded(conditions: pd.DataFrame) -> bool:
    """Whether every B and C row of the table decoded no continuation (such a run measures attention
    alone): its empty ``first_divergence`` would otherwise read as "never diverged"."""
    if "group" not in conditions.columns:
        return False
    prefixed = (conditions["group"].astype(str) != "A").to_numpy()
    return bool(prefixed.any()) and bool(undecoded_rows(conditions)[prefixed].all())


def empty_beside_a(conditions: pd.DataFrame, column: str) -> str | None:
    """Why ``column`` cannot be compared with A, where it is empty in every B and C row (A's own rows,
    0 or a hit against itself, would pass for a measure taken), said after the column's name; None
    where it can."""
    if "group" not in conditions.columns:
        return None
    prefixed = conditions.loc[conditions["group"].astype(str) != "A", column]
    if not len(prefixed) or prefixed.notna().any():
        return None
    return (f"is empty in all {len(prefixed)} rows of groups B and C"
            f"{f'; {UNDECODED}' if undecoded(conditions) else ''}: there is nothing to compare with A")
