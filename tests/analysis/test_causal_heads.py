"""The causal head test's statistics against hand computations and independent ones."""

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu

from harness.analysis import causal_heads as ch
from harness.analysis.crossed import compare_groups


def _attention(rng, n_prompts=3, prefixes=("b1", "b2", "c1", "c2"), layers=2, heads=4, hot=((1, 2),)):
    rows = []
    for p, prefix, layer, head in itertools.product(range(n_prompts), prefixes, range(layers), range(heads)):
        group = prefix[0].upper()
        value = rng.normal(0.1, 0.01) + (1.0 if group == "C" and (layer, head) in hot else 0.0)
        rows.append({"prompt_id": f"p{p}", "group": group, "prefix_id": prefix, "prefix_len": 16,
                     "placement": "raw", "isolation": "none", "segment": "task", "layer": layer, "head": head,
                     "capture": value})
    return pd.DataFrame(rows)


def test_rank_heads_is_the_c_minus_b_mean_by_hand():
    att = _attention(np.random.default_rng(0))
    ranking = ch.rank_heads(att, {"b1", "c1"}, "capture")
    assert (ranking.layer.iloc[0], ranking["head"].iloc[0]) == (1, 2)
    sub = att[att.prefix_id.isin(["b1", "c1"]) & (att.layer == 0) & (att["head"] == 3)]
    by_hand = sub[sub.group == "C"].capture.mean() - sub[sub.group == "B"].capture.mean()
    got = ranking[(ranking.layer == 0) & (ranking["head"] == 3)]["diff"].iloc[0]
    assert got == pytest.approx(by_hand, abs=1e-12)


def test_split_keeps_matched_prefixes_together_and_halves_them():
    cond = pd.DataFrame({"group": ["B", "C", "C"] * 4, "prefix_id": [f"x{i}" for i in range(12)],
                         "pair": [f"t{i // 3}" for i in range(12)]})
    choose, test = ch.split_prefixes(cond, seed=1)
    assert choose.isdisjoint(test) and choose | test == set(cond.prefix_id)
    for _, triple in cond.groupby("pair"):
        assert set(triple.prefix_id) <= choose or set(triple.prefix_id) <= test
    assert len(choose) == len(test) == 6
    assert ch.split_prefixes(cond, seed=1) == (choose, test)  # seeded


@pytest.mark.parametrize("n_b, n_c", [(18, 18), (5, 7), (6, 6)])
def test_split_is_stratified_by_group_for_every_seed(n_b, n_c):
    """The audit: unstratified, only 26% of seeds gave 9 + 9 on each side of an 18 + 18 run and the
    choosing half held 3 to 15 C prefixes. Now every seed halves each group (within one when odd)."""
    cond = pd.DataFrame({"group": ["B"] * n_b + ["C"] * n_c,
                         "prefix_id": [f"b{i}" for i in range(n_b)] + [f"c{i}" for i in range(n_c)]})
    for seed in range(200):
        choose, test = ch.split_prefixes(cond, seed)
        for group, n in (("b", n_b), ("c", n_c)):
            assert sum(x.startswith(group) for x in choose) in (n // 2, (n + 1) // 2)
        assert abs(len(choose) - len(test)) <= 1


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 7)), min_size=1, max_size=6, unique=True),
       st.integers(0, 10**6))
@settings(max_examples=50, deadline=None)
def test_random_heads_come_from_the_top_heads_layers_and_avoid_them(top, seed):
    drawn = ch.random_like(top, 8, np.random.default_rng(seed), n_layers=4)
    assert len(set(drawn)) == len(top) and not set(drawn) & set(top)
    per_layer = {layer: sum(lay == layer for lay, _ in top) for layer, _ in top}
    if all(2 * n <= 8 for n in per_layer.values()):  # room in every layer: the same layers exactly
        assert sorted(layer for layer, _ in drawn) == sorted(layer for layer, _ in top)


def test_a_full_layer_sends_the_rest_of_its_draws_to_other_layers():
    top = [(0, h) for h in range(5)]  # 5 of layer 0's 8 heads: 3 left there
    drawn = ch.random_like(top, 8, np.random.default_rng(0), n_layers=2)
    assert sorted(layer for layer, _ in drawn) == [0, 0, 0, 1, 1] and not set(drawn) & set(top)
    with pytest.raises(ValueError, match="no head outside"):
        ch.random_like([(0, h) for h in range(5)], 8, np.random.default_rng(0), n_layers=1)


def test_auroc_by_hand():
    pos, neg = np.array([0.9, 0.8, 0.3]), np.array([0.1, 0.3, 0.5, 0.2])
    pairs = [(p > n) + 0.5 * (p == n) for p in pos for n in neg]
    assert ch.auroc(pos, neg) == pytest.approx(np.mean(pairs))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 7))
def test_stacked_auroc_is_the_one_at_a_time_auroc(seed, prompts, prefixes):
    """Each matrix of a stack gets scipy's Mann-Whitney U over n+ n- of its marked scores, and
    :func:`auroc` of them the same (ties, NaN cells left unmarked, a marked NaN, an empty side: NaN)."""
    rng = np.random.default_rng(seed)
    score = rng.integers(0, 4, (6, prompts, prefixes)).astype(float)  # few values: many ties
    label = rng.integers(0, 3, score.shape)  # 0 negative, 1 positive, 2 neither
    score[label == 2] = np.where(rng.random((label == 2).sum()) < 0.5, np.nan, 1.0)
    if seed % 5 < 2:
        score[0].flat[0], label[0].flat[0] = np.nan, seed % 5  # a marked NaN: no AUROC, as auroc says
    got = ch.stacked_auroc(score, label == 1, label == 0)
    want = [mannwhitneyu(m[l == 1], m[l == 0]).statistic / ((l == 1).sum() * (l == 0).sum())
            if (l == 1).any() and (l == 0).any() else np.nan for m, l in zip(score, label)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    one_at_a_time = [ch.auroc(m[l == 1], m[l == 0]) for m, l in zip(score, label)]
    np.testing.assert_allclose(one_at_a_time, want, rtol=0, atol=1e-12)


def _causal_table(rng, n_prompts=6, n_prefixes=5, removed=0.5):
    rows = []
    for p, i, group in itertools.product(range(n_prompts), range(n_prefixes), "BC"):
        base = rng.normal(0, 0.05) + (1.0 if group == "C" else 0.0) + 0.2 * rng.normal()
        for setting, scale in (("none", 1.0), ("mask_heads(top1)", 1 - removed), ("mask", 0.0)):
            value = base * scale if group == "C" else base
            rows.append({"prompt_id": f"p{p}", "group": group, "prefix_id": f"{group}{i}", "setting": setting,
                         "output_kl": value})
    return pd.DataFrame(rows)


def test_causal_effects_agree_with_compare_groups_and_find_the_share_removed():
    table = _causal_table(np.random.default_rng(2))
    eff = ch.causal_effects(table, ["output_kl"]).set_index("setting")
    direct = compare_groups(table[table.setting == "none"].assign(isolation="none"), "output_kl", by=["isolation"])
    assert eff.loc["none", "effect"] == pytest.approx(direct.statistic.iloc[0])
    assert eff.loc["none", "effect_low"] == pytest.approx(direct.ci_low.iloc[0])
    top = eff.loc["mask_heads(top1)"]
    assert top["kind"] == "top" and top["k"] == 1 and top["mode"] == "mask_heads"
    # C values were scaled by 0.5 and B left alone: the share removed is C's half of C's mean over C - B
    c_mean = table[(table.setting == "none") & (table.group == "C")].output_kl.mean()
    assert top["share"] == pytest.approx(0.5 * c_mean / eff.loc["none", "effect"])
    assert top["share_low"] <= top["share"] <= top["share_high"]
    assert top["removed"] == pytest.approx(eff.loc["none", "effect"] - top["effect"])


def test_share_interval_covers_in_simulation():
    """95% crossed-bootstrap intervals of the share removed, over simulated crossed designs with
    prompt, prefix and residual effects: most cover the true share (a loose floor; small designs)."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(40):
        rows = []
        prompt_eff = rng.normal(0, 0.3, 8)
        for g in "BC":
            for i in range(6):
                pe = rng.normal(0, 0.3)
                for p in range(8):
                    y0 = (1.0 if g == "C" else 0.0) + prompt_eff[p] + pe + rng.normal(0, 0.3)
                    y1 = y0 - (0.4 if g == "C" else 0.0) + rng.normal(0, 0.05)
                    rows.append({"prompt_id": p, "group": g, "prefix_id": f"{g}{i}", "none": y0, "s": y1})
        share, lo, hi = ch.share_removed(pd.DataFrame(rows), "none", "s", n_resamples=300, seed=1)
        covered += lo <= 0.4 <= hi
    assert covered >= 32


def test_random_draws_are_distinct_sets_and_stable_when_other_sizes_are_added():
    ranking = pd.DataFrame({"layer": [0, 0, 0, 1, 1, 1], "head": [0, 1, 2, 0, 1, 2]})  # 2 layers x 3 heads
    sets = ch.head_sets(ranking, [1], draws=3, heads_per_layer=3, seed=0)
    draws = [sets[f"random1.{d}"] for d in (1, 2, 3)]
    assert len(set(draws)) == 2 or len(set(draws)) == 3  # layer 0 has two free heads: a third distinct set may not exist
    assert len(set(draws[:2])) == 2
    more = ch.head_sets(ranking, [1, 2], draws=3, heads_per_layer=3, seed=0)
    assert all(more[name] == heads for name, heads in sets.items())


def test_the_crossed_bootstrap_gives_the_same_interval_with_its_resamples_batched():
    rng = np.random.default_rng(5)
    groups = np.array(["B"] * 7 + ["C"] * 9)
    y = rng.standard_normal((6, 16)) + (groups == "C")
    y[2, 3] = np.nan  # a missing cell is left out either way
    mats = {"y": y}
    one_by_one = ch.crossed_bootstrap(mats, groups, lambda m, g: ch.effect_of(m["y"], g), 400, seed=3)
    together = ch.crossed_bootstrap(mats, groups, lambda m, g: ch.effect_of(m["y"], g), 400, seed=3, batched=True)
    np.testing.assert_allclose(together, one_by_one, rtol=1e-12)
    # and the effect itself is the nanmean of the prefixes' nanmeans
    per_prefix = np.nanmean(y, axis=0)
    assert ch.effect_of(y, groups) == pytest.approx(per_prefix[groups == "C"].mean() - per_prefix[groups == "B"].mean())


def test_a_measure_one_group_lacks_is_left_out_without_a_warning():
    """Pass 17, #139: a bank whose B prefixes name no word leaked compare_groups' 'no rows of group B'
    warning and printed an empty word-rate section."""
    import warnings

    table = _causal_table(np.random.default_rng(0))
    table["target_hit"] = np.where(table.group == "C", 1.0, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eff = ch.causal_effects(table, ["target_hit", "output_kl"])
    assert set(eff.measure) == {"output_kl"}
