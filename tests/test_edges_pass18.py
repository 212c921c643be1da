"""The eighteenth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
4a02992). Its lost case (#229/#230: an edited page overwritten) and #83 were fixed in that session
and are tested beside the code they changed; these are the rest: silent pooling and dropping, API
tracebacks, and advice that named the wrong remedy."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import harness as H
from harness.errors import HarnessError
from tests.support import exit_code, one_line_error


def attention_rows(n_prompts: int = 6) -> pd.DataFrame:
    """A B/C attention table of one model: a row per prompt, prefix, layer (2), head (2) and segment."""
    rng = np.random.default_rng(0)
    rows = []
    for p in range(n_prompts):
        for group in ("B", "C"):
            for k in range(3):
                for layer in range(2):
                    for head in range(2):
                        rows.append({"model": "m", "placement": "raw", "isolation": "none", "prompt_id": f"p{p}",
                                     "group": group, "prefix_id": f"{group}{k}", "prefix_len": 8, "layer": layer,
                                     "head": head, "segment": "task", "n_queries": 4,
                                     "kl": rng.normal(1.0 + (group == "C"), 0.1)})
    return pd.DataFrame(rows)


def test_an_abbreviated_option_is_refused_not_applied_over_the_full_one(capsys):
    """#7/#10: `claims r --res 20 --resamples 30` (and `--out=a --o b`) passed the given-twice
    refusal, since argparse took `--res` for `--resamples`, and applied the last without a word."""
    for argv in (["claims", "r", "--res", "20", "--resamples", "30"], ["claims", "r", "--out=a", "--o", "b"],
                 ["plan", "r", "--targ", "0.8"]):
        assert exit_code(argv) == 2
        assert "unrecognized arguments: --" in capsys.readouterr().err


def test_every_summary_warns_where_copies_of_a_run_are_pooled():
    """#29/#38-#40: drift_summary, survival, layer_profile and head_contrasts pooled two runs named
    in a 'run' column (the mean of two runs, each condition counted twice) without a word; only
    compare_groups warned."""
    from tests.analysis.test_obeying import triples

    one = triples(copier=True).assign(norm_edit_distance=0.5, first_divergence=3, n_generated=6)
    two = pd.concat([one.assign(run="first"), one.assign(run="rerun", norm_edit_distance=0.25)], ignore_index=True)
    att = attention_rows()
    att2 = pd.concat([att.assign(run="x"), att.assign(run="y")], ignore_index=True)
    pooled = r"once per run \(column 'run'\).*(add 'run' to by|select one run)"
    for call in (lambda: H.drift_summary(two, "norm_edit_distance"), lambda: H.survival(two),
                 lambda: H.layer_profile(att2), lambda: H.head_contrasts(att2, permutation=False)):
        with pytest.warns(UserWarning, match=pooled):
            call()
    with warnings.catch_warnings():  # split by run, or one run alone: nothing to say
        warnings.simplefilter("error")
        split = H.drift_summary(two, "norm_edit_distance", by=["group", "prefix_len", "run"])
        H.layer_profile(att)
    assert set(split.run) == {"first", "rerun"}


def test_rows_without_a_key_are_refused_not_left_out():
    """#158: C rows whose prefix_len was NaN (after a merge) were dropped by compare_groups' groupby
    without a word; a missing group or prompt_id likewise."""
    from tests.analysis.test_obeying import triples

    df = triples(copier=True).assign(norm_edit_distance=0.5)
    holes = df.assign(prefix_len=df.prefix_len.where(~((df.group == "C") & (df.index % 5 == 0))))
    with pytest.raises(ValueError, match=r"^5 of the table's 36 rows of a prefixed group \(B, C\) have no prefix_len"):
        H.compare_groups(holes, "norm_edit_distance")
    with pytest.raises(ValueError, match="rows have no prompt_id"):
        H.drift_summary(df.assign(prompt_id=df.prompt_id.where(df.index != 3)), "norm_edit_distance")


def test_sweep_directory_keys_hydra_would_ignore_are_refused():
    """#214/#215: with -m Hydra reads hydra.sweep.dir, without it hydra.run.dir; the other key was
    ignored and the runs went to outputs/ under a time stamp. Both keys together stay allowed."""
    from harness.config.composing import check_overrides

    with pytest.raises(HarnessError, match=r"^hydra.run.dir= is not read with -m: .* write hydra.sweep.dir=/x/y$"):
        check_overrides(["-m", "seed=0,1", "hydra.run.dir=/x/y"], None)
    with pytest.raises(HarnessError, match=r"^hydra.sweep.dir= is not read without -m: .* write hydra.run.dir=/x/y$"):
        check_overrides(["model=tiny", "hydra.sweep.dir=/x/y"], None)
    check_overrides(["-m", "seed=0,1", "hydra.run.dir=/a", "hydra.sweep.dir=/b"], None)


def test_a_stray_word_on_a_hydra_command_is_one_line(tmp_path, capsys):
    """#175/#176: `harness resume RUN OTHER` and `harness sweep model=tiny RUN` printed Hydra's
    four-line parser error; an option's value (`--cfg job`) is not a stray word."""
    from harness.config.composing import bare_word

    (tmp_path / "r1").mkdir()
    line = one_line_error(capsys, ["sweep", "model=tiny", str(tmp_path / "r1")])
    assert line == (f"error: {tmp_path / 'r1'} is not an override (KEY=VALUE); a run's directory is set with "
                    f"hydra.run.dir=DIR (`harness resume DIR` finishes one); --help lists the options")
    assert bare_word(["model=tiny", "--cfg", "job", "-cd", "conf"]) is None
    line = one_line_error(capsys, ["resume", str(tmp_path / "r1"), "other"])
    assert line.startswith("error: other is not an override (KEY=VALUE): harness resume finishes one run directory")


def test_the_api_takes_a_generator_of_runs_and_refuses_an_empty_override(tiny_run):
    """#120: load_runs(a generator) ended in pandas' 'No objects to concatenate'; #139:
    compose(['model=tiny', '']) passed Hydra's parser text through."""
    listed = H.load_runs([tiny_run])[0]
    pd.testing.assert_frame_equal(H.load_runs(p for p in [tiny_run])[0], listed)
    with pytest.raises(HarnessError, match=r"load_runs takes run directories' paths \(a list\), got 3"):
        H.load_runs(3)
    with pytest.raises(HarnessError, match=r"item 2 is an empty string \(an unset variable\?\)"):
        H.compose(["model=tiny", ""])


def test_figures_of_a_model_without_attention_beside_one_with_draw_no_empty_axes(tiny_run):
    """#145: conditions of two models, attention of one: the other's rows of figures 2-4 were empty
    axes, and matplotlib warned of singular limits and legends without entries."""
    import matplotlib.pyplot as plt

    conditions, attention = H.load_runs([tiny_run])
    other = conditions.assign(model="other")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures = H.make_figures(pd.concat([conditions, other], ignore_index=True), attention, None)
    rows = {name: len(fig.axes) for name, fig in figures.items()}
    alone = {name: len(fig.axes) for name, fig in H.make_figures(conditions, attention, None).items()}
    assert rows["fig2_layer_drift"] == alone["fig2_layer_drift"] == 4  # one model's row: 4 panels
    assert rows["fig1_edit_distance"] == 2 * alone["fig1_edit_distance"]  # every model's output drift
    plt.close("all")


def test_a_one_run_command_on_a_multirun_or_a_moved_collection_names_what_to_give(tmp_path, capsys):
    """#53/#56: check-determinism and causal-heads on a multirun were told to give all its jobs or
    collect them (they take one run and refuse collections); #58: causal-heads --ranking-only on a
    collected set was refused for a model it would not load; #183: a collection's recorded runs
    that had moved were named as if there."""
    from harness.runs.reading import refuse_collected
    from harness.runs.rundir import RunDir

    multirun = tmp_path / "mr"
    (multirun / "0" / ".hydra").mkdir(parents=True)
    (multirun / "multirun.yaml").write_text("{}\n")
    (multirun / "0" / "conditions.parquet").write_bytes(b"")
    for argv in (["check-determinism", str(multirun)], ["causal-heads", str(multirun), "--ranking-only"]):
        line = one_line_error(capsys, argv)
        assert line == (f"error: {multirun} is a multirun (-m), whose jobs are the runs, and this command reads one "
                        f"run: give one of its jobs ({multirun / '0'})")
    manifest = {"collected": True, "sources": [{"run": str(tmp_path / "gone")}]}
    with pytest.raises(HarnessError, match=r"whose tables pool several runs' \(heads are ranked within one run's\): "
                                           r"give one of the runs it was collected from; recorded as .*gone, none of "
                                           r"them there any more$"):
        refuse_collected(RunDir(tmp_path), manifest, "whose tables pool several runs' (heads are ranked within one "
                                                     "run's)", one_run=True)


def test_a_run_given_three_times_says_so(tmp_path, monkeypatch):
    """#74/#75: a run given three times was said to be given 'twice' '(as r2 too)'."""
    from harness.runs.twice import refuse_given_twice

    monkeypatch.chdir(tmp_path)

    with pytest.raises(HarnessError, match=r"^r is given 3 times \(as r and r/ and \./r\): its conditions would count "
                                           r"3 times"):
        refuse_given_twice(["r", "r/", "./r"], "its conditions")
    with pytest.raises(HarnessError, match=rf"^r is given twice \(as r and {tmp_path / 'r'}\)"):
        refuse_given_twice([Path("r"), tmp_path / "r"], "its conditions")


def test_detect_does_not_refuse_a_setting_its_numbers_do_not_read_nor_offer_an_option_it_lacks():
    """#191/#192/#225: detect refused an attack run and a benign run that differ in max_new_tokens
    (its forward pass over the input reads no continuation) and offered --allow-mixed-settings,
    which detect does not have."""
    from harness.runs.compat import Settings, check_compatible

    values = {"schema": 1, "model": "m", "max_new_tokens": 3, "dtype": "float32"}
    runs = [Settings("a", values), Settings("b", {**values, "max_new_tokens": 2})]
    assert check_compatible(runs, ignore=("max_new_tokens",), option=None) == []
    with pytest.raises(HarnessError, match=r"read runs of one setting together, or pass --allow-mixed-settings$"):
        check_compatible(runs)
    dtypes = [*runs[:1], Settings("b", {**values, "dtype": "float16"})]
    with pytest.raises(HarnessError, match=r"read runs of one setting together$"):
        check_compatible(dtypes, ignore=("max_new_tokens",), option=None)


def test_a_target_the_page_would_print_as_1_is_refused(capsys):
    """#111: `plan --target 0.9999999` printed 'power 1' and 'the best reaches 1.0' yet not the target."""
    from harness.analysis.planning import cheapest

    assert exit_code(["plan", "r", "--target", "0.9999999"]) == 2
    assert "give one above 0.05 (the tests' level) and at most 0.999" in capsys.readouterr().err
    grid = pd.DataFrame({"n_prompts": [4], "n_prefixes": [8], "seconds": [1.0], "min_power_all": [0.9989]})
    assert "the best reaches 0.998 at 4 prompts" in cheapest(grid, "all", 0.999)[1]


def test_a_warning_every_summary_gives_is_said_once_on_the_command_line():
    """Found while fixing #29: `figures --allow-mixed-settings` on two runs sharing conditions printed
    the pooled-copies warning 17 times (once per summary; the "once" filter forgets at every
    catch_warnings block, which the summaries open)."""
    from tests.support import fake_command_stderr

    body = ("    for _ in range(3):\n"
            "        warnings.warn('the same words', UserWarning)\n"
            "        with warnings.catch_warnings():\n"
            "            warnings.simplefilter('ignore', RuntimeWarning)\n"
            "    warnings.warn('other words', UserWarning)\n"
            "    return 0\n")
    assert fake_command_stderr(body) == "warning: the same words\nwarning: other words\n"
