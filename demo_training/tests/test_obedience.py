"""The trainer measures obeying with the harness's own engine: what its evaluation records is what
a sweep records for the same conditions."""

from __future__ import annotations

import pandas as pd

import harness as H
from demo_training import obedience
from harness.inputs.texts import load_prefixes, load_prompts, select_prefixes


def test_the_evaluation_records_what_a_sweep_records(tmp_path):
    """The directive sweep of `make demo`, cut to 2 openings x 2 triples at 32 tokens, run by the
    harness (no attention capture, as the trainer measures) and by the trainer's evaluation on the
    same model: every condition has the same continuation, its hit is the sweep's ``target_hit``
    (an asked word written, or a forbidden one: group F, where the sweep's ``obeyed`` is its
    opposite), and A's hit on a target is the sweep's ``target_hit_a`` for that target."""
    overrides = ["experiment=demo-directives", "model=demo", "prompts.limit=2", "prefixes.per_group=2",
                 "prefix.lengths=[32]", "analysis.attention=false", "analysis.noise_floor=false", "batch_size=64",
                 "draw_figures=false"]
    cfg = H.compose(overrides)
    run_dir = H.run(cfg, tmp_path / "run", overrides=overrides, progress=False)
    swept = pd.read_parquet(run_dir / "conditions.parquet")

    from harness.model.loading import load_model

    loaded = load_model("demo", device="cpu")
    prompts = load_prompts(cfg.prompts.path, cfg.prompts.limit)
    prefixes = select_prefixes(load_prefixes(cfg.prefixes.path), cfg.prefixes.per_group, cfg.seed)
    rows = obedience.evaluate_obedience(loaded.model, loaded.tokenizer, prompts, prefixes, (32,))["rows"]

    measured = {(r["prompt_id"], r["prefix_id"]): r for r in rows if r["group"] != "A"}
    base = {(r["prompt_id"], r["target"]): r for r in rows if r["group"] == "A"}
    assert len(measured) == 2 * 6 and {r["group"] for r in measured.values()} == {"B", "C", "F"}
    conditions = swept[swept.group != "A"]
    assert len(conditions) == len(measured)
    for row in conditions.itertuples():
        mine = measured[(row.prompt_id, row.prefix_id)]
        assert mine["continuation"] == row.continuation_text, row.prefix_id
        assert mine["hit"] == row.target_hit and mine["target"] == row.target
        if row.group == "C":
            forbids = row.check == "absent"
            assert mine["group"] == ("F" if forbids else "C")
            assert row.obeyed == (not mine["hit"] if forbids else mine["hit"])
        assert base[(row.prompt_id, row.target)]["hit"] == row.target_hit_a
    for row in swept[swept.group == "A"].itertuples():
        assert all(r["continuation"] == row.continuation_text for (p, _), r in base.items() if p == row.prompt_id)
