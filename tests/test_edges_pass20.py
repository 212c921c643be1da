"""The twentieth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
e1d5fd1): a fresh sweep, locate and collect writing over files the user had edited, Hydra's own
options abbreviated or out of place, and remedies that named the wrong cause or did not work."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

import harness as H
from tests.support import FAST, one_line_error, sweep


def test_a_fresh_sweep_over_a_run_keeps_what_the_user_edited_there(tmp_path):
    """#9/#8 (lost): `on_existing=fresh` over a run deleted the user's edited report.md, an edited
    figure and a table with a column of notes, where figures and resume keep each as *.edited.*."""
    from harness.cli import main

    run = sweep(tmp_path / "r", *FAST)
    assert main(["figures", str(run)]) == 0
    with (run / "report.md").open("a") as f:
        f.write("MY NOTES\n")
    (run / "figures" / "fig1_edit_distance.png").write_bytes(b"my own drawing")
    table = run / "conditions.parquet"
    pd.read_parquet(table).assign(note="mine").to_parquet(table)
    (run / "mynotes.txt").write_text("kept\n")
    sweep(run, *FAST, "on_existing=fresh")
    assert (run / "report.edited.md").read_text().endswith("MY NOTES\n")
    assert (run / "figures" / "fig1_edit_distance.edited.png").read_bytes() == b"my own drawing"
    assert "note" in pd.read_parquet(run / "conditions.edited.parquet")
    assert "note" not in pd.read_parquet(table) and (run / "mynotes.txt").read_text() == "kept\n"


def test_collect_and_locate_again_keep_a_table_the_user_edited(tmp_path):
    """#540 (lost): collect into its own output again wrote over a conditions table the user had
    added a column to; #472 (lost): locate run again (fresh) wrote over an edited locate.parquet."""
    from harness.cli import main

    run = sweep(tmp_path / "r", *FAST)
    out = tmp_path / "col"
    assert main(["collect", str(run), "--out", str(out)]) == 0
    pd.read_parquet(out / "conditions.parquet").assign(note="mine").to_parquet(out / "conditions.parquet")
    assert main(["collect", str(run), "--out", str(out)]) == 0
    assert "note" in pd.read_parquet(out / "conditions.edited.parquet")

    located = tmp_path / "lo"
    command = ["locate", "model=tiny", "prompts.limit=2", "prefixes.per_group=2", "decode.max_new_tokens=2",
               "locate.coarse=[8,16]", "locate.resolution=8", f"hydra.run.dir={located}"]
    assert main(command) == 0
    pd.read_parquet(located / "locate.parquet").assign(note="mine").to_parquet(located / "locate.parquet")
    assert main([*command, "on_existing=fresh"]) == 0
    assert "note" in pd.read_parquet(located / "locate.edited.parquet")
    assert "note" not in pd.read_parquet(located / "locate.parquet")


@pytest.mark.parametrize("argv, line", [
    (["--package", "foo", "model=tiny"], "error: --package only applies with --cfg (it changes how the config is "
                                         "printed): give --cfg job --package ..., or leave it out"),
    (["--resolve", "model=tiny"], "error: --resolve only applies with --cfg"),
    (["--res", "model=tiny"], "error: --res is not an option of harness sweep; did you mean --resolve? (options "
                              "are spelled in full; --help lists them)"),
    (["--cf", "job", "model=tiny"], "error: --cf is not an option of harness sweep; did you mean --cfg?"),
    (["--experimental-rerun", "x.pickle"], "error: --experimental-rerun loads a pickled config, and the harness "
                                           "never unpickles a file"),
], ids=["package-alone", "resolve-alone", "abbreviated-resolve", "abbreviated-cfg", "pickle"])
def test_hydras_own_options_are_spelled_in_full_and_in_place(capsys, argv, line):
    """#344 (silent): `--package foo` without --cfg was ignored; #341 (traceback): `--resolve` without
    --cfg was Hydra's ValueError reported as a bug; #326/#343/#345: an abbreviated option (`--res`,
    `--cf`) blamed the next argument. `--experimental-rerun` loads a pickle: refused outright."""
    assert one_line_error(capsys, ["sweep", *argv]).startswith(line)


def test_a_row_without_a_key_is_named_before_it_reads_as_a_repeat(tiny_run):
    """#127: C rows without a prefix_id were refused as 'repeating another row' with advice about
    concatenated runs; #109: that advice's drop_duplicates() fails on the tables' array columns."""
    conditions = H.load_runs([tiny_run])[0]
    blanked = conditions.assign(prefix_id=np.where(conditions.group == "C", None, conditions.prefix_id))
    with pytest.raises(ValueError, match=r"rows of a prefixed group \(B, C\) have no prefix_id"):
        H.compare_groups(blanked, "output_kl", n_resamples=50, n_permutations=50)
    with pytest.raises(ValueError, match=r"or concatenate each run's table once$"):
        H.drift_summary(pd.concat([conditions, conditions]))


def test_head_contrasts_on_pooled_runs_says_to_select_one(tiny_run):
    """#601: the pooled-runs warning of head_contrasts said to add 'run' to by, which it has not."""
    attention = H.load_runs([tiny_run])[1]
    pooled = pd.concat([attention.assign(run="x"), attention.assign(run="y")], ignore_index=True)
    with pytest.warns(UserWarning, match=r"each copy counts as another observation of it: select one run "
                                         r"\(table\[table.run == \.\.\.\]\)$"):
        H.head_contrasts(pooled, permutation=False)


def test_check_determinism_names_rounding_between_batch_sizes_as_rounding(tiny_run, tmp_path, capsys):
    """#509/#511/#512: a clean batched run whose metrics differ from one-at-a-time by float rounding
    (tokens identical) was reported 'NOT reproduced' like a run that is not deterministic."""
    from harness.runs.check_determinism import check

    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    df = pd.read_parquet(copy / "conditions.parquet")
    df.loc[df.group != "A", "output_kl"] += 3e-5  # what batch-16 rounding moved it by on the demo model
    df.to_parquet(copy / "conditions.parquet", index=False)
    batch = json.loads((copy / "manifest.json").read_text())["batch_size"]
    assert batch > 1
    assert check(copy, sample=2, tolerance=1e-5, trust_damaged=True) == 1
    out = capsys.readouterr().out
    assert (f"NOT reproduced within 1e-05: identical tokens, and output_kl differs by up to 0.0000300: the run "
            f"computed {batch} conditions a batch and this check one at a time") in out
    assert "That is rounding, not a nondeterministic run; --tolerance 0.0001 accepts it" in out


def test_collect_of_a_run_stopped_by_its_configuration_names_the_remedy_that_works(tmp_path, capsys):
    """#544/#545: collect advised `harness resume RUN`, which stops again, for a run whose status is
    error (group C asked of a prefix file without instruction prefixes)."""
    from harness.cli import main

    from harness.runs.rundir import RunDir

    run = tmp_path / "stopped"
    assert main(["sweep", *FAST, f"hydra.run.dir={run}"]) == 0
    # as the runner leaves a run its configuration stopped (pass 36: a prefix set without a group's kind is now
    # refused before a run directory is claimed, so the state is written here as the runner writes it)
    RunDir(run).write_status("error", error="group C is requested but the prefix set has no 'instruction' prefixes")
    assert json.loads((run / "status.json").read_text())["status"] == "error"
    capsys.readouterr()
    main(["collect", str(run), "--out", str(tmp_path / "col"), "--allow-partial"])
    said = capsys.readouterr()
    assert f"what stopped it must change first (`harness resume {run} KEY=VALUE --accept-changes`)" \
        in said.out + said.err
