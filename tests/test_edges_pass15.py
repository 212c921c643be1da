"""The fifteenth adversarial pass's last cases (issue 67), found on the main of 2026-12-06: the
behaviour tables of the analysis API answered a table they could not rate with an empty frame
(#38-#41), and the API counted a condition twice when a user concatenated a run's table with
itself or with an overlapping run's (#79-#82). The pass's other cases are tested beside the code
they changed."""

from __future__ import annotations

import pandas as pd
import pytest

import harness as H
from harness.analysis import obeying
from tests.analysis.test_obeying import triples


def plain_run() -> pd.DataFrame:
    """A run without targets: A, B and C rows of two prompts, no target word anywhere."""
    rows = []
    for p in ("p0", "p1"):
        rows.append({"model": "m", "prompt_id": p, "group": "A", "prefix_id": None, "prefix_len": 0,
                     "placement": "raw", "isolation": "none", "norm_edit_distance": 0.0, "target_hit": None,
                     "obeyed": None})
        for group in ("B", "C"):
            for k in range(3):
                rows.append({"model": "m", "prompt_id": p, "group": group, "prefix_id": f"{group}{k}", "prefix_len": 8,
                             "placement": "raw", "isolation": "none", "norm_edit_distance": 0.1 * k + (group == "C"),
                             "target_hit": None, "obeyed": None})
    df = pd.DataFrame(rows)
    for col in ("target_hit", "obeyed"):
        df[col] = df[col].astype("boolean")
    return df


@pytest.mark.parametrize("table, first", [
    (H.word_rates, "these conditions hold no row to rate: 0 asked, 0 forbidden, 0 mentioned (of 14 rows, 0 with a "
                   "target word); word rates need"),
    (H.triple_contrasts, "a contrast needs C prefixes asking for (or forbidding) a word and B prefixes mentioning one"),
    (H.obey_rates, "obeyed is empty in all 14 rows"),
    (H.ceiling_table, "no C row of these conditions has an obey result"),
])
def test_a_behaviour_table_on_a_run_without_targets_says_why_it_has_no_rows(table, first):
    """#38-#41: each returned an empty frame without a word, which a notebook reads as 'no hits'."""
    with pytest.raises(ValueError) as e:
        table(plain_run())
    assert first in str(e.value) and "\n" not in str(e.value)
    assert obeying.or_empty(table, plain_run()).empty  # the report leaves the section out instead


def test_a_contrast_without_mentions_names_what_the_table_holds():
    """Only C rows with targets: no mentioned side to read them against."""
    asked_only = triples(copier=True).query("group == 'C'")
    with pytest.raises(ValueError, match=r"these conditions hold 12 asked, 12 forbidden, 0 mentioned"):
        H.triple_contrasts(asked_only)


@pytest.mark.parametrize("call", [
    lambda df: H.compare_groups(df, "norm_edit_distance", high="C", low="B"),
    lambda df: H.drift_summary(df, "norm_edit_distance"),
    lambda df: H.word_rates(df),
])
def test_a_table_holding_a_condition_twice_is_refused(call):
    """#79-#82: pd.concat([run.conditions, run.conditions]) halved every interval's width (each
    condition counted twice as another observation) without a word."""
    one = triples(copier=True).assign(norm_edit_distance=0.5)
    call(one)  # a table of one copy each is fine
    with pytest.raises(ValueError, match=r"holds 36 row\(s\) repeating another row exactly .* H.load_runs"):
        call(pd.concat([one, one], ignore_index=True))


def test_copies_that_differ_in_a_result_are_kept():
    """Runs of mixed settings read on purpose keep one copy per setting whose result differs
    (load_runs(..., allow_mixed_settings=True)): those are not repeats."""
    one = triples(copier=True).assign(norm_edit_distance=0.5)
    other = one.assign(norm_edit_distance=0.25)
    assert not H.compare_groups(pd.concat([one, other], ignore_index=True), "norm_edit_distance",
                                high="C", low="B").empty
