"""Output-drift metrics (docs/concepts.md): small pure functions on token id sequences.

Each is registered in :mod:`harness.measure.metrics`, which computes them all for a condition
(:func:`harness.measure.metrics.output_drift`)."""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein


def edit_distance(y_x: Sequence[int], y_a: Sequence[int]) -> int:
    """Levenshtein distance between two token id sequences (unit costs)."""
    return int(Levenshtein.distance(list(y_x), list(y_a)))


def norm_edit_distance(y_x: Sequence[int], y_a: Sequence[int]) -> float:
    """Edit distance divided by the longer length (0 for two empty sequences)."""
    return edit_distance(y_x, y_a) / max(len(y_x), len(y_a), 1)


def first_divergence(y_x: Sequence[int], y_a: Sequence[int]) -> int | None:
    """First index where the sequences differ (a length difference counts); None if identical."""
    for i, (a, b) in enumerate(zip(y_x, y_a)):
        if a != b:
            return i
    return None if len(y_x) == len(y_a) else min(len(y_x), len(y_a))


def exact_match(y_x: Sequence[int], y_a: Sequence[int]) -> bool:
    """Whether the two sequences are identical."""
    return list(y_x) == list(y_a)
