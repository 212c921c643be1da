"""``harness plan`` end to end on a finished run: what it costs a design by is the run's own
measured seconds, the power it plans with at the run's design is what ``harness claims`` prints,
and what it writes is a page, the grid and the chosen overrides."""

import json

import pandas as pd
import pytest

from harness.cli import main
from harness.numbers import num
from harness.runs.design_cost import RunCost, run_cost
from harness.runs.plan import plan
from harness.runs.rundir import RunDir
from tests.support import FAST, sweep


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    """A tiny-model run with 3 prompts: the fewest a crossed variance (and so a power) needs."""
    overrides = [o for o in FAST if not o.startswith("prompts.limit=")] + ["prompts.limit=3"]
    return sweep(tmp_path_factory.mktemp("pilot"), *overrides)


def test_the_cost_of_a_design_is_the_runs_own_seconds(tiny_run):
    conditions = RunDir(tiny_run).conditions()
    cost = run_cost(tiny_run, conditions)
    status = json.loads((tiny_run / "status.json").read_text())
    scale = max(status["seconds"]["conditions"] / conditions.seconds.sum(), 1.0)
    bc = conditions[conditions.group != "A"]
    assert cost.seconds_bc == pytest.approx(bc.seconds.mean() * scale)
    assert cost.seconds_a == pytest.approx(conditions[conditions.group == "A"].seconds.mean() * scale)
    n_prompts, n_prefixes = conditions.prompt_id.nunique(), bc.prefix_id.nunique()
    assert cost.per_prefix * n_prompts * n_prefixes == len(bc)
    # the pilot's own design, every prefix kept: what is still to spend is every phase but the conditions, as the
    # pilot's status measured them (the tables and noise floor priced per row come back to their own seconds)
    per_group = n_prefixes // 2
    assert cost.conditions(n_prompts, per_group) == len(conditions)
    assert cost.noise_rows(n_prompts, per_group) == len(pd.read_parquet(tiny_run / "noise.parquet")) > 0
    total, still = cost.seconds(n_prompts, per_group, kept=n_prefixes)
    others = sum(v for k, v in status["seconds"].items() if k != "conditions")
    assert cost.seconds_per_table_row > 0 and cost.seconds_per_noise_row > 0
    assert still == pytest.approx(others)
    assert total == pytest.approx(others + n_prompts * cost.seconds_a + len(bc) * cost.seconds_bc)


def test_a_design_reuses_the_first_prompts_and_the_prefixes_drawn_again():
    cost = RunCost(run=None, seconds_a=1.0, seconds_bc=0.5, seconds_fixed=10.0, per_prefix=4, pilot_prompts=3, pilot_per_group=3,
                   pilot_prefixes=frozenset(), prompts_available=24, prefixes_available=42, bank=(), seed=0)
    total, still = cost.seconds(8, 6, kept=9)
    assert total == 10 + 8 * (1 + 2 * 6 * 4 * 0.5)
    assert still == total - 3 * (1 + 9 * 4 * 0.5)


def test_a_designs_tables_grow_with_its_conditions_and_its_noise_floor_with_its_sample():
    """By hand: 8 prompts x 6 prefixes per group x 4 settings is 8 A + 384 B/C conditions; 5% of the
    384 is 19 noise rows (above the floor of 8, below the cap of 40)."""
    cost = RunCost(run=None, seconds_a=1.0, seconds_bc=0.5, seconds_fixed=10.0, per_prefix=4, pilot_prompts=3,
                   pilot_per_group=3, pilot_prefixes=frozenset(), prompts_available=24, prefixes_available=42, bank=(),
                   seed=0, seconds_per_table_row=0.01, seconds_per_noise_row=2.0, noise=(0.05, 8, 40))
    assert cost.conditions(8, 6) == 392 and cost.noise_rows(8, 6) == 19
    total, still = cost.seconds(8, 6, kept=9)
    assert total == pytest.approx(10 + 8 * (1 + 2 * 6 * 4 * 0.5) + 392 * 0.01 + 19 * 2.0)
    assert still == pytest.approx(total - 3 * (1 + 9 * 4 * 0.5))  # the whole design's tables and floor: paid again
    assert cost.noise_rows(200, 20) == 40  # the cap


def test_plan_on_a_run_writes_its_page_grid_and_overrides(pilot, tmp_path, capsys):
    out = tmp_path / "plan"
    assert main(["plan", str(pilot), "--out", str(out), "--target", "0.5"]) == 0
    printed = capsys.readouterr().out
    page = (out / "plan.md").read_text()
    body, stamp = page.rsplit("<!-- written by harness", 1)  # the file ends with its stamp (edits are kept)
    assert body in printed and "## Cost, measured on the pilot" in body and "sha256 of the text above" in stamp
    grid = pd.read_parquet(out / "plan_grid.parquet")
    found = plan([pilot], target=0.5)
    assert len(grid) == len(found.grid) and (grid.seconds.values == found.grid.seconds.values).all()
    overrides = (out / "overrides.txt").read_text().strip()
    assert overrides == found.overrides
    if found.chosen is not None:
        p, n = int(found.chosen.n_prompts), int(found.chosen.n_prefixes)
        assert overrides == f"prompts.limit={p} prefixes.per_group={n}"
        assert (found.designs.dropna(subset=["n_prompts"]).n_prompts >= 1).all()
    # the power it plans with at the run's own design is the one the claims page prints
    assert main(["claims", str(pilot), "--out", str(tmp_path / "claims"), "--resamples", "100"]) == 0
    printed = pd.read_parquet(tmp_path / "claims" / "claims.parquet")
    claim3 = found.tests[found.tests.claim == 3]
    assert not claim3.empty
    for t in claim3.itertuples():
        row = printed[(printed.claim == 3) & (printed.measure == t.measure)]
        assert t.power_pilot == pytest.approx(float(row.power.iloc[0]), rel=1e-9, nan_ok=True)


def test_plan_refuses_what_is_not_a_finished_run_in_one_line(tmp_path, capsys):
    assert main(["plan", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "conditions.parquet" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:
        main(["plan", str(tmp_path), "--target", "1.5"])
    assert exc.value.code == 2


def test_a_design_none_reaches_keeps_its_reason_and_prints_no_nan(pilot, capsys):
    """A scope no design reaches within the budget is a row with its reason (it printed nan and dropped it)."""
    assert main(["plan", str(pilot), "--budget-minutes", "0.0001"]) == 0
    page = capsys.readouterr().out
    rows = [line for line in page.splitlines() if line.startswith("| every ")]
    unmet = [row for row in rows if "| | | | |" in row]
    assert unmet and all(row.rstrip("| ").strip() and "decides with a chance of" in row for row in unmet), rows
    # the attention tests are met by the pilot itself, at nothing to spend (pass 16, #21)
    assert all(row.split("|")[4].strip() == "0" for row in rows if row not in unmet)
    assert "nan" not in page


def test_a_plan_of_other_settings_is_not_written_over_its_out(pilot, tmp_path):
    """Pass 25 #224 (lost): `plan --target 0.5 --out P` over a target-0.8 plan replaced it without a
    word; the same settings write over their own output as before."""
    from harness.errors import HarnessError
    from harness.runs.outdir import claim_out

    out = tmp_path / "plan"
    assert main(["plan", str(pilot), "--out", str(out)]) == 0
    page = (out / "plan.md").read_text()
    assert main(["plan", str(pilot), "--out", str(out), "--target", "0.5"]) == 2
    assert (out / "plan.md").read_text() == page
    assert main(["plan", str(pilot), "--out", str(out)]) == 0
    with pytest.raises(HarnessError, match=r"made with other settings \(target 0.8 there, 0.5 here\)"):
        claim_out(out, "plan", [pilot], {"target": 0.5, "delta": {}, "effect_sds": None, "budget_minutes": None})


def test_plan_measure_plans_the_reports_c_minus_b_rows_and_refuses_what_it_cannot(pilot, tmp_path, capsys):
    """Issue 65, item 3: `harness plan --measure M --delta M=D` plans the report's C - B on M (one test
    per prefix length here), not the claims; a rate the report does not compare, an unknown measure or a measure without a Δ is
    refused in one line; a plan of other measures is not written over another's --out."""
    out = tmp_path / "plan"
    assert main(["plan", str(pilot), "--measure", "output_kl", "--delta", "output_kl=0.2", "--target", "0.5",
                 "--out", str(out)]) == 0
    page = capsys.readouterr().out
    found = plan([pilot], target=0.5, deltas={"output_kl": 0.2}, measures=["output_kl"])
    lengths = sorted(RunDir(pilot).conditions().query("group != 'A'").prefix_len.unique())
    assert sorted(found.tests.prefix_len) == lengths and set(found.tests.measure) == {"output_kl"}
    assert "report's C - B test on output_kl" in page and "| test | measure | model | placement |" in page
    assert "prefix length" in page and "claim 1" not in page
    assert page.count("| C - B | output_kl |") == len(lengths)
    assert list(found.designs.scope) == ["all"]
    # the same page, another measure: refused over this --out, nothing written
    assert main(["plan", str(pilot), "--measure", "norm_edit_distance", "--target", "0.5", "--out", str(out)]) == 2
    assert "made with other settings" in capsys.readouterr().err
    assert main(["plan", str(pilot), "--target", "0.5", "--out", str(out)]) == 2
    for args, said in ((["--measure", "exact_match"], "is not a rate the report compares between C and B"),
                       (["--measure", "output_k"], "did you mean 'output_kl'"),
                       (["--measure", "edit_distance"], "--delta edit_distance=VALUE")):
        with pytest.raises(SystemExit) as exc:
            main(["plan", str(pilot), *args])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err
    # a measure without a default Δ plans at the one given
    assert main(["plan", str(pilot), "--measure", "edit_distance", "--delta", "edit_distance=3"]) == 0
    assert "edit_distance 3" in capsys.readouterr().out


def test_plan_measure_on_too_small_a_pilot_says_what_it_needs(tiny_run, capsys):
    """Two prompts give no prefix-level SD to plan a C - B test with: one line naming the measure and
    the crossing a pilot needs, not a page of empty rows."""
    assert main(["plan", str(tiny_run), "--measure", "output_kl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no C - B test could be planned from these runs: output_kl's prefix-level SD")
    assert "at least 3 prompts" in err and err.count("\n") == 1, err


def test_plan_states_its_assurance_and_refuses_one_outside_its_range(pilot, capsys):
    """Issue 65, item 3: the plan chooses by the power at an assurance (default 0.85, said on the page);
    at 0.5 it is the point power; a value below 0.5 or at 1 is refused in one line."""
    assert main(["plan", str(pilot), "--target", "0.5"]) == 0
    assert "at an assurance of 0.85" in capsys.readouterr().out  # harness.analysis.power.ASSURANCE
    assert main(["plan", str(pilot), "--target", "0.5", "--assurance", "0.5"]) == 0
    assert "(`--assurance 0.5`, the point power)" in capsys.readouterr().out
    assured, point = (plan([pilot], target=0.5, assurance=a) for a in (0.9, 0.5))
    labels = [c for c in point.grid.columns if c.startswith("claim ")]
    assert labels and (assured.grid[labels].values <= point.grid[labels].values + 1e-12).all()
    for bad in ("0.4", "1", "nan"):
        with pytest.raises(SystemExit) as exc:
            main(["plan", str(pilot), "--assurance", bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--assurance" in err and "Traceback" not in err


def test_plan_for_decided_is_the_default_and_power_the_old_target(pilot, capsys):
    """Issue 65, item 3: by default the plan targets the chance that every test ends decided at its Δ
    (said on the page, with each test's chance at the chosen design); --plan-for power plans each
    test's power as before. The decided plan's grid holds the joint chance, by hand."""
    assert main(["plan", str(pilot), "--target", "0.3"]) == 0
    page = capsys.readouterr().out
    assert "a chance of at least 0.3 that every test ends decided" in page and "chance decided at the chosen design (range)" in page
    assert main(["plan", str(pilot), "--target", "0.3", "--plan-for", "power"]) == 0
    page = capsys.readouterr().out
    assert "Target: power 0.3 against" in page and "chance decided" not in page
    found = plan([pilot], target=0.3)
    labels = [c for c in found.grid.columns if c.startswith("claim ")]
    by_hand = (1 - (1 - found.grid[labels]).sum(axis=1)).clip(lower=0)
    assert found.grid.decided_all.tolist() == pytest.approx(by_hand.tolist())
    if found.chosen is not None:
        scope = "attention" if found.why_chosen.endswith("every attention test") else "all"
        assert found.chosen[f"decided_{scope}"] >= 0.3 or "no design" in found.why_chosen


def test_a_plan_never_drops_data_the_pilot_has(pilot):
    """Found running `make study`'s re-planning on the tiny model: the cheapest design to still spend on
    was 5 prompts x 3 prefixes per group after a pilot of 24, and extending to it dropped 21 prefixes'
    results from the tables. Designs start at the pilot's own prefixes per group."""
    conditions = RunDir(pilot).conditions()
    per_group = int(conditions[conditions.group != "A"].groupby("group").prefix_id.nunique().min())
    found = plan([pilot], target=0.5)
    assert per_group > 3 and found.grid.n_prefixes.min() == per_group  # not the 3 a decision needs at least
    assert found.grid.n_prompts.min() == conditions.prompt_id.nunique()


def test_claims_page_says_what_an_undecided_test_would_take_and_prices_it(tmp_path_factory, tmp_path):
    """A 3-prompt pilot with 4 prefixes per group from the default bank, claim 3 judged at Δ 0.2 of
    the tokens: not determined, and no number of prompts decides it at 4 prefixes per group, so the
    page names the fewest prompts at the bank's most prefixes, priced at the run's own seconds."""
    from harness.analysis.claims import without_mention_controls
    from harness.analysis.planning import claim_tests
    from harness.runs.design_cost import DECIDING_LIMIT

    overrides = [o for o in FAST if not o.startswith(("prompts.limit=", "prefixes.path="))]
    run = sweep(tmp_path_factory.mktemp("pilot_bank"), *overrides, "prompts.limit=3", "prefixes.per_group=4")
    out = tmp_path / "claims"
    assert main(["claims", str(run), "--out", str(out), "--resamples", "100",
                 "--delta", "norm_edit_distance=0.2"]) == 0
    claims = pd.read_parquet(out / "claims.parquet")
    deciding = pd.read_parquet(out / "deciding.parquet")
    undecided = claims[claims.verdict == "not determined"]
    assert len(deciding) == len(undecided) > 0
    row = deciding[(deciding.claim == 3) & (deciding.measure == "norm_edit_distance")].iloc[0]
    conditions, attention, _ = without_mention_controls(RunDir(run).conditions(), None)
    test = next(t for t in claim_tests(conditions, None, deltas={"norm_edit_distance": 0.2}, assurance=0.85)
                if t.claim == 3 and t.measure == "norm_edit_distance")
    cost = run_cost(run, RunDir(run).conditions())
    n, per_group = int(row.n_prompts), int(row.n_prefixes)
    assert per_group == cost.prefixes_available  # 4 per group never gets there ...
    assert test.planned(DECIDING_LIMIT, 4, "decided") < 0.8
    # ... and the design is the fewest prompts at which the chance of a decision reaches 0.8
    assert test.planned(n, per_group, "decided") >= 0.8 > test.planned(n - 1, per_group, "decided")
    assert row.minutes == pytest.approx(cost.seconds(n, per_group, kept=0)[0] / 60)
    page = (out / "claims.md").read_text()
    assert "## What the undecided tests would take" in page and f"| {n:,} x {per_group} | {num(row.minutes)} |" in page


def test_where_prompts_never_decide_a_test_the_page_asks_for_prefixes_at_every_prompt(pilot, tmp_path):
    """The small prefix file holds 5 prefixes per group: at Δ 0.2 no number of prompts decides claim 3
    there, so the design is every prompt of the set with the fewest prefixes per group that do, and
    the page says how many prefixes must be written."""
    from harness.analysis.claims import without_mention_controls
    from harness.analysis.planning import claim_tests

    out = tmp_path / "claims"
    assert main(["claims", str(pilot), "--out", str(out), "--resamples", "100",
                 "--delta", "norm_edit_distance=0.2"]) == 0
    deciding = pd.read_parquet(out / "deciding.parquet")
    row = deciding[(deciding.claim == 3) & (deciding.measure == "norm_edit_distance")].iloc[0]
    cost = run_cost(pilot, RunDir(pilot).conditions())
    conditions, _, _ = without_mention_controls(RunDir(pilot).conditions(), None)
    test = next(t for t in claim_tests(conditions, None, deltas={"norm_edit_distance": 0.2}, assurance=0.85)
                if t.claim == 3 and t.measure == "norm_edit_distance")
    n, k = int(row.n_prompts), int(row.n_prefixes)
    assert n == cost.prompts_available and k > cost.prefixes_available
    assert test.planned(n, k, "decided") >= 0.8 > test.planned(n, k - 1, "decided")
    assert f"{k - cost.prefixes_available} more prefixes per group must be written" in row.note
    assert row.minutes == pytest.approx(cost.seconds(n, k, kept=0)[0] / 60)
