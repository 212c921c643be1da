"""The files a run says about itself check themselves (issue #48): ``manifest.json``, ``status.json``,
``run_fingerprint.json`` and ``.hydra/`` carry a checksum of their contents, so a changed value is
named as damage by every reader instead of being read, and a run without its manifest is refused
(``--trust-damaged`` reads anyway, with a warning)."""

import json
import shutil

import pandas as pd
import pytest

import harness as H
from harness.cli import main
from harness.errors import HarnessError
from harness.runs.rundir import RunDir
from tests.support import one_line_error, sweep


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy)
    return copy


def edit_json(path, change) -> None:
    """Change a value of a JSON file the way an editor would, keeping everything else (the checksum too)."""
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value, indent=2) + "\n")


def readers(run, tmp_path):
    return [["figures", str(run)], ["claims", str(run), "--out", str(tmp_path / "claims")],
            ["collect", str(run), "--out", str(tmp_path / "collected")]]


# -- the seal itself -------------------------------------------------------------------------------

def test_a_seal_opens_on_its_own_contents_only():
    from harness.io import BrokenSeal, open_json_seal, open_text_seal, seal_json, seal_text

    body = {"seed": 0, "x": [1.5, None, "é"], "nested": {"b": 1, "a": float("nan")}}
    sealed = seal_json(body)
    opened, was_sealed = open_json_seal(json.loads(json.dumps(sealed)))
    assert was_sealed and opened.keys() == body.keys() and opened["seed"] == 0
    assert open_json_seal({"seed": 0}) == ({"seed": 0}, False)  # written before seals: read as it is
    for broken in ({**sealed, "seed": 1}, {k: v for k, v in sealed.items() if k != "checksum"},
                   {k: v for k, v in sealed.items() if k != "checksum_of"}, {**sealed, "checksum": "0" * 64}):
        with pytest.raises(BrokenSeal):
            open_json_seal(broken)
    text = seal_text("- a=1\n- b=2\n")
    assert open_text_seal(text) == ("- a=1\n- b=2\n", True)
    assert open_text_seal("- a=1\n") == ("- a=1\n", False)
    for broken in (text.replace("a=1", "a=2"), text[1:], text.replace("sha256:", "sha255:")):
        with pytest.raises(BrokenSeal):
            open_text_seal(broken)


# -- manifest.json -------------------------------------------------------------------------------

@pytest.mark.parametrize("change", [
    lambda m: m.update(seed=1),
    lambda m: m["model"].update(dtype="bfloat16"),
    lambda m: m["config"]["decode"].update(max_new_tokens=7),
    lambda m: m["model"].update(resolved_revision="0" * 64),
    lambda m: m.update(tables={("conditions.parquaf" if k == "conditions.parquet" else k): v
                               for k, v in m["tables"].items()}),
], ids=["seed", "dtype", "max_new_tokens", "resolved_revision", "a table's name"])
def test_a_changed_manifest_is_refused_by_every_reader(run_copy, tmp_path, capsys, change):
    edit_json(run_copy / "manifest.json", change)
    with pytest.raises(HarnessError, match="manifest.json is damaged"):
        H.load_run(run_copy)
    for argv in readers(run_copy, tmp_path):
        assert "manifest.json is damaged" in one_line_error(capsys, argv), argv
    with pytest.warns(UserWarning, match="manifest.json is damaged"):
        tables = H.load_run(run_copy, trust_damaged=True)  # read anyway, with a warning
    assert len(tables.conditions) == len(pd.read_parquet(run_copy / "conditions.parquet"))


def test_a_run_without_its_manifest_is_refused_by_every_reader(run_copy, tmp_path, capsys):
    (run_copy / "manifest.json").unlink()
    with pytest.raises(HarnessError, match="no manifest.json"):
        H.load_run(run_copy)
    for argv in readers(run_copy, tmp_path):
        assert "no manifest.json" in one_line_error(capsys, argv), argv
    with pytest.warns(UserWarning, match="no manifest.json"):
        assert main(["figures", str(run_copy), "--trust-damaged"]) == 0


def test_readers_see_the_contents_and_a_table_the_manifest_does_not_list_is_refused(run_copy):
    manifest = RunDir(run_copy).manifest()
    assert "checksum" not in manifest and "checksum_of" not in manifest  # the seal is not part of the contents
    assert "checksum" in json.loads((run_copy / "manifest.json").read_text())
    from harness.io import seal_json

    manifest["tables"].pop("noise.parquet")  # a manifest, sealed, that does not know the noise table
    (run_copy / "manifest.json").write_text(json.dumps(seal_json(manifest)))
    with pytest.raises(HarnessError, match="noise.parquet is not a table this run wrote"):
        H.load_run(run_copy)


def test_resume_rewrites_a_missing_manifest(run_copy):
    (run_copy / "manifest.json").unlink()
    sweep(run_copy, *RunDir(run_copy).overrides())
    assert H.load_run(run_copy).manifest["seed"] == 0


# -- status.json, run_fingerprint.json -----------------------------------------------------------

def test_a_changed_fingerprint_is_named_as_damage_not_as_another_configuration(run_copy):
    edit_json(run_copy / "run_fingerprint.json", lambda f: f.update(config=f["config"][::-1]))
    with pytest.raises(HarnessError, match="run_fingerprint.json is damaged") as refused:
        sweep(run_copy, *RunDir(run_copy).overrides())
    assert "different configuration" not in str(refused.value)


def test_a_changed_status_is_named_and_rewritten_by_resume(run_copy, tmp_path, capsys, caplog):
    edit_json(run_copy / "status.json", lambda s: s.update(status="failed"))
    assert "status.json is damaged" in RunDir(run_copy).problem()
    assert main(["collect", str(run_copy), "--out", str(tmp_path / "out")]) == 1
    assert "status.json is damaged" in capsys.readouterr().out
    sweep(run_copy, *RunDir(run_copy).overrides())
    assert any("status.json is damaged" in r.message for r in caplog.records)
    assert RunDir(run_copy).status()["status"] == "complete"


# -- .hydra/ ---------------------------------------------------------------------------------------

def test_a_damaged_overrides_file_is_named_as_damage(run_copy, capsys):
    path = run_copy / ".hydra" / "overrides.yaml"
    text = path.read_text()
    assert "prompts.limit=2" in text
    path.write_text(text.replace("prompts.limit=2", "prompts.limiu=2"))  # valid YAML, a misspelt key
    error = one_line_error(capsys, ["resume", str(run_copy)])
    assert "overrides.yaml is damaged" in error and "+prompts" not in error


def test_non_utf8_bytes_in_the_overrides_are_one_line(run_copy, capsys):
    path = run_copy / ".hydra" / "overrides.yaml"
    path.write_bytes(path.read_bytes().replace(b"model=tiny", b"model=t\xffny"))
    assert "overrides.yaml is damaged" in one_line_error(capsys, ["resume", str(run_copy)])


def test_overrides_of_an_earlier_version_without_a_checksum_still_resume(run_copy):
    path = run_copy / ".hydra" / "overrides.yaml"
    path.write_text(path.read_text().split("\n", 1)[1])  # no seal line: as the harness wrote it before
    assert "model=tiny" in RunDir(run_copy).overrides()
    path.write_text("just a string\n")
    with pytest.raises(HarnessError, match="overrides.yaml is damaged"):
        RunDir(run_copy).overrides()


def test_resuming_a_run_whose_command_now_composes_another_design_says_what_changes(run_copy, capsys):
    """A run made when a default was different (here: prefixes.per_group) resumes, by its own saved
    command, into another design: that is said, with the way to keep the old one, and needs a flag."""
    from harness.io import open_text_seal, write_sealed_text

    config = run_copy / ".hydra" / "config.yaml"
    text, _ = open_text_seal(config.read_text())
    saved = RunDir(run_copy).saved_config()
    assert saved["seed"] == 0 and "seed=" not in " ".join(RunDir(run_copy).overrides())
    write_sealed_text(text.replace("seed: 0", "seed: 3"), config)  # as if seed's default had been 3 then
    before = {p: p.read_bytes() for p in run_copy.rglob("*") if p.is_file()}
    error = one_line_error(capsys, ["resume", str(run_copy)])
    assert "would change its design" in error and "seed: 3 -> 0" in error and "--accept-changes" in error
    assert before == {p: p.read_bytes() for p in run_copy.rglob("*") if p.is_file()}  # nothing written
    # the old value given explicitly keeps the design (and is no change of the command's own)
    assert "seed" not in " ".join(_changes(run_copy, ["seed=3"]))
    assert main(["resume", str(run_copy), "--accept-changes", "on_existing=resume"]) == 0


def _changes(run, extra):
    from harness.cli.hydra_apps import _design_changes

    return _design_changes(RunDir(run), [o for o in RunDir(run).overrides() if not o.startswith("hydra.")], extra)
