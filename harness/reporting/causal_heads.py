"""The causal head test's figure and page: removal and restoration of the C-minus-B effect
against the number of heads, top-k against random-k (heads as a detector: :mod:`harness.reporting.detection`). Numbers
come from :mod:`harness.analysis.causal_heads`; this module only draws and writes."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from harness.analysis.causal_heads import NONE, established
from harness.reporting.edits import write_page
from harness.reporting.markdown import ci, heading, num, table
from harness.reporting.plots import save_figure, style

MEASURE_NAMES = {"target_hit": "prefix's word produced (rate)", "output_kl": "output KL to A (nats/token)",
                 "norm_edit_distance": "edit distance to A (0-1)"}
KIND_STYLE = {"top": ("#D55E00", "top-k (chosen on the other half)"), "random": ("0.4", "random-k, same layers")}


def _per_k(effects: pd.DataFrame, mode: str, kind: str) -> pd.DataFrame:
    """Per k: the mean share over the kind's sets (random draws averaged), with the lowest
    interval end and highest interval end among them."""
    sub = effects[(effects["mode"] == mode) & (effects.kind == kind)]
    return sub.groupby("k").agg(share=("share", "mean"), low=("share_low", "min"), high=("share_high", "max"),
                                effect=("effect", "mean")).reset_index()


def plot_causal(ax_remove, ax_restore, effects: pd.DataFrame, measure: str):
    """Left: share of the unmasked C-minus-B effect removed when the prefix is masked in k heads.
    Right: share of it left when only k heads see the prefix (1 - share removed)."""
    sub = effects[effects.measure == measure]
    full = sub[sub.setting == "mask"]
    if "share" not in sub or sub.share.isna().all():  # the unmasked effect is not established: no share to draw
        for ax in (ax_remove, ax_restore):
            ax.text(0.5, 0.5, f"{MEASURE_NAMES.get(measure, measure)}:\nC - B not established (no interval, or it holds 0),\n"
                    "so no share of it is drawn", ha="center", va="center", transform=ax.transAxes, fontsize=9)
            ax.set_axis_off()
        return
    for ax, mode, restore in ((ax_remove, "mask_heads", False), (ax_restore, "only_heads", True)):
        for kind, (colour, label) in KIND_STYLE.items():
            per_k = _per_k(sub, mode, kind)
            if per_k.empty:
                continue
            y = 1 - per_k.share if restore else per_k.share
            lo, hi = (1 - per_k.high, 1 - per_k.low) if restore else (per_k.low, per_k.high)
            ax.plot(per_k.k, y, marker="o", color=colour, label=label)
            ax.fill_between(per_k.k, lo, hi, color=colour, alpha=0.15, lw=0)
        if not full.empty:
            level = 0.0 if restore else float(full.share.iloc[0])
            ax.axhline(level, color="k", ls="--", lw=0.8, label="every head masked")
        ax.axhline(1.0 if restore else 0.0, color="k", ls=":", lw=0.8, label="no head masked" if not restore else
                   "every head sees it")
        ax.set_xscale("log", base=2)
        ks = sorted(sub.k.dropna().unique())
        ax.set_xticks(ks, [str(int(k)) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("heads in the set (k)")
        ax.set_ylabel("share of the effect left" if restore else "share of the effect removed")
        ax.set_title(f"{MEASURE_NAMES.get(measure, measure)}: "
                     + ("prefix seen by the k heads only" if restore else "prefix masked in the k heads"), fontsize=9)
    ax_remove.legend(fontsize=7)
    ax_restore.legend(fontsize=7)


def effect_rows(effects: pd.DataFrame, measure: str) -> list[list]:
    sub = effects[effects.measure == measure].copy()
    order = {"none": 0, "mask": 1, "mask_heads": 2, "only_heads": 3}
    sub = sub.assign(_o=sub["mode"].map(order).fillna(4), _k=sub.k.fillna(0)).sort_values(["_o", "_k", "head_set"])
    return [[r.setting, ci(r.effect, r.effect_low, r.effect_high, note=getattr(r, "effect_note", None)),
             ci(r.removed, r.removed_low, r.removed_high) if "removed" in sub and pd.notna(r.removed) else "",
             ci(r.share, r.share_low, r.share_high) if "share" in sub and pd.notna(r.share) else ""]
            for r in sub.itertuples()]


def summary_rows(effects: pd.DataFrame, measure: str, mode: str) -> list[list]:
    """Per k: top-k's share (interval) beside the random-k draws' shares."""
    sub = effects[(effects.measure == measure) & (effects["mode"] == mode)]
    rows = []
    for k in sorted(sub.k.dropna().unique()):
        top = sub[(sub.kind == "top") & (sub.k == k)]
        rnd = sub[(sub.kind == "random") & (sub.k == k)]
        if top.empty:
            continue
        t = top.iloc[0]
        rows.append([int(k), ci(t.share, t.share_low, t.share_high),
                     "; ".join(ci(r.share, r.share_low, r.share_high) for r in rnd.itertuples())])
    return rows


def causal_page(effects: pd.DataFrame, ranking: pd.DataFrame, about: dict) -> str:
    n_test = len(about["testing_prefixes"])
    lines = [*heading(f"Do the named heads matter? ({about['model']})", about.get("notes", ())), "",
             f"Run `{about['run']}`, prefix length {about['prefix_len']}. Heads ranked by C minus B "
             f"`{about['rank_by']}` ({about['segment']} rows) on {len(about['choosing_prefixes'])} prefixes; every "
             f"number below is measured on the other {n_test} prefixes x {about['n_prompts']} prompts "
             f"({about['n_conditions'] or 'no new'} conditions, seed {about['seed']}). The halves split the prefixes "
             "only, stratified by group (matched sets kept together); the prompts are the same in both, so the "
             "testing half is new prefixes, not new prompts. `mask_heads(S)`: the prefix's keys masked "
             "for the query heads in S only; `only_heads(S)`: masked in every head but S; `mask`: in every head. "
             "Effect: C minus B (intervals: prompts and prefixes crossed random factors, the report's lead interval). "
             "Removed: "
             "the effect with no head masked minus the effect under the setting (same intervals, on the per-cell "
             "differences). Share: removed / unmasked effect (crossed bootstrap, 95%). Random-k sets draw each "
             "head from the layer of one top-k head.", "",
             "Top heads on the choosing half: " + ", ".join(
                 f"L{int(r.layer)}H{int(r['head'])} ({num(r['diff'])})" for _, r in ranking.head(8).iterrows()), ""]
    if effects.empty:
        lines += ["No causal sweep in this directory (`--ranking-only`): the ranking and the head sets only. Heads "
                  "as a detector: `harness detect` (docs/detection.md).", ""]
    absent = [MEASURE_NAMES[m] for m in MEASURE_NAMES if not effects.empty and m not in set(effects.measure)]
    if absent:
        lines += [f"Not shown: {', '.join(absent)} (not measured for both B and C in this run, so there is no C - B "
                  f"to remove; a word rate needs B prefixes that mention a target word and C prefixes that ask for "
                  f"one).", ""]
    for measure in (effects.measure.unique() if not effects.empty else []):
        name = MEASURE_NAMES.get(measure, measure)
        lines += [f"## {name}", ""]
        unmasked = effects[(effects.measure == measure) & (effects.setting == NONE)]
        if not unmasked.empty and not established(unmasked.iloc[0]):
            r = unmasked.iloc[0]
            why = ("its interval holds 0" if established(r) is False else
                   f"it has no interval ({getattr(r, 'effect_note', '') or 'too few prompts or prefixes'})")
            lines += [f"The unmasked effect C - B is {ci(r.effect, r.effect_low, r.effect_high)}: {why}, so "
                      "there is no established effect here for heads to carry, and a share of it would be a ratio of "
                      "noise (it can pass 1, or turn negative). The shares are left out; the effects and what each "
                      "setting removed are below.", ""]
        else:
            lines += ["Share of the effect removed, masking the prefix in k heads:", ""]
            lines += table(["k", "top-k", "random-k draws"], summary_rows(effects, measure, "mask_heads"))
            restore = summary_rows(effects, measure, "only_heads")
            if restore:
                lines += ["", "Share removed when only k heads see the prefix (1 minus it is what those heads "
                          "restore):", ""]
                lines += table(["k", "top-k", "random-k draws"], restore)
        lines += ["", "<details><summary>Every setting</summary>", ""]
        lines += table(["setting", "effect C - B", "removed", "share removed"], effect_rows(effects, measure))
        lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def write_causal_report(effects: pd.DataFrame, ranking: pd.DataFrame, about: dict, out_dir: Path) -> list[Path]:
    """``causal_heads.md`` and ``figures/causal_heads.{png,pdf}`` (one row of panels per measure)."""
    style()
    measures = list(effects.measure.unique()) if not effects.empty else []
    written = []
    if measures:
        fig, axes = plt.subplots(len(measures), 2, figsize=(10, 3.4 * len(measures)), squeeze=False)
        for row, measure in zip(axes, measures):
            plot_causal(row[0], row[1], effects, measure)
        fig.tight_layout()
        (out_dir / "figures").mkdir(parents=True, exist_ok=True)
        written += save_figure(fig, out_dir / "figures" / "causal_heads")
    page = causal_page(effects, ranking, about)
    write_page(page, out_dir / "causal_heads.md")
    return written + [out_dir / "causal_heads.md"]

