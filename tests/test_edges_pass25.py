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
    assert f"{run} is being written by a sweep or resume (pid" in err and "resume it once that has finished" in err
    assert "deleted?" not in err


def test_a_share_of_an_effect_without_an_interval_is_left_out_and_the_page_says_why():
    """#32/#38 (silent): with one prefix in a group on the testing half, the unmasked C - B had no
    interval, yet causal_heads.md printed shares of it (0.320, -1.67) with no caveat; an interval that
    holds 0 already withheld them."""
    import numpy as np

    from harness.analysis import causal_heads as ch
    from harness.reporting.causal_heads import causal_page
    from tests.analysis.test_causal_heads import _causal_table

    table = _causal_table(np.random.default_rng(2), n_prefixes=1)  # one prefix per group: no crossed interval
    effects = ch.causal_effects(table, ["output_kl"])
    assert effects.share.isna().all() and not np.isfinite(effects.effect_low).any()
    about = {"model": "m", "run": "r", "prefix_len": 8, "rank_by": "capture", "segment": "task",
             "choosing_prefixes": ["B1", "C1"], "testing_prefixes": ["B0", "C0"], "n_prompts": 6, "n_conditions": 1,
             "seed": 0, "notes": []}
    page = causal_page(effects, pd_empty_ranking(), about)
    assert "it has no interval (" in page and "The shares are left out" in page
    established = ch.causal_effects(_causal_table(np.random.default_rng(2)), ["output_kl"])  # 5 prefixes a group
    assert established.share.notna().any()
    page = causal_page(established, pd_empty_ranking(), about)
    assert "Share of the effect removed, masking the prefix in k heads:" in page and "left out" not in page


def pd_empty_ranking():
    import pandas as pd

    return pd.DataFrame(columns=["layer", "head", "score", "rank"])


def test_step_profile_on_a_table_without_the_column_names_the_missing_column(tiny_run):
    """a5 (misleading): "value must name a per-step column ... (e.g. 'output_kl_steps'), got
    'output_kl_steps'": the message contradicted itself; the column was missing."""
    import harness as H

    conditions, _ = H.load_runs([tiny_run])
    with pytest.raises(ValueError, match=r"the conditions table has no 'output_kl_steps' column \(the per-step KL a "
                                         r"sweep writes; was it dropped or renamed\?\); its per-step columns: none"):
        H.step_profile(conditions.drop(columns=["output_kl_steps"]))
    with pytest.raises(ValueError, match="value must name a per-step column"):
        H.step_profile(conditions, value=3)


@pytest.mark.parametrize("command", ["claims", "detect"])
def test_a_stray_file_is_not_answered_with_its_directory_unless_that_is_a_run(tiny_run, tmp_path, capsys, command):
    """#16 (misleading): `claims runs/afile` advised "give the directory it is in (runs)", which is no run."""
    stray = tmp_path / "afile"
    stray.write_text("x")
    assert main([command, str(stray)]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a run directory: give a run directory (one a sweep made" in err and str(tmp_path) + ")" not in err
    assert main([command, str(tiny_run / "manifest.json")]) == 2  # a run's own file: its directory is the answer
    assert f"give the directory it is in ({tiny_run})" in capsys.readouterr().err


def test_load_noise_on_an_interrupted_run_names_its_state_not_a_deletion(tmp_path):
    """a42 (misleading): "conditions.parquet is missing (the sweep wrote it; deleted or not copied?)"
    for a run interrupted before it wrote any table."""
    import harness as H
    from harness.errors import HarnessError
    from harness.runs.rundir import RunDir
    from tests.support import FAST, sweep

    run = sweep(tmp_path / "run", *FAST)
    (run / "conditions.parquet").unlink()
    RunDir(run).write_status("interrupted")
    with pytest.raises(HarnessError, match=r"stopped \(interrupted\) before its sweep wrote its tables: finish it with "
                                           r"`harness resume"):
        H.load_noise([run])
    RunDir(run).write_status("complete")
    with pytest.raises(HarnessError, match=r"deleted or not copied\?"):
        H.load_noise([run])
