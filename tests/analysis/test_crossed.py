"""Inference with prompts and prefixes as crossed random factors, against hand-computed cases."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.analysis import crossed, curves, descriptive, heads
from harness.analysis.crossed_variance import crossed_t_interval

COLUMNS = ["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len", "v"]


def crossed_table(prefix_values: dict[tuple[str, str], float], n_prompts: int = 4, prompt_offsets=None, pair=None):
    """A crossed table: every prompt meets every prefix; value = prefix value + prompt offset."""
    offsets = prompt_offsets if prompt_offsets is not None else np.linspace(0.0, 0.3, n_prompts)
    rows = [("m", "none", f"p{i}", group, prefix, 32, value + offsets[i])
            for i in range(len(offsets)) for (group, prefix), value in prefix_values.items()]
    df = pd.DataFrame(rows, columns=COLUMNS)
    if pair is not None:
        df["pair"] = df.prefix_id.map(pair)
    return df


# --- prefix permutation test ---------------------------------------------------------------

def test_unpaired_permutation_3_vs_3_by_hand():
    # C prefixes 2, 4, 5 and B prefixes 0, 1, 3 (prompt offsets shift every prefix mean equally).
    # statistic = (11 - 4) / 3 = 7/3. Over the C(6,3) = 20 relabelings, statistic = (2s - 15) / 3 for
    # label sum s, so |statistic| >= 7/3 iff s >= 11 or s <= 4:
    #   s >= 11: {3,4,5}=12, {2,4,5}=11;  s <= 4: {0,1,2}=3, {0,1,3}=4  -> two-sided p = 4/20, greater 2/20.
    df = crossed_table({("C", "c2"): 2, ("C", "c4"): 4, ("C", "c5"): 5, ("B", "b0"): 0, ("B", "b1"): 1, ("B", "b3"): 3})
    two = crossed.prefix_permutation_test(df, "v").iloc[0]
    assert two.statistic == pytest.approx(7 / 3)
    assert two.p_perm == pytest.approx(4 / 20) and bool(two.exact) and two.design == "unpaired"
    assert (two.n_prompts, two.n_prefixes_high, two.n_prefixes_low) == (4, 3, 3)
    greater = crossed.prefix_permutation_test(df, "v", alternative="greater").iloc[0]
    assert greater.p_perm == pytest.approx(2 / 20)
    less = crossed.prefix_permutation_test(df, "v", alternative="less").iloc[0]
    assert less.p_perm == pytest.approx(19 / 20)

    # fewer permutations allowed than relabelings: Monte Carlo, (b + 1) / (m + 1)
    mc = crossed.prefix_permutation_test(df, "v", n_permutations=999, seed=1)
    assert bool(mc.exact.iloc[0])  # 20 <= 999: still exact
    mc = crossed.prefix_permutation_test(df, "v", n_permutations=19, seed=1).iloc[0]
    assert not mc.exact
    b = mc.p_perm * 20 - 1
    assert b == pytest.approx(round(b)) and 0 <= round(b) <= 19
    big = crossed.prefix_permutation_test(df, "v", n_permutations=19, seed=1).iloc[0]
    assert big.p_perm == mc.p_perm  # seeded


def test_paired_permutation_4_pairs_by_hand():
    # per-pair differences C - B: 1, 2, 3, -0.5; statistic = 5.5 / 4. Of the 16 sign flips of
    # (1, 2, 3, 0.5), sums >= 5.5: +1+2+3+0.5 = 6.5 and +1+2+3-0.5 = 5.5; mirrored two <= -5.5.
    values = {("C", "c1"): 1.0, ("B", "b1"): 0.0, ("C", "c2"): 2.5, ("B", "b2"): 0.5,
              ("C", "c3"): 3.0, ("B", "b3"): 0.0, ("C", "c4"): 0.0, ("B", "b4"): 0.5}
    pair = {"c1": 1, "b1": 1, "c2": 2, "b2": 2, "c3": 3, "b3": 3, "c4": 4, "b4": 4}
    df = crossed_table(values, pair=pair)
    row = crossed.prefix_permutation_test(df, "v").iloc[0]
    assert row.design == "paired" and bool(row.exact)
    assert row.statistic == pytest.approx(5.5 / 4)
    assert row.p_perm == pytest.approx(4 / 16)
    assert crossed.prefix_permutation_test(df, "v", alternative="greater").p_perm.iloc[0] == pytest.approx(2 / 16)

    # a pair holding two C prefixes is no matched pair: the whole cell falls back to unpaired
    broken = crossed_table(values, pair={**pair, "b4": 3})
    assert crossed.prefix_permutation_test(broken, "v").design.iloc[0] == "unpaired"
    # a prefix without a pair: unpaired as well
    missing = crossed_table(values, pair={**pair, "c4": None})
    assert crossed.prefix_permutation_test(missing, "v").design.iloc[0] == "unpaired"


def two_c_two_b(seed: int = 0, n_prompts: int = 30) -> pd.DataFrame:
    """One C prefix very high, everything else alike; small prompt-level noise."""
    rng = np.random.default_rng(seed)
    means = {("C", "c_loud"): 1.0, ("C", "c_quiet"): 0.1, ("B", "b1"): 0.0, ("B", "b2"): 0.1}
    rows = []
    for i in range(n_prompts):
        offset = rng.normal(0, 0.3)
        for (group, prefix), mu in means.items():
            rows.append(("m", "none", f"p{i}", group, prefix, 32, mu + offset + rng.normal(0, 0.05)))
    return pd.DataFrame(rows, columns=COLUMNS)


def test_prompt_only_significant_but_prefix_permutation_not():
    out = crossed.compare_groups(two_c_two_b(), "v").iloc[0]
    # prompt-only: every prompt's C - B is about +0.5, so it looks overwhelming
    assert out.wilcoxon_p < 1e-6 and out.ci_low_prompts > 0.4
    assert out.claim_prompts == "these prefixes (prompts resampled)"
    # prefixes as the random factor: 2 + 2 prefixes allow only C(4,2) = 6 relabelings, and moving the loud
    # prefix to B gives a statistic as extreme as the observed one
    assert bool(out.exact) and out.design == "unpaired"
    assert out.p_perm >= 0.3
    assert out.claim == "instruction-like content in general (prompts and prefixes resampled)"
    # two prefixes per group cannot support a general interval: none, and the words say why
    assert np.isnan(out.ci_low) and out.ci_method == "none" and out.ci_note == "2 prefixes in a group"
    assert out.statistic == pytest.approx(out.mean_diff)  # complete crossing


def test_compare_groups_agrees_with_the_separate_functions():
    df = two_c_two_b(seed=3, n_prompts=12)
    both = crossed.compare_groups(df, "v").iloc[0]
    prompts = descriptive.contrast(df, "v").iloc[0]
    perm = crossed.prefix_permutation_test(df, "v").iloc[0]
    assert both.mean_diff == pytest.approx(prompts.mean_diff) and both.wilcoxon_p == pytest.approx(prompts.wilcoxon_p)
    assert (both.ci_low_prompts, both.ci_high_prompts) == (pytest.approx(prompts.ci_low), pytest.approx(prompts.ci_high))
    assert both.ci_method_prompts == prompts.ci_method == "BCa"
    assert both.p_perm == perm.p_perm and both.statistic == pytest.approx(perm.statistic)
    # with a third prefix per group the lead interval is the crossed t interval of the layout
    more = pd.concat([df, df[df.prefix_id.isin(["c_quiet", "b2"])].assign(
        prefix_id=lambda d: d.prefix_id + "_2", v=lambda d: d.v + 0.05)])
    row = crossed.compare_groups(more, "v").iloc[0]
    (_, lay), = crossed.cell_layouts(more, "v", "C", "B", crossed.CONTRAST_BY)
    lead = crossed_t_interval(lay.Y, lay.is_high, lay.pairs)
    assert row.ci_method == "crossed t" and (row.ci_low, row.ci_high, row.dof) == pytest.approx(lead)
    assert row.ci_low < 0 < row.ci_high  # one loud prefix among three: the honest interval is wide


# --- two-way bootstrap ----------------------------------------------------------------------

def simulate(rng, n_prompts=15, n_prefixes=6, true_diff=0.2, prompt_sd=0.3, prefix_sd=0.3, noise_sd=0.1):
    """Crossed design: value = group mean + prompt effect + prefix effect + noise."""
    a = rng.normal(0, prompt_sd, n_prompts)
    rows = []
    for group, mu in (("C", true_diff), ("B", 0.0)):
        for k in range(n_prefixes):
            b = rng.normal(0, prefix_sd)
            for i in range(n_prompts):
                rows.append(("m", "none", f"p{i}", group, f"{group}{k}", 32, mu + a[i] + b + rng.normal(0, noise_sd)))
    return pd.DataFrame(rows, columns=COLUMNS)


def test_two_way_bootstrap_covers_the_population_difference():
    covered_two_way = covered_prompts = 0
    widths = []
    n_sim = 50
    for seed in range(n_sim):
        df = simulate(np.random.default_rng(seed))
        row = crossed.two_way_bootstrap(df, "v", n_resamples=400, seed=seed).iloc[0]
        d = descriptive.paired_differences(df, "v", ["model"], "C", "B")["diff"].to_numpy()
        low_p, high_p = descriptive.bootstrap_ci(d, n_resamples=400, seed=seed)
        covered_two_way += row.ci_low <= 0.2 <= row.ci_high
        covered_prompts += low_p <= 0.2 <= high_p
        widths.append((row.ci_high - row.ci_low, high_p - low_p))
    assert covered_two_way / n_sim >= 0.8
    # prompts alone ignore the prefix-to-prefix variation and miss most of the time
    assert covered_prompts / n_sim <= 0.5
    widths = np.array(widths)
    assert (widths[:, 0] > widths[:, 1]).all()
    assert np.median(widths[:, 0] / widths[:, 1]) > 2


def test_two_way_bootstrap_is_point_when_nothing_varies_and_pairs_resample_together():
    values = {("C", "c1"): 1.0, ("B", "b1"): 0.0, ("C", "c2"): 3.0, ("B", "b2"): 2.0}
    flat = crossed_table(values, prompt_offsets=[0.0, 0.0, 0.0])
    # unpaired: C draws and B draws are independent, so the interval is wide ...
    unpaired = crossed.two_way_bootstrap(flat, "v", n_resamples=400).iloc[0]
    assert unpaired.statistic == pytest.approx(1.0) and unpaired.ci_low < 0 < 2 < unpaired.ci_high
    # ... paired, each drawn pair differs by exactly 1: the interval is the point 1
    paired = crossed.two_way_bootstrap(crossed_table(values, prompt_offsets=[0.0, 0.0, 0.0],
                                             pair={"c1": "x", "b1": "x", "c2": "y", "b2": "y"}), "v",
                                     n_resamples=400).iloc[0]
    assert paired.design == "paired"
    assert paired.ci_low == pytest.approx(1.0) and paired.ci_high == pytest.approx(1.0)


def test_cell_means_averages_repeats_and_keeps_pairs():
    df = crossed_table({("C", "c"): 1.0, ("B", "b"): 0.0}, prompt_offsets=[0.0], pair={"c": 7, "b": 7})
    doubled = pd.concat([df, df.assign(v=df.v + 2)], ignore_index=True)
    cells = crossed.cell_means(doubled, "v", ["model", "prefix_len"])
    assert len(cells) == 2
    assert cells.set_index("prefix_id").loc["c", "v"] == pytest.approx(2.0)
    assert (cells.pair == 7).all()


# --- prompt-only intervals --------------------------------------------------------------------

def test_bca_where_it_applies_percentile_otherwise():
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.2, 0.55, 0.9, 0.05, 0.3, 0.6])
    low, high, method = descriptive.bootstrap_interval(values, seed=3)
    ref = sps.bootstrap((values,), np.mean, method="BCa", n_resamples=2000,
                        random_state=np.random.default_rng(3)).confidence_interval
    assert method == "BCa" and (low, high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert descriptive.bootstrap_interval(values[:6])[2] == "percentile"          # < 8 distinct values
    assert descriptive.bootstrap_interval(np.r_[np.zeros(9), 1.0])[2] == "percentile"  # 2 distinct values
    assert descriptive.bootstrap_interval([0.2] * 9) == (0.2, 0.2, "degenerate")
    assert descriptive.bootstrap_interval([0.2])[2] == "none"
    assert descriptive.bootstrap_ci(values, method="BCa", seed=3) == (low, high)

    rows = [("m", "none", f"p{i}", "B", "b", 32, v) for i, v in enumerate(values)]
    summary = descriptive.drift_summary(pd.DataFrame(rows, columns=COLUMNS), "v").iloc[0]
    assert summary.ci_method == "BCa" and summary.ci_low == pytest.approx(ref.low)


# --- head contrasts ---------------------------------------------------------------------------

def test_family_wide_and_per_length_bh_by_hand():
    table = pd.DataFrame({"model": "m", "prefix_len": [32, 32, 64, 64], "p": [0.01, 0.04, 0.03, 0.5]})
    # per length: 32 -> (.02, .04); 64 -> (.06, .5)
    per_length = descriptive.benjamini_hochberg_by(table, "p", ["model", "prefix_len"])
    np.testing.assert_allclose(per_length, [0.02, 0.04, 0.06, 0.5])
    # one family of four: sorted .01 .03 .04 .5 -> .04, .06, .0533, .5 -> monotone .04, .0533, .0533, .5
    family = descriptive.benjamini_hochberg_by(table, "p", ["model"])
    np.testing.assert_allclose(family, [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert list(per_length < 0.05) == [True, True, False, False]
    assert list(family < 0.05) == [True, False, False, False]


def head_table(n_prompts=8, n_prefixes=3, lengths=(32, 64), planted=((1, 0),), effect=0.5, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for length in lengths:
        for i in range(n_prompts):
            for group in ("B", "C"):
                for k in range(n_prefixes):
                    for layer in range(2):
                        for head in range(2):
                            for segment in ("task", "continuation"):
                                v = rng.normal(1.0, 0.05) + (effect if group == "C" and (layer, head) in planted else 0)
                                rows.append(("m", "none", f"p{i}", group, f"{group}{k}", length, layer, head,
                                             segment, v, 4))
    return pd.DataFrame(rows, columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len",
                                       "layer", "head", "segment", "kl", "n_queries"])


def test_head_contrasts_family_and_permutation_columns():
    att = head_table()
    out = heads.head_contrasts(att, "kl", segment=None)
    assert len(out) == 2 * 2 * 2 * 2  # lengths x segments x layers x heads
    assert set(out.segment) == {"task", "continuation"}
    # family-wide (default): one BH over every row of the model
    np.testing.assert_allclose(out.q, descriptive.benjamini_hochberg(out.p.to_numpy()))
    np.testing.assert_allclose(out.q_perm, descriptive.benjamini_hochberg(out.p_perm.to_numpy()))
    per = heads.head_contrasts(att, "kl", segment=None, family="length")
    for _, cell in per.groupby(["prefix_len", "segment"]):
        np.testing.assert_allclose(cell.q, descriptive.benjamini_hochberg(cell.p.to_numpy()))
    # 3 + 3 prefixes: C(6,3) = 20 relabelings, exact; the planted head is the most extreme: p = 1/20
    planted = out[(out["layer"] == 1) & (out["head"] == 0)]
    assert planted.perm_exact.all() and np.allclose(planted.p_perm, 1 / 20)
    assert (planted.p < 0.01).all() and planted.significant.all()
    assert (out.significant_by == "wilcoxon").all() and out.significant.sum() == 4
    # resting on the permutation test: every p >= 1/20, so over a family of 16 no q can fall below .05
    # (BH: q >= min p * m / m), although the planted head is as extreme as 3 + 3 prefixes allow
    by_perm = heads.head_contrasts(att, "kl", segment=None, significant_by="permutation")
    assert (by_perm.significant_by == "permutation").all() and not by_perm.significant.any()
    assert by_perm.p_perm.min() == pytest.approx(1 / 20) and by_perm.q_perm.min() >= 0.05 - 1e-12
    # the default still tests the task segment only
    assert set(heads.head_contrasts(att, "kl").segment) == {"task"}


def test_head_permutation_matches_the_single_cell_test():
    att = head_table(seed=4, effect=0.02)
    out = heads.head_contrasts(att, "kl", segment="task")
    for _, row in out.iterrows():
        cell = att[(att.segment == "task") & (att["layer"] == row["layer"]) & (att["head"] == row["head"])
                   & (att.prefix_len == row.prefix_len)]
        ref = crossed.prefix_permutation_test(cell, "kl", alternative="greater", n_permutations=2000).iloc[0]
        assert row.p_perm == pytest.approx(ref.p_perm)
        d = descriptive.paired_differences(cell, "kl", ["model"], "C", "B")["diff"]
        assert row.p == pytest.approx(descriptive.wilcoxon_p(d, alternative="greater"))


def test_vectorized_wilcoxon_matches_the_loop():
    rng = np.random.default_rng(1)
    D = rng.normal(0.1, 1, (12, 20))
    D[1] = np.round(D[1])          # ties and zeros
    D[2, :4] = 0                   # zeros
    D[3] = np.abs(D[3])            # all positive, no ties: exact
    D[4] = 0.0                     # untestable
    D[5, 3] = np.nan               # missing prompt
    D[6] = 1.0                     # all tied
    vec = descriptive.wilcoxon_rows(D, "greater")
    loop = np.array([descriptive.wilcoxon_p(d, "greater") for d in D])
    np.testing.assert_allclose(vec, loop, rtol=1e-12)
    assert np.isnan(vec[4])


# --- survival -------------------------------------------------------------------------------

def test_survival_against_a_direct_count():
    rows = [("B", "p0", 0), ("B", "p1", 2), ("B", "p2", None), ("B", "p3", 5),
            ("C", "p0", 1), ("C", "p1", 1), ("C", "p2", 3), ("C", "p3", None),
            ("A", "p0", None), ("A", "p1", None), ("A", "p2", None), ("A", "p3", None)]
    df = pd.DataFrame([("m", "none", g, "x" if g != "A" else None, 32 if g != "A" else 0, p, fd, 6)
                       for g, p, fd in rows],
                      columns=["model", "isolation", "group", "prefix_id", "prefix_len", "prompt_id",
                               "first_divergence", "n_continuation_tokens"])
    df["first_divergence"] = df["first_divergence"].astype("Int64")
    out = curves.survival(df, n_resamples=300)
    assert sorted(out.k.unique()) == list(range(7))  # max_k = n_continuation_tokens
    curve = {g: cell.sort_values("k").survival.to_numpy() for g, cell in out.groupby("group")}
    #            k = 0    1     2     3     4     5     6
    np.testing.assert_allclose(curve["B"], [1, 3 / 4, 3 / 4, 2 / 4, 2 / 4, 2 / 4, 1 / 4])
    np.testing.assert_allclose(curve["C"], [1, 1, 2 / 4, 2 / 4, 1 / 4, 1 / 4, 1 / 4])
    np.testing.assert_allclose(curve["A"], np.ones(7))
    first = out[out.k == 0]
    assert (first.ci_low == 1).all() and (first.ci_high == 1).all() and (first.n == 4).all()
    assert curves.survival(df, max_k=3).k.max() == 3


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 12))), min_size=1, max_size=25),
       st.booleans())
def test_survival_is_monotone_and_a_count(conds, two_way):
    df = pd.DataFrame({"model": "m", "group": "C", "prefix_len": 32,
                       "prompt_id": [f"p{p}" for p, _ in conds],
                       "prefix_id": [f"x{i % 3}" for i in range(len(conds))],
                       "first_divergence": pd.array([fd for _, fd in conds], dtype="Int64")})
    # one row a condition: a generated prompt may draw the same prefix twice
    df = df.assign(prefix_id=df.prefix_id + df.groupby(["prompt_id", "prefix_id"]).cumcount().astype(str))
    out = curves.survival(df, n_resamples=50, two_way=two_way).sort_values("k")
    s = out.survival.to_numpy()
    assert s[0] == 1
    assert (np.diff(s) <= 1e-12).all()
    assert (np.diff(out.ci_low.to_numpy()) <= 1e-12).all() and (np.diff(out.ci_high.to_numpy()) <= 1e-12).all()
    assert ((out.ci_low <= out.ci_high + 1e-12) & (out.ci_low >= 0) & (out.ci_high <= 1)).all()
    fds = [fd for _, fd in conds]
    for k, value in zip(out.k, s):
        assert value == pytest.approx(sum(fd is None or fd >= k for fd in fds) / len(fds))


# --- attention aggregation ------------------------------------------------------------------

def test_weighted_segment_mean_by_hand():
    rows = [
        # prompt p0, prefix c1: task (3 queries) layers 1 and 3 -> 2; continuation (1 query) 5 and 7 -> 6
        ("c1", 0, "task", 1.0, 3), ("c1", 1, "task", 3.0, 3),
        ("c1", 0, "continuation", 5.0, 1), ("c1", 1, "continuation", 7.0, 1),   # -> (2*3 + 6*1) / 4 = 3
        # prefix c2: task 0 (2 queries), continuation 4 (2 queries)             -> (0*2 + 4*2) / 4 = 2
        ("c2", 0, "task", 0.0, 2), ("c2", 1, "task", 0.0, 2),
        ("c2", 0, "continuation", 4.0, 2), ("c2", 1, "continuation", 4.0, 2),
        # prefix c3: no continuation rows were compared (0 queries, NaN): task alone -> 1
        ("c3", 0, "task", 1.0, 5), ("c3", 1, "task", 1.0, 5),
        ("c3", 0, "continuation", np.nan, 0), ("c3", 1, "continuation", np.nan, 0),
    ]
    att = pd.DataFrame([("m", "none", "p0", "C", prefix, 32, layer, 0, seg, v, n) for prefix, layer, seg, v, n in rows],
                       columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len", "layer", "head",
                                "segment", "kl", "n_queries"])
    out = descriptive.weighted_segment_mean(att, "kl")
    assert len(out) == 1 and out.kl.iloc[0] == pytest.approx((3 + 2 + 1) / 3)
    per_condition = descriptive.weighted_segment_mean(att, "kl", ["model", "group", "prefix_len", "prefix_id"])
    assert per_condition.set_index("prefix_id").kl.to_dict() == pytest.approx({"c1": 3.0, "c2": 2.0, "c3": 1.0})
    # layer profile: layer 0 -> c1 (1*3+5)/4 = 2, c2 2, c3 1 -> 5/3 ; layer 1 -> (9+7)/4 = 4, 2, 1 -> 7/3
    profile = descriptive.layer_profile(att, "kl").set_index("layer")["mean"]
    assert profile.to_dict() == pytest.approx({0: 5 / 3, 1: 7 / 3})
    assert descriptive.head_map(att, "C", "kl").set_index("layer").kl.to_dict() == pytest.approx({0: 5 / 3, 1: 7 / 3})
