"""What an interval decides at a stated smallest effect of interest (Δ): the claims' and the
report's verdicts, one rule for both.

An interval that holds zero is not evidence of no effect: it may be wide enough to hold a large one
too. A verdict therefore names the effect it rules out, in the measure's own units: the Δ of the
metric registry (:func:`harness.measure.metrics.default_deltas`, justified in docs/statistics.md)
unless a study states its own (``+claims.delta.<measure>=VALUE`` in a sweep, ``--delta MEASURE=VALUE``
for ``harness claims``). Four outcomes, from a 95% interval whose two ends each miss at most 2.5%:

* **supported**: the interval lies above 0 (the claim's side);
* **contradicted**: it lies below 0;
* **no effect as large as Δ**: its upper end is below Δ (for a one-sided claim: a non-superiority
  test at 2.5%), or for a two-sided comparison (C - B in a report) both ends lie within -Δ to Δ (two
  one-sided tests, each at 2.5%: an equivalence test at the 95% interval, whose error at a true
  difference of exactly Δ is at most 2.5%, not the 5% of the textbook's 90% interval);
* **not determined**: the interval holds both 0 and Δ (or there is no interval).

The error of "no effect as large as Δ" when the truth is exactly Δ is the rate at which the
interval's upper end falls below the truth: the interval's own one-sided miss, which the calibration
suite measures (``benchmarks/crossed_calibration.py``, part verdicts).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.analysis.checks import check_effect
from harness.errors import HarnessError
from harness.measure.metrics import METRICS, default_deltas

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
NO_EFFECT = "no effect as large as Δ"
NOT_DETERMINED = "not determined"
VERDICTS = (SUPPORTED, CONTRADICTED, NO_EFFECT, NOT_DETERMINED)
METRICS_BY_NAME = {m.name: m for m in METRICS}
METRIC_NAMES = frozenset(METRICS_BY_NAME)


def decide(low: float, high: float, delta: float | None, two_sided: bool = False) -> str:
    """The verdict of the interval ``low`` to ``high`` on an effect claimed above 0, at ``delta``
    (module docstring; ``two_sided``: "no effect" needs ``low`` above ``-delta`` too). Without a
    ``delta`` (None, or NaN for a measure without one) the third outcome is not available. Refused: an
    interval whose low end lies above its high end, a Δ at or below 0 or infinite."""
    if low > high:
        raise ValueError(f"an interval's low end must not lie above its high end, got {low!r} to {high!r}")
    if delta is not None and not np.isnan(delta) and not 0 < delta < np.inf:
        raise ValueError(f"delta (the smallest effect of interest) must be a positive finite number, got {delta!r}")
    if not (np.isfinite(low) and np.isfinite(high)):
        return NOT_DETERMINED
    if low > 0:
        return SUPPORTED
    if high < 0:
        return CONTRADICTED
    if delta is not None and high < delta and (not two_sided or low > -delta):
        return NO_EFFECT
    return NOT_DETERMINED


def deltas_for(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The registry's Δ per measure with a study's ``overrides`` ({measure: Δ}) on top; each must name
    a registered measure and be a positive finite number (ValueError naming it otherwise)."""
    out = default_deltas()
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ValueError(f"overrides must map each measure to its Δ, e.g. {{'norm_edit_distance': 0.1}}, got "
                         f"{type(overrides).__name__} {overrides!r:.60}")
    for measure, value in (overrides or {}).items():
        if measure not in METRIC_NAMES:
            raise ValueError(f"{measure!r} is not a measure; the measures with a default Δ are "
                             f"{', '.join(sorted(default_deltas()))}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"the smallest effect of interest of {measure} must be a number, got {value!r}") from None
        if isinstance(value, bool):
            raise ValueError(f"the smallest effect of interest of {measure} must be a number, got {value!r}")
        check_effect(f"the smallest effect of interest of {measure}", number, allow_none=False)
        span = METRICS_BY_NAME[measure].span
        if span is not None and number >= span:
            raise ValueError(f"the smallest effect of interest of {measure} must be below {span:g}, the largest "
                             f"difference it can show (it is a proportion: 0.05 is 5 points), got {value!r}")
        out[str(measure)] = number
    return out


def parse_delta(text: str) -> tuple[str, float]:
    """``MEASURE=VALUE`` (a command line's ``--delta``) as ``(measure, Δ)``; ValueError in words."""
    measure, sep, value = str(text).partition("=")
    if not sep or not measure.strip():
        raise ValueError(f"--delta takes MEASURE=VALUE (e.g. norm_edit_distance=0.1), got {text!r}")
    measure = measure.strip()
    return measure, deltas_for({measure: value.strip()})[measure]


def no_effect_words(noun: str) -> str:
    """The third outcome as a page words it for one claim: "no jump as large as Δ" (the row states Δ)."""
    return f"no {noun} as large as Δ"


def recorded_deltas(manifests, read=None, differing: set | None = None) -> dict[str, float]:
    """The smallest effects of interest the runs were made with (each manifest's ``claims.delta``, or
    a collected set's ``claims_delta``: what its runs recorded); refused (:class:`HarnessError` naming
    the measure) where two runs read together were made at different ones, a run made at the
    registry's default included (a manifest that records neither, of an older version, is not compared).
    ``read``: the measures the caller decides at the runs' Δ (None: all); another measure's Δ that
    differs between the runs is left out, not refused, since nothing reads it (and is added to
    ``differing``, where given)."""
    out: dict[str, float] = {}
    unread: set[str] = set()  # measures outside ``read`` whose Δ differs between the runs
    first: tuple[dict[str, float], set[str]] | None = None  # the first recording run's Δs, and which it set
    for manifest in manifests:
        manifest = manifest or {}
        config = manifest.get("config")
        if isinstance(config, dict):
            recorded = (config.get("claims") or {}).get("delta") or {}
        elif "claims_delta" in manifest:
            recorded = manifest.get("claims_delta") or {}
        else:
            continue
        effective = {**default_deltas(), **recorded}
        if first is not None:
            for measure, value in effective.items():
                if measure not in first[0] or first[0][measure] == value:
                    continue
                if read is not None and measure not in read:
                    unread.add(measure)
                else:
                    said = [f"{v}{'' if m_set else ' (the default)'}" for v, m_set in
                            ((first[0][measure], measure in first[1]), (value, measure in recorded))]
                    raise HarnessError(f"the runs were made with different smallest effects of interest for {measure}: "
                                       f"{said[0]} and {said[1]}; read them apart, or make them with the same "
                                       f"claims.delta.{measure}")
        else:
            first = (effective, set(recorded))
        out.update(recorded)
    if differing is not None:
        differing.update(unread)
    return {m: v for m, v in out.items() if m not in unread}
