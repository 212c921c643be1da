"""Markdown building blocks of the reports: numbers, intervals, p-values and tables as text."""

from __future__ import annotations

import math

import pandas as pd


def num(v, digits: int = 3) -> str:
    """``digits`` significant digits, in one style for every number of a report: positional from
    1e-6 up (trailing zeros kept, they are significant: 0.0100, 0.500, 0.00000725), whole numbers
    from ``10 ** digits`` up, and scientific only below 1e-6, where a number is rounding-sized
    (4.66e-09); never "-0"."""
    if v is None or pd.isna(v):
        return "n/a"
    if v == 0:
        return "0"
    size = abs(v)
    if size >= 10 ** digits:
        return f"{v:.0f}"
    if size < 1e-6:
        return f"{v:.{digits - 1}e}"
    decimals = max(digits - 1 - math.floor(math.log10(size)), 0)
    text = f"{v:.{decimals}f}"
    if len(text.lstrip("-").replace(".", "").lstrip("0")) > digits:  # rounding carried it up a digit
        text = f"{v:.{max(decimals - 1, 0)}f}"
    return text


def where(r) -> str:
    """A row's model, with its placement where it has one ("SmolLM2 (system)"): what tells apart the
    rows of runs collected across placements."""
    placement = getattr(r, "placement", None)
    return f"{r.model}" + (f" ({placement})" if placement not in (None, "raw") and pd.notna(placement) else "")


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
    """A p- or q-value: two significant digits in :func:`num`'s style (0.0019, 0.000036; never
    3.6e-05 beside 0.0019)."""
    return "n/a" if p is None or pd.isna(p) else num(p, 2)


def power_text(power, low=None, high=None) -> str:
    """A power with the range its data allow where there is one: "0.34 (range 0.03 to 0.72)"; the
    range alone ("n/a (range 0.05 to 0.61)") where no point power can be stated."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return num(power, 2)
    return f"{num(power, 2)} (range {num(low, 2)} to {num(high, 2)})"


def null_power(r) -> str:
    """What a row whose interval holds zero could have missed: "power 0.14 against one prefix-level
    SD, range 0 to 0.49; too little to call it no difference". Called "likely found" only where the
    whole range its data allow (``power_low``) reaches 0.8, not the point power alone (it rests on
    estimated variance components); the point power where there is no range. Where neither can be
    stated (a rate whose prefix-level SD is estimated at 0: no hit at all, say) it says so."""
    ranged = not pd.isna(r.power_low)
    if not ranged and pd.isna(r.power):
        return ("power not estimable: the prefix-level SD is estimated at 0, so there is no effect to size it by; "
                "nothing to call it no difference")
    text = f"power {num(r.power, 2)} against one prefix-level SD" + (
        f", range {num(r.power_low, 2)} to {num(r.power_high, 2)}" if ranged else "")
    sure = r.power_low >= 0.8 if ranged else r.power >= 0.8
    return text + ("; a difference that large would likely have been found" if sure else
                   "; too little to call it no difference")


def note_lines(notes) -> list[str]:
    """What the reader said of the runs it read (:mod:`harness.runs.reading`: failed conditions
    left out, settings mixed), as quoted lines under a page's title."""
    return [line for note in notes for line in ("", f"> **Note:** {note}")]


def table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows]
