"""Markdown building blocks of the reports: numbers, intervals, p-values and tables as text."""

from __future__ import annotations

import pandas as pd


def num(v, digits: int = 3) -> str:
    """Fixed decimals for ordinary values, significant digits for small ones (never "-0.000")."""
    if v is None or pd.isna(v):
        return "n/a"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}" if abs(v) < 10 ** -(digits - 1) else f"{v:.{digits}f}"


def ci(mean, low, high, digits=3, note: str | None = None) -> str:
    """``mean [low, high]``; where the interval is missing, ``mean, no interval (note)`` with ``note``
    saying why (e.g. "2 prompts"): never a made-up or zero-width interval."""
    if mean is None or pd.isna(mean):
        return "n/a"
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        why = f" ({note})" if note else ""
        return f"{num(mean, digits)}, no interval{why}"
    if low == high:  # one unit, or every unit alike: a resampled interval has nothing to show
        return f"{num(mean, digits)}, no interval ({note or 'every resample gives the same value'})"
    return f"{num(mean, digits)} [{num(low, digits)}, {num(high, digits)}]"


def p_text(p) -> str:
    return "n/a" if p is None or pd.isna(p) else f"{p:.2g}"


def table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows]
