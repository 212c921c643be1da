"""The paper figures (DESIGN.md section 7). Each ``plot_*`` draws on an Axes it is given and returns
it; :func:`save_figure` is the only place that writes files, and writes them deterministically
(no dates or hash salts in the output), so the same tables give byte-identical PDF and PNG files.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#000000", "#F0E442"]
GROUP_COLOURS = {"A": "#000000", "B": "#0072B2", "C": "#D55E00"}
GROUP_NAMES = {"A": "A: prompt only", "B": "B: neutral prefix", "C": "C: instruction-like prefix"}
STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.hashsalt": "harness",
    "pdf.fonttype": 42,
}


def style():
    """A context manager applying the shared figure style."""
    return plt.rc_context(STYLE)


def _length_axis(ax, lengths) -> None:
    lengths = sorted(set(int(v) for v in lengths))
    if lengths and min(lengths) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(v) for v in lengths])
    ax.minorticks_off()


def plot_drift_vs_length(ax, summary: pd.DataFrame, ylabel: str = "normalized edit distance to A (0-1)",
                         title: str = "Output drift vs prefix length"):
    """Figure 1: mean drift vs prefix length, one line per group, bootstrap 95% CI band.

    ``summary``: :func:`harness.stats.drift_summary` output (one model, one isolation)."""
    for group in ("B", "C"):
        cell = summary[summary.group == group].sort_values("prefix_len")
        if cell.empty:
            continue
        x = cell.prefix_len.to_numpy()
        ax.plot(x, cell["mean"], marker="o", color=GROUP_COLOURS[group], label=GROUP_NAMES[group])
        ax.fill_between(x, cell.ci_low, cell.ci_high, color=GROUP_COLOURS[group], alpha=0.2, linewidth=0)
    _length_axis(ax, summary[summary.group != "A"].prefix_len)
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(title="shaded: 95% bootstrap CI over prompts", title_fontsize=7)
    return ax


def plot_layer_profile(ax, profile: pd.DataFrame, group: str, ylabel: str = "mean attention KL(A‖X) (nats)"):
    """Figure 2 (one panel): mean KL by layer for ``group``, one line per prefix length.

    ``profile``: :func:`harness.stats.layer_profile` output."""
    cell = profile[profile.group == group]
    lengths = sorted(cell.prefix_len.unique())
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.9, max(len(lengths), 1)))
    for colour, length in zip(colours, lengths):
        line = cell[cell.prefix_len == length].sort_values("layer")
        ax.plot(line.layer, line["mean"], marker=".", color=colour, label=f"{length} tokens")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.set_title(GROUP_NAMES[group])
    if lengths:
        ax.legend(title="prefix length")
    return ax


def plot_head_heatmap(ax, heads: pd.DataFrame, length: int, value: str = "kl", vmax: float | None = None):
    """Figure 3 (one panel): layer x head mean KL at one prefix length (:func:`harness.stats.head_map`)."""
    cell = heads[heads.prefix_len == length]
    grid = cell.pivot_table(index="layer", columns="head", values=value, observed=True)
    image = ax.imshow(grid.to_numpy(), aspect="auto", origin="lower", cmap="magma", vmin=0, vmax=vmax,
                      interpolation="nearest")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"prefix {length} tokens")
    ax.set_xticks(range(grid.shape[1]))
    ax.set_yticks(range(grid.shape[0]))
    ax.grid(False)
    return image


def plot_prefix_mass(ax, summary: pd.DataFrame):
    """Figure 4: attention mass on the prefix vs prefix length, by group (``drift_summary`` of
    ``attn_prefix_mass_mean``)."""
    return plot_drift_vs_length(ax, summary, ylabel="attention on prefix keys (fraction, 0-1)",
                                title="Attention captured by the prefix")


def plot_isolation(ax, summary: pd.DataFrame, floor: float | None, ylabel: str, log: bool = False):
    """Figure 5 (one panel): drift per isolation setting vs prefix length, B and C pooled, with the
    measured noise floor drawn as a band. ``summary``: columns ``setting``, ``prefix_len``, ``mean``."""
    settings = list(dict.fromkeys(summary.setting))
    for colour, setting in zip(OKABE_ITO * 2, settings):
        line = summary[summary.setting == setting].sort_values("prefix_len")
        ax.plot(line.prefix_len, line["mean"], marker="o", color=colour, label=setting)
    if floor is not None and np.isfinite(floor):
        ax.axhspan(0, floor, color="grey", alpha=0.25, label="noise floor (A vs A)")
        ax.axhline(floor, color="grey", linestyle="--", linewidth=1)
    if log:
        ax.set_yscale("symlog", linthresh=1e-8)
        ax.set_ylim(bottom=0)  # divergences are >= 0; tiny negatives are rounding
    _length_axis(ax, summary.prefix_len)
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel(ylabel)
    ax.legend(title="isolation", fontsize=7)
    return ax


def save_figure(fig, path_stem: Path) -> list[Path]:
    """Write ``<stem>.pdf`` (vector) and ``<stem>.png`` (200 dpi) atomically, with no timestamps."""
    from .tables import atomic_write

    pdf, png = path_stem.with_suffix(".pdf"), path_stem.with_suffix(".png")
    atomic_write(pdf, lambda tmp: fig.savefig(tmp, format="pdf", metadata={
        "CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}))
    atomic_write(png, lambda tmp: fig.savefig(tmp, format="png", dpi=200, metadata={"Software": None}))
    plt.close(fig)
    return [pdf, png]
