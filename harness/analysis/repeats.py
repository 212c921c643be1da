"""Which rows of a table repeat one condition: a run's table concatenated with itself, or two runs
sharing conditions, would count one condition as several observations (the checks of
:mod:`harness.analysis.checks` refuse them)."""

from __future__ import annotations

import pandas as pd

from harness.inputs.conditions import KEY_FIELDS

# the columns naming one condition of one model (as harness.runs.schema.ROW_KEYS, a stage above this one)
CONDITION_KEYS = ("model", *KEY_FIELDS, "injection_at")


def repeated_conditions(df: pd.DataFrame) -> tuple[int, int]:
    """``(exact, differing)``: how many rows repeat an earlier row's identity (:data:`CONDITION_KEYS`,
    ``run`` and every other label column where the table has them: a target, a check, an attack; not
    the continuation's text, which is a result) with every result the same, and how many with some
    result different."""
    keys = [c for c in (*CONDITION_KEYS, "run") if c in df.columns]
    if not {"group", "prompt_id", "prefix_id"} <= set(keys) or len(df) < 2:
        return 0, 0
    labels = [c for c in df.columns if c not in keys and not c.startswith("continuation") and _labels(df[c])]
    repeats = df.duplicated(subset=keys + labels)
    if not repeats.any():
        return 0, 0
    results = [c for c in df.columns if c not in keys + labels and (df[c].dtype != object or _labels(df[c]))]
    exact = int(df.duplicated(subset=keys + labels + results).sum())
    return exact, int(repeats.sum()) - exact


def _labels(column: pd.Series) -> bool:
    """Whether a column holds labels (categories or text), not numbers or lists."""
    if isinstance(column.dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(column.dtype) \
            and column.dtype != object:
        return True
    if column.dtype != object:
        return False
    held = column.dropna()
    return all(isinstance(v, str) for v in held.iloc[:20])
