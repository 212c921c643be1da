"""The thirty-third adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
e750923): survival of runs read together, one of them attention alone (``decode.path=none``),
counted that run's B/C rows as never diverging; ``rate_summary`` of such a run rated A alone; a
misspelt override was offered a key of another meaning (``prefixes.seed``: "prefixes.name"); a
command started with standard output closed printed nothing and exited 0; ``plan --measure`` of a
rate pointed at a table that does not hold it; and two ``--delta`` refusals contradicted each other."""

from __future__ import annotations

import subprocess
import sys

import pytest

import harness as H
from harness.cli import main
from tests.support import FAST, one_line_error, sweep

THREE = [o for o in FAST if not o.startswith("prompts.limit")] + ["prompts.limit=3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same design twice: decoded, and attention alone."""
    root = tmp_path_factory.mktemp("pass33")
    return sweep(root / "decoded", *THREE), sweep(root / "undecoded", *THREE, "decode.path=none")


def test_survival_of_runs_read_together_leaves_out_the_rows_that_decoded_nothing(runs):
    """#108/b25/c18 (silent): the attention-only run's empty first_divergence read as "never diverged",
    raising every B and C curve (0.78 where the decoded run alone gives 0.56)."""
    decoded, undecoded = runs
    both = H.load_runs([decoded, undecoded], allow_mixed_settings=True)[0]
    with pytest.warns(UserWarning, match=r"survival leaves out \d+ of the table's \d+ B/C rows: B and C decoded no "
                                         r"continuation \(decode.path=none\)"):
        together = H.survival(both, n_resamples=20)
    alone = H.survival(H.load_run(decoded).conditions, n_resamples=20)
    keys = ["group", "prefix_len", "k"]
    merged = together.merge(alone, on=keys, suffixes=("", "_alone"))
    assert len(merged) == len(alone) and (merged.survival == merged.survival_alone).all()
    assert (merged.n == merged.n_alone).all()


def test_figures_of_runs_read_together_draw_survival_from_the_decoded_rows(runs, tmp_path, capsys):
    decoded, undecoded = runs
    assert main(["figures", str(decoded), str(undecoded), "--allow-mixed-settings", "--out", str(tmp_path / "f")]) == 0
    assert (tmp_path / "f" / "figures" / "fig6_survival.png").exists()


def test_a_rate_empty_in_b_and_c_is_refused_not_rated_on_a_alone(runs):
    """b1/c3 (silent): rate_summary of exact_match on an attention-only run returned A's row alone."""
    conditions = H.load_run(runs[1]).conditions
    with pytest.raises(ValueError, match=r"exact_match is empty in all \d+ rows of groups B and C; B and C decoded "
                                         r"no continuation \(decode.path=none\)"):
        H.rate_summary(conditions, "exact_match")
    assert set(H.rate_summary(H.load_run(runs[0]).conditions, "exact_match").group) == {"A", "B", "C"}


@pytest.mark.parametrize("override, said", [
    ("prefixes.seed=7", "did you mean seed=7?"),          # was prefixes.name=7: a run that only relabels the bank
    ("decode.seed=7", "did you mean seed=7?"),            # was decode=7: a config group
    ("model.seed=7", "did you mean seed=7?"),             # was model.gated=7
    ("analysis.sed=7", "did you mean seed=7?"),           # was analysis=7
    ("locate.lengths=[8,16]", "(locate's keys: coarse, groups, metric, resolution)"),  # was locate.metric=[8,16]
    ("prefix.length=8", "did you mean prefix.lengths=[8]?"),
    ("prompt.limit=3", "did you mean prompts.limit=3?"),
    ("decode.foo=1", "(decode's keys: max_new_tokens, path)"),
])
def test_a_misspelt_override_is_offered_a_key_that_means_it(override, said, tmp_path, capsys):
    """#155/#218/#222/#223/#228/#229 (misleading): the closest spelling of the whole dotted key won,
    whatever it meant; following "prefixes.name=7" ran a whole sweep at the default seed."""
    line = one_line_error(capsys, ["sweep", "model=tiny", override, f"hydra.run.dir={tmp_path / 'run'}"])
    assert line.endswith(said), line
    assert not (tmp_path / "run").exists()


def test_a_command_started_with_standard_output_closed_says_so(tmp_path):
    """#29/#233/V7 (silent): `harness kv-size model=tiny >&-` printed nothing and exited 0."""
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m harness kv-size model=tiny >&-"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: standard output is closed"), done.stderr


def test_plan_of_a_rate_points_where_its_power_is_printed(runs, capsys):
    """#217/#209 (misleading): exact_match's power was "in its report's C - B table", which has no row of it."""
    with pytest.raises(SystemExit):
        main(["plan", str(runs[0]), "--measure", "exact_match"])
    err = capsys.readouterr().err
    assert "H.compare_groups(H.load_run(RUN).conditions, 'exact_match', rate=True)" in err
    assert "attn_kl_mean for a run that decoded nothing" in err
    # target_hit, the rate the report's C - B table holds, is planned by simulation (tests/runs/test_plan_rates.py)


def test_the_delta_refusals_agree_on_what_the_tests_read(runs, capsys):
    """#67/#216 (misleading): "plans for kl, ..." and then "no test ... reads kl" on the same run."""
    general = one_line_error(capsys, ["plan", str(runs[0]), "--delta", "output_kl=0.1"])
    assert "the tests of harness plan read at most kl, attn_kl_mean, norm_edit_distance" in general
    these = one_line_error(capsys, ["plan", str(runs[0]), "--delta", "kl=0.1"])
    assert "no test harness plan makes on these runs reads kl" in these


def test_pass33_nits_say_the_right_thing(runs, tmp_path, capsys):
    """Nits of pass 33: `--out -` wrote a file named "-"; a quoted '$HOME/x' made a directory named $HOME;
    a status.json naming no status read "its status is None"; `figures` of a path that does not exist
    said "is not a directory"; "collected 1 runs"."""
    import shutil

    decoded = runs[0]
    assert "--out -: this command writes files, not standard output" in one_line_error(
        capsys, ["claims", str(decoded), "--out", "-"])
    assert "holds $HOME, which the shell did not expand" in one_line_error(
        capsys, ["claims", str(decoded), "--out", "$HOME/x"])
    assert not (tmp_path / "$HOME").exists() and not (tmp_path / "-").exists()
    copy = tmp_path / "copy"
    shutil.copytree(decoded, copy)
    (copy / "status.json").write_text("{}")
    assert "its status is not stated (its status.json names none)" in one_line_error(
        capsys, ["figures", str(copy), "--out", str(tmp_path / "f")])
    assert "does not exist" in one_line_error(capsys, ["figures", str(tmp_path / "nope")])
    assert main(["collect", str(decoded), "--out", str(tmp_path / "c")]) == 0
    assert "collected 1 run, " in capsys.readouterr().out


def test_a_list_given_to_a_one_choice_key_names_its_choices(tmp_path, capsys):
    """Nit of pass 33: "Value ['none'] (list) is not a valid input for <enum 'DecodePath'>"."""
    line = one_line_error(capsys, ["sweep", "model=tiny", "decode.path=[none]", f"hydra.run.dir={tmp_path / 'r'}"])
    assert line.endswith("decode.path=[none]: takes one of teacher_forced, stepwise, none, not a list"), line
