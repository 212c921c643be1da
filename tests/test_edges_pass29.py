"""The twenty-ninth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
3c0bcd9): the Python API read a string of overrides letter by letter, pooled an attention table as
conditions and took "no" for True; advice commands broke on paths with spaces; messages named the
wrong cause (a relative input path read elsewhere, a resume told to change hydra.run.dir, a locate
output called foreign, a quoted ~ in a Python call)."""

from __future__ import annotations

import shlex
import shutil

import pytest

import harness as H
from harness.cli import main
from harness.errors import HarnessError
from harness.paths import shell_path
from tests.support import FAST, ROOT, sweep


def test_h_run_refuses_a_string_of_overrides_before_writing(tmp_path):
    """#d6/#266 (silent): H.run(cfg, RUN, overrides="model=tiny") recorded the command one character per
    override, and `harness resume` then said "m is not an override"."""
    run_dir = tmp_path / "api"
    with pytest.raises(HarnessError, match=r"overrides must be a list of strings, e\.g\. \['model=tiny'\]"):
        H.run(H.compose(FAST), run_dir, overrides="model=tiny")
    with pytest.raises(ValueError, match="progress must be True or False"):
        H.run(H.compose(FAST), run_dir, progress="no")
    assert not run_dir.exists()


@pytest.mark.parametrize("analysis", ["contrast", "two_way_bootstrap", "prefix_permutation_test"])
def test_a_c_minus_b_of_conditions_refuses_the_attention_table(tiny_run, analysis):
    """#b30/#c4/#c5 (silent): these three pooled every layer, head and segment of the attention table as
    if they were conditions; compare_groups and the other conditions analyses refused it."""
    attention = H.load_run(tiny_run).attention
    with pytest.raises(ValueError, match=r"this is an attention table \(it has layer and head columns\)"):
        getattr(H, analysis)(attention, "kl")
    # a head's C - B of attention is what head_contrasts is for, and it still reads the table
    assert not H.head_contrasts(attention).empty


def test_switches_given_the_string_no_are_refused_not_read_as_true(tiny_run, tmp_path):
    """#f1b/#f16b/#f27 (silent): allow_partial="no", two_way="no" and permutation="no" each did what
    True does."""
    run = H.load_run(tiny_run)
    calls = {"collect": lambda: H.collect([tiny_run], tmp_path / "c", allow_partial="no"),
             "survival": lambda: H.survival(run.conditions, two_way="no"),
             "head_contrasts": lambda: H.head_contrasts(run.attention, permutation="no"),
             "bootstrap_ci": lambda: H.bootstrap_ci([1.0, 2.0, 3.0], empty_ok="no")}
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"must be True or False, got 'no'"):
            call()
    with pytest.raises(HarnessError, match=r"load_noise: trust_damaged must be True or False, got 'no'"):
        H.load_noise([tiny_run], trust_damaged="no")
    assert not (tmp_path / "c").exists()


@pytest.fixture(scope="module")
def relative_run(tmp_path_factory):
    """A run made from a directory holding its prompts file, named by a relative path."""
    made_in = tmp_path_factory.mktemp("made_in")
    (made_in / "in").mkdir()
    shutil.copy(ROOT / "harness" / "data" / "prompts_en.jsonl", made_in / "in" / "my prompts.jsonl")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(made_in)
        overrides = [o for o in FAST if not o.startswith("prompts.")] + [
            "prompts.path=in/my prompts.jsonl", "prompts.limit=2"]
        return sweep(made_in / "run", *overrides)


@pytest.mark.parametrize("command", [["check-determinism", "--sample", "1"], ["detect"]])
def test_a_relative_input_read_from_elsewhere_is_named_as_such(relative_run, tmp_path, capsys, monkeypatch, command):
    """#225/#226/#230/#231 (misleading): from another directory these said "the config now reads
    none"; the config names a file, which that directory does not hold."""
    monkeypatch.chdir(tmp_path)
    extra = ["--out", str(tmp_path / "det")] if command[0] == "detect" else []
    assert main([command[0], str(relative_run), *command[1:], *extra]) == 2
    err = capsys.readouterr().err
    assert f"and the config's prompts.path in/my prompts.jsonl names no file from {tmp_path}" in err, err
    assert "now reads none" not in err and "run it from the directory the run was made in" in err


def test_advice_commands_quote_a_path_with_a_space(tmp_path, capsys):
    """#313-#319 (misleading): `harness resume runs/sp t` and `harness collect runs/my multi` were printed
    unquoted, and failed when copied. #268 (misleading): a run made by H.run without overrides= has no
    overrides.yaml, and resume said "deleted?"."""
    run_dir = tmp_path / "run with space"
    H.run(H.compose(FAST), run_dir, progress=False)
    assert main(["resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "stopped before it recorded it, or made by H.run without overrides=, or deleted" in err
    assert f"H.run(cfg, {str(run_dir)!r})" in err and f"hydra.run.dir={shell_path(run_dir)} on_existing=resume" in err
    assert shlex.split(f"hydra.run.dir={shell_path(run_dir)}") == [f"hydra.run.dir={run_dir}"]
    (run_dir / "status.json").unlink()  # as a run stopped before it wrote its status: readers advise a resume
    assert main(["claims", str(run_dir), "--out", str(tmp_path / "cl")]) == 2
    err = capsys.readouterr().err
    advised = err.split("`harness resume ", 1)[1].split("`", 1)[0]
    assert shlex.split(advised) == [str(run_dir)], err


def test_an_out_holding_a_locate_search_is_not_said_to_hold_foreign_files(tiny_run, tmp_path, capsys):
    """V-110 (misleading): a directory `harness locate` wrote was listed among "files no harness command
    wrote there"."""
    out = tmp_path / "runs"
    (out / "l170").mkdir(parents=True)
    (out / "l170" / "locate.json").write_text("{}")
    (out / "afile").write_text("hi")
    assert main(["claims", str(tiny_run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "files no harness command wrote there (afile)" in err, err


def test_a_tilde_in_a_python_calls_output_is_expanded_as_its_readers_expand_it(tiny_run, tmp_path, monkeypatch):
    """#d13/#g1 (misleading): H.write_outputs and H.collect refused "~/X" as a quoted shell argument,
    while H.run and H.load_run expand it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    run = H.load_run(tiny_run)
    H.write_outputs(run.conditions, run.attention, "~/pages")
    assert (tmp_path / "pages" / "report.md").is_file()
    assert H.collect([tiny_run], "~/collected") == 0
    assert (tmp_path / "collected" / "conditions.parquet").is_file()


def test_a_second_writer_of_a_run_is_not_told_to_change_hydra_run_dir(tmp_path):
    """#93 (misleading): a second `harness resume` of a run being resumed was told to "choose another
    hydra.run.dir", which resume does not take; the refusal now says a sweep or resume holds it."""
    from harness.runs.lock import hold

    run = tmp_path / "r"
    run.mkdir()
    with hold(run, "sweep", "give a new sweep another run directory (hydra.run.dir)"):
        with pytest.raises(HarnessError, match=r"another sweep or resume is writing to .*; wait for it to finish, "
                                               r"or give a new sweep another run directory \(hydra.run.dir\)"):
            with hold(run, "sweep", "give a new sweep another run directory (hydra.run.dir)"):
                pass



def test_h_run_refuses_overrides_that_do_not_compose_its_config(tmp_path):
    """Pass 30 a15 (silent): H.run(cfg, RUN, overrides=[...]) recorded a command that composes another
    config, and `harness resume` then blamed the user's changes."""
    run_dir = tmp_path / "api"
    with pytest.raises(HarnessError, match=r"H.compose\(\['model=tiny'\]\) gives another config \(it differs in "
                                           r"decode.max_new_tokens"):
        H.run(H.compose(FAST), run_dir, overrides=["model=tiny"])
    assert not run_dir.exists()
    H.run(H.compose(FAST), run_dir, overrides=FAST, progress=False)  # the list that composed it: runs
    assert (run_dir / ".hydra" / "overrides.yaml").is_file()


def test_pass_30_refusals_name_the_right_cause(tiny_run, tmp_path, capsys, monkeypatch):
    """Pass 30 (misleading): `harness figures .` inside a run said "--out is empty or '.'"; build-prefixes
    --n 0 said "lower --n"; an API seed "0" failed inside numpy; a measure whose NaN means something
    (first_divergence) was planned on."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    monkeypatch.chdir(run)
    assert main(["figures", "."]) == 0
    assert (run / "report.md").is_file()
    with pytest.raises(SystemExit):
        main(["build-prefixes", "neutral", "--corpus", "c.txt", "--n", "0", "--out", str(tmp_path / "b.jsonl")])
    assert "argument --n: must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"seed must be a whole number of at least 0, got '0'"):
        H.compare_groups(H.load_run(tiny_run).conditions, "output_kl", seed="0")
    with pytest.raises(SystemExit):
        main(["plan", str(tiny_run), "--measure", "first_divergence"])
    assert "first_divergence is empty where its event did not happen" in capsys.readouterr().err


def test_two_commands_writing_one_out_at_once_cannot_both_write(tiny_run, tmp_path, capsys):
    """Pass 30 #212-#217 (lost): two commands given the same --out at about the same moment both passed
    the check before either had marked it, and the second wrote over the first's pages. The --out is
    held while a command writes; a holder in another process (here another descriptor) refuses it."""
    import fcntl
    import os

    out = tmp_path / "p"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["claims", str(tiny_run), "--out", str(out), "--resamples", "50"]) == 2
        assert "is being written by another harness command now" in capsys.readouterr().err
        assert not (out / "claims.md").exists()
    finally:
        os.close(fd)
    assert main(["claims", str(tiny_run), "--out", str(out), "--resamples", "50"]) == 0
    # the API lets its --out go once written: a later command of the same notebook may write there
    H.write_outputs(H.load_run(tiny_run).conditions, H.load_run(tiny_run).attention, tmp_path / "pages")
    from harness.runs.outdir import _HELD

    assert str((tmp_path / "pages").resolve()) not in _HELD


def test_plan_of_a_pilot_read_from_elsewhere_names_its_prompts_file(relative_run, tmp_path, capsys, monkeypatch):
    """Pass 30 #246/#241 (silent): from another directory, plan read another prompts file at the pilot's
    relative path as the prompt set it searches (or said only "file not found")."""
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "my prompts.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "text": f"Question {i}?"})
                                                              + "\n" for i in range(10)))
    assert main(["plan", str(relative_run), "--measure", "output_kl"]) == 2
    err = capsys.readouterr().err
    assert "was made from other input files than its config names here" in err and "sha256" in err, err


def test_a_c_minus_b_of_a_table_without_b_says_so_and_a_rate_effect_past_1_is_refused(tiny_run):
    """Pass 30 c32/e12-e17 (silent): contrast, two_way_bootstrap and prefix_permutation_test of a
    table without B returned empty or all-NaN rows without a word; f13 (silent): a rate's power
    against an effect of 1.5 was 0."""
    conditions = H.load_run(tiny_run).conditions
    only_c = conditions[conditions.group == "C"]
    for analysis in ("contrast", "two_way_bootstrap", "prefix_permutation_test", "compare_groups"):
        with pytest.warns(UserWarning, match=r"the table holds no rows of group 'B'"):
            getattr(H, analysis)(only_c, "output_kl")
    hits = conditions.assign(target_hit=conditions.group == "C")
    with pytest.raises(ValueError, match=r"effect must be below 1 for a rate"):
        H.compare_groups(hits, "target_hit", effect=1.5)


def test_the_quoting_advice_for_an_unreadable_value_works_when_pasted(tmp_path, capsys):
    """Pass 30 #40/#41 (misleading): for a run directory with an apostrophe the advice was
    'hydra.run.dir="runs/bob's"', which a shell cannot read. The advice, split as a shell splits it,
    is the one override the grammar reads."""
    run_dir = tmp_path / "bob's run"
    assert main(["sweep", *FAST, f"hydra.run.dir={run_dir}"]) == 2
    err = capsys.readouterr().err
    advice = err.split("quote the value, as ", 1)[1].strip()
    (override,) = shlex.split(advice)
    assert override == f'hydra.run.dir="{run_dir}"'
    assert main(["sweep", *FAST, override]) == 0 and (run_dir / "conditions.parquet").is_file()
