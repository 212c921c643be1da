"""How every number the harness prints is written: one style for every page, table cell and CLI line.

* :func:`num`: ``digits`` significant digits (3 by default), positional from 1e-6 up (trailing
  zeros kept, they are significant: 0.0100, 0.500), whole numbers with thousands separators from
  ``10 ** digits`` up (11,210), scientific only below 1e-6, where a number is rounding-sized
  (4.66e-09); an exact 0 is "0", never "-0".
* :func:`ci`: an estimate and its interval at one precision, the decimals that give the largest of
  the three its significant digits (0.0260 [-0.0449, 0.0970], never 0.02604 [-0.04489, 0.09698]).
* :func:`p_text`: a p- or q-value, two significant digits down to 0.0001 and "< 0.0001" below.
* :func:`count`: a count, with thousands separators; :func:`size`, a quantity that is often whole
  (degrees of freedom, effective units): a count when whole, else :func:`num` (2, 7.43).
* :data:`NOT_ESTIMABLE`: the one word for a quantity the data cannot give (a power with nothing to size
  it by, an interval the design cannot support is said with its reason by :func:`ci`).
"""

from __future__ import annotations

import math

NOT_ESTIMABLE = "not estimable"
MISSING = "n/a"  # a cell that does not apply (no 8th token to compare, say)
P_FLOOR = 1e-4


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (hasattr(v, "__float__") and math.isnan(float(v)))


def _decimals(size: float, digits: int) -> int:
    """Decimals that give a number of magnitude ``size`` its ``digits`` significant digits (one fewer
    where rounding carries it up a digit: 0.09996 is 0.100, not 0.1000)."""
    decimals = max(digits - 1 - math.floor(math.log10(size)), 0)
    if decimals and len(f"{size:.{decimals}f}".replace(".", "").lstrip("0")) > digits:
        decimals -= 1
    return decimals


def _fixed(v: float, decimals: int) -> str:
    text = f"{v:,.{decimals}f}"  # a separator where rounding carries it to 1,000
    return text.lstrip("-") if float(text.replace(",", "")) == 0 else text  # never "-0.000"


def num(v, digits: int = 3) -> str:
    """``v`` in the house style (module docstring); "n/a" for a missing value."""
    if _missing(v):
        return MISSING
    v = float(v)
    if v == 0:
        return "0"
    size = abs(v)
    if size >= 1e15:  # past what a count or a sum of seconds reaches: 1.00e+308, not 309 digits
        return f"{v:.{digits - 1}e}"
    if size >= 10 ** digits:
        return f"{v:,.0f}"
    if size < 1e-6:
        return f"{v:.{digits - 1}e}"
    return _fixed(v, _decimals(size, digits))


def signed(v, digits: int = 3) -> str:
    """:func:`num` with a "+" on a positive number (a difference: +0.0412)."""
    text = num(v, digits)
    return f"+{text}" if not _missing(v) and float(v) > 0 else text


def ci(mean, low, high, digits: int = 3, note: str | None = None) -> str:
    """``mean [low, high]`` at one precision; where the interval is missing, ``mean, no interval
    (note)`` with ``note`` saying why (e.g. "2 prompts"): never a made-up or zero-width interval.
    Beside an interval, ``note`` says what part of the table both are of ("complete crossing of 6
    of 7 prefixes"): the counts printed beside them are the whole table's."""
    if _missing(mean):
        return MISSING
    if _missing(low) or _missing(high):
        why = f" ({note})" if note else ""
        return f"{num(mean, digits)}, no interval{why}"
    if low == high:  # one unit, or every unit alike: a resampled interval has nothing to show
        return f"{num(mean, digits)}, no interval ({note or 'every resample gives the same value'})"
    values = [float(mean), float(low), float(high)]
    largest = max(abs(v) for v in values)
    part = f" ({note})" if note else ""
    if largest < 1e-6 or largest >= 10 ** digits:  # rounding-sized, or whole: each in num's style
        return f"{num(mean, digits)} [{num(low, digits)}, {num(high, digits)}]{part}"
    decimals = _decimals(largest, digits)
    shown = ["0" if v == 0 else _fixed(v, decimals) for v in values]
    return f"{shown[0]} [{shown[1]}, {shown[2]}]{part}"


def p_text(p) -> str:
    """A p- or q-value: two significant digits in :func:`num`'s style (0.0019, 0.00036) and
    "< 0.0001" below 0.0001 (never 3.6e-05 beside 0.0019)."""
    if _missing(p):
        return MISSING
    return f"< {P_FLOOR:.4f}" if float(p) < P_FLOOR else num(p, 2)


def count(n) -> str:
    """A count with thousands separators (11,210)."""
    return MISSING if _missing(n) else f"{int(n):,}"


def size(v) -> str:
    """A quantity that is whole by construction in simple designs (degrees of freedom, effective
    units): :func:`count` when whole, else :func:`num` ("t on 2 df", "7.43 effective units")."""
    if _missing(v):
        return MISSING
    return count(v) if float(v).is_integer() else num(v)
