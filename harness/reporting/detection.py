"""The detector page (``harness detect``): every detector's AUROC and true-positive rate at 1% and
0.1% false positives, with the false-positive rate each threshold really gave on the testing half,
per model, placement, length, source and split, and a ROC figure with a logarithmic FPR axis. Numbers
come from :mod:`harness.analysis.detection`; this module draws (on Axes it is given) and writes."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.analysis.detection import DETECTORS, MIN_NEGATIVES
from harness.reporting.edits import write_page
from harness.reporting.markdown import ci, heading, num, table
from harness.reporting.plots import OKABE_ITO, save_figure, style

NAMES = {"focus_score": "focus score (Attention Tracker)", "capture_heads": "capture, chosen heads (harness)",
         "capture_all": "capture, all heads"}
COLOURS = dict(zip(DETECTORS, OKABE_ITO[3:]))
SPLITS = ("halves", "held-out source", "held-out templates", "over-defence")


def _rate(r, rate: str, label: str) -> str:
    note = getattr(r, f"note_{label}", "")
    if isinstance(note, str) and note:
        return "too few negatives"
    value = getattr(r, f"{rate}_at_{label}_fpr")
    if not np.isfinite(value):
        return "not estimable"
    return ci(value, getattr(r, f"{rate}_at_{label}_fpr_low"), getattr(r, f"{rate}_at_{label}_fpr_high"))


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def detector_rows(cell: pd.DataFrame) -> list[list]:
    """One model x placement x length: a row per split, source and detector (over-defence apart)."""
    rows = []
    order = cell.assign(_s=cell.split.map(SPLITS.index), _d=cell.detector.map(DETECTORS.index))
    for r in order[order.split != "over-defence"].sort_values(["_s", "chosen_on", "source", "_d"]).itertuples():
        rows.append([r.split, r.chosen_on if r.chosen_on == r.source else f"{r.chosen_on} -> {r.source}",
                     NAMES[r.detector], ci(r.auroc, getattr(r, "auroc_low", np.nan), getattr(r, "auroc_high", np.nan),
                                             note=_text(getattr(r, "auroc_note", None))),
                     _rate(r, "tpr", "1pct"), _rate(r, "fpr", "1pct"), _rate(r, "tpr", "01pct"),
                     _rate(r, "fpr", "01pct"), f"{r.n_positive:,} / {r.n_negative:,}"])
    return rows


def _chosen_by(detector: str, k: float) -> str:
    """How a detector's heads were chosen, in words: its ``k`` is an SD multiplier for Attention
    Tracker's important heads and a head count for the capture heads (one column held both as "k")."""
    if not np.isfinite(k):
        return "-"
    return f"B - C gap past {num(k)} SD" if detector == "focus_score" else f"top {int(k)} by C - B"


def overdefence_rows(cell: pd.DataFrame) -> list[list]:
    """One model x placement x length: the share of benign instruction-like inputs each detector
    flags at the 1% threshold it got on a source's choosing half."""
    over = cell[cell.split == "over-defence"].assign(_d=lambda d: d.detector.map(DETECTORS.index))
    return [[r.chosen_on, r.source, NAMES[r.detector], _rate(r, "fpr", "1pct"), f"{r.n_negative:,}"]
            for r in over.sort_values(["chosen_on", "_d"]).itertuples()]


def plot_roc(ax, scores: pd.DataFrame):
    """ROC curves of the testing half, one per detector, FPR on a log axis (from 1/negatives)."""
    test = scores[scores.split == "test"]
    floor = 1.0
    for detector in DETECTORS:
        d = test[test.detector == detector]
        pos, neg = d[d.group == "C"].score.to_numpy(), d[d.group == "B"].score.to_numpy()
        if not len(pos) or not len(neg):
            continue
        thresholds = np.unique(np.concatenate([pos, neg]))[::-1]
        tpr = np.array([np.mean(pos >= t) for t in thresholds])
        fpr = np.array([np.mean(neg >= t) for t in thresholds])
        keep = fpr > 0
        floor = min(floor, 1.0 / len(neg))
        ax.step(fpr[keep], tpr[keep], where="post", color=COLOURS[detector], label=NAMES[detector], lw=1.3)
    for x in (0.01, 0.001):
        ax.axvline(x, color="0.75", lw=0.8, ls="--", zorder=0)
    ax.set_xscale("log")
    ax.set_xlim(min(floor, 1e-3), 1)
    ticks = [t for t in (1e-4, 1e-3, 1e-2, 1e-1, 1.0) if t >= min(floor, 1e-3)]
    ax.set_xticks(ticks, [f"{100 * t:g}%" for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("false-positive rate on benign inputs (B, log scale)")
    ax.set_ylabel("true-positive rate on attacks (C)")
    ax.legend(fontsize=7, loc="lower right")
    return ax


def detector_page(detector: pd.DataFrame, heads: pd.DataFrame, runs: list[str], figures: list[str],
                  notes: list[str] = ()) -> str:
    lines = [*heading("Would the field's detector catch it?", notes), "",
             "Attention-based detectors on the runs' inputs (one forward pass each, no continuation): Attention "
             "Tracker's focus score (Hung et al., NAACL Findings 2025, implemented from the paper: the last input "
             "token's attention on the task's tokens over that on task + prefix, averaged over heads chosen on the "
             "choosing half) beside the harness's capture in heads ranked by C - B capture, and capture over all "
             "heads (docs/detection.md).", "",
             "Runs: " + ", ".join(f"`{r}`" for r in runs) + ".", "",
             "Heads, k and thresholds are chosen on the choosing half only; every number below is on the testing "
             "half (*halves*), on another source's testing half (*held-out source*: chosen on the left, tested on the "
             "right), on the sets of attack templates not chosen on (*held-out templates*), or on benign inputs "
             "that read like instructions (*over-defence*: the share flagged at the 1% threshold). The 1% threshold "
             "is the 99th percentile of the choosing half's benign scores (linear interpolation), the 0.1% one the "
             "99.9th; beside each TPR is the FPR that threshold really gave on the testing half. Intervals are 95% "
             "with prompts and prefixes random (AUROC: crossed bootstrap; rates: crossed Wilson). A threshold needs "
             f"at least {MIN_NEGATIVES['1pct']:,} benign inputs in each half at 1% and {MIN_NEGATIVES['01pct']:,} at "
             "0.1% (at 0.1% fewer leave its 99.9th percentile to the top one or two scores, and its realised rate "
             "unmeasurable); below that the row says \"too few negatives\" (the counts are in the last column).", ""]
    for (model, placement, length), cell in detector.groupby(["model", "placement", "prefix_len"], sort=True):
        lines += [f"## {model} ({placement}), {length} tokens", ""]
        lines += table(["split", "source", "detector", "AUROC", "TPR at 1% FPR", "FPR at the 1% threshold",
                        "TPR at 0.1% FPR", "FPR at the 0.1% threshold", "attacks / benign"], detector_rows(cell))
        over = overdefence_rows(cell)
        if over:
            lines += ["", "Over-defence: benign questions that read like instructions, flagged at each detector's 1% "
                          "threshold:", ""]
            lines += table(["threshold chosen on", "benign source", "detector", "flagged", "inputs"], over)
        lines.append("")
    if not heads.empty:
        lines += ["## The heads each detector chose (choosing half)", ""]
        rows = [[f"{r.model} ({r.placement})", r.prefix_len, r.source, NAMES[r.detector],
                 _chosen_by(r.detector, r.k), "all" if r.heads is None else len(r.heads),
                 "all" if r.heads is None else " ".join(f"L{a}H{b}" for a, b in list(r.heads)[:8])
                 + (" ..." if r.heads is not None and len(r.heads) > 8 else "")]
                for r in heads.itertuples()]
        lines += table(["model", "length", "source", "detector", "chosen by", "heads", "which"], rows)
    lines += ["", "## Figures", ""] + [f"![ROC]({f})" for f in figures]
    return "\n".join(lines) + "\n"


def write_detector_report(detector: pd.DataFrame, scores: pd.DataFrame, heads: pd.DataFrame, out: Path,
                          runs: list[str], notes: list[str] = ()) -> list[Path]:
    """``out/detector.md`` and ``out/figures/detector_roc.{png,pdf}``: one ROC panel per model,
    placement and length (halves split, every source pooled in its panel's title)."""
    out = Path(out)
    written, pngs = [], []
    if not scores.empty:
        style()
        cells = list(scores.groupby(["model", "placement", "prefix_len", "source"], sort=True))
        cols = min(3, len(cells))
        fig, axes = plt.subplots((len(cells) + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.4 * ((len(cells) + cols
                                 - 1) // cols)), squeeze=False, layout="constrained")
        for ax, ((model, placement, length, source), cell) in zip(axes.ravel(), cells):
            plot_roc(ax, cell)
            ax.set_title(f"{model.split('-')[0]} {placement}, {length} tokens, {source}", fontsize=8)
        for ax in axes.ravel()[len(cells):]:
            ax.axis("off")
        written += save_figure(fig, out / "figures" / "detector_roc")
        pngs.append("figures/detector_roc.png")
    write_page(detector_page(detector, heads, runs, pngs, notes), out / "detector.md")
    return [*written, out / "detector.md"]
