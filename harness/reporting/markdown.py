"""Markdown building blocks of the reports: numbers, intervals, p-values and tables as text."""

from __future__ import annotations

import pandas as pd

from harness.numbers import NOT_ESTIMABLE, ci, count, num, p_text, signed  # noqa: F401  (the reports' one style)


def where(r) -> str:
    """A row's model, with its placement where it has one ("SmolLM2 (system)"): what tells apart the
    rows of runs collected across placements."""
    placement = getattr(r, "placement", None)
    return f"{r.model}" + (f" ({placement})" if placement not in (None, "raw") and pd.notna(placement) else "")


def power_text(power, low=None, high=None, in_parentheses: bool = False) -> str:
    """A power with the range its data allow where there is one: "0.34 (range 0.03 to 0.72)"; the
    range alone ("not estimable (range 0.05 to 0.61)") where no point power can be stated.
    ``in_parentheses``: for text already inside parentheses, "0.34, range 0.03 to 0.72"."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return NOT_ESTIMABLE if power is None or pd.isna(power) else num(power, 2)
    point = NOT_ESTIMABLE if power is None or pd.isna(power) else num(power, 2)
    span = f"range {num(low, 2)} to {num(high, 2)}"
    return f"{point}, {span}" if in_parentheses else f"{point} ({span})"


GLOSSARY = "*The words used here are defined in the harness's glossary, `docs/glossary.md` (its docs site: Glossary).*"


def heading(title: str, notes=()) -> list[str]:
    """A page's first lines: its title, the glossary's place, and :func:`note_lines`."""
    return [f"# {title}", "", GLOSSARY, *note_lines(notes)]


def note_lines(notes) -> list[str]:
    """What the reader said of the runs it read (:mod:`harness.runs.reading`: failed conditions
    left out, settings mixed), as quoted lines under a page's title."""
    return [line for note in notes for line in ("", f"> **Note:** {note}")]


def table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows]
