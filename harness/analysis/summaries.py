"""Summaries the report and the figures share: isolation settings by length, and the noise level
a drift must exceed. DataFrame in, DataFrame (or number) out."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import descriptive
from harness.analysis.checks import check_columns


def isolation_summary(conditions: pd.DataFrame, value: str) -> pd.DataFrame:
    """Mean ``value`` (B and C pooled, per prompt first) per model, isolation setting and length."""
    descriptive.check_conditions_table(conditions)
    check_columns(conditions, ["model", "group", "prompt_id", "isolation", "prefix_len"], "conditions")
    descriptive.check_measure(conditions, value)
    x = descriptive.with_settings(conditions[conditions.group != "A"])
    x["setting"] = x["isolation"].astype(str)
    per = x.groupby(["model", "setting", "prefix_len", "prompt_id"], observed=True)[value].mean().reset_index()
    order = {s: i for i, s in enumerate(dict.fromkeys(x.setting))}
    rows = []
    for (model, setting, length), cell in per.groupby(["model", "setting", "prefix_len"], observed=True):
        low, high = descriptive.mean_interval(cell[value].dropna().to_numpy(), empty_ok=True)
        rows.append({"model": model, "setting": setting, "prefix_len": length, "mean": cell[value].mean(),
                     "ci_low": low, "ci_high": high})
    out = pd.DataFrame(rows, columns=["model", "setting", "prefix_len", "mean", "ci_low", "ci_high"])
    return out.sort_values(["model", "setting", "prefix_len"], key=lambda c: c.map(order) if c.name == "setting" else c)


def noise_level(noise: pd.DataFrame | None, model: str, value: str) -> float | None:
    """The upper 95% bound of the mean numerical noise in ``value`` for ``model`` (batched against
    alone, per condition), or None when not measured."""
    if noise is None or noise.empty or value not in noise:
        return None
    vals = noise[noise.model.astype(str) == str(model)][value].dropna().to_numpy(dtype=float)
    if not len(vals):
        return None
    return float(vals.max()) if np.all(vals == vals[0]) else descriptive.mean_interval(vals)[1]
