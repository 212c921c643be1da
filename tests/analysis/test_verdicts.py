"""Verdicts at a stated smallest effect of interest (harness.analysis.verdicts): the four outcomes on
hand-made intervals, the Δ registry and its overrides, and the error of "no effect as large as Δ"
when the truth is exactly Δ, by simulation with a generator of this file's own."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.analysis import claims
from harness.analysis.lead import lead
from harness.analysis.verdicts import (
    CONTRADICTED,
    NO_EFFECT,
    NOT_DETERMINED,
    SUPPORTED,
    decide,
    deltas_for,
    parse_delta,
    recorded_deltas,
)
from harness.errors import HarnessError
from harness.measure.metrics import METRICS


@pytest.mark.parametrize("low, high, two_sided, expected", [
    (0.01, 0.2, False, SUPPORTED),       # above zero, whatever Δ
    (0.01, 0.04, False, SUPPORTED),      # an effect, and smaller than Δ: still supported
    (-0.2, -0.01, False, CONTRADICTED),
    (-0.3, 0.04, False, NO_EFFECT),      # one-sided: only the upper end matters
    (-0.3, 0.04, True, NOT_DETERMINED),  # two-sided: -0.3 is a difference as large as Δ
    (-0.04, 0.04, True, NO_EFFECT),
    (-0.01, 0.05, False, NOT_DETERMINED),  # holds Δ itself
    (-0.01, 0.2, False, NOT_DETERMINED),
    (np.nan, np.nan, False, NOT_DETERMINED),
])
def test_the_four_outcomes_at_delta_005(low, high, two_sided, expected):
    assert decide(low, high, 0.05, two_sided) == expected


def test_without_a_delta_a_null_is_never_called_no_effect():
    assert decide(-0.001, 0.001, None) == NOT_DETERMINED and decide(-0.001, 0.001, None, True) == NOT_DETERMINED


@given(st.floats(-5, 5), st.floats(0, 5), st.floats(0.001, 5), st.booleans())
def test_no_effect_is_called_only_when_the_interval_excludes_delta(low, width, delta, two_sided):
    high = low + width
    verdict = decide(low, high, delta, two_sided)
    if verdict == NO_EFFECT:
        assert high < delta and low <= 0 and (not two_sided or low > -delta)
    assert (verdict == SUPPORTED) == (low > 0)


def test_the_registry_states_a_delta_per_measure_and_a_study_overrides_it():
    defaults = deltas_for()
    assert defaults == {m.name: m.delta for m in METRICS if m.delta is not None}
    assert {"norm_edit_distance", "attn_kl_mean", "kl", "output_kl", "target_hit"} <= set(defaults)
    assert deltas_for({"norm_edit_distance": "0.1"})["norm_edit_distance"] == 0.1
    for bad in (0, -1, float("nan"), float("inf"), True, "big"):
        with pytest.raises(ValueError, match="norm_edit_distance"):
            deltas_for({"norm_edit_distance": bad})
    with pytest.raises(ValueError, match="'edit' is not a measure"):
        deltas_for({"edit": 0.1})
    assert parse_delta(" kl = 0.2") == ("kl", 0.2)
    with pytest.raises(ValueError, match="MEASURE=VALUE"):
        parse_delta("kl")


def test_runs_read_together_must_share_their_deltas():
    def manifest(d):
        return {"config": {"claims": {"delta": d}}}

    assert recorded_deltas([manifest({"kl": 0.1}), manifest({"kl": 0.1}), {}]) == {"kl": 0.1}
    with pytest.raises(HarnessError, match="different smallest effects of interest for kl"):
        recorded_deltas([manifest({"kl": 0.1}), manifest({"kl": 0.2})])


def _crossed(rng, n_prompts, n_prefixes, difference, sd_prompt=0.1, sd_inter=0.05, sd_prefix=0.1, sd_resid=0.1):
    """Y[prompt, prefix]: B's prefixes then C's, C shifted by ``difference``; prompt, prompt x group,
    prefix and residual effects drawn independently (this file's generator, not the harness's)."""
    is_c = np.repeat([False, True], n_prefixes)
    prompt = rng.normal(0, sd_prompt, (n_prompts, 1))
    inter = rng.normal(0, sd_inter, (n_prompts, 2))[:, is_c.astype(int)]
    prefix = rng.normal(0, sd_prefix, (1, 2 * n_prefixes))
    return prompt + inter + prefix + rng.normal(0, sd_resid, (n_prompts, 2 * n_prefixes)) + difference * is_c, is_c


@pytest.mark.parametrize("n_prompts, n_prefixes", [(6, 8), (12, 24)])
def test_no_effect_as_large_as_delta_is_rare_when_the_truth_is_delta(n_prompts, n_prefixes):
    """The third outcome's error: at a true C - B of exactly Δ, how often the two-sided rule says "no
    effect as large as Δ". The interval's upper end misses the truth at most 2.5% of the time, so the
    rate must be near or below that (bound 0.05: 400 data sets leave a standard error of 0.008)."""
    rng, delta = np.random.default_rng(7), 0.05
    said = 0
    for _ in range(400):
        Y, is_c = _crossed(rng, n_prompts, n_prefixes, delta)
        out = lead(Y, is_c, power=False)
        said += decide(out["ci_low"], out["ci_high"], delta, two_sided=True) == NO_EFFECT
    assert said / 400 <= 0.05


def test_a_true_null_is_called_no_effect_once_the_design_is_large_enough():
    rng = np.random.default_rng(3)
    Y, is_c = _crossed(rng, 40, 60, 0.0, sd_prompt=0.02, sd_inter=0.005, sd_prefix=0.01, sd_resid=0.02)
    out = lead(Y, is_c, power=False)
    assert decide(out["ci_low"], out["ci_high"], 0.05, two_sided=True) == NO_EFFECT


def test_a_claim_without_effect_on_a_precise_design_says_no_effect_as_large_as_delta():
    rng = np.random.default_rng(0)
    rows = []
    for group in ("B", "C"):
        for x in range(12):
            fx = rng.normal(0, 0.005)
            for p in range(8):
                for n in (32, 64, 128, 256):  # a smooth, linear rise: no jump
                    v = 0.3 + 0.001 * n + fx + rng.normal(0, 0.003)
                    rows.append({"model": "m", "placement": "raw", "isolation": "none", "beta": np.nan,
                                 "group": group, "prompt_id": f"p{p}", "prefix_id": f"{group}{x}", "prefix_len": n,
                                 "attn_kl_mean": v, "norm_edit_distance": v})
    cond = pd.DataFrame(rows)
    jump = claims.length_jump(cond, "attn_kl_mean", n_resamples=200).iloc[0]
    assert jump.ci_high < 0.05 and jump.verdict in (NO_EFFECT, CONTRADICTED)
    three = claims.c_versus_b(cond, None, "attn_kl_mean", n_resamples=200).iloc[0]
    assert three.verdict == NO_EFFECT and three.ci_low <= 0 <= three.ci_high < 0.05
    strict = claims.c_versus_b(cond, None, "attn_kl_mean", n_resamples=200, delta=1e-5).iloc[0]
    assert strict.verdict == NOT_DETERMINED  # the same interval holds a Δ this small
    # power at Δ: near certain at 0.05 on this precise design, near the test's size at a tiny Δ
    assert three.power > 0.99 and strict.power < 0.1


def test_the_claims_command_states_each_delta_and_takes_a_studys_own(tiny_run, tmp_path, capsys):
    from harness.cli import main

    out = tmp_path / "claims"
    assert main(["claims", str(tiny_run), "--out", str(out), "--resamples", "200",
                 "--delta", "norm_edit_distance=0.5"]) == 0
    table = pd.read_parquet(out / "claims.parquet")
    assert set(table.loc[table.measure == "norm_edit_distance", "delta"]) == {0.5}
    assert set(table.loc[table.measure == "attn_kl_mean", "delta"]) == {0.05}  # the registry's
    text = (out / "claims.md").read_text()
    assert "this design's power at Δ" in text and "| 0.500 |" in text and "power at 1 prefix SD" not in text
    with pytest.raises(SystemExit) as stop:  # argparse's own exit: one line naming the option
        main(["claims", str(tiny_run), "--delta", "edit=0.1"])
    assert stop.value.code == 2 and "'edit' is not a measure" in capsys.readouterr().err


def test_a_sweeps_report_decides_at_its_recorded_delta_and_a_redraw_keeps_it(tmp_path, capsys):
    from harness.cli import main
    from harness.config import compose
    from harness.runs.runner import run

    base = ["model=tiny", "prompts.limit=3", "prefixes.per_group=3", "prefix.lengths=[8]", "decode.max_new_tokens=4",
            "analysis.noise_floor=false"]
    with pytest.raises(HarnessError, match="claims.delta: 'edit' is not a measure"):
        run(compose([*base, "+claims.delta.edit=0.1"]), tmp_path / "refused", progress=False)
    assert not (tmp_path / "refused").exists()  # refused before the run directory was claimed
    out = run(compose([*base, "+claims.delta.output_kl=0.25"]), tmp_path / "run", progress=False)
    contrasts = pd.read_parquet(out / "contrasts.parquet")
    c_minus_b = contrasts[contrasts.comparison == "C - B"]
    assert set(c_minus_b.loc[c_minus_b.value == "output_kl", "delta"]) == {0.25}
    assert set(c_minus_b.loc[c_minus_b.value == "norm_edit_distance", "delta"]) == {0.05}
    assert c_minus_b.verdict.isin(["supported", "contradicted", NO_EFFECT, NOT_DETERMINED]).all()
    report = (out / "report.md").read_text()
    assert "verdict at Δ" in report and "| 0.250 |" in report
    before = report
    assert main(["figures", str(out)]) == 0  # the redraw reads Δ from the manifest: the same page
    assert (out / "report.md").read_text() == before
