"""The public-benchmark page (``harness corpus-report``): does an attack set into a benchmark's
document make the model write the attacker's string more often than a sentence that only names it,
and how far does it move the model beside a benign passage, by template, position and length? With
contamination claim 3 on the benchmark's sets beside the hand-written bank's. Numbers come from
:mod:`harness.analysis.corpora` and :func:`harness.analysis.claims.c_versus_b`; this module draws
(on Axes it is given) and writes (:func:`write_corpus_report`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.analysis import corpora
from harness.analysis.claims import c_versus_b
from harness.analysis.obeying import without_mentions
from harness.errors import HarnessError
from harness.io import write_parquet
from harness.reporting.edits import write_page
from harness.reporting.markdown import ci, heading, p_text, table, where
from harness.reporting.plots import GROUP_COLOURS, OKABE_ITO, save_figure, style
from harness.reporting.sources import source_lines

POSITIONS = ("start", "middle", "end")
ROLE_NAMES = {"attack": "attack (C)", "mention": "mention (B)", "A": "A (base rate)"}


def _order(df: pd.DataFrame) -> pd.DataFrame:
    if "injection_at" in df:
        df = df.assign(_pos=df.injection_at.astype(str).map({p: i for i, p in enumerate(POSITIONS)}))
        return df.sort_values([c for c in ("model", "placement", "_pos", "attack", "prefix_len") if c in df]
                              ).drop(columns="_pos")
    return df


def _rate_rows(rates: pd.DataFrame, contrast: pd.DataFrame) -> list[list]:
    rows = []
    keys = ["model", "placement", "injection_at", "prefix_len"]
    cells = rates[rates.group != "A"].astype({"prefix_len": int})
    for key, cell in cells.groupby(keys, observed=True, sort=False):
        got = {r.group: r for r in cell.itertuples()}
        match = contrast
        for k, v in zip(keys, key):
            match = match[match[k].astype(str) == str(v)]
        diff = next(match.itertuples(), None)
        cells = [f"{r.n_hits}/{r.n_conditions}: {ci(r.rate, r.ci_low, r.ci_high)}" if (r := got.get(role)) else "-"
                 for role in ("attack", "mention")]
        shown = "-" if diff is None else ci(diff.statistic, diff.ci_low, diff.ci_high, 3, diff.ci_note)
        rows.append([f"{key[0]}, {key[1]}", key[2], key[3], *cells, shown, "-" if diff is None else p_text(diff.p_crossed)])
    return rows


def _drift_rows(table_: pd.DataFrame, keys: list[str]) -> list[list]:
    rows = []
    for r in _order(table_).itertuples():
        rows.append([where(r), *[getattr(r, k) for k in keys], r.measure, f"{r.n_prefixes_high}+{r.n_prefixes_low}",
                     ci(r.statistic, r.ci_low, r.ci_high, 3, r.ci_note), p_text(r.p_crossed)])
    return rows


def plot_drift_forest(ax, drift: pd.DataFrame, value: str):
    """C - B of one measure with its interval, one row per setting x position x length, zero marked."""
    d = _order(drift[drift.value == value]).reset_index(drop=True)
    labels = [f"{r.model.split('-')[0]} {r.placement}, {r.injection_at}, {r.prefix_len}" for r in d.itertuples()]
    y = np.arange(len(d))[::-1]
    colours = [OKABE_ITO[POSITIONS.index(str(p)) % len(OKABE_ITO)] for p in d.injection_at]
    ax.axvline(0, color="0.5", lw=0.8, zorder=0)
    ax.errorbar(d.statistic, y, xerr=[d.statistic - d.ci_low, d.ci_high - d.statistic], fmt="none", ecolor="0.3",
                lw=1)
    ax.scatter(d.statistic, y, c=colours, zorder=3, s=18)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel(f"C - B, {d.measure.iloc[0] if len(d) else value}")
    return ax


def plot_attacker_rates(ax, rates: pd.DataFrame):
    """The attacker's string's rate, attack against mention, per setting x position x length."""
    r = _order(rates[rates.group != "A"]).astype({"prefix_len": int}).reset_index(drop=True)
    cells = list(dict.fromkeys(zip(r.model.astype(str), r.placement.astype(str), r.injection_at.astype(str),
                                   r.prefix_len)))
    for offset, (role, colour) in zip((-0.15, 0.15), (("attack", GROUP_COLOURS["C"]), ("mention", GROUP_COLOURS["B"]))):
        sub = r[r.group == role]
        at = [cells.index((a, b, c, d)) for a, b, c, d in zip(sub.model.astype(str), sub.placement.astype(str),
                                                              sub.injection_at.astype(str), sub.prefix_len)]
        ax.errorbar(np.array(at) + offset, sub.rate, yerr=[sub.rate - sub.ci_low, sub.ci_high - sub.rate], fmt="o",
                    color=colour, ms=3, lw=1, label=ROLE_NAMES[role])
    ax.set_xticks(range(len(cells)), [f"{m.split('-')[0]} {p}\n{pos}, {n}" for m, p, pos, n in cells], fontsize=6,
                  rotation=90)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("share of replies with the string")
    ax.legend(fontsize=7, loc="upper right")
    return ax


def design_line(conditions: pd.DataFrame) -> str:
    """What the runs hold, from their tables: models and placements, prompts, sets per template,
    positions and lengths."""
    x = corpora.corpus_rows(conditions)
    x = x[x.group.astype(str) != "A"]
    sets = x.drop_duplicates("pair").attack.astype(str).value_counts().sort_index()
    cells = ", ".join(f"{m} ({p})" for m, p in x[["model", "placement"]].drop_duplicates().astype(str).itertuples(
        index=False, name=None))
    return (f"Design: {cells}; {x.prompt_id.nunique()} prompts x {x.pair.nunique()} matched sets ("
            + ", ".join(f"{n} {t}" for t, n in sets.items()) + f") x positions {', '.join(sorted(map(str, x.injection_at.unique()), key=POSITIONS.index))}"
            f" x lengths {', '.join(map(str, sorted(x.prefix_len.unique())))}: {len(conditions):,} conditions.")


def corpus_page(rates, contrast, drift, by_template, claim3, manifests, command: str, design: str = "",
                notes: list[str] = ()) -> str:
    """The markdown page (``notes``: what the reader said of the runs, under the title)."""
    lines = [*heading("Public injection benchmarks: attacks inside documents", notes), "",
             f"Regenerate: `{command}`", "", *source_lines(manifests)[1:], "", design, "",
             "Intervals are 95% with prompts and matched sets both random (crossed; docs/statistics.md). C - B pairs "
             "each attack with the benign passage of its own set; attack - mention pairs it with its own mention "
             "control. p: the test the interval inverts. Where an interval holds zero, its ends are the largest "
             "differences either way that the data leave possible (each end at 97.5% one-sided): a null rules out "
             "nothing beyond them, and nothing inside them."]
    if not rates.empty:
        lines += ["", "## Does the model write the attacker's string?", "",
                  "The share of replies holding the attacker's string (the benchmark's own check), when the span "
                  "holds the attack and when a neutral sentence only names the string. A model that copies what its "
                  "context names has both high; one that obeys has the attack's above the mention's.", ""]
        lines += table(["model, placement", "position", "length", "attack (C)", "mention (B)", "attack - mention",
                        "p"], _rate_rows(rates, contrast))
        base = rates[rates.group == "A"]
        for r in base.itertuples():
            lines += ["", f"A's replies ({r.model}, {r.placement}) hold one of the sets' strings in {r.n_hits} of "
                          f"{r.n_conditions}: {ci(r.rate, r.ci_low, r.ci_high)}."]
    if not drift.empty:
        lines += ["", "## How far does the attack move the model? C - B by position and length", "",
                  "B is the benign passage of the same set: the two differ only inside the span."]
        lines += [""] + table(["model", "position", "length", "measure", "sets C+B", "C - B", "p"],
                              _drift_rows(drift, ["injection_at", "prefix_len"]))
    if not by_template.empty:
        lines += ["", "## C - B by attack template, position and length", "",
                  "The same contrast per template (fewer sets a cell: wider intervals)."]
        lines += [""] + table(["model", "template", "position", "length", "measure", "sets C+B", "C - B", "p"],
                              _drift_rows(by_template, ["attack", "injection_at", "prefix_len"]))
    if not claim3.empty:
        banked = "hand-written bank" in set(claim3.source)
        lines += ["", "## Contamination claim 3 on benchmark sets" + (" beside the hand-written bank" if banked else ""),
                  "", "Claim 3: C drifts systematically more than B (C - B pooled over lengths, and for a benchmark's "
                  "sets over the three positions too; prompts and prefixes random; harness.analysis.claims."
                  "c_versus_b). " + ("*source* says whose prefixes: the bank's C and B texts differ everywhere, a "
                  "benchmark set's only inside the span." if banked else "No hand-written bank's runs were given "
                  "beside them (`--bank RUN ...` adds their rows).")]
        rows = [[r.source, r.model, r.placement, r.measure, ci(r.estimate, r.ci_low, r.ci_high), p_text(r.p),
                 f"**{r.verdict}**", r.n_prompts, r.n_prefixes] for r in claim3.itertuples()]
        lines += [""] + table(["source", "model", "placement", "measure", "C - B", "p", "verdict", "prompts",
                               "prefixes"], rows)
    lines += ["", "## Figures", "", "![C - B by position and length](figures/corpus_drift.png)", "",
              "![The attacker's string: attack against mention](figures/corpus_attacker_rates.png)"]
    return "\n".join(lines) + "\n"


def _claim3(conditions: pd.DataFrame, noise, source: str) -> pd.DataFrame:
    parts = [c_versus_b(without_mentions(conditions), noise, value) for value in ("norm_edit_distance", "attn_kl_mean")
             if value in conditions and conditions[value].notna().any()]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True).assign(source=source) if parts else pd.DataFrame()


def hand_written(bank: pd.DataFrame) -> pd.DataFrame:
    """``bank`` (the conditions of ``--bank``'s runs), refused where a run drew its prefixes from a
    corpus: the page would label it the hand-written bank."""
    if "span_role" in bank and bank.span_role.notna().any():
        raise HarnessError("--bank takes runs of a hand-written prefix bank (prefixes=default, or a file); some of "
                           "these drew their prefixes from a corpus: give those as runs, before --bank")
    return bank


def write_corpus_report(conditions: pd.DataFrame, noise, manifests: list[dict], out: Path, command: str,
                        bank: tuple[pd.DataFrame, object] | None = None, notes: list[str] = ()) -> list[Path]:
    """``out/corpora.md``, its tables (parquet) and figures, from runs drawn from a benchmark
    (``conditions``) and, for claim 3's comparison, runs of a hand-written bank (``bank``:
    conditions and noise)."""
    out = Path(out)
    rates, contrast = corpora.attacker_rates(conditions), corpora.attacker_contrast(conditions)
    drift = corpora.drift_contrasts(conditions)
    by_template = corpora.drift_contrasts(conditions, by=("attack", "injection_at", "prefix_len"),
                                          measures=corpora.DRIFT[:1] + corpora.DRIFT[2:3], power=False)
    name = ", ".join(sorted({str((m.get("prefix_source") or {}).get("corpus")) for m in manifests})) or "corpus"
    claim3 = pd.concat([_claim3(conditions, noise, name),
                        *([] if bank is None else [_claim3(bank[0], bank[1], "hand-written bank")])],
                       ignore_index=True)
    written = []
    for stem, df in (("attacker_rates", rates), ("attacker_contrast", contrast), ("drift", drift),
                     ("drift_by_template", by_template), ("claim3", claim3)):
        if not df.empty:
            write_parquet(df, out / f"{stem}.parquet")
            written.append(out / f"{stem}.parquet")
    style()
    if not drift.empty:
        fig, axes = plt.subplots(1, 2, figsize=(10, 0.22 * len(drift[drift.value == "output_kl"]) + 1.6),
                                 sharey=True, layout="constrained")
        plot_drift_forest(axes[0], drift, "output_kl")
        plot_drift_forest(axes[1], drift, "attn_capture_mean")
        fig.suptitle("C - B: the attack against a benign passage of the same length in the same document "
                     "(95% intervals, prompts and sets random; colour: position)", fontsize=9)
        written += save_figure(fig, out / "figures" / "corpus_drift")
    if not rates.empty:
        fig, ax = plt.subplots(figsize=(10, 3.6), layout="constrained")
        plot_attacker_rates(ax, rates)
        ax.set_title("Replies with the attacker's string: the attack in the span, or a sentence only naming it",
                     fontsize=9)
        written += save_figure(fig, out / "figures" / "corpus_attacker_rates")
    write_page(corpus_page(rates, contrast, drift, by_template, claim3, manifests, command, design_line(conditions),
                           notes),
               out / "corpora.md")
    return [*written, out / "corpora.md"]

