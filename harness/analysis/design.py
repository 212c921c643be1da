"""Planning a design: a finished run's variance components per measure, and the power (or minimum
detectable effect) of the lead C-minus-B test at another number of prompts and prefixes.

``harness plan RUN`` reads :func:`variance_components` of each measure and searches designs with
:func:`design_power` (both DataFrame or dict in, numbers out; no files, no models)::

    comps = variance_components(conditions, "output_kl", by=("model", "prefix_len"))
    row = comps.iloc[0]
    design_power(row, n_prompts=24, n_prefixes_per_group=18, effect=row.prefix_sd)   # e.g. 0.83
    minimum_detectable_effect(row, 24, 18)                                            # power 0.8

Components are estimated per cell on its prompts x prefixes table (cell means over repeats), each
kept at or above zero (:mod:`harness.analysis.crossed_variance`). Planned at the pilot's own design,
:func:`design_power` is what the report prints as "power at 1 prefix SD"; its median over pilots
against the test's real power is in the calibration suite (``benchmarks/crossed_calibration.py``),
including pilots at one design planning another.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.checks import check_by
from harness.analysis.crossed import cell_layouts
from harness.analysis.crossed_variance import complete_crossing, supported
from harness.analysis.descriptive import CONTRAST_BY, present_columns, with_settings
from harness.analysis.lead import remap_pairs
from harness.analysis.power import (  # noqa: F401  (the planning API lives here for its callers)
    COMPONENTS,
    components_of,
    design_power,
    minimum_detectable_effect,
    planned_variance,
    prefix_level_sd,
)

COLUMNS = ["n_prompts", "n_prefixes_high", "n_prefixes_low", "design", *COMPONENTS, "prefix_sd", "note"]


def variance_components(df: pd.DataFrame, value: str, high: str = "C", low: str = "B",
                        by: Sequence[str] = CONTRAST_BY) -> pd.DataFrame:
    """Per ``by`` cell, the variance components of ``value`` in the crossed C/B design.

    Columns: by..., ``n_prompts``, ``n_prefixes_high``, ``n_prefixes_low`` (what they came from: the
    cell's complete crossing), ``design`` (paired or unpaired), the components
    (:data:`harness.analysis.power.COMPONENTS`: ``prompt`` s2_a, ``interaction`` s2_ag, ``prefix_high``
    and ``prefix_low`` s2_b per group, ``prefix_pair_sum`` (paired designs: the prefix variance pairing
    leaves, else NaN), ``resid_high``/``resid_low`` s2_e per group), ``prefix_sd`` (one prefix-level
    SD, :func:`harness.analysis.power.prefix_level_sd`) and ``note`` (why a cell has none, or which
    part of an incomplete crossing they came from). A row is what :func:`design_power` takes."""
    by = check_by(df, by, value, contrast=True)
    rows = []
    for key, lay in cell_layouts(df, value, high, low, by):
        prompts, cols, note = complete_crossing(lay.Y, lay.pairs)
        Y, hi = lay.Y[np.ix_(prompts, cols)], lay.is_high[cols]
        pairs = remap_pairs(lay.pairs, cols)
        row = {**key, "n_prompts": Y.shape[0], "n_prefixes_high": int(hi.sum()), "n_prefixes_low": int((~hi).sum()),
               "design": "paired" if pairs is not None else "unpaired", "note": note}
        reason = supported(Y, hi)
        if reason is not None:
            rows.append({**row, **{c: np.nan for c in COMPONENTS}, "prefix_sd": np.nan,
                         "note": reason if not note else f"{reason} ({note})"})
            continue
        comps = {k: float(v) for k, v in components_of(Y, hi, pairs).items()}
        rows.append({**row, **comps, "prefix_sd": float(prefix_level_sd(comps))})
    return pd.DataFrame(rows, columns=present_columns(with_settings(df), by) + COLUMNS)


def constant(row) -> bool:
    """Whether a row of :func:`variance_components` has every component estimated as exactly 0: the
    measure took one value in every B and C condition of its cell. That says nothing of its variance
    (unknown, not 0: a power of 1 from it would be a promise no design keeps), so nothing to plan from."""
    values = [float(row[c]) for c in COMPONENTS if c in row and np.isfinite(row[c])]
    return bool(values) and all(v == 0 for v in values)
