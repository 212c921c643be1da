"""The eighth adversarial pass's cases (issue 67; 161 new cases on 22e9c99): each lost a file, said
nothing, raised a traceback or misled before; one clear line (or the right result) now."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import harness as H
from harness.cli import main
from harness.errors import HarnessError
from tests.support import FAST, SMALL_PREFIXES, one_line_error, sweep, write_jsonl

MULTIRUN = ["sweep", "-m", *FAST, "prompts.limit=1", "prefix.lengths=[8]", "seed=0,1"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("pass8") / "base", *FAST)


def test_a_multirun_never_writes_over_a_users_files_nor_into_another_commands_output(base, tmp_path, capsys):
    """#037 (lost: the user's multirun.yaml replaced), #033, #036, #032 (a file: a traceback)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "multirun.yaml").write_text("my own notes")
    assert "holds files that are not a multirun's" in one_line_error(capsys, [*MULTIRUN, f"hydra.sweep.dir={mine}"])
    assert (mine / "multirun.yaml").read_text() == "my own notes"
    search = tmp_path / "loc"
    search.mkdir()
    (search / "locate.json").write_text("{}")
    assert "holds a locate search" in one_line_error(capsys, [*MULTIRUN, f"hydra.sweep.dir={search}"])
    assert main(["claims", str(base), "--out", str(tmp_path / "c"), "--resamples", "20"]) == 0
    line = one_line_error(capsys, [*MULTIRUN, f"hydra.sweep.dir={tmp_path / 'c'}"])
    assert "holds the output of `harness claims`" in line
    (tmp_path / "file").write_text("hi")
    assert "is a file" in one_line_error(capsys, [*MULTIRUN, f"hydra.sweep.dir={tmp_path / 'file'}"])


def test_a_job_directory_outside_its_multirun_is_refused(tmp_path, capsys):
    """#035: '../esc${hydra.job.num}' put the jobs outside, and the summary said 'all 0 jobs complete'."""
    line = one_line_error(capsys, [*MULTIRUN, f"hydra.sweep.dir={tmp_path / 'ms'}",
                                   "hydra.sweep.subdir=../esc${hydra.job.num}"])
    assert "leads out of it" in line and not list(tmp_path.iterdir())


def test_the_python_report_writer_checks_its_directory(base, tmp_path):
    """#140 (lost: a user's report.md overwritten), #139 (a report written into another run)."""
    tables = H.load_run(base)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my precious report")
    with pytest.raises(HarnessError, match="holds files no harness command wrote there"):
        H.write_outputs(tables.conditions, tables.attention, mine)
    assert (mine / "report.md").read_text() == "my precious report"
    with pytest.raises(HarnessError, match="is the run directory"):
        H.write_outputs(tables.conditions, tables.attention, base)
    written = H.write_outputs(tables.conditions, tables.attention, tmp_path / "page")
    assert tmp_path / "page" / "report.md" in written and (tmp_path / "page" / "figures" / "fig0_c_minus_b.png").is_file()


def test_a_report_of_replaced_tables_is_removed_not_left_beside_them(base, tmp_path, capsys):
    """#137 (a resume that changed the design left the old report), #015 (collect again, the same)."""
    run = tmp_path / "run"
    shutil.copytree(base, run)
    assert main(["figures", str(run)]) == 0 and main(["collect", str(run), "--out", str(tmp_path / "c")]) == 0
    assert main(["figures", str(tmp_path / "c")]) == 0
    mine = run / "figures" / "figure_for_paper.png"
    mine.write_bytes(b"mine")
    assert main(["resume", str(run), "prompts.limit=1", "--accept-changes"]) == 0
    assert not (run / "report.md").exists() and not (run / "contrasts.parquet").exists()
    assert not (run / "figures" / "fig0_c_minus_b.png").exists() and mine.read_bytes() == b"mine"
    capsys.readouterr()
    assert main(["collect", str(run), "--out", str(tmp_path / "c")]) == 0
    said = capsys.readouterr().out
    assert "removed" in said and "repeated rows" not in said and not (tmp_path / "c" / "report.md").exists()


def test_one_prefix_neutral_in_one_run_and_instruction_like_in_another_is_refused(base, tmp_path, capsys):
    """#024: the same text as B in one run and C in the other; C - B compared a prefix with itself."""
    rows = [json.loads(line) for line in SMALL_PREFIXES.read_text().splitlines() if line.strip()]
    flipped = next(r for r in rows if r["kind"] == "neutral")
    bank = write_jsonl(tmp_path / "bank.jsonl", [{**r, "kind": "instruction"} if r is flipped else r for r in rows])
    other = sweep(tmp_path / "other", *[o for o in FAST if not o.startswith("prefixes.path")], f"prefixes.path={bank}")
    line = one_line_error(capsys, ["claims", str(base), str(other), "--out", str(tmp_path / "k")])
    assert f"the prefix id '{flipped['id']}' is group B" in line and "group" in line


def test_detect_refuses_one_prompt_id_naming_two_texts(base, tmp_path, capsys):
    """#022, #026: detect pooled them, where every other reader refuses."""
    prompts = H.compose(FAST).prompts.path
    lines = Path(prompts).read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    other_file = write_jsonl(tmp_path / "p.jsonl", [{**first, "text": "A different opening."}, *lines[1:2]])
    other = sweep(tmp_path / "other", *FAST, f"prompts.path={other_file}")
    line = one_line_error(capsys, ["detect", str(base), str(other), "--out", str(tmp_path / "d")])
    assert f"give the prompt id '{first['id']}' different texts" in line and not (tmp_path / "d").exists()


def test_a_refused_causal_heads_leaves_no_directory(base, tmp_path, capsys):
    """#067: a refusal after the output was marked left a directory holding only the marker."""
    line = one_line_error(capsys, ["causal-heads", str(base), "--ranking-only", "--rank-by", "nope"])
    assert "nope" in line and not (base.parent / "base-causal-heads").exists()


def test_resume_and_readers_name_another_commands_output(base, tmp_path, capsys):
    """#069 (resume of a collected set advised a sweep into it), #070 and #159 (detect's output was
    called a run with a missing table)."""
    assert main(["collect", str(base), "--out", str(tmp_path / "c")]) == 0
    line = one_line_error(capsys, ["resume", str(tmp_path / "c")])
    assert "holds the output of `harness collect`, not a sweep" in line
    detected = tmp_path / "d"
    detected.mkdir()
    (detected / ".harness-output.json").write_text(json.dumps({"command": "detect", "runs": [str(base)]}))
    (detected / "status.json").write_text(json.dumps({"status": "complete", "command": "detect"}))
    assert "holds the output of `harness detect`" in one_line_error(capsys, ["figures", str(detected)])
    with pytest.raises(HarnessError, match="holds the output of `harness detect`"):
        H.load_run(detected)


def test_a_run_log_that_is_a_directory_is_one_line(base, tmp_path, capsys):
    """#082: an IsADirectoryError traceback from the log handler, exit 3."""
    run = tmp_path / "run"
    shutil.copytree(base, run)
    (run / "sweep.log").unlink()
    (run / "sweep.log").mkdir()
    assert "is not a file (a directory?)" in one_line_error(capsys, ["resume", str(run)])


def test_analysis_arguments_a_table_cannot_mean_are_refused(base):
    """#115, #117, #118 (a typo pooled silently), #098 (max_k 10**6 filled 24 GB), #113 (a text column)."""
    tables = H.load_run(base)
    with pytest.raises(ValueError, match="segment must be a segment the table holds"):
        H.head_contrasts(tables.attention, segment="bogus", permutation=False)
    with pytest.raises(ValueError, match="by must name columns of the table, got 'nope'"):
        H.survival(tables.conditions, by=("nope",))
    with pytest.raises(ValueError, match="by must name columns of the table, got 'nope'"):
        H.drift_summary(tables.conditions, by=("group", "nope"))
    with pytest.raises(ValueError, match=r"max_k must be at most the longest continuation \(6 tokens\)"):
        H.survival(tables.conditions, max_k=10**6)
    with pytest.raises(ValueError, match="value must name a column of numbers or booleans"):
        H.compare_groups(tables.conditions, "continuation_text", power=False)
    assert len(H.survival(tables.conditions, max_k=6)) > 0


def test_make_figures_as_the_api_page_shows_it_draws_figure_zero(base):
    """#138: the documented call returned figures 1-7 without figure 0."""
    import matplotlib.pyplot as plt

    tables = H.load_run(base)
    figures = H.make_figures(tables.conditions, tables.attention, tables.noise)
    assert next(iter(figures)) == "fig0_c_minus_b"
    plt.close("all")


def test_a_run_without_group_c_says_there_is_no_c_minus_b(tmp_path):
    """Pass 8's notes: an A,B-only run's contrasts.parquet gave its C - B rows the note '0 prompts'."""
    run = sweep(tmp_path / "ab", *[o for o in FAST if o != "draw_figures=false"], "groups=[A,B]", "prompts.limit=3")
    assert "No C - B: the runs hold no group C." in (run / "report.md").read_text()
    assert not (run / "contrasts.parquet").exists()


def test_sigterm_in_a_command_that_reads_runs_says_its_line_and_exits_143(base, monkeypatch, capsys):
    """Pass 8's notes: claims killed by SIGTERM exited 143 with no word (Ctrl-C said its line)."""
    import os
    import signal

    import harness.cli.claims as tables

    def terminated(args):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler main installs turns it into Terminated
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(tables, "claims", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["claims", str(base)]) == 143
    assert "terminated: `harness claims` stopped" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before  # put back for whoever called main
