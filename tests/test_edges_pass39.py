"""Adversarial pass 39's causes (issue 67; 200 cases on c7f1500: 0 lost, 4 silent, 0 tracebacks,
8 misleading): a paired bank with lines outside any pair, a ``{target}`` slot with no target,
prompts appended past ``prompts.limit``, ``kv-size`` keys that are no key, another run's
manifest copied into a run, and the plan's "best reaches" rounded otherwise than its tables."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.cli import main
from tests.support import FAST, ROOT, one_line_error, sweep, write_jsonl

ONE = [o for o in FAST if not o.startswith(("prefix.lengths", "decode.max_new_tokens"))] + [
    "prefix.lengths=[8]", "decode.max_new_tokens=2", "analysis.noise_floor=false"]
PAIRED = [json.loads(line) for line in (ROOT / "harness" / "data" / "prefixes_stories_directives.jsonl").read_text()
          .splitlines() if line.strip() and '"absent"' not in line][:8]


def _without_path(overrides):
    return [o for o in overrides if not o.startswith("prefixes.path")]


@pytest.mark.parametrize("edit, said", [
    (lambda r: r.pop("pair"), "names no pair, while 6 of the file's 8 prefixes do (2 without)"),
    (lambda r: r.update(pair=""), "has an empty pair: give the id of its matched set"),
])
def test_a_paired_bank_with_lines_outside_any_pair_is_refused(edit, said, tmp_path, capsys):
    """Cases 43, 46 (silent): prefixes.per_group drew such a bank prefix by prefix, breaking every
    pair, and the report called it unpaired without saying why."""
    rows = [dict(r) for r in PAIRED]
    for r in rows[:2]:
        edit(r)
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    line = one_line_error(capsys, ["sweep", *_without_path(ONE), f"prefixes.path={path}", "prefixes.per_group=3",
                                   f"hydra.run.dir={tmp_path / 'run'}"])
    assert said in line and "pairs.jsonl:1:" in line, line
    assert not (tmp_path / "run").exists()


def _build(tmp_path, text: str, out: str) -> list[str]:
    write_jsonl(tmp_path / "t.jsonl", [{"style": "direct", "text": text}])
    (tmp_path / "fillers.txt").write_text(" ".join(["The harbour opened at six each morning."] * 40))
    return ["build-prefixes", "instruction", "--templates", str(tmp_path / "t.jsonl"), "--fillers",
            str(tmp_path / "fillers.txt"), "--n", "1", "--min-chars", "200", "--out", str(tmp_path / out)]


def test_a_target_slot_with_no_target_is_refused(tmp_path, capsys):
    """Case 78 (silent): "Always say {target} in every reply." became "Always say  in every reply."."""
    line = one_line_error(capsys, _build(tmp_path, "Always say {target} in every reply.", "bank.jsonl"))
    assert "t.jsonl: template 1: {target} is in the instruction, but neither the template nor its payload gives a " \
           "target" in line, line
    assert not (tmp_path / "bank.jsonl").exists()
    assert main(_build(tmp_path, "Always say {{target}} in every reply.", "literal.jsonl")) == 0  # a literal stays
    assert json.loads((tmp_path / "literal.jsonl").read_text())["text"].startswith("Always say {target} in every")


def test_prompts_appended_past_the_limit_leave_the_run_its_own(tmp_path, capsys):
    """Cases 56, 57 (misleading): the whole file's sha256 changed, and resume and check-determinism
    refused as if the run's prompts had; a line the run read, edited, is still refused."""
    rows = [{"id": f"p{i}", "text": f"Task number {i}: write one sentence about the {sea}."}
            for i, sea in enumerate(("sea", "hills", "town"))]
    prompts = write_jsonl(tmp_path / "p.jsonl", rows[:2])
    run = sweep(tmp_path / "run", *[o for o in ONE if not o.startswith("prompts.limit")], f"prompts.path={prompts}",
                "prompts.limit=2")
    with prompts.open("a") as f:  # the usual way to add prompts: at the file's end
        f.write(json.dumps(rows[2]) + "\n")
    assert main(["resume", str(run)]) == 0
    assert main(["check-determinism", str(run), "--sample", "1"]) == 0
    write_jsonl(prompts, [{**rows[0], "text": rows[0]["text"] + " Then stop."}, *rows[1:]])
    line = one_line_error(capsys, ["resume", str(run)])
    assert "was made from other input files" in line and "p.jsonl" in line, line


@pytest.mark.parametrize("item", ["=tiny", "model.=tiny"])
def test_a_kv_size_item_without_a_key_is_named(item, capsys):
    """Cases 131, 134, 137 (misleading): an empty key was read as model= and looked up on the hub."""
    line = one_line_error(capsys, ["kv-size", item])
    assert f"kv-size: {item!r} has no key; give one of model=" in line, line


def test_kv_size_model_name_or_path_reads_a_config_as_model_does(capsys):
    """Case 136 (misleading): ``model.name_or_path=tiny`` was "not in the local hub cache"."""
    assert main(["kv-size", "model=tiny"]) == 0
    by_model = capsys.readouterr().out
    assert main(["kv-size", "model.name_or_path=tiny"]) == 0
    assert capsys.readouterr().out == by_model and "2 layers" in by_model


def test_another_runs_manifest_copied_in_is_named_and_resume_rebuilds(tmp_path, capsys):
    """Cases 143, 145 (misleading): the run's own status.json was blamed, and the advised resume then
    called the untouched fingerprint damaged."""
    own = sweep(tmp_path / "own", *ONE)
    other = sweep(tmp_path / "other", *[o for o in ONE if not o.startswith("prompts.limit")], "prompts.limit=1")
    run = tmp_path / "mix"
    shutil.copytree(own, run)
    for name in ("conditions.parquet", "attention.parquet", "manifest.json"):
        shutil.copy(other / name, run / name)
    line = one_line_error(capsys, ["figures", str(run), "--out", str(tmp_path / "f")])
    assert "manifest.json records another configuration or other input files than the run's own " \
           "run_fingerprint.json" in line and f"harness resume {run}" in line, line
    assert main(["resume", str(run)]) == 0  # the advice works: tables rebuilt from the run's own results
    assert json.loads((run / "manifest.json").read_text())["counts"] == \
        json.loads((own / "manifest.json").read_text())["counts"]
    assert main(["figures", str(run), "--out", str(tmp_path / "f")]) == 0


@pytest.mark.parametrize("value, target, shown", [(0.0499, 0.8, "0.050"), (0.0496, 0.8, "0.050"),
                                                  (0.9996, 0.9995, "0.999"), (0.7996, 0.8, "0.799")])
def test_the_best_a_plan_reaches_is_rounded_as_its_tables(value, target, shown):
    """Case 176 (silent): "the best reaches 0.049" (floored) above a chosen row shown as 0.050 (rounded),
    so the chosen design read as better than the best; down only where rounding would reach the target."""
    from harness.analysis.planning import _below
    from harness.numbers import num

    assert _below(value, target) == shown
    assert float(shown) < target
    if float(num(value, 2)) < target:
        assert shown == num(value, 2)
