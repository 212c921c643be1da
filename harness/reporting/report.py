"""The run report (``report.md``): every finding with its number, interval and unit of replication.

Each section states what was resampled. "prompts" intervals (bootstrap over prompts, BCa where it
applies) support claims about *these* prefixes; "prompts x prefixes" intervals and tests (the crossed
design's variance components: :mod:`harness.analysis.lead`) support claims about instruction-like
content *in general*, and the report leads with those, each with the power its design had. Attention is reported as capture and redistribution.
:func:`report_markdown` is pure; :func:`write_outputs` writes ``figures/`` and ``report.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis import curves, descriptive, obeying
from harness.analysis.checks import check_frame, check_same_conditions, check_tables, or_empty
from harness.analysis.forest import contrast_table, forest_table
from harness.analysis.summaries import isolation_summary, noise_level
from harness.analysis.undecoded import UNDECODED, undecoded
from harness.analysis.verdicts import NO_EFFECT, deltas_for, recorded_deltas
from harness.io import figure_files_in, write_parquet, write_text
from harness.measure.noise import margin_floor
from harness.reporting.behaviour import behaviour_section, examples_section
from harness.reporting.edits import keep_if_edited, owned_outputs, stamped
from harness.reporting.figure_names import CEILING, CONTRASTS, FIGURE_NAMES, REPORT
from harness.reporting.figure_set import baseline, make_figures
from harness.reporting.heads_section import heads_section
from harness.reporting.markdown import ci as _ci
from harness.reporting.markdown import heading, power_text, where
from harness.reporting.markdown import num as _num
from harness.reporting.markdown import p_text as _p
from harness.reporting.markdown import table as _table
from harness.reporting.sources import source_lines

SETTING_NOTES = {"mask": "mask (position offset only)", "delimit_control": "delimit_control (same span, no wrapper)"}


def page_arguments_problem(title, figure_files, notes, manifests=()) -> str | None:
    """What is wrong with a page's title, figure files, notes and manifests (None: nothing), for the checks of
    :func:`report_markdown` and of ``H.write_outputs`` (which checks before drawing anything)."""
    if isinstance(figure_files, pd.DataFrame):  # the noise table given third, as load_run returns it
        return ("figure_files (the third argument) must be a list of the figures' paths, got a table: pass the noise "
                "table by name (noise=...)")
    if not isinstance(title, str) or isinstance(figure_files, (str, type(None))) or isinstance(notes, str):
        return (f"title must be text, figure_files a list of the figures' paths (may be empty) and notes a list of "
                f"sentences, got {title!r:.60}, {figure_files!r:.60} and {notes!r:.60}")
    if isinstance(manifests, (str, dict)) or not all(isinstance(m, dict) for m in manifests):
        return f"manifests must be a list of the runs' manifests (dicts, RunTables.manifest), got {manifests!r:.80}"
    return None


def report_markdown(conditions: pd.DataFrame, attention: pd.DataFrame | None, figure_files: list[str],
                    title: str = "Prefix contamination run", noise: pd.DataFrame | None = None,
                    ceiling: pd.DataFrame | None = None, manifests: list[dict] = (), notes: list[str] = (),
                    contrasts: pd.DataFrame | None = None, deltas: dict[str, float] | None = None) -> str:
    """A GitHub-readable report of one run (or several collected ones). ``ceiling``: the
    :func:`~harness.analysis.obeying.ceiling_table` of the baseline conditions, when already computed;
    ``manifests``: the runs' (where the prefixes came from, what was skipped); ``notes``: what the
    reader said of the runs (:func:`harness.runs.reading.reading_notes`); ``contrasts``: the
    :func:`contrast_table`, when already computed (else computed at ``deltas``, the smallest effects of
    interest over the registry's). Figure 0 (in ``figure_files``) follows the summary."""
    check_frame(conditions, "conditions")
    if attention is not None:
        check_frame(attention, "attention")
    if len(conditions) == 0:
        raise ValueError("conditions: the table is empty; give a run's conditions")
    problem = page_arguments_problem(title, figure_files, notes, manifests)
    if problem:
        raise ValueError(problem)
    check_tables(noise=noise, ceiling=ceiling, contrasts=contrasts)
    check_same_conditions(conditions, attention)
    conds = baseline(conditions)
    x = conds[conds.group != "A"]
    lines = [*heading(title, notes), "",
             f"Models: {', '.join(map(str, conds.model.unique()))}. Placement: "
             f"{', '.join(map(str, conds.placement.unique())) if 'placement' in conds else 'raw'}. "
             f"Prompts: {conds.prompt_id.nunique()}. Prefixes: {x[x.group == 'B'].prefix_id.nunique()} neutral (B), "
             f"{x[x.group == 'C'].prefix_id.nunique()} instruction-like (C). Conditions: {len(conditions):,}.", "",
             "Intervals are 95%. *prompts x prefixes*: prompts and prefixes both random (a t interval from the "
             "crossed design's variance components; for rates a Wilson interval at the effective sample size the "
             "crossing is worth, and MOVER for a difference of rates), with the test each interval inverts: these "
             "support claims about instruction-like content in general, and lead. *prompts*: bootstrap over prompts "
             "(BCa where it applies) and Wilcoxon tests paired by prompt: claims about these particular prefixes "
             "only.", *source_lines(list(manifests))]
    contrasts = contrast_table(conds, deltas) if contrasts is None else contrasts
    headline = [f for f in figure_files if Path(f).stem == FIGURE_NAMES[0]]
    lines += _summary(contrasts) + [line for f in headline for line in (
        "", f"![{FIGURE_NAMES[0]}]({f})", "",
        "Figure 0, the answer: C - B per measure and prefix length, with each group's own drift from A (B - A, "
        "C - A) where the measure is a distance from A; 95% intervals with prompts and prefixes random, the "
        "numbers in `contrasts.parquet` and the C - B table below.")]
    lines += examples_section(conds, CELL[:-1])
    behaviour = behaviour_section(conds, ceiling, deltas)
    if not behaviour:
        behaviour = ["", "## Behaviour", "", "No prefix of this run names a target or a check, so there is no obey "
                     "(or word-in-reply) measure: the bank's prefixes say nothing a reply could do. A bank with "
                     "`target` and `check` fields (prefixes=assistant_triples, stories_directives) measures it."]
    lines += behaviour + _output(conds) + _contrasts(conds, contrasts)
    if attention is not None and not attention.empty:
        lines += _attention(conds, obeying.without_mentions(baseline(attention), conds), deltas)
    lines += _noise(conditions, noise) + _isolation(conditions, noise)
    if figure_files:
        lines += ["", "## Figures", ""] + [f"![{Path(f).stem}]({f})" for f in figure_files if f not in headline]
    return "\n".join(lines) + "\n"


def _output(conds: pd.DataFrame) -> list[str]:
    if undecoded(conds):  # decode.path=none: no continuation
        return ["", "## Output drift", "", f"{UNDECODED}: there is no edit distance or survival to report; output "
                "KL along A's continuation is in the C - B table below."]
    summary = descriptive.drift_summary(conds[conds.group != "A"], "norm_edit_distance")
    kl = descriptive.drift_summary(conds[conds.group != "A"], "output_kl")
    surv = curves.survival(conds[conds.group != "A"], max_k=int(conds.n_continuation_tokens.max()))
    lines = ["", "## Output drift", "",
             "Normalized edit distance of the continuation to A's, output KL along A's continuation, and the "
             "share of conditions still identical to A after 1 and 8 generated tokens (means over prompts; "
             "intervals: prompts)."]
    rows = []
    for s_row, k_row in zip(summary.itertuples(), kl.itertuples()):
        cell = surv[(surv.group == s_row.group) & (surv.prefix_len == s_row.prefix_len) & (surv.model == s_row.model)]
        at = {k: cell[cell.k == k] for k in (1, 8)}
        rows.append([s_row.model, s_row.group, s_row.prefix_len, s_row.n_prompts,
                     _ci(s_row.mean, s_row.ci_low, s_row.ci_high), _ci(k_row.mean, k_row.ci_low, k_row.ci_high),
                     *[_ci(c.survival.iloc[0], c.ci_low.iloc[0], c.ci_high.iloc[0]) if len(c) else "n/a"
                       for c in at.values()]])
    lines += [""] + _table(["model", "group", "prefix length", "prompts", "edit distance (norm.)", "output KL (nats)",
                            "identical after 1", "identical after 8"], rows)
    ceiling = or_empty(curves.ceiling, conds)
    for r in ceiling.itertuples():
        lines += ["", f"Ceiling ({r.model}): A's continuations of different prompts are {_ci(r.mean, r.ci_low, r.ci_high)} "
                  f"apart (normalized edit distance, {r.n_prompts} prompts; intervals: prompts). Edit distance close to "
                  "this value says little more than \"different\": the per-step output KL and the survival curves "
                  "(figures 6 and 7) do not saturate."]
    return lines


VERDICT_WORDS = {"supported": "C more", "contradicted": "C less"}  # a C - B row's verdict (two-sided)
FEW_PREFIXES = 10  # below this many prefixes per group, the report says the general interval is wide


# the measures the summary leads with: output (the first present) and attention
SUMMARY_OUTPUT = ("output_kl", "norm_edit_distance")
SUMMARY_ATTENTION = ("attn_capture_mean",)
CELL = ("model", "placement", "prefix_len")  # one summary line, one example block: placements kept apart


def _finding(r) -> str:
    """One sentence on a C - B row: what its prompts x prefixes interval decides at the measure's
    smallest effect of interest Δ (:func:`harness.analysis.verdicts.decide`), with the design's power
    at Δ where the interval holds both zero and Δ."""
    shown = _ci(r.statistic, r.ci_low, r.ci_high, 3, r.ci_note)
    if not (np.isfinite(r.ci_low) and np.isfinite(r.ci_high)):
        return f"{r.measure}: C - B = {shown}, so nothing can be said in general"
    if r.ci_low > 0:
        return f"{r.measure}: C moves it more than B, C - B = {shown} (p {_p(r.p_crossed)})"
    if r.ci_high < 0:
        return f"{r.measure}: C moves it less than B, C - B = {shown} (p {_p(r.p_crossed)})"
    if r.verdict == NO_EFFECT:
        return f"{r.measure}: no difference as large as Δ = {_num(r.delta)}, C - B = {shown} lies within ±Δ"
    return f"{r.measure}: not determined, C - B = {shown} holds both zero and {_at_delta(r)}"


def _at_delta(r) -> str:
    """"a difference of Δ = 0.05 (this design's power at Δ 0.34, range 0.1 to 0.7)"; or, for a measure
    with no Δ, that none is stated."""
    if pd.isna(r.delta):
        return "any difference (no smallest effect of interest is stated for this measure: +claims.delta.<measure>=VALUE)"
    power = power_text(r.power, r.power_low, r.power_high, in_parentheses=True)
    return f"±Δ = ±{_num(r.delta)} (this design's power at Δ {power})"


def _summary(table: pd.DataFrame) -> list[str]:
    """The answer first: per model and prefix length, does C move the model more than B?"""
    if table.empty:
        return []
    lead = [next((v for v in SUMMARY_OUTPUT if v in set(table.value)), None),
            next((v for v in SUMMARY_ATTENTION if v in set(table.value)), None)]
    rows = table[table.value.isin([v for v in lead if v])]
    lines = ["", "## Summary", "",
             "Does the instruction-like prefix (C) move the model more than the neutral one (B)? Per model and prefix "
             "length, with prompts and prefixes random (95% intervals; the C - B table below has every measure):", ""]
    for _, cell in rows.groupby([c for c in CELL if c in rows], observed=True, sort=True, dropna=False):
        findings = "; ".join(_finding(r) for r in cell.itertuples())
        first = next(cell.itertuples())
        lines.append(f"- **{where(first)}, {first.prefix_len} tokens**: {findings}.")
    return lines


def _contrasts(conds: pd.DataFrame, table: pd.DataFrame | None = None) -> list[str]:
    lines = ["", "## Instruction-like minus neutral (C - B) at each length", "",
             "Lead: prompts x prefixes. For a measure, a t interval from the crossed design's variance components, "
             "each kept at or above zero, with Satterthwaite degrees of freedom; for a rate, MOVER from the two "
             "groups' crossed Wilson intervals, a group with few hits taking the other's clustering (harness.analysis.lead; simulated coverage and widths: "
             "benchmarks/crossed_calibration.py, docs/statistics.md). Where the design cannot support an interval "
             "(fewer than 3 prompts or 3 prefixes in a group, or nothing varies) the row says so. p: the test the "
             "interval inverts; q: that p corrected by Benjamini-Hochberg over this table's tests of one model "
             "(measures x lengths). Δ: the measure's smallest effect of interest, in its units (docs/statistics.md, "
             "\"Verdicts at a stated Δ\"; +claims.delta.<measure>=VALUE sets a study's own). Verdict: *C more* or *C "
             "less* where the interval excludes zero, *no effect as large as Δ* where it lies within -Δ to Δ (two "
             "one-sided tests, each at 2.5%), *not determined* where it holds zero and Δ. Power at Δ: of that test at "
             "this design against a C - B difference of Δ, from the variance components; in brackets the "
             "range that power takes with the variance components anywhere in their own 95% intervals (what the "
             "data let it be; harness.analysis.power.design_power_range; a rate's power and range by simulating "
             "its MOVER test on tables from the latent model its table fits, harness.analysis.rate_power). The "
             "prefix permutation test is not printed: with few "
             "prompts and a prompt-by-group interaction it rejects a true null far above its level (0.35 at 5% "
             "in an independent simulation with 3 prompts), so it is no test to read beside these "
             "(harness.analysis.crossed.compare_groups still returns it, as p_perm)."]
    group_sizes = []
    if bool((obeying.roles(conds) == "forbidden").any()):  # C both asks for and forbids the word
        lines.append("Target hit rate is left out: C holds prefixes that ask for the word and prefixes that forbid "
                     "it, so C - B would mix them; see \"Obeying or copying?\" above.")
    table = contrast_table(conds) if table is None else table
    if table.empty:
        missing = sorted({"B", "C"} - set(conds.group.astype(str)))
        return lines + ([f"No C - B: the runs hold no group {' or '.join(missing)}."] if missing else [])
    rows = []
    for r in table.itertuples():
        rows.append([r.measure, where(r), r.prefix_len, f"{r.n_prefixes_high}+{r.n_prefixes_low}",
                     _ci(r.statistic, r.ci_low, r.ci_high, note=r.ci_note), _p(r.p_crossed), _p(r.q_crossed),
                     _num(r.delta), VERDICT_WORDS.get(r.verdict, r.verdict), power_text(r.power, r.power_low, r.power_high),
                     _ci(r.mean_diff, r.ci_low_prompts, r.ci_high_prompts), _p(r.wilcoxon_p)])
        group_sizes += [n for n in (r.n_prefixes_high, r.n_prefixes_low) if n > 0]  # 0: a measure not measured
    fewest = min(group_sizes, default=FEW_PREFIXES)
    if fewest < FEW_PREFIXES:
        lines.append(f"With {fewest} prefix{'es' if fewest != 1 else ''} in a group, the prompts x prefixes interval "
                     "rests on few prefixes: "
                     "it is wide, and a general claim needs more prefixes.")
    holds_zero = (table.ci_low <= 0) & (table.ci_high >= 0)
    disagree = int((holds_zero & (table.wilcoxon_p < 0.05)).sum())
    if disagree:
        lines.append(f"In {disagree} of these rows the prompts-only test finds a difference (Wilcoxon p < 0.05) that "
                     "the prompts x prefixes interval does not: these particular prefixes differ, but the prefixes "
                     "vary so much among themselves that a difference between instruction-like and neutral text "
                     "in general is not established.")
    return lines + [""] + _table(["measure", "model", "prefix length", "prefixes C+B", "C - B [prompts x prefixes]",
                                  "p", "q (within the model)", "Δ", "verdict at Δ", "power at Δ",
                                  "C - B [prompts]", "Wilcoxon p (prompts)"], rows)


def _attention(conds: pd.DataFrame, att: pd.DataFrame, deltas: dict[str, float] | None) -> list[str]:
    lines = ["", "## Attention: capture and redistribution", "",
             "Per condition, means over layers, heads and query rows (segments weighted by their rows): "
             "`prefix_mass` is the share of attention the prefix takes; per query row, capture = -log(1 - mass), "
             "redistribution = KL on the keys A also has, and total KL = capture + redistribution (the columns are "
             "means of those per-row values, so the mean capture is not -log(1 - mean mass)). Intervals: prompts."]
    rows = []
    parts = {v: descriptive.drift_summary(conds[conds.group != "A"], v) for v in
             ("attn_prefix_mass_mean", "attn_capture_mean", "attn_kl_shared_mean", "attn_kl_mean")}
    for rs in zip(*(p.itertuples() for p in parts.values())):
        rows.append([rs[0].model, rs[0].group, rs[0].prefix_len] + [_ci(r.mean, r.ci_low, r.ci_high) for r in rs])
    lines += [""] + _table(["model", "group", "prefix length", "prefix mass", "capture (nats)", "redistribution (nats)",
                            "total KL (nats)"], rows)
    return lines + heads_section(att, deltas_for(deltas))


def _noise(conditions: pd.DataFrame, noise: pd.DataFrame | None) -> list[str]:
    if noise is None or noise.empty:
        return [] if (conditions.group == "A").all() else [
            "", "## Numerical noise floor", "", "No noise table was read for this page (a run made with "
            "`analysis.noise_floor=false`, or on the vLLM backend, has none; in Python, pass "
            "`noise=H.load_noise([...])`): no drift on this page is checked against the run's own numerical noise, so "
            "a difference near zero may be rounding."]
    floor = margin_floor(noise)
    n = len(noise)
    detectable = 1 - 0.05 ** (1 / n)  # a share of conditions that n draws miss with probability 5%
    lowered = sorted({str(c).split("_")[1] for c in noise.get("comparison", pd.Series(dtype=str)).astype(str)
                      if str(c).endswith("_products_vs_alone_exact")})
    how = (f"computed again alone, step by step and with the linear layers at full precision (the sweep multiplied "
           f"them in {', '.join(lowered)}: model.linear_dtype)," if lowered else "computed again alone")
    lines = ["", "## Numerical noise floor", "",
             f"{n} of {int((conditions.group != 'A').sum())} B/C conditions, spread over the run, {how} "
             f"and compared with the sweep's own results of them (batch size {int(noise.batch_size.iloc[0])}); the "
             "differences are what rounding alone does to each number (mean [95% CI over conditions] and the largest "
             "in size, with its sign). "
             f"A numerical effect that touches at least {detectable:.0%} of conditions shows in {n} of them with "
             "probability 0.95; a rarer one may not."]
    rows = []
    for col, label in (("norm_edit_distance", "edit distance (norm.)"), ("output_kl", "output KL (nats)"),
                       ("attn_kl_mean", "attention KL (nats)"), ("logp_max_diff", "largest log-prob difference")):
        vals = noise[col].dropna().to_numpy(dtype=float)
        if len(vals):
            low, high = descriptive.mean_interval(vals)
            largest = vals[np.argmax(np.abs(vals))]  # in size: a rounding-level KL can come out negative
            rows.append([label, _ci(vals.mean(), low, high) if np.ptp(vals) else _num(vals.mean()), _num(largest)])
    lines += [""] + _table(["measure", "mean", "largest"], rows)
    if floor is not None and "near_tie" in conditions:
        ties = conditions[conditions.group != "A"].near_tie.astype("boolean")
        lines += ["", f"A greedy step whose top-1 minus top-2 logit margin is below {_num(floor)} (twice the largest "
                      f"log-prob difference) could flip under this noise: {int(ties.sum())} of {int(ties.notna().sum())} "
                      f"B/C conditions (column `near_tie`) came that close to a tie on A's or their own path."]
    return lines


def _isolation(conditions: pd.DataFrame, noise: pd.DataFrame | None) -> list[str]:
    if "isolation" not in conditions or conditions.isolation.nunique() < 2:
        return []
    lines = ["", "## Isolation", "",
             "Mean over B and C conditions (per prompt first; intervals: prompts). \"within noise\" compares like with "
             "like: the setting's upper 95% bound against the upper 95% bound of the mean noise of the same measure "
             "(batched against alone). `mask` removes attention to the prefix but keeps its position offset; "
             "`delimit` is compared with `delimit_control`, the same total span without the wrapper."]
    has_att = conditions.attn_kl_mean.notna().any()
    ed = isolation_summary(conditions, "norm_edit_distance").reset_index(drop=True)
    kl = isolation_summary(conditions, "attn_kl_mean").reset_index(drop=True) if has_att else None
    rows = []
    for i, r in ed.iterrows():
        k = kl.loc[i] if kl is not None else None
        f_ed, f_kl = noise_level(noise, r.model, "norm_edit_distance"), noise_level(noise, r.model, "attn_kl_mean")
        highs = [r.ci_high] + ([] if k is None else [k.ci_high])
        within = ("n/a" if f_ed is None else "no interval" if not np.isfinite(highs).all() else  # NaN <= floor: "no"
                  "yes" if r.ci_high <= f_ed and (k is None or (f_kl is not None and k.ci_high <= f_kl)) else "no")
        rows.append([r.model, SETTING_NOTES.get(r.setting, r.setting), r.prefix_len, _ci(r["mean"], r.ci_low, r.ci_high),
                     _ci(k["mean"], k.ci_low, k.ci_high) if k is not None else "n/a", within])
    return lines + [""] + _table(["model", "isolation", "prefix length", "edit distance (norm.)", "attention KL (nats)",
                                  "within noise"], rows)


def write_outputs(conditions: pd.DataFrame, attention: pd.DataFrame | None, out_dir: Path,
                  title: str = "Prefix contamination run", noise: pd.DataFrame | None = None,
                  manifests: list[dict] = (), notes: list[str] = (), deltas: dict[str, float] | None = None
                  ) -> list[Path]:
    """Write ``out_dir/figures/*.{pdf,png}``, ``out_dir/report.md``, ``contrasts.parquet`` (the
    numbers of figure 0: :func:`harness.analysis.forest.forest_table`) and ``ceiling.parquet`` when
    the conditions hold a direct placement beside injected ones; returns the paths. ``deltas``: the
    smallest effects of interest the verdicts decide at (default: what the runs' ``manifests``
    recorded, ``claims.delta``, over the registry's)."""
    from harness.reporting import plots as F

    out_dir = Path(out_dir)
    deltas = recorded_deltas(manifests) if deltas is None else deltas
    # the report, figure 9 and ceiling.parquet share it
    ceiling = or_empty(obeying.ceiling_table, baseline(conditions), deltas=deltas)
    contrasts = contrast_table(baseline(conditions), deltas)  # the report's C - B table, figure 0 and contrasts.parquet
    forest = forest_table(baseline(conditions), contrasts)
    figures = make_figures(conditions, attention, noise, ceiling, forest)
    with owned_outputs(out_dir):  # a table or figure changed since the last draw is kept, as an edited page is
        with F.figures_saved(figures, out_dir / "figures") as written:
            pngs = [str(p.relative_to(out_dir)) for p in written if p.suffix == ".png"]
            page = report_markdown(conditions, attention, pngs, title, noise, ceiling, manifests, notes, contrasts,
                                   deltas)
        for stale in set(figure_files_in(out_dir / "figures", FIGURE_NAMES)) - set(written):  # an earlier draw's
            stale.unlink(missing_ok=True)
        report = out_dir / REPORT
        keep_if_edited(report)
        write_text(stamped(page), report)
        written.append(report)
        for name, table in ((CONTRASTS, forest), (CEILING, ceiling)):
            path = out_dir / name
            if not table.empty:  # ceiling: runs collected across placements, one of them direct
                write_parquet(table, path)
                written.append(path)
            else:  # an earlier draw's, from other runs
                path.unlink(missing_ok=True)
    return written
