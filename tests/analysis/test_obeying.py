"""Obeying or copying: the triple rates and contrasts on hand-built tables."""

import numpy as np
import pandas as pd
import pytest

from harness.analysis import obeying
from harness.analysis.checks import NothingToShow, or_empty


def triples(copier: bool, n_prompts: int = 4, words=("kettle", "canoe", "igloo")) -> pd.DataFrame:
    """Per prompt and word: C asks (always writes it), C forbids (writes it when ``copier``, else
    never), B mentions (writes it for the first prompt only). A wrote "kettle" for prompt p0, and
    every prefix of the word carries that same A reply."""
    rows = []
    for p in range(n_prompts):
        for w in words:
            a_hit = p == 0 and w == "kettle"
            for group, check, hit in (("C", "contains", True), ("C", "absent", copier), ("B", None, p == 0)):
                side = {"contains": "ask", "absent": "forbid", None: "mention"}[check]
                rows.append({"model": "m", "placement": "raw", "isolation": "none", "prompt_id": f"p{p}",
                             "group": group, "prefix_id": f"{w}-{side}", "pair": w, "target": w, "check": check,
                             "prefix_len": 32, "target_hit": hit, "target_hit_a": a_hit,
                             "obeyed": None if group == "B" else (hit if check == "contains" else not hit),
                             "obeyed_a": None if group == "B" else (a_hit if check == "contains" else not a_hit)})
    df = pd.DataFrame(rows)
    for col in ("target_hit", "target_hit_a", "obeyed", "obeyed_a"):
        df[col] = df[col].astype("boolean")
    return df


def test_word_rates_by_role_and_a_base_rate_counted_once():
    rates = obeying.word_rates(triples(copier=True)).set_index("group")
    assert rates.loc["asked", "rate"] == 1.0 and rates.loc["forbidden", "rate"] == 1.0
    assert rates.loc["mentioned", "rate"] == pytest.approx(1 / 4)
    # A: 4 prompts x 3 words = 12 distinct checks (not 36: each word has three prefixes), 1 hit
    base = rates.loc[obeying.BASE]
    assert (base.n_hits, base.n_conditions, base.rate) == (1, 12, pytest.approx(1 / 12))
    # one hit cannot show clustering: the worst case's effective size, min(4 prompts, 3 words)
    assert base.ci_method == ("Wilson, crossed, 3 effective units (the worst case: all the variation between the "
                              "3 prefixes), t on 2 df") and base.effective_units == pytest.approx(3)


def test_contrasts_tell_a_copier_from_an_obedient_model():
    for copier, forbidden_minus in ((True, 3 / 4), (False, -1 / 4)):
        table = obeying.triple_contrasts(triples(copier)).set_index("contrast")
        assert table.loc["asked - mentioned", "statistic"] == pytest.approx(3 / 4)
        assert table.loc["forbidden - mentioned", "statistic"] == pytest.approx(forbidden_minus)
        assert (table.design == "paired").all()  # each word's pair has one prefix per side
        assert ((table.ci_low >= -1) & (table.ci_high <= 1)).all()
        assert table.loc["asked - mentioned", "n_prefixes_high"] == 3


def test_obey_rates_per_check_with_a_unasked():
    rates = obeying.obey_rates(triples(copier=True))
    c = rates[rates.group == "C"].set_index("check")
    assert c.loc["contains", "rate"] == 1.0 and c.loc["absent", "rate"] == 0.0
    a = rates[rates.group == "A"].set_index("check")
    assert a.loc["contains", "rate"] == pytest.approx(1 / 12) and a.loc["absent", "rate"] == pytest.approx(11 / 12)


def test_runs_without_checks_count_c_as_asked():
    old = triples(copier=False)
    old = old[old.check.astype(object) != "absent"].drop(columns=["check", "target", "obeyed", "obeyed_a"])
    roles = obeying.roles(old)
    assert set(roles[old.group == "C"]) == {"asked"} and set(roles[old.group == "B"]) == {"mentioned"}
    base = obeying.base_rate(old)  # the pair stands for its word
    assert (base.n_hits.iloc[0], base.n_conditions.iloc[0]) == (1, 12)
    assert "forbidden - mentioned" not in set(obeying.triple_contrasts(old).contrast)
    assert np.isclose(obeying.word_rates(old).set_index("group").loc["asked", "rate"], 1.0)


def placed(placement: str, obey) -> pd.DataFrame:
    """triples() under ``placement``, C's ``obeyed`` set by ``obey(prompt index, word index, check)``."""
    df = triples(copier=False).assign(placement=placement)
    words = {w: i for i, w in enumerate(dict.fromkeys(df.target))}
    c = df.group == "C"
    df.loc[c, "obeyed"] = [bool(obey(int(p[1:]), words[w], k))
                           for p, w, k in zip(df.prompt_id[c], df.target[c], df.check[c])]
    return df


def test_ceiling_table_rates_and_differences_by_hand():
    # asked directly: every asked instruction obeyed but word 2's for prompts 0-1; injected in the
    # system message: only word 0's. Forbidden: obeyed in both placements except one system cell.
    direct = placed("direct", lambda p, w, k: k == "absent" or not (w == 2 and p < 2))
    system = placed("system", lambda p, w, k: (k == "absent" and not (p, w) == (3, 1)) or (k == "contains" and w == 0))
    table = obeying.ceiling_table(pd.concat([direct, system], ignore_index=True)).set_index(["role", "placement"])
    assert set(table.index) == {(r, p) for r in ("asked", "forbidden") for p in ("direct", "system")}
    assert table.loc[("asked", "direct"), "rate"] == pytest.approx(10 / 12)
    assert table.loc[("asked", "system"), "rate"] == pytest.approx(4 / 12)
    assert table.loc[("forbidden", "system"), "rate"] == pytest.approx(11 / 12)
    # the ceiling is the direct cell's rate and interval, beside every placement of the same role
    for role in ("asked", "forbidden"):
        row, top = table.loc[(role, "system")], table.loc[(role, "direct")]
        assert (row.ceiling, row.ceiling_low, row.ceiling_high) == (top.rate, top.ci_low, top.ci_high)
        assert np.isnan(top.minus_ceiling)
    # minus the ceiling: the mean over words of each word's difference (a complete, paired crossing)
    per_word = [np.mean([system_ - direct_ for system_, direct_ in cells])
                for cells in ([(1, 1)] * 4, [(0, 1)] * 4, [(0, 0)] * 2 + [(0, 1)] * 2)]
    asked = table.loc[("asked", "system")]
    assert asked.minus_ceiling == pytest.approx(np.mean(per_word)) == pytest.approx(4 / 12 - 10 / 12)
    assert asked.minus_low <= asked.minus_ceiling <= asked.minus_high and asked.minus_low >= -1
    assert table.loc[("forbidden", "system"), "minus_ceiling"] == pytest.approx(-1 / 12)


def test_ceiling_table_needs_a_direct_run():
    with pytest.raises(NothingToShow, match="only \\['system'\\]: load a direct run"):
        obeying.ceiling_table(placed("system", lambda p, w, k: True))
    with pytest.raises(NothingToShow, match="no placement"):
        obeying.ceiling_table(triples(copier=True).drop(columns="placement", errors="ignore"))
    assert or_empty(obeying.ceiling_table, triples(copier=True)).empty  # what the report reads


def test_a_studys_delta_reaches_the_obey_tables_and_their_words():
    """Review of #65: a sweep's +claims.delta.target_hit / .obeyed moved the report's C - B verdicts
    but the obey tables still stated power at the registry's 5 points. Power at a larger Δ is larger,
    and is what compare_groups gives at that effect."""
    from harness.analysis.crossed import compare_groups
    from harness.reporting.behaviour import behaviour_section

    conds = triples(copier=True)
    default, wider = (obeying.triple_contrasts(conds, deltas=d).set_index("contrast")
                      for d in (None, {"target_hit": 0.4}))
    asked = conds[obeying.roles(conds).isin(["asked", "mentioned"])]
    by_hand = compare_groups(asked.assign(group=obeying.roles(asked), target_hit=asked.target_hit.astype(float)),
                             "target_hit", high="asked", low="mentioned", by=("model", "prefix_len"), rate=True,
                             effect=0.4)
    assert wider.loc["asked - mentioned", "power"] == pytest.approx(by_hand.power.iloc[0])
    assert wider.loc["asked - mentioned", "power"] > default.loc["asked - mentioned", "power"]
    both = pd.concat([placed("direct", lambda p, w, k: True), placed("system", lambda p, w, k: w == 0)],
                     ignore_index=True)
    assert (obeying.ceiling_table(both, deltas={"obeyed": 0.4}).power.dropna()
            > obeying.ceiling_table(both).power.dropna()).all()
    text = "\n".join(behaviour_section(both, deltas={"target_hit": 0.4, "obeyed": 0.3}))
    assert "Δ = 40 percentage points" in text and "Δ = 30 percentage points" in text
