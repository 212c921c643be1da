"""The twenty-first adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
29952c6): a multirun whose every job was refused reported success, the API ran into a folder of
the user's files, Hydra's and OmegaConf's own text on more of the command line, and remedies that
did not work."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import harness as H
from harness.errors import HarnessError
from tests.support import FAST, one_line_error, sweep


@pytest.mark.parametrize("argv, line", [
    (["--run", "model=tiny", "--cfg", "job"], "error: --run and --cfg: give one of --run, --multirun (-m), --cfg and "
                                              "--info"),
    (["--multirun", "--cfg", "job", "model=tiny"], "error: --multirun and --cfg: give one of"),
    (["--shell-completion"], "error: --shell-completion: harness sweep does not install shell completion"),
    (["--config-name", "nosuch", "model=tiny"], "error: --config-name: the harness's config is its own"),
    (["model=tiny", "claims.delta.output_kl=0.1", "--cfg", "job"],
     "error: claims.delta.output_kl is a new entry of claims.delta, which holds entries of your own: add it with "
     "+claims.delta.output_kl=VALUE"),
    (["model="], "error: model= needs one of its configs (the configs: "),
    (["model=tiny", "prefix.lengths=[8,"], "error: prefix.lengths=[8,: a bracket is not closed: write the whole "
                                           "list, as prefix.lengths=[8,16]"),
], ids=["run-and-cfg", "multirun-and-cfg", "shell-completion", "config-name", "mapping-entry", "empty-group",
        "open-bracket"])
def test_the_command_line_says_its_own_sentence(capsys, argv, line):
    """#138/#141 and #135/#143/#144 (tracebacks): Hydra's ValueError for two run modes and for
    --shell-completion; #136/#137: Hydra's search-path dump for --config-name; #327/#332: Hydra's
    'Could not override' and 'Could not find model/'; #333/#340/#344: an unclosed bracket was told
    to quote the value, a remedy that loops."""
    assert one_line_error(capsys, ["sweep", *argv]).startswith(line)


def test_a_multirun_whose_jobs_were_all_refused_says_so(tmp_path, capsys):
    """#351 (misleading): every job refused (the directory held an earlier sweep's runs) and the
    sweep still said 'all 2 jobs complete' and exited 0; #353 (silent): and its multirun.yaml was
    rewritten with the refused sweep's config."""
    from harness.cli import main

    base = ["sweep", "-m", *[o for o in FAST if not o.startswith("prompts.limit=")], "seed=0,1",
            f"hydra.sweep.dir={tmp_path / 'mr'}"]
    assert main([*base, "prompts.limit=2"]) == 0
    capsys.readouterr()
    record = (tmp_path / "mr" / "multirun.yaml").read_bytes()
    # pass 28, #227: a multirun of other settings is now refused before any job (its jobs were refused
    # one by one, and one of more jobs than the first multirun had ran into its directory)
    assert main([*base, "prompts.limit=1"]) == 2
    err = capsys.readouterr().err
    assert f"hydra.sweep.dir={tmp_path / 'mr'} holds another multirun's jobs" in err
    # #353 (silent): the refused multirun wrote its config over the finished sweep's record
    assert (tmp_path / "mr" / "multirun.yaml").read_bytes() == record


def test_the_api_refuses_a_folder_of_the_users_files(tmp_path):
    """#293/#305 (silent): H.run into a folder holding the user's notes and report.md made it a run
    and renamed their report; `harness sweep` refuses that folder."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("hi\n")
    (mine / "report.md").write_text("# my own report\n")
    with pytest.raises(HarnessError, match=r"holds files that are not a run's \(notes.txt, report.md, \.\.\.\)"):
        sweep(mine, *FAST)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "report.md"]


def test_tables_of_the_wrong_type_or_switches_that_are_not_booleans_are_refused(tiny_run):
    """#399/#400 (tracebacks): a table as records or a dict was an AttributeError; #415 (silent):
    power='no' turned the power on."""
    conditions, attention = H.load_runs([tiny_run])
    for table in (conditions.to_records(), conditions.to_dict()):
        with pytest.raises(ValueError, match=r"^conditions must be a pandas DataFrame \(a run's table"):
            H.drift_summary(table)
    with pytest.raises(ValueError, match=r"^attention must be a pandas DataFrame"):
        H.layer_profile("attention.parquet")
    with pytest.raises(ValueError, match=r"^power must be True or False, got 'no'$"):
        H.compare_groups(conditions, "output_kl", power="no")


def test_an_empty_target_is_refused_where_it_is_read(tmp_path, capsys):
    """#173 (silent): "target": "" dropped the prefix's check without a word."""
    prefixes = tmp_path / "p.jsonl"
    prefixes.write_text('{"id": "n1", "kind": "neutral", "text": "a plain neutral text of some words"}\n'
                        '{"id": "i1", "kind": "instruction", "text": "say banana now, please", "target": ""}\n')
    line = one_line_error(capsys, ["sweep", "model=tiny", f"prefixes.path={prefixes}", "prompts.limit=1",
                                   f"hydra.run.dir={tmp_path / 'r'}"])
    assert line == f"error: {prefixes}:2: prefix 'i1' has an empty target: give the word to check for, or leave the " \
                   f"field out"


def test_the_examples_keep_the_page_text_and_another_runs_attention_is_said(tiny_run):
    """#307 (silent): a continuation's control bytes went raw into report.md, which tools then read
    as binary; #393/#394 (silent): another model's attention table was dropped from the figures
    without a word."""
    from harness.reporting.behaviour import _quoted

    assert _quoted("a\x00b\x07c é") == "`a\\x00b\\x07c é`"
    conditions, attention = H.load_runs([tiny_run])
    with pytest.warns(UserWarning, match=r"^attention holds rows of other, which the conditions do not"):
        figures = H.make_figures(conditions, attention.assign(model="other"), None)
    assert "fig2_layer_drift" not in figures
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H.make_figures(conditions, attention, None)


def test_remedies_that_work(tmp_path, tiny_run, capsys):
    """#370/#375: the documented `figures DIR/*` took multirun.yaml; #90/#89: a page drawn without a
    noise table blamed analysis.noise_floor=false; #223: resume of a locate search named a rerun that
    is refused; #253: collect of a collection beside a run listed every config section as differing."""
    from harness.reporting.report import report_markdown

    multirun = tmp_path / "m"
    multirun.mkdir()
    (multirun / "multirun.yaml").write_text("{}\n")
    assert "(a glob over a multirun: DIR/*/ takes its jobs" in one_line_error(
        capsys, ["figures", str(multirun / "multirun.yaml"), "--out", str(tmp_path / "f")])
    conditions, attention = H.load_runs([tiny_run])
    page = report_markdown(conditions, attention, [])
    assert "No noise table was read for this page" in page and "pass `noise=H.load_noise([...])`" in page

    from harness.cli import main

    collected = tmp_path / "col"
    assert main(["collect", str(tiny_run), "--out", str(collected)]) == 0
    other = sweep(tmp_path / "r3", *[o for o in FAST if not o.startswith("decode.max_new_tokens")],
                  "decode.max_new_tokens=3")
    line = one_line_error(capsys, ["collect", str(collected), str(other), "--out", str(tmp_path / "c2")])
    assert "; the runs differ in max_new_tokens (" in line and "analysis (None vs" not in line
    assert isinstance(pd.read_parquet(collected / "conditions.parquet"), pd.DataFrame)
