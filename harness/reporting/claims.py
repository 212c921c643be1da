"""The seed claims' report: one figure per claim and a markdown page that states each claim's
estimate, interval (prompts and prefixes random), verdict and, for claim 3, the power the design
had. Numbers come from :func:`harness.analysis.claims.seed_claims`; this module only draws and
writes (the ``plot_*`` functions draw on an Axes they are given; :func:`write_claims` writes files).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.analysis import claim_curves
from harness.analysis import claims as analysis
from harness.analysis.verdicts import NO_EFFECT, no_effect_words
from harness.io import write_parquet
from harness.measure.metrics import label
from harness.reporting.edits import write_page
from harness.reporting.markdown import heading, num, power_text
from harness.reporting.plots import GROUP_COLOURS, GROUP_NAMES, save_figure, style


def caveat(models: list[str]) -> str:
    """What the verdicts are evidence about: the runs' own models, not the 1-3B models of the seed."""
    return (f"Models: {', '.join(models)}. The verdicts are evidence about these models at the size and precision "
            "they ran at (a quantized model's manifest records its GGUF and quantization types), not about the "
            "1-3B full-precision models the three contamination claims were made for; the shipped hub configs "
            "(qwen2.5-1.5b, "
            "llama-3.2-1b, gemma-2-2b, ...) run the same study on a GPU.")


def precision_note(noise: pd.DataFrame | None) -> str:
    """Where the runs' linear products were lowered (model.linear_dtype), what their noise floors
    measured of it against full precision; empty otherwise."""
    if noise is None or noise.empty or "comparison" not in noise:
        return ""
    lowered = noise[noise.comparison.astype(str).str.endswith("_products_vs_alone_exact")]
    if lowered.empty:
        return ""
    dtypes = sorted({str(c).split("_")[1] for c in lowered.comparison.astype(str)})
    changed = int((lowered.norm_edit_distance.fillna(0) > 0).sum()) if "norm_edit_distance" in lowered else 0
    models = ", ".join(sorted(lowered.model.astype(str).unique()))
    return (f" The linear layers multiplied in {', '.join(dtypes)} (model.linear_dtype) in the runs of {models}; "
            f"their noise floors measured that against full "
            f"precision on {len(lowered)} sampled conditions: attention KL moved by at most "
            f"{num(lowered.attn_kl_mean.max())} nats, output KL by at most {num(lowered.output_kl.max())}, and "
            f"{changed} of {len(lowered)} greedy continuations changed (`noise.parquet` of each run).")


def _cells(df: pd.DataFrame) -> list[tuple[str, str]]:
    return list(df[["model", "placement"]].drop_duplicates().itertuples(index=False, name=None))


def plot_layer_claim(ax, curves: pd.DataFrame, value: str = "kl"):
    """Divergence from A per layer (as a fraction of depth) for B and C, middle third shaded."""
    ax.axvspan(*analysis.MIDDLE, color="0.9", zorder=0, label="middle third")
    for group, sub in curves.groupby("group", observed=True):
        ax.plot(sub.depth, sub[value], marker=".", color=GROUP_COLOURS[group], label=GROUP_NAMES[group])
        ax.fill_between(sub.depth, sub.ci_low, sub.ci_high, color=GROUP_COLOURS[group], alpha=0.2, lw=0)
    ax.set_xlabel("layer, as a fraction of depth")
    ax.set_ylabel({"kl": "attention KL(A‖X), total (nats)", "kl_shared": "redistribution: KL on shared keys (nats)",
                   "capture": "capture: -log(1 - prefix mass) (nats)"}.get(value, f"attention {value} (nats)"))
    ax.set_xlim(0, 1)
    return ax


def plot_length_claim(ax, curves: pd.DataFrame, value: str):
    """Mean drift per prefix length for B and C (log2 axis), the 64 -> 128 step marked."""
    ax.axvspan(64, 128, color="0.9", zorder=0, label="64 to 128 tokens")
    for group, sub in curves.groupby("group", observed=True):
        ax.errorbar(sub.prefix_len, sub[value], yerr=[sub[value] - sub.ci_low, sub.ci_high - sub[value]],
                    marker="o", capsize=3, color=GROUP_COLOURS[group], label=GROUP_NAMES[group])
    ax.set_xscale("log", base=2)
    lengths = sorted(curves.prefix_len.unique())
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel(label(value))
    return ax


def plot_contrast_claim(ax, rows: pd.DataFrame):
    """C minus B per model and placement, with crossed intervals; zero marked."""
    labels = [f"{r.model}\n{r.placement}" for r in rows.itertuples()]
    y = np.arange(len(rows))
    ax.errorbar(rows.estimate, y, xerr=[rows.estimate - rows.ci_low, rows.ci_high - rows.estimate], fmt="o",
                capsize=3, color=GROUP_COLOURS["C"])
    ax.axvline(0, color="0.3", lw=1)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"C minus B: {label(rows.measure.iloc[0])}")
    return ax


def claim_figures(conditions: pd.DataFrame, attention: pd.DataFrame | None, table: pd.DataFrame,
                  n_resamples: int) -> dict[str, plt.Figure]:
    """One figure per claim, a panel per model and placement."""
    cells = _cells(conditions)
    figures = {}
    with style():
        if attention is not None and not attention.empty:
            curves = claim_curves.layer_curves(attention, n_resamples=n_resamples)
            fig, axes = plt.subplots(1, len(cells), figsize=(4.6 * len(cells), 3.4), squeeze=False)
            for ax, (model, placement) in zip(axes[0], cells):
                plot_layer_claim(ax, curves[(curves.model == model) & (curves.placement == placement)])
                ax.set_title(f"{model} ({placement})")
            axes[0][0].legend(loc="best")
            fig.suptitle("Claim 1: a middle-layer peak?")
            fig.tight_layout()
            figures["claim1_layers"] = fig
        value = "attn_kl_mean" if conditions["attn_kl_mean"].notna().any() else "norm_edit_distance"
        curves = claim_curves.length_curves(conditions, value, n_resamples=n_resamples)
        fig, axes = plt.subplots(1, len(cells), figsize=(4.6 * len(cells), 3.4), squeeze=False)
        for ax, (model, placement) in zip(axes[0], cells):
            plot_length_claim(ax, curves[(curves.model == model) & (curves.placement == placement)], value)
            ax.set_title(f"{model} ({placement})")
        axes[0][0].legend(loc="best")
        fig.suptitle("Claim 2: a jump from 64 to 128 tokens?")
        fig.tight_layout()
        figures["claim2_lengths"] = fig
        three = table[table.claim == 3]
        measures = list(dict.fromkeys(three.measure))
        if measures:
            fig, axes = plt.subplots(1, len(measures), figsize=(4.6 * len(measures), 0.6 + 0.7 * len(cells)),
                                     squeeze=False)
            for ax, measure in zip(axes[0], measures):
                plot_contrast_claim(ax, three[three.measure == measure].reset_index(drop=True))
            fig.suptitle("Claim 3: C drifts more than B?")
            fig.tight_layout()
            figures["claim3_c_minus_b"] = fig
    return figures


NOUNS = {1: "peak", 2: "jump", 3: "excess of C over B"}  # what "no effect as large as Δ" is, claim by claim


def _fmt(v, digits: int = 3) -> str:
    return num(v, digits) if v is None or np.isfinite(float(v)) else num(None)


def claims_markdown(table: pd.DataFrame, figure_names: list[str], runs: list[str], models: list[str],
                    n_resamples: int, precision: str = "", notes: list[str] = (),
                    missing: dict[int, str] | None = None, deciding: pd.DataFrame | None = None) -> str:
    """The claims page (``missing``: what the tables lack for each claim, :func:`analysis.missing_for`;
    ``deciding``: what each undecided test would take, :func:`harness.runs.design_cost.deciding_costs`)."""
    lines = [*heading("The three contamination claims, tested", notes), "",
             f"Runs: {', '.join(runs)}. Every interval is a {analysis.CONFIDENCE:.0%} interval in which prompts and "
             "prefixes are both random (crossed random factors), from the crossed design's variance components (each "
             "kept at or above zero) with Satterthwaite degrees of freedom. Claims 1 and 2 compare one part of a "
             "profile with the larger of two others: the interval of the smaller of two contrasts, each side missing "
             "at most 2.5% (conservative when the two are about equal); the detail gives where the profile peaks "
             "(claim 1) or its means and steps (claim 2). Claim 3 is the report's lead interval and the test it "
             "inverts (p). Each measure has a smallest effect of interest, Δ, in its own units (stated in every row; "
             "the defaults and why: docs/statistics.md, \"Verdicts at a stated Δ\"; `--delta MEASURE=VALUE` sets "
             "a study's own). A claim is *supported* when its interval lies on the claim's side of zero, "
             "*contradicted* when it lies on the other side, *no effect as large as Δ* (no peak, no jump, no "
             "difference) when its upper end lies below Δ, and *not determined* when it holds both zero and Δ (or "
             "where the design cannot support an interval: the row says why). Each row also states this design's "
             "power at Δ: the chance its interval clears zero when the truth is exactly Δ, from the variance "
             "components estimated here, with the range it takes with those components at the ends of their 95% "
             "intervals (calibrated in simulation: benchmarks/crossed_calibration.py). The numbers are in "
             "`claims.parquet`.", "",
             caveat(models) + precision, ""]
    for claim, text in analysis.HYPOTHESES.items():
        rows = table[table.claim == claim]
        lines += [f"## Claim {claim}: {text}", ""]
        if rows.empty:
            why = (missing or {}).get(claim) or (
                "no measure of these runs varies between prefixes, so there is nothing to test")
            lines += [f"Not tested: {why}.", ""]
            continue
        statistic = rows.statistic.iloc[0]
        header = ["model", "placement", "measure", f"{statistic}", "interval", "verdict"]
        header += (["p (lead test)"] if claim == 3 else []) + ["Δ", "this design's power at Δ", "prompts x prefixes",
                                                                "detail"]
        lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for r in rows.itertuples():
            interval = (f"{_fmt(r.ci_low)} to {_fmt(r.ci_high)}" if np.isfinite(r.ci_low) and np.isfinite(r.ci_high)
                        else "none")
            verdict = (no_effect_words(NOUNS[claim]) if r.verdict == NO_EFFECT else r.verdict)
            cells = [r.model, r.placement, r.measure, _fmt(r.estimate), interval, f"**{verdict}**"]
            power = power_text(r.power, r.power_low, r.power_high)
            cells += ([_fmt(r.p, 2)] if claim == 3 else []) + [_fmt(r.delta), power, f"{r.n_prompts} x {r.n_prefixes}",
                                                                r.detail]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        name = {1: "claim1_layers", 2: "claim2_lengths", 3: "claim3_c_minus_b"}[claim]
        if name in figure_names:
            lines += ["", f"![claim {claim}](figures/{name}.png)"]
        lines.append("")
    if deciding is not None and not deciding.empty:
        lines += deciding_section(deciding)
    return "\n".join(lines)


def deciding_section(deciding: pd.DataFrame) -> list[str]:
    """The page's section on what each *not determined* test would take to decide (``deciding.parquet``)."""
    lines = ["## What the undecided tests would take", "",
             "For each test left *not determined*: the fewest prompts at which the chance that it ends decided at "
             "its Δ (supported, contradicted or no effect as large as Δ, whatever the truth) reaches 0.8, planned "
             "as `harness plan` plans (the variance components at their 0.85 upper bound), at these runs' prefixes "
             "per group, or at the most the prefix bank holds where prompts alone never reach it (and where even "
             "that never does, the fewest prefixes per group at every prompt of the prompt set); and the minutes a "
             "sweep of that design takes, priced at its run's own measured seconds (per condition, and its "
             "tables, figures and noise floor by what each grows with), on cores it has to itself. `harness plan` "
             "on these runs searches prompts and prefixes together. The numbers are in `deciding.parquet`.", "",
             "| claim | model | placement | measure | prompts x prefixes per group | minutes for the sweep | note |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in deciding.itertuples():
        design = (f"{int(r.n_prompts):,} x {int(r.n_prefixes)}" if pd.notna(r.n_prompts) else "")
        minutes = num(r.minutes) if pd.notna(r.minutes) else ""  # 0.398, not "0"
        lines.append(f"| {r.claim} | {r.model} | {r.placement} | {r.measure} | {design} | {minutes} | {r.note} |")
    return [*lines, ""]


def write_claims(conditions: pd.DataFrame, attention: pd.DataFrame | None, noise: pd.DataFrame | None,
                 out_dir: Path, runs: list[str], n_resamples: int = analysis.N_RESAMPLES,
                 notes: list[str] = (), deltas: dict[str, float] | None = None,
                 deciding: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> list[Path]:
    """Compute the claims, and write ``claims.parquet``, ``claims.md`` and ``figures/claim*`` under
    ``out_dir`` (``notes``: what the reader said of the runs, under the title; ``deltas``: a study's
    smallest effects of interest, on top of the registry's; ``deciding``: from the claims table, what
    each undecided test would take, written to ``deciding.parquet`` and the page's last section)."""
    out_dir = Path(out_dir)
    table = analysis.seed_claims(conditions, attention, noise, n_resamples=n_resamples, deltas=deltas)
    written = [out_dir / "claims.parquet"]
    write_parquet(table, written[0])
    costs = deciding(table) if deciding is not None else None
    if costs is not None:  # written when empty too: a page rerun with every test decided leaves no stale costs
        written.append(out_dir / "deciding.parquet")
        write_parquet(costs, written[-1])
    figures = claim_figures(conditions, attention, table, n_resamples)
    for name, fig in figures.items():
        written += save_figure(fig, out_dir / "figures" / name)
        plt.close(fig)
    models = sorted(conditions.model.astype(str).unique())
    write_page(claims_markdown(table, list(figures), runs, models, n_resamples, precision_note(noise), notes,
                               {c: analysis.missing_for(c, conditions, attention) for c in analysis.HYPOTHESES},
                               costs),
               out_dir / "claims.md")
    return [*written, out_dir / "claims.md"]
