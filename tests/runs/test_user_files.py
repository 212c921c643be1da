"""The harness deletes only files it wrote: a redraw or ``on_existing=fresh`` removes its own
figures (by exact name) and cut-off temporary files, never a user's file beside them."""

import shutil

from harness.cli import main
from harness.reporting.figure_names import FIGURE_NAMES
from harness.reporting.figure_set import make_figures
from harness.runs.reading import load_runs
from harness.runs.rundir import RunDir
from tests.support import sweep

USER_FILES = ("figure_for_paper.png", "fig_annotated.pdf", "fig1_edit_distance_v2.png", "notes.txt")


def with_user_files(run):
    figures = run / "figures"
    figures.mkdir(exist_ok=True)
    for name in USER_FILES:
        (figures / name).write_text("mine")
    cut_off = figures / ".fig1_edit_distance.png.k3j2h1.tmp"  # what a killed draw leaves
    cut_off.write_text("partial")
    return figures, cut_off


def test_every_figure_the_set_draws_is_named(tiny_run):
    conditions, attention = load_runs([tiny_run])
    assert set(make_figures(conditions, attention)) <= set(FIGURE_NAMES)


def test_a_redraw_keeps_the_users_files(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    figures, cut_off = with_user_files(run)
    assert main(["figures", str(run)]) == 0
    assert all((figures / name).read_text() == "mine" for name in USER_FILES)
    assert not cut_off.exists() and (figures / "fig1_edit_distance.png").is_file()


def test_a_fresh_rerun_keeps_the_users_files(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    figures, cut_off = with_user_files(run)
    overrides = [o for o in RunDir(run).overrides() if not o.startswith("hydra.run.dir=")]
    sweep(run, *overrides, "on_existing=fresh", "draw_figures=false")
    assert all((figures / name).read_text() == "mine" for name in USER_FILES)
    assert not cut_off.exists() and not (figures / "fig1_edit_distance.png").exists()


def test_no_out_is_a_run_or_inside_one(tiny_run, tmp_path, capsys):
    from tests.support import one_line_error

    other = tmp_path / "other"
    shutil.copytree(tiny_run, other)
    run = str(tiny_run)
    for argv in (["claims", run, "--out", str(other)], ["claims", run, "--out", str(tiny_run / "claims")],
                 ["collect", run, "--out", str(tiny_run / "figures")], ["collect", run, "--out", str(other / "x")],
                 ["figures", run, "--out", str(other)], ["plan", run, "--out", str(tiny_run / "results" / "x")],
                 ["causal-heads", run, "--out", str(other / "heads"), "--ranking-only"]):
        error = one_line_error(capsys, argv)
        assert "a command's own output never goes inside a run" in error, argv
    assert not (tiny_run / "claims").exists() and not (other / "x").exists()
    # redrawing into the run read is what `harness figures RUN` does
    assert main(["figures", str(other)]) == 0
