"""The figure data of claims 1 and 2: each group's mean divergence per layer, and its mean drift per
prefix length, with crossed t intervals (prompts and prefixes random), per model and placement.
What :mod:`harness.reporting.claims` draws beside the verdicts of :mod:`harness.analysis.claims`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from harness.analysis.claim_cubes import complete_cube, crossed_mean_intervals, cube
from harness.analysis.descriptive import CONFIDENCE, N_RESAMPLES, weighted_segment_mean, with_settings


def layer_curves(attention: pd.DataFrame, value: str = "kl", groups: Sequence[str] = ("B", "C"),
                 by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                 confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 1's figure data: per ``by`` cell, group and layer, the mean divergence from A with its
    crossed t interval (:func:`crossed_mean_intervals`; ``n_resamples`` and ``seed`` are unused, kept
    for callers), and the layer's fraction of depth."""
    rows = []
    att = with_settings(attention[attention.group.isin(list(groups))])
    for key, sub in att.groupby([*by, "group"], observed=True, sort=True):
        per = weighted_segment_mean(sub, value, ("prefix_id", "prefix_len", "layer"))
        per = per.groupby(["prompt_id", "prefix_id", "layer"], observed=True)[value].mean().reset_index()
        Y, layers = cube(per, value, "layer")
        observed, low, high = crossed_mean_intervals(complete_cube(Y), confidence)
        for i, layer in enumerate(layers):
            rows.append({**dict(zip([*by, "group"], key)), "layer": layer, "depth": layer / max(len(layers) - 1, 1),
                         value: observed[i], "ci_low": low[i], "ci_high": high[i]})
    return pd.DataFrame(rows)


def length_curves(conditions: pd.DataFrame, value: str, groups: Sequence[str] = ("B", "C"),
                  by: Sequence[str] = ("model", "placement"), n_resamples: int = N_RESAMPLES, seed: int = 0,
                  confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Claim 2's figure data: per ``by`` cell, group and prefix length, the mean of ``value`` with
    its crossed t interval (:func:`crossed_mean_intervals`)."""
    rows = []
    cond = with_settings(conditions[conditions.group.isin(list(groups))])
    for key, sub in cond.groupby([*by, "group"], observed=True, sort=True):
        Y, lengths = cube(sub, value, "prefix_len")
        observed, low, high = crossed_mean_intervals(complete_cube(Y), confidence)
        for i, n in enumerate(lengths):
            rows.append({**dict(zip([*by, "group"], key)), "prefix_len": n, value: observed[i],
                         "ci_low": low[i], "ci_high": high[i]})
    return pd.DataFrame(rows)
