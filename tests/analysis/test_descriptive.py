"""Statistics against hand-computed cases."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from harness.analysis import descriptive, heads


def frame(rows):
    return pd.DataFrame(rows, columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len", "v"])


def test_per_prompt_mean_over_prefixes_then_over_prompts():
    df = frame([
        ("m", "none", "p1", "B", "x", 32, 0.0), ("m", "none", "p1", "B", "y", 32, 1.0),  # p1 mean 0.5
        ("m", "none", "p2", "B", "x", 32, 1.0), ("m", "none", "p2", "B", "y", 32, 1.0),  # p2 mean 1.0
        ("m", "none", "p3", "B", "x", 32, 0.0), ("m", "none", "p3", "B", "y", 32, 0.0),  # p3 mean 0.0
    ])
    out = descriptive.drift_summary(df, "v")
    assert len(out) == 1
    row = out.iloc[0]
    assert row.n_prompts == 3 and row["mean"] == pytest.approx(0.5)
    assert 0.0 <= row.ci_low <= 0.5 <= row.ci_high <= 1.0


def test_bootstrap_interval_is_scipys_percentile_interval():
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.2, 0.55])
    low, high = descriptive.bootstrap_ci(values, seed=3)
    ref = sps.bootstrap((values,), np.mean, method="percentile", n_resamples=2000,
                        random_state=np.random.default_rng(3)).confidence_interval
    assert (low, high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert descriptive.bootstrap_ci([0.3, 0.3, 0.3]) == (0.3, 0.3)
    assert np.isnan(descriptive.bootstrap_ci([1.0])[0])


def test_contrast_is_paired_by_prompt():
    # C exceeds B by exactly 0.25 in every prompt, while prompts differ a lot from each other:
    rows = []
    for i, base in enumerate([0.0, 0.5, 0.1, 0.6, 0.2, 0.3, 0.05]):
        rows += [("m", "none", f"p{i}", "B", "n", 64, base), ("m", "none", f"p{i}", "C", "i", 64, base + 0.25)]
    out = descriptive.contrast(frame(rows), "v")
    row = out.iloc[0]
    assert row.mean_diff == pytest.approx(0.25)
    assert row.ci_low == pytest.approx(0.25) and row.ci_high == pytest.approx(0.25)
    # two-sided exact Wilcoxon with 7 positive differences: p = 2 / 2**7
    assert row.wilcoxon_p == pytest.approx(2 / 2**7)


def test_wilcoxon_untestable_cases():
    assert np.isnan(descriptive.wilcoxon_p([0.0, 0.0, 0.0]))
    assert np.isnan(descriptive.wilcoxon_p([0.4]))


def test_benjamini_hochberg_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.5, np.nan])
    # sorted p: .01 .03 .04 .5 (m=4) -> .01*4/1=.04, .03*4/2=.06, .04*4/3=.0533, .5 -> monotone: .04 .0533 .0533 .5
    q = descriptive.benjamini_hochberg(p)
    np.testing.assert_allclose(q[:4], [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.isnan(q[4])


def test_head_contrasts_finds_the_planted_head():
    rows = []
    rng = np.random.default_rng(0)
    for prompt in range(12):
        for layer in range(2):
            for head in range(3):
                for group in ("B", "C"):
                    v = rng.normal(1.0, 0.05)
                    if (layer, head) == (1, 2) and group == "C":
                        v += 0.5
                    rows.append(("m", "none", f"p{prompt}", group, group, 32, layer, head, "task", v))
    att = pd.DataFrame(rows, columns=["model", "isolation", "prompt_id", "group", "prefix_id", "prefix_len",
                                      "layer", "head", "segment", "kl"])
    out = heads.head_contrasts(att, "kl", "task")
    assert len(out) == 6
    top = out.iloc[0]
    assert (top["layer"], top["head"]) == (1, 2) and top.significant
    assert out.significant.sum() == 1
