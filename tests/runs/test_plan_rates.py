"""``harness plan --measure target_hit``: a rate's C - B planned end to end on a run of the shipped
demo model (it obeys directives, so C hits and B rarely does), and the refusals around it."""

import json

import pandas as pd
import pytest

from harness.cli import main
from tests.support import ROOT, one_line_error, sweep, write_jsonl

DEMO = ["experiment=demo-directives", "prompts.limit=3", "prefix.lengths=[32]", "prefixes.per_group=6",
        "decode.max_new_tokens=12", "draw_figures=false", "analysis.noise_floor=false"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo triples without their prohibitions (a C that asks for the word and a C that forbids it
    is no C - B to plan: the report leaves it out), so each pair is a directive and a mention."""
    root = tmp_path_factory.mktemp("rates")
    rows = [json.loads(line) for line in (ROOT / "harness" / "data" / "prefixes_stories_directives.jsonl")
            .read_text().splitlines() if line.strip()]
    asked = write_jsonl(root / "asked.jsonl", [r for r in rows if r.get("check") != "absent"])
    run = sweep(root / "demo", *DEMO, f"prefixes.path={asked}")
    hits = pd.read_parquet(run / "conditions.parquet").groupby("group").target_hit.sum()
    assert hits["C"] > 0, "the fixture needs hits to plan from"
    return run


def test_a_rate_is_planned_with_its_simulated_power(demo_run, tmp_path):
    from harness.runs.plan import plan

    out = tmp_path / "plan"
    assert main(["plan", str(demo_run), "--measure", "target_hit", "--delta", "target_hit=0.3", "--out", str(out)]) == 0
    page = (out / "plan.md").read_text()
    assert "| C - B | target_hit | demo |" in page and "simulated" in page
    found = plan([demo_run], measures=["target_hit"], deltas={"target_hit": 0.3})
    row = found.tests.iloc[0]
    assert row.measure == "target_hit" and 0 <= row.power_pilot <= 1 and 0 <= row.decided_chosen <= 1
    grid = pd.read_parquet(out / "plan_grid.parquet")
    column = "C - B, target_hit, demo, raw, none, 32"
    assert column in grid and grid[column].between(0, 1).all()
    # more prompts and prefixes never plan a much smaller chance (seeded simulation: within its error)
    assert grid.sort_values(["n_prompts", "n_prefixes"])[column].iloc[-1] >= grid[column].iloc[0] - 0.05


@pytest.mark.parametrize("argv, said", [
    (["--measure", "obeyed"], "measured in group C alone"),
    (["--measure", "target_hit_a"], "not a rate the report compares between C and B"),
    (["--measure", "target_hit", "--effect-sds", "1"], "a rate (target_hit) has none of"),
])
def test_rates_a_plan_cannot_plan_are_refused_in_one_line(demo_run, argv, said, capsys):
    if "--effect-sds" in argv:
        assert said in one_line_error(capsys, ["plan", str(demo_run), *argv])
        return
    with pytest.raises(SystemExit) as exit_:  # argparse's own refusal of the option's value
        main(["plan", str(demo_run), *argv])
    assert exit_.value.code == 2 and said in capsys.readouterr().err
