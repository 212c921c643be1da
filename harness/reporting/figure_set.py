"""The standard figure set of a run (docs/report.md), built from the tables alone.

:func:`make_figures` is pure: tables in, matplotlib figures out (one row of panels per model and
placement); :func:`harness.reporting.report.write_outputs` writes them. Attention figures lead with the two
parts of the drift, capture (how much attention the prefix takes) and redistribution (how the
rest is spread differently), always aggregated by :func:`harness.analysis.descriptive.weighted_segment_mean`.
"""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from harness.analysis import curves, descriptive
from harness.analysis.checks import check_frame, check_same_conditions, check_tables, or_empty
from harness.analysis.undecoded import undecoded
from harness.analysis.forest import contrast_table, forest_table
from harness.analysis.obeying import ceiling_table, word_rates
from harness.analysis.summaries import isolation_summary, noise_level
from harness.reporting import plots as F

CAPTURE = ("capture", "capture: -log(1 - prefix mass) (nats)")
REDISTRIBUTION = ("kl_shared", "redistribution: KL on shared keys (nats)")
NAMES = {"capture": "capture", "kl_shared": "redistribution"}


def baseline(df: pd.DataFrame) -> pd.DataFrame:
    """Rows without an isolation intervention (figures 1-4 and 6-8 describe plain concatenation)."""
    return df[df.isolation == "none"] if "isolation" in df.columns else df


def panels(df: pd.DataFrame) -> list[tuple[str, str | None]]:
    """The (model, placement) combinations of a table, in order of appearance."""
    placement = df["placement"].astype(str) if "placement" in df.columns else pd.Series([None] * len(df))
    return list(dict.fromkeys(zip(df["model"].astype(str), placement)))


def held(df: pd.DataFrame, combos: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The panels of ``combos`` that ``df`` has rows for: a model run without attention (or without
    targets) beside one with gets no empty row of axes in the figures only the other can draw."""
    return [combo for combo in combos if not select(df, *combo).empty]


def select(df: pd.DataFrame, model: str, placement: str | None) -> pd.DataFrame:
    keep = df["model"].astype(str) == model
    if placement is not None and "placement" in df.columns:
        keep &= df["placement"].astype(str) == placement
    return df[keep]


def title(model: str, placement: str | None) -> str:
    return model if placement in (None, "raw") else f"{model} [{placement}]"


def mass_sources(attention: pd.DataFrame) -> pd.DataFrame:
    """Mean of each ``mass_from_*`` per group and length (weighted segment rule, per prompt first)."""
    missing = [f"mass_from_{s}" for s in F.MASS_SOURCES if f"mass_from_{s}" not in attention.columns]
    if missing:
        raise ValueError(f"attention must be an attention table with the prefix-mass columns; this one has no "
                         f"{', '.join(missing)}")
    parts = []
    for source in F.MASS_SOURCES:
        per = descriptive.weighted_segment_mean(attention, f"mass_from_{source}", ("group", "prefix_len"))
        mean = per.groupby(["group", "prefix_len"], observed=True)[f"mass_from_{source}"].mean().reset_index()
        parts.append(mean.rename(columns={f"mass_from_{source}": "mean"}).assign(source=source))
    return pd.concat(parts, ignore_index=True)


def _grid(rows: int, cols: int, width: float = 4.6, height: float = 3.4, **kwargs):
    # not through pyplot, which keeps every figure it made until closed: a notebook cell drawing the set
    # again and again would hold them all (and matplotlib warns past 20)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    return fig, fig.subplots(rows, cols, squeeze=False, **kwargs)


def make_figures(conditions: pd.DataFrame, attention: pd.DataFrame | None,
                 noise: pd.DataFrame | None = None, ceiling: pd.DataFrame | None = None,
                 forest: pd.DataFrame | None = None) -> dict[str, plt.Figure]:
    """Figures 0-9 (those the tables have data for), one row per model and placement (figure 9, the
    placements beside the direct ceiling: one row per model; ``ceiling``: the
    :func:`ceiling_table` of the baseline conditions, computed here when not given). Figure 0, the
    answer first, draws ``forest`` (:func:`harness.analysis.forest.forest_table`; computed here when not
    given)."""
    check_frame(conditions, "conditions")  # a list or None failed deep inside pandas
    if attention is not None:
        check_frame(attention, "attention")
    if len(conditions) == 0:  # matplotlib's "rows must be a positive integer" otherwise
        raise ValueError("conditions: the table is empty; give a run's conditions")
    if "group" in conditions and not {"B", "C"} & set(conditions["group"].astype(str)):
        raise ValueError("conditions hold no group B or C row (filtered to A?): every figure draws a prefixed group "
                         "against A; give a run's conditions")
    check_tables(noise=noise, ceiling=ceiling, forest=forest)
    check_same_conditions(conditions, attention)
    conds = baseline(conditions)
    combos = panels(conds)
    out = {}
    if forest is None:  # the report's C - B table and each group's drift, as write_outputs computes them
        forest = forest_table(conds, contrast_table(conds))
    with F.style():
        if not forest.empty:
            out["fig0_c_minus_b"] = forest_figure(forest)
        decoded = not undecoded(conds)  # decode.path=none: no output drift, no survival to draw
        if decoded:
            fig, axes = _grid(len(combos), 1)
            summary = descriptive.drift_summary(conds, "norm_edit_distance")
            ceilings = or_empty(curves.ceiling, conds)
            for row, (model, placement) in zip(axes, combos):
                top = select(ceilings, model, placement) if not ceilings.empty else ceilings  # or_empty: no columns
                F.plot_drift_vs_length(row[0], select(summary, model, placement),
                                       title=f"Output drift: {title(model, placement)}",
                                       ceiling=top.iloc[0] if len(top) else None)
            out["fig1_edit_distance"] = fig

        att = baseline(attention) if attention is not None else None
        att_combos = held(att, combos) if att is not None and not att.empty else []
        strangers = sorted(set(panels(att)) - set(combos)) if att is not None and not att.empty else []
        if strangers:  # another run's attention table, most often: its figures would be of no condition here
            warnings.warn(f"attention holds rows of {', '.join(title(*s) for s in strangers)}, which the conditions "
                          f"do not: those are left out of the figures (give each run's own attention table)",
                          stacklevel=2)
        if att_combos:
            fig, axes = _grid(len(att_combos), 4, width=3.6, sharey="col")
            for row, (model, placement) in zip(axes, att_combos):
                cell = select(att, model, placement)
                for ax, (metric, label), group in zip(row, (CAPTURE, CAPTURE, REDISTRIBUTION, REDISTRIBUTION),
                                                      ("B", "C", "B", "C")):
                    F.plot_layer_profile(ax, descriptive.layer_profile(cell, metric), group, ylabel=label,
                                         title=f"{F.GROUP_NAMES[group]}\n{NAMES[metric]} ({title(model, placement)})")
            out["fig2_layer_drift"] = fig

            heads_c = att[att.group == "C"]
            lengths = sorted(heads_c.prefix_len.unique())
            if lengths:
                fig, axes = _grid(2 * len(att_combos), len(lengths), width=2.7, height=2.6)
                for i, (model, placement) in enumerate(att_combos):
                    cell = select(heads_c, model, placement)
                    for j, (metric, label) in enumerate((CAPTURE, REDISTRIBUTION)):
                        grid = descriptive.head_map(cell, "C", metric)
                        vmax = float(grid[metric].max()) if len(grid) else None
                        images = [F.plot_head_heatmap(ax, grid, length, value=metric, vmax=vmax)
                                  for ax, length in zip(axes[2 * i + j], lengths)]
                        drawn = [im for im in images if im is not None]
                        if drawn:  # a short colour-bar label (two long ones ran together); the row names its model
                            fig.colorbar(drawn[0], ax=list(axes[2 * i + j]), label=f"{label.split(':')[0]} (nats)")
                        axes[2 * i + j][0].set_ylabel(f"{title(model, placement)}\nlayer")
                fig.suptitle("Layer x head attention drift under C\ncapture (top row of each model), redistribution "
                             "(bottom row)")
                out["fig3_heads_C"] = fig

            mass = descriptive.drift_summary(conds, "attn_prefix_mass_mean")
            fig, axes = _grid(len(att_combos), 2)
            for row, (model, placement) in zip(axes, att_combos):
                F.plot_prefix_mass(row[0], select(mass, model, placement))
                F.plot_mass_sources(row[1], mass_sources(select(att, model, placement)))
                for ax in row:  # every row names its model
                    ax.set_title(f"{ax.get_title()}\n{title(model, placement)}")
            out["fig4_prefix_mass"] = fig

        if "isolation" in conditions and conditions.isolation.nunique() > 1:
            out["fig5_isolation"] = _isolation_figure(conditions, noise)

        if decoded:
            surv = curves.survival(conds[conds.group != "A"])
            fig, axes = _grid(len(combos), 2)
            for row, (model, placement) in zip(axes, combos):
                for ax, group in zip(row, ("B", "C")):
                    F.plot_survival(ax, select(surv, model, placement), group)
                    ax.set_title(f"{F.GROUP_NAMES[group]}\n{title(model, placement)}")
            out["fig6_survival"] = fig

        if "output_kl_steps" in conds and conds.output_kl_steps.notna().any():
            steps = curves.step_profile(conds)
            fig, axes = _grid(len(combos), 2, sharey="row")
            for row, (model, placement) in zip(axes, combos):
                for ax, group in zip(row, ("B", "C")):
                    F.plot_step_profile(ax, select(steps, model, placement), group)
                    ax.set_title(f"{F.GROUP_NAMES[group]}\n{title(model, placement)}")
            out["fig7_output_kl_steps"] = fig

        rates = or_empty(word_rates, conds)
        if not rates.empty:
            rate_combos = held(rates, combos)
            fig, axes = _grid(len(rate_combos), 1)
            for row, (model, placement) in zip(axes, rate_combos):
                F.plot_hit_rate(row[0], select(rates, model, placement))
                row[0].set_title(f"Is the prefix's word in the reply?\n{title(model, placement)}")
            out["fig8_hit_rate"] = fig

        ceiling = or_empty(ceiling_table, conds) if ceiling is None else ceiling
        if not ceiling.empty:
            models = list(dict.fromkeys(ceiling.model.astype(str)))
            fig, axes = _grid(len(models), 1, width=6.0)
            for row, model in zip(axes, models):
                F.plot_ceiling(row[0], select(ceiling, model, None))
                row[0].set_title(f"Injected, against asked directly\n{model}")
            out["fig9_ceiling"] = fig
    return out


def forest_figure(forest: pd.DataFrame) -> plt.Figure:
    """Figure 0: C - B (and B - A, C - A for drift measures) per measure and prefix length, one row of
    panels per model and placement, each measure on its own axis in its own units."""
    combos = panels(forest)
    measures = list(dict.fromkeys(forest.measure))
    fig, axes = _grid(len(combos), len(measures), width=3.3, height=1.4 + 0.22 * forest.prefix_len.nunique() * forest.comparison.nunique())
    for row, (model, placement) in zip(axes, combos):
        cell = select(forest, model, placement)
        for ax, measure in zip(row, measures):
            rows = cell[cell.measure == measure]
            deltas = rows["delta"].dropna() if "delta" in rows else rows.iloc[:0]
            F.plot_forest(ax, rows, xlabel=measure, delta=float(deltas.iloc[0]) if len(deltas) else None)
            ax.set_title(f"{measure.split(' (')[0]}\n{title(model, placement)}")
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=2, fontsize=7,
               title="95% intervals, prompts and prefixes random; the line at 0 is no difference", title_fontsize=7)
    # an interval within the dotted lines rules out an effect as large as Δ (harness.analysis.verdicts)
    fig.suptitle("Does the instruction-like prefix (C) move the model more than the neutral one (B)?")
    return fig


# figure 8's table under its public name before harness.analysis.obeying (``H.hit_rates``)
hit_rates = word_rates


def _isolation_figure(conditions: pd.DataFrame, noise: pd.DataFrame | None) -> plt.Figure:
    combos = panels(conditions)
    metrics = [("norm_edit_distance", "normalized edit distance to A (0-1)", False)]
    if conditions.attn_kl_mean.notna().any():
        metrics.append(("attn_kl_mean", "mean attention KL(A‖X) (nats, symlog)", True))
    fig, axes = _grid(len(combos), len(metrics), height=3.6)
    for row, (model, placement) in zip(axes, combos):
        for ax, (value, label, log) in zip(row, metrics):
            summary = isolation_summary(select(conditions, model, placement), value)
            F.plot_isolation(ax, summary, noise_level(noise, model, value), label, log)
            ax.set_title(f"Isolation: {title(model, placement)}")
    return fig
