"""Output-drift metrics against an independent dynamic-programming Levenshtein and hand cases."""

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.measure.metrics import output_drift
from harness.measure.output_metrics import edit_distance, first_divergence, norm_edit_distance

tokens = st.lists(st.integers(min_value=0, max_value=6), max_size=24)


def levenshtein_dp(a, b):
    """Textbook Wagner-Fischer, written independently of rapidfuzz."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@settings(max_examples=300, deadline=None)
@given(tokens, tokens)
def test_edit_distance_matches_dp(a, b):
    assert edit_distance(a, b) == levenshtein_dp(a, b)
    assert 0.0 <= norm_edit_distance(a, b) <= 1.0


@settings(max_examples=300, deadline=None)
@given(tokens, tokens)
def test_first_divergence_is_first_mismatch(a, b):
    i = first_divergence(a, b)
    if a == b:
        assert i is None
    else:
        assert a[:i] == b[:i]
        assert i == min(len(a), len(b)) or a[i] != b[i]


def test_hand_examples():
    # large token ids (beyond a byte) must be compared as whole tokens, not as characters
    assert edit_distance([50256, 11, 13], [50256, 13]) == 1
    assert first_divergence([1, 2, 3], [1, 2, 4]) == 2
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert norm_edit_distance([], []) == 0.0
    assert output_drift([1, 2, 3], [1, 2, 3]) == {
        "edit_distance": 0, "norm_edit_distance": 0.0, "first_divergence": None, "exact_match": True}
    assert output_drift([4, 5], [1, 2, 3])["norm_edit_distance"] == 1.0
