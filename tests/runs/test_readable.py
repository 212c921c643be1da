"""Readers respect a run's state (issue 67): ``figures``, ``claims``, ``plan`` and ``causal-heads``
on a run that failed, was interrupted, was killed or is being written say so in one line; a
failed run is read with ``--allow-failed`` and the page then says how many conditions are
missing; ``figures`` never writes into a run a sweep holds; runs read with
``--allow-mixed-settings`` say so on the page."""

from __future__ import annotations

import fcntl
import json
import os
import shutil

import pytest

from harness.cli import main
from harness.io import write_sealed_json
from harness.runs.runner import SweepFailed
from tests.support import FAST, one_line_error, sweep

FAILING = "story-02/product-kettle/24"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("states")
    with pytest.raises(SweepFailed):
        sweep(root / "failed", *FAST, f"debug.fail_conditions=[{FAILING}]")
    complete = sweep(root / "complete", *FAST)
    other = sweep(root / "n4", *[o for o in FAST if not o.startswith("decode.")], "decode.max_new_tokens=4")
    return {"root": root, "failed": root / "failed", "complete": complete, "n4": other}


def readers(run, out):
    return {"figures": ["figures", str(run), "--out", str(out / "figures")],
            "claims": ["claims", str(run), "--out", str(out / "claims"), "--resamples", "20"],
            "plan": ["plan", str(run)],
            "causal-heads": ["causal-heads", str(run), "--out", str(out / "heads"), "--ranking-only"]}


def copy_with_status(runs, name: str, status: dict):
    run = runs["root"] / name
    if not run.exists():
        shutil.copytree(runs["complete"], run)
    write_sealed_json({**status, "updated": "2026-12-06T00:00:00"}, run / "status.json")
    return run


@pytest.mark.parametrize("reader", ["figures", "claims", "plan", "causal-heads"])
def test_a_failed_run_is_refused_unless_allowed_and_then_the_page_says_what_is_missing(runs, reader, tmp_path, capsys):
    argv = readers(runs["failed"], tmp_path)[reader]
    line = one_line_error(capsys, argv)
    assert "is a failed run: 1 of 42 conditions failed" in line and "--allow-failed" in line
    # plan gets past the run's state, then says what the tiny model's run lacks for any claim
    assert main([*argv, "--allow-failed"]) == (2 if reader == "plan" else 0)
    err = capsys.readouterr().err
    assert "1 of 42 conditions failed and are missing" in err
    if reader == "plan":
        assert "claim 1 needs a model with at least 3 layers (this one has 2)" in err
    page = {"figures": tmp_path / "figures" / "report.md", "claims": tmp_path / "claims" / "claims.md",
            "causal-heads": tmp_path / "heads" / "causal_heads.md"}.get(reader)
    if page is not None:
        assert "> **Note:** " in page.read_text() and "1 of 42 conditions failed" in page.read_text()


@pytest.mark.parametrize("status, expected", [
    ({"status": "interrupted", "error": "interrupted (Ctrl-C or SIGTERM)"}, "did not finish: its status is interrupted"),
    ({"status": "error", "error": "model missing"}, "its status is error (model missing); what stopped it must change first"),  # pass 15, #111
    ({"status": "running", "conditions": 42, "done": 3}, "no sweep holds it (the process was killed)"),
])
def test_an_unfinished_run_is_named_with_the_command_that_finishes_it(runs, status, expected, tmp_path, capsys):
    run = copy_with_status(runs, status["status"], status)
    for reader, argv in readers(run, tmp_path).items():
        line = one_line_error(capsys, argv)
        assert expected in line and f"harness resume {run}" in line, (reader, line)


def test_figures_never_write_into_a_run_a_sweep_holds(runs, tmp_path, capsys):
    run = copy_with_status(runs, "held", {"status": "running", "conditions": 42, "done": 3})
    assert not (run / "report.md").exists()  # draw_figures=false: the sweep wrote none
    fd = os.open(run / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": 4242, "host": "node-7", "since": "now"}).encode())
        line = one_line_error(capsys, ["figures", str(run)])
        assert "is being written by a sweep or resume (pid 4242 on node-7" in line
        assert not (run / "report.md").exists()
    finally:
        os.close(fd)


def test_a_mix_of_settings_read_together_is_said_on_the_page(runs, tmp_path):
    argv = ["claims", str(runs["complete"]), str(runs["n4"]), "--out", str(tmp_path / "c"), "--resamples", "20"]
    assert main(argv) == 2
    assert main([*argv, "--allow-mixed-settings"]) == 0
    page = (tmp_path / "c" / "claims.md").read_text()
    assert "> **Note:** These runs differ in max_new_tokens" in page and "--allow-mixed-settings" in page
    assert main(["figures", str(runs["complete"]), str(runs["n4"]), "--out", str(tmp_path / "f"),
                 "--allow-mixed-settings"]) == 0
    assert "These runs differ in max_new_tokens" in (tmp_path / "f" / "report.md").read_text()


def test_a_complete_run_carries_no_note(runs, tmp_path):
    assert main(["claims", str(runs["complete"]), "--out", str(tmp_path / "c"), "--resamples", "20"]) == 0
    assert "**Note:**" not in (tmp_path / "c" / "claims.md").read_text()


def test_collect_of_a_killed_run_without_tables_says_how_to_finish_it(runs, tmp_path, capsys):
    """Pass 16, #187: 'no tables found in rk (rk: running ())' for a sweep killed before its tables:
    empty parentheses and no resume advice."""
    run = copy_with_status(runs, "killed", {"status": "running", "conditions": 42, "done": 3})
    (run / "conditions.parquet").unlink()
    line = one_line_error(capsys, ["collect", str(run), "--out", str(tmp_path / "col")])
    assert "its status says running (a sweep still writing it, or one that was killed)" in line
    assert f"harness resume {run}" in line and "()" not in line
