"""The table behind every report's first figure: how far each group moves the model, and C - B.

A report's question is "does the instruction-like prefix (C) move the model more than the neutral one
(B)?". :func:`forest_table` answers it per measure, model, placement and prefix length in one tidy
table, each row an estimate with its prompts x prefixes interval (prompts and prefixes both random):

* ``C - B``: the lead comparison of the report's C - B table (:func:`contrast_table`: every
  contrasted measure through :func:`harness.analysis.crossed.compare_groups`), copied, not recomputed;
* ``B - A`` and ``C - A``: the mean of a *drift* measure over one group, which is already a difference
  from A (A's value of it is 0 by construction: the edit distance of A's continuation to itself, the
  KL of A's attention from itself). Its interval is the crossed t interval of one group's mean
  (:func:`harness.analysis.crossed_variance.group_mean`). A measure whose A rows are not all 0 (a
  word's hit rate, which A can score too) gets the C - B row only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import descriptive, obeying
from harness.analysis.crossed import cell_means, compare_groups
from harness.analysis.crossed_variance import MIN_PREFIXES, MIN_PROMPTS, complete_table, group_mean
from harness.analysis.verdicts import decide, deltas_for
from harness.measure.metrics import contrasted

CELL = ("model", "placement", "prefix_len")
COMPARISONS = ("C - B", "B - A", "C - A")
COLUMNS = ["model", "placement", "prefix_len", "measure", "value", "comparison", "estimate", "ci_low", "ci_high",
           "ci_note", "n_prompts", "n_prefixes", "resampled", "delta", "verdict"]
RESAMPLED = "prompts x prefixes"


def contrast_table(conds: pd.DataFrame, deltas: dict[str, float] | None = None) -> pd.DataFrame:
    """C - B of every contrasted measure (:func:`harness.measure.metrics.contrasted`) per model and
    length (:func:`harness.analysis.crossed.compare_groups`), with ``q_crossed`` within each model,
    the measure's smallest effect of interest ``delta`` (the registry's, with ``deltas`` on top), the
    power at it, and the ``verdict`` at it (:func:`harness.analysis.verdicts.decide`, two-sided: "no
    effect as large as Δ" when the interval lies within -Δ to Δ); the target hit rate is left out
    where C both asks for and forbids the word. Empty where the conditions lack group B or C (a
    benign-only run, ``groups=[A,B]``: there is no C - B to state)."""
    if not {"B", "C"} <= set(conds["group"].astype(str)):
        return pd.DataFrame()
    delta = deltas_for(deltas)
    results = []
    mixed = bool((obeying.roles(conds) == "forbidden").any())
    for value, label in contrasted():
        if value not in conds or conds.loc[conds.group.isin(["B", "C"]), value].isna().all() or (
                mixed and value == "target_hit"):  # not measured on B and C (decode.path=none: no edit distance)
            continue
        rows = conds if value == "target_hit" else obeying.without_mentions(conds)  # a word rate: C against mentions
        data = rows.assign(**{value: rows[value].astype(float)})
        rate = pd.api.types.is_bool_dtype(conds[value].dtype)
        table = compare_groups(data, value, rate=rate, effect=delta.get(value))
        results.append(table.assign(measure=label, value=value, delta=delta.get(value, np.nan), verdict=[
            decide(lo, hi, delta.get(value), two_sided=True) for lo, hi in zip(table.ci_low, table.ci_high)]))
    if not results:
        return pd.DataFrame()
    table = pd.concat(results, ignore_index=True)
    table["q_crossed"] = descriptive.benjamini_hochberg_by(table, "p_crossed", family=("model",))
    return table


def is_drift(conds: pd.DataFrame, value: str) -> bool:
    """Whether ``value`` is a distance from A: A's rows hold it and every one of them is 0."""
    a = conds.loc[conds.group == "A", value] if value in conds else pd.Series(dtype=float)
    a = pd.to_numeric(a, errors="coerce").dropna()
    return len(a) > 0 and bool((a == 0).all())


def group_drift(conds: pd.DataFrame, value: str, group: str, confidence: float = 0.95) -> pd.DataFrame:
    """``group``'s mean of ``value`` per model, placement and length, with the crossed t interval of
    one group's mean (NaN, and ``ci_note`` saying why, with fewer than 3 prompts or 3 prefixes)."""
    by = [c for c in CELL if c in conds]
    rows = []
    units = cell_means(conds[conds.group == group], value, by)
    for key, cell in units.groupby(by, observed=True, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        Y = cell.pivot_table(index="prompt_id", columns="prefix_id", values=value, aggfunc="mean",
                             observed=True).to_numpy(dtype=float)
        complete, note = complete_table(Y)
        p, n = complete.shape
        measured = cell[value].dropna()  # none where it was not measured (decode.path=none: no edit distance)
        estimate = float(measured.mean()) if len(measured) else np.nan
        low = high = np.nan
        if p < MIN_PROMPTS or n < MIN_PREFIXES:
            note = f"{p} prompt{'s' * (p != 1)}" if p < MIN_PROMPTS else f"{n} prefix{'es' * (n != 1)}"
        else:
            est = group_mean(complete)
            estimate = float(est.statistic)
            low, high = (float(v) for v in est.interval(confidence))
            if not np.isfinite(low):
                note = "no variation"
        rows.append({**dict(zip(by, key)), "estimate": estimate, "ci_low": low, "ci_high": high, "ci_note": note,
                     "n_prompts": p, "n_prefixes": n})
    return pd.DataFrame(rows)


def forest_table(conds: pd.DataFrame, contrasts: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """One row per (model, placement, length, measure, comparison): ``contrasts`` is the report's C - B
    table (``measure`` its label, ``value`` its column); ``conds`` the baseline conditions it came
    from. See the module docstring for what each comparison means."""
    if contrasts.empty:
        return pd.DataFrame(columns=COLUMNS)
    if "delta" not in contrasts:  # a C - B table made without verdicts (compare_groups' own)
        contrasts = contrasts.assign(delta=np.nan, verdict=None)
    parts = [contrasts.assign(comparison="C - B", estimate=contrasts.statistic, resampled=RESAMPLED,
                              n_prefixes=contrasts.n_prefixes_high + contrasts.n_prefixes_low)]
    deltas = dict(zip(contrasts.value, contrasts.delta))
    for value, measure in dict(zip(contrasts.value, contrasts.measure)).items():
        if not is_drift(conds, value):
            continue
        for group in ("B", "C"):
            drift = group_drift(conds, value, group, confidence)
            if len(drift):  # a group's drift from A carries its measure's Δ (figure 0 draws it), no verdict
                parts.append(drift.assign(measure=measure, value=value, comparison=f"{group} - A",
                                          resampled=RESAMPLED, delta=deltas[value], verdict=None))
    table = pd.concat(parts, ignore_index=True)
    if "placement" not in table:
        table["placement"] = "raw"
    table["ci_note"] = table["ci_note"].fillna("").astype(str)
    table["verdict"] = table["verdict"].astype(object).where(table["verdict"].notna(), None)
    order = {c: i for i, c in enumerate(COMPARISONS)}
    measures = list(dict.fromkeys(contrasts.measure))
    table = table.assign(_m=table.measure.map(measures.index), _c=table.comparison.map(order))
    return table.sort_values(["model", "placement", "_m", "prefix_len", "_c"], kind="stable")[COLUMNS] \
        .reset_index(drop=True)
