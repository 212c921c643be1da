"""Real processes killed at random points (SIGKILL and SIGTERM), two sweeps racing for one run
directory, and Hydra's multirun launchers. The sweeps that are signalled or race are forked
processes (tests/forked.py: real processes that skip the imports); the joblib launcher's parent is
a plain ``python -m harness``, because its workers do not start from a fork server's child."""

import json
import random
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.io import sha256_file, write_sealed_json
from harness.runs.rundir import RunDir
from harness.runs.schema import TIMING_COLUMNS
from tests.forked import Harness, run_forked
from tests.support import FAST, SMALL_PREFIXES, run_harness, sweep

pytestmark = pytest.mark.slow

# 2 prompts x (A + 10 prefixes x 3 lengths) = 62 conditions: about a second and a half on the tiny model.
SWEEP = ["model=tiny", "prefix.lengths=[8,16,24]", "decode.max_new_tokens=6", "prompts.limit=2",
         "draw_figures=false", f"prefixes.path={SMALL_PREFIXES}", "analysis.noise_floor=false", "batch_size=4"]
TOTAL = 2 * (1 + 10 * 3)


def tables(run_dir):
    return (pd.read_parquet(run_dir / "conditions.parquet").drop(columns=TIMING_COLUMNS),
            pd.read_parquet(run_dir / "attention.parquet"))


def start(run_dir, *overrides):
    return Harness("sweep", *overrides, f"hydra.run.dir={run_dir}", cwd=run_dir.parent)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return tables(sweep(tmp_path_factory.mktemp("reference") / "run", *SWEEP))


# Ten trials, each its own test so that parallel workers share them out; even trials SIGKILL,
# odd ones SIGTERM, each at a random point drawn from its own seed.
@pytest.mark.parametrize("trial", range(10))
def test_killed_at_random_points_resume_to_the_uninterrupted_tables(tmp_path, reference, trial):
    rng = random.Random(trial)
    sig = signal.SIGKILL if trial % 2 == 0 else signal.SIGTERM
    run = tmp_path / f"trial{trial}"
    run.mkdir()
    # results to wait for before the signal: trial 0 kills during start-up; the others wait for at
    # least one, so the sweep owns the directory (and, for SIGTERM, its handler is what is tested)
    target = 0 if trial == 0 else rng.randint(1, TOTAL - 20)
    proc = start(run, *SWEEP)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        done = len(list((run / "results").glob("*.npz"))) if (run / "results").is_dir() else 0
        if done >= target:
            break
        time.sleep(0.01)
    assert proc.poll() is None, f"trial {trial}: the sweep finished before the signal; make it longer"
    time.sleep(rng.uniform(0, 0.05))
    proc.send_signal(sig)
    ended = proc.wait(timeout=60)
    if sig == signal.SIGKILL:
        assert ended.returncode == -signal.SIGKILL, ended  # killed, not finished
    else:
        # handled like Ctrl-C: a message, exit 143, status "interrupted", no half-written file left behind
        assert ended.returncode == 143 and "harness resume" in ended.stderr, ended.stderr
        assert json.loads((run / "status.json").read_text())["status"] == "interrupted"
        assert not list((run / "results").glob(".*.tmp"))
    sweep(run, *SWEEP)  # resume
    for got, want in zip(tables(run), reference):
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_two_sweeps_racing_into_one_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    first = start(run, *SWEEP)
    while not (run / "results").is_dir() or not list((run / "results").glob("*.npz")):
        assert first.poll() is None, first.wait().stderr
        time.sleep(0.02)
    second = run_forked("sweep", *SWEEP[:2], "decode.max_new_tokens=3", *SWEEP[3:], f"hydra.run.dir={run}",
                         cwd=tmp_path)
    first = first.wait(timeout=120)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 2 and ("another sweep or resume is writing" in second.stderr
                                       or "different configuration" in second.stderr), second.stderr
    c = pd.read_parquet(run / "conditions.parquet")
    assert len(c) == TOTAL and c.n_continuation_tokens.max() == 6  # the first sweep's settings only
    assert "max_new_tokens: 6" in (run / ".hydra" / "config.yaml").read_text()


def multirun(start, tmp_path: Path, *overrides: str):
    """``harness sweep -m model=tiny OVERRIDES`` on the small prefix set into ``tmp_path/sweep``,
    started by ``start`` (a real process, or one forked from the fork server); returns
    (the finished process, the sweep directory)."""
    sweep_dir = tmp_path / "sweep"
    result = start("sweep", "-m", "model=tiny", *overrides, "draw_figures=false", f"prefixes.path={SMALL_PREFIXES}",
                   f"hydra.sweep.dir={sweep_dir}", cwd=tmp_path)
    return result, sweep_dir


def test_multirun_with_joblib_then_collect(tmp_path):
    # a real process: joblib's workers do not start from a fork server's child
    result, sweep_dir = multirun(run_harness, tmp_path, "hydra/launcher=local", "prefix.lengths=[8],[24]",
                                 "decode.max_new_tokens=6", "prompts.limit=2")
    assert result.returncode == 0, result.stderr
    for job in ("0", "1"):
        lengths = set(pd.read_parquet(sweep_dir / job / "conditions.parquet").prefix_len) - {0}
        assert len(lengths) == 1
    assert main(["collect", str(sweep_dir), "--out", str(tmp_path / "collected")]) == 0
    assert len(pd.read_parquet(tmp_path / "collected" / "conditions.parquet")) == 2 * (1 + 10 * 2)


def test_multirun_names_a_failed_job_and_exits_1(tmp_path):
    result, _ = multirun(run_forked, tmp_path, "prefix.lengths=[8],[0]", "decode.max_new_tokens=2", "prompts.limit=1",
                         "analysis.noise_floor=false")
    assert result.returncode == 1
    assert "1 of 2 job(s)" in result.stderr and "positive integers" in result.stderr


def test_multirun_with_submitit_local(tmp_path):
    result, sweep_dir = multirun(run_forked, tmp_path, "hydra/launcher=submitit_local", "prefix.lengths=[8]",
                                 "decode.max_new_tokens=4", "prompts.limit=1")
    assert result.returncode == 0, result.stderr
    assert json.loads((sweep_dir / "0" / "status.json").read_text())["status"] == "complete"
    assert len(pd.read_parquet(sweep_dir / "0" / "conditions.parquet")) == 11


# -- the run directory's last gaps: user errors are one line with status 2, bugs ask for a report --

def test_a_bug_in_a_command_exits_3_and_asks_for_a_bug_report(tiny_run, tmp_path, monkeypatch, capsys):
    import harness.runs.rundir

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(harness.runs.rundir.RunDir, "table", broken)
    assert main(["figures", str(tiny_run), "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err and "bug in the harness" in err


def test_a_bug_during_a_sweep_exits_3_and_the_status_says_so(tmp_path, monkeypatch, capsys):
    import harness.runs.runner

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(harness.runs.runner, "tables_of", broken)
    assert main(["sweep", *FAST, "prefix.lengths=[8]", f"hydra.run.dir={tmp_path / 'run'}"]) == 3
    assert "bug in the harness" in capsys.readouterr().err
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["status"] == "error" and "internal error (RuntimeError: boom)" in status["error"]


def test_collect_out_refuses_a_run_directory_and_a_file(tiny_run, tmp_path, capsys):
    before = {p: p.read_bytes() for p in tiny_run.rglob("*") if p.is_file()}
    assert main(["collect", str(tiny_run), "--out", str(tiny_run)]) == 2
    assert "run directory" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tiny_run.rglob("*") if p.is_file()} == before
    (tmp_path / "file").write_text("x")
    assert main(["collect", str(tiny_run), "--out", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_figures_and_collect_on_a_run_with_no_conditions_are_one_line(tiny_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    pd.read_parquet(run / "conditions.parquet").iloc[:0].to_parquet(run / "conditions.parquet")
    manifest = RunDir(run).manifest()  # a valid table the run itself wrote
    manifest["tables"]["conditions.parquet"] = sha256_file(run / "conditions.parquet")
    write_sealed_json(manifest, run / "manifest.json")
    for args in (["figures", str(run)], ["collect", str(run), "--out", str(tmp_path / "out")]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "holds no conditions" in err[0], err


def test_train_demo_left_the_harness_and_says_where_in_one_line(capsys):
    """Training the demo models is the demo_training distribution's ``harness-train-demo`` now:
    the old command, with any options, is one line saying so, and the usage no longer lists it."""
    assert main(["train-demo", "--corpus", "stories.txt", "--out", "model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "harness-train-demo" in err[0], err
    assert "demo_training" in err[0]
    assert main(["--help"]) == 0
    assert "train-demo" not in capsys.readouterr().out


def test_fresh_deletes_only_what_the_harness_wrote_and_no_stale_figure_survives(tmp_path):
    run = tmp_path / "run"
    sweep(run, *FAST, "prefix.lengths=[8]")
    for name in ("figures/fig5_isolation.png", "figures/fig5_isolation.pdf", "figures/.fig1_edit_distance.png.x.tmp"):
        (run / name).parent.mkdir(exist_ok=True)
        (run / name).write_text("from an earlier run")
    mine = [run / "figures" / "my_notes.txt", run / "results" / "my_notes.txt", run / "failures" / "keep.txt"]
    for path in mine:
        path.write_text("not the harness's")
    sweep(run, *FAST, "prefix.lengths=[8]", "on_existing=fresh")
    assert not list((run / "figures").glob("fig5_*")) and not list((run / "figures").glob(".fig*.tmp"))
    assert all(path.read_text() == "not the harness's" for path in mine)


def test_redrawing_figures_removes_a_killed_draws_temporary_files(tiny_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    stale = run / "figures" / ".fig1_edit_distance.png.abc123.tmp"
    stale.write_bytes(b"cut off")
    assert main(["figures", str(run)]) == 0
    assert not stale.exists() and (run / "figures" / "fig1_edit_distance.png").is_file()


def terminated_in_job(sweep_dir: Path, seeds: str, job: int):
    """``harness sweep -m`` over ``seeds`` into ``sweep_dir``, sent SIGTERM once job ``job`` has stored a
    result; the finished process (handled like Ctrl-C: exit 143)."""
    proc = Harness("sweep", "-m", *SWEEP, seeds, f"hydra.sweep.dir={sweep_dir}", cwd=sweep_dir.parent)
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None and not list((sweep_dir / str(job)).glob("results/*.npz")):
        time.sleep(0.01)
    assert proc.poll() is None, f"job {job} finished before the signal; make it longer"
    proc.send_signal(signal.SIGTERM)
    ended = proc.wait(timeout=60)
    assert ended.returncode == 143, ended.stderr
    return ended


def test_an_interrupted_multirun_says_its_later_jobs_never_started_and_readers_say_so_too(tmp_path, capsys):
    """Pass 25 #270-#274 (silent): SIGTERM in job 0 of `seed=0,1,2` advised resuming job 0 only;
    collect of the sweep directory then reported 1 run as the whole multirun (rc 0), and claims on
    SWEEP/*/ said nothing of the jobs that never started."""
    sweep_dir = tmp_path / "sweep"
    ended = terminated_in_job(sweep_dir, "seed=0,1,2", job=0)
    assert "the multirun's later jobs did not start; continue with the same `harness sweep -m` command" in ended.stderr
    assert not (sweep_dir / "1").exists()
    sweep(sweep_dir / "0", *SWEEP, "seed=0")  # `harness resume SWEEP/0`: job 0 alone finished
    capsys.readouterr()
    assert main(["collect", str(sweep_dir), "--out", str(tmp_path / "collected")]) == 1
    said = capsys.readouterr().out
    assert "is a multirun of 3 jobs (multirun.yaml), of which 1 exist: 2 never started" in said
    assert main(["claims", str(sweep_dir / "0"), "--out", str(tmp_path / "claims"), "--resamples", "50"]) == 0
    assert "2 never started" in (tmp_path / "claims" / "claims.md").read_text()


def test_a_multirun_interrupted_in_its_last_job_advises_resuming_that_job(tmp_path):
    """Pass 26 #221 (misleading): interrupted in its last job, a multirun still said its later jobs
    did not start."""
    sweep_dir = tmp_path / "sweep"
    ended = terminated_in_job(sweep_dir, "seed=0,1", job=1)
    assert f"continue with: harness resume {sweep_dir / '1'}" in ended.stderr and "later jobs" not in ended.stderr
