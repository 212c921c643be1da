"""Public analysis functions refuse bad arguments at entry, with one line naming the argument, what
is allowed and the value given, instead of an empty or all-NaN table or an unrelated exception."""

import re

import numpy as np
import pandas as pd
import pytest

from harness.analysis import crossed, curves, descriptive, heads, rates


def refused(message: str):
    """pytest.raises for a ValueError whose message is exactly ``message``."""
    return pytest.raises(ValueError, match=f"^{re.escape(message)}$")


def conditions(groups=("A", "B", "C")) -> pd.DataFrame:
    """4 prompts x (A, and two prefixes per group B and C), C drifting more than B."""
    rows = []
    for i in range(4):
        for group in groups:
            for prefix in ([None] if group == "A" else [f"{group.lower()}1", f"{group.lower()}2"]):
                kl = 0.0 if group == "A" else (0.1 if group == "B" else 0.5) + 0.05 * i + (0.02 if prefix[-1] == "2" else 0)
                rows.append(("m", "none", f"p{i}", group, prefix, 0 if group == "A" else 32, kl,
                             group == "C" and i < 3, 6, None if group == "A" else i + 1))
    return pd.DataFrame(rows, columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len",
                                       "output_kl", "target_hit", "n_continuation_tokens", "first_divergence"])


def attention() -> pd.DataFrame:
    """4 prompts x B, C (two prefixes each) x 2 layers x 2 heads x segments task and continuation."""
    rows = []
    for i in range(4):
        for group in ("B", "C"):
            for prefix in (f"{group.lower()}1", f"{group.lower()}2"):
                for layer in range(2):
                    for head in range(2):
                        for segment in ("task", "continuation"):
                            kl = 0.1 * (layer + 1) + 0.01 * head + (0.3 if group == "C" else 0) + 0.01 * i
                            rows.append(("m", "none", f"p{i}", group, prefix, 32, layer, head, segment, kl, 5))
    return pd.DataFrame(rows, columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len",
                                       "layer", "head", "segment", "kl", "n_queries"])


# --- 1. groups a table does not hold -------------------------------------------------------

HIGH_Z = "high must be a group the table holds ('A', 'B', 'C') or a sweep's A, B or C, got 'Z'"


@pytest.mark.parametrize("call", [
    lambda df, **kw: crossed.compare_groups(df, "output_kl", power=False, **kw),
    lambda df, **kw: crossed.prefix_permutation_test(df, "output_kl", **kw),
    lambda df, **kw: crossed.two_way_bootstrap(df, "output_kl", n_resamples=50, **kw),
    lambda df, **kw: descriptive.contrast(df, "output_kl", **kw),
])
def test_a_group_the_table_lacks_is_refused(call):
    df = conditions()
    with refused(HIGH_Z):
        call(df, high="Z")
    with refused("low must be a group the table holds ('A', 'B', 'C') or a sweep's A, B or C, got 'Q'"):
        call(df, low="Q")
    with refused("high and low must be two different groups, got 'B' for both"):
        call(df, high="B", low="B")


def test_a_group_named_by_a_caller_of_its_own_is_accepted_and_a_sweep_without_c_still_reports():
    """Non-sweep names (a corpus's attack/mention) work where held; C on an A, B sweep (groups=[A,B]) gives
    the rows it always gave: nothing to compare, n_prompts 0."""
    df = conditions().replace({"group": {"C": "attack", "B": "mention"}})
    row = crossed.compare_groups(df, "output_kl", high="attack", low="mention", power=False).iloc[0]
    assert row.n_prompts == 4 and row.statistic > 0
    with refused("high must be a group the table holds ('A', 'attack', 'mention') or a sweep's A, B or C, "
                 "got 'attacks'"):
        crossed.compare_groups(df, "output_kl", high="attacks", low="mention")
    ab = crossed.compare_groups(conditions(("A", "B")), "output_kl", power=False)
    assert len(ab) == 1 and ab.iloc[0].n_prompts == 0 and np.isnan(ab.iloc[0].statistic)


def test_head_contrasts_refuses_a_group_the_table_lacks():
    with refused("low must be a group the table holds ('B', 'C') or a sweep's A, B or C, got 'Z'"):
        heads.head_contrasts(attention(), low="Z")


# --- 2. permutations ------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda n: crossed.prefix_permutation_test(conditions(), "output_kl", n_permutations=n),
    lambda n: crossed.compare_groups(conditions(), "output_kl", n_permutations=n, power=False),
    lambda n: heads.head_contrasts(attention(), n_permutations=n),
])
def test_no_permutations_is_refused(call):
    with refused("n_permutations must be a whole number of at least 1, got 0"):
        call(0)
    with refused("n_permutations must be a whole number of at least 1, got 2.5"):
        call(2.5)


def test_head_contrasts_ignores_the_permutation_count_without_the_permutation_test():
    out = heads.head_contrasts(attention(), permutation=False, n_permutations=0)
    assert len(out) == 4 and out.p_perm.isna().all()


# --- 3. hit columns -------------------------------------------------------------------------

def test_a_continuous_hit_column_is_refused():
    with refused("hit must name a column of booleans or 0/1 (nulls are left out), got 'output_kl', which holds 0.1"):
        rates.rate_summary(conditions(), hit="output_kl")
    words = conditions().assign(said=lambda d: np.where(d.target_hit, "yes", "no"))
    with refused("hit must name a column of booleans or 0/1 (nulls are left out), got 'said', which holds 'no'"):
        rates.rate_summary(words, hit="said")


def test_a_hit_column_the_table_lacks_is_refused_only_when_named():
    with refused("hit must name a column of the table (its boolean columns: 'target_hit'), got 'obeyed'"):
        rates.rate_summary(conditions(), hit="obeyed")
    with refused("the table has no target_hit column (no prefix of these runs names a target word), so there is "
                 "nothing to rate: name the column of hits to rate (hit=...)"):
        rates.rate_summary(conditions().drop(columns="target_hit"))  # a run without targets
    with refused(f"obeyed is empty in all {len(conditions())} rows of the table (a run whose prefixes name no target, "
                 "or rows filtered to those without one): there is nothing to rate"):  # pass 16, #33: an empty frame
        rates.rate_summary(conditions().assign(obeyed=pd.array([None] * len(conditions()), dtype="boolean")),
                           hit="obeyed")
    with refused("hit must name a column of the table (its boolean columns: none), got 'target_hit'"):
        rates.rate_summary(conditions().drop(columns="target_hit"), hit="target_hit")


def test_zero_one_and_null_hits_are_the_boolean_answer():
    df = conditions()
    expected = rates.rate_summary(df)
    as_float = rates.rate_summary(df.assign(flag=df.target_hit.astype(float)), hit="flag")
    pd.testing.assert_frame_equal(expected, as_float)
    with_nulls = df.assign(target_hit=df.target_hit.astype(object).where(df.group != "A", None))
    assert rates.rate_summary(with_nulls).group.tolist() == ["B", "C"]
    with refused("confidence must be a number strictly between 0 and 1 (e.g. 0.95), got 95"):
        rates.rate_summary(df, confidence=95)


# --- 4. survival ----------------------------------------------------------------------------

def test_a_negative_survival_horizon_is_refused():
    with refused("max_k must be a whole number of at least 0, got -1"):
        curves.survival(conditions(), max_k=-1, n_resamples=50)
    # 0 is the default's own fallback (no continuation, no divergence): S(0) = 1 alone
    assert curves.survival(conditions(), max_k=0, n_resamples=50).k.unique().tolist() == [0]
    with refused("n_resamples must be a whole number of at least 10, got 1"):
        curves.survival(conditions(), n_resamples=1)


# --- 5. attention groups and segments --------------------------------------------------------

def test_head_map_and_layer_profile_refuse_what_the_table_lacks():
    att = attention()
    with refused("group must be a group the table holds ('B', 'C') or a sweep's A, B or C, got 'Q'"):
        descriptive.head_map(att, group="Q")
    with refused("segment must be a segment the table holds ('continuation', 'task'), got 'bogus'"):
        descriptive.head_map(att, segment="bogus")
    with refused("segment must be a segment the table holds ('continuation', 'task'), got 'bogus'"):
        descriptive.layer_profile(att, segment="bogus")
    with refused("segment must be a segment the table holds (none), got 'task'"):
        descriptive.layer_profile(att.drop(columns="segment"), segment="task")


def test_head_map_and_layer_profile_are_unchanged_for_held_values():
    att = attention()
    grid = descriptive.head_map(att, "C", segment="task")
    assert len(grid) == 4 and grid.kl.to_numpy() == pytest.approx([0.415, 0.425, 0.515, 0.525])
    profile = descriptive.layer_profile(att, segment="continuation")
    assert profile.set_index(["group", "layer"])["mean"].to_dict() == pytest.approx(
        {("B", 0): 0.12, ("B", 1): 0.22, ("C", 0): 0.42, ("C", 1): 0.52})
    assert descriptive.head_map(att[att.group == "B"], "C").empty  # a sweep without C: no heads, as before


# --- 6. significance level ------------------------------------------------------------------

@pytest.mark.parametrize("alpha", [2, 1.0, 0, -0.05, float("nan")])
def test_head_contrasts_refuses_a_level_outside_0_1(alpha):
    with refused(f"alpha must be a number strictly between 0 and 1 (e.g. 0.05), got {alpha!r}"):
        heads.head_contrasts(attention(), alpha=alpha)


# --- 7. bootstrap settings ------------------------------------------------------------------

def test_bootstrap_refuses_too_few_resamples_and_a_confidence_outside_0_1():
    with refused("n_resamples must be a whole number of at least 10, got 1"):
        descriptive.bootstrap_ci([1, 2, 3, 4], n_resamples=1)
    with refused("confidence must be a number strictly between 0 and 1 (e.g. 0.95), got 1.5"):
        descriptive.bootstrap_ci([1, 2, 3], confidence=1.5)
    with refused("confidence must be a number strictly between 0 and 1 (e.g. 0.95), got 0.0"):
        descriptive.bootstrap_interval([1, 2, 3], confidence=0.0)
    with refused("n_resamples must be a whole number of at least 10, got 1"):  # refused before the early return
        descriptive.bootstrap_interval([1.0], n_resamples=1)
    low, high = descriptive.bootstrap_ci([1, 2, 3, 4], n_resamples=10)
    assert 1 <= low <= high <= 4


def test_crossed_intervals_share_the_bootstrap_checks():
    with refused("confidence must be a number strictly between 0 and 1 (e.g. 0.95), got 1.5"):
        crossed.compare_groups(conditions(), "output_kl", confidence=1.5)
    with refused("n_resamples must be a whole number of at least 10, got 1"):
        crossed.compare_groups(conditions(), "output_kl", n_resamples=1)
    with refused("n_resamples must be a whole number of at least 10, got 0"):
        crossed.two_way_bootstrap(conditions(), "output_kl", n_resamples=0)
