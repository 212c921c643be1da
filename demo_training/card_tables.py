"""The markdown pieces the model cards share: hit-rate tables, C - B tables, and table cells.

Both cards (``demo_training.cards``) print each obedience set the same way: a table of hit rates per
group and prefix length with its intervals, and, when measured, a table of C minus B (and F, the
prohibitions, minus B) per length with its interval and permutation p.
"""

from __future__ import annotations


def cell(text) -> str:
    """One markdown table cell: no raw newlines or pipes."""
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def lengths_apart(summary: list[dict]) -> list[str]:
    """Lengths at which C's and B's hit rates are *not* each within the other's interval."""
    cells = {(r["group"], r["prefix_len"]): r for r in summary}
    out = []
    for (group, length), c in sorted(cells.items()):
        b = cells.get(("B", length))
        if group == "C" and b and not (b["ci_low"] <= c["rate"] <= b["ci_high"] and c["ci_low"] <= b["rate"] <= c["ci_high"]):
            out.append(f"{length} tokens")
    return out


def rate_table(summary: list[dict]) -> str:
    """Hit rates per group and prefix length with their intervals (a ``summary`` of ``obedience.summarise``)."""
    # Summaries written before the crossed intervals (no "ci_method") carry Wilson intervals; those
    # written before the Clopper-Pearson rate interval, percentile bootstraps.
    kind = ("Wilson, conditions independent" if not all("ci_method" in r for r in summary) else
            "Wilson at the effective sample size, openings x pairs random" if crossed_wilson(summary) else
            "Clopper-Pearson, openings x pairs random" if clopper_pearson(summary) else "openings x pairs resampled")
    lines = [f"| group | prefix length | hits / n | rate | 95% interval ({kind}) |", "| --- | ---: | ---: | ---: | --- |"]
    names = {"A": "A (no prefix)", "B": "B matched mention", "C": "C directive", "F": "F prohibition (C forbids it)"}
    for r in sorted(summary, key=lambda r: (r["prefix_len"], r["group"])):
        lines.append(f"| {names[r['group']]} | {r['prefix_len']} | {r['hits']} / {r['n']} | {r['rate']:.3f} | "
                     f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}] |")
    return "\n".join(lines)


def clopper_pearson(summary: list[dict]) -> bool:
    """Whether a stored summary's rate intervals are the Clopper-Pearson ones of ``rate_summary``."""
    return bool(summary) and all(str(r.get("ci_method", "")).startswith("Clopper-Pearson") for r in summary)


def crossed_wilson(summary: list[dict]) -> bool:
    """Whether a stored summary's rate intervals are the crossed Wilson ones of ``rate_summary``."""
    return bool(summary) and all(str(r.get("ci_method", "")).startswith("Wilson, crossed") for r in summary)


def mover(contrasts: list[dict]) -> bool:
    """Whether stored C - B contrasts carry the MOVER interval of ``compare_groups`` for rates (or
    none, where too few pairs support one)."""
    methods = [str(r.get("ci_method", "")) for r in contrasts]
    return any(m.startswith("MOVER") for m in methods) and all(m.startswith("MOVER") or m == "none" for m in methods)


def crossed_t(contrasts: list[dict]) -> bool:
    """Whether stored C - B contrasts carry the crossed t interval (older ones: a two-way bootstrap)."""
    return bool(contrasts) and all(r.get("ci_method") == "crossed t" for r in contrasts)


def interval_note(reports: list[dict]) -> str:
    """What the intervals of stored obedience reports are, in a sentence or two, as they were computed."""
    summaries = [r for rep in reports for r in rep["summary"]]
    contrasts = [r for rep in reports for r in rep.get("contrasts", [])]
    rates = ("Wilson at the effective sample size the crossing of openings and pairs is worth (its worst case, the "
             "fewer of the two counts, with no hit or one)" if crossed_wilson(summaries) else
             "Clopper-Pearson at the count of openings or pairs, whichever is fewer (a crossed mean's variance is at "
             "most that of so many independent units; one method for no hit, a few and many; conservative)"
             if clopper_pearson(summaries) else
             "95% percentile bootstrap resampling openings and, independently, pairs; a cell with no hit gets the "
             "exact interval for the scarcer factor's count")
    c_minus_b = ("MOVER from the two groups' crossed Wilson intervals (openings and pairs random)" if mover(contrasts)
                 else "a t interval from the crossed design's own variance estimate (openings and pairs random, "
                 "Satterthwaite degrees of freedom, cut to [-1, 1])" if crossed_t(contrasts) else
                 "paired two-way bootstrap")
    return f"Rates: {rates}. C - B per length: {c_minus_b}, and the permutation p of C/B labels flipped within pairs."


def signed(x: float) -> str:
    """``x`` with its sign, three decimals; zero without one."""
    text = f"{x:+.3f}"
    return "0.000" if text in ("+0.000", "-0.000") else text


def contrast_table(contrasts: list[dict], summary: list[dict]) -> str:
    """C minus B (and F minus B, where measured) per prefix length (``obedience.contrasts``):
    interval, permutation p, pairs."""
    hits: dict = {}  # hits of both sides per contrast and length: with none, the interval says nothing
    for r in summary:
        hits[(r["group"], r["prefix_len"])] = r["hits"]
    kind = ("MOVER, openings x pairs random" if mover(contrasts) else
            "crossed t, openings x pairs random" if crossed_t(contrasts) else "openings x pairs resampled")
    lines = [f"| contrast | prefix length | difference of hit rates | 95% interval ({kind}) | permutation p | pairs |",
             "| --- | ---: | ---: | --- | ---: | ---: |"]
    for r in contrasts:
        name = r.get("contrast", "C - B")
        high = name.split(" - ")[0]
        none = hits.get((high, r["prefix_len"]), 0) + hits.get(("B", r["prefix_len"]), 0) == 0
        interval = (f"no hit in {high} or B" if none else
                    f"no interval ({r.get('ci_note') or 'too few pairs'})" if r["ci_low"] != r["ci_low"] else
                    f"[{signed(r['ci_low'])}, {signed(r['ci_high'])}]")
        lines.append(f"| {name} | {r['prefix_len']} | {signed(r['difference'])} | {interval} | {r['p_perm']:.2g} | "
                     f"{r['n_pairs']} |")
    return "\n".join(lines)


def result_tables(report: dict) -> str:
    """One set's hit-rate table and, when measured, its C - B table (an ``evaluation.obedience_report``)."""
    tables = [rate_table(report["summary"])]
    if report.get("contrasts"):
        tables.append(contrast_table(report["contrasts"], report["summary"]))
    return "\n\n".join(tables)


# What an obedient model is asked to do, on held-out phrasings and words (the cards' verdicts).
TARGETS = ("The targets, on held-out phrasings and words at 32, 64 and 128 tokens: the word written when asked (C) "
           "at least 0.7 of the time, when forbidden (F) at most 0.1 and not above the mention rate, and when only "
           "mentioned (B) at most 0.1.")


def _against_targets(reports: list[dict], lengths) -> tuple[list[str], list[str], bool]:
    """The :data:`TARGETS` cell by cell: the point estimates on the wrong side (shortfalls), the
    interval ends on the wrong side, and whether any set has prohibitions (F)."""
    shortfalls, open_ends, has_f = [], [], False
    for rep in reports:
        cells = {(r["group"], r["prefix_len"]): r for r in rep["summary"]}
        for (group, n), r in sorted(cells.items()):
            if n not in lengths:
                continue
            b = cells.get(("B", n))
            where = f"at {n} tokens on {rep['set']}"
            if group == "C" and r["rate"] < 0.7:
                shortfalls.append(f"C {r['rate']:.3f} {where}")
            if group == "B" and r["rate"] > 0.1:
                shortfalls.append(f"B {r['rate']:.3f} {where}")
            if group == "F":
                has_f = True
                if r["rate"] > 0.1 or (b and r["rate"] > b["rate"]):
                    shortfalls.append(f"F {r['rate']:.3f} {where}" + (f" (B {b['rate']:.3f})" if b else ""))
            if group == "C" and r["ci_low"] < 0.7:
                open_ends.append(f"C's lower end {r['ci_low']:.3f} {where}")
            if group in ("B", "F") and r["ci_high"] > 0.1:
                open_ends.append(f"{group}'s upper end {r['ci_high']:.3f} {where}")
    return shortfalls, open_ends, has_f


def target_shortfalls(reports: list[dict], lengths=(32, 64, 128)) -> list[str]:
    """The cells whose point estimates miss the :data:`TARGETS` (asked >= 0.7, mentioned <= 0.1,
    forbidden <= 0.1 and not above mentioned), in words; empty when all meet them."""
    return _against_targets(reports, lengths)[0]


def target_verdict(reports: list[dict], lengths=(32, 64, 128)) -> str:
    """Whether the test sets' rates meet the :data:`TARGETS`, on the point estimates and on the
    intervals, in words; sets measured before prohibitions existed say that F was not measured."""
    shortfalls, open_ends, has_f = _against_targets(reports, lengths)
    if shortfalls:
        text = "This model falls short: " + "; ".join(shortfalls) + "."
    elif has_f:
        text = "This model meets them on the point estimates."
    else:
        text = ("These sets have no prohibitions (they were measured before prohibitions were), so only the asked and "
                "mentioned targets are tested here: this model meets those on the point estimates, and whether "
                "it writes a forbidden word is not tested by this card.")
    if not shortfalls and open_ends:
        text += (f" The intervals do not settle it everywhere ({len(open_ends)} ends on the wrong side of a target, "
                 f"e.g. {open_ends[0]}): these sets cannot exclude rates on the wrong side.")
    return text


def continuation_tables(named_reports: list[tuple[str, dict]], opening_samples: list[str]) -> str:
    """The cards' two sample sections: a few continuations of the first test set's first pairs for
    each ``(model name, report)``, and the greedy continuations ``opening_samples`` of
    ``corpus.CARD_OPENINGS`` without a prefix."""
    from demo_training.corpus import CARD_OPENINGS

    rows = [f"| {name} | {smp['group']} `{smp['target']}` | {cell(smp['prefix_head'])}... | "
            f"{cell(smp['continuation'])} | {'yes' if smp['hit'] else 'no'} |"
            for name, rep in named_reports for smp in rep["samples"]]
    first = named_reports[0][1]["samples"]
    prompt = first[0]["prompt"] if first else ""
    opening_rows = "\n".join(f"| {cell(o)} | {cell(s)} |" for o, s in zip(CARD_OPENINGS, opening_samples))
    return f"""## Sample continuations (first opening: "{cell(prompt)}", prefix length 64)
| model | group, target | prefix (start) | continuation | hit |
| --- | --- | --- | --- | --- |
{chr(10).join(rows)}

## Greedy continuations of story openings without a prefix
| opening | continuation (greedy, 60 tokens) |
| --- | --- |
{opening_rows}"""


def obedience_sections(ob: dict, base: dict | None, this_label: str, base_label: str) -> str:
    """One section per prefix set of an obedient card: this model's tables, then (with ``base``,
    the baseline measured on the same inputs) the baseline's. A set is counted in matched pairs
    (C, B) or triples (C, F, B), as its contrasts counted them."""
    sections = []
    for i, rep in enumerate(ob["obedience"]):
        role = " (not a test: the split that chooses between checkpoints)" if rep.get("role") == "validation" else ""
        units, kind = rep["n_prefixes"] // 2, "pairs"
        if rep.get("contrasts"):
            units = rep["contrasts"][0]["n_pairs"]
            kind = "triples" if rep["n_prefixes"] == 3 * units else "pairs"
        block = [f"### {rep['set']}: {units} matched {kind} x {rep['n_prompts']} story openings{role}",
                 "", this_label, "", result_tables(rep)]
        if base:
            block += ["", base_label, "", result_tables(base["obedience"][i])]
        sections.append("\n".join(block))
    return "\n\n".join(sections)


def _continues(before: dict, leg: dict) -> bool:
    """Whether ``leg`` only resumed ``before`` after an interruption: same schedule, same command."""
    def plain(command: str) -> str:
        return command.replace(" --resume", "")

    return bool(before.get("command") and leg.get("command") and before.get("steps") == leg.get("steps")
                and plain(before["command"]) == plain(leg["command"]))


def folded_legs(stats: dict) -> list[dict]:
    """The invocations that trained the weights (``stats["legs"]``, from the checkpoint), a leg that
    only resumed an interrupted one (same ``--steps``, same command but for ``--resume``) folded into it."""
    legs: list[dict] = []
    for leg in stats.get("legs") or []:
        if not (legs and _continues(legs[-1], leg)):
            legs.append(leg)
    return legs


def training_legs(stats: dict) -> str:
    """How the weights were trained, when it took more than one invocation of ``harness-train-demo``
    (``stats["legs"]``, from the checkpoint): each leg's steps and command, since a resumed leg
    with another ``--steps`` ran another learning-rate schedule and the final command alone would
    not reproduce the model. A leg that only resumed an interrupted one (same ``--steps``, same
    command but for ``--resume``) is part of it. Empty for one leg, or a ``training.json`` without legs."""
    legs = folded_legs(stats)
    if len(legs) < 2:
        return ""
    rows = []
    for i, leg in enumerate(legs):
        end = legs[i + 1]["start_step"] if i + 1 < len(legs) else leg.get("steps") or stats["settings"]["steps"]
        schedule = f"`--steps {leg['steps']}`" if leg.get("steps") else "not recorded"
        command = f"`{leg['command']}`" if leg.get("command") else "not recorded"
        rows.append(f"| {leg['start_step'] + 1}-{end} | {schedule} | {cell(command)} |")
    return ("Trained in legs (each resumed the checkpoint of the one before; `--steps` sets a leg's cosine "
            "learning-rate schedule, so the final command alone does not reproduce these weights):\n\n"
            "| steps | schedule | command |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n\n")


def earlier_looks_note(stats: dict) -> str:
    """A sentence for a card whose run was written over an earlier measured one
    (``stats["earlier_test_looks"]``, from ``train_demo.earlier_test_looks``): its test numbers
    are not a blind first look. Empty when there was none."""
    looks = stats.get("earlier_test_looks") or []
    if not looks:
        return ""
    steps = ", ".join(f"{look['selected_step']:,}" for look in looks if look.get("selected_step"))
    times = "once" if len(looks) == 1 else f"{len(looks)} times"
    # "weights saved here": a run trained again from step 0 into the same folder (a replay) had
    # other weights at those steps than the ones measured, but its recipe after them was still
    # chosen after seeing their numbers
    return (f" The test sets had been measured before, {times}, on weights saved here before (step {steps}: "
            "earlier versions of this card); the training after that was decided after seeing those "
            "numbers, so the test numbers below are not a blind first look.")
