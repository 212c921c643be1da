"""The paper figures (docs/report.md). Each ``plot_*`` draws on an Axes it is given and returns
it; :func:`save_figure` is the only place that writes files, and writes them deterministically
(no dates or hash salts in the output), so the same tables give byte-identical PDF and PNG files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from harness.analysis.obeying import CEILING

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#000000", "#F0E442"]
GROUP_COLOURS = {"A": "#000000", "B": "#0072B2", "C": "#D55E00"}
GROUP_NAMES = {"A": "A: prompt only", "B": "B: neutral prefix", "C": "C: instruction-like prefix"}
MASS_SOURCES = ("sink", "context", "task", "continuation")
SOURCE_NAMES = {"sink": "sink: position 0, where idle heads rest", "context": "context: other keys before the prefix",
                "task": "task: the prompt's tokens", "continuation": "continuation: A's generated tokens"}
STYLE = {
    "figure.dpi": 100, "savefig.dpi": 200,
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.hashsalt": "harness",
    "pdf.fonttype": 42,
}


def style():
    """A context manager applying the shared figure style."""
    return plt.rc_context(STYLE)


def length_axis(ax, lengths) -> None:
    lengths = sorted(set(int(v) for v in lengths))
    if lengths and min(lengths) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(v) for v in lengths])
    ax.minorticks_off()


def plot_drift_vs_length(ax, summary: pd.DataFrame, ylabel: str = "normalized edit distance to A (0-1)",
                         title: str = "Output drift vs prefix length", ceiling: pd.Series | None = None,
                         value: str = "mean", band: str = "95% bootstrap CI over prompts",
                         bounds: tuple[float, float] | None = (0.0, 1.0)):
    """Figure 1: mean drift vs prefix length, one line per group, 95% CI band; ``ceiling`` (a row
    of :func:`harness.analysis.curves.ceiling`) draws how far unrelated prompts' continuations are apart.
    ``bounds``: the measure's whole range (a fraction's 0 to 1), drawn in full so that a difference
    is seen at its size, not magnified by a cut axis; None for an open-ended measure.

    ``summary``: :func:`harness.analysis.descriptive.drift_summary` output (one model, one isolation)."""
    for group in ("B", "C"):
        cell = summary[summary.group == group].sort_values("prefix_len")
        if cell.empty:
            continue
        x = cell.prefix_len.to_numpy()
        ax.plot(x, cell[value], marker="o", color=GROUP_COLOURS[group], label=GROUP_NAMES[group])
        ax.fill_between(x, cell.ci_low, cell.ci_high, color=GROUP_COLOURS[group], alpha=0.2, linewidth=0)
    if ceiling is not None:
        ax.axhspan(ceiling.ci_low, ceiling.ci_high, color="grey", alpha=0.2, linewidth=0)
        ax.axhline(ceiling["mean"], color="grey", linestyle="--", linewidth=1, label="ceiling: A vs other prompts' A")
    length_axis(ax, summary[summary.group != "A"].prefix_len)
    if bounds is not None:
        ax.set_ylim(bounds[0] - 0.02 * (bounds[1] - bounds[0]), bounds[1] + 0.02 * (bounds[1] - bounds[0]))
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    # below the axes, not over them: the ceiling line runs along the top
    ax.legend(title=f"shaded: {band}", title_fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return ax


def _by_length(ax, cell: pd.DataFrame, x: str, y: str, band: bool = False, step: bool = False) -> None:
    """One line per prefix length (viridis, short to long), with a 95% CI band when asked."""
    lengths = sorted(cell.prefix_len.unique())
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.9, max(len(lengths), 1)))
    for colour, length in zip(colours, lengths):
        line = cell[cell.prefix_len == length].sort_values(x)
        draw = ax.step if step else ax.plot
        draw(line[x], line[y], color=colour, label=f"{length} tokens",
             **({"where": "post"} if step else {"marker": "." if x == "layer" else None}))
        if band:
            ax.fill_between(line[x], line.ci_low, line.ci_high, color=colour, alpha=0.15, linewidth=0,
                            **({"step": "post"} if step else {}))
    if lengths:
        ax.legend(title="prefix length" + ("\nshaded: 95% CI over prompts" if band else ""), fontsize=7,
                  title_fontsize=7)


def plot_layer_profile(ax, profile: pd.DataFrame, group: str, ylabel: str = "mean attention KL(A‖X) (nats)",
                       title: str | None = None):
    """Figure 2 (one panel): mean of a metric by layer for ``group``, one line per prefix length.

    ``profile``: :func:`harness.analysis.descriptive.layer_profile` output."""
    _by_length(ax, profile[profile.group == group], "layer", "mean")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.set_title(title or GROUP_NAMES[group])
    return ax


def plot_head_heatmap(ax, heads: pd.DataFrame, length: int, value: str = "kl", vmax: float | None = None):
    """Figure 3 (one panel): layer x head mean KL at one prefix length (:func:`harness.analysis.descriptive.head_map`)."""
    cell = heads[heads.prefix_len == length]
    grid = cell.pivot_table(index="layer", columns="head", values=value, observed=True)
    ax.set_title(f"prefix {length} tokens")
    if grid.empty:  # another model of the figure ran this length, this one did not
        ax.text(0.5, 0.5, "not run at this length", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        ax.set_axis_off()
        return None
    image = ax.imshow(grid.to_numpy(), aspect="auto", origin="lower", cmap="magma", vmin=0, vmax=vmax,
                      interpolation="nearest")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    # every index up to 16 of them; beyond, evenly thinned so that labels never overprint
    for axis, n in ((ax.xaxis, grid.shape[1]), (ax.yaxis, grid.shape[0])):
        axis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=min(n, 16), integer=True))
    ax.grid(False)
    return image


def plot_mass_sources(ax, sources: pd.DataFrame, group: str = "C"):
    """Figure 4 (right): where the prefix's attention came from, per prefix length: A's attention
    minus X's on position 0 (sink), other keys before the prefix (context), the task and A's
    continuation, stacked (the four sum to the prefix mass). ``sources``: rows with ``prefix_len``,
    ``source`` and ``mean`` for one group."""
    cell = sources[sources.group == group]
    lengths = sorted(cell.prefix_len.unique())
    colours = dict(zip(MASS_SOURCES, OKABE_ITO))
    bottom_pos, bottom_neg = np.zeros(len(lengths)), np.zeros(len(lengths))
    for source in MASS_SOURCES:
        vals = np.array([float(cell[(cell.prefix_len == n) & (cell.source == source)]["mean"].sum()) for n in lengths])
        base = np.where(vals >= 0, bottom_pos, bottom_neg)
        ax.bar(np.arange(len(lengths)), vals, bottom=base, color=colours[source], label=SOURCE_NAMES[source])
        bottom_pos, bottom_neg = bottom_pos + np.clip(vals, 0, None), bottom_neg + np.clip(vals, None, 0)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(lengths)), [str(n) for n in lengths])
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel("attention taken by the prefix (fraction)")
    ax.set_title(f"Where the prefix's attention came from ({group})")
    ax.legend(title="taken from A's attention on", fontsize=7, title_fontsize=7, ncol=2, loc="upper center",
              bbox_to_anchor=(0.5, -0.2))  # below the axes: inside, it covered the shortest length's bar
    return ax


def plot_survival(ax, surv: pd.DataFrame, group: str):
    """Figure 6 (one panel): fraction of ``group``'s conditions whose continuation is still A's
    after k tokens, one line per prefix length, 95% CI band (:func:`harness.analysis.curves.survival`)."""
    _by_length(ax, surv[surv.group == group], "k", "survival", band=True, step=True)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("generated tokens k")
    ax.set_ylabel("still identical to A (fraction)")
    ax.set_title(GROUP_NAMES[group])
    return ax


def plot_step_profile(ax, steps: pd.DataFrame, group: str):
    """Figure 7 (one panel): output KL at each generated step of A's continuation, one line per
    prefix length, 95% CI band over prompts (:func:`harness.analysis.curves.step_profile`)."""
    _by_length(ax, steps[steps.group == group], "step", "mean", band=True)
    ax.set_xlabel("step of A's continuation")
    ax.set_ylabel("output KL(p_A ‖ p_X) (nats)")
    ax.set_title(GROUP_NAMES[group])
    return ax


ROLE_STYLES = {"asked": ("#D55E00", "C asks for the word"), "forbidden": ("#CC79A7", "C forbids the word"),
               "mentioned": ("#0072B2", "B only mentions it")}


def plot_hit_rate(ax, rates: pd.DataFrame):
    """Figure 8: how often the continuation contains the prefix's target word when the prefix asks
    for it, forbids it or only mentions it, per prefix length, with 95% intervals; A's base rate (the
    same words in A's continuations) as a band. ``rates``:
    :func:`harness.analysis.obeying.word_rates` (``group`` holds the role)."""
    for i, (role, (colour, label)) in enumerate(ROLE_STYLES.items()):
        cell = rates[rates.group == role].sort_values("prefix_len")
        if cell.empty:
            continue
        # side by side on the log axis (x 2**-0.08, 1, 2**0.08): equal rates, three lines at 0 say, all show
        x = cell.prefix_len.to_numpy(dtype=float) * 2.0 ** (0.08 * (i - 1))
        ax.errorbar(x, cell.rate, yerr=[cell.rate - cell.ci_low, cell.ci_high - cell.rate], marker="os^"[i],
                    capsize=3, color=colour, label=label)
    base = rates[~rates.group.isin(list(ROLE_STYLES))]
    if not base.empty:
        row = base.iloc[0]
        ax.axhspan(row.ci_low, row.ci_high, color="grey", alpha=0.2, linewidth=0, label="A's 95% CI")
        ax.axhline(row.rate, color="grey", linestyle="--", linewidth=1, label="A: same words, no prefix")
    length_axis(ax, rates[rates.group.isin(list(ROLE_STYLES))].prefix_len)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel("share of replies with the target word")
    ax.set_title("Is the prefix's word in the reply?")
    ax.legend(title="95% intervals, prompts and prefixes random", title_fontsize=7, fontsize=7, ncol=3,
              loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below the axes: it covered whiskers
    return ax


def plot_ceiling(ax, table: pd.DataFrame):
    """Figure 9: how often the instructions that ask for something were obeyed, per placement (the
    direct ceiling first) and prefix length, with 95% intervals; each length's ceiling as a dotted
    line across. ``table``: one model's :func:`harness.analysis.obeying.ceiling_table` rows."""
    asked = table[table.role == "asked"].assign(placement=lambda d: d.placement.astype(str))
    order = sorted(set(asked.placement), key=lambda p: (p != CEILING, p))
    lengths = sorted(set(asked.prefix_len))
    width = 0.6 / max(len(lengths), 1)
    for i, (length, colour) in enumerate(zip(lengths, OKABE_ITO)):
        cells = asked[asked.prefix_len == length].set_index("placement").reindex(order)
        x = np.arange(len(order)) + (i - (len(lengths) - 1) / 2) * width
        ax.errorbar(x, cells.rate, yerr=[cells.rate - cells.ci_low, cells.ci_high - cells.rate], fmt="o", capsize=3,
                    color=colour, label=f"{length} tokens")
        ax.axhline(cells.ceiling.iloc[0], color=colour, linestyle=":", linewidth=1)
    ax.set_xticks(range(len(order)), [f"{p}\n(ceiling)" if p == CEILING else p for p in order])
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("share of asked-for instructions obeyed")
    ax.legend(title="prefix length (dotted: its ceiling); 95% CI: crossed Wilson", title_fontsize=7, fontsize=7)
    return ax


COMPARISON_STYLES = {"C - B": ("#D55E00", "o", "C - B: instruction-like minus neutral"),
                     "B - A": ("#0072B2", "s", "B - A: the neutral prefix's drift from A"),
                     "C - A": ("#999999", "D", "C - A: the instruction-like prefix's drift from A")}


def plot_forest(ax, rows: pd.DataFrame, xlabel: str, delta: float | None = None):
    """Figure 0 (one panel): one measure's estimates with their 95% intervals, a row per prefix
    length and comparison (C - B first and bold), zero marked by a line and, when given, the
    smallest effect of interest ``delta`` by dotted lines at +-delta. A row without an interval
    shows its estimate hollow. ``rows``: :func:`harness.analysis.forest.forest_table` rows of one
    measure, model and placement."""
    lengths = sorted(set(int(v) for v in rows.prefix_len))
    comparisons = [c for c in COMPARISON_STYLES if c in set(rows.comparison)]
    step = 1.0 / (len(comparisons) + 1)
    for j, comparison in enumerate(comparisons):
        colour, marker, label = COMPARISON_STYLES[comparison]
        cell = rows[rows.comparison == comparison]
        y = np.array([lengths.index(int(v)) for v in cell.prefix_len]) + j * step
        est, low, high = (cell[c].to_numpy(dtype=float) for c in ("estimate", "ci_low", "ci_high"))
        has = np.isfinite(low) & np.isfinite(high)
        if has.any():  # no empty series: its legend entry would name intervals that are not drawn
            ax.errorbar(est[has], y[has], xerr=[est[has] - low[has], high[has] - est[has]], fmt=marker,
                        color=colour, capsize=2.5, linewidth=2.0 if j == 0 else 1.0, markersize=5 if j == 0 else 4,
                        label=label)
        if (~has).any():
            ax.plot(est[~has], y[~has], marker, color=colour, markerfacecolor="none", markersize=5,
                    label=f"{comparison}: no interval (see the report)")
    ax.axvline(0, color="black", linewidth=0.9)
    if delta is not None and np.isfinite(delta) and delta > 0:
        for x in (-delta, delta):
            ax.axvline(x, color="black", linestyle=":", linewidth=0.9,
                       label="±Δ, the smallest effect of interest" if x < 0 else None)
    ax.set_yticks([i + step * (len(comparisons) - 1) / 2 for i in range(len(lengths))], [str(n) for n in lengths])
    ax.set_ylim(len(lengths) - 0.5 + step * (len(comparisons) - 1), -0.5)  # shortest length on top, C - B first
    ax.set_ylabel("prefix length (tokens)")
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    return ax


def plot_prefix_mass(ax, summary: pd.DataFrame):
    """Figure 4: attention mass on the prefix vs prefix length, by group (``drift_summary`` of
    ``attn_prefix_mass_mean``)."""
    return plot_drift_vs_length(ax, summary, ylabel="attention on prefix keys (fraction, 0-1)",
                                title="Attention captured by the prefix", bounds=(0.0, 1.0))


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
    length_axis(ax, summary.prefix_len)
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel(ylabel)
    ax.legend(title="isolation", fontsize=7)
    return ax


def save_figure(fig, path_stem: Path) -> list[Path]:
    """Write ``<stem>.png`` (200 dpi) and ``<stem>.pdf`` (vector) atomically, with no timestamps.
    The layout is computed once, for the PNG, and kept for the PDF (the same positions: computing it
    again cost as much as drawing)."""
    from harness.io import atomic_write

    pdf, png = path_stem.with_suffix(".pdf"), path_stem.with_suffix(".png")
    atomic_write(png, lambda tmp: fig.savefig(tmp, format="png", dpi=200, metadata={"Software": None}))
    fig.set_layout_engine("none")
    atomic_write(pdf, lambda tmp: fig.savefig(tmp, format="pdf", metadata={
        "CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}))
    plt.close(fig)
    return [pdf, png]


def _can_fork() -> bool:
    """A second CPU this process may use, on a platform where fork is safe for drawing (Linux)."""
    return sys.platform == "linux" and len(os.sched_getaffinity(0)) > 1


@contextlib.contextmanager
def figures_saved(figures: dict[str, plt.Figure], directory: Path) -> Iterator[list[Path]]:
    """Save each figure as :func:`save_figure` does, to ``directory/<name>``; yields the paths
    (``.pdf`` then ``.png`` per figure, in ``figures``' order), all written once the block exits.

    Drawing is most of a report's fixed cost, and one CPU's work: where a second CPU is free (Linux),
    a forked child saves about half of the figures (the most axes first) while this process saves
    the rest and then runs the ``with`` body. The files are the serial path's, byte for byte. A
    child that fails or is killed leaves its figures to this process, which saves them again (so a
    refused write surfaces here, as the serial path's error)."""
    names = list(figures)
    paths = [p for name in names for p in (directory / f"{name}.pdf", directory / f"{name}.png")]
    load, theirs = [0, 0], []
    for name in sorted(names, key=lambda n: -len(figures[n].axes)):  # greedy halves by axes drawn
        if load[0] <= load[1] and len(names) > 1 and _can_fork():
            load[0] += len(figures[name].axes)
            theirs.append(name)
        else:
            load[1] += len(figures[name].axes)
    child = _fork_saving({n: figures[n] for n in theirs}, directory) if theirs else None
    if child is None:
        theirs = []
    try:
        for name in names:
            if name not in theirs:
                save_figure(figures[name], directory / name)
        yield paths
    except BaseException:
        if child is not None:  # interrupted or failed here: stop the child too (its partial files are temporary)
            _stop(child)
        raise
    failed = child is not None and _reap(child)
    for name in theirs:
        if failed:
            save_figure(figures[name], directory / name)
        else:
            plt.close(figures[name])  # the child saved it; this process's copy is only memory


def _fork_saving(figures: dict[str, plt.Figure], directory: Path) -> int | None:
    """A child process that saves ``figures`` and exits (0 when all were written); None if it
    could not be started."""
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    status = 1
    try:  # the child never returns into the caller's code: os._exit in every case
        signal.signal(signal.SIGTERM, _interrupted)  # stopped: remove the temporary file it was writing
        for name, fig in figures.items():
            save_figure(fig, directory / name)
        status = 0
    except BaseException:  # noqa: BLE001, S110 - the parent saves these figures again and reports the error
        pass
    finally:
        os._exit(status)


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def _reap(pid: int) -> bool:
    """Wait for the saving child; True when it did not save everything (failed or stopped)."""
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        _stop(pid)
        raise
    return os.waitstatus_to_exitcode(status) != 0


def _stop(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
