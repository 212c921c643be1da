"""Sweeps that survive: SIGKILL and resume, failure isolation, multirun launchers, collect."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from harness.tables import TIMING_COLUMNS

from .conftest import run_harness

# 6 prompts x (A + 10 prefixes x 4 lengths) = 246 conditions: a few seconds on the tiny model.
SWEEP = ["model=tiny", "prefix.lengths=[8,16,24,32]", "decode.max_new_tokens=6", "prompts.limit=6",
         "draw_figures=false"]
TOTAL = 6 * (1 + 10 * 4)


def manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def tables(run_dir):
    c = pd.read_parquet(run_dir / "conditions.parquet").drop(columns=TIMING_COLUMNS)
    return c, pd.read_parquet(run_dir / "attention.parquet")


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    killed = tmp_path / "killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sweep", *SWEEP, f"hydra.run.dir={killed}"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = killed / "results"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if results.is_dir() and len(list(results.glob("*.npz"))) >= 40:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in results.glob("*.npz")}
    assert 40 <= len(finished) < TOTAL
    assert not (killed / "conditions.parquet").exists()
    for p in results.glob("*.npz"):  # every stored result is complete and readable
        with np.load(p) as data:
            assert "record" in data.files

    result = run_harness("resume", str(killed), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    m = manifest(killed)
    assert m["reused"] == len(finished) and m["computed_this_run"] == TOTAL - len(finished)
    for name, mtime in finished.items():  # nothing finished before the kill was recomputed
        assert (results / name).stat().st_mtime_ns == mtime
    assert not list(results.glob(".*.tmp"))

    fresh = tmp_path / "fresh"
    assert run_harness("sweep", *SWEEP, f"hydra.run.dir={fresh}", cwd=tmp_path).returncode == 0
    (c1, a1), (c2, a2) = tables(killed), tables(fresh)
    assert len(c1) == TOTAL and not c1.duplicated(["prompt_id", "group", "prefix_id", "prefix_len"]).any()
    pd.testing.assert_frame_equal(c1, c2)
    pd.testing.assert_frame_equal(a1, a2)


def test_one_failing_condition_is_isolated_and_retried_alone(tmp_path):
    run = tmp_path / "run"
    small = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2", "draw_figures=false"]
    result = run_harness("sweep", *small, "debug.fail_conditions=[story-02/news-harbour/24]", f"hydra.run.dir={run}",
                         cwd=tmp_path)
    assert result.returncode == 1
    assert "story-02/news-harbour/24" in result.stderr.strip().splitlines()[-1]
    status = json.loads((run / "status.json").read_text())
    assert status == {"status": "failed", "conditions": 42, "failed": ["story-02/news-harbour/24"]}
    assert len(pd.read_parquet(run / "conditions.parquet")) == 41
    result = run_harness("sweep", *small, f"hydra.run.dir={run}", cwd=tmp_path)  # the same run, no injection
    assert result.returncode == 0, result.stderr
    assert manifest(run)["computed_this_run"] == 1 and manifest(run)["reused"] == 41
    assert len(pd.read_parquet(run / "conditions.parquet")) == 42


def test_changed_settings_are_refused_or_recomputed(tmp_path):
    run = tmp_path / "run"
    small = ["model=tiny", "prefix.lengths=[8]", "decode.max_new_tokens=4", "prompts.limit=1", "draw_figures=false"]
    assert run_harness("sweep", *small, f"hydra.run.dir={run}", cwd=tmp_path).returncode == 0
    changed = [*small[:2], "decode.max_new_tokens=5", *small[3:]]
    result = run_harness("sweep", *changed, f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 2 and "different configuration" in result.stderr
    # resume keeps the files, but no stored result matches the new settings: all recomputed
    result = run_harness("sweep", *changed, "on_existing=resume", f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert manifest(run)["reused"] == 0 and manifest(run)["computed_this_run"] == 11
    assert pd.read_parquet(run / "conditions.parquet").n_continuation_tokens.max() <= 5
    result = run_harness("sweep", *small, "on_existing=fresh", f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0 and manifest(run)["reused"] == 0
    assert len(list((run / "results").glob("*.npz"))) == 11


def test_multirun_with_joblib_then_collect(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_harness("sweep", "-m", "hydra/launcher=local", "model=tiny", "prefix.lengths=[8],[24]",
                         "decode.max_new_tokens=6", "prompts.limit=2", "draw_figures=false",
                         f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for job in ("0", "1"):
        lengths = set(pd.read_parquet(sweep / job / "conditions.parquet").prefix_len) - {0}
        assert len(lengths) == 1
    out = tmp_path / "collected"
    result = run_harness("collect", str(sweep), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    c = pd.read_parquet(out / "conditions.parquet")
    # 2 prompts x (A once + 10 prefixes x 2 lengths): A ran in both jobs and is kept once
    assert len(c) == 2 * (1 + 10 * 2)
    assert c.groupby("prefix_len").size().to_dict() == {0: 2, 8: 20, 24: 20}
    a = pd.read_parquet(out / "attention.parquet")
    assert len(a) == len(c) * 2 * 4 * 2
    combined = json.loads((out / "manifest.json").read_text())
    assert len(combined["sources"]) == 2 and combined["incomplete"] == []

    # a job that did not finish is reported, not dropped silently
    (sweep / "1" / "status.json").unlink()
    result = run_harness("collect", str(sweep), "--out", str(tmp_path / "partial"), cwd=tmp_path)
    assert result.returncode == 1 and "did not finish" in result.stdout


def test_multirun_with_submitit_local(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_harness("sweep", "-m", "hydra/launcher=submitit_local", "model=tiny", "prefix.lengths=[8]",
                         "decode.max_new_tokens=4", "prompts.limit=1", "draw_figures=false",
                         f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((sweep / "0" / "status.json").read_text())["status"] == "complete"
    assert len(pd.read_parquet(sweep / "0" / "conditions.parquet")) == 11


def test_check_determinism(tiny_run, tmp_path):
    result = run_harness("check-determinism", str(tiny_run[0]), "--sample", "4", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "token differences: 0" in result.stdout and "reproduced" in result.stdout
