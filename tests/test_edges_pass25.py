"""The twenty-fifth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
f557857): an --out of other settings written over, an interrupted multirun read as whole, advice
below the harness's own minimum design, and messages that named the wrong cause."""

from __future__ import annotations

import pytest

from harness.cli import main


@pytest.mark.parametrize("first, second, differ", [
    (["claims", "--resamples", "50"], ["claims", "--resamples", "50", "--delta", "attn_kl_mean=0.1"],
     "delta the runs' own there, attn_kl_mean=0.1 here"),
    (["detect", "--seed", "0"], ["detect", "--seed", "3"], "seed 0 there, 3 here")])
def test_an_out_of_other_settings_is_refused_not_replaced(tiny_run, tmp_path, capsys, first, second, differ):
    """#93/#94 (lost): `detect --seed 3` over a --seed 0 page and `claims` at another Δ over a page
    replaced it (rc 0); a rerun with the same settings still writes over its own output."""
    out = tmp_path / "out"
    command = lambda words: [words[0], str(tiny_run), "--out", str(out), *words[1:]]  # noqa: E731
    assert main(command(first)) == 0
    page = next(out.glob("*.md")).read_text()
    capsys.readouterr()
    assert main(command(second)) == 2
    err = capsys.readouterr().err
    assert f"made with other settings ({differ}); give another directory (nothing is overwritten)" in err
    assert next(out.glob("*.md")).read_text() == page
    assert main(command(first)) == 0


def _c_and_b(n_prompts, per_group, gap, seed=0):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame([{"model": "m", "placement": "raw", "isolation": "none", "beta": np.nan, "group": g,
                          "prompt_id": f"p{p}", "prefix_id": f"{g}{x}", "prefix_len": 32,
                          "attn_kl_mean": (gap if g == "C" else 0.0) + rng.normal(0, 0.01),
                          "norm_edit_distance": 0.0}
                         for g in "BC" for x in range(per_group) for p in range(n_prompts)])


def test_claim_3_never_advises_a_design_below_the_smallest_that_has_an_interval():
    """#3/#8 (misleading): "power 0.8 at Δ would need about 2 prompts at 3 prefixes per group, or 2
    prefixes per group at 3 prompts"; both designs give no interval and so no verdict."""
    from harness.analysis import claims

    row = claims.c_versus_b(_c_and_b(3, 3, 0.05), None, "attn_kl_mean", n_resamples=50).iloc[0]
    assert row.prompts_for_power_80 == 3 and row.prefixes_for_power_80 == 3
    assert "would need about 3 prompts at 3 prefixes per group, or 3 prefixes per group at 3 prompts" in row.detail


def test_claim_3_with_components_it_cannot_estimate_says_so_rather_than_out_of_reach():
    """#4/#10 (misleading): with the prefix-level SD n/a and the power not estimable, the detail
    said power 0.8 was "out of reach by adding prompts alone" and no number of prefixes reaches it."""
    from harness.analysis import claims

    row = claims.c_versus_b(_c_and_b(3, 2, 0.05), None, "attn_kl_mean", n_resamples=50).iloc[0]
    assert "no design can be planned from these data (its variance components cannot be estimated" in row.detail
    assert "out of reach" not in row.detail and "no number of prefixes" not in row.detail


def test_resume_of_a_run_a_sweep_has_just_started_names_the_sweep(tmp_path, capsys):
    """#157 (misleading): in a sweep's first second (lock held, no .hydra/ yet) resume said the run
    had no .hydra/overrides.yaml ("deleted?") and advised rerunning the sweep."""
    from harness.runs.lock import hold

    run = tmp_path / "run"
    run.mkdir()
    with hold(run, "sweep", "wait"):
        assert main(["resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run} is being written by a sweep (pid" in err and "resume it once that has finished" in err
    assert "deleted?" not in err
