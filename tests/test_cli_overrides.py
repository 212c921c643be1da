"""Overrides a newcomer gets wrong are refused in one line that says what to write instead, before
Hydra creates anything (in-process: the check runs before any model or run directory)."""

import pytest

from harness.cli import main
from harness.config import config_keys
from tests.support import one_line_error


@pytest.mark.parametrize("override, expected", [
    ("promts.limit=2", "did you mean prompts.limit=2?"),
    ("+promts.limit=2", "did you mean prompts.limit=2?"),
    ("prefix.lenghts=[32]", "did you mean prefix.lengths=[32]?"),
    ("device=cuda", "did you mean model.device=cuda?"),
    ("model=/models/my-model", "write model.name_or_path=/models/my-model"),
    ("model=Org/Name", "write model.name_or_path=Org/Name"),
    ("prompts=/data/mine.jsonl", "write prompts.path=/data/mine.jsonl"),
    ("model=smollm2-135m", "did you mean model=smollm2-135m-instruct?"),
])
def test_a_mistaken_override_is_one_line_that_says_what_to_write(override, expected, tmp_path, capsys):
    run = tmp_path / "run"
    error = one_line_error(capsys, ["sweep", override, f"hydra.run.dir={run}"])
    assert expected in error and "+" not in error.split("did you mean")[-1]
    assert not run.exists()  # nothing was created


def test_every_schema_key_and_shipped_group_option_passes_the_check(tmp_path, capsys):
    # the check refuses nothing valid: --cfg job composes without running anything
    keys = [k for k in config_keys() if k.count(".") >= 1][:5]
    assert main(["sweep", "model=tiny", "experiment=quick", "model.device=cpu", "--cfg", "job"]) == 0
    out = capsys.readouterr().out
    assert "name_or_path" in out and all(k.rsplit(".", 1)[-1] in out for k in keys)


def test_locate_help_works(capsys):
    assert main(["locate", "--help"]) == 0
    assert "locate" in capsys.readouterr().out


def test_sweep_help_leads_with_the_common_overrides(capsys):
    assert main(["sweep", "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "Common overrides:" and any("model.name_or_path=ORG/NAME" in line for line in lines[:8])
    assert any(line.startswith("model: ") and "smollm2-135m-instruct-q4_1" in line for line in lines)
    assert len(lines) < 40
