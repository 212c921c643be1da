"""Sweeps that survive, in-process: failure isolation and retry, changed settings, resuming,
check-determinism and collect. (Real kills and launchers: test_faults.py.)"""

import json

import pandas as pd
import pytest

from harness.errors import HarnessError
from harness.runs.check_determinism import check
from harness.runs.collect import collect
from harness.runs.runner import SweepFailed
from harness.runs.schema import TIMING_COLUMNS
from tests.support import SMALL_PREFIXES, sweep, write_jsonl

SMALL = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2", "draw_figures=false",
         f"prefixes.path={SMALL_PREFIXES}", "analysis.noise_floor=false"]


def manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def conditions(run_dir):
    return pd.read_parquet(run_dir / "conditions.parquet").drop(columns=TIMING_COLUMNS)


def test_one_failing_condition_is_isolated_and_retried_alone(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(SweepFailed, match="story-02/news-harbour/24"):
        sweep(run, *SMALL, "debug.fail_conditions=[story-02/news-harbour/24]")
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "failed" and status["failed"] == ["story-02/news-harbour/24"]
    assert status["conditions"] == 42
    df = pd.read_parquet(run / "conditions.parquet")
    assert len(df) == 41
    # the failing batch was retried one condition at a time: its other members say so
    alone = df[df.computed_alone]
    assert len(alone) == 9 and set(alone.prefix_len) == {24} and set(alone.prompt_id) == {"story-02"}
    failures = list((run / "failures").glob("*.json"))
    assert len(failures) == 1 and "InjectedFailure" in failures[0].read_text()
    sweep(run, *SMALL)  # the same run, no injection: only the failed condition is computed
    assert manifest(run)["computed_this_run"] == 1 and manifest(run)["reused"] == 41
    assert len(pd.read_parquet(run / "conditions.parquet")) == 42 and not list((run / "failures").glob("*.json"))


def test_a_failing_reference_fails_its_prompt_only(tmp_path):
    with pytest.raises(SweepFailed, match="21 condition"):
        sweep(tmp_path, *SMALL, "debug.fail_conditions=[story-01/A]")
    df = pd.read_parquet(tmp_path / "conditions.parquet")
    assert set(df.prompt_id) == {"story-02"} and len(df) == 21


def test_changed_settings_are_refused_or_recomputed(tmp_path):
    run = tmp_path / "run"
    small = ["model=tiny", "prefix.lengths=[8]", "decode.max_new_tokens=4", "prompts.limit=1", *SMALL[4:]]
    sweep(run, *small)
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    changed = [*small[:2], "decode.max_new_tokens=5", *small[3:]]
    with pytest.raises(HarnessError, match="different configuration"):
        sweep(run, *changed)
    after = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    assert after == before  # the refused command changed nothing, not even the status or .hydra
    # resume keeps the files, but no stored result matches the new settings: all recomputed
    sweep(run, *changed, "on_existing=resume")
    assert manifest(run)["reused"] == 0 and manifest(run)["computed_this_run"] == 11
    assert pd.read_parquet(run / "conditions.parquet").n_continuation_tokens.max() <= 5
    sweep(run, *small, "on_existing=fresh")
    assert manifest(run)["reused"] == 0
    assert len(list((run / "results").glob("*.npz"))) == 11


def test_check_determinism_reproduces_a_batched_run(tiny_run, capsys):
    assert check(tiny_run, sample=4, tolerance=1e-5) == 0
    out = capsys.readouterr().out
    # the sample is 4 B/C conditions; the A references of their prompts are compared too, and counted apart
    assert "rechecked 4 conditions" in out and "A references of their 2 prompts" in out
    assert "token differences: 0" in out and "reproduced" in out


def test_check_determinism_sees_a_changed_table(tiny_run, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    df = pd.read_parquet(copy / "conditions.parquet")
    df.loc[df.group != "A", "continuation_ids"] = df.loc[df.group != "A", "continuation_ids"].map(lambda ids: [1, 2, 3])
    df.to_parquet(copy / "conditions.parquet", index=False)
    # an edited table is not the one the run wrote: refused before the model loads, unless trusted
    with pytest.raises(HarnessError, match=r"conditions.parquet is not the table this run wrote .*--trust-damaged"):
        check(copy, sample=2, tolerance=1e-5)
    assert check(copy, sample=2, tolerance=1e-5, trust_damaged=True) == 1
    assert "NOT reproduced: 2 token differences" in capsys.readouterr().out


def test_collect_keeps_shared_reference_once(tmp_path):
    runs = [sweep(tmp_path / f"job{n}", *SMALL[:1], f"prefix.lengths=[{n}]", *SMALL[2:]) for n in (8, 24)]
    out = tmp_path / "collected"
    assert collect(runs, out) == 0
    c = pd.read_parquet(out / "conditions.parquet")
    # 2 prompts x (A once + 10 prefixes x 2 lengths): A ran in both jobs and is kept once
    assert len(c) == 2 * (1 + 10 * 2)
    assert c.groupby("prefix_len").size().to_dict() == {0: 2, 8: 20, 24: 20}
    a = pd.read_parquet(out / "attention.parquet")
    assert len(a) == len(c) * 2 * 4 * 2
    combined = json.loads((out / "manifest.json").read_text())
    assert len(combined["sources"]) == 2 and combined["incomplete"] == []
    assert combined["duplicate_keys_dropped"] == 2 and combined["duplicate_keys_disagreeing"] == 0

    (runs[1] / "status.json").unlink()  # a run that did not finish is reported, not dropped silently
    assert collect(runs, tmp_path / "partial") == 1
    assert collect(runs, tmp_path / "partial", allow_partial=True) == 0


def test_collect_refuses_disagreeing_duplicates(tmp_path, capsys):
    runs = [sweep(tmp_path / f"n{n}", *SMALL[:2], f"decode.max_new_tokens={n}", *SMALL[3:]) for n in (3, 6)]
    with pytest.raises(HarnessError, match=r"42 condition\(s\) appear in several runs with different results.*"
                                           r"decode\.max_new_tokens \(3 vs 6\)"):
        collect(runs, tmp_path / "out")
    with pytest.raises(HarnessError, match=r"the runs differ in max_new_tokens \(3 in .* vs 6 in .*--allow-mixed"):
        collect(runs, tmp_path / "out", allow_disagreement=True)
    assert collect(runs, tmp_path / "out", allow_disagreement=True, allow_mixed_settings=True) == 0
    assert "42 repeated keys have different results" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["duplicate_keys_disagreeing"] == 42


def test_collect_refuses_runs_of_different_settings_without_shared_conditions(tmp_path):
    """Different max_new_tokens and no key in common: nothing disagrees, yet one table would mix
    4- and 8-token continuations; and one model in two dtypes would mix precisions."""
    prompts = {n: write_jsonl(tmp_path / f"q{n}.jsonl", [{"id": f"q{n}", "text": f"The little robot opened door {n}"}])
               for n in (8, 16)}  # no prompt, so no condition, in common (one text under two ids is refused)
    runs = [sweep(tmp_path / f"n{n}", "model=tiny", f"prefix.lengths=[{n}]", f"decode.max_new_tokens={n // 2}",
                  *SMALL[3:], f"prompts.path={prompts[n]}") for n in (8, 16)]
    with pytest.raises(HarnessError, match=r"differ in max_new_tokens \(4 in .*n8 vs 8 in .*n16\)"):
        collect(runs, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    dtypes = [sweep(tmp_path / d, "model=tiny", "prefix.lengths=[8]", f"model.dtype={d}", *SMALL[2:],
                    f"prompts.path={prompts[n]}") for d, n in (("float32", 8), ("bfloat16", 16))]
    with pytest.raises(HarnessError, match=r"dtype for model .* \(float32 in .* vs bfloat16 in"):
        collect(dtypes, tmp_path / "out2")


def test_collect_aligns_a_run_without_attention(tmp_path, capsys):
    with_att = sweep(tmp_path / "att", *SMALL[:1], "prefix.lengths=[8]", *SMALL[2:])
    without = sweep(tmp_path / "noatt", *SMALL[:1], "prefix.lengths=[24]", *SMALL[2:], "analysis.attention=false")
    for order in ([without, with_att], [with_att, without]):
        out = tmp_path / f"out{order[0].name}"
        assert collect(order, out) == 0
        c = pd.read_parquet(out / "conditions.parquet")
        # A (in both runs) keeps the copy with attention values, whichever run is listed first
        assert c[c.group == "A"].attn_kl_mean.notna().all() and len(c[c.group == "A"]) == 2
        assert c[c.prefix_len == 24].attn_kl_mean.isna().all() and c[c.prefix_len == 8].attn_kl_mean.notna().all()
        assert set(pd.read_parquet(out / "attention.parquet").prefix_len) == {0, 8}
    assert "ran without attention analysis" in capsys.readouterr().out


def test_collect_keeps_the_attention_copy_of_the_same_design_whatever_each_run_flags_near_ties(tmp_path):
    """Each run flags near ties against its own noise floor: copies of one key that differ only
    there are the same result (they were refused as a disagreement)."""
    design = [o for o in SMALL if o != "analysis.noise_floor=false"] + ["prefix.lengths=[8]"]
    with_att = sweep(tmp_path / "att", *design)
    without = sweep(tmp_path / "noatt", *design, "analysis.attention=false", "analysis.noise_floor=false")
    flags = [pd.read_parquet(r / "conditions.parquet").near_tie for r in (with_att, without)]
    assert flags[0].notna().all() and flags[1].isna().all()  # the copies differ in the flag
    assert collect([without, with_att], tmp_path / "out") == 0
    c = pd.read_parquet(tmp_path / "out" / "conditions.parquet")
    assert len(c) == len(flags[0]) and c.attn_kl_mean.notna().all() and c.near_tie.notna().all()

