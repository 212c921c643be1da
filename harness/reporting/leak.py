"""The page and figure of ``harness cache-timing`` (:mod:`harness.runs.cache_timing`): what a shared
prefix cache tells another tenant, per isolation setting and prefix length, from the leak table of
:func:`harness.analysis.leak.leak_table`. :func:`plot_leak` draws on an Axes it is given;
:func:`write_leak_outputs` writes ``leak.md`` and ``figures/fig_leak.{png,pdf}``."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from harness.reporting.edits import write_page
from harness.reporting.markdown import ci, heading, num, table
from harness.reporting.plots import OKABE_ITO, length_axis, save_figure, style

SETTING_NAMES = {"none": "no salt (one shared cache)", "same_salt": "one salt for both tenants",
                 "different_salts": "a salt per tenant", "per_tenant_cache": "an engine per tenant"}
SETTING_COLOURS = dict(zip(SETTING_NAMES, (OKABE_ITO[3], OKABE_ITO[0], OKABE_ITO[4], OKABE_ITO[2])))


def leak_markdown(leak: pd.DataFrame, invariant: dict, facts: dict, notes=()) -> str:
    """``leak.md``: what the cache tells another tenant, per setting and length, with intervals;
    ``facts``: the engine (vllm, dtype), model, trials and block size the run recorded."""
    block = facts.get("block_size")
    lines = [*heading("What a shared prefix cache tells another tenant", notes), "",
             f"Engine: vLLM {facts.get('vllm')} ({facts.get('dtype')}) serving {facts.get('model')}, prefix caching "
             f"on ({'blocks of ' + str(block) + ' tokens' if block else 'its own block size'}); "
             f"{facts.get('trials')} trials per cell in one random order (`harness cache-timing`; per_tenant_cache, "
             "the attacker on an engine of its own, runs after the other settings, in an order of its own, with its "
             "second engine started only then). AUROC: P(a fresh candidate's time to first token exceeds a cached "
             "one's), 0.5 when the time says nothing; 95% interval: Newcombe's score interval; power: of the test "
             "of 0.5 against a true AUROC of 0.6. The unit of replication is the trial (one victim prefix and two "
             "probes).", ""]
    rows = [[r.setting, f"{r.prefix_len:,}", f"{r.trials:,}", num(r.median_s_cached), num(r.median_s_fresh),
             f"{num(r.cached_share_cached, 2)} / {num(r.cached_share_fresh, 2)}", ci(r.auroc, r.auroc_lo, r.auroc_hi),
             num(r.power_at_0_6, 2)] for r in leak.itertuples()]
    lines += table(["setting", "prefix tokens", "trials", "median s, cached", "median s, fresh",
                    "served from cache (cached / fresh)", "AUROC [95% CI]", "power at 0.6"], rows)
    if invariant.get("compared"):
        lines += ["", f"Invariant: a request served with its prefix from another tenant's cache continued exactly as "
                      f"when computed afresh in {invariant['identical']:,} of {invariant['compared']:,} trials."]
    lines += ["", "![AUROC against prefix length](figures/fig_leak.png)"]
    return "\n".join(lines) + "\n"


def plot_leak(ax, leak: pd.DataFrame, block_size: int | None = None):
    """AUROC against prefix length, one colour per setting, 95% intervals as bars. Only whole cache
    blocks are shared, so lengths below ``block_size`` and from it up are not joined: a line across
    the block boundary would draw a slope where the engine has a step."""
    cells = list(leak.groupby("setting", sort=False))
    for i, (setting, cell) in enumerate(cells):
        cell = cell.sort_values("prefix_len")
        colour = SETTING_COLOURS.get(setting, OKABE_ITO[6])
        x = cell.prefix_len * 2 ** (0.05 * (i - (len(cells) - 1) / 2))  # side by side, so no bar hides another
        ax.errorbar(x, cell.auroc, yerr=[cell.auroc - cell.auroc_lo, cell.auroc_hi - cell.auroc],
                    color=colour, marker="o", ms=4, lw=0, elinewidth=1, capsize=2,
                    label=SETTING_NAMES.get(setting, setting))
        below = (cell.prefix_len < block_size).to_numpy() if block_size else None
        for side in [slice(None)] if below is None else [below, ~below]:
            ax.plot(x[side], cell.auroc[side], color=colour, lw=1.2)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--", label="nothing told (0.5)")
    if block_size:  # just below the block: a prefix of exactly one block is shared
        ax.axvline(block_size * 2 ** -0.15, color="black", lw=0.8, ls=":",
                   label=f"one cache block ({block_size} tokens):\nshorter prefixes are never shared")
    length_axis(ax, leak.prefix_len.unique())
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel("AUROC: fresh prefix slower than cached")
    ax.set_ylim(0, 1.02)
    ax.set_title("What a shared prefix cache's timing tells another tenant\n(bars: 95% score intervals over trials)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    return ax


def write_leak_outputs(out: Path, leak: pd.DataFrame, invariant: dict, facts: dict, notes=()) -> list[Path]:
    """``leak.md`` and ``figures/fig_leak.{pdf,png}`` under ``out``; returns the files written."""
    (out / "figures").mkdir(parents=True, exist_ok=True)
    with style():
        fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
        plot_leak(ax, leak, facts.get("block_size"))
        written = save_figure(fig, out / "figures" / "fig_leak")
    write_page(leak_markdown(leak, invariant, facts, notes), out / "leak.md")
    return [*written, out / "leak.md"]
