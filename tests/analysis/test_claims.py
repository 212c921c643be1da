"""The three contamination claims as tested hypotheses (harness.analysis.claims), on synthetic tables whose truth
is planted: each verdict must follow the planted effect, and the numbers must match a plain
computation."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis import claims
from harness.analysis.verdicts import NO_EFFECT, VERDICTS

PROMPTS = [f"p{i}" for i in range(6)]
LENGTHS = [32, 64, 128, 256]


def attention_table(profile, n_prefixes=8, noise=0.02, seed=0):
    """C's per-layer KL = ``profile[layer]`` + prompt and prefix effects + noise, 2 heads, 1 segment."""
    rng = np.random.default_rng(seed)
    rows = []
    prompt_fx = dict(zip(PROMPTS, rng.normal(0, 0.05, len(PROMPTS))))
    for x in range(n_prefixes):
        fx = rng.normal(0, 0.05)
        for p in PROMPTS:
            for n in LENGTHS:
                for layer, level in enumerate(profile):
                    for head in range(2):
                        rows.append({"model": "m", "placement": "raw", "isolation": "none", "beta": np.nan,
                                     "group": "C", "prompt_id": p, "prefix_id": f"c{x}", "prefix_len": n,
                                     "layer": layer, "head": head, "segment": "task", "n_queries": 5,
                                     "kl": level + prompt_fx[p] + fx + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def conditions_table(c_by_length, b_by_length, n_prefixes=10, prefix_sd=0.05, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for group, means in (("B", b_by_length), ("C", c_by_length)):
        for x in range(n_prefixes):
            fx = rng.normal(0, prefix_sd)
            for p in PROMPTS:
                for n, level in zip(LENGTHS, means):
                    v = level + fx + rng.normal(0, 0.01)
                    rows.append({"model": "m", "placement": "raw", "isolation": "none", "beta": np.nan,
                                 "group": group, "prompt_id": p, "prefix_id": f"{group}{x}", "prefix_len": n,
                                 "attn_kl_mean": v, "norm_edit_distance": v})
    return pd.DataFrame(rows)


def test_a_planted_middle_peak_is_supported_and_located():
    out = claims.middle_layer_peak(attention_table([0.1, 0.2, 0.3, 0.9, 1.0, 0.8, 0.3, 0.2, 0.1]), n_resamples=500)
    row = out.iloc[0]
    assert row.verdict == "supported" and row.ci_low > 0
    assert row.peak_fraction == pytest.approx(4 / 8)
    # the estimate is the plain computation on the layer means
    prof = np.array([0.1, 0.2, 0.3, 0.9, 1.0, 0.8, 0.3, 0.2, 0.1])
    assert row.estimate == pytest.approx(prof[3:6].mean() - max(prof[:3].mean(), prof[6:].mean()), abs=0.02)


def test_an_early_peak_contradicts_the_middle_layer_claim():
    out = claims.middle_layer_peak(attention_table([1.0, 0.9, 0.8, 0.4, 0.3, 0.3, 0.2, 0.2, 0.1]), n_resamples=500)
    assert out.iloc[0].verdict == "contradicted" and out.iloc[0].peak_fraction == 0.0


def test_a_jump_between_64_and_128_is_supported_and_a_smooth_rise_is_not():
    jump = claims.length_jump(conditions_table([0.1, 0.12, 0.5, 0.55], [0] * 4), n_resamples=500).iloc[0]
    assert jump.verdict == "supported"
    assert jump.estimate == pytest.approx((0.5 - 0.12) - max(0.02, 0.05), abs=0.01)
    smooth = claims.length_jump(conditions_table([0.1, 0.3, 0.5, 0.7], [0] * 4), n_resamples=500).iloc[0]
    assert smooth.verdict == NO_EFFECT and smooth.ci_high < smooth.delta  # equal steps: a jump of Δ is ruled out
    shrinking = claims.length_jump(conditions_table([0.1, 0.5, 0.52, 0.9], [0] * 4), n_resamples=500).iloc[0]
    assert shrinking.verdict == "contradicted"


def test_c_minus_b_verdicts_follow_the_planted_difference_and_match_the_plain_means():
    for c, expected in ((0.4, "supported"), (0.0, "not determined"), (-0.4, "contradicted")):
        cond = conditions_table([0.3 + c] * 4, [0.3] * 4, seed=1)
        row = claims.c_versus_b(cond, None, "norm_edit_distance", n_resamples=500).iloc[0]
        plain = (cond[cond.group == "C"].norm_edit_distance.mean() - cond[cond.group == "B"].norm_edit_distance.mean())
        assert row.estimate == pytest.approx(plain)
        if c == 0.0:  # a null can land on either side by chance; it must not be far from zero
            assert row.ci_low < 0.1 and row.ci_high > -0.1
        else:
            assert row.verdict == expected
        assert 0 < row.power <= 1 and row.n_prefixes == 20 and row.n_prompts == len(PROMPTS)


def test_b_is_judged_against_the_noise_floor():
    cond = conditions_table([0.5] * 4, [0.2] * 4)
    noise = pd.DataFrame({"model": ["m"] * 3, "norm_edit_distance": [0.0, 0.0, 0.0]})
    row = claims.c_versus_b(cond, noise, "norm_edit_distance", n_resamples=300).iloc[0]
    assert row.noise_floor == 0.0 and "above the noise floor" in row.detail


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3), st.integers(0, 10_000))
def test_crossed_means_observed_is_the_plain_mean_and_resamples_stay_in_range(n_p, n_x, k, seed):
    Y = np.random.default_rng(seed).normal(size=(n_p, n_x, k))
    observed, resampled = claims.crossed_means(Y, 50, seed)
    assert np.allclose(observed, Y.mean((0, 1)))
    assert (resampled >= Y.min((0, 1)) - 1e-12).all() and (resampled <= Y.max((0, 1)) + 1e-12).all()


def test_seed_claims_gathers_every_claim_with_its_unit():
    cond = conditions_table([0.1, 0.12, 0.5, 0.55], [0.1] * 4)
    att = attention_table([0.1, 0.5, 0.2])
    out = claims.seed_claims(cond, att, None, n_resamples=200)
    assert sorted(out.claim.unique()) == [1, 2, 3]
    assert list(out.columns[:len(claims.COLUMNS)]) == claims.COLUMNS
    assert (out.unit == claims.UNIT).all() and out.verdict.isin(VERDICTS).all()
    assert (out.delta == 0.05).all()  # the registry's Δ of kl, attn_kl_mean and norm_edit_distance


def test_claim_3_is_the_lead_interval_and_the_test_it_inverts_with_its_power():
    from harness.analysis.crossed import compare_groups
    from harness.analysis.design import design_power, variance_components

    cond = conditions_table([0.45] * 4, [0.3] * 4, prefix_sd=0.1, seed=2)
    row = claims.c_versus_b(cond, None, "norm_edit_distance").iloc[0]
    lead = compare_groups(cond, "norm_edit_distance", by=["model", "placement"]).iloc[0]
    assert (row.ci_low, row.ci_high, row.p) == pytest.approx((lead.ci_low, lead.ci_high, lead.p_crossed))
    assert (row.p < 0.05) == (row.verdict in ("supported", "contradicted"))
    comps = variance_components(cond, "norm_edit_distance", by=["model", "placement"]).iloc[0]
    # this design's power at the stated Δ (the registry's 0.05 for the edit distance), not at an estimated SD
    assert row.delta == 0.05 and row.power == pytest.approx(design_power(comps, len(PROMPTS), 10, 0.05))
    wider = claims.c_versus_b(cond, None, "norm_edit_distance", delta=0.3).iloc[0]
    assert wider.delta == 0.3 and wider.power == pytest.approx(design_power(comps, len(PROMPTS), 10, 0.3))
    assert wider.power > row.power


def test_the_claims_command_writes_its_report_figures_and_table(tiny_run, tmp_path, capsys):
    from harness.cli import main

    out = tmp_path / "claims"
    assert main(["claims", str(tiny_run), "--out", str(out), "--resamples", "200"]) == 0
    table = pd.read_parquet(out / "claims.parquet")
    # the tiny run has 2 layers (no middle third) and lengths 8 and 24 only: claims 1 and 2 cannot be tested
    assert set(table.claim) == {3}
    text = (out / "claims.md").read_text()
    assert text.count("Not tested") == 2
    for claim in table.itertuples():  # every verdict the page prints is the table's
        words = {NO_EFFECT: "no excess of C over B as large as Δ"}.get(claim.verdict, claim.verdict)
        assert f"**{words}**" in text
    assert (out / "figures" / "claim1_layers.png").is_file() and (out / "figures" / "claim3_c_minus_b.pdf").is_file()
    assert main(["claims", str(tiny_run), "--out", str(tiny_run)]) == 2  # never into a run it reads
    assert "own output never goes inside a run" in capsys.readouterr().err


def test_without_out_the_claims_page_goes_beside_the_run(tiny_run, tmp_path, capsys):
    import shutil

    from harness.cli import main

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert main(["claims", str(run), "--resamples", "200"]) == 0
    assert f"{tmp_path / 'run-claims' / 'claims.md'}" in capsys.readouterr().out
    assert (tmp_path / "run-claims" / "claims.md").is_file() and not (run / "claims.md").exists()
    assert main(["claims", str(run), "--resamples", "200"]) == 0  # the same runs again: the page is redrawn
    capsys.readouterr()
    shutil.copytree(tiny_run, tmp_path / "mine")
    (tmp_path / "mine-claims").mkdir()
    (tmp_path / "mine-claims" / "claims.md").write_text("my own notes")  # a page no harness command wrote
    assert main(["claims", str(tmp_path / "mine"), "--resamples", "200"]) == 2
    assert "mine-claims" in capsys.readouterr().err
    assert (tmp_path / "mine-claims" / "claims.md").read_text() == "my own notes"


def test_designs_for_power_are_the_fewest_that_reach_it():
    from harness.analysis.design import design_power

    comps = {"interaction": 0.001, "prefix_high": 0.01, "prefix_low": 0.01, "resid_high": 0.05, "resid_low": 0.05}
    prompts, prefixes = claims.designs_for_power(comps, 3, 10, 0.2)
    assert prompts is not None and prefixes is not None
    assert design_power(comps, prompts, 10, 0.2) >= 0.8 > design_power(comps, prompts - 1, 10, 0.2)
    assert design_power(comps, 3, prefixes, 0.2) >= 0.8 > design_power(comps, 3, prefixes - 1, 0.2)
    # a prompt-by-group interaction too large for 3 prompts: no number of prefixes reaches 0.8, and
    # prefix variance too large for 10 prefixes: no number of prompts does
    assert claims.designs_for_power({**comps, "interaction": 1.0}, 3, 10, 0.2)[1] is None
    assert claims.designs_for_power({**comps, "prefix_high": 0.1, "prefix_low": 0.1}, 3, 10, 0.2)[0] is None
    assert claims.designs_for_power(comps, 3, 10, 0.0) == (None, None)


@pytest.mark.parametrize("P, n, sd_b, sd_e", [(3, 18, 1.0, 0.22), (8, 12, 0.3, 1.0)])
def test_the_min_of_two_contrasts_interval_covers_on_a_fixed_simulation(P, n, sd_b, sd_e):
    """Claim 2's shape (four lengths), crossed prompt and prefix effects per length; truth known."""
    rng = np.random.default_rng(7)
    means = np.array([0.0, 0.5, 1.5, 1.8])  # steps 0.5, 1.0, 0.3: the jump statistic is min(0.5, 0.7) = 0.5
    sets = 1000
    a = rng.normal(0, 1, (sets, P, 1, 1)) + rng.normal(0, 0.3, (sets, P, 1, 4))
    b = rng.normal(0, sd_b, (sets, 1, n, 1)) + rng.normal(0, 0.3 * sd_b, (sets, 1, n, 4))
    Y = means + a + b + rng.normal(0, sd_e, (sets, P, n, 4))
    low, high, estimate = claims.min_contrast_interval(Y, claims.JUMP_WEIGHTS)
    assert estimate == pytest.approx(np.min(np.einsum("spxk,ck->spxc", Y, claims.JUMP_WEIGHTS).mean((1, 2)), -1))
    assert np.mean(high < 0.5) <= 0.03 and np.mean(low > 0.5) <= 0.03


def test_the_claims_page_says_where_the_linear_products_were_lowered_and_what_the_floor_measured():
    from harness.reporting.claims import precision_note

    noise = pd.DataFrame({"model": ["m", "m", "n"], "comparison": ["batch_bfloat16_products_vs_alone_exact"] * 2
                          + ["batch_vs_alone"], "norm_edit_distance": [0.0, 0.25, 0.5],
                          "attn_kl_mean": [0.001, 0.003, 0.2], "output_kl": [0.0004, 0.0007, 0.1]})
    note = precision_note(noise)
    assert "bfloat16" in note and "runs of m;" in note and "2 sampled conditions" in note
    assert "at most 0.00300 nats" in note and "1 of 2 greedy continuations changed" in note
    assert precision_note(noise[noise.comparison == "batch_vs_alone"]) == "" and precision_note(None) == ""


def test_two_banks_at_lengths_they_do_not_share_are_not_pooled_into_one_claim_3(recwarn):
    """Pass 12, #277 and #278: two runs of different banks and lengths read together. Claim 3 pools
    C - B over lengths, so a bank measured only at 32 tokens beside one at 8 and 24 put its length into
    the difference; the claims page pooled them into one row and numpy warned of empty slices, and plan
    blamed an SD of 0. Where the banks share a length, only that length is pooled, and the row says so."""
    first = conditions_table([0.3] * 4, [0.1] * 4)
    first = first[first.prefix_len.isin([32, 64])]
    second = conditions_table([0.3] * 4, [0.1] * 4, seed=1).assign(prefix_id=lambda d: "other-" + d.prefix_id)
    disjoint = pd.concat([first, second[second.prefix_len.isin([128, 256])]], ignore_index=True)
    [(_, rows, note)] = claims.claim3_cells(disjoint)
    assert rows.empty and "share none" in note and "20 at [32, 64]" in note and "20 at [128, 256]" in note
    table = claims.seed_claims(disjoint, None, None, n_resamples=50)
    assert (table.claim != 3).all()
    assert "share none" in claims.missing_for(3, disjoint, None)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]

    shared = pd.concat([first, second[second.prefix_len.isin([64, 128])]], ignore_index=True)
    [(_, rows, note)] = claims.claim3_cells(shared)
    assert set(rows.prefix_len) == {64} and "pooled over the lengths every prefix has, [64]" in note
    row = claims.c_versus_b(shared, None, "attn_kl_mean", n_resamples=50).iloc[0]
    alone = claims.c_versus_b(shared[shared.prefix_len == 64], None, "attn_kl_mean", n_resamples=50).iloc[0]
    assert row.estimate == pytest.approx(alone.estimate) and row.ci_low == pytest.approx(alone.ci_low)
    assert "[64]" in row.detail
    assert claims.missing_for(3, shared, None) == ""
    assert "none is (runs of different lengths" in claims.missing_for(2, disjoint, None)
