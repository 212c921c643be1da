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
        drawn = f" ({counts['templates_drawn']} templates among the drawn sets)" if "templates_drawn" in counts else ""
        lines.append(
            f"Prefix source: the public benchmark **{src.get('corpus')}**, read from the installed package "
            f"{src.get('package')} {src.get('version')} ({src.get('licence')}; the sha256 of its {len(src.get('files', {}))} "
            f"files read are in each run's manifest.json): {counts.get('sets_drawn', '?')} matched sets drawn from its "
            f"{counts.get('documents', '?')} documents, {counts.get('templates', '?')} attack templates and "
            f"{counts.get('goals', '?')} goals{drawn}. Each set is one document three times, identical outside one span: the "
            f"attack there (C), a benign passage (B, `span_role` \"benign\") and a neutral sentence naming the "
            f"goal's string (B, `span_role` \"mention\"); `attack` names the set's template. Drift C - B compares "
            f"the attack with the benign passage; the mention control is read against C's word rate (Behaviour).")
        if src.get("dropped"):
            lines.append("Left out while reading it: " + "; ".join(f"{n} x {why}" for why, n in src["dropped"].items())
                         + ".")
    skipped: dict[str, list[dict]] = {}  # the same prefixes left out, by how many at each length
    for m in manifests:
        if m.get("skipped"):
            per = ", ".join(f"{n} at {length} tokens" for length, n in m["skipped"]["prefixes_by_length"].items())
            skipped.setdefault(per, []).append(m["skipped"])
    if skipped:
        runs = "; ".join(f"{per} in {len(found)} run{'s' if len(found) > 1 else ''}" for per, found in skipped.items())
        corpus = any((m.get("prefix_source") or {}).get("corpus") for m in manifests)
        what = "whole matched sets whose span or document does not fit a length" if corpus else \
            "prefixes too short for a length"
        lines.append(f"prefix.too_short=skip left out {what}: {runs} (prefixes, each one condition per prompt), e.g. "
                     f"{next(iter(skipped.values()))[0]['example']}")
    out: list[str] = []
    for line in lines:
        out += ["", line]
    return out
