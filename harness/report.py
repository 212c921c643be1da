"""The standard figure set and the run report, built from the tables alone (no model needed).

:func:`make_figures` and :func:`report_markdown` are pure; :func:`write_outputs` is the edge that
writes ``figures/`` and ``report.md``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from . import figures as F
from . import stats
from .tables import write_text


def _baseline(df: pd.DataFrame) -> pd.DataFrame:
    """Rows without an isolation intervention (figures 1-4 describe plain concatenation)."""
    return df[df.isolation == "none"] if "isolation" in df.columns else df


def isolation_summary(conditions: pd.DataFrame, value: str) -> pd.DataFrame:
    """Mean ``value`` (B and C pooled, per prompt first) per model, isolation setting and length."""
    x = stats.with_settings(conditions[conditions.group != "A"])
    x["setting"] = x["isolation"].astype(str)
    per = x.groupby(["model", "setting", "prefix_len", "prompt_id"], observed=True)[value].mean().reset_index()
    order = {s: i for i, s in enumerate(dict.fromkeys(x.setting))}
    out = per.groupby(["model", "setting", "prefix_len"], observed=True)[value].mean().reset_index()
    out = out.rename(columns={value: "mean"})
    return out.sort_values(["model", "setting", "prefix_len"], key=lambda c: c.map(order) if c.name == "setting" else c)


def noise_floor(noise: pd.DataFrame | None, model: str, value: str) -> float | None:
    """The largest drift the noise-floor probes measured for ``model`` (None when not measured)."""
    if noise is None or noise.empty or value not in noise:
        return None
    vals = noise[noise.model == model][value].dropna()
    return float(vals.max()) if len(vals) else None


def make_figures(conditions: pd.DataFrame, attention: pd.DataFrame | None,
                 noise: pd.DataFrame | None = None) -> dict[str, plt.Figure]:
    """Figures 1-4 of DESIGN.md section 7, one panel (or panel row) per model, and figure 5 when
    the run has isolation settings besides ``none``."""
    conds = _baseline(conditions)
    models = list(conds.model.unique())
    out = {}
    with F.style():
        fig, axes = plt.subplots(1, len(models), figsize=(4.8 * len(models), 3.4), squeeze=False, layout="constrained")
        summary = stats.drift_summary(conds, "norm_edit_distance")
        for ax, model in zip(axes[0], models):
            F.plot_drift_vs_length(ax, summary[summary.model == model], title=f"Output drift: {model}")
        out["fig1_edit_distance"] = fig

        if attention is not None and not attention.empty:
            att = _baseline(attention)
            profile = stats.layer_profile(att, "kl")
            fig, axes = plt.subplots(len(models), 2, figsize=(9, 3.2 * len(models)), squeeze=False, sharey="row", layout="constrained")
            for row, model in zip(axes, models):
                for ax, group in zip(row, ("B", "C")):
                    F.plot_layer_profile(ax, profile[profile.model == model], group)
                    ax.set_title(f"{F.GROUP_NAMES[group]} ({model})")
                out["fig2_layer_kl"] = fig

            heads = stats.head_map(att, "C", "kl")
            lengths = sorted(heads.prefix_len.unique())
            if lengths:
                fig, axes = plt.subplots(len(models), len(lengths), figsize=(2.6 * len(lengths) + 1, 2.6 * len(models)),
                                         squeeze=False, layout="constrained")
                for row, model in zip(axes, models):
                    cells = heads[heads.model == model]
                    vmax = float(cells.kl.max()) if len(cells) else None
                    image = None
                    for ax, length in zip(row, lengths):
                        image = F.plot_head_heatmap(ax, cells, length, vmax=vmax)
                    fig.colorbar(image, ax=list(row), label="mean attention KL(A‖C) (nats)")
                fig.suptitle("Layer x head attention drift, group C")
                out["fig3_head_kl_C"] = fig

            mass = stats.drift_summary(conds, "attn_prefix_mass_mean")
            fig, axes = plt.subplots(1, len(models), figsize=(4.8 * len(models), 3.4), squeeze=False, layout="constrained")
            for ax, model in zip(axes[0], models):
                F.plot_prefix_mass(ax, mass[mass.model == model])
                out["fig4_prefix_mass"] = fig

        if "isolation" in conditions and conditions.isolation.nunique() > 1:
            panels = [("norm_edit_distance", "norm_edit_distance", "normalized edit distance to A (0-1)", False)]
            if conditions.attn_kl_mean.notna().any():
                panels.append(("attn_kl_mean", "attn_kl_mean", "mean attention KL(A‖X) (nats, symlog)", True))
            fig, axes = plt.subplots(len(models), len(panels), figsize=(4.8 * len(panels), 3.6 * len(models)),
                                     squeeze=False, layout="constrained")
            for row, model in zip(axes, models):
                for ax, (value, floor_value, label, log) in zip(row, panels):
                    summary = isolation_summary(conditions[conditions.model == model], value)
                    F.plot_isolation(ax, summary, noise_floor(noise, model, floor_value), label, log)
                    ax.set_title(f"Isolation: {model}")
            out["fig5_isolation"] = fig
    return out


def _fmt_ci(mean, low, high, digits=3) -> str:
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def report_markdown(conditions: pd.DataFrame, attention: pd.DataFrame | None, figure_files: list[str],
                    title: str = "Prefix contamination run", noise: pd.DataFrame | None = None) -> str:
    """A GitHub-readable report: summary table, C minus B, top heads, figure links."""
    conds = _baseline(conditions)
    lines = [f"# {title}", ""]
    lines.append(f"Models: {', '.join(map(str, conds.model.unique()))}. Prompts: {conds.prompt_id.nunique()}. "
                 f"Conditions: {len(conditions)}. Intervals are 95% bootstrap CIs over prompts.")
    lines += ["", "## Output drift (normalized edit distance to A) by group and prefix length", ""]
    summary = stats.drift_summary(conds, "norm_edit_distance")
    kl = stats.drift_summary(conds, "output_kl")
    att_kl = stats.drift_summary(conds, "attn_kl_mean") if conds.attn_kl_mean.notna().any() else None
    header = "| model | group | prefix length | prompts | edit distance (norm.) | output KL (nats) |"
    header += " attention KL (nats) |" if att_kl is not None else ""
    lines += [header, "|" + " --- |" * (header.count("|") - 1)]
    for i, row in summary[summary.group != "A"].iterrows():
        k = kl.loc[i]
        line = (f"| {row.model} | {row.group} | {row.prefix_len} | {row.n_prompts} | "
                f"{_fmt_ci(row['mean'], row.ci_low, row.ci_high)} | {_fmt_ci(k['mean'], k.ci_low, k.ci_high)} |")
        if att_kl is not None:
            a = att_kl.loc[i]
            line += f" {_fmt_ci(a['mean'], a.ci_low, a.ci_high)} |"
        lines.append(line)
    lines += ["", "## Instruction-like minus neutral (C - B), paired by prompt", "",
              "| model | prefix length | prompts | C - B edit distance | Wilcoxon p |", "| --- | --- | --- | --- | --- |"]
    for _, row in stats.contrast(conds, "norm_edit_distance").iterrows():
        p = "n/a (no differences)" if pd.isna(row.wilcoxon_p) else f"{row.wilcoxon_p:.3g}"
        lines.append(f"| {row.model} | {row.prefix_len} | {row.n_prompts} | "
                     f"{_fmt_ci(row.mean_diff, row.ci_low, row.ci_high)} | {p} |")
    if attention is not None and not attention.empty:
        heads = stats.head_contrasts(_baseline(attention), "kl", "task")
        lines += ["", "## Heads whose drift is larger under C than under B (task rows, one-sided Wilcoxon, "
                  "Benjamini-Hochberg q < 0.05)", ""]
        top = heads[heads.significant].head(10)
        if top.empty:
            lines.append(f"No head passes q < 0.05 ({len(heads)} head tests; smallest q "
                         f"{heads.q.min():.3g}).")
        else:
            lines += ["| model | prefix length | layer | head | mean C - B KL (nats) | q |", "| --- | --- | --- | --- | --- | --- |"]
            for _, row in top.iterrows():
                lines.append(f"| {row.model} | {row.prefix_len} | {row['layer']} | {row['head']} | {row.mean_diff:.4f} | {row.q:.3g} |")
    lines += _noise_and_isolation(conditions, noise)
    if figure_files:
        lines += ["", "## Figures", ""]
        lines += [f"![{Path(f).stem}]({f})" for f in figure_files]
    return "\n".join(lines) + "\n"


def _noise_and_isolation(conditions: pd.DataFrame, noise: pd.DataFrame | None) -> list[str]:
    """Report lines: the noise floor, and each isolation setting's drift measured against it."""
    lines = []
    if noise is not None and not noise.empty:
        lines += ["", "## Noise floor (A against itself)", "",
                  "Drift that numerics alone cause: A rerun in a batch of identical rows (`batch`), and A decoded "
                  "and analysed without the KV cache (`no_cache`). Drift at or below these values is not "
                  "distinguishable from noise.", "",
                  "| model | probe | prompts | max edit distance | max output KL | max attention KL |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for (model, probe), cell in noise.groupby(["model", "probe"], observed=True):
            lines.append(f"| {model} | {probe} | {len(cell)} | {cell.edit_distance.max()} | "
                         f"{cell.output_kl.max():.3g} | {cell.attn_kl_max.max():.3g} |")
    if "isolation" in conditions and conditions.isolation.nunique() > 1:
        lines += ["", "## Isolation", "", "Mean over B and C conditions (per prompt first). \"within floor\" means "
                  "both the edit distance and the attention KL are at or below the largest noise-floor value.", "",
                  "| model | isolation | prefix length | edit distance (norm.) | attention KL (nats) | within floor |",
                  "| --- | --- | --- | --- | --- | --- |"]
        ed = isolation_summary(conditions, "norm_edit_distance")
        has_att = conditions.attn_kl_mean.notna().any()
        kl = isolation_summary(conditions, "attn_kl_mean") if has_att else None
        for i, row in ed.reset_index(drop=True).iterrows():
            k = kl.reset_index(drop=True).loc[i, "mean"] if kl is not None else float("nan")
            f_ed = noise_floor(noise, row.model, "norm_edit_distance")
            f_kl = noise_floor(noise, row.model, "attn_kl_mean")
            within = ("n/a" if f_ed is None else
                      "yes" if row["mean"] <= f_ed and (not has_att or (f_kl is not None and k <= f_kl)) else "no")
            lines.append(f"| {row.model} | {row.setting} | {row.prefix_len} | {row['mean']:.3f} | {k:.3g} | {within} |")
    return lines


def write_outputs(conditions: pd.DataFrame, attention: pd.DataFrame | None, out_dir: Path,
                  title: str = "Prefix contamination run", noise: pd.DataFrame | None = None) -> list[Path]:
    """Write ``out_dir/figures/*.{pdf,png}`` and ``out_dir/report.md``; returns the paths."""
    out_dir = Path(out_dir)
    written = []
    for name, fig in make_figures(conditions, attention, noise).items():
        written += F.save_figure(fig, out_dir / "figures" / name)
    pngs = [str(p.relative_to(out_dir)) for p in written if p.suffix == ".png"]
    report = out_dir / "report.md"
    write_text(report_markdown(conditions, attention, pngs, title, noise), report)
    return written + [report]
