"""The markdown pieces the model cards share: hit-rate tables, C - B tables, and table cells.

Both cards (``harness.demo.cards``) print each obedience set the same way: a table of hit rates per
group and prefix length with its intervals, and, when measured, a table of C minus B per length
with its paired bootstrap interval and permutation p.
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
    # Summaries written before the crossed intervals (no "ci_method") carry Wilson intervals.
    kind = "openings x pairs resampled" if all("ci_method" in r for r in summary) else "Wilson, conditions independent"
    lines = [f"| group | prefix length | hits / n | rate | 95% interval ({kind}) |", "| --- | ---: | ---: | ---: | --- |"]
    names = {"A": "A (no prefix)", "B": "B matched mention", "C": "C directive"}
    for r in sorted(summary, key=lambda r: (r["prefix_len"], r["group"])):
        lines.append(f"| {names[r['group']]} | {r['prefix_len']} | {r['hits']} / {r['n']} | {r['rate']:.3f} | "
                     f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}] |")
    return "\n".join(lines)


def signed(x: float) -> str:
    """``x`` with its sign, three decimals; zero without one."""
    text = f"{x:+.3f}"
    return "0.000" if text in ("+0.000", "-0.000") else text


def contrast_table(contrasts: list[dict], summary: list[dict]) -> str:
    """C minus B per prefix length (``obedience.c_minus_b_by_length``): interval, permutation p, pairs."""
    hits = {}  # C and B hits together per length: with none, the bootstrap interval is [0, 0] and says nothing
    for r in summary:
        if r["group"] in ("B", "C"):
            hits[r["prefix_len"]] = hits.get(r["prefix_len"], 0) + r["hits"]
    lines = ["| prefix length | C - B hit rate | 95% interval (openings x pairs resampled) | permutation p | pairs |",
             "| ---: | ---: | --- | ---: | ---: |"]
    for r in contrasts:
        interval = ("no hit in C or B" if hits.get(r["prefix_len"]) == 0
                    else f"[{signed(r['ci_low'])}, {signed(r['ci_high'])}]")
        lines.append(f"| {r['prefix_len']} | {signed(r['difference'])} | {interval} | {r['p_perm']:.2g} | "
                     f"{r['n_pairs']} |")
    return "\n".join(lines)


def result_tables(report: dict) -> str:
    """One set's hit-rate table and, when measured, its C - B table (an ``evaluation.obedience_report``)."""
    tables = [rate_table(report["summary"])]
    if report.get("contrasts"):
        tables.append(contrast_table(report["contrasts"], report["summary"]))
    return "\n\n".join(tables)
