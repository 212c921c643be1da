"""``harness locate``: the prefix-length interval where drift rises fastest.

A coarse sweep over ``locate.coarse`` lengths picks the consecutive pair with the largest rise in
mean drift; bisection then halves that bracket, keeping the half with the larger rise (the halves
have equal width, so this is the steeper half), until it is at most ``locate.resolution`` tokens
wide. Every length evaluated is a full set of B/C conditions on every prompt, so each reported
number has a bootstrap CI over prompts, and the rise across the final interval has a paired CI.

:func:`bisect_steepest` is the pure search, driven by any ``evaluate(length) -> per-prompt drift``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import HarnessError
from .stats import bootstrap_ci

log = logging.getLogger(__name__)


@dataclass
class Interval:
    low: int
    high: int
    rise: float  # mean drift at high minus at low, paired by prompt
    rise_ci: tuple[float, float]


def bisect_steepest(evaluate: Callable[[int], pd.Series], coarse: list[int],
                    resolution: int) -> tuple[Interval, dict[int, pd.Series]]:
    """Search as described in the module docstring. ``evaluate`` returns drift per prompt
    (a Series indexed by prompt id); results are cached, each length is evaluated once."""
    coarse = sorted(set(int(n) for n in coarse))
    if len(coarse) < 2 or coarse[0] <= 0:
        raise HarnessError(f"locate.coarse needs at least two positive lengths, got {coarse}")
    if resolution < 1:
        raise HarnessError(f"locate.resolution must be at least 1, got {resolution}")
    seen: dict[int, pd.Series] = {}

    def mean(n: int) -> float:
        if n not in seen:
            seen[n] = evaluate(n)
            log.info("length %d: mean drift %.4f over %d prompts", n, seen[n].mean(), len(seen[n]))
        return float(seen[n].mean())

    rises = [mean(b) - mean(a) for a, b in zip(coarse, coarse[1:])]
    i = int(np.argmax(rises))
    low, high = coarse[i], coarse[i + 1]
    while high - low > resolution:
        mid = (low + high) // 2
        if mean(mid) - mean(low) >= mean(high) - mean(mid):
            high = mid
        else:
            low = mid
    paired = (seen[high] - seen[low]).dropna()
    return Interval(low, high, float(paired.mean()), bootstrap_ci(paired.to_numpy())), seen


def summary_table(seen: dict[int, pd.Series], interval: Interval, metric: str) -> pd.DataFrame:
    rows = []
    for n in sorted(seen):
        low, high = bootstrap_ci(seen[n].to_numpy())
        rows.append({"prefix_len": n, "metric": metric, "n_prompts": len(seen[n]), "mean": float(seen[n].mean()),
                     "ci_low": low, "ci_high": high, "in_interval": interval.low <= n <= interval.high})
    return pd.DataFrame(rows)
