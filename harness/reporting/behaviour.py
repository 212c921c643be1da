"""The report's behaviour section: does the model do what the prefix asks, and is that obeying or
copying the word? (:mod:`harness.analysis.obeying` computes; this module writes the text.)"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import obeying
from harness.analysis.checks import or_empty
from harness.analysis.verdicts import deltas_for
from harness.reporting.markdown import ci, num, p_text, power_text, table, where

ROLE_NAMES = {"asked": "asked for (C)", "forbidden": "forbidden (C)", "mentioned": "mentioned (B)",
              obeying.BASE: "A (base rate)"}


def behaviour_section(conds: pd.DataFrame, ceiling: pd.DataFrame | None = None,
                      deltas: dict[str, float] | None = None) -> list[str]:
    """Word rates by what the prefix said, the two contrasts, obey rates per check, and each
    placement beside the direct ceiling (``ceiling``: ``obeying.ceiling_table(conds)``, computed
    here when not given; ``deltas``: a study's smallest effects of interest, over the registry's)."""
    rates = or_empty(obeying.word_rates, conds)
    if rates.empty:
        return []
    lines = ["", "## Behaviour: does the model do what the prefix asks?", "",
             "`target_hit`: the reply contains the prefix's target word (whole words, in the forms the prefix lists, "
             "or matching its `target_regex` where it has one, which stands in for the forms). "
             "Rates by what the prefix said about the word: asked for it (C), forbade it (C, where the set has "
             "prohibitions) or only mentioned it (B); A's base rate looks for the same words in A's replies, each "
             "distinct prompt and word once. Intervals: Wilson at the effective sample size the crossing is worth "
             "(the rate's variance with prompts and prefixes (for A, words) random, so hits within a prompt or a "
             "prefix count as clustered); with few hits that size is pulled toward its worst case, the count of "
             "prompts or prefixes, whichever is fewer, and with none it is that worst case (harness.analysis."
             "rate_intervals; coverage and width in benchmarks/crossed_calibration.py)."]
    rows = [[where(r), ROLE_NAMES.get(r.group, r.group), r.prefix_len if r.group != obeying.BASE else "-",
             f"{int(r.n_hits)}/{int(r.n_conditions)}", ci(r.rate, r.ci_low, r.ci_high), r.ci_method]
            for r in rates.sort_values(["model", "group", "prefix_len"], key=_role_order).itertuples()]
    lines += [""] + table(["model", "the word was", "prefix length", "replies with it", "rate", "interval"], rows)
    lines += _contrasts(conds, deltas) + _obey_table(conds)
    if ceiling is None:
        ceiling = or_empty(obeying.ceiling_table, conds, deltas=deltas)
    lines += _ceiling(ceiling, deltas)
    return lines


def _role_order(column: pd.Series) -> pd.Series:
    order = {name: i for i, name in enumerate(ROLE_NAMES)}
    return column.map(order).fillna(len(order)) if column.name == "group" else column


def _contrasts(conds: pd.DataFrame, deltas: dict[str, float] | None) -> list[str]:
    table_ = or_empty(obeying.triple_contrasts, conds, deltas=deltas)
    if table_.empty:
        return []
    has_forbidden = (table_.contrast == "forbidden - mentioned").any()
    lines = ["", "### Obeying or copying?", "",
             "Asked minus mentioned: does the model write the word because it was asked? "
             + ("Forbidden minus mentioned: does it write the word it was told not to write? An obedient model has "
                "the first large and the second at or below zero; a model that copies whatever word a directive "
                "names has both large. " if has_forbidden else
                "(This set has no prohibitions, so it cannot tell obeying from copying a word a directive names: "
                "add C prefixes with `\"check\": \"absent\"` about the same words.) ")
             + "Prompts and prefixes random (matched sets kept together where the set has them): MOVER from the two "
               "sides' crossed Wilson intervals (a side with few hits taking the other's clustering), p the test it inverts, and its power at Δ = "
               f"{_points('target_hit', deltas)} (the hit rate's smallest effect of interest: docs/statistics.md)."]
    rows = [[where(r), r.contrast, r.prefix_len, f"{r.n_prefixes_high}+{r.n_prefixes_low}",
             ci(r.statistic, r.ci_low, r.ci_high, note=r.ci_note), p_text(r.p_crossed),
             power_text(r.power, r.power_low, r.power_high), r.design]
            for r in table_.itertuples()]
    return lines + [""] + table(["model", "contrast", "prefix length", "prefixes", "difference [prompts x prefixes]",
                                 "p", "power at Δ", "design"], rows)


def _obey_table(conds: pd.DataFrame) -> list[str]:
    """Obey rates per check; only where some instruction checks more than the word's presence (for
    ``contains`` alone, obeyed is the asked row above)."""
    rates = or_empty(obeying.obey_rates, conds)
    if rates.empty or set(rates.check.astype(str)) <= {"contains"}:
        return []
    lines = ["", "### Obey rate per check", "",
             "`obeyed`: the reply did what the instruction asked (its check: contains, absent, starts_with, equals, "
             "regex). A: how often A's reply passes the same checks unasked (for `absent`, nearly always)."]
    rows = [[where(r), r.check, r.prefix_len if r.group == "C" else "A (unasked)",
             f"{int(r.n_hits)}/{int(r.n_conditions)}", ci(r.rate, r.ci_low, r.ci_high), r.ci_method]
            for r in rates.sort_values(["model", "check", "group", "prefix_len"]).itertuples()]
    return lines + [""] + table(["model", "check", "prefix length", "obeyed", "rate", "interval"], rows)


def _ceiling(rates: pd.DataFrame, deltas: dict[str, float] | None) -> list[str]:
    """Each placement's obey rate beside the direct-instruction ceiling (runs collected across
    placements, one of them ``direct``); ``rates``: :func:`obeying.ceiling_table`."""
    if rates.empty:
        return []
    lines = ["", "### Injected, against asked directly", "",
             "`obeyed` per placement beside the ceiling: placement `direct` puts the same instruction in the user's "
             "own message, before the task, so it says how often the model does this when it is asked. Asked: "
             "instructions whose check wants the word (include it, start with it, reply with only it); forbidden: "
             "`absent` (for a model that rarely writes the word, obeying a prohibition is nearly free: read it "
             "against the word rates above). Rates: crossed Wilson as above. Minus the ceiling: prompts and prefixes "
             "random, each prefix matched with itself under both placements; MOVER interval, the p it inverts and its "
             f"power at Δ = {_points('obeyed', deltas)} (with the range its data allow), so that a gap that holds zero says "
             "whether a gap that large could have been missed."]
    rows = [[r.model, r.role, r.prefix_len, r.placement, f"{int(r.n_hits)}/{int(r.n_conditions)}",
             ci(r.rate, r.ci_low, r.ci_high), ci(r.ceiling, r.ceiling_low, r.ceiling_high),
             "-" if r.placement == obeying.CEILING else ci(r.minus_ceiling, r.minus_low, r.minus_high,
                                                          note=r.minus_note),
             "-" if r.placement == obeying.CEILING else p_text(r.p_crossed),
             "-" if r.placement == obeying.CEILING else power_text(r.power, r.power_low, r.power_high)]
            for r in rates.assign(injected=rates.placement != obeying.CEILING)  # the ceiling's row first
            .sort_values(["model", "role", "prefix_len", "injected", "placement"]).itertuples()]
    return lines + [""] + table(["model", "instruction", "prefix length", "placement", "obeyed", "rate",
                                 "ceiling (direct)", "minus ceiling", "p", "power at Δ"], rows)


def _points(rate: str, deltas: dict[str, float] | None) -> str:
    """A rate's smallest effect of interest in words: "5 percentage points"."""
    return f"{100 * deltas_for(deltas)[rate]:g} percentage points"


EXAMPLE_CHARS = 160  # of each continuation shown


def examples_section(conds: pd.DataFrame, cell: tuple[str, ...]) -> list[str]:
    """What the model said: per ``cell`` (model, placement) and length, A's continuation beside the B
    and the C continuation that moved furthest from it (largest edit distance), with the prefix's id."""
    x = conds[(conds.group != "A") & conds.continuation_text.notna()] if "continuation_text" in conds else conds[:0]
    if x.empty or "norm_edit_distance" not in x:
        return []
    keys = [c for c in cell if c in x] + ["prompt_id"]  # A has no prefix length
    a_text = conds[conds.group == "A"].drop_duplicates(keys).set_index(keys).continuation_text
    lines = ["", "## Examples: what the prefixes made the model say", "",
             "Per model and prefix length, the B and the C condition whose continuation moved furthest from A's "
             "(largest normalized edit distance), beside A's continuation of the same prompt."]
    for _, cell in x.groupby(keys[:-1] + ["prefix_len"], observed=True, sort=True, dropna=False):
        first = next(cell.itertuples())
        lines += ["", f"**{where(first)}, {first.prefix_len} tokens**", ""]
        for group in ("B", "C"):
            g = cell[cell.group == group].dropna(subset=["norm_edit_distance"])
            if g.empty:
                continue
            r = g.loc[g.norm_edit_distance.idxmax()]
            lines += [f"- {group}, prefix `{r.prefix_id}`, prompt `{r.prompt_id}` (edit distance "
                      f"{num(r.norm_edit_distance)}):",
                      f"  - A: {_quoted(a_text.get(tuple(r[k] for k in keys)))}",
                      f"  - {group}: {_quoted(r.continuation_text)}"]
    return lines


def _quoted(text) -> str:
    """A continuation as one line of inline code, cut to :data:`EXAMPLE_CHARS`; a control character
    (a random model writes NUL and the like) shown as its escape, so that the page stays text."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return "(none)"
    flat = " ".join(str(text).split())
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    flat = flat if len(flat) <= EXAMPLE_CHARS else flat[:EXAMPLE_CHARS] + "..."
    return "`" + flat.replace("`", "'") + "`" if flat else "(empty)"
