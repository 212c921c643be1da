"""The thirty-fourth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
0183f5c), most of them in the claims page's new "What the undecided tests would take": a test of a
model and placement several runs hold was priced on whichever run came last; a run that could not
be priced cut the search to its pilot's size and lost the reason; a resumed pilot's "minutes may be
low" was dropped; a run that failed a condition was called a resume; a status.json copied from
another run was read; a non-ASCII letter in an override's key was advice that repeated it;
benchmarks/plan_kept.py compared unscaled seconds with scaled prices and crashed on anything but a
finished run; the claims page blamed too few prompts where every B value was the same."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from harness.cli import main
from harness.runs.design_cost import run_cost
from harness.runs.rundir import RunDir
from tests.support import FAST, ROOT, one_line_error, sweep

THREE = [o for o in FAST if not o.startswith("prompts.limit")] + ["prompts.limit=3"]
TINY_DELTA = ["--delta", "norm_edit_distance=0.2"]  # leaves claim 3 undecided on these tiny runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs of one model and placement at other prefix lengths."""
    root = tmp_path_factory.mktemp("pass34")
    return sweep(root / "short", *THREE), sweep(root / "long", *THREE, "prefix.lengths=[32,64]")


def deciding(tmp_path, name, *argv) -> pd.DataFrame:
    out = tmp_path / name
    assert main(["claims", *argv, "--resamples", "50", "--out", str(out), *TINY_DELTA]) == 0
    return pd.read_parquet(out / "deciding.parquet")


def test_a_test_several_runs_hold_is_priced_on_all_of_them_in_any_order(runs, tmp_path):
    """#41-#44/#185/#186/#268 (silent): one run per model and placement was kept (the last given), so
    the minutes changed with the order of the runs."""
    forward = deciding(tmp_path, "f", *map(str, runs))
    backward = deciding(tmp_path, "b", *map(str, runs[::-1]))
    priced = forward.dropna(subset=["minutes"])
    assert not priced.empty
    pd.testing.assert_frame_equal(forward.reset_index(drop=True), backward.reset_index(drop=True))
    costs = [run_cost(r, RunDir(r).conditions()) for r in runs]
    for row in priced.itertuples():
        both = sum(c.seconds(int(row.n_prompts), int(row.n_prefixes), kept=0)[0] for c in costs) / 60
        assert row.minutes == pytest.approx(both)


def test_a_run_that_cannot_be_priced_keeps_its_reason_and_claims_no_missing_design(runs, tmp_path, capsys):
    """#16/#19/#51/#243/#244 (silent): a collected set said "no design up to 3 prompts x 10,000
    prefixes per group", where the same data as a sweep gives a design; the reason was dropped."""
    assert main(["collect", str(runs[0]), "--out", str(tmp_path / "set")]) == 0
    table = deciding(tmp_path, "c", str(tmp_path / "set"))
    assert not table.empty
    for row in table.itertuples():
        assert "not priced:" in row.note and "collected" in row.note, row.note
        assert "no design up to" not in row.note


def test_a_resumed_pilots_minutes_say_they_may_be_low(runs, tmp_path):
    """#26/#146/#215 (silent): plan printed the warning, the claims page dropped it."""
    run = tmp_path / "extended"
    shutil.copytree(runs[0], run)
    sweep(run, *[o for o in THREE if not o.startswith("prompts.limit")], "prompts.limit=4", "on_existing=resume")
    assert run_cost(run, RunDir(run).conditions()).note
    table = undecided_everywhere(run).dropna(subset=["minutes"])
    assert not table.empty and table.note.str.contains("may be low").all(), table.note.tolist()


def undecided_everywhere(run) -> pd.DataFrame:
    """:func:`deciding_costs` of the run's claims table with every row taken as not determined (what it
    prices is a row's test, whatever the interval said)."""
    from harness.analysis.claims import seed_claims, without_mention_controls
    from harness.runs.design_cost import deciding_costs

    conditions, attention, _ = without_mention_controls(RunDir(run).conditions(), RunDir(run).table(RunDir.ATTENTION))
    table = seed_claims(conditions, attention, None, n_resamples=50).assign(verdict="not determined")
    return deciding_costs([run], [RunDir(run).conditions()], table, conditions, attention)


def test_a_run_that_failed_a_condition_is_priced_as_one_sweep(tmp_path):
    """#159 (misleading): "its last sweep computed 38 of 39 conditions (a resume)": nothing was resumed."""
    from harness.runs.runner import SweepFailed

    run = tmp_path / "failed"
    with pytest.raises(SweepFailed):
        sweep(run, *THREE, "debug.fail_conditions=[story-02/news-harbour/24]")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["failures"] and manifest["reused"] == 0
    assert run_cost(run, RunDir(run).conditions()).note == ""


def test_a_status_copied_from_another_run_is_refused(runs, tmp_path, capsys):
    """#211/#212/g2 (silent): another run's status.json (328 conditions against 39) priced the plan."""
    run = tmp_path / "swapped"
    shutil.copytree(runs[0], run)
    status = json.loads((run / "status.json").read_text())
    other = tmp_path / "other"
    sweep(other, *[o for o in THREE if not o.startswith("prompts.limit")], "prompts.limit=2")
    shutil.copy(other / "status.json", run / "status.json")
    assert json.loads((run / "status.json").read_text())["conditions"] != status["conditions"]
    line = one_line_error(capsys, ["plan", str(run)])
    assert "the files belong to different sweeps" in line


def test_a_non_ascii_letter_in_a_key_is_named_with_the_key_meant(tmp_path, capsys):
    """#188/#189/#192/f20 (misleading): "the override grammar cannot read this value: write it as séed=1"."""
    line = one_line_error(capsys, ["sweep", "model=tiny", "séed=1", f"hydra.run.dir={tmp_path / 'r'}"])
    assert line.endswith("séed is not a config key (a key is plain ASCII: letters, digits, _ and .); did you mean "
                         "seed=1?"), line


def plan_kept():
    spec = importlib.util.spec_from_file_location("plan_kept", ROOT / "benchmarks" / "plan_kept.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plan_kept_scales_seconds_as_the_plan_does_and_refuses_what_is_no_run(runs, tmp_path):
    """#129/#141 (silent): unscaled seconds against scaled prices read 0.38-0.48x; #130-#140 (traceback,
    silent): FileNotFoundError on anything but a finished run, inf/NaN on a price of 0 or nan."""
    run = runs[0]
    cost = run_cost(run, RunDir(run).conditions())
    kept = plan_kept()
    conditions = RunDir(run).conditions()
    status, manifest = (json.loads((run / name).read_text()) for name in ("status.json", "manifest.json"))
    factor, how = kept.loop_factor(conditions, status, manifest)
    assert how.startswith("exact")
    assert factor == pytest.approx(status["seconds"]["conditions"] / conditions.seconds.sum())
    scaled = kept.per_prompt(conditions.assign(seconds=conditions.seconds * factor), cost.seconds_a, cost.seconds_bc)
    assert scaled.seconds.sum() == pytest.approx(scaled.priced.sum())  # a pilot against its own price: 1x
    for argv, said in ([str(tmp_path), "--seconds-a", "1", "--seconds-bc", "1"], "is not a finished sweep's run"), \
                      ([str(run), "--seconds-a", "0", "--seconds-bc", "1"], "a price is a number of seconds above 0"), \
                      ([str(run), "--seconds-a", "1", "--seconds-bc", "nan"], "a price is a number of seconds above 0"):
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plan_kept.py"), *argv], capture_output=True,
                              text=True)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_claims_page_says_why_b_has_no_interval(tmp_path):
    """#33 (misleading): "no interval (2 prompt(s) x 2 prefix(es); a crossed interval needs at least 2 of
    each)" where there were 2 of each and every B value was 0."""
    run = sweep(tmp_path / "flat", "model=tiny", "prompts.limit=2", "prefix.lengths=[8]", "decode.max_new_tokens=2",
                "prefixes.per_group=2", "draw_figures=false")
    assert main(["claims", str(run), "--resamples", "50", "--out", str(tmp_path / "c")]) == 0
    page = (tmp_path / "c" / "claims.md").read_text()
    b = RunDir(run).conditions().query("group == 'B'").norm_edit_distance
    if b.nunique() == 1:  # the design this case was found on: every B value the same
        assert "every B value is the same: no spread to estimate one" in page
    assert "2 prompt(s) x 2 prefix(es); a crossed interval needs" not in page


# pass 35 (snapshot 5c238a8): its causes, each with its case numbers


@pytest.mark.parametrize("override, said", [
    ("hydra.run.dir=${RUNS}/x", "${RUNS} was not expanded by the shell"),   # #80/#81: an internal error
    ("hydra.run.dir=$HOME/x", "$HOME was not expanded by the shell"),       # #74/#79/#84: a directory named $HOME
    ("seed =1", "no space in the key and one =; did you mean seed=1?"),     # #47-#54: "write it as seed =1"
    ("seed==1", "no space in the key and one =; did you mean seed=1?"),
    ("experimnt=quick", "did you mean experiment=quick?"),                   # #167-#170: no suggestion
    ("models=tiny", "did you mean model=tiny?"),
])
def test_pass35_overrides_are_answered_with_what_to_write(override, said, tmp_path, capsys):
    line = one_line_error(capsys, ["sweep", "model=tiny", override])
    assert said in line, line
    assert not any(p.name.startswith("$") for p in tmp_path.parent.iterdir())


def test_pass35_hydras_own_interpolations_in_a_run_directory_still_work(tmp_path):
    assert main(["sweep", *THREE, "analysis.noise_floor=false", f"hydra.run.dir={tmp_path}/run-${{seed}}"]) == 0
    assert (tmp_path / "run-0" / "conditions.parquet").exists()


def test_pass35_copies_that_differ_only_in_computed_alone_are_one_result(runs, tmp_path, capsys):
    """#185/#190/#191 (misleading): a condition retried alone after its batch failed in one run was
    "different results" from the same condition batched in another."""
    from harness.runs.reading import merge_runs

    a = RunDir(runs[0]).conditions()
    b = a.assign(computed_alone=~a.computed_alone.astype(bool))
    merged, _ = merge_runs([a, b], [None, None], ["one", "two"])
    assert len(merged) == len(a)


def test_pass35_an_interval_the_runs_cannot_give_is_not_priced(tmp_path):
    """#182-#184 (silent): every value 0, no interval, yet "3 x 3 | 0": the design already run."""
    from harness.analysis.claims import seed_claims, without_mention_controls
    from harness.runs.design_cost import deciding_costs

    run = sweep(tmp_path / "r", *THREE)
    conditions, attention, _ = without_mention_controls(RunDir(run).conditions(), RunDir(run).table(RunDir.ATTENTION))
    table = seed_claims(conditions, attention, None, n_resamples=50)
    table = table.assign(verdict="not determined", ci_low=float("nan"))
    costs = deciding_costs([run], [RunDir(run).conditions()], table, conditions, attention)
    assert len(costs) == len(table) and costs.n_prompts.isna().all() and costs.minutes.isna().all()
    assert costs.note.str.startswith("no interval on these runs").all()


def test_pass35_plan_kept_refuses_a_damaged_status_and_says_when_every_prompt_is_slow(runs, tmp_path):
    """#106/#112 (silent, traceback): an edited or truncated status.json was read or crashed; #109: "(nanx)"."""
    run = tmp_path / "damaged"
    shutil.copytree(runs[0], run)
    (run / "status.json").write_text("{")
    script = str(ROOT / "benchmarks" / "plan_kept.py")
    done = subprocess.run([sys.executable, script, str(run), "--seconds-a", "1", "--seconds-bc", "1"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "status.json is unreadable" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, script, str(runs[0]), "--seconds-a", "1e-9", "--seconds-bc", "1e-9"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "nan" not in done.stdout and "the other 0\n" in done.stdout, done.stdout


def test_pass35_a_failed_condition_leaves_its_pair_out_of_claim_3(runs, tmp_path):
    """#13/#15 (silent): the failed condition's prompt and prefix pooled length 8 alone where every
    other pair pooled 8 and 24, moving C - B by 0.0099 on a measure whose every prompt moved < 0.0001.
    Claim 3 of the failed run is now claim 3 of the whole run without that pair."""
    from harness.analysis.claims import seed_claims
    from harness.runs.runner import SweepFailed

    failed = tmp_path / "failed"
    with pytest.raises(SweepFailed):
        sweep(failed, *THREE, "debug.fail_conditions=[story-02/news-harbour/24]")
    whole = RunDir(runs[0]).conditions()
    without = whole[~((whole.prompt_id.astype(str) == "story-02") & (whole.prefix_id.astype(str) == "news-harbour"))]
    got = seed_claims(RunDir(failed).conditions(), None, None, n_resamples=50)
    want = seed_claims(without, None, None, n_resamples=50)
    claim3 = ["claim", "measure", "model", "placement"]
    merged = got[got.claim == 3].merge(want[want.claim == 3], on=claim3, suffixes=("", "_want"))
    assert len(merged) == len(got[got.claim == 3]) > 0
    assert (merged.estimate - merged.estimate_want).abs().max() < 1e-12
